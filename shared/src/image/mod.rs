//! Images: the record, list filters and JSON rendering. The upload pipeline lives in the
//! submodules.

use serde_json::{json, Map, Value};

use crate::clock::format_timestamp;

#[cfg(feature = "images")]
pub mod fetch;
pub mod handlers;
#[cfg(feature = "images")]
pub mod pipeline;
#[cfg(feature = "images")]
pub mod upload;
use crate::store::scope::{all_scopes, scope_name, Term};

/// The variants every upload gets, longest side in pixels, largest first.
pub const VARIANTS: [(&str, u32); 5] = [
    ("big", 2048),
    ("large", 1024),
    ("medium", 640),
    ("small", 320),
    ("thumbnail", 150),
];

#[derive(Debug, Clone, PartialEq)]
pub struct Image {
    pub id: i64,
    pub account_id: i64,
    /// Path of the original relative to the frontend host, e.g. `img/upload/c1_26.jpg`.
    pub path: String,
    pub mimetype: String,
    pub width: u32,
    pub height: u32,
    pub site_id: Option<i64>,
    pub business_id: Option<i64>,
    pub user_id: i64,
    pub added: i64,
    pub modified: i64,
}

/// What the upload pipeline hands the store once every file is written.
#[derive(Debug, Clone, PartialEq)]
pub struct NewImage {
    pub path: String,
    pub mimetype: String,
    pub width: u32,
    pub height: u32,
    pub site_id: Option<i64>,
    pub business_id: Option<i64>,
    pub user_id: i64,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ImageFilter {
    pub site_id: Option<i64>,
    pub business_id: Option<i64>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ImageQuery {
    pub filter: ImageFilter,
    pub descending: bool,
    pub limit: u64,
    pub offset: u64,
}

impl ImageFilter {
    fn terms(&self) -> Vec<Term> {
        let mut terms = Vec::new();
        if let Some(site) = self.site_id {
            terms.push(("site", site.to_string()));
        }
        if let Some(business) = self.business_id {
            terms.push(("biz", business.to_string()));
        }
        terms
    }

    pub fn scope(&self) -> String {
        scope_name(&self.terms())
    }

    pub fn matches(&self, image: &Image) -> bool {
        self.site_id.is_none_or(|s| image.site_id == Some(s))
            && self
                .business_id
                .is_none_or(|b| image.business_id == Some(b))
    }
}

impl NewImage {
    pub fn into_image(self, id: i64, account_id: i64, now: i64) -> Image {
        Image {
            id,
            account_id,
            path: self.path,
            mimetype: self.mimetype,
            width: self.width,
            height: self.height,
            site_id: self.site_id,
            business_id: self.business_id,
            user_id: self.user_id,
            added: now,
            modified: now,
        }
    }
}

/// `img/upload/photo-x1.jpg` + `small` -> `img/upload/photo-x1.small.jpg`.
pub fn variant_path(original: &str, size: &str) -> String {
    let file_start = original.rfind('/').map_or(0, |i| i + 1);
    match original[file_start..].rfind('.') {
        Some(dot) => {
            let dot = file_start + dot;
            format!("{}.{size}{}", &original[..dot], &original[dot..])
        }
        None => format!("{original}.{size}"),
    }
}

impl Image {
    pub fn scopes(&self) -> Vec<String> {
        all_scopes(
            &ImageFilter {
                site_id: self.site_id,
                business_id: self.business_id,
            }
            .terms(),
        )
    }

    pub fn resource_uri(&self) -> String {
        format!("/api/v2/images/{}/", self.id)
    }

    pub fn to_json(&self) -> Value {
        let mut sizes = Map::new();
        for (size, _) in VARIANTS {
            sizes.insert(size.into(), Value::String(variant_path(&self.path, size)));
        }
        sizes.insert("original".into(), Value::String(self.path.clone()));
        json!({
            "id": self.id,
            "image": self.path,
            "absolute_path": format!("/{}", self.path),
            "mimetype": self.mimetype,
            "width": self.width,
            "height": self.height,
            "site_id": self.site_id,
            "business_id": self.business_id,
            "user_id": self.user_id,
            "added": format_timestamp(self.added),
            "modified": format_timestamp(self.modified),
            "resource_uri": self.resource_uri(),
            "sizes": sizes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variant_paths_insert_the_size_before_the_extension() {
        assert_eq!(
            variant_path("img/upload/c1_26.jpg", "small"),
            "img/upload/c1_26.small.jpg"
        );
        assert_eq!(
            variant_path("img/up.load/noext", "big"),
            "img/up.load/noext.big"
        );
    }

    #[test]
    fn json_has_every_size() {
        let image = NewImage {
            path: "img/upload/a.png".into(),
            mimetype: "image/png".into(),
            width: 10,
            height: 5,
            site_id: Some(3),
            business_id: None,
            user_id: 1,
        }
        .into_image(9, 1, 0);
        let v = image.to_json();
        assert_eq!(v["sizes"]["original"], "img/upload/a.png");
        assert_eq!(v["sizes"]["thumbnail"], "img/upload/a.thumbnail.png");
        assert_eq!(v["absolute_path"], "/img/upload/a.png");
        assert_eq!(image.scopes(), vec!["*", "site=3"]);
    }
}

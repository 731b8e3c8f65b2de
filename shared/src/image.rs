//! Images: the record, list filters and JSON rendering. The upload pipeline lives in the
//! submodules.

use serde_json::{json, Map, Value};

use crate::clock::format_timestamp;

/// The variants every upload gets: name and the box its longest side is fitted into (never
/// upscaled), largest first.
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
    /// The sub id the image belongs to, fixed at upload (`upload::image_sub_id`): a
    /// sub-restricted key sees only images of its sub id. Not part of the JSON.
    pub partner_sub_id: Option<String>,
    pub user_id: i64,
    pub added: i64,
    pub modified: i64,
}

/// What the upload pipeline hands the store once every file is written.
#[derive(Debug, Clone, PartialEq)]
pub struct NewImage {
    /// An id from `ImageStore::allocate_image_id` (the upload names its files after it), or
    /// `None` for the store to allocate one now.
    pub id: Option<i64>,
    pub path: String,
    pub mimetype: String,
    pub width: u32,
    pub height: u32,
    pub site_id: Option<i64>,
    pub business_id: Option<i64>,
    /// When `business_id` is set, it must be that business's sub id (the stores check it
    /// in the create's transaction).
    pub partner_sub_id: Option<String>,
    pub user_id: i64,
}

/// The filters of an image list. `partner_sub_id` carries a key's restriction only (it is
/// not a query parameter).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ImageFilter {
    pub site_id: Option<i64>,
    pub business_id: Option<i64>,
    pub partner_sub_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ImageQuery {
    pub filter: ImageFilter,
    pub descending: bool,
    pub limit: u64,
    pub offset: u64,
}

impl NewImage {
    /// The record, with `id` (the allocated one when `self.id` is set).
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
            partner_sub_id: self.partner_sub_id,
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
    /// Whether a key restricted to `restrict_sub_id` (if any) may see this image.
    pub fn visible_to(&self, restrict_sub_id: Option<&str>) -> bool {
        restrict_sub_id.is_none_or(|sub| self.partner_sub_id.as_deref() == Some(sub))
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
            id: None,
            path: "img/upload/a.png".into(),
            mimetype: "image/png".into(),
            width: 10,
            height: 5,
            site_id: Some(3),
            business_id: None,
            partner_sub_id: None,
            user_id: 1,
        }
        .into_image(9, 1, 0);
        let v = image.to_json();
        assert_eq!(v["sizes"]["original"], "img/upload/a.png");
        assert_eq!(v["sizes"]["thumbnail"], "img/upload/a.thumbnail.png");
        assert_eq!(v["absolute_path"], "/img/upload/a.png");
        assert!(image.visible_to(None) && !image.visible_to(Some("north")));
        assert!(
            v.get("partner_sub_id").is_none(),
            "the JSON shape is the contract's"
        );
    }

    #[test]
    fn visibility_follows_the_sub_id() {
        let image = Image {
            partner_sub_id: Some("north".into()),
            ..NewImage {
                id: None,
                path: "img/upload/a.png".into(),
                mimetype: "image/png".into(),
                width: 1,
                height: 1,
                site_id: None,
                business_id: None,
                partner_sub_id: None,
                user_id: 1,
            }
            .into_image(9, 1, 0)
        };
        assert!(image.visible_to(Some("north")) && !image.visible_to(Some("south")));
    }
}

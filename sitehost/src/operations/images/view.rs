//! How an image looks to a client (the same object in the list, the detail, a business's
//! detail and an upload's answer) and its paths. Built with `json!` as a
//! `serde_json::Value` map (keys sorted), the JSON the tests and the OpenAPI document hold.

use serde_json::{json, Map, Value};

use crate::clock::format_timestamp;
use crate::domain::image_record::Image;

/// The list's path: the base of its paging links and of every image's URI.
pub const LIST_PATH: &str = "/api/v2/images/";

pub fn resource_uri(id: i64) -> String {
    format!("{LIST_PATH}{id}/")
}

/// The image object: the original's path, every variant's path and size, and a `srcset`.
pub fn image(image: &Image) -> Value {
    let mut sizes = Map::new();
    let mut variants = Map::new();
    for (name, path, (width, height)) in image.variants() {
        variants.insert(
            name.into(),
            json!({"path": path, "width": width, "height": height}),
        );
        sizes.insert(name.into(), Value::String(path));
    }
    sizes.insert("original".into(), Value::String(image.path.clone()));
    json!({
        "id": image.id,
        "image": image.path,
        "absolute_path": format!("/{}", image.path),
        "mimetype": image.mimetype,
        "width": image.width,
        "height": image.height,
        "site_id": image.site_id,
        "business_id": image.business_id,
        "user_id": image.user_id,
        "added": format_timestamp(image.added),
        "modified": format_timestamp(image.modified),
        "resource_uri": resource_uri(image.id),
        "sizes": sizes,
        "variants": variants,
        "srcset": srcset(image),
    })
}

/// A `srcset` of the variants' local paths with their widths (`/img/upload/a.small.jpg
/// 320w, ...`), smallest first, each width once (an image smaller than a box gives equal
/// sizes; the smaller variant's file stands for them).
fn srcset(image: &Image) -> String {
    let mut candidates: Vec<(u32, String)> = Vec::new();
    for (_, path, (width, _)) in image.variants() {
        match candidates.last_mut() {
            Some(last) if last.0 == width => last.1 = path,
            _ => candidates.push((width, path)),
        }
    }
    candidates
        .iter()
        .rev()
        .map(|(width, path)| format!("/{path} {width}w"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::image_record::NewImage;

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
        let v = super::image(&image);
        assert_eq!(v["sizes"]["original"], "img/upload/a.png");
        assert_eq!(v["sizes"]["thumbnail"], "img/upload/a.thumbnail.png");
        assert_eq!(v["absolute_path"], "/img/upload/a.png");
        assert!(
            v.get("partner_sub_id").is_none(),
            "the JSON shape is the contract's"
        );
    }

    #[test]
    fn variants_state_their_sizes_and_make_a_srcset() {
        let image = NewImage {
            id: None,
            path: "img/upload/a.jpg".into(),
            mimetype: "image/jpeg".into(),
            width: 4000,
            height: 3000,
            site_id: None,
            business_id: None,
            partner_sub_id: None,
            user_id: 1,
        }
        .into_image(9, 1, 0);
        let v = super::image(&image);
        assert_eq!(
            v["variants"]["big"],
            json!({"path": "img/upload/a.big.jpg", "width": 2048, "height": 1536})
        );
        assert_eq!(
            v["variants"]["thumbnail"],
            json!({"path": "img/upload/a.thumbnail.jpg", "width": 150, "height": 113})
        );
        assert_eq!(
            v["srcset"],
            "/img/upload/a.thumbnail.jpg 150w, /img/upload/a.small.jpg 320w, \
             /img/upload/a.medium.jpg 640w, /img/upload/a.large.jpg 1024w, \
             /img/upload/a.big.jpg 2048w"
        );
        // A 500 px image: big, large and medium are all 500 wide; the medium file stands
        // for that width.
        let small = Image {
            width: 500,
            height: 400,
            ..image
        };
        assert_eq!(
            srcset(&small),
            "/img/upload/a.thumbnail.jpg 150w, /img/upload/a.small.jpg 320w, \
             /img/upload/a.medium.jpg 500w"
        );
    }
}

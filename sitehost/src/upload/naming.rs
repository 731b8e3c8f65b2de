//! The names of an upload's files: a safe stem from the client's file name or URL, a
//! random part that makes the paths unguessable, and the id of the record the files belong
//! to, which `sitehost files sweep` reads back to tell an orphan from a live file.

use crate::domain::image_record::UPLOAD_PREFIX;

const MAX_STEM_CHARS: usize = 40;

/// A readable, safe file stem from a client's file name or URL: lower-case ASCII letters,
/// digits, `-` and `_`, at most 40 characters, `image` when nothing is left.
pub fn file_stem(name: Option<&str>) -> String {
    let name = name.unwrap_or_default();
    let file = name.rsplit(['/', '\\']).next().unwrap_or_default();
    let file = file.split(['?', '#']).next().unwrap_or_default();
    let stem = file.rsplit_once('.').map_or(file, |(stem, _)| stem);
    let mut clean = String::new();
    for c in stem.chars() {
        if c.is_ascii_alphanumeric() || c == '_' {
            clean.push(c.to_ascii_lowercase());
        } else if !clean.is_empty() && !clean.ends_with('-') {
            clean.push('-');
        }
        if clean.len() >= MAX_STEM_CHARS {
            break;
        }
    }
    let clean = clean.trim_matches('-').to_string();
    if clean.is_empty() {
        "image".into()
    } else {
        clean
    }
}

/// Separates an upload's file name from the id of its record. Stems never hold two
/// dashes in a row and the random part none, so names from before ids were part of them
/// (`<stem>-<unique>.<ext>`) can never be read as carrying one.
const ID_SEPARATOR: &str = "--";

/// `img/upload/<stem>-<unique>--<id>.<ext>`: the random part makes the paths unguessable,
/// the id names the record the files belong to.
pub fn original_path(stem: &str, id: i64, extension: &str) -> String {
    use rand::distr::{Alphanumeric, SampleString};
    let unique = Alphanumeric
        .sample_string(&mut rand::rng(), 12)
        .to_ascii_lowercase();
    format!("{UPLOAD_PREFIX}{stem}-{unique}{ID_SEPARATOR}{id}.{extension}")
}

/// The file set a stored path belongs to and the image id it was written for:
/// `img/upload/shop-k3v9x0q2m1za--26.big.jpg` -> (`img/upload/shop-k3v9x0q2m1za--26`, 26).
/// `None` for any other path (files from before ids were in names, foreign files).
pub fn upload_file_set(path: &str) -> Option<(&str, i64)> {
    let name = path.strip_prefix(UPLOAD_PREFIX)?;
    if name.contains('/') {
        return None;
    }
    let base = &name[..name.find('.')?];
    let (_, id) = base.rsplit_once(ID_SEPARATOR)?;
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let id: i64 = id.parse().ok().filter(|id| *id > 0)?;
    Some((&path[..UPLOAD_PREFIX.len() + base.len()], id))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::image_record::{sibling_path, variant_path, SiblingFormat};

    #[test]
    fn stems_are_safe() {
        assert_eq!(file_stem(Some("My Photo (1).JPG")), "my-photo-1");
        assert_eq!(
            file_stem(Some("https://example.com/a/b/cat.png?x=1")),
            "cat"
        );
        assert_eq!(file_stem(Some("../../etc/passwd")), "passwd");
        assert_eq!(file_stem(Some("日本.jpg")), "image");
        assert_eq!(file_stem(None), "image");
        let path = original_path("cat", 26, "png");
        assert!(
            path.starts_with("img/upload/cat-") && path.ends_with("--26.png"),
            "{path}"
        );
        assert_ne!(original_path("cat", 26, "png"), path);
    }

    #[test]
    fn file_sets_are_named_by_the_record_id() {
        let path = original_path("my-shop_2", 26, "jpg");
        let set = &path[..path.len() - ".jpg".len()];
        assert_eq!(upload_file_set(&path), Some((set, 26)));
        let variant = variant_path(&path, "thumbnail");
        assert_eq!(upload_file_set(&variant), Some((set, 26)));
        // So do the siblings of variants.
        for format in SiblingFormat::ALL {
            let sibling = sibling_path(&variant, format);
            assert_eq!(upload_file_set(&sibling), Some((set, 26)));
        }
        // A temporary file of the local store belongs to its set too.
        assert_eq!(
            upload_file_set(&format!("{set}.big.tmp-123")),
            Some((set, 26))
        );
        for other in [
            "img/upload/shop-k3v9x0q2m1za.jpg",
            "img/upload/a-26-bcdefghijklm.jpg",
            "img/upload/sub/x--26.jpg",
            "img/upload/x--.jpg",
            "img/upload/x--2a.jpg",
            "img/upload/x--0.jpg",
            "img/upload/x--26",
            "other/x--26.jpg",
        ] {
            assert_eq!(upload_file_set(other), None, "{other}");
        }
        assert_eq!(file_stem(Some("a--b.jpg")), "a-b", "stems never hold '--'");
    }
}

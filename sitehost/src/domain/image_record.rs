//! Images: the record, its variant sizes and the paths of its files (and their variants'
//! siblings). Named apart from the `image` codec crate; the upload pipeline is `upload`,
//! what an image looks like over HTTP (its JSON, its paths) `operations::images`.

/// Where uploads live, relative to the frontend host.
pub const UPLOAD_PREFIX: &str = "img/upload/";

/// The variants every upload gets: name and the box its longest side is fitted into (never
/// upscaled), largest first.
pub const VARIANTS: [(&str, u32); 5] = [
    ("big", 2048),
    ("large", 1024),
    ("medium", 640),
    ("small", 320),
    ("thumbnail", 150),
];

/// Size of a variant fitting the longest side into `box_side`, never upscaled:
/// scale = box / max(w, h); the other side is round(side * scale), at least 1. The
/// pipeline makes variants at exactly this size, so the image object states each one's
/// size from the original's alone.
pub fn fit(width: u32, height: u32, box_side: u32) -> (u32, u32) {
    let long = width.max(height);
    if long <= box_side {
        return (width, height);
    }
    let scale = f64::from(box_side) / f64::from(long);
    let side = |v: u32| {
        if v == long {
            box_side
        } else {
            ((f64::from(v) * scale).round() as u32).max(1)
        }
    };
    (side(width), side(height))
}

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

/// The variants whose WebP sibling the upload makes with them (when the original is not a
/// WebP already): small and thumbnail add about 6 ms of encoding (under 5%) to a 12 MP
/// photo's upload; medium's sibling made it 11-14% slower, over the 10% rule, and WebPs of
/// big and large would add 60-100% (docs/image-pipeline-bench.md, "WebP siblings"). The
/// siblings of the other variants, and of images uploaded before siblings existed, are made
/// on their first request (`operations::siblings`).
pub const WEBP_SIBLINGS_AT_UPLOAD: [&str; 2] = ["small", "thumbnail"];

/// The formats a variant's sibling is made in (`<variant path>.<extension>`), for a viewer
/// that accepts them (`api::sibling_answer::chosen_sibling`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SiblingFormat {
    Avif,
    Webp,
}

impl SiblingFormat {
    pub const ALL: [SiblingFormat; 2] = [SiblingFormat::Avif, SiblingFormat::Webp];

    pub fn extension(self) -> &'static str {
        match self {
            SiblingFormat::Avif => "avif",
            SiblingFormat::Webp => "webp",
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            SiblingFormat::Avif => "image/avif",
            SiblingFormat::Webp => "image/webp",
        }
    }

    /// The sibling answered in this one's place for a variant that gets none in this
    /// format (an AVIF past the pixel bound, or of an animated GIF): the WebP. Every viewer
    /// that is answered an AVIF accepts WebP too (`chosen_sibling`).
    pub fn stand_in(self) -> Option<SiblingFormat> {
        match self {
            SiblingFormat::Avif => Some(SiblingFormat::Webp),
            SiblingFormat::Webp => None,
        }
    }

    fn from_extension(extension: &str) -> Option<SiblingFormat> {
        SiblingFormat::ALL
            .into_iter()
            .find(|format| format.extension() == extension)
    }
}

/// What a variant's sibling is made from (`operations::siblings`).
#[derive(Debug, Clone, Copy)]
pub struct SiblingSource<'a> {
    /// The stored variant.
    pub variant: &'a [u8],
    /// Its original, when stored: a still variant's siblings are made from the original's
    /// pixels, as the variant itself was. Made from the variant's bytes they would encode
    /// its JPEG artefacts again and fall 5-9 SSIMULACRA2 points below it
    /// (docs/image-fidelity.md).
    pub original: Option<&'a [u8]>,
    /// The variant's size, one of [`VARIANTS`]: each size's siblings have a quality of
    /// their own.
    pub size: &'static str,
}

/// The original and size of a variant's path (`img/upload/a--26.small.jpg` ->
/// (`img/upload/a--26.jpg`, `small`)): the inverse of [`variant_path`]. `None` for a path
/// that is not a variant's.
pub fn variant_parts(path: &str) -> Option<(String, &'static str)> {
    let (rest, extension) = path.rsplit_once('.')?;
    let (set, size) = rest.rsplit_once('.')?;
    let &(size, _) = VARIANTS.iter().find(|&&(name, _)| name == size)?;
    (!set.is_empty() && !set.ends_with('/')).then(|| (format!("{set}.{extension}"), size))
}

/// A variant's sibling in `format`: `img/upload/a--26.medium.jpg` ->
/// `img/upload/a--26.medium.jpg.avif`. Same file set (the name up to its first dot), so the
/// sweeper, restores and deletes treat it as part of the upload.
pub fn sibling_path(variant_path: &str, format: SiblingFormat) -> String {
    format!("{variant_path}.{}", format.extension())
}

/// Whether a stored path is a variant that may have siblings: a variant
/// ([`is_variant_path`]) that is not a WebP itself (`a--26.small.jpg`, `a--26.big.png` yes;
/// `a--26.small.webp`, `a--26.jpg` no). Such a variant has a sibling in a format once it
/// has been asked for in it, and a WebP one from its upload for [`WEBP_SIBLINGS_AT_UPLOAD`].
pub fn may_have_siblings(path: &str) -> bool {
    let extension = path.rsplit('.').next().unwrap_or_default();
    is_variant_path(path) && !extension.eq_ignore_ascii_case("webp")
}

/// The variant and format of a sibling's path (`a--26.medium.jpg.webp` ->
/// (`a--26.medium.jpg`, WebP)), `None` for any other path: the inverse of
/// [`sibling_path`] on the variants of [`may_have_siblings`].
pub fn sibling_of(path: &str) -> Option<(&str, SiblingFormat)> {
    let (variant, extension) = path.rsplit_once('.')?;
    let format = SiblingFormat::from_extension(extension)?;
    may_have_siblings(variant).then_some((variant, format))
}

/// The extensions an upload's files are stored with (`image_pipeline::format`).
pub const STORED_EXTENSIONS: [&str; 4] = ["jpg", "png", "gif", "webp"];

/// The longest file-set name (`<stem>-<unique>--<id>`: 40 + 1 + 12 + 2 + 19 characters)
/// with room to spare; no stored name is longer.
pub const MAX_FILE_SET_CHARS: usize = 100;

/// What a path names in the stored-name grammar of uploads (`upload::naming`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UploadFile {
    /// `img/upload/<set>.<ext>`
    Original,
    /// `img/upload/<set>.<size>.<ext>`
    Variant,
    /// `img/upload/<set>.<size>.<jpg|png|gif>.<webp|avif>`
    Sibling(SiblingFormat),
}

/// The kind of stored upload file `path` (no leading slash) can be, or `None` when no
/// upload is ever stored there: one segment after `img/upload/` (so no empty, `.` or `..`
/// segments), a file-set name of lower-case ASCII letters, digits, `-` and `_`, an optional
/// variant size and a stored extension. Only such paths are served by `sitehost serve` or
/// encoded (ImageFilesFunction in template.yaml applies the same grammar).
pub fn upload_file(path: &str) -> Option<UploadFile> {
    let name = path.strip_prefix(UPLOAD_PREFIX)?;
    let mut parts = name.split('.');
    let set = parts.next()?;
    let rest: Vec<&str> = parts.collect();
    let set_ok = !set.is_empty()
        && set.len() <= MAX_FILE_SET_CHARS
        && set
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
    if !set_ok {
        return None;
    }
    let size = |s: &str| VARIANTS.iter().any(|&(name, _)| name == s);
    let stored = |e: &str| STORED_EXTENSIONS.contains(&e);
    match rest[..] {
        [ext] if stored(ext) => Some(UploadFile::Original),
        [s, ext] if size(s) && stored(ext) => Some(UploadFile::Variant),
        [s, ext, sibling] if size(s) && stored(ext) && ext != "webp" => {
            SiblingFormat::from_extension(sibling).map(UploadFile::Sibling)
        }
        _ => None,
    }
}

/// Whether a stored path is a variant (`<set>.<size>.<ext>`, size one of [`VARIANTS`]).
pub fn is_variant_path(path: &str) -> bool {
    let file = path.rsplit('/').next().unwrap_or_default();
    let mut parts = file.rsplit('.');
    let (Some(_), Some(size), Some(_)) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    VARIANTS.iter().any(|&(name, _)| name == size)
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

    /// Each variant's name, path and size, largest first.
    pub fn variants(&self) -> impl Iterator<Item = (&'static str, String, (u32, u32))> + '_ {
        VARIANTS.iter().map(|&(name, side)| {
            (
                name,
                variant_path(&self.path, name),
                fit(self.width, self.height, side),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_variant_but_a_webp_may_have_siblings() {
        let original = "img/upload/shop-k3v9x0q2m1za--26.jpg";
        for (name, _) in VARIANTS {
            let variant = variant_path(original, name);
            assert!(is_variant_path(&variant), "{variant}");
            assert!(may_have_siblings(&variant), "{variant}");
            for format in SiblingFormat::ALL {
                let sibling = sibling_path(&variant, format);
                assert_eq!(sibling, format!("{variant}.{}", format.extension()));
                assert_eq!(sibling_of(&sibling), Some((variant.as_str(), format)));
            }
        }
        assert_eq!(
            sibling_path(&variant_path(original, "small"), SiblingFormat::Webp),
            "img/upload/shop-k3v9x0q2m1za--26.small.jpg.webp"
        );
        assert_eq!(
            sibling_path(&variant_path(original, "big"), SiblingFormat::Avif),
            "img/upload/shop-k3v9x0q2m1za--26.big.jpg.avif"
        );
        for not in [
            original,
            "img/upload/a--26.small.webp",
            "img/upload/a--26.small.jpg.webp",
            "img/upload/a--26.small.jpg.avif",
            "img/upload/a--26.huge.jpg",
            "medium.jpg",
            "img/upload/medium",
        ] {
            assert!(!may_have_siblings(not), "{not}");
        }
        for not in [
            "img/upload/a--26.small.jpg",
            "img/upload/a--26.jpg.webp",
            "img/upload/a--26.jpg.avif",
            "img/upload/a--26.small.webp.webp",
            "img/upload/a--26.small.webp.avif",
            "img/upload/a--26.small.jpg.webp.webp",
            "img/upload/a--26.small.jpg.avif.webp",
            "img/upload/a--26.small.jpg.heic",
            "img/upload/a--26.huge.jpg.webp",
            ".webp",
            ".avif",
        ] {
            assert_eq!(sibling_of(not), None, "{not}");
        }
        assert!(!is_variant_path(original));
        for &(name, _) in &VARIANTS {
            let variant = variant_path(original, name);
            assert_eq!(variant_parts(&variant), Some((original.to_string(), name)));
        }
        for not in [
            original,
            "img/upload/a.huge.jpg",
            "img/upload/.small.jpg",
            "small.jpg",
        ] {
            assert_eq!(variant_parts(not), None, "{not}");
        }
        assert!(!is_variant_path("img/upload/a--26.medium.jpg.webp"));
        assert!(!is_variant_path("img/upload/a--26.medium.jpg.avif"));
        assert_eq!(SiblingFormat::Avif.stand_in(), Some(SiblingFormat::Webp));
        assert_eq!(SiblingFormat::Webp.stand_in(), None);
    }

    #[test]
    fn only_names_in_the_stored_grammar_are_upload_files() {
        use UploadFile::*;
        for (path, kind) in [
            ("img/upload/shop-k3v9x0q2m1za--26.jpg", Some(Original)),
            ("img/upload/shop-k3v9x0q2m1za.medium.png", Some(Variant)),
            ("img/upload/a_b--7.small.webp", Some(Variant)),
            (
                "img/upload/a--7.big.gif.webp",
                Some(Sibling(SiblingFormat::Webp)),
            ),
            (
                "img/upload/a--7.big.png.avif",
                Some(Sibling(SiblingFormat::Avif)),
            ),
            ("img/upload/a--7.big.webp.webp", None),
            ("img/upload/a--7.big.webp.avif", None),
            ("img/upload/a--7.big.jpg.avif.webp", None),
            ("img/upload/a--7.avif", None),
            ("img/upload/a--7.big.avif", None),
            ("img/upload/a--7.jpg.webp", None),
            ("img/upload//a--7.big.jpg.webp", None),
            ("img/upload/./a--7.big.jpg", None),
            ("img/upload/../upload/a--7.big.jpg", None),
            ("img/upload/sub/a--7.big.jpg", None),
            ("img/upload/A--7.big.jpg", None),
            ("img/upload/a--7.BIG.jpg", None),
            ("img/upload/a--7.big.jpeg", None),
            ("img/upload/a--7.big.tmp-123", None),
            ("img/upload/.jpg", None),
            ("img/upload/a--7.huge.jpg", None),
            ("img/upload/a%2e.jpg", None),
            ("other/a--7.jpg", None),
        ] {
            assert_eq!(upload_file(path), kind, "{path}");
        }
        let long = format!("img/upload/{}.jpg", "a".repeat(MAX_FILE_SET_CHARS + 1));
        assert_eq!(upload_file(&long), None);
        let padded = format!("img/upload/{}a--7.big.jpg", "/".repeat(4000));
        assert_eq!(upload_file(&padded), None);
    }

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
    fn fit_follows_the_rule() {
        assert_eq!(fit(4000, 3000, 2048), (2048, 1536));
        assert_eq!(fit(4000, 3000, 150), (150, 113)); // 112.5 rounds up
        assert_eq!(fit(3000, 4000, 150), (113, 150));
        assert_eq!(fit(10000, 10, 320), (320, 1)); // 0.32 -> at least 1
        assert_eq!(fit(100, 50, 320), (100, 50), "never upscaled");
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
        let unrestricted = Image {
            partner_sub_id: None,
            ..image
        };
        assert!(unrestricted.visible_to(None) && !unrestricted.visible_to(Some("north")));
    }
}

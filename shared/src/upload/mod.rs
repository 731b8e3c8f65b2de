//! Everything only image uploads need, built with the `images` feature (the `image-upload`
//! function and the `sitehost` command): the operation below, the URL fetcher, the image
//! pipeline, the S3 file store and the orphan sweeper. The rest of the crate reaches it
//! through one trait object, `operations::ImageUploads`, created in `deployment`.
//!
//! `POST /api/v2/images/`: an image by URL or as base64, stored as the original plus its
//! variants, then recorded. Files are written before the record and removed again if
//! anything fails, so a failed upload leaves nothing and a record never points at a
//! missing file. The files are named after the record's id (allocated first), so when the
//! record write ends with an unknown outcome the id is settled (`ImageStore::settle_image`)
//! before any file is removed, and `sitehost files sweep` can tell an orphan from a live
//! file.

use std::time::Instant;

use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
use base64::engine::DecodePaddingMode;
use base64::Engine;
use bytes::Bytes;
use serde_json::{Map, Value};

use crate::account::Caller;
use crate::business::Business;
use crate::config::{byte_size, larger_images_by_url, Config};
use crate::error::{ApiError, FieldErrors, Result};
use crate::image_record::{variant_path, webp_sibling_path, Image, NewImage, UPLOAD_PREFIX};
use crate::operations::images::view;
use crate::operations::upload_stats::record_upload;
use crate::operations::{ImageUploads, Reply, Services};
use crate::store::files::SharedFiles;
use fetch::Fetcher;
use pipeline::Processed;
use slots::UploadSlots;

pub mod fetch;
pub mod pipeline;
pub mod slots;
pub mod sweep;

/// The upload operation with what it needs beyond [`Services`]: built once per cold start.
pub struct Uploads {
    fetcher: Fetcher,
    files: SharedFiles,
    slots: UploadSlots,
}

impl Uploads {
    pub fn new(config: &Config, files: SharedFiles) -> Result<Self> {
        Ok(Uploads {
            fetcher: Fetcher::new(config.fetch.clone())?,
            files,
            slots: UploadSlots::new(&config.server),
        })
    }
}

#[async_trait::async_trait]
impl ImageUploads for Uploads {
    async fn upload(&self, services: &Services, caller: &Caller, body: &[u8]) -> Result<Reply> {
        let (image, _) = upload(self, services, caller, body).await?;
        Ok(Reply::created(
            view::image(&image),
            view::resource_uri(image.id),
        ))
    }
}

const MAX_STEM_CHARS: usize = 40;

/// Standard alphabet, padding optional: clients differ in whether they pad.
const BASE64: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

#[derive(Debug, Clone, PartialEq)]
pub enum Source {
    Url(String),
    Base64 { name: Option<String>, data: String },
}

#[derive(Debug, Clone, PartialEq)]
pub struct UploadRequest {
    pub source: Source,
    pub site_id: Option<i64>,
    pub business_id: Option<i64>,
}

impl UploadRequest {
    /// Takes the body by value: the base64 content (megabytes) moves out of it uncopied.
    pub fn from_json(mut body: Map<String, Value>) -> Result<Self> {
        let mut fields = FieldErrors::default();
        let site_id = crate::validate::optional_id(&mut fields, &body, "site_id").flatten();
        let business_id = crate::validate::optional_id(&mut fields, &body, "business_id").flatten();
        let upload = body.remove("upload").filter(|v| !v.is_null());
        let url = body.get("external_url").filter(|v| !v.is_null());
        let source = match (url, upload) {
            (Some(_), Some(_)) => {
                fields.add("__all__", "Give either external_url or upload, not both.");
                None
            }
            (None, None) => {
                fields.add("__all__", "Give external_url (a public http(s) URL) or upload ({\"name\": ..., \"file\": <base64>}).");
                None
            }
            (Some(Value::String(url)), None) => Some(Source::Url(url.trim().to_string())),
            (Some(_), None) => {
                fields.add("external_url", "Must be a string URL.");
                None
            }
            (None, Some(Value::Object(mut upload))) => {
                let name = ["name", "filename"]
                    .iter()
                    .find_map(|k| upload.get(*k).and_then(Value::as_str))
                    .map(str::to_string);
                match upload.remove("file") {
                    Some(Value::String(data)) => Some(Source::Base64 { name, data }),
                    Some(_) => {
                        fields.add_at(&["upload", "file"], "Must be a base64 string.");
                        None
                    }
                    None => {
                        fields.add_at(
                            &["upload", "file"],
                            "Required: the image content in base64.",
                        );
                        None
                    }
                }
            }
            (None, Some(_)) => {
                fields.add(
                    "upload",
                    "Must be an object: {\"name\": \"photo.jpg\", \"file\": \"<base64>\"}.",
                );
                None
            }
        };
        fields.into_result()?;
        let source = source.ok_or_else(|| ApiError::invalid("no image source"))?;
        Ok(UploadRequest {
            source,
            site_id,
            business_id,
        })
    }
}

/// Decodes plain base64 or a `data:` URI, tolerating line breaks and spaces. The size cap
/// is checked on the encoded length before decoding anything; its 413 says that a larger
/// image goes by `external_url`, up to `fetch_max_bytes`.
pub fn decode_base64(data: &str, max_bytes: usize, fetch_max_bytes: u64) -> Result<Vec<u8>> {
    let too_large = || {
        ApiError::TooLarge(format!(
            "The decoded file is over the upload limit of {}; {}.",
            byte_size(max_bytes as u64),
            larger_images_by_url(fetch_max_bytes)
        ))
    };
    let payload = match data.trim_start().strip_prefix("data:") {
        Some(rest) => {
            let (meta, payload) = rest.split_once(',').ok_or_else(|| {
                ApiError::field(
                    "upload.file",
                    "The data: URI has no ',' before its content.",
                )
            })?;
            if !meta.ends_with(";base64") {
                return Err(ApiError::field(
                    "upload.file",
                    "The data: URI must be base64-encoded (;base64).",
                ));
            }
            payload
        }
        None => data,
    };
    // Line-wrapped base64 (MIME, PEM style) is common; unwrapped needs no copy.
    let payload = payload.as_bytes();
    let compact: std::borrow::Cow<[u8]> = if payload.iter().any(u8::is_ascii_whitespace) {
        payload
            .iter()
            .copied()
            .filter(|b| !b.is_ascii_whitespace())
            .collect::<Vec<u8>>()
            .into()
    } else {
        payload.into()
    };
    if compact.is_empty() {
        return Err(ApiError::field("upload.file", "The file is empty."));
    }
    if compact.len() / 4 * 3 > max_bytes + 3 {
        return Err(too_large());
    }
    let bytes = BASE64
        .decode(&compact)
        .map_err(|e| ApiError::field("upload.file", format!("Not valid base64: {e}.")))?;
    if bytes.is_empty() {
        return Err(ApiError::field("upload.file", "The file is empty."));
    }
    if bytes.len() > max_bytes {
        return Err(too_large());
    }
    Ok(bytes)
}

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

/// The sub id an uploaded image belongs to, fixed at upload: a restricted key's own; for
/// an unrestricted key, that of the business it names, else none.
pub fn image_sub_id(caller: &Caller, business: Option<&Business>) -> Option<String> {
    match (&caller.restrict_sub_id, business) {
        (Some(sub), _) => Some(sub.clone()),
        (None, Some(business)) => business.partner_sub_id.clone(),
        (None, None) => None,
    }
}

/// Writes every file of an upload concurrently; on any failure removes the ones written.
async fn store_files(
    files: &SharedFiles,
    objects: Vec<(String, Bytes, &'static str)>,
) -> Result<Vec<String>> {
    let mut tasks = tokio::task::JoinSet::new();
    for (path, bytes, content_type) in objects.iter().cloned() {
        let files = std::sync::Arc::clone(files);
        tasks.spawn(async move { files.put(&path, bytes, content_type).await });
    }
    let mut failure = None;
    while let Some(joined) = tasks.join_next().await {
        let result = joined.map_err(ApiError::internal).and_then(|r| r);
        if let Err(err) = result {
            failure.get_or_insert(err);
        }
    }
    let paths: Vec<String> = objects.into_iter().map(|(p, _, _)| p).collect();
    match failure {
        None => Ok(paths),
        Some(err) => {
            remove_files(files, &paths).await;
            Err(err)
        }
    }
}

/// Best-effort removal of an upload's files (a missing file is fine).
async fn remove_files(files: &SharedFiles, paths: &[String]) {
    let mut tasks = tokio::task::JoinSet::new();
    for path in paths {
        let (files, path) = (std::sync::Arc::clone(files), path.clone());
        tasks.spawn(async move {
            if let Err(err) = files.delete(&path).await {
                tracing::error!(path = %path, error = %err, "could not remove a file of a failed upload");
            }
        });
    }
    while tasks.join_next().await.is_some() {}
}

async fn upload(
    uploads: &Uploads,
    services: &Services,
    caller: &Caller,
    body: &[u8],
) -> Result<(Image, Processed)> {
    let request = UploadRequest::from_json(crate::validate::json_object(body)?)?;
    let business = match request.business_id {
        Some(business_id) => {
            let visible = services
                .store
                .get_business(caller.account_id, business_id)
                .await?
                .filter(|b| b.visible_to(caller.restrict_sub_id.as_deref()));
            if visible.is_none() {
                return Err(crate::store::rules::no_such_business(business_id));
            }
            visible
        }
        None => None,
    };
    let partner_sub_id = image_sub_id(caller, business.as_ref());
    // Each stage's time goes to the request log line, failed stages included.
    let (bytes, name) = match &request.source {
        Source::Url(url) => {
            let _slot = uploads
                .slots
                .fetch(caller.account_id, services.config.fetch.total_timeout)?;
            let started = Instant::now();
            let fetched = uploads.fetcher.fetch(url).await;
            record_upload(|stats| stats.fetch = Some(started.elapsed()));
            let fetched = fetched?;
            (fetched.bytes, Some(fetched.final_url))
        }
        Source::Base64 { name, data } => {
            let started = Instant::now();
            let decoded = decode_base64(
                data,
                services.config.upload_max_bytes,
                services.config.fetch.max_bytes,
            );
            record_upload(|stats| stats.base64 = Some(started.elapsed()));
            (Bytes::from(decoded?), name.clone())
        }
    };
    record_upload(|stats| stats.bytes = Some(bytes.len() as u64));
    let limits = services.config.image_limits;
    let original = bytes.clone();
    // Only the pipeline holds a run slot; it is given back when the work ends, even if this
    // request is dropped first.
    let slot = uploads.slots.run().await?;
    let started = Instant::now();
    let joined = tokio::task::spawn_blocking(move || {
        let processed = pipeline::process(&bytes, &limits);
        drop(slot);
        processed
    })
    .await;
    record_upload(|stats| stats.pipeline = Some(started.elapsed()));
    let processed = match joined {
        Ok(result) => result?,
        // A decoder that panics on hostile input fails this upload only, never the process.
        Err(join) if join.is_panic() => {
            tracing::error!("the image pipeline panicked on an upload");
            return Err(ApiError::field(
                "upload",
                "The image could not be decoded: the file is corrupt.",
            ));
        }
        Err(join) => return Err(ApiError::internal(join)),
    };
    let timings = processed.timings;
    record_upload(|stats| {
        stats.decode = Some(timings.decode);
        stats.resize = Some(timings.resize);
        stats.encode = Some(timings.encode);
    });
    let id = services.store.allocate_image_id().await?;
    let path = original_path(&file_stem(name.as_deref()), id, processed.extension);
    let mut objects = vec![(path.clone(), original, processed.mimetype)];
    let mut processed = processed;
    for variant in &mut processed.variants {
        // The encoded bytes move to the file store; the caller keeps only sizes and times.
        let at = variant_path(&path, variant.name);
        if let Some(webp) = variant.webp.take() {
            objects.push((webp_sibling_path(&at), Bytes::from(webp), "image/webp"));
        }
        objects.push((
            at,
            Bytes::from(std::mem::take(&mut variant.bytes)),
            processed.mimetype,
        ));
    }
    let started = Instant::now();
    let written = store_files(&uploads.files, objects).await;
    record_upload(|stats| stats.store = Some(started.elapsed()));
    let written = written?;
    let new = NewImage {
        id: Some(id),
        path: path.clone(),
        mimetype: processed.mimetype.to_string(),
        width: processed.width,
        height: processed.height,
        site_id: request.site_id,
        business_id: request.business_id,
        partner_sub_id,
        user_id: caller.user_id,
    };
    let started = Instant::now();
    let created = services
        .store
        .create_image(caller.account_id, new, services.clock.now())
        .await;
    record_upload(|stats| stats.record = Some(started.elapsed()));
    match created {
        Ok(image) => Ok((image, processed)),
        // An internal error (a timeout, a lost response) does not prove that nothing was
        // written, nor does a 503 whose last attempt was throttled after an earlier one went
        // unanswered: settle the id before touching the files.
        Err(err @ (ApiError::Internal(_) | ApiError::Unavailable { .. })) => {
            let image = settle(services, &uploads.files, caller, id, &path, &written).await;
            match image {
                Some(image) => Ok((image, processed)),
                None => Err(err),
            }
        }
        Err(err) => {
            remove_files(&uploads.files, &written).await;
            Err(err)
        }
    }
}

/// After a record write with an unknown outcome: the record if it was written (the upload
/// succeeded). Otherwise the id is barred and the files removed; if even that cannot be
/// found out, the files stay for `sitehost files sweep` to judge later.
async fn settle(
    services: &Services,
    files: &SharedFiles,
    caller: &Caller,
    id: i64,
    path: &str,
    written: &[String],
) -> Option<Image> {
    match services.store.settle_image(id).await {
        Ok(Some(image)) if image.account_id == caller.account_id && image.path == path => {
            tracing::warn!(
                image_id = id,
                "the image record write reported an error but the record exists"
            );
            Some(image)
        }
        Ok(other) => {
            if other.is_some() {
                tracing::error!(image_id = id, "image id recorded for other files");
            }
            remove_files(files, written).await;
            None
        }
        Err(err) => {
            tracing::error!(
                image_id = id,
                error = %err,
                "cannot tell whether the image was recorded; its files are kept for the sweeper"
            );
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn body(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn exactly_one_source() {
        assert!(UploadRequest::from_json(body(json!({"site_id": 1}))).is_err());
        assert!(UploadRequest::from_json(body(
            json!({"external_url": "https://x/a.jpg", "upload": {"file": "AA=="}})
        ))
        .is_err());
        assert!(UploadRequest::from_json(body(json!({"upload": "AA=="}))).is_err());
        assert!(UploadRequest::from_json(body(
            json!({"upload": {"file": "AA=="}, "site_id": "x"})
        ))
        .is_err());
        let ok = UploadRequest::from_json(body(
            json!({"upload": {"filename": "a.png", "file": "AA=="}, "site_id": 12, "type": "image"}),
        ));
        assert_eq!(
            ok.ok().map(|r| (r.site_id, r.source)),
            Some((
                Some(12),
                Source::Base64 {
                    name: Some("a.png".into()),
                    data: "AA==".into()
                }
            ))
        );
    }

    #[test]
    fn base64_forms() {
        assert_eq!(
            decode_base64("aGVs\nbG8=", 100, 1000).ok(),
            Some(b"hello".to_vec())
        );
        assert_eq!(
            decode_base64("aGVsbG8", 100, 1000).ok(),
            Some(b"hello".to_vec())
        );
        assert_eq!(
            decode_base64("data:image/png;base64,aGVsbG8=", 100, 1000).ok(),
            Some(b"hello".to_vec())
        );
        assert!(matches!(
            decode_base64("not base64!!", 100, 1000),
            Err(ApiError::Validation(_))
        ));
        assert!(matches!(
            decode_base64("", 100, 1000),
            Err(ApiError::Validation(_))
        ));
        assert!(matches!(
            decode_base64("data:text/plain,hello", 100, 1000),
            Err(ApiError::Validation(_))
        ));
        for over in ["QUFB".repeat(100), "QUFB".repeat(11)] {
            match decode_base64(&over, 30, 26_214_400) {
                Err(ApiError::TooLarge(message)) => assert_eq!(
                    message,
                    "The decoded file is over the upload limit of 30 bytes; send a larger \
                     image by external_url, which takes files up to 26,214,400 bytes (26.2 MB)."
                ),
                other => panic!("{other:?}"),
            }
        }
    }

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
        // So do the WebP siblings of variants.
        assert_eq!(
            upload_file_set(&webp_sibling_path(&variant)),
            Some((set, 26))
        );
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

//! `sitehost serve` as the frontend host of its stored files: a `GET` or `HEAD` of
//! `/img/upload/...` is answered with the file, streamed from disk, or for a variant with
//! the sibling its `Accept` chooses, as the deployed frontend answers.

use bytes::Bytes;
use futures_util::TryStreamExt;
use http::header::{HeaderValue, CONTENT_LENGTH, VARY};
use http::Response;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;

use crate::api::error_response;
use crate::api::sibling_answer::chosen_sibling;
use crate::domain::image_record::{may_have_siblings, sibling_path, upload_file, SiblingFormat};
use crate::error::ApiError;
use crate::operations::siblings::{Sibling, Siblings};
use crate::store::disk_files::LocalFiles;

/// A response as hyper sends it: a whole body in memory, or a file streamed from disk.
pub(super) type ServedBody = BoxBody<Bytes, std::io::Error>;

/// Stored files are sent in chunks of this size: what a stalled reader holds is bounded.
const FILE_CHUNK_BYTES: usize = 64 * 1024;

/// A stored file, when `sitehost serve` is the frontend host: `GET /img/upload/x.jpg`.
/// A variant's path is answered with the sibling the client's Accept chooses
/// (`api::sibling_answer::chosen_sibling`: AVIF, else WebP): the stored one, or one made now and
/// stored (`operations::siblings`), as the deployed frontend's origin group does; for a
/// variant that gets no AVIF, its WebP. When none can be made the variant itself is
/// answered, never an error. Variants always carry `Vary: Accept` (template.yaml,
/// `ImageFilesFunction`).
pub(super) async fn serve_file(
    files: Option<&LocalFiles>,
    siblings: Option<&Siblings>,
    method: &http::Method,
    path: &str,
    accept: Option<&str>,
) -> Option<Response<ServedBody>> {
    let files = files?;
    if path.starts_with("/api/") || !(method == http::Method::GET || method == http::Method::HEAD) {
        return None;
    }
    let decoded = percent_encoding::percent_decode_str(path)
        .decode_utf8()
        .ok()?;
    // Only canonical paths in the stored-name grammar: no empty, `.` or `..` segments.
    let Some(_) = decoded.strip_prefix('/').and_then(upload_file) else {
        let missing = error_response(&ApiError::NotFound(format!("no file at {path}")));
        return Some(missing.map(whole));
    };
    let variant = crate::domain::image_record::is_variant_path(&decoded);
    let mut content = None;
    let mut format = accept
        .and_then(chosen_sibling)
        .filter(|_| may_have_siblings(&decoded));
    while let Some(chosen) = format.take() {
        let sibling = sibling_path(&decoded, chosen);
        content = match files.open_file(&sibling).await {
            Some(stored) => Some(Content::File(stored)),
            None => match made_sibling(siblings, &sibling).await {
                Made::Sibling(bytes) => Some(Content::Made(bytes, chosen)),
                Made::StandIn(stand_in) => {
                    format = Some(stand_in);
                    None
                }
                Made::None => None,
            },
        };
    }
    if content.is_none() {
        content = files.open_file(&decoded).await.map(Content::File);
    }
    let Some(content) = content else {
        let missing = error_response(&ApiError::NotFound(format!("no file at {path}")));
        return Some(missing.map(whole));
    };
    let (content_type, len) = match &content {
        Content::File((_, len, content_type)) => (*content_type, *len),
        Content::Made(sibling, format) => (format.content_type(), sibling.len() as u64),
    };
    let head = crate::api::file_response(
        method,
        content_type,
        crate::store::files::CACHE_CONTROL,
        Bytes::new(),
    );
    let (mut parts, _) = head.into_parts();
    parts.headers.insert(CONTENT_LENGTH, HeaderValue::from(len));
    if variant {
        parts
            .headers
            .insert(VARY, HeaderValue::from_static("Accept"));
    }
    let body = match content {
        _ if method == http::Method::HEAD => whole(Bytes::new()),
        Content::Made(sibling, _) => whole(sibling),
        Content::File((file, ..)) => {
            let chunks = tokio_util::io::ReaderStream::with_capacity(file, FILE_CHUNK_BYTES);
            BodyExt::boxed(StreamBody::new(chunks.map_ok(Frame::data)))
        }
    };
    Some(Response::from_parts(parts, body))
}

/// What a file answer sends: a stored file, streamed, or a sibling just made.
enum Content {
    File((tokio::fs::File, u64, &'static str)),
    Made(Bytes, SiblingFormat),
}

/// What asking for a sibling gave.
enum Made {
    Sibling(Bytes),
    /// The variant gets no sibling in the format asked for: this one stands in.
    StandIn(SiblingFormat),
    /// None now (no variant, it cannot be encoded, or the store failed: logged): the
    /// variant is answered.
    None,
}

/// The sibling at `sibling_path`, made and stored now.
async fn made_sibling(siblings: Option<&Siblings>, sibling_path: &str) -> Made {
    let Some(siblings) = siblings else {
        return Made::None;
    };
    match siblings.make(sibling_path.trim_start_matches('/')).await {
        Ok(Sibling::Made(sibling)) => Made::Sibling(sibling),
        Ok(Sibling::StandIn(format)) => Made::StandIn(format),
        Ok(Sibling::Missing | Sibling::Variant { .. } | Sibling::NotNow) => Made::None,
        Err(err) => {
            tracing::warn!(sibling_path, error = %crate::error::error_chain(&err), "a sibling could not be made; the variant is answered");
            Made::None
        }
    }
}

pub(super) fn whole(bytes: Bytes) -> ServedBody {
    Full::new(bytes).map_err(|never| match never {}).boxed()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::domain::image_record::SiblingSource;

    /// Stands in for the pipeline (tested on its own in `image_pipeline`): the format's
    /// extension, `:` and the variant's bytes; a failure for a variant that starts with
    /// `bad`, and no AVIF for one that starts with `anim` (an animated GIF).
    fn fake_encode(
        source: SiblingSource<'_>,
        format: SiblingFormat,
    ) -> crate::error::Result<Option<Vec<u8>>> {
        let variant = source.variant;
        if variant.starts_with(b"bad") {
            return Err(ApiError::internal("not an image"));
        }
        if variant.starts_with(b"anim") && format == SiblingFormat::Avif {
            return Ok(None);
        }
        Ok(Some(
            [format.extension().as_bytes(), b":", variant].concat(),
        ))
    }

    // Reads better whole: one image asked for with each Accept, each from what the last stored.
    #[tokio::test]
    async fn variants_are_answered_with_the_sibling_their_accept_chooses() {
        let dir = tempfile::tempdir().expect("dir");
        let files = LocalFiles::open(dir.path()).expect("files");
        let siblings = Siblings::new(
            Arc::new(LocalFiles::open(dir.path()).expect("files")),
            fake_encode,
        );
        let set = "img/upload/a-b--7";
        for (path, bytes) in [
            (format!("{set}.jpg"), &b"original"[..]),
            (format!("{set}.small.jpg"), b"small jpeg"),
            (format!("{set}.small.jpg.webp"), b"stored webp"),
            (format!("{set}.big.jpg"), b"bad big jpeg"),
            (format!("{set}.medium.jpg"), b"medium jpeg"),
            (format!("{set}.thumbnail.jpg"), b"thumbnail jpeg"),
            (format!("{set}.medium.gif"), b"anim gif"),
        ] {
            crate::store::files::FileStore::put(&files, &path, Bytes::from(bytes), "x")
                .await
                .expect("put");
        }
        let chrome = "image/avif,image/webp,image/apng,image/*,*/*;q=0.8";
        let webp_only = "image/webp,*/*";
        let get = |path: String, accept: Option<&'static str>| {
            let (files, siblings) = (&files, &siblings);
            async move {
                let response = serve_file(
                    Some(files),
                    Some(siblings),
                    &http::Method::GET,
                    &path,
                    accept,
                )
                .await
                .expect("a file answer");
                let (parts, body) = response.into_parts();
                let body = body.collect().await.expect("body").to_bytes();
                let header = |name| {
                    parts
                        .headers
                        .get(name)
                        .map(|v: &HeaderValue| v.to_str().unwrap_or_default().to_string())
                };
                (
                    (
                        parts.status.as_u16(),
                        header(http::header::CONTENT_TYPE),
                        header(VARY),
                        header(CONTENT_LENGTH),
                    ),
                    body,
                )
            }
        };
        let answered = |kind: &str, body: &[u8]| {
            let len = body.len().to_string();
            (
                200,
                Some(kind.to_string()),
                Some("Accept".to_string()),
                Some(len),
            )
        };
        let stored = |name: String| std::fs::read(dir.path().join("files").join(name)).ok();
        // WebP accepted, AVIF not, and stored: the WebP.
        let (head, body) = get(format!("/{set}.small.jpg"), Some(webp_only)).await;
        assert_eq!(head, answered("image/webp", b"stored webp"));
        assert_eq!(&body[..], b"stored webp");
        // Both accepted: the AVIF, made, stored and answered; then answered from storage.
        for _ in 0..2 {
            let (head, body) = get(format!("/{set}.small.jpg"), Some(chrome)).await;
            assert_eq!(head, answered("image/avif", b"avif:small jpeg"));
            assert_eq!(&body[..], b"avif:small jpeg");
        }
        let avif = stored(format!("{set}.small.jpg.avif"));
        assert_eq!(avif.as_deref(), Some(&b"avif:small jpeg"[..]));
        // Neither accepted: the variant itself, still varying on Accept.
        for accept in [
            None,
            Some("*/*"),
            Some("image/webp;q=0, image/avif, image/*"),
        ] {
            let (head, body) = get(format!("/{set}.small.jpg"), accept).await;
            assert_eq!(head, answered("image/jpeg", b"small jpeg"), "{accept:?}");
            assert_eq!(&body[..], b"small jpeg", "{accept:?}");
        }
        // WebP only, not stored yet: made, stored, answered.
        for _ in 0..2 {
            let (head, body) = get(format!("/{set}.medium.jpg"), Some(webp_only)).await;
            assert_eq!(head, answered("image/webp", b"webp:medium jpeg"));
            assert_eq!(&body[..], b"webp:medium jpeg");
        }
        let webp = stored(format!("{set}.medium.jpg.webp"));
        assert_eq!(webp.as_deref(), Some(&b"webp:medium jpeg"[..]));
        // An animated GIF gets no AVIF: its WebP stands in, and only that is stored.
        for _ in 0..2 {
            let (head, body) = get(format!("/{set}.medium.gif"), Some(chrome)).await;
            assert_eq!(head, answered("image/webp", b"webp:anim gif"));
            assert_eq!(&body[..], b"webp:anim gif");
        }
        assert!(stored(format!("{set}.medium.gif.avif")).is_none());
        assert!(stored(format!("{set}.medium.gif.webp")).is_some());
        // One that cannot be made: the variant, never an error, and nothing stored.
        let (head, body) = get(format!("/{set}.big.jpg"), Some(chrome)).await;
        assert_eq!(head, answered("image/jpeg", b"bad big jpeg"));
        assert_eq!(&body[..], b"bad big jpeg");
        assert!(stored(format!("{set}.big.jpg.avif")).is_none());
        assert!(stored(format!("{set}.big.jpg.webp")).is_none());
        // The original has no sibling and does not vary.
        let ((status, kind, vary, _), body) = get(format!("/{set}.jpg"), Some(chrome)).await;
        assert_eq!(
            (status, kind.as_deref(), vary),
            (200, Some("image/jpeg"), None)
        );
        assert_eq!(&body[..], b"original");
        // A sibling asked for by name is a stored file like any other.
        let ((status, kind, ..), _) = get(format!("/{set}.small.jpg.avif"), None).await;
        assert_eq!((status, kind.as_deref()), (200, Some("image/avif")));
        // A path outside the stored-name grammar is a 404, even one that names a stored
        // file once its empty segments are dropped, and nothing is made for it.
        let pad = "/".repeat(4000);
        let inner = format!("/img/upload/{pad}{}.small.jpg", &set["img/upload/".len()..]);
        for path in [
            format!("{pad}/{set}.small.jpg"),
            inner,
            format!("/{set}.small.jpg/."),
        ] {
            assert_eq!(
                get(path.clone(), Some(chrome)).await.0 .0,
                404,
                "{path:.40}"
            );
        }
        // A missing variant is a 404 whatever the Accept, and leaves no sibling.
        let ((status, ..), _) = get(format!("/{set}.large.jpg"), Some(chrome)).await;
        assert_eq!(status, 404);
        assert!(stored(format!("{set}.large.jpg.avif")).is_none());
        assert!(stored(format!("{set}.large.jpg.webp")).is_none());
    }
}

//! The HTTP face of `operations::siblings`: which sibling a viewer's `Accept` chooses, and
//! the answer to a `GET` or `HEAD` of a sibling's path that found no stored file. The
//! `image-sibling` function answers it behind the frontend's origin group (template.yaml,
//! `files-or-sibling-maker`); `sitehost serve` asks the operation directly
//! (`server`).

use std::time::Duration;

use bytes::Bytes;
use http::header::LOCATION;
use http::{Method, Response, StatusCode};
use tokio::time::Instant;

use crate::api::{error_response, file_response, set_header};
use crate::domain::image_record::{sibling_path, SiblingFormat};
use crate::error::{error_chain, ApiError, Result};
use crate::operations::siblings::{Sibling, Siblings, MAX_VARIANT_BYTES};
use crate::store::files::CACHE_CONTROL;

/// How long a variant answered in its sibling's place may be cached: a sibling that could
/// not be made is tried again after this, not at every request and not never.
pub const FALLBACK_CACHE_CONTROL: &str = "public, max-age=300";

/// How long a stand-in (the WebP answered for an AVIF the variant does not get) may be
/// cached under the AVIF's URL: a day, so that a later change of the bound reaches viewers
/// within one, while the function is asked at most once a day per edge for it.
pub const STAND_IN_CACHE_CONTROL: &str = "public, max-age=86400";

/// The largest sibling answered in the body. A function URL's buffered answer is at most
/// 6 MB after base64 (4.5 MB of bytes); a larger sibling, already stored, is answered with
/// a redirect to a URL the frontend answers from storage.
pub const MAX_ANSWERED_BYTES: usize = 4 << 20;

/// The sibling a viewer's `Accept` chooses, by RFC 9110's quality values: the AVIF when
/// `image/avif` and `image/webp` both have a quality above zero and the AVIF's is not the
/// lower; else the WebP when `image/webp` has one; else none (the variant in its own
/// format). The rule of `sitehost serve` and of the frontend's ImageFilesFunction
/// (template.yaml), both held to `sitehost/tests/cases/image_files.json`.
///
/// - Only the types themselves count: `image/*` and `*/*` are sent by clients that cannot
///   all decode WebP or AVIF (an old Safari sends `image/*`, most HTTP libraries `*/*`), and
///   every browser that decodes them names them.
/// - The AVIF needs WebP accepted too: a variant that gets no AVIF (animated, or past the
///   bound) is answered its WebP at the AVIF's URL. Every browser that names AVIF names WebP.
/// - A quality outside RFC 9110's grammar (`0x10`, `inf`, `1.5`, `.5`) makes the range count
///   for nothing; a type named twice counts at its highest quality.
pub fn chosen_sibling(accept: &str) -> Option<SiblingFormat> {
    let (avif, webp) = (
        quality_of(accept, "image/avif"),
        quality_of(accept, "image/webp"),
    );
    if webp == 0 {
        None
    } else if avif >= webp {
        Some(SiblingFormat::Avif)
    } else {
        Some(SiblingFormat::Webp)
    }
}

/// The highest quality, in thousandths, that `accept` gives `media_type` (0 when none).
fn quality_of(accept: &str, media_type: &str) -> u16 {
    accept
        .split(',')
        .filter_map(|range| {
            let mut params = range.split(';');
            let kind = params.next().unwrap_or_default().trim();
            if !kind.eq_ignore_ascii_case(media_type) {
                return None;
            }
            params.try_fold(1000, |quality, param| match param.split_once('=') {
                Some((name, value)) if name.trim().eq_ignore_ascii_case("q") => {
                    qvalue(value.trim())
                }
                _ => Some(quality),
            })
        })
        .max()
        .unwrap_or(0)
}

/// RFC 9110's `qvalue`, `0[.ddd]` or `1[.000]`, in thousandths; `None` outside the grammar.
fn qvalue(q: &str) -> Option<u16> {
    let (whole, fraction) = q.split_once('.').unwrap_or((q, ""));
    if fraction.len() > 3 || !fraction.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let thousandths = format!("{fraction:0<3}").parse::<u16>().ok()?;
    match whole {
        "1" if thousandths == 0 => Some(1000),
        "0" => Some(thousandths),
        _ => None,
    }
}

/// How long before the invocation's deadline a sibling still being made is given up on for
/// this answer, and the variant read and answered instead (its making goes on, and stores
/// the sibling for the next request): reading a variant of at most `MAX_VARIANT_BYTES`
/// from S3 and answering it takes well under this.
pub const ANSWER_MARGIN: Duration = Duration::from_secs(2);

/// Makes the sibling at `stored`, or says `NotNow` once the time left before `deadline`
/// (less [`ANSWER_MARGIN`]) runs out: the making goes on without this request.
async fn make_within(
    siblings: &Siblings,
    stored: &str,
    deadline: Option<Instant>,
) -> Result<Sibling> {
    let Some(deadline) = deadline else {
        return siblings.make(stored).await;
    };
    let stop = deadline.checked_sub(ANSWER_MARGIN).unwrap_or(deadline);
    match tokio::time::timeout_at(stop, siblings.make(stored)).await {
        Ok(made) => made,
        Err(_) => {
            tracing::warn!(path = stored, "a sibling was not made before the deadline; the variant is answered while it is made");
            Ok(Sibling::NotNow)
        }
    }
}

/// The answer to `method` on `uri_path` (as requested: percent-encoded, leading slash),
/// sent before `deadline` (the Lambda invocation's, less [`ANSWER_MARGIN`]) when there is one.
pub async fn answer(
    siblings: &Siblings,
    method: &Method,
    uri_path: &str,
    deadline: Option<Instant>,
) -> Response<Bytes> {
    if method != Method::GET && method != Method::HEAD {
        return error_response(&ApiError::MethodNotAllowed(method.to_string()));
    }
    let missing = || error_response(&ApiError::NotFound(format!("no file at {uri_path}")));
    let Ok(path) = percent_encoding::percent_decode_str(uri_path).decode_utf8() else {
        return missing();
    };
    // The path as requested, with one leading slash: `//img/upload/...` names nothing.
    let Some(stored) = path.strip_prefix('/') else {
        return missing();
    };
    // Every other path is refused by `make` too, unread.
    let Some((variant, format)) = crate::domain::image_record::sibling_of(stored) else {
        return missing();
    };
    let made = match make_within(siblings, stored, deadline).await {
        Ok(Sibling::NotNow) => {
            crate::operations::siblings::read_variant(siblings.files(), stored).await
        }
        made => made,
    };
    match made {
        // Too large for the function's answer: the variant's own URL, which the frontend
        // now answers with the stored sibling.
        Ok(Sibling::Made(sibling)) => {
            let variant_url = format!("/{variant}");
            sibling_response(method, format, CACHE_CONTROL, sibling, &variant_url)
        }
        Ok(Sibling::StandIn(stand_in)) => {
            answer_stand_in(siblings, method, variant, stand_in, deadline).await
        }
        Ok(Sibling::Variant {
            bytes,
            content_type,
        }) => file_response(method, content_type, FALLBACK_CACHE_CONTROL, bytes),
        Ok(Sibling::Missing | Sibling::NotNow) => missing(),
        Err(err) => {
            tracing::error!(path = stored, error = %error_chain(&err), "a sibling could not be made");
            error_response(&err)
        }
    }
}

/// The sibling in `stand_in` of `variant`, answered at the path of one the variant does not
/// get: the stored one, or one made now. Past [`MAX_ANSWERED_BYTES`] the viewer is sent to
/// its own URL, which the frontend answers from storage (the variant's URL would choose
/// the AVIF again).
async fn answer_stand_in(
    siblings: &Siblings,
    method: &Method,
    variant: &str,
    stand_in: SiblingFormat,
    deadline: Option<Instant>,
) -> Response<Bytes> {
    let path = sibling_path(variant, stand_in);
    let made = match siblings.files().read(&path, MAX_VARIANT_BYTES).await {
        Ok(Some(bytes)) => Ok(Sibling::Made(bytes)),
        Ok(None) => make_within(siblings, &path, deadline).await,
        Err(err) => Err(err),
    };
    let made = match made {
        Ok(Sibling::NotNow) => {
            crate::operations::siblings::read_variant(siblings.files(), &path).await
        }
        made => made,
    };
    match made {
        Ok(Sibling::Made(sibling)) => {
            let url = format!("/{path}");
            sibling_response(method, stand_in, STAND_IN_CACHE_CONTROL, sibling, &url)
        }
        Ok(Sibling::Variant {
            bytes,
            content_type,
        }) => file_response(method, content_type, FALLBACK_CACHE_CONTROL, bytes),
        Ok(Sibling::Missing | Sibling::StandIn(_) | Sibling::NotNow) => {
            error_response(&ApiError::NotFound(format!("no file at /{path}")))
        }
        Err(err) => {
            tracing::error!(path, error = %error_chain(&err), "a stand-in sibling could not be made");
            error_response(&err)
        }
    }
}

/// A sibling in the body, or past [`MAX_ANSWERED_BYTES`] a redirect to `too_large_to`.
fn sibling_response(
    method: &Method,
    format: SiblingFormat,
    cache_control: &'static str,
    sibling: Bytes,
    too_large_to: &str,
) -> Response<Bytes> {
    if sibling.len() <= MAX_ANSWERED_BYTES {
        return file_response(method, format.content_type(), cache_control, sibling);
    }
    let mut response = Response::new(Bytes::new());
    *response.status_mut() = StatusCode::TEMPORARY_REDIRECT;
    set_header(&mut response, LOCATION, too_large_to);
    set_header(&mut response, http::header::CACHE_CONTROL, "no-store");
    response
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::domain::image_record::SiblingSource;
    use crate::store::files::SharedFiles;
    use crate::store::memory_files::MemoryFiles;

    /// The extension, `:` and the variant's bytes; a variant of `large` bytes makes a
    /// sibling one byte over what an answer may carry, an `anim` one gets no AVIF.
    fn fake_encode(
        source: SiblingSource<'_>,
        format: SiblingFormat,
    ) -> crate::error::Result<Option<Vec<u8>>> {
        let variant = source.variant;
        if variant == b"large" {
            return Ok(Some(vec![0; MAX_ANSWERED_BYTES + 1]));
        }
        if variant.starts_with(b"anim") && format == SiblingFormat::Avif {
            return Ok(None);
        }
        Ok(Some(
            [format.extension().as_bytes(), b":", variant].concat(),
        ))
    }

    fn header(response: &Response<Bytes>, name: &str) -> Option<String> {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    }

    async fn siblings_of(stored: &[(&str, &str)]) -> (SharedFiles, Siblings) {
        let files: SharedFiles = Arc::new(MemoryFiles::new());
        for (path, bytes) in stored {
            let bytes = Bytes::from(bytes.to_string());
            files.put(path, bytes, "image/jpeg").await.expect("put");
        }
        let siblings = Siblings::new(Arc::clone(&files), fake_encode);
        (files, siblings)
    }

    #[tokio::test]
    async fn sibling_paths_are_answered_as_files_and_everything_else_as_our_errors() {
        let (files, siblings) = siblings_of(&[
            ("img/upload/a--1.medium.jpg", "medium"),
            ("img/upload/a--1.big.jpg", "large"),
        ])
        .await;

        for format in SiblingFormat::ALL {
            let path = format!("/img/upload/a--1.medium.jpg.{}", format.extension());
            let made = answer(&siblings, &Method::GET, &path, None).await;
            assert_eq!(made.status(), 200);
            let content_type = header(&made, "content-type");
            assert_eq!(content_type.as_deref(), Some(format.content_type()));
            let cache_control = header(&made, "cache-control");
            assert_eq!(cache_control.as_deref(), Some(CACHE_CONTROL));
            let body = format!("{}:medium", format.extension());
            assert_eq!(&made.body()[..], body.as_bytes());
            let head = answer(&siblings, &Method::HEAD, &path, None).await;
            assert_eq!((head.status().as_u16(), head.body().len()), (200, 0));
        }

        // Too large for the function's answer: stored, and the viewer sent back to the
        // variant's URL, which the frontend now answers from storage.
        for format in SiblingFormat::ALL {
            let path = format!("/img/upload/a--1.big.jpg.{}", format.extension());
            let redirected = answer(&siblings, &Method::GET, &path, None).await;
            assert_eq!(redirected.status(), 307);
            let location = header(&redirected, "location");
            assert_eq!(location.as_deref(), Some("/img/upload/a--1.big.jpg"));
            let cache_control = header(&redirected, "cache-control");
            assert_eq!(cache_control.as_deref(), Some("no-store"));
            let stored = files.exists(&path[1..]).await;
            assert!(stored.expect("exists"));
        }

        for path in [
            "/img/upload/a--1.small.jpg.webp",
            "/img/upload/a--1.small.jpg.avif",
            "/img/upload/a--1.medium.jpg",
            "/img/upload/a--1.medium.jpg.avif.webp",
            "/img/upload/%FF.medium.jpg.webp",
            "/",
        ] {
            let missing = answer(&siblings, &Method::GET, path, None).await;
            assert_eq!(missing.status(), 404, "{path}");
            let content_type = header(&missing, "content-type");
            assert_eq!(content_type.as_deref(), Some("application/json"));
        }
        let posted = answer(
            &siblings,
            &Method::POST,
            "/img/upload/a--1.medium.jpg.avif",
            None,
        )
        .await;
        assert_eq!(posted.status(), 405);
    }

    #[tokio::test]
    async fn a_variant_with_no_avif_is_answered_its_webp_at_the_avif_url() {
        let (files, siblings) = siblings_of(&[
            ("img/upload/a--1.medium.gif", "anim medium"),
            ("img/upload/a--1.small.gif", "anim small"),
            ("img/upload/a--1.small.gif.webp", "stored webp"),
        ])
        .await;
        // Made now (and stored under its own name), or the stored one; cached for a day.
        for (variant, body) in [("medium", "webp:anim medium"), ("small", "stored webp")] {
            for _ in 0..2 {
                let path = format!("/img/upload/a--1.{variant}.gif.avif");
                let answered = answer(&siblings, &Method::GET, &path, None).await;
                assert_eq!(answered.status(), 200, "{path}");
                let content_type = header(&answered, "content-type");
                assert_eq!(content_type.as_deref(), Some("image/webp"));
                let cache_control = header(&answered, "cache-control");
                assert_eq!(cache_control.as_deref(), Some(STAND_IN_CACHE_CONTROL));
                assert_eq!(&answered.body()[..], body.as_bytes());
            }
        }
        assert!(files
            .exists("img/upload/a--1.medium.gif.webp")
            .await
            .expect("exists"));
        assert!(!files
            .exists("img/upload/a--1.medium.gif.avif")
            .await
            .expect("exists"));
    }

    #[tokio::test]
    async fn a_stand_in_too_large_to_answer_sends_the_viewer_to_its_own_url() {
        let files: SharedFiles = Arc::new(MemoryFiles::new());
        let big_webp = Bytes::from(vec![1; MAX_ANSWERED_BYTES + 1]);
        files
            .put(
                "img/upload/a--1.big.gif",
                Bytes::from("anim big"),
                "image/gif",
            )
            .await
            .expect("put");
        files
            .put("img/upload/a--1.big.gif.webp", big_webp, "image/webp")
            .await
            .expect("put");
        let siblings = Siblings::new(files, fake_encode);
        let answered = answer(
            &siblings,
            &Method::GET,
            "/img/upload/a--1.big.gif.avif",
            None,
        )
        .await;
        assert_eq!(answered.status(), 307);
        let location = header(&answered, "location");
        assert_eq!(location.as_deref(), Some("/img/upload/a--1.big.gif.webp"));
    }

    /// Stands in for an encode longer than the invocation has left (a 50 MP original).
    fn slow_encode(
        source: SiblingSource<'_>,
        format: SiblingFormat,
    ) -> crate::error::Result<Option<Vec<u8>>> {
        std::thread::sleep(Duration::from_millis(600));
        fake_encode(source, format)
    }

    /// Past the invocation's deadline (less the margin) the variant is answered, cacheable
    /// as for an encode failure, instead of a timeout CloudFront caches nothing of; the
    /// encode goes on and stores the sibling for the next request.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_sibling_not_made_before_the_deadline_answers_the_variant() {
        let files: SharedFiles = Arc::new(MemoryFiles::new());
        let variant = "img/upload/d--1.medium.jpg";
        files
            .put(variant, Bytes::from("medium"), "image/jpeg")
            .await
            .expect("put");
        let siblings = Siblings::new(Arc::clone(&files), slow_encode);
        let path = format!("/{variant}.avif");
        let started = Instant::now();
        let deadline = started + ANSWER_MARGIN + Duration::from_millis(100);
        let answered = answer(&siblings, &Method::GET, &path, Some(deadline)).await;
        assert!(
            started.elapsed() < Duration::from_millis(500),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(answered.status(), 200);
        assert_eq!(&answered.body()[..], b"medium");
        let cache_control = header(&answered, "cache-control");
        assert_eq!(cache_control.as_deref(), Some(FALLBACK_CACHE_CONTROL));
        // The making went on without the request.
        let stored = format!("{variant}.avif");
        let until = Instant::now() + Duration::from_secs(10);
        while files.read(&stored, 100).await.expect("read").is_none() {
            assert!(Instant::now() < until, "the sibling was never stored");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// The case list ImageFilesFunction is also held to (template/image_files.rs runs it there).
#[cfg(test)]
mod shared_cases {
    use super::chosen_sibling;
    use crate::domain::image_record::{upload_file, SiblingFormat, UploadFile};

    fn cases() -> serde_json::Value {
        serde_json::from_str(include_str!("../../tests/cases/image_files.json")).expect("json")
    }

    #[test]
    fn the_sibling_is_chosen_by_the_shared_accept_cases() {
        for case in cases()["accept"].as_array().expect("accept") {
            let (accept, chosen) = (case[0].as_str().expect("header"), case[1].as_str());
            let format = chosen_sibling(accept).map(SiblingFormat::extension);
            assert_eq!(format, chosen, "{accept}");
        }
    }

    #[test]
    fn the_rules_people_rely_on() {
        let chosen = |accept| chosen_sibling(accept).map(SiblingFormat::extension);
        // Chromium's Accept for images, and Firefox's.
        let chromium = "image/avif,image/webp,image/apng,image/svg+xml,image/*,*/*;q=0.8";
        assert_eq!(chosen(chromium), Some("avif"));
        assert_eq!(chosen("image/avif,image/webp,*/*"), Some("avif"));
        // Equal qualities: the AVIF; a higher one for WebP: the WebP.
        assert_eq!(chosen("image/avif;q=0.8,image/webp;q=0.80"), Some("avif"));
        assert_eq!(chosen("image/avif;q=0.5,image/webp;q=0.6"), Some("webp"));
        // AVIF refused, or not named: the WebP; WebP refused: nothing.
        assert_eq!(chosen("image/avif;q=0,image/webp"), Some("webp"));
        assert_eq!(chosen("image/webp"), Some("webp"));
        assert_eq!(chosen("image/avif,image/webp;q=0"), None);
        assert_eq!(chosen("image/avif"), None);
        // Wildcards name no format.
        assert_eq!(chosen("image/*"), None);
        assert_eq!(chosen("image/*,*/*;q=0.8"), None);
    }

    #[test]
    fn paths_are_named_by_the_shared_path_cases() {
        for case in cases()["paths"].as_array().expect("paths") {
            let path = case[0].as_str().expect("path");
            let kind = path
                .strip_prefix('/')
                .and_then(upload_file)
                .map(|kind| match kind {
                    UploadFile::Original => "original",
                    UploadFile::Variant => "variant",
                    UploadFile::Sibling(_) => "sibling",
                });
            assert_eq!(kind, case[1].as_str(), "{path:.60}");
        }
    }
}

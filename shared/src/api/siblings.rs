//! The HTTP face of `operations::siblings`: a `GET` or `HEAD` of a WebP sibling's path that
//! found no stored file. The `image-sibling` function answers it behind the frontend's
//! origin group (template.yaml, `files-or-sibling-maker`); `sitehost serve` asks the operation
//! directly (`local::server`).

use bytes::Bytes;
use http::header::LOCATION;
use http::{Method, Response, StatusCode};

use crate::api::{error_response, file_response, set_header};
use crate::error::{error_chain, ApiError};
use crate::operations::siblings::{Sibling, WebpSiblings};
use crate::store::files::CACHE_CONTROL;

/// How long a variant answered in its sibling's place may be cached: a sibling that could
/// not be made is tried again after this, not at every request and not never.
pub const FALLBACK_CACHE_CONTROL: &str = "public, max-age=300";

/// The largest sibling answered in the body. A function URL's buffered answer is at most
/// 6 MB after base64 (4.5 MB of bytes); a larger sibling, already stored, is answered with
/// a redirect to the variant's own URL, which the frontend then answers with it.
pub const MAX_ANSWERED_BYTES: usize = 4 << 20;

/// Whether an `Accept` header names `image/webp` with a quality above zero: the rule of
/// `sitehost serve` and of the frontend's ImageFilesFunction (template.yaml), both held to
/// `shared/tests/cases/accept_webp.json`. Only the type itself counts: `image/*` and `*/*`
/// are sent by clients that cannot all decode WebP. A quality outside RFC 9110's grammar
/// (`0x10`, `inf`, `1.5`, `.5`) makes the range count for nothing.
pub fn accepts_webp(accept: &str) -> bool {
    accept.split(',').any(|range| {
        let mut params = range.split(';');
        let kind = params.next().unwrap_or_default().trim();
        kind.eq_ignore_ascii_case("image/webp")
            && params.all(|param| match param.split_once('=') {
                Some((name, value)) if name.trim().eq_ignore_ascii_case("q") => {
                    qvalue_above_zero(value.trim())
                }
                _ => true,
            })
    })
}

/// RFC 9110's `qvalue`, `0[.ddd]` or `1[.000]`, above zero.
fn qvalue_above_zero(q: &str) -> bool {
    let (whole, fraction) = q.split_once('.').unwrap_or((q, ""));
    let digits = fraction.len() <= 3 && fraction.bytes().all(|b| b.is_ascii_digit());
    match whole {
        "1" => digits && fraction.bytes().all(|b| b == b'0'),
        "0" => digits && fraction.bytes().any(|b| b != b'0'),
        _ => false,
    }
}

/// The answer to `method` on `uri_path` (as requested: percent-encoded, leading slash).
pub async fn answer(siblings: &WebpSiblings, method: &Method, uri_path: &str) -> Response<Bytes> {
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
    let made = match siblings.make(stored).await {
        Ok(Sibling::NotNow) => {
            crate::operations::siblings::read_variant(siblings.files(), stored).await
        }
        made => made,
    };
    match made {
        Ok(Sibling::Made(webp)) if webp.len() > MAX_ANSWERED_BYTES => {
            let mut response = Response::new(Bytes::new());
            *response.status_mut() = StatusCode::TEMPORARY_REDIRECT;
            let variant = path.strip_suffix(".webp").unwrap_or(&path);
            set_header(&mut response, LOCATION, variant);
            set_header(&mut response, http::header::CACHE_CONTROL, "no-store");
            response
        }
        Ok(Sibling::Made(webp)) => file_response(method, "image/webp", CACHE_CONTROL, webp),
        Ok(Sibling::Missing | Sibling::NotNow) => missing(),
        Ok(Sibling::Variant {
            bytes,
            content_type,
        }) => file_response(method, content_type, FALLBACK_CACHE_CONTROL, bytes),
        Err(err) => {
            tracing::error!(path = stored, error = %error_chain(&err), "a WebP sibling could not be made");
            error_response(&err)
        }
    }
}

#[cfg(all(test, feature = "local"))]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::local::disk_files::LocalFiles;
    use crate::store::files::SharedFiles;

    /// `webp:` and the variant's bytes; a variant of `large` bytes makes a sibling one
    /// byte over what an answer may carry.
    fn fake_webp(variant: &[u8]) -> crate::error::Result<Vec<u8>> {
        if variant == b"large" {
            return Ok(vec![0; MAX_ANSWERED_BYTES + 1]);
        }
        Ok([&b"webp:"[..], variant].concat())
    }

    #[tokio::test]
    async fn sibling_paths_are_answered_as_files_and_everything_else_as_our_errors() {
        let dir = tempfile::tempdir().expect("dir");
        let files: SharedFiles = Arc::new(LocalFiles::open(dir.path()).expect("files"));
        for (path, bytes) in [
            ("img/upload/a--1.medium.jpg", "medium"),
            ("img/upload/a--1.big.jpg", "large"),
        ] {
            files
                .put(path, Bytes::from(bytes), "image/jpeg")
                .await
                .expect("put");
        }
        let siblings = WebpSiblings::new(Arc::clone(&files), fake_webp);
        let header = |response: &Response<Bytes>, name| {
            response
                .headers()
                .get(name)
                .and_then(|v: &http::HeaderValue| v.to_str().ok())
                .map(str::to_string)
        };

        let made = answer(&siblings, &Method::GET, "/img/upload/a--1.medium.jpg.webp").await;
        assert_eq!(made.status(), 200);
        assert_eq!(header(&made, "content-type").as_deref(), Some("image/webp"));
        assert_eq!(
            header(&made, "cache-control").as_deref(),
            Some(CACHE_CONTROL)
        );
        assert_eq!(&made.body()[..], b"webp:medium");
        let head = answer(&siblings, &Method::HEAD, "/img/upload/a--1.medium.jpg.webp").await;
        assert_eq!((head.status().as_u16(), head.body().len()), (200, 0));

        // Too large for the function's answer: stored, and the viewer sent back to the
        // variant's URL, which the frontend now answers from storage.
        let redirected = answer(&siblings, &Method::GET, "/img/upload/a--1.big.jpg.webp").await;
        assert_eq!(redirected.status(), 307);
        assert_eq!(
            header(&redirected, "location").as_deref(),
            Some("/img/upload/a--1.big.jpg")
        );
        assert_eq!(
            header(&redirected, "cache-control").as_deref(),
            Some("no-store")
        );
        let stored = files.exists("img/upload/a--1.big.jpg.webp").await;
        assert!(stored.expect("exists"));

        for path in [
            "/img/upload/a--1.small.jpg.webp",
            "/img/upload/a--1.medium.jpg",
            "/img/upload/%FF.medium.jpg.webp",
            "/",
        ] {
            let missing = answer(&siblings, &Method::GET, path).await;
            assert_eq!(missing.status(), 404, "{path}");
            assert_eq!(
                header(&missing, "content-type").as_deref(),
                Some("application/json")
            );
        }
        let posted = answer(&siblings, &Method::POST, "/img/upload/a--1.medium.jpg.webp").await;
        assert_eq!(posted.status(), 405);
    }
}

/// The case list ImageFilesFunction is also held to (template_consistency.rs runs it there).
#[cfg(test)]
mod shared_cases {
    use super::accepts_webp;
    use crate::image_record::{upload_file, UploadFile};

    fn cases() -> serde_json::Value {
        serde_json::from_str(include_str!("../../tests/cases/image_files.json")).expect("json")
    }

    #[test]
    fn webp_is_chosen_by_the_shared_accept_cases() {
        for case in cases()["accept"].as_array().expect("accept") {
            let (accept, webp) = (case[0].as_str().expect("header"), case[1].as_bool());
            assert_eq!(Some(accepts_webp(accept)), webp, "{accept}");
        }
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
                    UploadFile::WebpSibling => "sibling",
                });
            assert_eq!(kind, case[1].as_str(), "{path:.60}");
        }
    }
}

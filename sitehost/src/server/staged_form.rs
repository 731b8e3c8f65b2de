//! `POST /staging/<upload_id>`: the form of a staged upload when `sitehost serve` keeps the
//! files (the embedded store's `staged_upload_form` points here), in the place of S3's
//! presigned POST. It takes what S3 takes: a `multipart/form-data` body with the form's
//! fields and then the file as `file`, of 1 byte to the size declared, before the session
//! expires, and answers as S3 does by default: 204, no body. The token in the path works
//! once: a second post, a used or expired session is refused, and so is a file over its
//! declared size, before more of it than that is read.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::header::{HeaderValue, ACCESS_CONTROL_ALLOW_ORIGIN, CONNECTION, CONTENT_TYPE};
use http::{HeaderMap, Method, Response, StatusCode};
use http_body_util::BodyExt;
use hyper::body::Incoming;

use crate::api::{error_response, App};
use crate::error::{ApiError, Result};
use crate::operations::images::staged::{is_upload_id, staged_path};
use crate::store::files::STAGING_PREFIX;

/// Room for the form's other fields and the multipart framing around the file.
const FIELDS_BYTES: u64 = 64 * 1024;

/// The answer to a request for a staged upload's form, or `None` for any other request.
pub async fn receive(
    app: &App,
    method: &Method,
    path: &str,
    headers: &HeaderMap,
    body: Incoming,
    timeout: Duration,
) -> std::result::Result<Response<Bytes>, Incoming> {
    let Some(upload_id) = path
        .strip_prefix('/')
        .and_then(|p| p.strip_prefix(STAGING_PREFIX))
    else {
        return Err(body);
    };
    let result = if method != Method::POST {
        Err(ApiError::MethodNotAllowed(method.to_string()))
    } else {
        match tokio::time::timeout(timeout, accept(app, upload_id, headers, body)).await {
            Ok(result) => result,
            Err(_) => Err(ApiError::RequestTimeout(format!(
                "The file was not received within {} s.",
                timeout.as_secs_f64()
            ))),
        }
    };
    let mut response = match result {
        Ok(()) => {
            let mut response = Response::new(Bytes::new());
            *response.status_mut() = StatusCode::NO_CONTENT;
            response
        }
        Err(err) => {
            // The unread rest of the body makes the connection unusable.
            let mut response = error_response(&err);
            response
                .headers_mut()
                .insert(CONNECTION, HeaderValue::from_static("close"));
            response
        }
    };
    // As the deployed staging bucket's CORS rule: a page on any origin may post the form
    // with `fetch` and read the answer.
    response
        .headers_mut()
        .insert(ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
    Ok(response)
}

/// Checks the session, reads the form and stores its file.
async fn accept(app: &App, upload_id: &str, headers: &HeaderMap, body: Incoming) -> Result<()> {
    let services = &app.services;
    let no_such = || ApiError::NotFound("There is no staged upload at this URL.".into());
    if !is_upload_id(upload_id) {
        return Err(no_such());
    }
    let files = services.files.as_ref().ok_or_else(no_such)?;
    let now = services.clock.now();
    let session = services
        .store
        .get_upload_session(upload_id, now)
        .await?
        .ok_or_else(no_such)?;
    if session.used {
        return Err(ApiError::StateConflict(
            "This staged upload was used already; start another.".into(),
        ));
    }
    if now >= session.expires_at {
        return Err(ApiError::Forbidden(
            "This staged upload's form has expired; start another.".into(),
        ));
    }
    let path = staged_path(upload_id);
    if files.exists(&path).await? {
        return Err(ApiError::StateConflict(
            "A file was posted for this staged upload already: the form takes one.".into(),
        ));
    }
    let content_type = headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let boundary = multer::parse_boundary(content_type).map_err(|_| {
        ApiError::invalid("Post the form as multipart/form-data: its fields, then the file.")
    })?;
    let file = read_file_field(body, boundary, session.size, &path).await?;
    // The pipeline reads the type from the bytes; the name keeps no extension.
    files.put(&path, file, "application/octet-stream").await?;
    Ok(())
}

/// The form's file, of 1 byte to `size`, after fields of which only `key` means something
/// (it must be `path`); no more of the body than that is read.
async fn read_file_field(body: Incoming, boundary: String, size: u64, path: &str) -> Result<Bytes> {
    let constraints = multer::Constraints::new().size_limit(
        multer::SizeLimit::new()
            .whole_stream(size + FIELDS_BYTES)
            .for_field("file", size),
    );
    let mut form =
        multer::Multipart::with_constraints(body.into_data_stream(), boundary, constraints);
    let too_large = || {
        ApiError::TooLarge(format!(
            "The file is over the size declared for this upload, {}.",
            crate::config::byte_size(size)
        ))
    };
    let unreadable = |err: multer::Error| match err {
        multer::Error::FieldSizeExceeded { .. } | multer::Error::StreamSizeExceeded { .. } => {
            too_large()
        }
        other => ApiError::invalid(format!("The form could not be read: {other}.")),
    };
    while let Some(mut field) = form.next_field().await.map_err(unreadable)? {
        match field.name() {
            Some("file") => {
                let mut bytes = BytesMut::new();
                while let Some(chunk) = field.chunk().await.map_err(unreadable)? {
                    bytes.extend_from_slice(&chunk);
                }
                if bytes.is_empty() {
                    return Err(ApiError::field("file", "The file is empty."));
                }
                return Ok(bytes.freeze());
            }
            Some("key") => {
                let key = field.text().await.map_err(unreadable)?;
                if key != path {
                    return Err(ApiError::field(
                        "key",
                        "The key field must be the form's own, as the staged upload gave it.",
                    ));
                }
            }
            // Fields S3 forms carry (the policy and its signature) mean nothing here.
            _ => {}
        }
    }
    Err(ApiError::field(
        "file",
        "The form has no file: send it last, as the field `file`.",
    ))
}

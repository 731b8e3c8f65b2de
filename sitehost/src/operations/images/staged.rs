//! Staged uploads: `POST /api/v2/images/uploads/` starts one (a session and a form the
//! client posts one file with: S3 when deployed, `sitehost serve` itself locally), and
//! `POST /api/v2/images/` with its `upload_id` makes the image ([`claim`], then the usual
//! upload pipeline, `upload`). A file too large for base64 in a Lambda request goes this way.

use rand::Rng;
use serde_json::{json, Map, Value};

use crate::config::byte_size;
use crate::domain::account::Caller;
use crate::error::{ApiError, FieldErrors, Result};
use crate::operations::{Reply, Services};
use crate::store::files::STAGING_PREFIX;
use crate::store::UploadSession;

/// How long the form is accepted after the session starts.
pub const FORM_SECS: i64 = 15 * 60;
/// How long after the form expires its `upload_id` may still make the image: a file whose
/// post began just in time may take a while to arrive.
pub const CREATE_GRACE_SECS: i64 = 60 * 60;
/// Longest file name kept from the client.
pub const MAX_NAME_CHARS: usize = 255;
/// Hex digits of an `upload_id` (128 random bits).
const UPLOAD_ID_LEN: usize = 32;

/// Where the staged file of `upload_id` is kept.
pub fn staged_path(upload_id: &str) -> String {
    format!("{STAGING_PREFIX}{upload_id}")
}

/// Whether `text` has the shape of an `upload_id` (checked before any store call, and
/// what keeps a path or key made of it plain).
pub fn is_upload_id(text: &str) -> bool {
    text.len() == UPLOAD_ID_LEN
        && text
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn iso8601(secs: i64) -> String {
    chrono::DateTime::from_timestamp(secs, 0)
        .map(|t| t.format("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_default()
}

/// `{"name": "IMG_2040.jpg", "size": 5508789}`: the file name (optional) and its size in
/// bytes, 1 to the staged upload limit.
fn parse_session_request(body: &[u8], max_bytes: u64) -> Result<(String, u64)> {
    let body = crate::domain::validate::json_object(body)?;
    let mut fields = FieldErrors::default();
    let name = match body.get("name") {
        None | Some(Value::Null) => Some("upload".to_string()),
        Some(value) => match crate::domain::validate::text_value(value, MAX_NAME_CHARS) {
            Ok(Some(name)) => Some(name),
            Ok(None) => Some("upload".to_string()),
            Err(message) => {
                fields.add("name", message);
                None
            }
        },
    };
    let size = match body.get("size") {
        None | Some(Value::Null) => {
            fields.add("size", "Required: the file's size in bytes.");
            None
        }
        Some(value) => match value.as_u64().filter(|size| *size > 0) {
            Some(size) => Some(size),
            None => {
                fields.add(
                    "size",
                    "Must be the file's size in bytes, a positive integer.",
                );
                None
            }
        },
    };
    fields.into_result()?;
    let (Some(name), Some(size)) = (name, size) else {
        return Err(ApiError::invalid("no name or size"));
    };
    if size > max_bytes {
        return Err(ApiError::TooLarge(format!(
            "The file is over the staged upload limit of {}.",
            byte_size(max_bytes)
        )));
    }
    Ok((name, size))
}

/// `POST /api/v2/images/uploads/`: records a session for the caller (its account and sub
/// id) and answers the form to post the file with. `origin` (`http://host:port`) makes a
/// form URL on the answering server absolute.
pub async fn create_session(
    services: &Services,
    caller: &Caller,
    body: &[u8],
    origin: &str,
) -> Result<Reply> {
    let max_bytes = services.config.fetch.max_bytes;
    let (name, size) = parse_session_request(body, max_bytes)?;
    let files = services.files.as_ref().ok_or_else(|| {
        ApiError::internal("no staged uploads here: this deployment has no file store")
    })?;
    let now = services.clock.now();
    let upload_id: String = {
        let bits: u128 = rand::rng().random();
        format!("{bits:032x}")
    };
    let session = UploadSession {
        upload_id: upload_id.clone(),
        account_id: caller.account_id,
        partner_sub_id: caller.restrict_sub_id.clone(),
        name,
        size,
        expires_at: now + FORM_SECS,
        used: false,
    };
    let path = staged_path(&upload_id);
    let form = files
        .staged_upload_form(&path, size, session.expires_at, now)
        .await?;
    services.store.create_upload_session(&session, now).await?;
    let url = if form.url.starts_with('/') {
        format!("{}{}", origin.trim_end_matches('/'), form.url)
    } else {
        form.url
    };
    let fields: Map<String, Value> = form
        .fields
        .into_iter()
        .map(|(name, value)| (name, Value::String(value)))
        .collect();
    Ok(Reply {
        status: http::StatusCode::CREATED,
        body: json!({
            "upload_id": upload_id,
            "url": url,
            "method": "POST",
            "fields": fields,
            "expires": iso8601(session.expires_at),
            "max_bytes": size,
        }),
        created_uri: None,
    })
}

/// The caller's open session of `upload_id`, marked used (so no other create makes an
/// image of it), or a 4xx saying why it cannot be used: unknown, another account's or
/// another sub id's, used already, expired (another account's is unknown, as every other
/// account's object is).
pub async fn claim(services: &Services, caller: &Caller, upload_id: &str) -> Result<UploadSession> {
    let now = services.clock.now();
    // Another account's is unknown here: a key never learns of another account's data.
    let unknown = || {
        ApiError::NotFound(
            "There is no staged upload with this upload_id in this account (or it is over a \
             day old); start one with POST /api/v2/images/uploads/."
                .into(),
        )
    };
    let used = || {
        ApiError::StateConflict(
            "This upload_id was used already: each staged upload makes one image. Start \
             another with POST /api/v2/images/uploads/."
                .into(),
        )
    };
    if !is_upload_id(upload_id) {
        return Err(unknown());
    }
    let session = services
        .store
        .get_upload_session(upload_id, now)
        .await?
        .ok_or_else(unknown)?;
    if session.account_id != caller.account_id {
        return Err(unknown());
    }
    if session.partner_sub_id != caller.restrict_sub_id {
        return Err(ApiError::Forbidden(
            "This upload_id was started by a key of another sub id; only a key of the same \
             sub id may use it."
                .into(),
        ));
    }
    if session.used {
        return Err(used());
    }
    if now >= session.expires_at + CREATE_GRACE_SECS {
        return Err(ApiError::field(
            "upload_id",
            format!(
                "This upload_id expired at {}; start another with POST /api/v2/images/uploads/.",
                iso8601(session.expires_at + CREATE_GRACE_SECS)
            ),
        ));
    }
    if !services.store.use_upload_session(upload_id).await? {
        return Err(used());
    }
    Ok(session)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_requests_name_a_size_within_the_limit() {
        let parse = |body: &str| parse_session_request(body.as_bytes(), 100);
        assert_eq!(
            parse(r#"{"name": "IMG_2040.jpg", "size": 55}"#).ok(),
            Some(("IMG_2040.jpg".to_string(), 55))
        );
        assert_eq!(
            parse(r#"{"size": 1}"#).ok(),
            Some(("upload".to_string(), 1))
        );
        for bad in [
            r#"{"name": "a.jpg"}"#,
            r#"{"size": 0}"#,
            r#"{"size": "5"}"#,
            r#"{"size": 1.5}"#,
        ] {
            assert!(matches!(parse(bad), Err(ApiError::Validation(_))), "{bad}");
        }
        match parse(r#"{"size": 101}"#) {
            Err(ApiError::TooLarge(message)) => {
                assert_eq!(
                    message,
                    "The file is over the staged upload limit of 100 bytes."
                )
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn upload_ids_are_32_hex_digits() {
        assert!(is_upload_id("0123456789abcdef0123456789abcdef"));
        for bad in [
            "",
            "0123456789ABCDEF0123456789abcdef",
            "../../etc/passwd",
            "0123456789abcdef0123456789abcde",
        ] {
            assert!(!is_upload_id(bad), "{bad}");
        }
        assert_eq!(iso8601(1_451_347_200), "2015-12-29T00:00:00Z");
    }
}

//! The image bytes of an upload: fetched from its `external_url` (holding a fetch slot) or
//! decoded from its base64 content, the time of either going to the request log.

use std::time::Instant;

use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
use base64::engine::DecodePaddingMode;
use base64::Engine;
use bytes::Bytes;

use super::request::Source;
use super::Uploads;
use crate::config::{byte_size, larger_images_by_url, Config};
use crate::error::{ApiError, Result};
use crate::operations::upload_stats::record_upload;

/// Standard alphabet, padding optional: clients differ in whether they pad.
const BASE64: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// The bytes of `source` and the name to make the file name from (the client's file name,
/// or the URL after redirects).
pub(super) async fn fetch_or_decode(
    uploads: &Uploads,
    config: &Config,
    account_id: i64,
    source: &Source,
) -> Result<(Bytes, Option<String>)> {
    let (bytes, name) = match source {
        Source::Url(url) => {
            let _slot = uploads
                .slots
                .fetch(account_id, config.fetch.total_timeout)?;
            let started = Instant::now();
            let fetched = uploads.fetcher.fetch(url).await;
            record_upload(|stats| stats.fetch = Some(started.elapsed()));
            let fetched = fetched?;
            (fetched.bytes, Some(fetched.final_url))
        }
        Source::Base64 { name, data } => {
            let started = Instant::now();
            let decoded = decode_base64(data, config.upload_max_bytes, config.fetch.max_bytes);
            record_upload(|stats| stats.base64 = Some(started.elapsed()));
            (Bytes::from(decoded?), name.clone())
        }
        // Read from the staging area by the upload itself, once its session is claimed.
        Source::Staged(_) => {
            return Err(ApiError::internal(
                "a staged upload's content is not fetched or decoded",
            ))
        }
    };
    record_upload(|stats| stats.bytes = Some(bytes.len() as u64));
    Ok((bytes, name))
}

/// Decodes plain base64 or a `data:` URI, tolerating line breaks and spaces. The size cap
/// is checked on the encoded length before decoding anything; its 413 says that a larger
/// image goes as a staged upload or by `external_url`, up to `fetch_max_bytes`.
fn decode_base64(data: &str, max_bytes: usize, fetch_max_bytes: u64) -> Result<Vec<u8>> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
                     image as a staged upload (POST /api/v2/images/uploads/, post the file to \
                     the form it gives, then POST /api/v2/images/ with its upload_id) or by \
                     external_url, which take files up to 26,214,400 bytes (26.2 MB)."
                ),
                other => panic!("{other:?}"),
            }
        }
    }
}

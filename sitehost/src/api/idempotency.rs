//! `Idempotency-Key` on business creates and image uploads, as the IETF httpapi draft "The
//! Idempotency-Key HTTP Header Field" has it: a retry with the same key and the same body
//! within a day gets the first answer's status and `Location` and writes nothing new; the
//! same key with another body is a 422; a retry while the first is still running is a 409.
//! Keys are per API key (`store::IdempotencyKey`): another caller's use of a key is never
//! seen. What is kept is the status and the `Location`, not the body: a replay reads the
//! object again as the caller's GET of it would, so it shows what that caller may see now
//! (a 404 once the object is gone). Only a success is remembered: a request that failed (a
//! 4xx, or a 503 after which nothing was written) gives its key back, so its retry runs
//! again.
//!
//! A store's create writes the key's answer in its own transaction (`store::held_key`;
//! DynamoDB: businesses, images, locations and posts; SQLite: businesses, images, sites and
//! posts): a key never runs twice, whatever fails between the change and the answer, and a
//! 503 whose write did commit is answered by the replay on retry. Where a create does not
//! take part, the answer is written here after the change.

use std::future::Future;

use bytes::Bytes;
use http::header::{HeaderValue, LOCATION};
use http::{HeaderMap, Response, StatusCode};
use sha1::{Digest, Sha1};

use crate::api::{header, Operation};
use crate::error::{ApiError, Result};
use crate::store::held_key::{self, Created, HeldKey};
use crate::store::{IdempotencyClaim, IdempotencyKey, IdempotencyStore, StoredAnswer};

pub const HEADER: &str = "idempotency-key";
/// Longest key accepted: a UUID is 36 characters; this leaves room for clients' prefixes.
pub const MAX_KEY_CHARS: usize = 255;
/// Marks an answer replayed from an earlier request with the same key (as Stripe's API
/// does), so a client can tell.
pub const REPLAYED_HEADER: &str = "idempotent-replayed";

/// The request's key, for the operations that take one: 1 to 255 visible ASCII characters
/// (an sf-string's; the quotes of a structured-field string are taken off). Read only once
/// the request is admitted, so that a refused key still spends its nonce and budget.
pub fn key_of(headers: &HeaderMap, operation: Operation) -> Result<Option<String>> {
    if !matches!(
        operation,
        Operation::BusinessCreate
            | Operation::ImageUpload
            | Operation::LocationCreate
            | Operation::SiteCreate
            | Operation::PostCreate
    ) {
        return Ok(None);
    }
    if !headers.contains_key(HEADER) {
        return Ok(None);
    }
    let invalid = || {
        ApiError::field(
            "Idempotency-Key",
            format!(
                "The Idempotency-Key header must be 1 to {MAX_KEY_CHARS} visible ASCII \
                 characters, e.g. a UUID."
            ),
        )
    };
    let text = header(headers, HEADER).ok_or_else(invalid)?;
    let key = text
        .trim()
        .strip_prefix('"')
        .and_then(|k| k.strip_suffix('"'))
        .unwrap_or(text.trim());
    if key.is_empty()
        || key.chars().count() > MAX_KEY_CHARS
        || !key.bytes().all(|b| b.is_ascii_graphic() || b == b' ')
    {
        return Err(invalid());
    }
    Ok(Some(key.to_string()))
}

/// What makes two requests the same: the operation and the body, byte for byte. SHA-1 is
/// enough: fingerprints are compared only within one API key's keys, so a collision could
/// only confuse that caller's own retries.
pub fn fingerprint(operation: Operation, body: &[u8]) -> String {
    let mut hasher = Sha1::new();
    hasher.update(format!("{operation:?}\n").as_bytes());
    hasher.update(body);
    hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Runs `operation` once for `key`: claims the key, runs, and records a success's status
/// and `Location` as the key's answer (or gives the key back after a failure). A request
/// that finds the key answered gets `replay` of that answer instead.
pub async fn run_once<Replay>(
    store: &dyn IdempotencyStore,
    key: &IdempotencyKey<'_>,
    fingerprint: &str,
    now: i64,
    operation: impl Future<Output = Result<Response<Bytes>>>,
    replay: impl FnOnce(StoredAnswer) -> Replay,
) -> Result<Response<Bytes>>
where
    Replay: Future<Output = Result<Response<Bytes>>>,
{
    let claim = format!("{:032x}", rand::random::<u128>());
    match store
        .claim_idempotency_key(key, fingerprint, &claim, now)
        .await?
    {
        IdempotencyClaim::Claimed => {}
        IdempotencyClaim::Answered(answer) => return replay(answer).await,
        IdempotencyClaim::InProgress => {
            return Err(ApiError::StateConflict(
                "A request with this Idempotency-Key is still being processed; retry it \
                 in a moment to get its answer."
                    .into(),
            ))
        }
        IdempotencyClaim::OtherRequest => {
            return Err(ApiError::Unprocessable(
                "This Idempotency-Key was used for another request (another operation or \
                 body) in the last 24 hours; use a new key for a new request."
                    .into(),
            ))
        }
    }
    let held = HeldKey::new(key, fingerprint, &claim, answer_of_created);
    let result = held_key::hold(held.clone(), operation).await;
    let answer = result.as_ref().ok().and_then(answer_of);
    let settled = match &answer {
        // The create wrote it with its change.
        Some(_) if held.answered() => Ok(()),
        Some(answer) => store.answer_idempotency_key(key, fingerprint, answer).await,
        // A failed request gives the key back, unless its change was answered after all
        // (a 503 whose transaction committed): the release's condition keeps an answer.
        None => store.release_idempotency_key(key, fingerprint).await,
    };
    if let Err(err) = settled {
        // The request's own outcome stands; the key may then answer 409 until its lease
        // ends, and the retry after that runs again.
        tracing::error!(
            account_id = key.account_id,
            error = %crate::error::error_chain(&err),
            "could not record the outcome of an idempotency key"
        );
    }
    result
}

/// The answer a create writes with its change: 201 and the object's `Location`, the path
/// of its GET in the route table (what the create's own answer names).
fn answer_of_created(created: Created) -> StoredAnswer {
    let (get, id) = match created {
        Created::Business(id) => (Operation::BusinessGet, id),
        Created::Image(id) => (Operation::ImageGet, id),
        Created::Location(id) => (Operation::LocationGet, id),
        Created::Site(id) => (Operation::SiteGet, id),
        Created::Post(id) => (Operation::PostGet, id),
    };
    let template = get.entry().paths.first().map_or("", |path| path.template);
    StoredAnswer {
        status: StatusCode::CREATED.as_u16(),
        created_uri: template.replace("{id}", &id.to_string()),
    }
}

/// What is kept of a success: its status and the created object's `Location`. Both
/// operations answer a success with a `Location`; without one there is nothing to read
/// again, so the key is given back instead.
fn answer_of(response: &Response<Bytes>) -> Option<StoredAnswer> {
    if !response.status().is_success() {
        return None;
    }
    let created_uri = response.headers().get(LOCATION)?.to_str().ok()?;
    Some(StoredAnswer {
        status: response.status().as_u16(),
        created_uri: created_uri.to_string(),
    })
}

/// `response`, the object read again, answered as the replay of `answer`: the first
/// answer's status and `Location`, marked replayed.
pub fn replayed(mut response: Response<Bytes>, answer: &StoredAnswer) -> Response<Bytes> {
    *response.status_mut() = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::OK);
    let headers = response.headers_mut();
    if let Ok(created_uri) = HeaderValue::from_str(&answer.created_uri) {
        headers.insert(LOCATION, created_uri);
    }
    headers.insert(REPLAYED_HEADER, HeaderValue::from_static("true"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(HEADER, HeaderValue::from_str(value).expect("value"));
        headers
    }

    #[test]
    fn keys_are_read_for_creates_and_uploads_only_and_checked() {
        let uuid = "8e03978e-40d5-43e8-bc93-6894a57f9324";
        for op in [Operation::BusinessCreate, Operation::ImageUpload] {
            assert_eq!(
                key_of(&headers(uuid), op).ok().flatten().as_deref(),
                Some(uuid)
            );
            assert_eq!(
                key_of(&headers(&format!("\"{uuid}\"")), op)
                    .ok()
                    .flatten()
                    .as_deref(),
                Some(uuid),
                "the structured-field string form"
            );
            assert!(key_of(&headers(&"k".repeat(256)), op).is_err());
            assert!(key_of(&headers("\"\""), op).is_err());
            assert_eq!(key_of(&HeaderMap::new(), op).ok(), Some(None));
        }
        assert_eq!(
            key_of(&headers(uuid), Operation::BusinessUpdate).ok(),
            Some(None),
            "an update is idempotent already"
        );
    }

    #[test]
    fn a_create_answers_with_its_get_path() {
        let answer = answer_of_created(Created::Business(12));
        assert_eq!(answer.status, 201);
        assert_eq!(answer.created_uri, "/api/v2/businesses/12/");
        assert_eq!(
            answer_of_created(Created::Image(7)).created_uri,
            "/api/v2/images/7/"
        );
        assert_eq!(
            answer_of_created(Created::Post(3)).created_uri,
            "/api/v2/posts/3/"
        );
    }

    #[test]
    fn fingerprints_tell_operations_and_bodies_apart() {
        let a = fingerprint(Operation::BusinessCreate, b"{\"business_name\": \"A\"}");
        assert_eq!(
            a,
            fingerprint(Operation::BusinessCreate, b"{\"business_name\": \"A\"}")
        );
        assert_ne!(
            a,
            fingerprint(Operation::BusinessCreate, b"{\"business_name\": \"B\"}")
        );
        assert_ne!(
            a,
            fingerprint(Operation::ImageUpload, b"{\"business_name\": \"A\"}")
        );
    }
}

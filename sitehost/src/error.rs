//! The one error type of the library and its mapping to HTTP status and body.

use std::collections::BTreeMap;

use aws_sdk_dynamodb::config::http::HttpResponse;
use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use serde_json::{json, Value};

/// Every failure a request can meet. `status()` and `body()` are the only place where
/// errors become HTTP.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// Validation failures, Tastypie style: field name to messages; whole-object problems
    /// go under `__all__`. A field inside nested input is named by its path, dot-separated
    /// (`upload.file`, `locations.0.phones`), and answered nested
    /// (`{"upload": {"file": [...]}}`); see [`FieldErrors::add_at`].
    #[error("validation failed: {0:?}")]
    Validation(BTreeMap<String, Vec<String>>),
    #[error("unauthorized: {0}")]
    Unauthorized(String),
    /// The request may not be served here at all (403): it did not come through the
    /// frontend host (`auth::origin`); or it names what only another sub id's key may use
    /// (a staged upload's `upload_id`), or a staged upload's expired form.
    #[error("forbidden: {0}")]
    Forbidden(String),
    #[error("not found: {0}")]
    NotFound(String),
    #[error("method {0} not allowed")]
    MethodNotAllowed(String),
    #[error("too large: {0}")]
    TooLarge(String),
    /// Over a per-key request budget (429 with `Retry-After`).
    #[error("too many requests: {message}")]
    TooManyRequests {
        message: String,
        retry_after_secs: u64,
    },
    /// The client was too slow sending its request (408); the connection is closed.
    #[error("request timeout: {0}")]
    RequestTimeout(String),
    /// The server is at capacity for this work (503 with `Retry-After`).
    #[error("unavailable: {message}")]
    Unavailable {
        message: String,
        retry_after_secs: u64,
    },
    /// DynamoDB or S3 failed in a way AWS documents as temporary (a 5xx, throttling,
    /// `SlowDown`, a timeout, a lost connection) and still did after the SDK's own bounded
    /// retries ([`ApiError::from_aws`]): 503 with `Retry-After`. A write may or may not have
    /// taken effect; its retry is safe (a create with the same `Idempotency-Key`). The cause
    /// goes to the logs only.
    #[error("{service} {operation}: a temporary failure")]
    Temporary {
        service: &'static str,
        operation: String,
        #[source]
        source: anyhow::Error,
    },
    /// A record names another the caller's account (and sub id) does not have: the `kind`
    /// (`image`, `business`) with this `id`, given in `field`. The stores signal it; it
    /// answers 400 on that field.
    #[error("{field}: no {kind} {id} in this account")]
    MissingReference {
        field: &'static str,
        kind: &'static str,
        id: i64,
    },
    /// A write would repeat a value that must be unique (`field`, e.g. an API key). The
    /// stores signal it; it answers 400 on that field.
    #[error("{field}: this value already exists")]
    Conflict { field: &'static str },
    /// The request conflicts with the current state of what it names (409): an image that
    /// is a business's logo, a request whose `Idempotency-Key` is still being served.
    #[error("conflict: {0}")]
    StateConflict(String),
    /// A well-formed request that cannot be processed as sent (422): an `Idempotency-Key`
    /// used before with another request.
    #[error("unprocessable: {0}")]
    Unprocessable(String),
    /// Our fault. The cause chain goes to the logs only ([`error_chain`]); the client sees a
    /// generic text. `?` on an `anyhow::Result` (`.context("what we were doing")`) lands here.
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

pub type Result<T, E = ApiError> = std::result::Result<T, E>;

impl ApiError {
    /// A single validation message for one field.
    pub fn field(field: &str, message: impl Into<String>) -> Self {
        let mut map = BTreeMap::new();
        map.insert(field.to_string(), vec![message.into()]);
        ApiError::Validation(map)
    }

    /// A whole-object validation message (`__all__`).
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::field("__all__", message)
    }

    /// An internal error with no underlying cause: a broken invariant of our own.
    pub fn internal(message: impl std::fmt::Display) -> Self {
        ApiError::Internal(anyhow::anyhow!("{message}"))
    }

    pub fn status(&self) -> u16 {
        match self {
            ApiError::Validation(_)
            | ApiError::MissingReference { .. }
            | ApiError::Conflict { .. } => 400,
            ApiError::Unauthorized(_) => 401,
            ApiError::Forbidden(_) => 403,
            ApiError::NotFound(_) => 404,
            ApiError::MethodNotAllowed(_) => 405,
            ApiError::StateConflict(_) => 409,
            ApiError::Unprocessable(_) => 422,
            ApiError::TooLarge(_) => 413,
            ApiError::TooManyRequests { .. } => 429,
            ApiError::RequestTimeout(_) => 408,
            ApiError::Unavailable { .. } | ApiError::Temporary { .. } => 503,
            ApiError::Internal(_) => 500,
        }
    }

    pub fn body(&self) -> Value {
        match self {
            ApiError::Validation(fields) => bounded_fields(fields),
            ApiError::MissingReference { field, kind, id } => {
                field_body(field, format!("There is no {kind} {id} in this account."))
            }
            ApiError::Conflict { field } => {
                field_body(field, format!("A {field} with this value already exists."))
            }
            ApiError::Unauthorized(msg)
            | ApiError::Forbidden(msg)
            | ApiError::NotFound(msg)
            | ApiError::TooLarge(msg)
            | ApiError::StateConflict(msg)
            | ApiError::Unprocessable(msg)
            | ApiError::RequestTimeout(msg)
            | ApiError::TooManyRequests { message: msg, .. }
            | ApiError::Unavailable { message: msg, .. } => json!({ "error": bounded(msg) }),
            ApiError::MethodNotAllowed(method) => {
                json!({ "error": format!("method {method} is not allowed on this path") })
            }
            ApiError::Temporary { .. } => json!({ "error": TEMPORARY_MESSAGE }),
            ApiError::Internal(_) => json!({ "error": "internal server error" }),
        }
    }

    /// How long the client should wait before retrying (the `Retry-After` header), for the
    /// answers that say to retry: 429 and 503.
    pub fn retry_after_secs(&self) -> Option<u64> {
        match self {
            ApiError::TooManyRequests {
                retry_after_secs, ..
            }
            | ApiError::Unavailable {
                retry_after_secs, ..
            } => Some(*retry_after_secs),
            ApiError::Temporary { .. } => Some(TEMPORARY_RETRY_AFTER_SECS),
            _ => None,
        }
    }

    /// The one mapping of a DynamoDB or S3 failure: [`ApiError::Temporary`] (503) when AWS
    /// documents it as retryable ([`is_temporary`]), an internal error (500) otherwise.
    /// `service` and `operation` name the call for the logs (`"dynamodb"`, `"PutItem
    /// (nonce)"`).
    pub fn from_aws<E>(
        service: &'static str,
        operation: &str,
        err: SdkError<E, HttpResponse>,
    ) -> ApiError
    where
        E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    {
        if is_temporary(&err) {
            tracing::warn!(
                service,
                operation,
                code = err.code(),
                "a temporary failure after the SDK's retries: answered 503"
            );
            return ApiError::Temporary {
                service,
                operation: operation.to_string(),
                source: anyhow::Error::new(err),
            };
        }
        ApiError::from(anyhow::Error::new(err).context(format!("{service} {operation}")))
    }
}

/// How long a partner is told to wait after a temporary failure of DynamoDB or S3. The SDK
/// has already retried with backoff (up to 3 attempts); a second is enough for a throttled
/// partition or a failed node, and a partner's own backoff takes over after that.
pub const TEMPORARY_RETRY_AFTER_SECS: u64 = 1;

const TEMPORARY_MESSAGE: &str = "The service's storage failed for a moment; the request may \
    or may not have taken effect. Retry it after the Retry-After seconds: an update or delete \
    as it was, a create with the same Idempotency-Key.";

/// Error codes DynamoDB and S3 document as retryable that the SDK's throttling and transient
/// lists (`aws_runtime::retries::classifiers`) leave to the status code or do not name: a
/// single write meeting a transaction in flight on its item, and the codes of 5xx answers.
const OTHER_TEMPORARY_CODES: [&str; 5] = [
    "TransactionConflictException",
    "InternalServerError",
    "InternalError",
    "ServiceUnavailable",
    "ServiceUnavailableException",
];

/// Whether AWS documents this failure as one to retry, as the SDK's retry classifiers do:
/// a timeout, a connection lost or refused, an answer that broke off, a throttling or
/// transient error code, or a 500, 502, 503 or 504. A request the SDK could not build or
/// send (a bug of ours), a 4xx with any other code, are not.
/// <https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Programming.Errors.html>,
/// <https://docs.aws.amazon.com/AmazonS3/latest/API/ErrorResponses.html>.
pub fn is_temporary<E: ProvideErrorMetadata>(err: &SdkError<E, HttpResponse>) -> bool {
    use aws_runtime::retries::classifiers::{THROTTLING_ERRORS, TRANSIENT_ERRORS};
    match err {
        SdkError::TimeoutError(_) | SdkError::ResponseError(_) => true,
        SdkError::DispatchFailure(failure) => !failure.is_user(),
        SdkError::ServiceError(context) => {
            let code = context.err().code().unwrap_or_default();
            THROTTLING_ERRORS.contains(&code)
                || TRANSIENT_ERRORS.contains(&code)
                || OTHER_TEMPORARY_CODES.contains(&code)
                || matches!(context.raw().status().as_u16(), 500 | 502 | 503 | 504)
        }
        _ => false,
    }
}

/// The body of a single message on one field, as `Validation` renders it.
fn field_body(field: &str, message: String) -> Value {
    json!({ bounded(field): [bounded(&message)] })
}

/// What an error body may echo of a request, so that a 50 KB query cannot make a 200 KB
/// answer: messages (which may quote a value) and field names of at most this many
/// characters, each message once, a few per field, and a bounded number of fields. Our own
/// longest message, the upload route's 413 that names both ways in for a larger image, is
/// about 340 characters.
const MAX_ECHO_CHARS: usize = 400;
const MAX_MESSAGES_PER_FIELD: usize = 5;
const MAX_FIELDS: usize = 50;

fn bounded(text: &str) -> String {
    match text.char_indices().nth(MAX_ECHO_CHARS) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_string(),
    }
}

fn bounded_fields(fields: &BTreeMap<String, Vec<String>>) -> Value {
    let mut body = serde_json::Map::new();
    for (field, messages) in fields {
        let mut shown: Vec<String> = Vec::new();
        for message in messages {
            let message = bounded(message);
            if !shown.contains(&message) && shown.len() < MAX_MESSAGES_PER_FIELD {
                shown.push(message);
            }
        }
        let path: Vec<String> = field.split(NESTED).map(bounded).collect();
        if !body.contains_key(&path[0]) && body.len() >= MAX_FIELDS {
            continue;
        }
        insert_nested(&mut body, &path, shown);
    }
    Value::Object(body)
}

/// Separates the steps of a nested field's path (`locations.0.phones`).
const NESTED: char = '.';

/// Puts `messages` at `path` in `body`, making objects on the way. A field with messages of
/// its own and nested ones too keeps its own under `__all__`, as a whole-object problem of
/// that part of the input.
fn insert_nested(
    body: &mut serde_json::Map<String, Value>,
    path: &[String],
    messages: Vec<String>,
) {
    let Some((first, rest)) = path.split_first() else {
        return;
    };
    if rest.is_empty() {
        match body.get_mut(first) {
            Some(Value::Object(nested)) => {
                insert_nested(nested, &["__all__".to_string()], messages);
            }
            Some(Value::Array(existing)) => existing.extend(messages.into_iter().map(Value::from)),
            _ => {
                body.insert(first.clone(), json!(messages));
            }
        }
        return;
    }
    let entry = body
        .entry(first.clone())
        .or_insert_with(|| Value::Object(serde_json::Map::new()));
    if let Value::Array(own) = entry {
        let own = std::mem::take(own);
        *entry = json!({ "__all__": own });
    }
    if let Value::Object(nested) = entry {
        insert_nested(nested, rest, messages);
    }
}

/// An error and its causes (`std::error::Error::source`), outermost first, as one line:
/// `outer: cause: root cause`. A cause whose text its wrapper's message already ends with
/// (`#[error("...: {0}")]` around `#[source]`) is not repeated.
pub fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut chain = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !chain.ends_with(&text) {
            chain.push_str(": ");
            chain.push_str(&text);
        }
        source = cause.source();
    }
    chain
}

/// Collects several field errors before failing, so a client sees all of them at once.
#[derive(Debug, Default)]
pub struct FieldErrors(BTreeMap<String, Vec<String>>);

impl FieldErrors {
    /// A message on a field inside nested input, by its path: `add_at(&["locations", "0",
    /// "phones"], ...)` answers `{"locations": {"0": {"phones": [...]}}}`.
    pub fn add_at(&mut self, path: &[&str], message: impl Into<String>) {
        self.add(&path.join(&NESTED.to_string()), message)
    }

    pub fn add(&mut self, field: &str, message: impl Into<String>) {
        self.0
            .entry(field.to_string())
            .or_default()
            .push(message.into());
    }

    /// How many fields have messages.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn into_result(self) -> Result<()> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(ApiError::Validation(self.0))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_fields_are_answered_nested() {
        let mut fields = FieldErrors::default();
        fields.add_at(&["upload", "file"], "not base64");
        fields.add_at(&["locations", "0", "phones"], "must be a list");
        fields.add_at(&["locations", "2", "city"], "too long");
        fields.add("locations", "at most 50");
        fields.add("business_name", "required");
        let body = fields
            .into_result()
            .err()
            .map(|e| e.body())
            .unwrap_or_default();
        assert_eq!(
            body,
            json!({
                "business_name": ["required"],
                "locations": {
                    "__all__": ["at most 50"],
                    "0": {"phones": ["must be a list"]},
                    "2": {"city": ["too long"]}
                },
                "upload": {"file": ["not base64"]}
            })
        );
    }

    #[test]
    fn an_error_body_echoes_a_bounded_amount_of_the_request() {
        let mut fields = FieldErrors::default();
        for _ in 0..5_000 {
            fields.add("deleted", "'x' is not a boolean.");
        }
        for i in 0..10 {
            fields.add("a_name", format!("message {i} {}", "y".repeat(10_000)));
        }
        for i in 0..500 {
            fields.add(&format!("field{i}"), "unknown");
        }
        let body = fields
            .into_result()
            .err()
            .map(|e| e.body())
            .unwrap_or_default();
        assert_eq!(body["deleted"], json!(["'x' is not a boolean."]));
        let names = body["a_name"].as_array().map(Vec::len);
        assert_eq!(names, Some(MAX_MESSAGES_PER_FIELD));
        assert!(body.to_string().len() < 8_000, "{}", body.to_string().len());
        let long = ApiError::Unauthorized("z".repeat(100_000))
            .body()
            .to_string();
        assert!(long.len() < MAX_ECHO_CHARS + 20, "{}", long.len());
    }

    #[test]
    fn internal_errors_hide_details() {
        let err = ApiError::internal("dynamodb said: secret table name");
        assert_eq!(err.status(), 500);
        assert_eq!(err.body(), json!({"error": "internal server error"}));
    }

    #[test]
    fn internal_errors_keep_their_cause_chain() {
        let root = std::io::Error::other("disk on fire");
        let err = ApiError::from(anyhow::Error::new(root).context("writing img/a.jpg"));
        assert_eq!(err.status(), 500);
        assert_eq!(error_chain(&err), "writing img/a.jpg: disk on fire");
        assert_eq!(err.body(), json!({"error": "internal server error"}));
    }

    #[test]
    fn validation_errors_are_keyed_by_field() {
        let err = ApiError::field("business_name", "This field is required.");
        assert_eq!(err.status(), 400);
        assert_eq!(
            err.body(),
            json!({"business_name": ["This field is required."]})
        );
    }

    #[test]
    fn store_errors_answer_400_on_their_field() {
        let missing = ApiError::MissingReference {
            field: "logo_image_id",
            kind: "image",
            id: 7,
        };
        assert_eq!(missing.status(), 400);
        assert_eq!(
            missing.body(),
            json!({"logo_image_id": ["There is no image 7 in this account."]})
        );
        let conflict = ApiError::Conflict { field: "key" };
        assert_eq!(conflict.status(), 400);
        assert_eq!(
            conflict.body(),
            json!({"key": ["A key with this value already exists."]})
        );
    }

    #[test]
    fn over_budget_is_429_with_the_message() {
        let err = ApiError::TooManyRequests {
            message: "over budget".into(),
            retry_after_secs: 12,
        };
        assert_eq!(err.status(), 429);
        assert_eq!(err.body(), json!({"error": "over budget"}));
    }

    /// The one mapping of AWS failures, per kind of error AWS documents as retryable, and
    /// for the kinds that are not.
    mod aws {
        use super::*;
        use aws_sdk_dynamodb::error::{ConnectorError, ErrorMetadata};
        use aws_sdk_dynamodb::operation::put_item::PutItemError;
        use aws_smithy_runtime_api::http::StatusCode;

        type Failure = SdkError<PutItemError, HttpResponse>;

        fn raw(status: u16) -> HttpResponse {
            HttpResponse::new(StatusCode::try_from(status).expect("a status"), "".into())
        }

        fn answered(status: u16, code: Option<&str>) -> Failure {
            let mut meta = ErrorMetadata::builder();
            if let Some(code) = code {
                meta = meta.code(code);
            }
            SdkError::service_error(PutItemError::generic(meta.build()), raw(status))
        }

        fn io(message: &str) -> Box<dyn std::error::Error + Send + Sync> {
            Box::new(std::io::Error::other(message.to_string()))
        }

        #[test]
        fn every_retryable_failure_is_a_503_with_retry_after() {
            let temporary: Vec<(&str, Failure)> = vec![
                ("500", answered(500, Some("InternalServerError"))),
                ("throttled", answered(400, Some("ThrottlingException"))),
                (
                    "partition",
                    answered(400, Some("ProvisionedThroughputExceededException")),
                ),
                ("account", answered(400, Some("RequestLimitExceeded"))),
                (
                    "in flight",
                    answered(400, Some("TransactionConflictException")),
                ),
                ("s3 500", answered(500, Some("InternalError"))),
                ("s3 slow down", answered(503, Some("SlowDown"))),
                ("unavailable", answered(503, Some("ServiceUnavailable"))),
                ("bare 502", answered(502, None)),
                ("bare 504", answered(504, None)),
                ("request timeout", answered(400, Some("RequestTimeout"))),
                ("timeout", SdkError::timeout_error(io("deadline"))),
                (
                    "reset",
                    SdkError::dispatch_failure(ConnectorError::io(io("reset"))),
                ),
                (
                    "connect timeout",
                    SdkError::dispatch_failure(ConnectorError::timeout(io("slow"))),
                ),
                (
                    "broken answer",
                    SdkError::response_error(io("eof"), raw(200)),
                ),
            ];
            for (kind, failure) in temporary {
                let err = ApiError::from_aws("dynamodb", "PutItem", failure);
                assert_eq!(err.status(), 503, "{kind}");
                assert_eq!(err.retry_after_secs(), Some(TEMPORARY_RETRY_AFTER_SECS));
                assert_eq!(err.body(), json!({ "error": TEMPORARY_MESSAGE }), "{kind}");
                assert!(error_chain(&err).starts_with("dynamodb PutItem"), "{kind}");
            }
        }

        #[test]
        fn other_failures_stay_internal_with_their_cause() {
            let ours: Vec<(&str, Failure)> = vec![
                ("invalid", answered(400, Some("ValidationException"))),
                ("denied", answered(403, Some("AccessDeniedException"))),
                ("no table", answered(400, Some("ResourceNotFoundException"))),
                ("not built", SdkError::construction_failure(io("no key"))),
                (
                    "bad request",
                    SdkError::dispatch_failure(ConnectorError::user(io("bad uri"))),
                ),
            ];
            for (kind, failure) in ours {
                let err = ApiError::from_aws("s3", "put img/a.jpg", failure);
                assert_eq!(err.status(), 500, "{kind}");
                assert_eq!(err.retry_after_secs(), None, "{kind}");
                assert!(error_chain(&err).starts_with("s3 put img/a.jpg"), "{kind}");
            }
        }
    }

    #[derive(Debug, thiserror::Error)]
    #[error("{message}")]
    struct Layer {
        message: &'static str,
        #[source]
        source: Option<Box<Layer>>,
    }

    fn layer(message: &'static str, source: Option<Layer>) -> Layer {
        Layer {
            message,
            source: source.map(Box::new),
        }
    }

    #[test]
    fn error_chain_walks_every_source_once() {
        let root = layer("connection reset by peer", None);
        let middle = layer("dispatch failure", Some(root));
        let outer = layer(
            "internal error: could not write the image record",
            Some(middle),
        );
        assert_eq!(
            error_chain(&outer),
            "internal error: could not write the image record: dispatch failure: connection \
             reset by peer"
        );
        // A wrapper that already shows its source's text does not repeat it.
        let shown = layer("internal error: timed out", Some(layer("timed out", None)));
        assert_eq!(error_chain(&shown), "internal error: timed out");
        let internal = ApiError::internal("dynamodb said no");
        assert_eq!(error_chain(&internal), "dynamodb said no");
    }
}

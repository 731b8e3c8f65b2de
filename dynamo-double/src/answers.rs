//! The error answers the double makes itself, in DynamoDB's awsJson1_0 shape: HTTP 400,
//! `Content-Type: application/x-amz-json-1.0`, a body with `__type` (namespace `#` name:
//! the SDK keeps what follows the `#`) and the message. The field names are the ones
//! `aws-sdk-dynamodb` 1.136 deserialises: `message` for `TransactionConflictException` and
//! `ProvisionedThroughputExceededException` (with `ThrottlingReasons`), `Message` and
//! `CancellationReasons` for `TransactionCanceledException`.

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode};
use serde_json::{json, Value};

const NAMESPACE: &str = "com.amazonaws.dynamodb.v20120810";
pub const CONTENT_TYPE: &str = "application/x-amz-json-1.0";

/// `TransactionCanceledException`'s reason message for `TransactionConflict`, as documented.
const CONFLICT_MESSAGE: &str = "Transaction is ongoing for the item";
/// DynamoDB's message for partition-level throttling on an on-demand table (documented
/// with the `ThrottlingError` cancellation reason).
const THROTTLED_MESSAGE: &str = "Throughput exceeds the current capacity of your table or index. DynamoDB is automatically scaling your table or index so please try again shortly. If exceptions persist, check if you have a hot key: https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/bp-partition-key-design.html";

/// Why one action of a cancelled transaction failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    None,
    TransactionConflict,
    ThrottlingError,
}

impl Reason {
    fn code(self) -> &'static str {
        match self {
            Reason::None => "None",
            Reason::TransactionConflict => "TransactionConflict",
            Reason::ThrottlingError => "ThrottlingError",
        }
    }

    /// DynamoDB omits the message of an action without error.
    fn to_json(self) -> Value {
        match self {
            Reason::None => json!({"Code": "None"}),
            Reason::TransactionConflict => {
                json!({"Code": self.code(), "Message": CONFLICT_MESSAGE})
            }
            Reason::ThrottlingError => json!({"Code": self.code(), "Message": THROTTLED_MESSAGE}),
        }
    }
}

/// `TransactionCanceledException` with one reason per action, in request order.
pub fn transaction_canceled(reasons: &[Reason]) -> Response<Bytes> {
    let codes: Vec<&str> = reasons.iter().map(|r| r.code()).collect();
    let body = json!({
        "__type": format!("{NAMESPACE}#TransactionCanceledException"),
        "Message": format!(
            "Transaction cancelled, please refer cancellation reasons for specific reasons [{}]",
            codes.join(", ")
        ),
        "CancellationReasons": reasons.iter().map(|r| r.to_json()).collect::<Vec<_>>(),
    });
    error(StatusCode::BAD_REQUEST, &body)
}

/// `TransactionConflictException`: a single-item write on an item a transaction holds.
pub fn transaction_conflict() -> Response<Bytes> {
    let body = json!({
        "__type": format!("{NAMESPACE}#TransactionConflictException"),
        "message": CONFLICT_MESSAGE,
    });
    error(StatusCode::BAD_REQUEST, &body)
}

/// `ProvisionedThroughputExceededException` for a partition over its write limit, with the
/// documented throttling reason for a hot partition key (`KeyRangeThroughputExceeded`,
/// which applies to on-demand and provisioned tables alike).
pub fn write_throttled(table_arn: &str) -> Response<Bytes> {
    let body = json!({
        "__type": format!("{NAMESPACE}#ProvisionedThroughputExceededException"),
        "message": THROTTLED_MESSAGE,
        "ThrottlingReasons": [{
            "reason": "TableWriteKeyRangeThroughputExceeded",
            "resource": table_arn,
        }],
    });
    error(StatusCode::BAD_REQUEST, &body)
}

/// `SerializationException`: a request body that is not JSON (DynamoDB's answer to it).
pub fn serialization(message: &str) -> Response<Bytes> {
    let body = json!({
        "__type": "com.amazon.coral.service#SerializationException",
        "Message": message,
    });
    error(StatusCode::BAD_REQUEST, &body)
}

/// A request body over the double's cap.
pub fn too_large(limit: usize) -> Response<Bytes> {
    let body = json!({
        "__type": "com.amazon.coral.service#SerializationException",
        "Message": format!("request body larger than {limit} bytes"),
    });
    error(StatusCode::PAYLOAD_TOO_LARGE, &body)
}

/// moto could not be reached or answered garbage: a 500, which the SDK retries.
pub fn upstream_failed(detail: &str) -> Response<Bytes> {
    internal_server_error(&format!("upstream failed: {detail}"))
}

/// `InternalServerError` (HTTP 500): "the request may or may not have succeeded".
pub fn internal_server_error(detail: &str) -> Response<Bytes> {
    let body = json!({
        "__type": format!("{NAMESPACE}#InternalServerError"),
        "message": format!("dynamo-double: {detail}"),
    });
    error(StatusCode::INTERNAL_SERVER_ERROR, &body)
}

/// `ThrottlingException` (HTTP 400): requests over the allowed rate; nothing applied.
pub fn throttling() -> Response<Bytes> {
    let body = json!({
        "__type": format!("{NAMESPACE}#ThrottlingException"),
        "message": "Rate of requests exceeds the allowed throughput.",
    });
    error(StatusCode::BAD_REQUEST, &body)
}

/// `IdempotentParameterMismatchException`: a `ClientRequestToken` sent again with another
/// request.
pub fn idempotent_parameter_mismatch() -> Response<Bytes> {
    let body = json!({
        "__type": format!("{NAMESPACE}#IdempotentParameterMismatchException"),
        "Message": "The request uses the same client token as a previous, but non-identical request.",
    });
    error(StatusCode::BAD_REQUEST, &body)
}

pub fn json_ok(body: &Value) -> Response<Bytes> {
    with_body(StatusCode::OK, "application/json", body)
}

fn error(status: StatusCode, body: &Value) -> Response<Bytes> {
    with_body(status, CONTENT_TYPE, body)
}

fn with_body(status: StatusCode, content_type: &'static str, body: &Value) -> Response<Bytes> {
    let mut response = Response::new(Bytes::from(body.to_string()));
    *response.status_mut() = status;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static(content_type),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cancellation_lists_its_reasons_in_order() {
        let response = transaction_canceled(&[Reason::None, Reason::TransactionConflict]);
        assert_eq!(response.status(), StatusCode::BAD_REQUEST);
        let body: Value = serde_json::from_slice(response.body()).expect("json");
        assert_eq!(
            body["Message"],
            "Transaction cancelled, please refer cancellation reasons for specific reasons [None, TransactionConflict]"
        );
        assert_eq!(body["CancellationReasons"][0], json!({"Code": "None"}));
        assert_eq!(
            body["CancellationReasons"][1]["Code"],
            "TransactionConflict"
        );
        assert!(body["__type"]
            .as_str()
            .is_some_and(|t| t.ends_with("#TransactionCanceledException")));
    }
}

//! HTTP glue independent of Lambda or hyper: requests and responses are the `http` crate's
//! `Request<Bytes>` and `Response<Bytes>` (the whole body, read by the adapter). Here: the
//! helpers every answer is made with; the route table (`route.rs`: [`Operation`], [`route`],
//! [`ROUTES`]); [`App`], which answers a request. `lambda` and `server` adapt them.

use bytes::Bytes;
use http::header::{
    HeaderName, HeaderValue, CACHE_CONTROL, CONTENT_TYPE, RETRY_AFTER, WWW_AUTHENTICATE,
};
use http::{Method, Response, StatusCode};
use serde_json::Value;

use crate::error::ApiError;

pub mod admission;
mod app;
pub mod body;
pub mod budgets;
pub mod idempotency;
pub mod lambda;
pub mod logging;
pub mod params;
pub mod request_log;
pub mod root;
mod route;
pub mod sibling_answer;

// `app` and `route` are private: this is the one path of what they make public.
pub use app::App;
pub use route::{allowed_methods, route, DocumentedPath, Operation, OperationRoute, Route, ROUTES};

/// The platform's ids of a request, when it runs on Lambda: API Gateway's request id and
/// the invocation's. The Lambda adapter puts them in the request's extensions; elsewhere
/// there are none and the request log makes an id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PlatformIds {
    pub request_id: Option<String>,
    pub invocation_id: Option<String>,
}

/// A header's value, if present and visible ASCII.
pub fn header<'a>(headers: &'a http::HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// A JSON answer.
pub fn json_response(status: StatusCode, value: &Value) -> Response<Bytes> {
    let mut response = Response::new(Bytes::from(value.to_string()));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

/// An error's answer: its status and JSON body, with the headers its kind calls for.
pub fn error_response(err: &ApiError) -> Response<Bytes> {
    let status = StatusCode::from_u16(err.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = json_response(status, &err.body());
    let headers = response.headers_mut();
    if let ApiError::Unauthorized(_) = err {
        headers.insert(
            WWW_AUTHENTICATE,
            HeaderValue::from_static("OAuth realm=\"sitehost\""),
        );
    }
    if let Some(retry_after_secs) = err.retry_after_secs() {
        headers.insert(RETRY_AFTER, HeaderValue::from(retry_after_secs));
    }
    response
}

/// The answer to a `GET` or `HEAD` of a file (a stored image, the API reference, a WebP
/// sibling just made): its type and caching, and the content only for a `GET`.
pub fn file_response(
    method: &Method,
    content_type: &'static str,
    cache_control: &'static str,
    content: Bytes,
) -> Response<Bytes> {
    let body = if method == Method::HEAD {
        Bytes::new()
    } else {
        content
    };
    let mut response = Response::new(body);
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static(cache_control));
    response
}

/// Adds a header made at run time (a `Location`, an `Allow`). Every such value is built
/// from ids and fixed names, so an invalid one is a bug: logged, and the header left out.
pub fn set_header(response: &mut Response<Bytes>, name: HeaderName, value: &str) {
    match HeaderValue::from_str(value) {
        Ok(value) => {
            response.headers_mut().insert(name, value);
        }
        Err(_) => tracing::error!(header = %name, "a response header value is not valid"),
    }
}

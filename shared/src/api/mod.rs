//! HTTP glue independent of Lambda or hyper: requests and responses are the `http` crate's
//! `Request<Bytes>` and `Response<Bytes>` (the whole body, read by the adapter), with the
//! router that maps paths to operations. `lambda` and `local::server` adapt them.

use bytes::Bytes;
use http::header::{
    HeaderName, HeaderValue, CACHE_CONTROL, CONTENT_TYPE, RETRY_AFTER, WWW_AUTHENTICATE,
};
use http::{Method, Response, StatusCode};
use serde_json::Value;

use crate::auth::oauth1;
use crate::error::{ApiError, Result};

pub mod app;
pub mod budgets;
pub mod idempotency;
pub mod lambda;
pub mod logging;
pub mod request_log;
pub mod siblings;

pub use app::{App, RequestBody};

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

/// The request's query parameters, decoded, in order.
pub fn query_params(uri: &http::Uri) -> Result<Vec<(String, String)>> {
    oauth1::parse_query(uri.query().unwrap_or_default())
        .map_err(|_| ApiError::invalid("The query string is not valid UTF-8 once percent-decoded."))
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
    match err {
        ApiError::Unauthorized(_) => {
            headers.insert(
                WWW_AUTHENTICATE,
                HeaderValue::from_static("OAuth realm=\"sitehost\""),
            );
        }
        ApiError::TooManyRequests {
            retry_after_secs, ..
        }
        | ApiError::Unavailable {
            retry_after_secs, ..
        } => {
            headers.insert(RETRY_AFTER, HeaderValue::from(*retry_after_secs));
        }
        _ => {}
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

/// The operations of the API; each Lambda function serves exactly one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Operation {
    BusinessList,
    BusinessGet,
    BusinessCreate,
    BusinessUpdate,
    ImageList,
    ImageGet,
    ImageUpload,
    ImageDelete,
}

impl Operation {
    pub const ALL: [Operation; 8] = [
        Operation::BusinessList,
        Operation::BusinessGet,
        Operation::BusinessCreate,
        Operation::BusinessUpdate,
        Operation::ImageList,
        Operation::ImageGet,
        Operation::ImageUpload,
        Operation::ImageDelete,
    ];

    /// Whether the operation changes state (its nonce is recorded before it runs).
    pub fn writes(self) -> bool {
        matches!(
            self,
            Operation::BusinessCreate
                | Operation::BusinessUpdate
                | Operation::ImageUpload
                | Operation::ImageDelete
        )
    }
}

/// A routed request: the operation and the id from the path, if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    pub operation: Operation,
    pub id: Option<i64>,
}

/// Which operation a method selects on one path.
type MethodRoute = (Method, Operation);

/// Maps method and path to an operation. The trailing slash is optional.
pub fn route(method: &Method, path: &str) -> Result<Route> {
    let not_found = || ApiError::NotFound(format!("no resource at {path}"));
    let rest = path.strip_prefix("/api/v2/").ok_or_else(not_found)?;
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    let mut segments = rest.split('/');
    let resource = segments.next().unwrap_or_default();
    let id = segments.next();
    if segments.next().is_some() {
        return Err(not_found());
    }
    let (collection, detail): (&[MethodRoute], &[MethodRoute]) = match resource {
        "businesses" => (
            &[
                (Method::GET, Operation::BusinessList),
                (Method::POST, Operation::BusinessCreate),
            ],
            &[
                (Method::GET, Operation::BusinessGet),
                (Method::PUT, Operation::BusinessUpdate),
            ],
        ),
        // The platform's documentation also spells the business writes in the singular;
        // only those two operations (a GET there is a 405 naming the allowed method).
        "business" => (
            &[(Method::POST, Operation::BusinessCreate)],
            &[(Method::PUT, Operation::BusinessUpdate)],
        ),
        "images" => (
            &[
                (Method::GET, Operation::ImageList),
                (Method::POST, Operation::ImageUpload),
            ],
            &[
                (Method::GET, Operation::ImageGet),
                (Method::DELETE, Operation::ImageDelete),
            ],
        ),
        _ => return Err(not_found()),
    };
    let (allowed, id) = match id {
        None | Some("") => (collection, None),
        Some(text) => {
            let id = crate::validate::parse_id(text).ok_or_else(|| {
                ApiError::field(
                    "id",
                    format!("'{text}' is not a valid id; ids are positive 64-bit integers."),
                )
            })?;
            (detail, Some(id))
        }
    };
    allowed
        .iter()
        .find(|(m, _)| m == method)
        .map(|(_, operation)| Route {
            operation: *operation,
            id,
        })
        .ok_or_else(|| ApiError::MethodNotAllowed(method.to_string()))
}

/// The `Allow` header value for a path, for 405 answers.
pub fn allowed_methods(path: &str) -> String {
    let mut methods = Vec::new();
    for m in [Method::GET, Method::POST, Method::PUT, Method::DELETE] {
        if route(&m, path).is_ok() {
            methods.push(m.to_string());
        }
    }
    methods.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_with_and_without_trailing_slash() {
        let r = route(&Method::GET, "/api/v2/businesses");
        assert_eq!(
            r.ok(),
            Some(Route {
                operation: Operation::BusinessList,
                id: None
            })
        );
        let r = route(&Method::PUT, "/api/v2/businesses/12/");
        assert_eq!(
            r.ok(),
            Some(Route {
                operation: Operation::BusinessUpdate,
                id: Some(12)
            })
        );
        let r = route(&Method::GET, "/api/v2/images/3");
        assert_eq!(
            r.ok(),
            Some(Route {
                operation: Operation::ImageGet,
                id: Some(3)
            })
        );
    }

    #[test]
    fn bad_paths_and_methods() {
        assert!(matches!(
            route(&Method::GET, "/api/v1/businesses/"),
            Err(ApiError::NotFound(_))
        ));
        assert!(matches!(
            route(&Method::DELETE, "/api/v2/businesses/1/"),
            Err(ApiError::MethodNotAllowed(_))
        ));
        assert!(matches!(
            route(&Method::GET, "/api/v2/businesses/abc/"),
            Err(ApiError::Validation(_))
        ));
        assert!(matches!(
            route(&Method::GET, "/api/v2/businesses/99999999999999999999/"),
            Err(ApiError::Validation(_))
        ));
        assert_eq!(allowed_methods("/api/v2/businesses/"), "GET, POST");
        assert_eq!(allowed_methods("/api/v2/images/3/"), "GET, DELETE");
        assert_eq!(
            route(&Method::DELETE, "/api/v2/images/3").ok(),
            Some(Route {
                operation: Operation::ImageDelete,
                id: Some(3)
            })
        );
        assert!(matches!(
            route(&Method::DELETE, "/api/v2/images/"),
            Err(ApiError::MethodNotAllowed(_))
        ));
    }

    #[test]
    fn singular_business_paths_create_and_update_only() {
        for path in ["/api/v2/business/", "/api/v2/business"] {
            assert_eq!(
                route(&Method::POST, path).ok(),
                Some(Route {
                    operation: Operation::BusinessCreate,
                    id: None
                })
            );
            assert!(matches!(
                route(&Method::GET, path),
                Err(ApiError::MethodNotAllowed(_))
            ));
            assert_eq!(allowed_methods(path), "POST");
        }
        for path in ["/api/v2/business/7/", "/api/v2/business/7"] {
            assert_eq!(
                route(&Method::PUT, path).ok(),
                Some(Route {
                    operation: Operation::BusinessUpdate,
                    id: Some(7)
                })
            );
            assert!(matches!(
                route(&Method::GET, path),
                Err(ApiError::MethodNotAllowed(_))
            ));
            assert_eq!(allowed_methods(path), "PUT");
        }
        assert!(matches!(
            route(&Method::PUT, "/api/v2/business/x/"),
            Err(ApiError::Validation(_))
        ));
    }
}

//! HTTP glue independent of Lambda or hyper: the request and response types, the router
//! that maps paths to operations, and the paging envelope. `lambda` and `server` adapt it.

use bytes::Bytes;
use http::{HeaderMap, Method, StatusCode};
use serde_json::Value;

use crate::auth::oauth1;
use crate::error::{ApiError, Result};

pub mod app;
pub mod lambda;
pub mod logging;
pub mod request_log;

pub use app::App;

/// A request as every handler sees it.
#[derive(Debug, Clone)]
pub struct ApiRequest {
    pub method: Method,
    /// The raw path as the client sent it (percent-encoded).
    pub path: String,
    /// The raw query string, without `?`.
    pub query: String,
    pub headers: HeaderMap,
    pub body: Bytes,
    /// On Lambda, API Gateway's request id; `None` elsewhere (the request log makes one).
    pub request_id: Option<String>,
    /// On Lambda, the invocation id.
    pub invocation_id: Option<String>,
}

impl ApiRequest {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// Decoded query parameters in order.
    pub fn query_params(&self) -> Result<Vec<(String, String)>> {
        oauth1::parse_query(&self.query).map_err(|_| {
            ApiError::invalid("The query string is not valid UTF-8 once percent-decoded.")
        })
    }
}

#[derive(Debug, Clone)]
pub struct ApiResponse {
    pub status: StatusCode,
    pub headers: Vec<(&'static str, String)>,
    pub body: Bytes,
}

impl ApiResponse {
    pub fn json(status: StatusCode, value: &Value) -> Self {
        ApiResponse {
            status,
            headers: vec![("content-type", "application/json".to_string())],
            body: Bytes::from(value.to_string()),
        }
    }

    pub fn with_header(mut self, name: &'static str, value: impl Into<String>) -> Self {
        self.headers.push((name, value.into()));
        self
    }

    pub fn error(err: &ApiError) -> Self {
        let status =
            StatusCode::from_u16(err.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let response = Self::json(status, &err.body());
        match err {
            ApiError::Unauthorized(_) => {
                response.with_header("www-authenticate", "OAuth realm=\"sitehost\"")
            }
            ApiError::TooManyRequests {
                retry_after_secs, ..
            }
            | ApiError::Unavailable {
                retry_after_secs, ..
            } => response.with_header("retry-after", retry_after_secs.to_string()),
            _ => response,
        }
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
}

impl Operation {
    pub const ALL: [Operation; 7] = [
        Operation::BusinessList,
        Operation::BusinessGet,
        Operation::BusinessCreate,
        Operation::BusinessUpdate,
        Operation::ImageList,
        Operation::ImageGet,
        Operation::ImageUpload,
    ];

    /// Whether the operation changes state (its nonce is recorded before it runs).
    pub fn writes(self) -> bool {
        matches!(
            self,
            Operation::BusinessCreate | Operation::BusinessUpdate | Operation::ImageUpload
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
            &[(Method::GET, Operation::ImageGet)],
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
    for m in [Method::GET, Method::POST, Method::PUT] {
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

//! The route table: each operation's method, the paths it is served on, the Lambda function
//! that serves it and the OpenAPI operation id of each path, in [`ROUTES`] only. The router
//! ([`route`], [`allowed_methods`]), the request log's `operation` ([`Operation::
//! function_name`]), the Lambda functions (`lambda::start(Operation::...)`) and the tests of
//! `docs/openapi.json` and `template.yaml` all read it.

use http::Method;

use crate::error::{ApiError, Result};

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
    LocationList,
    LocationGet,
    LocationCreate,
    LocationUpdate,
    LocationDelete,
    /// A staged upload's session: a form to post one large file with, turned into an image
    /// by an `ImageUpload` naming its `upload_id`.
    ImageUploadSession,
    SiteList,
    SiteGet,
    SiteCreate,
    SiteUpdate,
    SiteDelete,
    PostList,
    PostGet,
    PostCreate,
    PostUpdate,
}

impl Operation {
    pub const ALL: [Operation; 23] = [
        Operation::BusinessList,
        Operation::BusinessGet,
        Operation::BusinessCreate,
        Operation::BusinessUpdate,
        Operation::ImageList,
        Operation::ImageGet,
        Operation::ImageUpload,
        Operation::ImageDelete,
        Operation::LocationList,
        Operation::LocationGet,
        Operation::LocationCreate,
        Operation::LocationUpdate,
        Operation::LocationDelete,
        Operation::ImageUploadSession,
        Operation::SiteList,
        Operation::SiteGet,
        Operation::SiteCreate,
        Operation::SiteUpdate,
        Operation::SiteDelete,
        Operation::PostList,
        Operation::PostGet,
        Operation::PostCreate,
        Operation::PostUpdate,
    ];

    /// Whether the operation changes state (its nonce is recorded before it runs).
    pub fn writes(self) -> bool {
        matches!(
            self,
            Operation::BusinessCreate
                | Operation::BusinessUpdate
                | Operation::ImageUpload
                | Operation::ImageDelete
                | Operation::LocationCreate
                | Operation::LocationUpdate
                | Operation::LocationDelete
                | Operation::ImageUploadSession
                | Operation::SiteCreate
                | Operation::SiteUpdate
                | Operation::SiteDelete
                | Operation::PostCreate
                | Operation::PostUpdate
        )
    }

    /// The operation's row of [`ROUTES`].
    pub fn entry(self) -> &'static OperationRoute {
        // The table lists the operations in declaration order (a unit test holds it).
        &ROUTES[self as usize]
    }

    /// The Lambda function that serves the operation (`business-list`): its directory under
    /// `functions/`, package and binary, and the request log's `operation`.
    pub fn function_name(self) -> &'static str {
        self.entry().function
    }
}

/// One operation in the route table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperationRoute {
    pub operation: Operation,
    pub method: Method,
    /// Where it is served, each path as `docs/openapi.json` and `template.yaml` write it.
    /// The trailing slash is optional in requests.
    pub paths: &'static [DocumentedPath],
    /// The Lambda function serving it ([`Operation::function_name`]).
    pub function: &'static str,
}

/// A path of an operation, with the OpenAPI operation id that documents the operation there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DocumentedPath {
    /// `/api/v2/businesses/` (the collection) or `/api/v2/businesses/{id}/` (one item).
    pub template: &'static str,
    pub operation_id: &'static str,
}

/// What follows a path's resource segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rest {
    /// Nothing: the collection.
    Collection,
    /// `{id}`: one item.
    Item,
    /// A fixed segment (`uploads`): a sub-resource of the collection.
    Fixed(&'static str),
}

impl DocumentedPath {
    /// The resource segment (`businesses`) and what follows it.
    fn parts(&self) -> (&'static str, Rest) {
        let rest = self.template.strip_prefix(PREFIX).unwrap_or(self.template);
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        match rest.split_once('/') {
            Some((resource, "{id}")) => (resource, Rest::Item),
            Some((resource, fixed)) => (resource, Rest::Fixed(fixed)),
            None => (rest, Rest::Collection),
        }
    }
}

/// Every path of the API starts with it; on its own it is the API root (`api::root`).
const PREFIX: &str = "/api/v2/";

const fn documented(template: &'static str, operation_id: &'static str) -> DocumentedPath {
    DocumentedPath {
        template,
        operation_id,
    }
}

/// Every operation, in [`Operation::ALL`]'s order.
pub static ROUTES: [OperationRoute; 23] = [
    OperationRoute {
        operation: Operation::BusinessList,
        method: Method::GET,
        paths: &[documented("/api/v2/businesses/", "listBusinesses")],
        function: "business-list",
    },
    OperationRoute {
        operation: Operation::BusinessGet,
        method: Method::GET,
        paths: &[documented("/api/v2/businesses/{id}/", "getBusiness")],
        function: "business-get",
    },
    // The platform's documentation also spells the business writes in the singular; only
    // those two operations (a GET there is a 405 naming the allowed method).
    OperationRoute {
        operation: Operation::BusinessCreate,
        method: Method::POST,
        paths: &[
            documented("/api/v2/businesses/", "createBusiness"),
            documented("/api/v2/business/", "createBusinessSingular"),
        ],
        function: "business-create",
    },
    OperationRoute {
        operation: Operation::BusinessUpdate,
        method: Method::PUT,
        paths: &[
            documented("/api/v2/businesses/{id}/", "updateBusiness"),
            documented("/api/v2/business/{id}/", "updateBusinessSingular"),
        ],
        function: "business-update",
    },
    OperationRoute {
        operation: Operation::ImageList,
        method: Method::GET,
        paths: &[documented("/api/v2/images/", "listImages")],
        function: "image-list",
    },
    OperationRoute {
        operation: Operation::ImageGet,
        method: Method::GET,
        paths: &[documented("/api/v2/images/{id}/", "getImage")],
        function: "image-get",
    },
    OperationRoute {
        operation: Operation::ImageUpload,
        method: Method::POST,
        paths: &[documented("/api/v2/images/", "uploadImage")],
        function: "image-upload",
    },
    OperationRoute {
        operation: Operation::ImageDelete,
        method: Method::DELETE,
        paths: &[documented("/api/v2/images/{id}/", "deleteImage")],
        function: "image-delete",
    },
    // Locations: a business's, by id (operations::locations).
    OperationRoute {
        operation: Operation::LocationList,
        method: Method::GET,
        paths: &[documented("/api/v2/locations/", "listLocations")],
        function: "location-list",
    },
    OperationRoute {
        operation: Operation::LocationGet,
        method: Method::GET,
        paths: &[documented("/api/v2/locations/{id}/", "getLocation")],
        function: "location-get",
    },
    OperationRoute {
        operation: Operation::LocationCreate,
        method: Method::POST,
        paths: &[documented("/api/v2/locations/", "createLocation")],
        function: "location-create",
    },
    OperationRoute {
        operation: Operation::LocationUpdate,
        method: Method::PUT,
        paths: &[documented("/api/v2/locations/{id}/", "updateLocation")],
        function: "location-update",
    },
    OperationRoute {
        operation: Operation::LocationDelete,
        method: Method::DELETE,
        paths: &[documented("/api/v2/locations/{id}/", "deleteLocation")],
        function: "location-delete",
    },
    OperationRoute {
        operation: Operation::ImageUploadSession,
        method: Method::POST,
        paths: &[documented(
            "/api/v2/images/uploads/",
            "createImageUploadSession",
        )],
        function: "image-upload-session",
    },
    OperationRoute {
        operation: Operation::SiteList,
        method: Method::GET,
        paths: &[documented("/api/v2/sites/", "listSites")],
        function: "site-list",
    },
    OperationRoute {
        operation: Operation::SiteGet,
        method: Method::GET,
        paths: &[documented("/api/v2/sites/{id}/", "getSite")],
        function: "site-get",
    },
    OperationRoute {
        operation: Operation::SiteCreate,
        method: Method::POST,
        paths: &[documented("/api/v2/sites/", "createSite")],
        function: "site-create",
    },
    OperationRoute {
        operation: Operation::SiteUpdate,
        method: Method::PUT,
        paths: &[documented("/api/v2/sites/{id}/", "updateSite")],
        function: "site-update",
    },
    OperationRoute {
        operation: Operation::SiteDelete,
        method: Method::DELETE,
        paths: &[documented("/api/v2/sites/{id}/", "deleteSite")],
        function: "site-delete",
    },
    OperationRoute {
        operation: Operation::PostList,
        method: Method::GET,
        paths: &[documented("/api/v2/posts/", "listPosts")],
        function: "post-list",
    },
    OperationRoute {
        operation: Operation::PostGet,
        method: Method::GET,
        paths: &[documented("/api/v2/posts/{id}/", "getPost")],
        function: "post-get",
    },
    OperationRoute {
        operation: Operation::PostCreate,
        method: Method::POST,
        paths: &[documented("/api/v2/posts/", "createPost")],
        function: "post-create",
    },
    OperationRoute {
        operation: Operation::PostUpdate,
        method: Method::PUT,
        paths: &[documented("/api/v2/posts/{id}/", "updatePost")],
        function: "post-update",
    },
];

/// A routed request: the operation and the id from the path, if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    pub operation: Operation,
    pub id: Option<i64>,
}

/// Every (operation, method, resource, what follows) the table serves.
fn served() -> impl Iterator<Item = (&'static OperationRoute, &'static str, Rest)> {
    ROUTES.iter().flat_map(|entry| {
        entry.paths.iter().map(move |path| {
            let (resource, item) = path.parts();
            (entry, resource, item)
        })
    })
}

/// Maps method and path to an operation. The trailing slash is optional. An unknown path
/// is a 404, a bad id a 400, a known path another method serves a 405.
pub fn route(method: &Method, path: &str) -> Result<Route> {
    let not_found = || ApiError::NotFound(format!("no resource at {path}"));
    let rest = path.strip_prefix(PREFIX).ok_or_else(not_found)?;
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    let mut segments = rest.split('/');
    let resource = segments.next().unwrap_or_default();
    let id = segments.next();
    if segments.next().is_some() || !served().any(|(_, served, _)| served == resource) {
        return Err(not_found());
    }
    let fixed = served().find_map(|(_, served, rest)| match rest {
        Rest::Fixed(fixed) if served == resource && id == Some(fixed) => Some(rest),
        _ => None,
    });
    let (rest, id) = match (fixed, id) {
        (Some(fixed), _) => (fixed, None),
        (None, None | Some("")) => (Rest::Collection, None),
        (None, Some(text)) => {
            let id = crate::domain::validate::parse_id(text).ok_or_else(|| {
                ApiError::field(
                    "id",
                    format!("'{text}' is not a valid id; ids are positive 64-bit integers."),
                )
            })?;
            (Rest::Item, Some(id))
        }
    };
    served()
        .find(|(entry, served, served_rest)| {
            *served == resource && *served_rest == rest && entry.method == method
        })
        .map(|(entry, _, _)| Route {
            operation: entry.operation,
            id,
        })
        .ok_or_else(|| ApiError::MethodNotAllowed(method.to_string()))
}

/// Whether the path is the API root, `/api/v2/` (`api::root` answers it; the trailing slash
/// is optional, as everywhere).
pub fn is_root(path: &str) -> bool {
    path == PREFIX || Some(path) == PREFIX.strip_suffix('/')
}

/// Each resource (`businesses`) with the path that lists it, for the API root.
pub(super) fn list_endpoints() -> impl Iterator<Item = (&'static str, &'static str)> {
    ROUTES
        .iter()
        .filter(|entry| entry.method == Method::GET)
        .flat_map(|entry| entry.paths)
        .filter_map(|path| match path.parts() {
            (resource, Rest::Collection) => Some((resource, path.template)),
            _ => None,
        })
}

/// The `Allow` header value for a path, for 405 answers.
pub fn allowed_methods(path: &str) -> String {
    if is_root(path) {
        return Method::GET.to_string();
    }
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
    fn the_table_lists_every_operation_once_in_order() {
        let listed: Vec<Operation> = ROUTES.iter().map(|entry| entry.operation).collect();
        assert_eq!(listed, Operation::ALL);
        for entry in &ROUTES {
            assert!(!entry.paths.is_empty(), "{:?}", entry.operation);
            for path in entry.paths {
                assert!(path.template.starts_with(PREFIX), "{path:?}");
                assert!(path.template.ends_with('/'), "{path:?}");
                let (_, rest) = path.parts();
                assert_eq!(
                    rest == Rest::Item,
                    path.template.ends_with("/{id}/"),
                    "{path:?}"
                );
            }
        }
    }

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
    fn upload_sessions_are_a_fixed_path_under_images() {
        for path in ["/api/v2/images/uploads/", "/api/v2/images/uploads"] {
            assert_eq!(
                route(&Method::POST, path).ok(),
                Some(Route {
                    operation: Operation::ImageUploadSession,
                    id: None
                })
            );
            assert!(matches!(
                route(&Method::GET, path),
                Err(ApiError::MethodNotAllowed(_))
            ));
            assert_eq!(allowed_methods(path), "POST");
        }
        assert!(matches!(
            route(&Method::POST, "/api/v2/images/uploads/x/"),
            Err(ApiError::NotFound(_))
        ));
        assert!(matches!(
            route(&Method::GET, "/api/v2/businesses/uploads/"),
            Err(ApiError::Validation(_))
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

//! The API root, `GET /api/v2/`: every resource with its list endpoint and the schema of its
//! objects, as tastypie (the framework the platform's API was built on) answers its top
//! level. Answered before authentication, like the router's 404: it names what the public
//! reference documents already. Deployed, the `$default` route brings it to `business-get`
//! (template.yaml), which answers it here as every function would.

use bytes::Bytes;
use http::{Method, Response, StatusCode};
use serde_json::{json, Map, Value};

pub use super::route::is_root;
use super::route::list_endpoints;
use crate::error::{ApiError, Result};

/// The OpenAPI schema of each resource's objects, in `docs/openapi.json`'s components.
const SCHEMAS: [(&str, &str); 5] = [
    ("businesses", "Business"),
    ("images", "Image"),
    ("locations", "Location"),
    ("sites", "Site"),
    ("posts", "Post"),
];

/// Where `sitehost serve` serves the OpenAPI document (`server::docs`); the schema links
/// point into it.
pub const OPENAPI_PATH: &str = "/api/v2/openapi.json";

/// The root's document: `{"businesses": {"list_endpoint": "/api/v2/businesses/", "schema":
/// "/api/v2/openapi.json#/components/schemas/Business"}, ...}`, every resource the route
/// table lists.
pub fn document() -> Value {
    let mut resources = Map::new();
    for (resource, endpoint) in list_endpoints() {
        let schema = SCHEMAS
            .iter()
            .find(|(name, _)| *name == resource)
            .map(|(_, schema)| format!("{OPENAPI_PATH}#/components/schemas/{schema}"));
        resources.insert(
            resource.to_string(),
            json!({"list_endpoint": endpoint, "schema": schema}),
        );
    }
    Value::Object(resources)
}

/// The root's answer to `method`: the document to a `GET`, a 405 (`Allow: GET`) otherwise.
pub fn answer(method: &Method) -> Result<Response<Bytes>> {
    if method != Method::GET {
        return Err(ApiError::MethodNotAllowed(method.to_string()));
    }
    Ok(super::json_response(StatusCode::OK, &document()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_every_resource_with_its_list_endpoint_and_a_schema_in_the_document() {
        let openapi: Value =
            serde_json::from_str(include_str!("../../../docs/openapi.json")).expect("JSON");
        let root = document();
        let resources = root.as_object().expect("object");
        assert_eq!(resources.len(), SCHEMAS.len(), "{root}");
        for (resource, entry) in resources {
            let endpoint = entry["list_endpoint"].as_str().expect("list endpoint");
            assert_eq!(endpoint, format!("/api/v2/{resource}/"));
            assert!(openapi["paths"][endpoint]["get"].is_object(), "{endpoint}");
            let schema = entry["schema"]
                .as_str()
                .expect("a schema for every resource");
            let pointer = schema
                .strip_prefix(&format!("{OPENAPI_PATH}#"))
                .expect("a link into the document");
            assert!(openapi.pointer(pointer).is_some(), "{schema}");
        }
        assert!(is_root("/api/v2/") && is_root("/api/v2"));
        let got = answer(&Method::GET).expect("a GET is answered");
        assert_eq!(got.status(), StatusCode::OK);
        assert_eq!(serde_json::from_slice::<Value>(got.body()).ok(), Some(root));
        assert!(matches!(
            answer(&Method::POST),
            Err(ApiError::MethodNotAllowed(_))
        ));
        assert_eq!(crate::api::allowed_methods("/api/v2"), "GET");
        assert!(!is_root("/api/v2//") && !is_root("/api/"));
    }
}

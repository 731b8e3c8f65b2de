//! Every HttpApi route of the template is served, in the local router, by the operation of
//! the function that gets it (functions/business-list => `Operation::BusinessList`); every
//! route of the router (each operation, with and without the trailing slash) is in the
//! template, on exactly one function; unmatched requests reach a function that answers them.

use std::collections::{BTreeMap, BTreeSet};

use http::Method;
use sitehost::api::{route, Operation};

use super::{api_functions, functions, operation_for_dir, template};

/// `/api/v2/businesses/{id}/` => `/api/v2/businesses/1/`.
fn concrete(path: &str) -> String {
    path.replace("{id}", "1")
}

#[test]
fn every_template_route_is_served_by_its_functions_operation() {
    let template = template();
    for function in api_functions(&template) {
        let operation = operation_for_dir(&function.dir);
        let routes = function.routes();
        assert!(
            !routes.is_empty(),
            "{} has no HttpApi route",
            function.logical_id
        );
        for (method, path) in routes {
            let m = Method::from_bytes(method.as_bytes()).expect("method");
            let routed = route(&m, &concrete(&path)).unwrap_or_else(|e| {
                panic!(
                    "{}: {method} {path} is not a route of sitehost::api::route: {e:?}",
                    function.logical_id
                )
            });
            assert_eq!(
                routed.operation, operation,
                "{}: {method} {path} is routed to {:?} locally, but the template sends it to {}",
                function.logical_id, routed.operation, function.dir
            );
            assert_eq!(
                routed.id.is_some(),
                path.contains("{id}"),
                "{method} {path}"
            );
        }
    }
}

#[test]
fn every_router_route_is_in_the_template_once() {
    let template = template();
    let mut in_template: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for function in functions(&template) {
        for route in function.routes() {
            in_template
                .entry(route)
                .or_default()
                .push(function.logical_id.clone());
        }
    }
    for (route, owners) in &in_template {
        assert_eq!(owners.len(), 1, "{route:?} is claimed by {owners:?}");
    }

    // Every (method, path) the router accepts, with and without the trailing slash.
    let methods = [
        Method::GET,
        Method::POST,
        Method::PUT,
        Method::PATCH,
        Method::DELETE,
    ];
    let mut served = BTreeSet::new();
    for resource in [
        "businesses",
        "business",
        "images",
        "images/uploads",
        "locations",
        "sites",
        "posts",
    ] {
        for template_path in [
            format!("/api/v2/{resource}/"),
            format!("/api/v2/{resource}"),
            format!("/api/v2/{resource}/{{id}}/"),
            format!("/api/v2/{resource}/{{id}}"),
        ] {
            for method in &methods {
                let Ok(routed) = route(method, &concrete(&template_path)) else {
                    continue;
                };
                served.insert(routed.operation);
                let key = (method.to_string(), template_path.clone());
                assert!(
                    in_template.contains_key(&key),
                    "the router serves {} {template_path} ({:?}) but template.yaml has no such \
                     HttpApi route",
                    key.0,
                    routed.operation
                );
            }
        }
    }
    for operation in Operation::ALL {
        assert!(
            served.contains(&operation),
            "{operation:?} is reached by no path tried here: add its resource to this test"
        );
    }
}

/// Every unmatched request (unknown path, a method the path lacks) is routed to one
/// function, whose handler answers before authentication with the router's 404 or 405.
#[test]
fn unmatched_requests_reach_a_function_that_answers_our_404_and_405() {
    let template = template();
    let owners: Vec<(String, Operation)> = functions(&template)
        .iter()
        .filter(|f| {
            f.all_routes()
                .iter()
                .any(|(method, path)| path == "$default" && method == "ANY")
        })
        .map(|f| (f.logical_id.clone(), operation_for_dir(&f.dir)))
        .collect();
    assert_eq!(owners.len(), 1, "one function serves $default: {owners:?}");
    // A read-only operation: nothing it could do for a stray request changes state.
    assert!(!owners[0].1.writes(), "{owners:?}");
    // What reaches it: unknown paths are 404, known paths with another method are 405.
    for path in [
        "/api/v2/nothing/",
        "/api/v1/businesses/",
        "/",
        "/api/v2/businesses/1/x/",
    ] {
        assert!(
            matches!(
                route(&Method::GET, path),
                Err(sitehost::error::ApiError::NotFound(_))
            ),
            "{path}"
        );
    }
    for (method, path) in [
        (Method::DELETE, "/api/v2/businesses/1/"),
        (Method::GET, "/api/v2/business/"),
        (Method::PATCH, "/api/v2/images/"),
    ] {
        assert!(
            matches!(
                route(&method, path),
                Err(sitehost::error::ApiError::MethodNotAllowed(_))
            ),
            "{method} {path}"
        );
    }
}

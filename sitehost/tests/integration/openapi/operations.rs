//! The router serves exactly the documented operations, and the route table
//! (`sitehost::api::ROUTES`) names them with their operation ids.

use std::collections::BTreeSet;

use http::Method;
use sitehost::api::{allowed_methods, route, Operation, ROUTES};

use crate::support;
use crate::support::openapi::{document, documented_methods};

/// Every documented (path template, method, operation id).
fn documented_operations() -> Vec<(String, Method, String)> {
    let mut found = Vec::new();
    for (template, item) in document()["paths"].as_object().expect("paths") {
        for method in documented_methods(template) {
            let operation_id = item[method.to_ascii_lowercase()]["operationId"]
                .as_str()
                .unwrap_or_else(|| panic!("{method} {template} has no operationId"))
                .to_string();
            let method = Method::from_bytes(method.as_bytes()).expect("method");
            found.push((template.clone(), method, operation_id));
        }
    }
    found
}

#[test]
fn the_router_serves_exactly_the_documented_operations() {
    let mut routed = BTreeSet::new();
    let mut singular = BTreeSet::new();
    for (template, method, operation_id) in documented_operations() {
        let path = template.replace("{id}", "7");
        let found = route(&method, &path)
            .unwrap_or_else(|e| panic!("{operation_id}: {method} {path} is not routed: {e}"));
        // The singular business paths are the platform's second spelling of two operations;
        // any other operation is documented once.
        if path.starts_with("/api/v2/business/") {
            singular.insert((method.to_string(), found.operation));
        } else {
            assert!(
                routed.insert(found.operation),
                "{operation_id}: {:?} documented twice",
                found.operation
            );
        }
        // The trailing slash is optional, as the document says once.
        let bare = path.trim_end_matches('/');
        assert_eq!(
            route(&method, bare).ok().map(|r| r.operation),
            Some(found.operation)
        );
        let template_methods =
            documented_methods(&support::openapi::path_template(&path).expect("a documented path"));
        assert_eq!(
            allowed_methods(&path),
            template_methods.join(", "),
            "{path}"
        );
    }
    assert_eq!(
        routed,
        Operation::ALL.into_iter().collect::<BTreeSet<_>>(),
        "every operation the router knows is documented"
    );
    assert_eq!(
        singular,
        BTreeSet::from([
            ("POST".to_string(), Operation::BusinessCreate),
            ("PUT".to_string(), Operation::BusinessUpdate),
        ]),
        "the singular paths serve create and update, documented"
    );
}

/// The route table names each operation's documented paths with their operation ids.
#[test]
fn the_route_table_is_the_documented_operations() {
    let documented: BTreeSet<(String, String, String)> = documented_operations()
        .into_iter()
        .map(|(template, method, operation_id)| (method.to_string(), template, operation_id))
        .collect();
    let table: BTreeSet<(String, String, String)> = ROUTES
        .iter()
        .flat_map(|entry| {
            entry.paths.iter().map(|path| {
                (
                    entry.method.to_string(),
                    path.template.to_string(),
                    path.operation_id.to_string(),
                )
            })
        })
        .collect();
    assert_eq!(table, documented);
}

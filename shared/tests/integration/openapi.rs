//! The API reference, `docs/openapi.json`, against the code: the router serves exactly the
//! documented operations, the signing example is what our signer computes, and the response
//! check the HTTP tests run refuses replies the document does not describe.

use crate::support;

use std::collections::BTreeSet;

use http::Method;
use reqwest::header::{HeaderMap, HeaderValue};
use serde_json::{json, Value};
use sitehost::api::{allowed_methods, route, Operation};
use sitehost::auth::oauth1;
use support::openapi::{check, document, documented_methods};

/// Every documented (path, method): `{id}` filled in with 7.
fn documented_operations() -> Vec<(String, Method, String)> {
    let mut found = Vec::new();
    for (template, item) in document()["paths"].as_object().expect("paths") {
        for method in documented_methods(template) {
            let operation_id = item[method.to_ascii_lowercase()]["operationId"]
                .as_str()
                .unwrap_or_else(|| panic!("{method} {template} has no operationId"))
                .to_string();
            let method = Method::from_bytes(method.as_bytes()).expect("method");
            found.push((template.replace("{id}", "7"), method, operation_id));
        }
    }
    found
}

#[test]
fn the_router_serves_exactly_the_documented_operations() {
    let mut routed = BTreeSet::new();
    let mut singular = BTreeSet::new();
    for (path, method, operation_id) in documented_operations() {
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

#[test]
fn the_signing_example_is_what_our_signer_computes() {
    let description = document()["components"]["securitySchemes"]["oauth1"]["description"]
        .as_str()
        .expect("the oauth1 scheme has a description");
    let (key, secret) = (
        "pamuJL7pb1PEYMKig4Tj",
        "JZ7hoqFM4bTDiqLGlxQjXeO6J8QcoC8YawOuVtGo",
    );
    let (timestamp, nonce) = (1_795_000_000, "170694528916440158243371858911263853914");
    let url = "http://127.0.0.1:3000/api/v2/businesses/";
    let query = oauth1::parse_query("deleted=0&order_by=business_name").expect("query");
    let header = oauth1::authorization_header("GET", url, &query, key, secret, timestamp, nonce);
    let mut params = query.clone();
    params.extend(oauth1::parse_authorization(&header).expect("our own header"));
    let base = oauth1::base_string("GET", url, &params);
    let signature = oauth1::sign(secret, &base);
    assert_eq!(signature, "mN/RykDy7Jq/1oWjGNur6Hzwe6Y=");
    let hmac_key = format!("{secret}&");
    for (what, expected) in [
        ("base string", base.as_str()),
        ("signature", signature.as_str()),
        ("Authorization header", header.as_str()),
        ("key", hmac_key.as_str()),
    ] {
        assert!(
            description.contains(expected),
            "the example's {what} is not in the document: {expected}"
        );
    }
    // The same example in the document's introduction.
    let intro = document()["info"]["description"].as_str().expect("intro");
    assert!(intro.contains(&base) && intro.contains(&signature));
}

fn json_headers(extra: &[(&'static str, &str)]) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert("content-type", HeaderValue::from_static("application/json"));
    for (name, value) in extra {
        headers.insert(*name, HeaderValue::from_str(value).expect("header"));
    }
    headers
}

fn business(id: i64) -> Value {
    json!({"id": id, "business_name": "Cafe", "slug": "cafe", "deleted": false,
           "partner_business_id": null, "partner_sub_id": null, "category_id": null,
           "logo_image_id": null, "user_id": 1, "added": "2026-11-22T00:31:10",
           "modified": "2026-11-22T00:31:10", "resource_uri": format!("/api/v2/businesses/{id}/")})
}

#[test]
fn documented_replies_pass_the_check() {
    let mut detail = business(3);
    detail["logo_image"] = Value::Null;
    detail["images"] = json!([]);
    check(
        "POST",
        "/api/v2/businesses/",
        201,
        &json_headers(&[("location", "/api/v2/businesses/3/")]),
        &detail,
    );
    check(
        "GET",
        "/api/v2/businesses?limit=1",
        200,
        &json_headers(&[]),
        &json!({"meta": {"limit": 1, "offset": 0, "total_count": 1, "next": null, "previous": null},
                "objects": [business(3)]}),
    );
    check(
        "GET",
        "/api/v2/images/9",
        429,
        &json_headers(&[("retry-after", "12")]),
        &json!({"error": "request budget exhausted"}),
    );
    check(
        "DELETE",
        "/api/v2/businesses/3/",
        405,
        &json_headers(&[("allow", "GET, PUT")]),
        &json!({"error": "method DELETE is not allowed on this path"}),
    );
    check(
        "GET",
        "/api/v2/nothing/",
        404,
        &json_headers(&[]),
        &json!({"error": "no resource at /api/v2/nothing/"}),
    );
}

#[test]
#[should_panic(expected = "status 418 is not documented")]
fn an_undocumented_status_fails() {
    check(
        "GET",
        "/api/v2/businesses/",
        418,
        &json_headers(&[]),
        &json!({"error": "teapot"}),
    );
}

#[test]
#[should_panic(expected = "does not match docs/openapi.json")]
fn a_body_off_the_schema_fails() {
    let mut listed = business(3);
    listed["images"] = json!([]); // the list objects have no images
    check(
        "GET",
        "/api/v2/businesses/",
        200,
        &json_headers(&[]),
        &json!({"meta": {"limit": 20, "offset": 0, "total_count": 1, "next": null, "previous": null},
                "objects": [listed]}),
    );
}

#[test]
#[should_panic(expected = "requires header Location")]
fn a_missing_required_header_fails() {
    let mut detail = business(3);
    detail["logo_image"] = Value::Null;
    detail["images"] = json!([]);
    check(
        "POST",
        "/api/v2/businesses/",
        201,
        &json_headers(&[]),
        &detail,
    );
}

#[test]
#[should_panic(expected = "content-type")]
fn a_non_json_reply_fails() {
    let mut headers = HeaderMap::new();
    headers.insert("content-type", HeaderValue::from_static("text/html"));
    check(
        "GET",
        "/api/v2/images/",
        500,
        &headers,
        &json!({"error": "internal server error"}),
    );
}

#[test]
#[should_panic(expected = "Allow must name the documented methods")]
fn a_wrong_allow_header_fails() {
    check(
        "PATCH",
        "/api/v2/images/",
        405,
        &json_headers(&[("allow", "GET, POST, PUT")]),
        &json!({"error": "method PATCH is not allowed on this path"}),
    );
}

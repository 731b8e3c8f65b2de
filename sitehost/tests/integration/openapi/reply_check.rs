//! The response check the HTTP tests run passes documented replies and refuses the ones the
//! document does not describe.

use reqwest::header::{HeaderMap, HeaderValue};
use serde_json::{json, Value};

use super::business;
use crate::support::openapi::check;

fn json_headers(extra: &[(&'static str, &str)]) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert("content-type", HeaderValue::from_static("application/json"));
    for (name, value) in extra {
        headers.insert(*name, HeaderValue::from_str(value).expect("header"));
    }
    headers
}

#[test]
fn documented_replies_pass_the_check() {
    let mut detail = business(3);
    detail["logo_image"] = Value::Null;
    detail["images"] = json!([]);
    detail["category"] = Value::Null;
    detail["services"] = json!([]);
    detail["locations"] = json!([]);
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
    detail["category"] = Value::Null;
    detail["services"] = json!([]);
    detail["locations"] = json!([]);
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

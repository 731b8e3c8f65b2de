//! Every `events/*.json` (API Gateway HTTP API v2 events) is parsed with
//! `lambda_http::request::from_str` and run through its function's handler, under a fixed
//! clock and a known key, asserting status and body.
//!
//! The events are signed with the fixture key below. `SITEHOST_WRITE_EVENTS=1 cargo test
//! -p sitehost --test lambda_events` rewrites them after a change to this file.

mod support;

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{json, Value};
use sitehost::auth::oauth1;
use sitehost::clock::FixedClock;
use sitehost::http::{lambda, Operation};
use support::events::{fixture_app, FixtureKey, SIGNED_AT};

const KEY: &str = "eventsfixturekey0001";
const SECRET: &str = "eventsfixturesecret000000000000000000001";
const FIXTURE: FixtureKey = FixtureKey {
    account: "events",
    key: KEY,
    secret: SECRET,
};
const API_HOST: &str = "abc123.execute-api.us-east-1.amazonaws.com";

struct Case {
    file: &'static str,
    operation: Operation,
    method: &'static str,
    path: &'static str,
    query: &'static str,
    body: Option<Value>,
    expect_status: u16,
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            file: "business-list.json",
            operation: Operation::BusinessList,
            method: "GET",
            path: "/api/v2/businesses/",
            query: "limit=2&project_type=default",
            body: None,
            expect_status: 200,
        },
        Case {
            file: "business-list-filtered.json",
            operation: Operation::BusinessList,
            method: "GET",
            path: "/api/v2/businesses",
            query: "deleted=0&order_by=-business_name",
            body: None,
            expect_status: 200,
        },
        Case {
            file: "business-get.json",
            operation: Operation::BusinessGet,
            method: "GET",
            path: "/api/v2/businesses/1/",
            query: "",
            body: None,
            expect_status: 200,
        },
        Case {
            file: "business-create.json",
            operation: Operation::BusinessCreate,
            method: "POST",
            path: "/api/v2/businesses/",
            query: "",
            body: Some(json!({"business_name": "Harbour Cafe", "partner_business_id": "hc-77"})),
            expect_status: 201,
        },
        Case {
            file: "business-update.json",
            operation: Operation::BusinessUpdate,
            method: "PUT",
            path: "/api/v2/businesses/1/",
            query: "",
            body: Some(json!({"id": 1, "deleted": true})),
            expect_status: 200,
        },
        Case {
            file: "image-list.json",
            operation: Operation::ImageList,
            method: "GET",
            path: "/api/v2/images/",
            query: "site_id=12345&order_by=-id",
            body: None,
            expect_status: 200,
        },
        Case {
            file: "image-get.json",
            operation: Operation::ImageGet,
            method: "GET",
            path: "/api/v2/images/1/",
            query: "",
            body: None,
            expect_status: 200,
        },
        Case {
            file: "image-upload.json",
            operation: Operation::ImageUpload,
            method: "POST",
            path: "/api/v2/images/",
            query: "",
            body: Some(
                json!({"upload": {"name": "dot.png", "file": TINY_PNG}, "site_id": 12345, "business_id": 1}),
            ),
            expect_status: 201,
        },
    ]
}

/// A 2x2 PNG, as a partner's base64 upload.
const TINY_PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAYAAABytg0kAAAAEUlEQVR4nGP4z8DwH4QZYAwAR8oH+WdZbrcAAAAASUVORK5CYII=";

fn events_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../events")
}

fn event_json(case: &Case, nonce: &str) -> Value {
    let params = oauth1::parse_query(case.query).unwrap_or_default();
    let auth = oauth1::authorization_header(
        case.method,
        &format!("https://{API_HOST}{}", case.path),
        &params,
        KEY,
        SECRET,
        SIGNED_AT,
        nonce,
    );
    let collection = if case.path.starts_with("/api/v2/images") {
        "images"
    } else {
        "businesses"
    };
    let route_path = if case.path.ends_with("/1/") {
        format!("/api/v2/{collection}/{{id}}/")
    } else {
        format!("/api/v2/{collection}/")
    };
    let mut query_map = serde_json::Map::new();
    for (n, v) in &params {
        query_map.insert(n.clone(), json!(v));
    }
    json!({
        "version": "2.0",
        "routeKey": format!("{} {route_path}", case.method),
        "rawPath": case.path,
        "rawQueryString": case.query,
        "headers": {
            "accept": "application/json",
            "authorization": auth,
            "content-type": "application/json",
            "host": API_HOST,
            "user-agent": "python-requests/2.31.0",
            "x-forwarded-for": "203.0.113.10",
            "x-forwarded-port": "443",
            "x-forwarded-proto": "https"
        },
        "queryStringParameters": if query_map.is_empty() { Value::Null } else { Value::Object(query_map) },
        "pathParameters": if case.path.ends_with("/1/") { json!({"id": "1"}) } else { Value::Null },
        "requestContext": {
            "accountId": "123456789012",
            "apiId": "abc123",
            "domainName": API_HOST,
            "domainPrefix": "abc123",
            "http": {
                "method": case.method,
                "path": case.path,
                "protocol": "HTTP/1.1",
                "sourceIp": "203.0.113.10",
                "userAgent": "python-requests/2.31.0"
            },
            "requestId": format!("req-{nonce}"),
            "routeKey": format!("{} {route_path}", case.method),
            "stage": "$default",
            "time": "01/May/2024:12:00:00 +0000",
            "timeEpoch": SIGNED_AT * 1000
        },
        "body": case.body.as_ref().map(Value::to_string),
        "isBase64Encoded": false
    })
}

#[tokio::test]
async fn every_event_runs_through_its_functions_handler() {
    let write = std::env::var("SITEHOST_WRITE_EVENTS").is_ok_and(|v| v == "1");
    for (i, case) in cases().iter().enumerate() {
        let path = events_dir().join(case.file);
        if write {
            let text =
                serde_json::to_string_pretty(&event_json(case, &format!("fixednonce{i:04}")))
                    .expect("json");
            std::fs::write(&path, text + "\n").expect("write event");
        }
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let (app, _dir) = fixture_app(&FIXTURE, &[]).await;
        let request = lambda_http::request::from_str(&text).expect("an API Gateway event");
        let response = lambda::to_lambda(
            app.handle_operation(case.operation, lambda::from_lambda(request))
                .await,
        );
        let status = response.status().as_u16();
        let body: Value = match response.body() {
            lambda_http::Body::Text(t) => serde_json::from_str(t).expect("json body"),
            other => panic!("unexpected body {other:?}"),
        };
        assert_eq!(status, case.expect_status, "{}: {body}", case.file);
        match case.operation {
            Operation::BusinessList => assert_eq!(body["meta"]["total_count"], 1),
            Operation::BusinessGet => assert_eq!(body["business_name"], "Existing"),
            Operation::BusinessCreate => {
                assert_eq!(body["business_name"], "Harbour Cafe");
                assert_eq!(body["user_id"], 42);
                assert_eq!(
                    response.headers()["location"],
                    format!("/api/v2/businesses/{}/", body["id"])
                );
            }
            Operation::BusinessUpdate => assert_eq!(body["deleted"], true),
            Operation::ImageList => assert_eq!(body["meta"]["total_count"], 1),
            Operation::ImageGet => assert_eq!(body["image"], "img/upload/existing-abc.png"),
            Operation::ImageUpload => {
                assert_eq!(
                    (body["width"].as_u64(), body["height"].as_u64()),
                    (Some(2), Some(2))
                );
                assert_eq!(body["business_id"], 1);
                assert_eq!(
                    response.headers()["location"],
                    format!("/api/v2/images/{}/", body["id"])
                );
            }
        }

        // The same event is refused by any other function, and by a clock 10 minutes on.
        let other = if case.operation == Operation::BusinessList {
            Operation::BusinessGet
        } else {
            Operation::BusinessList
        };
        let request = lambda_http::request::from_str(&text).expect("event");
        assert_eq!(
            app.handle_operation(other, lambda::from_lambda(request))
                .await
                .status
                .as_u16(),
            404
        );
        let (late, _dir2) = fixture_app(&FIXTURE, &[]).await;
        let late = late.with_clock(Arc::new(FixedClock(SIGNED_AT + 600)));
        let request = lambda_http::request::from_str(&text).expect("event");
        assert_eq!(
            late.handle_operation(case.operation, lambda::from_lambda(request))
                .await
                .status
                .as_u16(),
            401
        );
    }
}

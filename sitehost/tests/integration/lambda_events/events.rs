//! Every event file, run through its function's handler.

use serde_json::{json, Value};
use sitehost::api::{lambda, params, Operation};
use sitehost::auth::oauth1;

use super::{API_HOST, FIXTURE, KEY, SECRET};
use crate::support::events::{
    assert_fixture_answer, events_dir, fixture_app, fixture_app_at, ORIGIN_SECRET, SIGNED_AT,
};

struct Case {
    file: &'static str,
    operation: Operation,
    method: &'static str,
    path: &'static str,
    query: &'static str,
    body: Option<Value>,
    expect_status: u16,
}

// Reads better whole: a table, one row per event file.
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
        // The singular spellings of the platform's documentation.
        Case {
            file: "business-create-singular.json",
            operation: Operation::BusinessCreate,
            method: "POST",
            path: "/api/v2/business/",
            query: "",
            body: Some(json!({"business_name": "Harbour Cafe", "partner_business_id": "hc-77"})),
            expect_status: 201,
        },
        Case {
            file: "business-update-singular.json",
            operation: Operation::BusinessUpdate,
            method: "PUT",
            path: "/api/v2/business/1/",
            query: "",
            body: Some(json!({"id": 1, "deleted": true})),
            expect_status: 200,
        },
        Case {
            file: "location-list.json",
            operation: Operation::LocationList,
            method: "GET",
            path: "/api/v2/locations/",
            query: "business_id=1",
            body: None,
            expect_status: 200,
        },
        Case {
            file: "location-get.json",
            operation: Operation::LocationGet,
            method: "GET",
            path: "/api/v2/locations/1/",
            query: "",
            body: None,
            expect_status: 200,
        },
        Case {
            file: "location-create.json",
            operation: Operation::LocationCreate,
            method: "POST",
            path: "/api/v2/locations/",
            query: "",
            body: Some(json!({
                "business_id": 1, "location_name": "Harbour Cafe Quay", "street": "1 Quay St",
                "city": "Wellington", "state": "WGN", "postal_code": "6011", "country": "NZ"
            })),
            expect_status: 201,
        },
        Case {
            file: "location-update.json",
            operation: Operation::LocationUpdate,
            method: "PUT",
            path: "/api/v2/locations/1/",
            query: "",
            body: Some(json!({"location_name": "Quay North"})),
            expect_status: 200,
        },
        Case {
            file: "location-delete.json",
            operation: Operation::LocationDelete,
            method: "DELETE",
            path: "/api/v2/locations/1/",
            query: "",
            body: None,
            expect_status: 204,
        },
        Case {
            file: "site-list.json",
            operation: Operation::SiteList,
            method: "GET",
            path: "/api/v2/sites/",
            query: "base_directory=%2F&deleted=0&domain=harbourcafe.com&subdomain=www",
            body: None,
            expect_status: 200,
        },
        Case {
            file: "site-get.json",
            operation: Operation::SiteGet,
            method: "GET",
            path: "/api/v2/sites/1/",
            query: "",
            body: None,
            expect_status: 200,
        },
        Case {
            file: "site-create.json",
            operation: Operation::SiteCreate,
            method: "POST",
            path: "/api/v2/sites/",
            query: "",
            body: Some(json!({
                "business_id": 1, "domain": "harbourcafe.com", "subdomain": "shop",
                "title": "Harbour Cafe Shop", "locations": [1]
            })),
            expect_status: 201,
        },
        Case {
            file: "site-update.json",
            operation: Operation::SiteUpdate,
            method: "PUT",
            path: "/api/v2/sites/1/",
            query: "",
            body: Some(json!({"title": "Harbour Cafe Online"})),
            expect_status: 200,
        },
        Case {
            file: "site-delete.json",
            operation: Operation::SiteDelete,
            method: "DELETE",
            path: "/api/v2/sites/1/",
            query: "",
            body: None,
            expect_status: 204,
        },
        Case {
            file: "post-list.json",
            operation: Operation::PostList,
            method: "GET",
            path: "/api/v2/posts/",
            query: "site_id=1",
            body: None,
            expect_status: 200,
        },
        Case {
            file: "post-get.json",
            operation: Operation::PostGet,
            method: "GET",
            path: "/api/v2/posts/1/",
            query: "",
            body: None,
            expect_status: 200,
        },
        Case {
            file: "post-create.json",
            operation: Operation::PostCreate,
            method: "POST",
            path: "/api/v2/posts/",
            query: "",
            body: Some(json!({
                "site_id": 1, "title": "Opening day",
                "content": "<h2>Opening day</h2><p>Fresh chowder.</p>"
            })),
            expect_status: 201,
        },
        Case {
            file: "post-update.json",
            operation: Operation::PostUpdate,
            method: "PUT",
            path: "/api/v2/posts/1/",
            query: "",
            body: Some(json!({"title": "Opening day, again"})),
            expect_status: 200,
        },
        Case {
            file: "image-delete.json",
            operation: Operation::ImageDelete,
            method: "DELETE",
            path: "/api/v2/images/1/",
            query: "",
            body: None,
            expect_status: 204,
        },
        Case {
            file: "image-upload-session.json",
            operation: Operation::ImageUploadSession,
            method: "POST",
            path: "/api/v2/images/uploads/",
            query: "",
            body: Some(json!({"name": "IMG_2040.jpg", "size": 5_508_789})),
            expect_status: 201,
        },
    ]
}

/// A 2x2 PNG, as a partner's base64 upload.
const TINY_PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAYAAABytg0kAAAAEUlEQVR4nGP4z8DwH4QZYAwAR8oH+WdZbrcAAAAASUVORK5CYII=";

fn event_json(case: &Case, nonce: &str) -> Value {
    let params = params::parse(case.query).unwrap_or_default();
    let auth = oauth1::authorization_header(
        case.method,
        &format!("https://{API_HOST}{}", case.path),
        &params,
        KEY,
        SECRET,
        SIGNED_AT,
        nonce,
    );
    let collection = case
        .path
        .trim_start_matches("/api/v2/")
        .split('/')
        .next()
        .unwrap_or_default();
    let route_path = if case.path.ends_with("/1/") {
        format!("/api/v2/{collection}/{{id}}/")
    } else {
        case.path.to_string()
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
            "x-forwarded-proto": "https",
            // CloudFront's origin header: every event a function serves came through it.
            "x-origin-verify": ORIGIN_SECRET
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
        let app = fixture_app(&FIXTURE, &[], Some(ORIGIN_SECRET)).await;
        let request = lambda_http::request::from_str(&text).expect("an API Gateway event");
        let response = lambda::to_lambda(
            app.handle_operation(case.operation, lambda::from_lambda(request))
                .await,
        );
        let status = response.status().as_u16();
        let body: Value = match response.body() {
            lambda_http::Body::Text(t) => serde_json::from_str(t).expect("json body"),
            // A 204's.
            lambda_http::Body::Empty => Value::Null,
            other => panic!("unexpected body {other:?}"),
        };
        assert_eq!(status, case.expect_status, "{}: {body}", case.file);
        assert_fixture_answer(case.operation, &body, response.headers());

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
                .status()
                .as_u16(),
            404
        );
        let late = fixture_app_at(SIGNED_AT + 600, &FIXTURE, &[], Some(ORIGIN_SECRET)).await;
        let request = lambda_http::request::from_str(&text).expect("event");
        assert_eq!(
            late.handle_operation(case.operation, lambda::from_lambda(request))
                .await
                .status()
                .as_u16(),
            401
        );
    }
}

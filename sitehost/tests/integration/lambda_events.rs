//! Every `events/*.json` (API Gateway HTTP API v2 events) is parsed with
//! `lambda_http::request::from_str` and run through its function's handler, under a fixed
//! clock and a known key, asserting status and body.
//!
//! The events are signed with the fixture key below. `SITEHOST_WRITE_EVENTS=1 cargo test
//! -p sitehost --test integration lambda_events` rewrites them after a change to this file.

use crate::support;

use std::sync::Arc;

use serde_json::{json, Value};
use sitehost::api::{lambda, params, Operation};
use sitehost::auth::oauth1;
use sitehost::config::OriginSecret;
use support::app::TestApp;
use support::events::{
    assert_fixture_answer, events_dir, fixture_app, fixture_app_at, fixture_app_with_secret,
    FixtureKey, ORIGIN_SECRET, SIGNED_AT,
};

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

/// Lambda's limit on a synchronous invocation's payload: the whole API Gateway event.
const LAMBDA_PAYLOAD_LIMIT: usize = 6_291_456;
/// API Gateway HTTP API's limit on the request line and headers together: how far the
/// headers below may grow in the worst case.
const HTTP_API_HEADER_LIMIT: usize = 10_240;

/// A base64 upload of `decoded` bytes as the image-upload function receives it through the
/// distribution: the JSON body a partner's `requests` sends, the headers CloudFront
/// forwards (`AllViewerExceptHostHeader` with its `CloudFront-Viewer-*` headers, the
/// CloudFront Function's `X-Forwarded-Host`, the origin-verify secret) and the OAuth header.
/// Returns the event and the size of its headers (names and values).
fn max_upload_event(decoded: usize) -> (String, usize) {
    use base64::Engine;
    let frontend = "d111111abcdef8.cloudfront.net";
    let file = base64::engine::general_purpose::STANDARD.encode(vec![0u8; decoded]);
    let body = json!({
        "upload": {"name": "storefront-summer-2024-high-resolution.jpg", "file": file},
        "site_id": 12345,
        "business_id": 1
    })
    .to_string();
    let auth = oauth1::authorization_header(
        "POST",
        &format!("https://{frontend}/api/v2/images/"),
        &[],
        KEY,
        SECRET,
        SIGNED_AT,
        "117094720519224587201714564800",
    );
    let headers = json!({
        "accept": "*/*",
        "accept-encoding": "gzip, deflate, br, zstd",
        "authorization": auth,
        "cloudfront-forwarded-proto": "https",
        "cloudfront-is-android-viewer": "false",
        "cloudfront-is-desktop-viewer": "true",
        "cloudfront-is-ios-viewer": "false",
        "cloudfront-is-mobile-viewer": "false",
        "cloudfront-is-smarttv-viewer": "false",
        "cloudfront-is-tablet-viewer": "false",
        "cloudfront-viewer-address": "2001:db8:85a3:8d3:1319:8a2e:370:7348:52734",
        "cloudfront-viewer-asn": "64496",
        "cloudfront-viewer-city": "Amsterdam",
        "cloudfront-viewer-country": "NL",
        "cloudfront-viewer-country-name": "Netherlands",
        "cloudfront-viewer-country-region": "NH",
        "cloudfront-viewer-country-region-name": "North Holland",
        "cloudfront-viewer-http-version": "2.0",
        "cloudfront-viewer-latitude": "52.37400",
        "cloudfront-viewer-longitude": "4.88970",
        "cloudfront-viewer-postal-code": "1012",
        "cloudfront-viewer-time-zone": "Europe/Amsterdam",
        "cloudfront-viewer-tls": "TLSv1.3:TLS_AES_128_GCM_SHA256:fullHandshake",
        "content-length": body.len().to_string(),
        "content-type": "application/json",
        "host": API_HOST,
        "user-agent": "python-requests/2.32.3",
        "via": "2.0 0c6f3e8d0b7e5b4c2b1a0f9e8d7c6b5a.cloudfront.net (CloudFront)",
        "x-amz-cf-id": "Z2Jr4n0cF1xq8Yw5dS3aL0kP7mV9tE1uB6hC2gN4oRZ2Jr4n0cF1xq8Yw==",
        "x-amzn-trace-id": "Root=1-66322dc0-0123456789abcdef01234567",
        "x-forwarded-for": "2001:db8:85a3:8d3:1319:8a2e:370:7348, 130.176.0.12",
        "x-forwarded-host": frontend,
        "x-forwarded-port": "443",
        "x-forwarded-proto": "https",
        "x-origin-verify": ORIGIN_SECRET
    });
    let header_bytes = headers
        .as_object()
        .expect("headers")
        .iter()
        .map(|(name, value)| name.len() + value.as_str().map_or(0, str::len))
        .sum();
    let event = json!({
        "version": "2.0",
        "routeKey": "POST /api/v2/images/",
        "rawPath": "/api/v2/images/",
        "rawQueryString": "",
        "headers": headers,
        "requestContext": {
            "accountId": "123456789012",
            "apiId": "abc123",
            "domainName": API_HOST,
            "domainPrefix": "abc123",
            "http": {
                "method": "POST",
                "path": "/api/v2/images/",
                "protocol": "HTTP/1.1",
                "sourceIp": "130.176.0.12",
                "userAgent": "python-requests/2.32.3"
            },
            "requestId": "YcdJ0jQ9oAMEVnA=",
            "routeKey": "POST /api/v2/images/",
            "stage": "$default",
            "time": "01/May/2024:12:00:00 +0000",
            "timeEpoch": SIGNED_AT * 1000
        },
        "body": body,
        "isBase64Encoded": false
    });
    (event.to_string(), header_bytes)
}

/// The default base64 cap leaves room for the rest of the event: a maximum-size upload
/// through CloudFront fits Lambda's 6 MB payload limit, even were its headers to grow to
/// API Gateway's own limit; and the handler takes it (the cap is not hit: the bytes are
/// refused as no image), while one byte more is a 413.
#[tokio::test]
async fn a_maximum_size_upload_event_fits_the_lambda_payload_limit() {
    let max = sitehost::config::DEFAULT_UPLOAD_MAX_BYTES;
    let (event, header_bytes) = max_upload_event(max);
    assert!(
        header_bytes < HTTP_API_HEADER_LIMIT,
        "realistic headers: {header_bytes}"
    );
    let worst_case = event.len() + (HTTP_API_HEADER_LIMIT - header_bytes);
    assert!(
        worst_case <= LAMBDA_PAYLOAD_LIMIT,
        "a {max}-byte upload makes a {}-byte event ({worst_case} with the largest headers \
         API Gateway allows), over Lambda's {LAMBDA_PAYLOAD_LIMIT}",
        event.len()
    );
    // The old default (4,718,592: exactly 6 MiB of base64) did not fit.
    assert!(max_upload_event(4_718_592).0.len() > LAMBDA_PAYLOAD_LIMIT);

    let app = fixture_app(&FIXTURE, &[], Some(ORIGIN_SECRET)).await;
    let request = lambda_http::request::from_str(&event).expect("an API Gateway event");
    let response = app
        .handle_operation(Operation::ImageUpload, lambda::from_lambda(request))
        .await;
    let body: Value = serde_json::from_slice(response.body()).expect("json body");
    assert_eq!(response.status().as_u16(), 400, "{body}");
    assert!(body["upload"].is_array(), "refused as no image: {body}");

    let app = fixture_app(&FIXTURE, &[], Some(ORIGIN_SECRET)).await;
    let (over, _) = max_upload_event(max + 1);
    let request = lambda_http::request::from_str(&over).expect("an API Gateway event");
    let response = app
        .handle_operation(Operation::ImageUpload, lambda::from_lambda(request))
        .await;
    assert_eq!(response.status().as_u16(), 413);
    // The refusal names the limit in bytes and MB, and what to do instead.
    let body: Value = serde_json::from_slice(response.body()).expect("json body");
    assert_eq!(
        body["error"],
        "The decoded file is over the upload limit of 4,669,440 bytes (4.6 MB); send a \
         larger image as a staged upload (POST /api/v2/images/uploads/, post the file to the \
         form it gives, then POST /api/v2/images/ with its upload_id) or by external_url, \
         which take files up to 26,214,400 bytes (26.2 MB)."
    );
}

/// A body over the limit is refused before anything else, naming the limit in bytes and
/// MB; on the upload route (a 5.5 MB phone photo is 7.3 MB of base64) it also says what a
/// base64 upload may hold and that a larger image goes as a staged upload first, by
/// `external_url` second.
#[tokio::test]
async fn a_body_over_the_limit_says_the_limit_and_what_to_do() {
    let app = fixture_app(&FIXTURE, &[], Some(ORIGIN_SECRET)).await;
    let body = bytes::Bytes::from(vec![b' '; sitehost::config::DEFAULT_MAX_BODY_BYTES + 1]);
    for (operation, method, path, expected) in [
        (
            Operation::ImageUpload,
            "POST",
            "/api/v2/images/",
            "The request body is over the limit of 7,340,032 bytes (7.3 MB). A base64 upload \
             may hold at most 4,669,440 bytes (4.6 MB) once decoded; send a larger image as a \
             staged upload (POST /api/v2/images/uploads/, post the file to the form it gives, \
             then POST /api/v2/images/ with its upload_id) or by external_url, which take \
             files up to 26,214,400 bytes (26.2 MB).",
        ),
        (
            Operation::BusinessCreate,
            "POST",
            "/api/v2/businesses/",
            "The request body is over the limit of 7,340,032 bytes (7.3 MB).",
        ),
    ] {
        let request = http::Request::builder()
            .method(method)
            .uri(format!("https://{API_HOST}{path}"))
            .header("content-type", "application/json")
            .header("x-origin-verify", ORIGIN_SECRET)
            .body(body.clone())
            .expect("request");
        let response = app.handle_operation(operation, request).await;
        assert_eq!(response.status().as_u16(), 413, "{path}");
        let answer: Value = serde_json::from_slice(response.body()).expect("json body");
        assert_eq!(answer["error"], expected, "{path}");
    }
}

/// Requests no route matches reach the `$default` route's function (business-get in the
/// template) and are answered by the router as `sitehost serve` answers them, unsigned:
/// 404 for an unknown path, 405 with `Allow` for a method the path does not have.
#[tokio::test]
async fn the_default_route_answers_our_404_and_405() {
    let app = fixture_app(&FIXTURE, &[], Some(ORIGIN_SECRET)).await;
    for (method, path, status, allow) in [
        ("GET", "/api/v2/nothing/", 404, None),
        ("GET", "/favicon.ico", 404, None),
        ("DELETE", "/api/v2/businesses/1/", 405, Some("GET, PUT")),
        ("GET", "/api/v2/business/", 405, Some("POST")),
        ("PATCH", "/api/v2/images/", 405, Some("GET, POST")),
    ] {
        let event = json!({
            "version": "2.0",
            "routeKey": "$default",
            "rawPath": path,
            "rawQueryString": "",
            "headers": {"host": API_HOST, "accept": "*/*"},
            "requestContext": {
                "accountId": "123456789012",
                "apiId": "abc123",
                "domainName": API_HOST,
                "domainPrefix": "abc123",
                "http": {
                    "method": method,
                    "path": path,
                    "protocol": "HTTP/1.1",
                    "sourceIp": "203.0.113.10",
                    "userAgent": "curl/8.5.0"
                },
                "requestId": "req-default",
                "routeKey": "$default",
                "stage": "$default",
                "time": "01/May/2024:12:00:00 +0000",
                "timeEpoch": SIGNED_AT * 1000
            },
            "isBase64Encoded": false
        });
        let request =
            lambda_http::request::from_str(&event.to_string()).expect("an API Gateway event");
        let response = lambda::to_lambda(
            app.handle_operation(Operation::BusinessGet, lambda::from_lambda(request))
                .await,
        );
        assert_eq!(response.status().as_u16(), status, "{method} {path}");
        assert_eq!(response.headers()["content-type"], "application/json");
        assert_eq!(
            response
                .headers()
                .get("allow")
                .and_then(|v| v.to_str().ok()),
            allow,
            "{method} {path}"
        );
        let body: Value = match response.body() {
            lambda_http::Body::Text(t) => serde_json::from_str(t).expect("json body"),
            other => panic!("unexpected body {other:?}"),
        };
        assert!(body["error"].is_string(), "{method} {path}: {body}");
    }
}

/// events/image-sibling.json: what CloudFront's origin group sends image-sibling's
/// function URL (signed by its origin access control) when the bucket has no WebP sibling
/// of a medium variant (and the same for its AVIF). The function answers it with the
/// sibling, base64-encoded, and stores it; an event for a variant that does not exist is
/// our JSON 404.
#[tokio::test]
async fn the_function_url_event_gets_a_variant_its_webp_and_avif_siblings() {
    let text = std::fs::read_to_string(events_dir().join("image-sibling.json")).expect("event");
    let dir = tempfile::tempdir().expect("dir");
    let files: sitehost::store::files::SharedFiles =
        Arc::new(sitehost::store::disk_files::LocalFiles::open(dir.path()).expect("files"));
    let variant = "img/upload/shop-k3v9x0q2m1za--1.medium.jpg";
    files
        .put(variant, support::media::jpeg(640, 480).into(), "image/jpeg")
        .await
        .expect("put");
    let siblings = sitehost::deployment::siblings(Some(&files)).expect("a build with images");
    let answer = |text: String| {
        let siblings = &siblings;
        async move {
            let request = lambda::from_lambda(
                lambda_http::request::from_str(&text).expect("a function URL event"),
            );
            lambda::to_lambda(
                sitehost::api::siblings::answer(siblings, request.method(), request.uri().path())
                    .await,
            )
        }
    };

    let response = answer(text.clone()).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "image/webp");
    let lambda_http::Body::Binary(webp) = response.body() else {
        panic!("a binary body (base64 in the function's answer)");
    };
    let sibling =
        image::load_from_memory_with_format(webp, image::ImageFormat::WebP).expect("a WebP");
    assert_eq!((sibling.width(), sibling.height()), (640, 480));
    assert!(files
        .exists(&format!("{variant}.webp"))
        .await
        .expect("exists"));

    // The AVIF sibling, as CloudFront asks for it for a viewer that accepts AVIF.
    let avif = text
        .replace(".medium.jpg.webp", ".medium.jpg.avif")
        .replace("\"image/webp\"", "\"image/avif\"");
    let response = answer(avif).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "image/avif");
    let lambda_http::Body::Binary(avif) = response.body() else {
        panic!("a binary body (base64 in the function's answer)");
    };
    assert_eq!(avif.get(4..12), Some(&b"ftypavif"[..]));
    assert!(files
        .exists(&format!("{variant}.avif"))
        .await
        .expect("exists"));

    let other = text.replace("--1.medium.jpg.webp", "--2.medium.jpg.webp");
    let response = answer(other).await;
    assert_eq!(response.status(), 404);
    let lambda_http::Body::Text(body) = response.body() else {
        panic!("a JSON body");
    };
    assert!(body.contains("no file at /img/upload/shop-k3v9x0q2m1za--2.medium.jpg.webp"));
}

/// The answer of the business-list handler to `event` on `app`: status and JSON body.
async fn business_list_answer(app: &TestApp, event: &Value) -> (u16, Value) {
    let request = lambda_http::request::from_str(&event.to_string()).expect("an API Gateway event");
    let response = lambda::to_lambda(
        app.handle_operation(Operation::BusinessList, lambda::from_lambda(request))
            .await,
    );
    let body = match response.body() {
        lambda_http::Body::Text(t) => serde_json::from_str(t).expect("json body"),
        other => panic!("unexpected body {other:?}"),
    };
    (response.status().as_u16(), body)
}

/// The sample business list with `X-Origin-Verify` set to `value`, or without it.
fn list_event_with_origin(value: Option<&str>) -> Value {
    let path = events_dir().join("business-list.json");
    let text = std::fs::read_to_string(&path).expect("event");
    let mut event: Value = serde_json::from_str(&text).expect("json");
    let headers = event["headers"].as_object_mut().expect("headers");
    headers.remove("x-origin-verify");
    if let Some(value) = value {
        headers.insert("x-origin-verify".into(), Value::from(value));
    }
    event
}

/// With the origin secret configured (as the template always configures it), an event
/// without it, or with another value, is answered 403 before any store call, saying to
/// call the frontend host. The refused events carry the same signature and nonce as the
/// one that then passes: they recorded no nonce (a replay would be a 401).
#[tokio::test]
async fn origin_secret_missing_or_wrong_is_403_before_the_store() {
    let app = fixture_app(&FIXTURE, &[], Some(ORIGIN_SECRET)).await;
    let near_miss = format!("{}x", &ORIGIN_SECRET[1..]);
    for refused in [None, Some("wrong"), Some(near_miss.as_str()), Some("")] {
        let (status, body) = business_list_answer(&app, &list_event_with_origin(refused)).await;
        assert_eq!(status, 403, "{refused:?}: {body}");
        let message = body["error"].as_str().expect("an error message");
        assert!(message.contains("frontend host"), "{message}");
    }
    let (status, body) =
        business_list_answer(&app, &list_event_with_origin(Some(ORIGIN_SECRET))).await;
    assert_eq!(status, 200, "{body}");
}

/// Rotating the secret: while both are configured, either value is served; once the
/// previous one is dropped, only the new one is.
#[tokio::test]
async fn during_an_origin_secret_rotation_both_are_accepted_then_only_the_new_one() {
    const NEW: &str = "rotatedOriginVerify0secret0of0the0distribution2";
    let rotating = || {
        OriginSecret::new(NEW)
            .expect("secret")
            .with_previous(Some(ORIGIN_SECRET))
    };
    for held in [ORIGIN_SECRET, NEW] {
        // A fresh store each time: the event's nonce is accepted once per store.
        let app = fixture_app_with_secret(SIGNED_AT + 5, &FIXTURE, &[], Some(rotating())).await;
        let (status, body) = business_list_answer(&app, &list_event_with_origin(Some(held))).await;
        assert_eq!(status, 200, "{held}: {body}");
    }
    let rotated = OriginSecret::new(NEW);
    let app = fixture_app_with_secret(SIGNED_AT + 5, &FIXTURE, &[], rotated.clone()).await;
    let (status, _) =
        business_list_answer(&app, &list_event_with_origin(Some(ORIGIN_SECRET))).await;
    assert_eq!(
        status, 403,
        "the old secret is refused once the rotation ends"
    );
    let app = fixture_app_with_secret(SIGNED_AT + 5, &FIXTURE, &[], rotated).await;
    let (status, _) = business_list_answer(&app, &list_event_with_origin(Some(NEW))).await;
    assert_eq!(status, 200);
}

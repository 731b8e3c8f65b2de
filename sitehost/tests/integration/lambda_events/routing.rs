//! Events no API route matches, and the image-sibling function's function URL events.

use std::sync::Arc;

use serde_json::{json, Value};
use sitehost::api::{lambda, Operation};

use super::{API_HOST, FIXTURE};
use crate::support;
use crate::support::events::{events_dir, fixture_app, ORIGIN_SECRET, SIGNED_AT};

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
                sitehost::api::sibling_answer::answer(
                    siblings,
                    request.method(),
                    request.uri().path(),
                    None,
                )
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

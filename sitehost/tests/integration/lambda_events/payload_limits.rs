//! Bodies at and over the limits: a maximum-size upload fits Lambda's payload limit, and a
//! body over the limit is refused saying what to do.

use serde_json::{json, Value};
use sitehost::api::{lambda, Operation};
use sitehost::auth::oauth1;

use super::{API_HOST, FIXTURE, KEY, SECRET};
use crate::support::events::{fixture_app, ORIGIN_SECRET, SIGNED_AT};

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
// Reads better whole: one event built field by field to the payload limit.
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

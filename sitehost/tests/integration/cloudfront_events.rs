//! `events/cloudfront-*.json`: API Gateway HTTP API (payload v2) events as they arrive
//! through the CloudFront distribution of `template.yaml`. `Host` is the execute-api domain
//! (the origin request policy forwards every viewer header but `Host`), the viewer-request
//! CloudFront Function has put the frontend host into `X-Forwarded-Host`, CloudFront added
//! the origin-verify secret in `X-Origin-Verify` (an origin custom header), `Via`,
//! `X-Amz-Cf-Id` and its edge address to `X-Forwarded-For`. The partner signed the request
//! against `https://<frontend host>/...`.
//!
//! Each event runs through its function's handler under a fixed clock and a known key, as
//! `lambda_events/` does: the right signature is accepted, and the same event with another
//! `X-Forwarded-Host` (a signature made for another host) is a 401; the event without the
//! secret or with a wrong one is a 403 (not through the distribution). One event is sent
//! straight to the execute-api domain and signed against it: a 403, whatever it claims in
//! `X-Forwarded-Host`; without a secret configured, that claim is ignored.
//!
//! `SITEHOST_WRITE_EVENTS=1 cargo test -p sitehost --test integration cloudfront_events`
//! rewrites the events after a change to this file.

use crate::support;

use serde_json::{json, Value};
use sitehost::api::{lambda, params, Operation};
use sitehost::auth::oauth1;
use support::events::{
    assert_fixture_answer, events_dir, fixture_app, FixtureKey, ORIGIN_SECRET, SIGNED_AT,
};

const KEY: &str = "cloudfrontfixturekey";
const SECRET: &str = "cloudfrontfixturesecret00000000000000001";
const FIXTURE: FixtureKey = FixtureKey {
    account: "cloudfront",
    key: KEY,
    secret: SECRET,
};
const API_ID: &str = "abc123";
const API_HOST: &str = "abc123.execute-api.us-east-1.amazonaws.com";
/// The distribution's domain, the host partners call.
const FRONTEND_HOST: &str = "d111111abcdef8.cloudfront.net";
/// A custom domain (the template's `DomainName`) in front of the same distribution.
const CUSTOM_HOST: &str = "api.example.com";
/// Another distribution: a signature made for it must not verify here.
const OTHER_HOST: &str = "d222222abcdef8.cloudfront.net";
/// The CloudFront edge that forwarded the request (the source address API Gateway sees).
const EDGE_IP: &str = "130.176.0.12";
const CLIENT_IP: &str = "203.0.113.10";

/// How the request reached API Gateway.
#[derive(Clone, Copy, PartialEq)]
enum Via {
    /// Through the distribution, the viewer having called this host.
    CloudFront(&'static str),
    /// Straight to the execute-api domain.
    Direct,
}

struct Case {
    file: &'static str,
    operation: Operation,
    method: &'static str,
    path: &'static str,
    route_path: &'static str,
    query: &'static str,
    body: Option<Value>,
    via: Via,
    expect_status: u16,
}

// Reads better whole: a table, one row per event.
fn cases() -> Vec<Case> {
    vec![
        Case {
            file: "cloudfront-business-list.json",
            operation: Operation::BusinessList,
            method: "GET",
            path: "/api/v2/businesses/",
            route_path: "/api/v2/businesses/",
            query: "limit=2&project_type=default",
            body: None,
            via: Via::CloudFront(FRONTEND_HOST),
            expect_status: 200,
        },
        Case {
            file: "cloudfront-business-get.json",
            operation: Operation::BusinessGet,
            method: "GET",
            path: "/api/v2/businesses/1",
            route_path: "/api/v2/businesses/{id}",
            query: "",
            body: None,
            via: Via::CloudFront(FRONTEND_HOST),
            expect_status: 200,
        },
        Case {
            file: "cloudfront-business-create.json",
            operation: Operation::BusinessCreate,
            method: "POST",
            path: "/api/v2/businesses/",
            route_path: "/api/v2/businesses/",
            query: "",
            body: Some(json!({"business_name": "Harbour Cafe", "partner_business_id": "hc-77"})),
            via: Via::CloudFront(FRONTEND_HOST),
            expect_status: 201,
        },
        Case {
            file: "cloudfront-business-update.json",
            operation: Operation::BusinessUpdate,
            method: "PUT",
            path: "/api/v2/businesses/1/",
            route_path: "/api/v2/businesses/{id}/",
            query: "",
            body: Some(json!({"id": 1, "deleted": true})),
            via: Via::CloudFront(FRONTEND_HOST),
            expect_status: 200,
        },
        Case {
            file: "cloudfront-image-get.json",
            operation: Operation::ImageGet,
            method: "GET",
            path: "/api/v2/images/1/",
            route_path: "/api/v2/images/{id}/",
            query: "",
            body: None,
            via: Via::CloudFront(FRONTEND_HOST),
            expect_status: 200,
        },
        Case {
            file: "cloudfront-custom-domain-business-list.json",
            operation: Operation::BusinessList,
            method: "GET",
            path: "/api/v2/businesses",
            route_path: "/api/v2/businesses",
            query: "order_by=-business_name",
            body: None,
            via: Via::CloudFront(CUSTOM_HOST),
            expect_status: 200,
        },
        Case {
            file: "cloudfront-direct-business-list.json",
            operation: Operation::BusinessList,
            method: "GET",
            path: "/api/v2/businesses/",
            route_path: "/api/v2/businesses/",
            query: "limit=5",
            body: None,
            via: Via::Direct,
            // Around the edge: refused before its signature is looked at.
            expect_status: 403,
        },
    ]
}

/// The partner's `Authorization` header for the request, signed for `https://<host>/...`.
fn authorization(case: &Case, signed_host: &str, nonce: &str) -> String {
    let params = params::parse(case.query).unwrap_or_default();
    oauth1::authorization_header(
        case.method,
        &format!("https://{signed_host}{}", case.path),
        &params,
        KEY,
        SECRET,
        SIGNED_AT,
        nonce,
    )
}

fn event_json(case: &Case, nonce: &str) -> Value {
    let params = params::parse(case.query).unwrap_or_default();
    let signed_host = match case.via {
        Via::CloudFront(host) => host,
        Via::Direct => API_HOST,
    };
    let auth = authorization(case, signed_host, nonce);
    let body = case.body.as_ref().map(Value::to_string);
    let mut headers = json!({
        "accept": "*/*",
        "accept-encoding": "gzip, deflate",
        "authorization": auth,
        "host": API_HOST,
        "user-agent": "python-requests/2.31.0",
        "x-amzn-trace-id": "Root=1-66322dc0-0123456789abcdef01234567",
        "x-forwarded-port": "443",
        "x-forwarded-proto": "https"
    });
    if let Some(body) = &body {
        headers["content-type"] = json!("application/json");
        headers["content-length"] = json!(body.len().to_string());
    }
    let source_ip = match case.via {
        Via::CloudFront(host) => {
            headers["via"] =
                json!("2.0 0c6f3e8d0b7e5b4c2b1a0f9e8d7c6b5a.cloudfront.net (CloudFront)");
            headers["x-amz-cf-id"] = json!(format!(
                "Z2Jr4n0cF1x{nonce}q8Yw5dS3aL0kP7mV9tE1uB6hC2gN4oR=="
            ));
            headers["x-forwarded-for"] = json!(format!("{CLIENT_IP}, {EDGE_IP}"));
            headers["x-forwarded-host"] = json!(host);
            headers["x-origin-verify"] = json!(ORIGIN_SECRET);
            EDGE_IP
        }
        Via::Direct => {
            headers["x-forwarded-for"] = json!(CLIENT_IP);
            // Sent by the client, not by our CloudFront (no X-Origin-Verify): ignored.
            headers["x-forwarded-host"] = json!(FRONTEND_HOST);
            CLIENT_IP
        }
    };
    let mut query_map = serde_json::Map::new();
    for (n, v) in &params {
        query_map.insert(n.clone(), json!(v));
    }
    let route_key = format!("{} {}", case.method, case.route_path);
    json!({
        "version": "2.0",
        "routeKey": route_key,
        "rawPath": case.path,
        "rawQueryString": case.query,
        "headers": headers,
        "queryStringParameters": if query_map.is_empty() { Value::Null } else { Value::Object(query_map) },
        "pathParameters": if case.route_path.contains("{id}") { json!({"id": "1"}) } else { Value::Null },
        "requestContext": {
            "accountId": "123456789012",
            "apiId": API_ID,
            "domainName": API_HOST,
            "domainPrefix": API_ID,
            "http": {
                "method": case.method,
                "path": case.path,
                "protocol": "HTTP/1.1",
                "sourceIp": source_ip,
                "userAgent": "python-requests/2.31.0"
            },
            "requestId": format!("req-{nonce}"),
            "routeKey": route_key,
            "stage": "$default",
            "time": "01/May/2024:12:00:00 +0000",
            "timeEpoch": SIGNED_AT * 1000
        },
        "body": body,
        "isBase64Encoded": false
    })
}

/// Runs an event (JSON text) through an operation's handler: status and JSON body. The app
/// is configured as the template configures the functions: `ORIGIN_SECRET` is
/// `SITEHOST_ORIGIN_VERIFY`.
async fn run(
    public_hosts: &[&str],
    operation: Operation,
    event: &str,
) -> (u16, Value, lambda_http::Response<lambda_http::Body>) {
    run_with_secret(public_hosts, Some(ORIGIN_SECRET), operation, event).await
}

async fn run_with_secret(
    public_hosts: &[&str],
    origin_secret: Option<&str>,
    operation: Operation,
    event: &str,
) -> (u16, Value, lambda_http::Response<lambda_http::Body>) {
    let app = fixture_app(&FIXTURE, public_hosts, origin_secret).await;
    let request = lambda_http::request::from_str(event).expect("an API Gateway event");
    let response = lambda::to_lambda(
        app.handle_operation(operation, lambda::from_lambda(request))
            .await,
    );
    let body = match response.body() {
        lambda_http::Body::Text(t) => serde_json::from_str(t).expect("json body"),
        other => panic!("unexpected body {other:?}"),
    };
    (response.status().as_u16(), body, response)
}

/// The event with one header replaced, or removed with `None`.
fn with_header(event: &str, name: &str, value: Option<&str>) -> String {
    let mut event: Value = serde_json::from_str(event).expect("event json");
    let headers = event["headers"].as_object_mut().expect("headers");
    match value {
        Some(value) => headers.insert(name.into(), json!(value)),
        None => headers.remove(name),
    };
    event.to_string()
}

/// The event with its `x-forwarded-host` header replaced, or removed with `None`.
fn with_forwarded_host(event: &str, host: Option<&str>) -> String {
    with_header(event, "x-forwarded-host", host)
}

/// The event signed for another host (same nonce, taken from its request id).
fn signed_for(case: &Case, event: &str, host: &str) -> String {
    let parsed: Value = serde_json::from_str(event).expect("event json");
    let nonce = parsed["requestContext"]["requestId"]
        .as_str()
        .and_then(|id| id.strip_prefix("req-"))
        .expect("request id req-<nonce>");
    with_header(
        event,
        "authorization",
        Some(&authorization(case, host, nonce)),
    )
}

fn read_event(case: &Case, index: usize) -> String {
    let path = events_dir().join(case.file);
    if std::env::var("SITEHOST_WRITE_EVENTS").is_ok_and(|v| v == "1") {
        let event = event_json(case, &format!("cfnonce{index:04}"));
        let text = serde_json::to_string_pretty(&event).expect("json");
        std::fs::write(&path, text + "\n").expect("write event");
    }
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

// Reads better whole: one loop over the events, each tried with every host and secret.
#[tokio::test]
async fn events_through_cloudfront_verify_against_the_frontend_host() {
    for (i, case) in cases().iter().enumerate() {
        let text = read_event(case, i);
        let event: Value = serde_json::from_str(&text).expect("event json");
        assert_eq!(event["headers"]["host"], API_HOST, "{}", case.file);
        assert_eq!(
            event["headers"]["x-forwarded-proto"], "https",
            "{}",
            case.file
        );

        let (status, body, response) = run(&[], case.operation, &text).await;
        assert_eq!(status, case.expect_status, "{}: {body}", case.file);
        if status == 200 {
            assert_fixture_answer(case.operation, &body, response.headers());
        }

        match case.via {
            Via::CloudFront(host) => {
                assert_eq!(event["headers"]["x-forwarded-host"], host, "{}", case.file);
                assert!(event["headers"]["via"]
                    .as_str()
                    .is_some_and(|v| v.ends_with("(CloudFront)")));
                assert!(event["headers"]["x-amz-cf-id"].is_string());

                // The same request, had the viewer called another host: the signature
                // covers the host, so it no longer verifies.
                let other = with_forwarded_host(&text, Some(OTHER_HOST));
                let (status, body, response) = run(&[], case.operation, &other).await;
                assert_eq!(status, 401, "{}: {body}", case.file);
                // It names the URL it checked: the host the viewer called.
                let said = body["error"].as_str().unwrap_or_default();
                assert!(
                    said.starts_with("invalid signature: checked for ")
                        && said.contains(&format!("://{OTHER_HOST}/api/v2/")),
                    "{}: {said}",
                    case.file
                );
                assert!(response.headers().contains_key("www-authenticate"));

                // Without the CloudFront Function's header only `Host` (the execute-api
                // domain) is left: refused, unless the frontend host is configured in
                // SITEHOST_PUBLIC_HOSTS (the template's ExtraPublicHosts / DomainName).
                let stripped = with_forwarded_host(&text, None);
                let (status, body, _) = run(&[], case.operation, &stripped).await;
                assert_eq!(status, 401, "{}: {body}", case.file);
                let (status, body, _) = run(&[host], case.operation, &stripped).await;
                assert_eq!(status, case.expect_status, "{}: {body}", case.file);

                // Without the origin-verify secret, or with a wrong one, the request did
                // not come through the distribution: 403, whatever hosts are configured.
                assert_eq!(event["headers"]["x-origin-verify"], ORIGIN_SECRET);
                let wrong_secret = format!("{}x", &ORIGIN_SECRET[1..]);
                for verify in [None, Some(wrong_secret.as_str()), Some("")] {
                    let unverified = with_header(&text, "x-origin-verify", verify);
                    for hosts in [&[][..], &[host]] {
                        let (status, body, _) = run(hosts, case.operation, &unverified).await;
                        assert_eq!(status, 403, "{} {verify:?}: {body}", case.file);
                    }
                }
                // A deployment without a secret (`sitehost serve` by default) trusts no
                // forwarded header, whatever the request carries.
                let (status, body, _) = run_with_secret(&[], None, case.operation, &text).await;
                assert_eq!(status, 401, "{}: {body}", case.file);
            }
            Via::Direct => {
                assert_eq!(event["headers"]["x-forwarded-host"], FRONTEND_HOST);
                assert!(event["headers"].get("x-origin-verify").is_none());
                assert!(event["headers"].get("via").is_none());
                // Refused (above) with the secret configured. Without one (`sitehost
                // serve`), signed against the execute-api domain, it verifies although its
                // client claimed the frontend host in X-Forwarded-Host; signed for the
                // claimed host, it does not: the claim is ignored without the secret
                // (otherwise a signature made for any host, e.g. another deployment sharing
                // the key, could be replayed here by naming that host).
                let (status, body, _) = run_with_secret(&[], None, case.operation, &text).await;
                assert_eq!(status, 200, "{}: {body}", case.file);
                let claimed = signed_for(case, &text, FRONTEND_HOST);
                let (status, body, _) = run_with_secret(&[], None, case.operation, &claimed).await;
                assert_eq!(status, 401, "{}: {body}", case.file);
                assert!(
                    body["error"]
                        .as_str()
                        .is_some_and(|said| said.starts_with("invalid signature")),
                    "{}: {body}",
                    case.file
                );
                let claimed = signed_for(case, &text, OTHER_HOST);
                let claimed = with_forwarded_host(&claimed, Some(OTHER_HOST));
                let (status, body, _) = run(&[], case.operation, &claimed).await;
                assert_eq!(status, 403, "{}: {body}", case.file);
                // The same claim next to the secret (as CloudFront sends it) counts.
                let verified = with_header(&claimed, "x-origin-verify", Some(ORIGIN_SECRET));
                let (status, body, _) = run(&[], case.operation, &verified).await;
                assert_eq!(status, 200, "{}: {body}", case.file);
            }
        }
    }
}

#[test]
fn every_cloudfront_event_file_is_a_case() {
    let names: Vec<&str> = cases().iter().map(|c| c.file).collect();
    let mut files: Vec<String> = std::fs::read_dir(events_dir())
        .expect("events dir")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with("cloudfront-") && n.ends_with(".json"))
        .collect();
    files.sort();
    for file in &files {
        assert!(
            names.contains(&file.as_str()),
            "events/{file} is not run by any case"
        );
    }
}

/// The code of the template's viewer-request CloudFront Function (`ForwardedHostFunction`),
/// as CloudFormation makes it from its `!Sub` when the stack's `Production` is `production`.
fn cloudfront_function_code_in(production: &str) -> String {
    let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../template.yaml");
    let text = std::fs::read_to_string(&path).expect("template.yaml");
    let template: serde_yaml::Value = serde_yaml::from_str(&text).expect("YAML");
    let code = &template["Resources"]["ForwardedHostFunction"]["Properties"]["FunctionCode"];
    let serde_yaml::Value::Tagged(sub) = code else {
        panic!("ForwardedHostFunction's FunctionCode: !Sub");
    };
    assert_eq!(sub.tag, "!Sub");
    let code = sub.value.as_str().expect("!Sub of the code");
    // Production is the only variable it names.
    assert_eq!(code.matches("${").count(), 1, "{code}");
    code.replace("${Production}", production)
}

fn cloudfront_function_code() -> String {
    cloudfront_function_code_in("false")
}

/// In production the default `*.cloudfront.net` host (whose TLS policy CloudFront fixes at
/// TLSv1) refuses the API with a JSON 403; the custom domain passes. Outside production the
/// cloudfront.net host is served. Run with node; skipped without it.
#[test]
fn in_production_the_cloudfront_net_host_refuses_the_api() {
    let viewer = |code: String| {
        format!(
            "{code}\n\
             function viewer(host) {{\n\
               return handler({{request: {{method: 'GET', uri: '/api/v2/businesses/', \
                 querystring: {{}}, cookies: {{}}, headers: {{host: {{value: host}}, \
                 'cloudfront-forwarded-proto': {{value: 'https'}}}}}}}});\n\
             }}\n\
             console.log(JSON.stringify({{default: viewer('d111111abcdef8.cloudfront.net'), \
               upper: viewer('D111111ABCDEF8.CLOUDFRONT.NET'), \
               custom: viewer('api.example.com')}}));\n"
        )
    };
    let Some(production) =
        crate::support::node::run_json(&viewer(cloudfront_function_code_in("true")))
    else {
        return;
    };
    for case in ["default", "upper"] {
        let refused = &production[case];
        assert_eq!(refused["statusCode"], 403, "{case}: {refused}");
        let body: Value =
            serde_json::from_str(refused["body"]["data"].as_str().expect("a text body"))
                .expect("a JSON body");
        assert!(
            body["error"]
                .as_str()
                .is_some_and(|m| m.contains("custom domain")),
            "{body}"
        );
    }
    let passed = &production["custom"];
    assert!(passed.get("statusCode").is_none(), "{passed}");
    assert_eq!(
        passed["headers"]["x-forwarded-host"]["value"],
        "api.example.com"
    );

    let trial = crate::support::node::run_json(&viewer(cloudfront_function_code_in("false")))
        .expect("node ran once already");
    for case in ["default", "custom"] {
        assert!(
            trial[case].get("statusCode").is_none(),
            "{case}: {}",
            trial[case]
        );
    }
}

/// The CloudFront Function fails closed: only a request whose `CloudFront-Forwarded-Proto`
/// is `https` goes on to the API. Plain HTTP, and a request whose protocol it cannot tell
/// (the header missing or empty: the origin request policy no longer adds it), get the JSON
/// 403. Run with node, as `template/image_files.rs` runs it; skipped without node.
#[test]
fn the_cloudfront_function_refuses_a_request_whose_protocol_it_cannot_tell() {
    let script = format!(
        "{code}\n\
         function viewer(proto) {{\n\
           var headers = {{host: {{value: '{FRONTEND_HOST}'}}, \
             'x-forwarded-proto': {{value: 'https'}}}};\n\
           if (proto !== null) {{ headers['cloudfront-forwarded-proto'] = {{value: proto}}; }}\n\
           return handler({{request: {{method: 'GET', uri: '/api/v2/businesses/', \
             querystring: {{}}, headers: headers, cookies: {{}}}}}});\n\
         }}\n\
         console.log(JSON.stringify({{https: viewer('https'), http: viewer('http'), \
           missing: viewer(null), empty: viewer(''), upper: viewer('HTTP')}}));\n",
        code = cloudfront_function_code()
    );
    let Some(out) = crate::support::node::run_json(&script) else {
        return;
    };
    let passed = &out["https"];
    assert!(passed.get("statusCode").is_none(), "{passed}");
    assert_eq!(passed["headers"]["x-forwarded-proto"]["value"], "https");
    assert_eq!(
        passed["headers"]["x-forwarded-host"]["value"],
        FRONTEND_HOST
    );
    for case in ["http", "missing", "empty", "upper"] {
        let refused = &out[case];
        assert_eq!(refused["statusCode"], 403, "{case}: {refused}");
        assert_eq!(
            refused["headers"]["content-type"]["value"], "application/json",
            "{case}"
        );
        let body: Value =
            serde_json::from_str(refused["body"]["data"].as_str().expect("a text body"))
                .expect("a JSON body");
        let message = body["error"].as_str().expect("{\"error\": \"...\"}");
        assert!(message.contains("HTTPS"), "{case}: {message}");
    }
}

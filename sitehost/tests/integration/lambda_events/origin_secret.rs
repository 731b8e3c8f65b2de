//! The origin-verify secret: without it, or with a wrong one, 403 before the store; both
//! accepted while it rotates.

use serde_json::Value;
use sitehost::api::{lambda, Operation};
use sitehost::config::OriginSecret;

use super::FIXTURE;
use crate::support::app::TestApp;
use crate::support::events::{
    events_dir, fixture_app, fixture_app_with_secret, ORIGIN_SECRET, SIGNED_AT,
};

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

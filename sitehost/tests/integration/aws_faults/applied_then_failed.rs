//! Where issue #46 found a success turned into an error: a write that DynamoDB applied and
//! answered with `InternalServerError`, every time the SDK sent it. The double fails every
//! DynamoDB write that way (`Rates::after` 1), nothing else.

use dynamo_double::{Faults, Rates};
use serde_json::json;
use sitehost::clock::{Clock, SystemClock};
use sitehost::domain::account::{ApiKey, NewKey};

use super::{app, Aws};
use crate::support::app::TestApp;

pub(super) fn every_write_applied_then_failed() -> Faults {
    Faults {
        dynamodb: Rates {
            before: 0.0,
            after: 1.0,
        },
        ..Faults::none()
    }
}

/// The app through the double (no faults yet) and a key made directly.
pub(super) async fn start() -> Option<(Aws, TestApp, ApiKey)> {
    let aws = Aws::start(Faults::none()).await?;
    let direct = aws.direct_stores();
    let account = direct
        .records
        .ensure_account("applied")
        .await
        .expect("account");
    let new = NewKey::generate(account.id, None, None, SystemClock.now());
    let key = direct.records.create_key(new).await.expect("key");
    let app = app(aws.faulty_stores()).await;
    Some((aws, app, key))
}

/// The nonce's `PutItem` is applied and answered 500; the SDK's retry finds the nonce
/// taken. The request is not a replay: it is answered, never 401.
#[tokio::test]
async fn a_nonce_applied_then_failed_is_the_requests_own() {
    let Some((aws, app, key)) = start().await else {
        return;
    };
    aws.double
        .set_faults(every_write_applied_then_failed())
        .expect("faults");
    let listed = app
        .partner_client(&key)
        .get("/api/v2/businesses/")
        .await
        .expect("list");
    assert_eq!(listed.status, 200, "{}", listed.body);
    assert!(aws.double.stats().dynamodb_faults_after >= 1);
    aws.table.delete().await;
}

/// A keyed create whose transaction is applied and answered 500 on every try is a 503 with
/// `Retry-After`; its answer was written with it, so the retry is a replay of the one
/// business, and nothing is made twice.
#[tokio::test]
async fn a_create_applied_then_failed_is_a_503_and_its_retry_a_replay() {
    let Some((aws, app, key)) = start().await else {
        return;
    };
    let client = app.partner_client(&key);
    let body = json!({"business_name": "Before"}).to_string().into_bytes();
    let headers = [("idempotency-key", "before")];
    let first = client
        .send_with_headers("POST", "/api/v2/businesses/", Some(body), &headers)
        .await
        .expect("first create");
    assert_eq!(first.status, 201, "{}", first.body);

    aws.double
        .set_faults(every_write_applied_then_failed())
        .expect("faults");
    let body = json!({"business_name": "Lost answer"})
        .to_string()
        .into_bytes();
    let headers = [("idempotency-key", "lost-answer")];
    let failed = client
        .send_with_headers("POST", "/api/v2/businesses/", Some(body.clone()), &headers)
        .await
        .expect("create");
    assert_eq!(failed.status, 503, "{}", failed.body);
    assert_eq!(failed.headers["retry-after"], "1");
    assert!(failed.body["error"].is_string());

    aws.double.set_faults(Faults::none()).expect("no faults");
    let retried = client
        .send_with_headers("POST", "/api/v2/businesses/", Some(body), &headers)
        .await
        .expect("retry");
    assert_eq!(retried.status, 201, "{}", retried.body);
    assert_eq!(retried.headers["idempotent-replayed"], "true");
    assert_eq!(retried.body["business_name"], "Lost answer");
    let listed = client.get("/api/v2/businesses/").await.expect("list");
    assert_eq!(listed.body["meta"]["total_count"], 2, "{}", listed.body);
    aws.table.delete().await;
}

//! The business API over real HTTP: `sitehost serve`'s server on the embedded store, driven
//! with OAuth1-signed requests as partners send them. Each file is one subject; this module
//! holds what they share.

mod authentication;
mod bad_input;
mod budgets;
mod businesses;
mod concurrency;
mod floods;
mod idempotency;
mod slow_clients;

use serde_json::Value;
use sitehost::clock::{Clock, SystemClock};
use sitehost::config::RequestBudgets;

// The signing client, every reply checked against docs/openapi.json.
use crate::support::app::TestApp;
use crate::support::openapi::CheckedClient;

async fn create(client: &CheckedClient, body: Value) -> Value {
    let reply = client
        .post("/api/v2/businesses/", &body)
        .await
        .expect("create");
    assert_eq!(reply.status, 201, "{}", reply.body);
    reply.body
}

/// 15 seconds into the current minute: requests signed now are within the timestamp
/// window, and a refusal says exactly when the minute ends.
fn fifteen_seconds_into_this_minute() -> i64 {
    let now = SystemClock.now();
    now - now.rem_euclid(60) + 15
}

/// `sitehost serve`'s server with these per-key budgets (0 is unlimited), its clock
/// [`fifteen_seconds_into_this_minute`].
async fn server_with_budgets(requests_per_minute: u64, uploads_per_minute: u64) -> TestApp {
    let budgets = RequestBudgets {
        requests_per_minute,
        uploads_per_minute,
    };
    TestApp::builder()
        .config(|config| config.budgets = budgets)
        .clock(fifteen_seconds_into_this_minute())
        .spawn()
        .await
}

fn assert_over_budget(reply: &sitehost::client::ClientResponse, message: &str) {
    assert_eq!(reply.status, 429, "{}", reply.body);
    let header = |name: &str| reply.headers.get(name).and_then(|v| v.to_str().ok());
    assert_eq!(header("retry-after"), Some("45"));
    assert_eq!(header("content-type"), Some("application/json"));
    let error = reply.body["error"].as_str().expect("an error message");
    assert!(error.contains(message), "{error}");
    assert_eq!(
        reply.body.as_object().map(|o| o.len()),
        Some(1),
        "{}",
        reply.body
    );
}

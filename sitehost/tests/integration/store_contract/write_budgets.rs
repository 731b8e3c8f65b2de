//! Writes pay for what they store: a create or update of a business's services and
//! locations costs its key one request per started 4 KB of them, drawn before the write.
//! A burst of maximal creates is refused (429, `Retry-After`) after about the key's budget
//! in bytes, while small requests still pass at the request budget; both stores.

use http::{Method, Request};
use serde_json::{json, Value};
use sitehost::api::budgets::stored_cost;
use sitehost::auth::oauth1;
use sitehost::config::RequestBudgets;
use sitehost::domain::account::{ApiKey, NewKey};
use sitehost::domain::location::{details_bytes, LocationFields, MAX_LOCATIONS, MAX_SERVICES};
use sitehost::store::{SharedStore, Stores};

use super::fixtures::{all, total};
use crate::support::app::TestApp;

/// 15 seconds into a budget window.
const NOW: i64 = 1_700_000_040 + 15;
const LIMIT: u64 = 240;

/// The largest business body (about 211 KB of services and locations as stored), and
/// those bytes.
fn maximal_business() -> (Value, u64) {
    let locations: Vec<LocationFields> = (0..MAX_LOCATIONS)
        .map(|i| LocationFields {
            location_name: Some(format!("L{i}")),
            partner_location_id: Some("i".repeat(255)),
            description: Some("d".repeat(2_000)),
            street: Some("s".repeat(255)),
            street2: Some("t".repeat(255)),
            city: Some("c".repeat(255)),
            state: Some("e".repeat(255)),
            postal_code: Some("p".repeat(255)),
            country: Some("o".repeat(255)),
            ..Default::default()
        })
        .collect();
    let services: Vec<String> = (0..MAX_SERVICES)
        .map(|i| format!("{i:03}{}", "s".repeat(252)))
        .collect();
    let bytes = details_bytes(&services, &locations);
    let body = json!({
        "business_name": "Large",
        "services": services,
        "locations": locations,
    });
    (body, bytes)
}

struct Partner<'a> {
    app: &'a TestApp,
    key: ApiKey,
    sent: std::cell::Cell<u32>,
}

impl Partner<'_> {
    /// Sends a signed JSON request; its status, `Retry-After` and body.
    async fn send(&self, method: Method, path: &str, body: &Value) -> (u16, Option<String>, Value) {
        let uri = format!("http://127.0.0.1:3000{path}");
        self.sent.set(self.sent.get() + 1);
        let nonce = format!("n{}", self.sent.get());
        let authorization = oauth1::authorization_header(
            method.as_str(),
            &uri,
            &[],
            &self.key.key,
            &self.key.secret,
            NOW,
            &nonce,
        );
        let request = Request::builder()
            .method(method)
            .uri(&uri)
            .header("host", "127.0.0.1:3000")
            .header("authorization", authorization)
            .header("content-type", "application/json")
            .body(bytes::Bytes::from(body.to_string()))
            .expect("request");
        let response = self.app.handle(request).await;
        let retry_after = response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let body = serde_json::from_slice(response.body()).unwrap_or(Value::Null);
        (response.status().as_u16(), retry_after, body)
    }
}

async fn app_with_key(store: &SharedStore) -> (TestApp, ApiKey, i64) {
    let account = store.ensure_account("bytes").await.expect("account");
    let key = store
        .create_key(NewKey::generate(account.id, None, None, NOW))
        .await
        .expect("key");
    let app = TestApp::builder()
        .stores(Stores {
            records: store.clone(),
            files: None,
        })
        .config(|config| {
            config.budgets = RequestBudgets {
                requests_per_minute: LIMIT,
                uploads_per_minute: 0,
            }
        })
        .clock(NOW)
        .build()
        .await;
    (app, key, account.id)
}

fn assert_refused_for_bytes((status, retry_after, body): &(u16, Option<String>, Value)) {
    assert_eq!(*status, 429, "{body}");
    assert_eq!(retry_after.as_deref(), Some("45"));
    let message = body["error"].as_str().unwrap_or_default();
    assert!(message.contains("per started 4 KB"), "{message}");
}

pub async fn maximal_creates_pay_for_their_bytes(store: SharedStore) {
    let (app, key, account) = app_with_key(&store).await;
    let partner = Partner {
        app: &app,
        key,
        sent: Default::default(),
    };
    let (body, bytes) = maximal_business();
    let per_create = 1 + stored_cost(bytes, LIMIT);
    assert!(per_create >= 50, "a maximal create costs {per_create}");
    let fits = LIMIT / per_create;
    for _ in 0..fits {
        let (status, _, reply) = partner
            .send(Method::POST, "/api/v2/businesses/", &body)
            .await;
        assert_eq!(status, 201, "{reply}");
    }
    // The next is admitted as a request, then refused before it writes.
    let refused = partner
        .send(Method::POST, "/api/v2/businesses/", &body)
        .await;
    assert_refused_for_bytes(&refused);
    assert_eq!(total(&store, account, all()).await, fits);
    // What the refused write could not pay for is still there for small requests: the key
    // makes exactly its request budget's worth of requests this minute.
    let left = LIMIT - fits * per_create - 1;
    let small = json!({"business_name": "Small"});
    for _ in 0..left {
        let (status, _, reply) = partner
            .send(Method::POST, "/api/v2/businesses/", &small)
            .await;
        assert_eq!(status, 201, "{reply}");
    }
    let (status, retry_after, _) = partner
        .send(Method::POST, "/api/v2/businesses/", &small)
        .await;
    assert_eq!((status, retry_after.as_deref()), (429, Some("45")));
    assert_eq!(total(&store, account, all()).await, fits + left);
}

/// An update that rewrites services or locations pays for all it stores, the part it keeps
/// included (the stored item holds both lists): `{"services": []}` on a maximal business
/// costs about what its locations take.
pub async fn updates_of_details_pay_for_what_they_rewrite(store: SharedStore) {
    let (app, key, _) = app_with_key(&store).await;
    let partner = Partner {
        app: &app,
        key,
        sent: Default::default(),
    };
    let (body, bytes) = maximal_business();
    let (status, _, created) = partner
        .send(Method::POST, "/api/v2/businesses/", &body)
        .await;
    assert_eq!(status, 201, "{created}");
    let path = format!("/api/v2/businesses/{}/", created["id"]);
    let locations: Vec<LocationFields> =
        serde_json::from_value(body["locations"].clone()).expect("locations");
    let kept = details_bytes(&[], &locations);
    let per_update = 1 + stored_cost(kept, LIMIT);
    assert!(per_update >= 40, "an update costs {per_update}");
    let spent = 1 + stored_cost(bytes, LIMIT);
    let mut updates: u64 = 0;
    loop {
        let reply = partner
            .send(Method::PUT, &path, &json!({"services": []}))
            .await;
        if reply.0 != 200 {
            assert_refused_for_bytes(&reply);
            break;
        }
        updates += 1;
        assert!(updates < 10, "updates are never refused");
    }
    // The create took about `spent`; each update `per_update`.
    let expected = (LIMIT - spent.min(LIMIT)) / per_update;
    assert!(
        updates.abs_diff(expected) <= 1,
        "{updates} updates, about {expected} expected"
    );
    // A rename rewrites no details: one request.
    let (status, _, reply) = partner
        .send(Method::PUT, &path, &json!({"business_name": "Renamed"}))
        .await;
    assert_eq!(status, 200, "{reply}");
}

//! `Idempotency-Key`s through the app, on either store: a replay is the caller's own (its
//! API key's), and many creates with one key at once make one business.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use serde_json::{json, Value};
use sitehost::auth::oauth1;
use sitehost::clock::{Clock, SystemClock};
use sitehost::domain::account::{ApiKey, NewKey};
use sitehost::store::{SharedStore, Stores};

use crate::support::app::TestApp;

/// The app on `store`, in process, and requests signed with its keys.
struct Signing {
    app: TestApp,
}

/// What the app answered.
struct Answer {
    status: u16,
    headers: http::HeaderMap,
    body: Value,
}

impl Answer {
    fn replayed(&self) -> bool {
        self.headers.get("idempotent-replayed").is_some()
    }

    fn location(&self) -> String {
        let location = self.headers.get("location").expect("a Location");
        location.to_str().expect("ASCII").to_string()
    }
}

const BASE: &str = "http://127.0.0.1:3000";

impl Signing {
    async fn new(store: SharedStore) -> Signing {
        let app = TestApp::builder()
            .stores(Stores {
                records: store,
                files: None,
            })
            .build()
            .await;
        Signing { app }
    }

    async fn key(&self, sub: Option<&str>) -> ApiKey {
        let store = &self.app.store;
        let account = store.ensure_account("agency").await.expect("account");
        let new = NewKey::generate(account.id, None, sub.map(str::to_string), SystemClock.now());
        store.create_key(new).await.expect("key")
    }

    async fn send(
        &self,
        key: &ApiKey,
        method: &str,
        path: &str,
        body: Option<&Value>,
        idempotency_key: Option<&str>,
    ) -> Answer {
        static NONCE: AtomicU64 = AtomicU64::new(0);
        let nonce = format!("n{}", NONCE.fetch_add(1, Ordering::Relaxed));
        let uri = format!("{BASE}{path}");
        let now = SystemClock.now();
        let authorization =
            oauth1::authorization_header(method, &uri, &[], &key.key, &key.secret, now, &nonce);
        let mut request = http::Request::builder()
            .method(method)
            .uri(&uri)
            .header("host", "127.0.0.1:3000")
            .header("authorization", authorization);
        if let Some(value) = idempotency_key {
            request = request.header("idempotency-key", value);
        }
        let bytes = match body {
            Some(body) => {
                request = request.header("content-type", "application/json");
                bytes::Bytes::from(body.to_string())
            }
            None => bytes::Bytes::new(),
        };
        let response = self.app.handle(request.body(bytes).expect("request")).await;
        Answer {
            status: response.status().as_u16(),
            headers: response.headers().clone(),
            body: serde_json::from_slice(response.body()).unwrap_or(Value::Null),
        }
    }

    async fn create(&self, key: &ApiKey, body: &Value, idempotency_key: &str) -> Answer {
        let path = "/api/v2/businesses/";
        self.send(key, "POST", path, Some(body), Some(idempotency_key))
            .await
    }
}

/// Through the app: a key restricted to `south` that sends the key and body a `north` key
/// used gets a create of its own, never north's business (its locations, their e-mail).
pub async fn another_subs_key_and_body_create_anew(store: SharedStore) {
    let app = Signing::new(store).await;
    let north = app.key(Some("north")).await;
    let south = app.key(Some("south")).await;
    let body = json!({
        "business_name": "Harbour Cafe",
        "locations": [{"location_name": "Quay", "contact_email": "quay@north.example"}]
    });
    let norths = app.create(&north, &body, "order-1").await;
    assert_eq!(norths.status, 201, "{}", norths.body);
    let souths = app.create(&south, &body, "order-1").await;
    assert_eq!(souths.status, 201, "{}", souths.body);
    assert!(!souths.replayed(), "south's own create ran");
    assert_ne!(souths.body["id"], norths.body["id"], "{}", souths.body);
    assert_eq!(souths.body["partner_sub_id"], "south");
    let seen = app
        .send(&south, "GET", &souths.location(), None, None)
        .await;
    assert_eq!(seen.status, 200, "south sees what its create answered");

    // The same caller's retry is still a replay of its own create.
    let again = app.create(&south, &body, "order-1").await;
    assert_eq!(again.status, 201);
    assert!(again.replayed());
    assert_eq!(again.location(), souths.location());
    assert_eq!(again.body, seen.body);
}

/// Through the app: a sub that sends a key first does not make another sub's later create
/// with the same key and body a silent no-op (a 201 for a business it cannot see).
pub async fn a_sub_sending_first_does_not_swallow_anothers_create(store: SharedStore) {
    let app = Signing::new(store).await;
    let north = app.key(Some("north")).await;
    let south = app.key(Some("south")).await;
    let body = json!({"business_name": "Deterministic"});
    let first = app.create(&south, &body, "sync-42").await;
    assert_eq!(first.status, 201, "{}", first.body);
    let later = app.create(&north, &body, "sync-42").await;
    assert_eq!(later.status, 201, "{}", later.body);
    assert!(!later.replayed(), "not a replay of south's create");
    let seen = app.send(&north, "GET", &later.location(), None, None).await;
    assert_eq!(
        seen.status, 200,
        "north's create made a business north sees"
    );
    assert_eq!(seen.body["partner_sub_id"], "north");
}

/// Through the app: another body under a key another caller used is a create, not the 422
/// that would tell this caller the key was used; the caller's own key with another body is.
pub async fn another_callers_key_is_not_disclosed(store: SharedStore) {
    let app = Signing::new(store).await;
    let north = app.key(Some("north")).await;
    let first = app
        .create(&north, &json!({"business_name": "First"}), "order-1")
        .await;
    assert_eq!(first.status, 201, "{}", first.body);
    let other = app
        .create(&north, &json!({"business_name": "Other"}), "order-1")
        .await;
    assert_eq!(other.status, 422, "north's own key, another body");
    for sub in [Some("south"), None] {
        let key = app.key(sub).await;
        let theirs = app
            .create(&key, &json!({"business_name": "Other"}), "order-1")
            .await;
        assert_eq!(theirs.status, 201, "{sub:?}: {}", theirs.body);
        assert!(!theirs.replayed());
    }
}

/// Through the app: many simultaneous creates with one key make exactly one business, and
/// every one that answers 201 answers it.
pub async fn simultaneous_creates_with_one_key(store: SharedStore) {
    let app = Arc::new(Signing::new(store).await);
    let key = app.key(None).await;
    let body = json!({"business_name": "Once only"});
    let answers = futures_util::future::join_all((0..40).map(|_| {
        let (app, key, body) = (Arc::clone(&app), key.clone(), body.clone());
        async move { app.create(&key, &body, "burst").await }
    }))
    .await;
    let created: Vec<&Answer> = answers.iter().filter(|a| a.status == 201).collect();
    assert!(!created.is_empty());
    assert!(
        answers.iter().all(|a| a.status == 201 || a.status == 409),
        "{:?}",
        answers.iter().map(|a| a.status).collect::<Vec<_>>()
    );
    assert!(created
        .iter()
        .all(|a| a.location() == created[0].location()));
    assert_eq!(created.iter().filter(|a| !a.replayed()).count(), 1);
    let list = app
        .send(&key, "GET", "/api/v2/businesses/", None, None)
        .await;
    assert_eq!(list.body["meta"]["total_count"], 1, "{}", list.body);
}

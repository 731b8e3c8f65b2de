//! The business API over real HTTP: `sitehost serve`'s server on the embedded store, driven
//! with OAuth1-signed requests as partners send them.

mod support;

use std::sync::Arc;

use serde_json::{json, Value};
use sitehost::auth::{oauth1, NewKey};
use sitehost::client::PartnerClient;
use sitehost::clock::{Clock, FixedClock, SystemClock};
use sitehost::config::{Config, RequestBudgets};
use sitehost::http::App;
use sitehost::store::{SharedStore, Stores};

struct Server {
    base: String,
    store: SharedStore,
    _dir: tempfile::TempDir,
}

impl Server {
    async fn start() -> Server {
        Server::start_with(RequestBudgets::default(), None).await
    }

    /// A server with these budgets, and a fixed clock when `now` is set.
    async fn start_with(budgets: RequestBudgets, now: Option<i64>) -> Server {
        let dir = tempfile::tempdir().expect("temp dir");
        let stores = Stores::embedded(dir.path()).expect("stores");
        let store = Arc::clone(&stores.records);
        let mut config = Config::embedded(dir.path().into());
        config.budgets = budgets;
        let mut app = App::new(stores, config).expect("app");
        if let Some(now) = now {
            app = app.with_clock(Arc::new(FixedClock(now)));
        }
        let base = support::serve(Arc::new(app)).await;
        Server {
            base,
            store,
            _dir: dir,
        }
    }

    /// A client with a new key of `account` (optionally sub-restricted).
    async fn client(&self, account: &str, sub: Option<&str>) -> PartnerClient {
        let account = self.store.ensure_account(account).await.expect("account");
        let new = NewKey::generate(account.id, None, sub.map(str::to_string), SystemClock.now());
        let key = self.store.create_key(new).await.expect("key");
        PartnerClient::new(&self.base, &key.key, &key.secret)
    }

    fn raw(&self) -> reqwest::Client {
        reqwest::Client::new()
    }
}

async fn create(client: &PartnerClient, body: Value) -> Value {
    let reply = client
        .post("/api/v2/businesses/", &body)
        .await
        .expect("create");
    assert_eq!(reply.status, 201, "{}", reply.body);
    reply.body
}

#[tokio::test]
async fn create_get_list_update_round_trip() {
    let server = Server::start().await;
    let client = server.client("agency", None).await;
    let reply = client
        .post(
            "/api/v2/businesses/",
            &json!({"business_name": "  Joe's Pizza ", "partner_business_id": "p-1", "category_id": 3,
                    "type": "ignored", "added": "1999-01-01T00:00:00", "user_id": 999}),
        )
        .await
        .expect("create");
    assert_eq!(reply.status, 201);
    let id = reply.body["id"].as_i64().expect("id");
    assert_eq!(
        reply.headers["location"],
        format!("/api/v2/businesses/{id}/")
    );
    assert_eq!(reply.body["business_name"], "Joe's Pizza");
    assert_eq!(reply.body["slug"], "joes-pizza");
    assert_eq!(reply.body["deleted"], false);
    assert_eq!(reply.body["category_id"], 3);
    assert_eq!(reply.body["logo_image"], Value::Null);
    assert_eq!(reply.body["images"], json!([]));
    assert_ne!(reply.body["user_id"], 999);
    assert_ne!(reply.body["added"], "1999-01-01T00:00:00");
    let added = reply.body["added"].as_str().expect("added");
    assert_eq!(added.len(), 19, "{added}");

    // Detail with and without the trailing slash.
    for path in [
        format!("/api/v2/businesses/{id}/"),
        format!("/api/v2/businesses/{id}"),
    ] {
        let got = client.get(&path).await.expect("get");
        assert_eq!(got.status, 200);
        assert_eq!(got.body["partner_business_id"], "p-1");
    }

    // Partial update with id; absent fields stay.
    let updated = client
        .put(
            &format!("/api/v2/businesses/{id}/"),
            &json!({"id": id, "business_name": "Joe's"}),
        )
        .await
        .expect("put");
    assert_eq!(updated.status, 200, "{}", updated.body);
    assert_eq!(updated.body["business_name"], "Joe's");
    assert_eq!(updated.body["category_id"], 3);

    // Soft delete and restore move the business between the filtered lists.
    let count = |filter: &'static str| {
        let client = client.clone();
        async move {
            client
                .get(&format!("/api/v2/businesses/?{filter}"))
                .await
                .expect("list")
                .body["meta"]["total_count"]
                .clone()
        }
    };
    client
        .put(
            &format!("/api/v2/businesses/{id}/"),
            &json!({"deleted": true}),
        )
        .await
        .expect("delete");
    assert_eq!(count("deleted=1").await, 1);
    assert_eq!(count("deleted=false").await, 0);
    assert_eq!(count("").await, 1);
    client
        .put(
            &format!("/api/v2/businesses/{id}/"),
            &json!({"deleted": false}),
        )
        .await
        .expect("restore");
    assert_eq!(count("deleted=true").await, 0);
    assert_eq!(count("deleted=0&project_type=default").await, 1);
}

#[tokio::test]
async fn paging_links_keep_filters_and_order() {
    let server = Server::start().await;
    let client = server.client("agency", None).await;
    for name in ["delta", "Alpha", "charlie", "bravo", "echo"] {
        create(
            &client,
            json!({"business_name": name, "partner_sub_id": "s1"}),
        )
        .await;
    }
    let page = client
        .get("/api/v2/businesses/?order_by=business_name&limit=2&partner_sub_id=s1")
        .await
        .expect("list");
    let names: Vec<&str> = page.body["objects"]
        .as_array()
        .expect("objects")
        .iter()
        .filter_map(|o| o["business_name"].as_str())
        .collect();
    assert_eq!(names, ["Alpha", "bravo"]);
    assert_eq!(page.body["meta"]["total_count"], 5);
    assert_eq!(page.body["meta"]["previous"], Value::Null);
    let next = page.body["meta"]["next"]
        .as_str()
        .expect("next")
        .to_string();
    assert_eq!(
        next,
        "/api/v2/businesses/?order_by=business_name&partner_sub_id=s1&limit=2&offset=2"
    );
    let page2 = client.get(&next).await.expect("next page");
    let names: Vec<&str> = page2.body["objects"]
        .as_array()
        .expect("objects")
        .iter()
        .filter_map(|o| o["business_name"].as_str())
        .collect();
    assert_eq!(names, ["charlie", "delta"]);
    let last = client
        .get(page2.body["meta"]["next"].as_str().expect("next"))
        .await
        .expect("last");
    assert_eq!(last.body["objects"].as_array().map(Vec::len), Some(1));
    assert_eq!(last.body["meta"]["next"], Value::Null);
    assert_eq!(
        last.body["meta"]["previous"],
        "/api/v2/businesses/?order_by=business_name&partner_sub_id=s1&limit=2&offset=2"
    );
    let desc = client
        .get("/api/v2/businesses/?order_by=-id&limit=0")
        .await
        .expect("desc");
    assert_eq!(desc.body["meta"]["limit"], 1000);
    assert_eq!(desc.body["objects"][0]["business_name"], "echo");
}

#[tokio::test]
async fn tenancy_and_sub_id_restriction() {
    let server = Server::start().await;
    let a = server.client("a", None).await;
    let b = server.client("b", None).await;
    let a_sub = server.client("a", Some("north")).await;
    let id = create(&a, json!({"business_name": "A1"})).await["id"]
        .as_i64()
        .expect("id");
    let north = create(&a_sub, json!({"business_name": "N1"})).await;
    assert_eq!(north["partner_sub_id"], "north");

    assert_eq!(
        b.get(&format!("/api/v2/businesses/{id}/"))
            .await
            .expect("get")
            .status,
        404
    );
    let put = b
        .put(
            &format!("/api/v2/businesses/{id}/"),
            &json!({"business_name": "stolen"}),
        )
        .await
        .expect("put");
    assert_eq!(put.status, 404);
    assert_eq!(
        b.get("/api/v2/businesses/").await.expect("list").body["meta"]["total_count"],
        0
    );
    assert_eq!(
        a.get(&format!("/api/v2/businesses/{id}/"))
            .await
            .expect("get")
            .body["business_name"],
        "A1"
    );

    // The restricted key sees only its sub id's businesses.
    assert_eq!(
        a_sub
            .get(&format!("/api/v2/businesses/{id}/"))
            .await
            .expect("get")
            .status,
        404
    );
    let listed = a_sub.get("/api/v2/businesses/").await.expect("list");
    assert_eq!(listed.body["meta"]["total_count"], 1);
    assert_eq!(listed.body["objects"][0]["business_name"], "N1");
    assert_eq!(
        a_sub
            .get("/api/v2/businesses/?partner_sub_id=south")
            .await
            .expect("list")
            .body["meta"]["total_count"],
        0
    );
    assert_eq!(
        a.get("/api/v2/businesses/").await.expect("list").body["meta"]["total_count"],
        2
    );
    let moved = a_sub
        .post(
            "/api/v2/businesses/",
            &json!({"business_name": "x", "partner_sub_id": "south"}),
        )
        .await
        .expect("post");
    assert_eq!(moved.status, 400);
}

#[tokio::test]
async fn bad_input_gets_a_clear_400_and_changes_nothing() {
    let server = Server::start().await;
    let client = server.client("agency", None).await;
    let id = create(&client, json!({"business_name": "Keep"})).await["id"]
        .as_i64()
        .expect("id");
    let path = format!("/api/v2/businesses/{id}/");
    let bodies: Vec<(&str, Vec<u8>, &str)> = vec![
        ("POST", b"{not json".to_vec(), "__all__"),
        ("POST", b"[1, 2]".to_vec(), "__all__"),
        ("POST", b"\"a string\"".to_vec(), "__all__"),
        ("POST", b"{\"business_name\": 5}".to_vec(), "business_name"),
        (
            "POST",
            b"{\"business_name\": \"\"}".to_vec(),
            "business_name",
        ),
        (
            "POST",
            b"{\"business_name\": \"   \"}".to_vec(),
            "business_name",
        ),
        (
            "POST",
            format!("{{\"business_name\": \"{}\"}}", "x".repeat(256)).into_bytes(),
            "business_name",
        ),
        (
            "POST",
            b"{\"business_name\": \"ok\", \"category_id\": \"abc\"}".to_vec(),
            "category_id",
        ),
        (
            "POST",
            b"{\"business_name\": \"ok\", \"logo_image_id\": 12345}".to_vec(),
            "logo_image_id",
        ),
        ("POST", b"\xff\xfe\x00garbage".to_vec(), "__all__"),
        ("PUT", format!("{{\"id\": {}}}", id + 1).into_bytes(), "id"),
        ("PUT", b"{\"deleted\": \"perhaps\"}".to_vec(), "deleted"),
        (
            "PUT",
            b"{\"business_name\": null}".to_vec(),
            "business_name",
        ),
    ];
    for (method, body, field) in bodies {
        let target = if method == "POST" {
            "/api/v2/businesses/"
        } else {
            path.as_str()
        };
        let reply = client
            .send(method, target, Some(body.clone()))
            .await
            .expect("send");
        assert_eq!(
            reply.status,
            400,
            "{method} {}",
            String::from_utf8_lossy(&body)
        );
        assert!(
            reply.body.get(field).is_some(),
            "{field} missing in {}",
            reply.body
        );
    }
    for query in [
        "order_by=name",
        "added__date=2024-02-30",
        "added__date=yesterday",
        "deleted=maybe",
        "limit=-1",
        "limit=1.5",
        "limit=ten",
        "offset=-5",
        "offset=0.5",
    ] {
        let reply = client
            .get(&format!("/api/v2/businesses/?{query}"))
            .await
            .expect("list");
        assert_eq!(reply.status, 400, "{query}: {}", reply.body);
    }
    for bad_id in ["abc", "1.5", "-3", "99999999999999999999999"] {
        let reply = client
            .get(&format!("/api/v2/businesses/{bad_id}/"))
            .await
            .expect("get");
        assert_eq!(reply.status, 400, "{bad_id}");
        assert!(reply.body["id"][0]
            .as_str()
            .is_some_and(|m| m.contains("not a valid id")));
    }
    assert_eq!(
        client
            .get("/api/v2/businesses/424242/")
            .await
            .expect("get")
            .status,
        404
    );
    assert_eq!(
        client.get("/api/v2/nothing/").await.expect("get").status,
        404
    );

    // 10 MB body: 413 before it is read whole.
    let big = vec![b' '; 10 * 1024 * 1024];
    let reply = client.send("POST", "/api/v2/businesses/", Some(big)).await;
    assert!(reply.map(|r| r.status == 413).unwrap_or(true));

    // Nothing changed, and the server still serves.
    let list = client.get("/api/v2/businesses/").await.expect("list");
    assert_eq!(list.body["meta"]["total_count"], 1);
    assert_eq!(list.body["objects"][0]["business_name"], "Keep");
}

#[tokio::test]
async fn authentication_failures_are_401() {
    let server = Server::start().await;
    let client = server.client("agency", None).await;
    let account = server
        .store
        .ensure_account("agency")
        .await
        .expect("account");
    let key = server
        .store
        .create_key(NewKey::generate(account.id, None, None, SystemClock.now()))
        .await
        .expect("key");
    let url = format!("{}/api/v2/businesses/", server.base);
    let now = SystemClock.now();
    let signed = |secret: &str, timestamp: i64, nonce: &str| {
        oauth1::authorization_header("GET", &url, &[], &key.key, secret, timestamp, nonce)
    };
    let cases: Vec<(&str, Option<String>)> = vec![
        ("no header", None),
        ("garbage", Some("Bearer nonsense".into())),
        ("wrong secret", Some(signed("wrong", now, "n1"))),
        (
            "ten minutes old",
            Some(signed(&key.secret, now - 600, "n2")),
        ),
        (
            "unknown key",
            Some(oauth1::authorization_header(
                "GET",
                &url,
                &[],
                "nokey",
                "x",
                now,
                "n3",
            )),
        ),
    ];
    for (what, header) in cases {
        let mut request = server.raw().get(&url);
        if let Some(h) = header {
            request = request.header("authorization", h);
        }
        let reply = request.send().await.expect("send");
        assert_eq!(reply.status(), 401, "{what}");
        let body: Value =
            serde_json::from_slice(&reply.bytes().await.expect("body")).expect("json");
        assert!(body["error"].is_string(), "{what}: {body}");
    }
    // A replayed nonce.
    let header = signed(&key.secret, now, "once");
    let first = server
        .raw()
        .get(&url)
        .header("authorization", &header)
        .send()
        .await
        .expect("send");
    assert_eq!(first.status(), 200);
    let again = server
        .raw()
        .get(&url)
        .header("authorization", &header)
        .send()
        .await
        .expect("send");
    assert_eq!(again.status(), 401);
    // Query-string form works too.
    let query = sitehost::auth::oauth1::authorization_header(
        "GET",
        &url,
        &[],
        &key.key,
        &key.secret,
        now,
        "q1",
    );
    let params: Vec<String> = oauth1::parse_authorization(&query)
        .expect("params")
        .iter()
        .map(|(n, v)| format!("{}={}", oauth1::encode(n), oauth1::encode(v)))
        .collect();
    let reply = server
        .raw()
        .get(format!("{url}?{}", params.join("&")))
        .send()
        .await
        .expect("send");
    assert_eq!(reply.status(), 200);
    // A revoked key stops working at once.
    server.store.revoke_key(&key.key).await.expect("revoke");
    let revoked = server
        .raw()
        .get(&url)
        .header("authorization", signed(&key.secret, now, "n4"))
        .send()
        .await
        .expect("send");
    assert_eq!(revoked.status(), 401);
    assert_eq!(
        client
            .get("/api/v2/businesses/")
            .await
            .expect("list")
            .status,
        200
    );
}

#[tokio::test]
async fn concurrent_creates_get_distinct_ids() {
    let server = Server::start().await;
    let client = server.client("agency", None).await;
    let tasks: Vec<_> = (0..50)
        .map(|i| {
            let client = client.clone();
            tokio::spawn(async move {
                create(&client, json!({"business_name": format!("b{i}")})).await["id"].as_i64()
            })
        })
        .collect();
    let mut ids = Vec::new();
    for task in tasks {
        ids.push(task.await.expect("task").expect("id"));
    }
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 50);
    assert_eq!(
        client.get("/api/v2/businesses/").await.expect("list").body["meta"]["total_count"],
        50
    );
}

/// 15 seconds into the current minute: requests signed now are within the timestamp
/// window, and a refusal says exactly when the minute ends.
fn fifteen_seconds_into_this_minute() -> i64 {
    let now = SystemClock.now();
    now - now.rem_euclid(60) + 15
}

fn assert_over_budget(reply: &sitehost::client::Reply, message: &str) {
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

#[tokio::test]
async fn over_the_request_budget_is_429_with_retry_after_and_does_nothing() {
    let budgets = RequestBudgets {
        requests_per_minute: 3,
        uploads_per_minute: 60,
    };
    let server = Server::start_with(budgets, Some(fifteen_seconds_into_this_minute())).await;
    let client = server.client("agency", None).await;
    let created = create(&client, json!({"business_name": "First"})).await;
    let detail = format!("/api/v2/businesses/{}/", created["id"]);
    assert_eq!(client.get(&detail).await.expect("get").status, 200);
    assert_eq!(
        client
            .get("/api/v2/businesses/")
            .await
            .expect("list")
            .status,
        200
    );

    let refused = client
        .post("/api/v2/businesses/", &json!({"business_name": "Second"}))
        .await
        .expect("create");
    assert_over_budget(&refused, "budget of 3 requests a minute");
    let refused = client.get(&detail).await.expect("get");
    assert_over_budget(&refused, "retry after 45 seconds");

    // Another key has its own budget, and sees that the refused create made nothing.
    let other = server.client("agency", None).await;
    let list = other.get("/api/v2/businesses/").await.expect("list");
    assert_eq!(list.status, 200);
    assert_eq!(list.body["meta"]["total_count"], 1);
    // Authentication comes first: a bad signature is a 401, not a 429.
    let forged = PartnerClient::new(&server.base, "no-such-key", "secret");
    assert_eq!(
        forged.get("/api/v2/businesses/").await.expect("get").status,
        401
    );
}

#[tokio::test]
async fn uploads_have_their_own_budget_and_count_as_requests() {
    let budgets = RequestBudgets {
        requests_per_minute: 10,
        uploads_per_minute: 2,
    };
    let server = Server::start_with(budgets, Some(fifteen_seconds_into_this_minute())).await;
    let client = server.client("agency", None).await;
    let upload = json!({
        "upload": {"name": "dot.png", "file": support::media::b64(&support::media::png(4, 4))},
        "site_id": 1
    });
    for _ in 0..2 {
        let reply = client
            .post("/api/v2/images/", &upload)
            .await
            .expect("upload");
        assert_eq!(reply.status, 201, "{}", reply.body);
    }
    let refused = client
        .post("/api/v2/images/", &upload)
        .await
        .expect("upload");
    assert_over_budget(&refused, "budget of 2 image uploads a minute");

    // Other requests still go through, and the refused upload stored nothing.
    let list = client.get("/api/v2/images/").await.expect("list");
    assert_eq!(list.status, 200);
    assert_eq!(list.body["meta"]["total_count"], 2);
    // Three uploads and a list spent 4 of the 10 requests.
    for _ in 0..6 {
        assert_eq!(
            client.get("/api/v2/images/").await.expect("list").status,
            200
        );
    }
    let refused = client.get("/api/v2/images/").await.expect("list");
    assert_over_budget(&refused, "budget of 10 requests a minute");
}

#[tokio::test]
async fn a_zero_budget_is_unlimited() {
    let budgets = RequestBudgets {
        requests_per_minute: 0,
        uploads_per_minute: 0,
    };
    let server = Server::start_with(budgets, None).await;
    let client = server.client("agency", None).await;
    for _ in 0..30 {
        assert_eq!(
            client
                .get("/api/v2/businesses/")
                .await
                .expect("list")
                .status,
            200
        );
    }
}

#[tokio::test]
async fn offsets_past_the_end_answer_an_empty_page_and_link_back() {
    let server = Server::start().await;
    let client = server.client("agency", None).await;
    for name in ["One", "Two"] {
        create(&client, json!({"business_name": name})).await;
    }
    let page = client
        .get("/api/v2/businesses/?offset=1000000000000000000&order_by=-business_name")
        .await
        .expect("list");
    assert_eq!(page.status, 200, "{}", page.body);
    assert_eq!(page.body["objects"], json!([]));
    assert_eq!(page.body["meta"]["total_count"], 2);
    assert_eq!(page.body["meta"]["offset"], 1_000_000_000_000_000_000u64);
    assert_eq!(page.body["meta"]["next"], Value::Null);
    assert_eq!(
        page.body["meta"]["previous"],
        "/api/v2/businesses/?order_by=-business_name&limit=20&offset=0"
    );
    // Offsets and limits at and past the integer limits: no overflow, no 500.
    for query in [
        "offset=9223372036854775807&limit=1000",
        "offset=18446744073709551615&limit=18446744073709551615",
        "offset=99999999999999999999999999&limit=0",
    ] {
        for list in ["/api/v2/businesses/", "/api/v2/images/"] {
            let page = client.get(&format!("{list}?{query}")).await.expect("list");
            assert_eq!(page.status, 200, "{list}?{query}: {}", page.body);
            assert_eq!(page.body["objects"], json!([]));
            assert_eq!(page.body["meta"]["offset"], i64::MAX);
            assert_eq!(page.body["meta"]["next"], Value::Null);
        }
    }
}

//! The business API over real HTTP: `sitehost serve`'s server on the embedded store, driven
//! with OAuth1-signed requests as partners send them.

mod support;

use std::sync::Arc;

use serde_json::{json, Value};
use sitehost::auth::{oauth1, NewKey};
use sitehost::clock::{Clock, SystemClock};
use sitehost::config::Config;
use sitehost::http::App;
use sitehost::store::{SharedStore, Stores};

// The signing client, every reply checked against docs/openapi.json.
use support::openapi::CheckedClient as PartnerClient;

struct Server {
    base: String,
    store: SharedStore,
    _dir: tempfile::TempDir,
}

impl Server {
    async fn start() -> Server {
        let dir = tempfile::tempdir().expect("temp dir");
        let stores = Stores::embedded(dir.path()).expect("stores");
        let store = Arc::clone(&stores.records);
        let app = Arc::new(App::new(stores, Config::embedded(dir.path().into())).expect("app"));
        let base = support::serve(app).await;
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
        let (status, body) =
            support::openapi::checked("GET", request.send().await.expect("send")).await;
        assert_eq!(status, 401, "{what}");
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
    assert_eq!(support::openapi::checked("GET", first).await.0, 200);
    let again = server
        .raw()
        .get(&url)
        .header("authorization", &header)
        .send()
        .await
        .expect("send");
    assert_eq!(support::openapi::checked("GET", again).await.0, 401);
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
    assert_eq!(support::openapi::checked("GET", reply).await.0, 200);
    // A revoked key stops working at once.
    server.store.revoke_key(&key.key).await.expect("revoke");
    let revoked = server
        .raw()
        .get(&url)
        .header("authorization", signed(&key.secret, now, "n4"))
        .send()
        .await
        .expect("send");
    assert_eq!(support::openapi::checked("GET", revoked).await.0, 401);
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

/// The answers outside the operations (405 with `Allow`, 404 for an unknown path, 413) are
/// the document's too, and `sitehost serve` serves the document itself, unsigned.
#[tokio::test]
async fn other_methods_unknown_paths_and_the_reference() {
    let server = Server::start().await;
    let client = server.client("agency", None).await;
    for (method, path) in [
        ("DELETE", "/api/v2/businesses/1/"),
        ("PATCH", "/api/v2/businesses/"),
        ("PUT", "/api/v2/images/2/"),
        ("DELETE", "/api/v2/images/"),
    ] {
        let reply = client.send(method, path, None).await.expect("send");
        assert_eq!(reply.status, 405, "{method} {path}");
    }
    for path in [
        "/api/v2/nothing/",
        "/api/v2/businesses/1/images/",
        "/api/v1/",
    ] {
        assert_eq!(client.get(path).await.expect("get").status, 404, "{path}");
    }
    let big = vec![b' '; 8 * 1024 * 1024];
    if let Ok(reply) = client.send("PUT", "/api/v2/businesses/1/", Some(big)).await {
        assert_eq!(reply.status, 413);
    }
    let served = server
        .raw()
        .get(format!("{}/api/v2/openapi.json", server.base))
        .send()
        .await
        .expect("document");
    assert_eq!(served.status(), 200);
    let served: Value = serde_json::from_slice(&served.bytes().await.expect("body")).expect("json");
    assert_eq!(&served, support::openapi::document());
}

//! The business API over real HTTP: `sitehost serve`'s server on the embedded store, driven
//! with OAuth1-signed requests as partners send them.

use crate::support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use sitehost::auth::oauth1;
use sitehost::clock::{Clock, SystemClock};
use sitehost::config::{RequestBudgets, ServerLimits};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use support::app::TestApp;
// The signing client, every reply checked against docs/openapi.json.
use support::openapi::CheckedClient;

async fn create(client: &CheckedClient, body: Value) -> Value {
    let reply = client
        .post("/api/v2/businesses/", &body)
        .await
        .expect("create");
    assert_eq!(reply.status, 201, "{}", reply.body);
    reply.body
}

#[tokio::test]
async fn create_get_list_update_round_trip() {
    let server = TestApp::spawn().await;
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
    let server = TestApp::spawn().await;
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
    let server = TestApp::spawn().await;
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
    let server = TestApp::spawn().await;
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
    let server = TestApp::spawn().await;
    let client = server.client("agency", None).await;
    let key = server.key("agency").await;
    let url = format!("{}/api/v2/businesses/", server.base());
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
        let mut request = reqwest::Client::new().get(&url);
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
    let first = reqwest::Client::new()
        .get(&url)
        .header("authorization", &header)
        .send()
        .await
        .expect("send");
    assert_eq!(support::openapi::checked("GET", first).await.0, 200);
    let again = reqwest::Client::new()
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
    let reply = reqwest::Client::new()
        .get(format!("{url}?{}", params.join("&")))
        .send()
        .await
        .expect("send");
    assert_eq!(support::openapi::checked("GET", reply).await.0, 200);
    // A revoked key stops working at once.
    server.store.revoke_key(&key.key).await.expect("revoke");
    let revoked = reqwest::Client::new()
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
    let server = TestApp::spawn().await;
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
    let server = TestApp::builder()
        .config(|config| config.budgets = budgets)
        .clock(fifteen_seconds_into_this_minute())
        .spawn()
        .await;
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
    let forged = CheckedClient::new(server.base(), "no-such-key", "secret");
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
    let server = TestApp::builder()
        .config(|config| config.budgets = budgets)
        .clock(fifteen_seconds_into_this_minute())
        .spawn()
        .await;
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

/// A signed request sent again as it is: the `Authorization` header of a first request,
/// replayed by whoever captured it.
async fn send_as_is(
    server: &TestApp,
    method: reqwest::Method,
    path: &str,
    authorization: &str,
    body: Option<&Value>,
) -> u16 {
    let mut request = reqwest::Client::new()
        .request(method, format!("{}{path}", server.base()))
        .header("authorization", authorization);
    if let Some(body) = body {
        request = request
            .header("content-type", "application/json")
            .body(body.to_string());
    }
    request.send().await.expect("send").status().as_u16()
}

/// A replay is refused before it spends the key's budget or runs: replaying one captured
/// GET fifty times leaves the victim's budget whole, and a replayed create creates nothing.
#[tokio::test]
async fn replays_spend_no_budget_and_run_nothing() {
    let budgets = RequestBudgets {
        requests_per_minute: 5,
        uploads_per_minute: 60,
    };
    let server = TestApp::builder()
        .config(|config| config.budgets = budgets)
        .clock(fifteen_seconds_into_this_minute())
        .spawn()
        .await;
    let key = server.key("agency").await;
    let signer = sitehost::client::PartnerClient::new(server.base(), &key.key, &key.secret);
    let list = "/api/v2/businesses/";
    let captured = signer.authorization("GET", list);
    let mut statuses = Vec::new();
    for _ in 0..50 {
        statuses.push(send_as_is(&server, reqwest::Method::GET, list, &captured, None).await);
    }
    assert_eq!(statuses[0], 200);
    assert!(statuses[1..].iter().all(|s| *s == 401), "{statuses:?}");

    let captured = signer.authorization("POST", list);
    let body = json!({"business_name": "Once"});
    for expected in [201, 401, 401] {
        let status = send_as_is(&server, reqwest::Method::POST, list, &captured, Some(&body)).await;
        assert_eq!(status, expected);
    }
    // Two requests spent: three more fit the budget of five, and the create ran once.
    let client = CheckedClient::new(server.base(), &key.key, &key.secret);
    for _ in 0..3 {
        let page = client.get(list).await.expect("list");
        assert_eq!(page.status, 200, "{}", page.body);
        assert_eq!(page.body["meta"]["total_count"], 1);
    }
    assert_over_budget(
        &client.get(list).await.expect("list"),
        "budget of 5 requests a minute",
    );
}

/// What a refused request costs does not grow with how many come: with a budget of 1 a
/// minute, a hundred refusals record one nonce between them (the first refusal's), and
/// every refusal after the first is answered without a store call.
#[tokio::test]
async fn refused_requests_record_no_nonce_after_the_first() {
    let budgets = RequestBudgets {
        requests_per_minute: 1,
        uploads_per_minute: 1,
    };
    let server = TestApp::builder()
        .config(|config| config.budgets = budgets)
        .clock(fifteen_seconds_into_this_minute())
        .spawn()
        .await;
    let client = server.client("agency", None).await;
    assert_eq!(
        client.get("/api/v2/images/").await.expect("list").status,
        200
    );
    for _ in 0..100 {
        let refused = client.get("/api/v2/images/").await.expect("list");
        assert_over_budget(&refused, "budget of 1 requests a minute");
    }
    // The journal holds one fixed-size record (24 bytes) per recorded nonce.
    let journal = std::fs::metadata(server.dir().join("nonces.journal")).expect("journal");
    assert_eq!(
        journal.len(),
        2 * 24,
        "the admitted request's nonce and one refusal's"
    );
}

#[tokio::test]
async fn a_zero_budget_is_unlimited() {
    let budgets = RequestBudgets {
        requests_per_minute: 0,
        uploads_per_minute: 0,
    };
    let server = TestApp::builder()
        .config(|config| config.budgets = budgets)
        .spawn()
        .await;
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
    let server = TestApp::spawn().await;
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

/// Limits small enough for a test to see them act within a few seconds.
fn short_limits() -> ServerLimits {
    ServerLimits {
        header_timeout: Duration::from_secs(1),
        body_timeout: Duration::from_secs(1),
        ..ServerLimits::default()
    }
}

/// Writes `bytes` one at a time, `every` apart, ignoring errors once the server has hung up.
fn trickle(
    mut writer: tokio::net::tcp::OwnedWriteHalf,
    bytes: Vec<u8>,
    every: Duration,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        for byte in bytes {
            if writer.write_all(&[byte]).await.is_err() {
                return;
            }
            tokio::time::sleep(every).await;
        }
    })
}

/// Reads until the server closes the connection (or `limit` passes): what it sent, and
/// when it hung up (`None` if it did not within `limit`).
async fn read_until_closed(
    mut reader: tokio::net::tcp::OwnedReadHalf,
    limit: Duration,
) -> (String, Option<Duration>) {
    let started = Instant::now();
    let mut received = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let left = limit.saturating_sub(started.elapsed());
        match tokio::time::timeout(left, reader.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => {
                return (
                    String::from_utf8_lossy(&received).into_owned(),
                    Some(started.elapsed()),
                )
            }
            Ok(Ok(n)) => received.extend_from_slice(&buf[..n]),
            Err(_) => return (String::from_utf8_lossy(&received).into_owned(), None),
        }
    }
}

#[tokio::test]
async fn a_client_trickling_its_headers_is_cut_off_at_the_header_timeout() {
    let server = TestApp::builder()
        .config(|config| config.server = short_limits())
        .spawn()
        .await;
    let stream = TcpStream::connect(server.addr()).await.expect("connect");
    let (reader, writer) = stream.into_split();
    // One byte every 300 ms: always "making progress", never finishing the head.
    let head = format!(
        "GET /api/v2/businesses/ HTTP/1.1\r\nHost: {}\r\nX-Padding: {}\r\n\r\n",
        server.addr(),
        "x".repeat(64)
    );
    let writing = trickle(writer, head.into_bytes(), Duration::from_millis(300));
    let (answer, closed_after) = read_until_closed(reader, Duration::from_secs(8)).await;
    writing.abort();
    let closed_after = closed_after.expect("the server never closed the slow connection");
    // 1 s timeout; the rest is scheduling slack on a busy machine.
    assert!(
        closed_after < Duration::from_secs(4),
        "closed only after {closed_after:?}"
    );
    assert!(
        answer.is_empty() || answer.starts_with("HTTP/1.1 408"),
        "{answer}"
    );
}

#[tokio::test]
async fn a_client_trickling_its_body_gets_408_at_the_body_timeout() {
    let server = TestApp::builder()
        .config(|config| config.server = short_limits())
        .spawn()
        .await;
    let key = server.key("agency").await;
    // Signed: an unsigned request is refused from its head, before any body is read.
    let authorization = sitehost::client::PartnerClient::new(server.base(), &key.key, &key.secret)
        .authorization("POST", "/api/v2/businesses/");
    let stream = TcpStream::connect(server.addr()).await.expect("connect");
    let (reader, mut writer) = stream.into_split();
    let head = format!(
        "POST /api/v2/businesses/ HTTP/1.1\r\nHost: {}\r\nAuthorization: {authorization}\r\n\
         Content-Type: application/json\r\nContent-Length: 200\r\n\r\n{{\"business_name\": ",
        server.addr()
    );
    writer.write_all(head.as_bytes()).await.expect("head");
    let writing = trickle(writer, vec![b' '; 180], Duration::from_millis(300));
    let (answer, closed_after) = read_until_closed(reader, Duration::from_secs(8)).await;
    writing.abort();
    let closed_after = closed_after.expect("the server never closed the slow connection");
    assert!(
        closed_after < Duration::from_secs(4),
        "closed only after {closed_after:?}"
    );
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(
        answer.to_ascii_lowercase().contains("connection: close"),
        "{answer}"
    );
    assert!(
        answer.ends_with("{\"error\":\"The request body was not received within 1 s.\"}"),
        "{answer}"
    );
    // Nothing was created, and the server still serves others.
    let client = server.client("agency", None).await;
    let list = client.get("/api/v2/businesses/").await.expect("list");
    assert_eq!(list.status, 200);
    assert_eq!(list.body["meta"]["total_count"], 0);
}

/// An unsigned request's body is never read: it is refused from its head at once, even
/// while the body it announces (7 MiB) has not been sent.
#[tokio::test]
async fn an_unsigned_request_is_refused_before_its_body_is_read() {
    let server = TestApp::spawn().await;
    let stream = TcpStream::connect(server.addr()).await.expect("connect");
    let (reader, mut writer) = stream.into_split();
    let head = format!(
        "POST /api/v2/images/ HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{{\"upload\": ",
        server.addr(),
        7 * 1024 * 1024 - 1
    );
    writer.write_all(head.as_bytes()).await.expect("head");
    let (answer, closed_after) = read_until_closed(reader, Duration::from_secs(5)).await;
    assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
    let closed_after = closed_after.expect("the server closed the connection");
    assert!(closed_after < Duration::from_secs(2), "{closed_after:?}");
    assert!(answer.contains("connection: close"), "{answer}");
    drop(writer);
}

/// At `max_connections`, a new connection evicts the open one that has waited longest for a
/// request head; only when every open connection is mid-request is it answered 503 at once
/// and closed, so a flood cannot leave the server out of descriptors.
#[tokio::test]
async fn connections_past_the_cap_evict_the_longest_idle_or_are_answered_503() {
    let limits = ServerLimits {
        max_connections: 4,
        ..ServerLimits::default()
    };
    let server = TestApp::builder()
        .config(|config| config.server = limits)
        .spawn()
        .await;
    let key = server.key("agency").await;
    let partner = sitehost::client::PartnerClient::new(server.base(), &key.key, &key.secret);
    // Idle: the first of four is closed when a fifth arrives, and the fifth is served.
    let mut idle = Vec::new();
    for _ in 0..4 {
        idle.push(TcpStream::connect(server.addr()).await.expect("connect"));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let fifth = TcpStream::connect(server.addr()).await.expect("connect");
    let (oldest, _oldest_writer) = idle.remove(0).into_split();
    let (answer, closed_after) = read_until_closed(oldest, Duration::from_secs(5)).await;
    assert_eq!(
        answer, "",
        "an evicted connection is closed without an answer"
    );
    assert!(closed_after.is_some_and(|t| t < Duration::from_secs(2)));
    let (reader, mut writer) = fifth.into_split();
    let get = format!(
        "GET /api/v2/images/ HTTP/1.1\r\nHost: {}\r\nAuthorization: {}\r\nConnection: close\r\n\r\n",
        server.addr(),
        partner.authorization("GET", "/api/v2/images/")
    );
    writer.write_all(get.as_bytes()).await.expect("request");
    let (answer, _) = read_until_closed(reader, Duration::from_secs(5)).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    drop(idle);
    tokio::time::sleep(Duration::from_millis(200)).await;

    // Mid-request (signed heads whose bodies never come): a new connection gets 503.
    let mut busy = Vec::new();
    for _ in 0..4 {
        let mut stream = TcpStream::connect(server.addr()).await.expect("connect");
        let head = format!(
            "POST /api/v2/businesses/ HTTP/1.1\r\nHost: {}\r\nAuthorization: {}\r\n\
             Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{{",
            server.addr(),
            partner.authorization("POST", "/api/v2/businesses/")
        );
        stream.write_all(head.as_bytes()).await.expect("head");
        busy.push(stream);
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let probe = TcpStream::connect(server.addr()).await.expect("connect");
    let (reader, _writer) = probe.into_split();
    let (answer, closed_after) = read_until_closed(reader, Duration::from_secs(5)).await;
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(answer.contains("retry-after: 1"), "{answer}");
    assert!(closed_after.is_some_and(|t| t < Duration::from_secs(2)));
    // A connection given back serves again.
    drop(busy.pop());
    tokio::time::sleep(Duration::from_millis(200)).await;
    let client = server.client("agency", None).await;
    assert_eq!(
        client.get("/api/v2/images/").await.expect("list").status,
        200
    );
}

/// One client holding every connection slot with idle sockets (and re-opening each one the
/// server closes) cannot lock a signed client out: a new connection at the cap evicts the
/// connection that has waited longest for a request head.
#[tokio::test]
async fn idle_sockets_at_the_cap_do_not_lock_out_a_signed_client() {
    const CAP: usize = 32;
    let limits = ServerLimits {
        max_connections: CAP,
        ..short_limits()
    };
    let server = TestApp::builder()
        .config(|config| config.server = limits)
        .spawn()
        .await;
    let client = server.client("agency", None).await;
    let addr = server.addr().to_string();
    // More idle sockets than the cap, each opened again as soon as the server closes it.
    let flood: Vec<_> = (0..CAP + CAP / 2)
        .map(|_| {
            let addr = addr.clone();
            tokio::spawn(async move {
                loop {
                    let Ok(mut stream) = TcpStream::connect(&addr).await else {
                        tokio::time::sleep(Duration::from_millis(5)).await;
                        continue;
                    };
                    let mut buf = [0u8; 512];
                    while matches!(stream.read(&mut buf).await, Ok(n) if n > 0) {}
                    // A moment before re-opening, so the flood does not spin a core.
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut answered = 0;
    let requests = 50;
    for _ in 0..requests {
        match client.get("/api/v2/businesses/").await {
            Ok(reply) if reply.status == 200 => answered += 1,
            Ok(reply) => eprintln!("{} {}", reply.status, reply.body),
            Err(err) => eprintln!("{err}"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for task in flood {
        task.abort();
    }
    eprintln!("signed client: {answered} of {requests} answered 200");
    assert!(
        answered * 100 >= requests * 95,
        "only {answered} of {requests} answered 200"
    );
}

/// Stored files are streamed, and a client that stops reading is dropped after the write
/// timeout: it holds neither the file nor the connection.
#[tokio::test]
async fn a_client_that_stops_reading_a_file_is_dropped_at_the_write_timeout() {
    let limits = ServerLimits {
        write_timeout: Duration::from_secs(1),
        ..ServerLimits::default()
    };
    let server = TestApp::builder()
        .config(|config| config.server = limits)
        .spawn()
        .await;
    let size = 16 * 1024 * 1024;
    let dir = server.dir().join("files/img/upload");
    std::fs::create_dir_all(&dir).expect("dir");
    std::fs::write(dir.join("big--1.jpg"), vec![0u8; size]).expect("file");

    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    socket
        .set_recv_buffer_size(4096)
        .expect("small receive buffer");
    let addr = server.addr().parse().expect("addr");
    let stream = socket.connect(addr).await.expect("connect");
    let (reader, mut writer) = stream.into_split();
    let request = format!(
        "GET /img/upload/big--1.jpg HTTP/1.1\r\nHost: {}\r\n\r\n",
        server.addr()
    );
    writer.write_all(request.as_bytes()).await.expect("request");
    // Read nothing for three write timeouts.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (answer, closed_after) = read_until_closed(reader, Duration::from_secs(10)).await;
    assert!(
        answer.starts_with("HTTP/1.1 200"),
        "{}",
        &answer[..answer.len().min(300)]
    );
    let head = &answer[..answer.find("\r\n\r\n").unwrap_or(answer.len())];
    assert!(head.contains(&format!("content-length: {size}")), "{head}");
    assert!(head.contains("x-content-type-options: nosniff"), "{head}");
    assert!(
        closed_after.is_some(),
        "the server still held the connection"
    );
    assert!(
        answer.len() < size,
        "the stalled client was dropped before the end"
    );
}

/// A URL server that takes each request and answers 404 only when told to, so an upload
/// fetching from it holds its fetch slot for as long as the test wants.
async fn held_url_server() -> (
    String,
    tokio::sync::mpsc::Receiver<()>,
    Arc<tokio::sync::Notify>,
) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (arrived, arrivals) = tokio::sync::mpsc::channel(8);
    let release = Arc::new(tokio::sync::Notify::new());
    let released = Arc::clone(&release);
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let arrived = arrived.clone();
            let released = Arc::clone(&released);
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = stream.read(&mut buf).await;
                let _ = arrived.send(()).await;
                released.notified().await;
                let _ = stream
                    .write_all(
                        b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                    )
                    .await;
            });
        }
    });
    (addr.to_string(), arrivals, release)
}

/// A server with one pipeline slot and `max_fetches` fetch slots, and a `held_url_server`
/// its partners may fetch from.
struct HeldFetches {
    server: TestApp,
    /// An upload body whose fetch reaches the URL server and waits there until released.
    held_upload: Value,
    arrivals: tokio::sync::mpsc::Receiver<()>,
    release: Arc<tokio::sync::Notify>,
}

async fn held_fetches(max_fetches: usize) -> HeldFetches {
    let (url_host, arrivals, release) = held_url_server().await;
    let limits = ServerLimits {
        max_uploads: 1,
        max_fetches,
        upload_wait: Duration::from_millis(300),
        ..ServerLimits::default()
    };
    let server = TestApp::builder()
        .config(|config| {
            config.server = limits;
            config.fetch.allow_hosts = vec![url_host.clone()];
        })
        .spawn()
        .await;
    HeldFetches {
        server,
        held_upload: json!({"external_url": format!("http://{url_host}/held.png"), "site_id": 1}),
        arrivals,
        release,
    }
}

/// Slow fetches hold fetch slots only: with one pipeline slot, another account's upload
/// still runs at once while one key's two uploads wait on a slow host; that key's third
/// fetch is a 429 (an account holds a quarter of the fetch slots).
#[tokio::test]
async fn a_slow_fetch_holds_no_upload_slot_and_one_account_a_share_of_the_fetches() {
    let HeldFetches {
        server,
        held_upload: body,
        mut arrivals,
        release,
    } = held_fetches(8).await;
    let slow = server.client("slow", None).await;
    let mut holders = Vec::new();
    for _ in 0..2 {
        let (client, body) = (slow.clone(), body.clone());
        holders.push(tokio::spawn(async move {
            client.post("/api/v2/images/", &body).await
        }));
        tokio::time::timeout(Duration::from_secs(5), arrivals.recv())
            .await
            .expect("the upload reached the URL server");
    }
    let third = slow.post("/api/v2/images/", &body).await.expect("third");
    assert_eq!(third.status, 429, "{}", third.body);
    assert_eq!(third.headers["retry-after"], "15");
    assert_eq!(
        third.body,
        json!({"error": "This account has 2 image fetches in progress, as many as it may; retry when one has ended."})
    );

    let other = server.client("other", None).await;
    let started = Instant::now();
    let png = support::media::b64(&support::media::png(10, 10));
    let uploaded = other
        .post(
            "/api/v2/images/",
            &json!({"upload": {"name": "dot.png", "file": png}, "site_id": 1}),
        )
        .await
        .expect("other account's upload");
    assert_eq!(uploaded.status, 201, "{}", uploaded.body);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "it did not wait on the slow fetches: {:?}",
        started.elapsed()
    );

    release.notify_waiters();
    for holder in holders {
        let answer = holder.await.expect("task").expect("held upload");
        assert_eq!(answer.status, 400, "{}", answer.body);
        assert!(answer.body["external_url"][0]
            .as_str()
            .is_some_and(|m| m.contains("404")));
    }
}

/// Past every fetch slot, the answer is a 503 at once, not a wait.
#[tokio::test]
async fn uploads_past_every_fetch_slot_get_503_at_once() {
    let HeldFetches {
        server,
        held_upload: body,
        mut arrivals,
        release,
    } = held_fetches(2).await;
    let mut holders = Vec::new();
    for account in ["a", "b"] {
        let client = server.client(account, None).await;
        let body = body.clone();
        holders.push(tokio::spawn(async move {
            client.post("/api/v2/images/", &body).await
        }));
        tokio::time::timeout(Duration::from_secs(5), arrivals.recv())
            .await
            .expect("the upload reached the URL server");
    }
    let client = server.client("c", None).await;
    let started = Instant::now();
    let refused = client.post("/api/v2/images/", &body).await.expect("third");
    assert_eq!(refused.status, 503, "{}", refused.body);
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(refused.headers["retry-after"], "2");
    assert_eq!(
        refused.body,
        json!({"error": "The server is fetching as many images as it allows (2); retry in a moment."})
    );
    // Uploads of content fetch nothing and are not bounded by fetch slots.
    let png = support::media::b64(&support::media::png(4, 4));
    let uploaded = client
        .post(
            "/api/v2/images/",
            &json!({"upload": {"name": "dot.png", "file": png}, "site_id": 1}),
        )
        .await
        .expect("content upload");
    assert_eq!(uploaded.status, 201, "{}", uploaded.body);
    release.notify_waiters();
    for holder in holders {
        assert_eq!(holder.await.expect("task").expect("held").status, 400);
    }
}

/// On a runtime with one worker, a write stuck behind another process's SQLite write lock
/// (as `sitehost keys` may hold it) must not stop other requests from being served.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_write_waiting_on_sqlite_does_not_stall_other_requests() {
    let server = TestApp::spawn().await;
    let client = server.client("agency", None).await;
    create(&client, json!({"business_name": "First"})).await;

    let blocker = rusqlite::Connection::open(server.dir().join("sitehost.db")).expect("open db");
    blocker
        .execute_batch("BEGIN IMMEDIATE")
        .expect("take the write lock");
    let writing = {
        let client = client.clone();
        tokio::spawn(async move {
            client
                .post("/api/v2/businesses/", &json!({"business_name": "Second"}))
                .await
        })
    };
    // This test's body runs outside the runtime's worker, so blocking it here is fine and
    // does not depend on the worker being free.
    std::thread::sleep(Duration::from_millis(500));
    let reading = {
        let client = client.clone();
        tokio::spawn(async move { client.get("/api/v2/businesses/").await })
    };
    let started = Instant::now();
    while !reading.is_finished() && started.elapsed() < Duration::from_secs(3) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let read_while_write_waited = reading.is_finished() && !writing.is_finished();
    blocker
        .execute_batch("COMMIT")
        .expect("release the write lock");

    let read = reading.await.expect("task").expect("list");
    let written = writing.await.expect("task").expect("create");
    assert!(
        read_while_write_waited,
        "the list waited for the blocked write (it took {:?})",
        started.elapsed()
    );
    assert_eq!(read.status, 200);
    assert_eq!(read.body["meta"]["total_count"], 1);
    assert_eq!(written.status, 201, "{}", written.body);
}

#[tokio::test]
async fn business_names_refuse_format_characters_and_are_stored_nfc() {
    let server = TestApp::spawn().await;
    let client = server.client("agency", None).await;
    for (c, code) in [
        ("\u{202E}", "U+202E"),
        ("\u{2067}", "U+2067"),
        ("\u{200B}", "U+200B"),
        ("\u{FEFF}", "U+FEFF"),
    ] {
        let reply = client
            .post(
                "/api/v2/businesses/",
                &json!({"business_name": format!("Harbour{c}Cafe")}),
            )
            .await
            .expect("create");
        assert_eq!(reply.status, 400, "{code}: {}", reply.body);
        assert_eq!(
            reply.body,
            json!({"business_name": [format!("Must not contain invisible formatting characters (found {code}).")]})
        );
    }
    let reply = client
        .post(
            "/api/v2/businesses/",
            &json!({"business_name": "Harbour Cafe", "partner_sub_id": "north\u{200D}"}),
        )
        .await
        .expect("create");
    assert_eq!(reply.status, 400);
    assert!(reply.body.get("partner_sub_id").is_some(), "{}", reply.body);

    // Decomposed input ("e" + COMBINING ACUTE ACCENT) is stored composed.
    let made = create(&client, json!({"business_name": "Cafe\u{301} Ole\u{301}"})).await;
    assert_eq!(made["business_name"], "Caf\u{E9} Ol\u{E9}");
    let id = made["id"].as_i64().expect("id");
    let path = format!("/api/v2/businesses/{id}/");
    let refused = client
        .put(&path, &json!({"business_name": "Evil\u{202E}gpj.exe"}))
        .await
        .expect("put");
    assert_eq!(refused.status, 400);
    assert!(refused.body["business_name"][0]
        .as_str()
        .is_some_and(|m| m.contains("U+202E")));
    let renamed = client
        .put(&path, &json!({"business_name": "Cre\u{300}me"}))
        .await
        .expect("put");
    assert_eq!(renamed.status, 200, "{}", renamed.body);
    assert_eq!(renamed.body["business_name"], "Cr\u{E8}me");
    let got = client.get(&path).await.expect("get");
    assert_eq!(got.body["business_name"], "Cr\u{E8}me");
}

/// Names that render blank (fillers, the blank Braille pattern, marks alone) are a 400
/// naming the field, for a business and for a location, and nothing is created.
#[tokio::test]
async fn names_that_render_blank_are_400_naming_the_field() {
    let server = TestApp::spawn().await;
    let client = server.client("agency", None).await;
    let blank = "This field may not be blank: it must contain a visible letter, digit or symbol.";
    for name in ["\u{3164}", "\u{FFA0}", "\u{2800}", "\u{301}\u{301}"] {
        let reply = client
            .post("/api/v2/businesses/", &json!({"business_name": name}))
            .await
            .expect("create");
        assert_eq!(reply.status, 400, "{name:?}: {}", reply.body);
        assert_eq!(reply.body, json!({"business_name": [blank]}));
        let reply = client
            .post(
                "/api/v2/businesses/",
                &json!({"business_name": "Harbour Cafe", "locations": [{"location_name": name}]}),
            )
            .await
            .expect("create");
        assert_eq!(reply.status, 400, "{name:?}: {}", reply.body);
        assert_eq!(
            reply.body,
            json!({"locations": {"0": {"location_name": [blank]}}})
        );
    }
    let list = client.get("/api/v2/businesses/").await.expect("list");
    assert_eq!(list.body["meta"]["total_count"], 0);
}

#[tokio::test]
async fn conflicting_duplicate_query_parameters_are_400_on_every_list() {
    let server = TestApp::spawn().await;
    let client = server.client("agency", None).await;
    create(&client, json!({"business_name": "A"})).await;
    for (path, name) in [
        ("/api/v2/businesses/?deleted=0&deleted=1", "deleted"),
        (
            "/api/v2/businesses/?order_by=id&order_by=-business_name",
            "order_by",
        ),
        (
            "/api/v2/businesses/?partner_sub_id=a&limit=5&partner_sub_id=b",
            "partner_sub_id",
        ),
        ("/api/v2/businesses/?limit=1&limit=2", "limit"),
        ("/api/v2/images/?site_id=1&site_id=2", "site_id"),
        ("/api/v2/images/?order_by=-id&order_by=id", "order_by"),
        ("/api/v2/images/?offset=0&offset=20", "offset"),
    ] {
        let reply = client.get(path).await.expect("list");
        assert_eq!(reply.status, 400, "{path}: {}", reply.body);
        assert_eq!(
            reply.body,
            json!({name: [format!("'{name}' is given more than once with different values; send it once.")]}),
            "{path}"
        );
    }
    // The same value twice is what was meant.
    let same = client
        .get("/api/v2/businesses/?deleted=0&deleted=0")
        .await
        .expect("list");
    assert_eq!(same.status, 200, "{}", same.body);
    assert_eq!(same.body["meta"]["total_count"], 1);
    // A repeated oauth parameter is still authentication's 401.
    let reply = client
        .get("/api/v2/businesses/?oauth_nonce=another")
        .await
        .expect("list");
    assert_eq!(reply.status, 401, "{}", reply.body);
    assert!(reply.body["error"]
        .as_str()
        .is_some_and(|m| m.contains("more than one oauth_nonce")));
}

#[tokio::test]
async fn the_request_log_line_names_key_account_and_user_never_the_secret() {
    // The binary's one subscriber, shared by the tests running meanwhile: lines are told
    // apart by key and path below.
    let captured = support::init_tracing();
    let start = captured.end();
    let server = TestApp::spawn().await;
    let key = server.key("agency").await;
    let client = CheckedClient::new(server.base(), &key.key, &key.secret);
    // The platform's fields this service does not keep (`category`: only `category_id` is)
    // are ignored and named in the log; their values never are, nor the names of unknown
    // fields. `locations` and `services` are kept, and not named.
    create(
        &client,
        json!({"business_name": "Logged", "locations": [{"street": "VALUE-NOT-LOGGED"}],
               "services": ["VALUE-NOT-LOGGED"], "category": {"name": "VALUE-NOT-LOGGED"},
               "made_up_field_name": 1}),
    )
    .await;
    let forged = CheckedClient::new(server.base(), &key.key, "not-the-secret");
    let forged_path = "/api/v2/businesses/987654321/";
    assert_eq!(
        forged
            .put(forged_path, &json!({"deleted": true}))
            .await
            .expect("put")
            .status,
        401
    );

    let text = captured.since(start);
    let requests: Vec<Value> = text
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .map(|line| line["fields"].clone())
        .filter(|fields| fields["message"] == "request")
        .collect();
    let created = requests
        .iter()
        .find(|f| f["method"] == "POST" && f["key"] == key.key.as_str())
        .unwrap_or_else(|| panic!("no request line for the create in {text}"));
    assert_eq!(created["status"], 201);
    assert_eq!(created["path"], "/api/v2/businesses/");
    assert_eq!(created["account_id"], key.account_id);
    assert_eq!(created["user_id"], key.user_id);
    // Unauthenticated: logged without a key or account.
    let refused = requests
        .iter()
        .find(|f| f["path"] == forged_path)
        .unwrap_or_else(|| panic!("no request line for the forged update in {text}"));
    assert_eq!(refused["status"], 401);
    assert!(refused.get("key").is_none() && refused.get("account_id").is_none());
    let ignored: Vec<Value> = text
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .map(|line| line["fields"].clone())
        .filter(|fields| fields["message"] == "business fields ignored")
        .collect();
    assert!(
        ignored
            .iter()
            .any(|f| f["ignored_fields"] == "category" && f["unknown_fields"] == 1),
        "no ignored-fields line for the create in {text}"
    );
    assert!(
        !text.contains("VALUE-NOT-LOGGED"),
        "a field value reached the logs"
    );
    assert!(
        !text.contains("made_up_field_name"),
        "a client's field name reached the logs"
    );
    assert!(!text.contains(&key.secret), "the secret reached the logs");
    assert!(
        !text.contains("oauth_signature"),
        "a signature reached the logs"
    );
}

/// The platform's documentation spells the business writes in the singular: they create and
/// update the same businesses; a GET there is a 405 naming the one method the path has.
#[tokio::test]
async fn singular_business_paths_create_and_update() {
    let server = TestApp::spawn().await;
    let client = server.client("agency", None).await;
    let mut ids = Vec::new();
    for path in ["/api/v2/business/", "/api/v2/business"] {
        let reply = client
            .post(
                path,
                &json!({"business_name": "Singular", "locations": [], "services": []}),
            )
            .await
            .expect("post");
        assert_eq!(reply.status, 201, "{path}: {}", reply.body);
        let id = reply.body["id"].as_i64().expect("id");
        assert_eq!(
            reply.body["resource_uri"],
            format!("/api/v2/businesses/{id}/")
        );
        ids.push(id);
    }
    let id = ids[0];
    for path in [
        format!("/api/v2/business/{id}/"),
        format!("/api/v2/business/{id}"),
    ] {
        let reply = client
            .put(&path, &json!({"business_name": format!("Renamed {path}")}))
            .await
            .expect("put");
        assert_eq!(reply.status, 200, "{path}: {}", reply.body);
    }
    let stored = client
        .get(&format!("/api/v2/businesses/{id}/"))
        .await
        .expect("get");
    assert_eq!(
        stored.body["business_name"],
        format!("Renamed /api/v2/business/{id}")
    );
    for (path, allow) in [
        ("/api/v2/business/".to_string(), "POST"),
        (format!("/api/v2/business/{id}/"), "PUT"),
    ] {
        let reply = client.get(&path).await.expect("get");
        assert_eq!(reply.status, 405, "{path}");
        assert_eq!(
            reply.headers.get("allow").and_then(|v| v.to_str().ok()),
            Some(allow)
        );
    }
}

/// The answers outside the operations (405 with `Allow`, 404 for an unknown path, 413) are
/// the document's too, and `sitehost serve` serves the document itself, unsigned.
#[tokio::test]
async fn other_methods_unknown_paths_and_the_reference() {
    let server = TestApp::spawn().await;
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
    let served = reqwest::Client::new()
        .get(format!("{}/api/v2/openapi.json", server.base()))
        .send()
        .await
        .expect("document");
    assert_eq!(served.status(), 200);
    let served: Value = serde_json::from_slice(&served.bytes().await.expect("body")).expect("json");
    assert_eq!(&served, support::openapi::document());
}

/// Validation errors are nested where the input is: a bad `upload.file` answers under
/// `upload`, then `file`, as the platform documents.
#[tokio::test]
async fn an_upload_file_error_is_answered_nested() {
    let server = TestApp::spawn().await;
    let client = server.client("agency", None).await;
    for (upload, message) in [
        (json!({"file": "!!!"}), "Not valid base64"),
        (
            json!({"name": "a.png"}),
            "Required: the image content in base64.",
        ),
        (json!({"file": 7}), "Must be a base64 string."),
    ] {
        let refused = client
            .post("/api/v2/images/", &json!({"upload": upload, "site_id": 1}))
            .await
            .expect("upload");
        assert_eq!(refused.status, 400, "{}", refused.body);
        let messages = refused.body["upload"]["file"].as_array().expect("nested");
        assert!(
            messages[0].as_str().is_some_and(|m| m.starts_with(message)),
            "{}",
            refused.body
        );
    }
}

/// The platform's own create example (nested `locations` with phones, a description and a
/// contact address, `services`) is kept: the 201, the detail and the update answer it in
/// the documented shape, and an update replaces the locations, keeping the ids it names.
#[tokio::test]
async fn services_and_nested_locations_are_kept_and_replaced() {
    let server = TestApp::spawn().await;
    let client = server.client("agency", None).await;
    let created = create(
        &client,
        json!({
            "business_name": "Harbour Cafe", "category_id": 12,
            "services": ["Espresso", "Catering"],
            "category": {"id": 99, "name": "ignored: category follows category_id"},
            "locations": [{
                "location_name": "Quay", "street": "1 Quay St", "city": "San Diego",
                "state": "CA", "postal_code": 92101, "country": "US",
                "lat": 32.7157, "lon": "-117.1611",
                "phones": [{"type": "main", "number": "(619) 555-0100"}],
                "description": "On the quay.\nBy the ferry.",
                "contact_email": "quay@harbourcafe.example",
                "partner_location_id": "hc-1", "hours": [[["09:00:00", "17:00:00"]]]
            }, {"location_name": "Station"}]
        }),
    )
    .await;
    let id = created["id"].as_i64().expect("id");
    assert_eq!(created["category"], json!({"id": 12}));
    assert_eq!(created["services"], json!(["Espresso", "Catering"]));
    let quay = &created["locations"][0];
    assert_eq!(quay["postal_code"], "92101");
    assert_eq!(quay["lon"], json!(-117.1611));
    assert_eq!(quay["partner_location_id"], "hc-1");
    assert_eq!(quay["business_id"], id);
    assert_eq!(
        quay["phones"],
        json!([{"type": "main", "number": "(619) 555-0100"}])
    );
    assert_eq!(quay["street2"], Value::Null);
    assert!(quay.get("hours").is_none());
    let (quay_id, station_id) = (
        quay["id"].as_i64().expect("location id"),
        created["locations"][1]["id"].as_i64().expect("location id"),
    );
    let path = format!("/api/v2/businesses/{id}/");
    let got = client.get(&path).await.expect("get");
    assert_eq!(got.body, created);

    // A list object carries none of them.
    let listed = client.get("/api/v2/businesses/").await.expect("list");
    let object = &listed.body["objects"][0];
    assert!(object.get("locations").is_none() && object.get("services").is_none());

    // Absent: they stay. Given: they are replaced; Station keeps its id, Quay goes.
    let renamed = client
        .put(&path, &json!({"business_name": "Harbour Cafe & Bar"}))
        .await
        .expect("put");
    assert_eq!(renamed.body["locations"], created["locations"]);
    let mut station = created["locations"][1].clone();
    station["city"] = json!("Oceanside");
    let replaced = client
        .put(
            &path,
            &json!({"id": id, "services": null, "category_id": null,
                    "locations": [station, {"location_name": "Pier", "id": quay_id + 1000}]}),
        )
        .await
        .expect("put");
    assert_eq!(replaced.status, 200, "{}", replaced.body);
    assert_eq!(replaced.body["services"], json!([]));
    assert_eq!(replaced.body["category"], Value::Null);
    let locations = replaced.body["locations"].as_array().expect("locations");
    assert_eq!(locations.len(), 2);
    assert_eq!(locations[0]["id"], station_id);
    assert_eq!(locations[0]["city"], "Oceanside");
    let pier = locations[1]["id"].as_i64().expect("location id");
    assert!(![quay_id, station_id, quay_id + 1000].contains(&pier));
    assert_eq!(client.get(&path).await.expect("get").body, replaced.body);

    // A wrong type is a 400 naming the nested field, and changes nothing.
    let refused = client
        .put(
            &path,
            &json!({"locations": [{"city": "x"}, {"phones": "555", "lat": 100}],
                    "services": ["ok", 5, ""]}),
        )
        .await
        .expect("put");
    assert_eq!(refused.status, 400, "{}", refused.body);
    assert_eq!(
        refused.body,
        json!({
            "locations": {"1": {
                "phones": ["Must be a list of phone objects."],
                "lat": ["Must be a number from -90 to 90, or null."]
            }},
            "services": {"2": ["This field may not be blank."]}
        })
    );
    let too_many: Vec<Value> = (0..51).map(|_| json!({})).collect();
    let refused = client
        .post(
            "/api/v2/businesses/",
            &json!({"business_name": "Many", "locations": too_many}),
        )
        .await
        .expect("post");
    assert_eq!(refused.status, 400, "{}", refused.body);
    assert_eq!(
        refused.body["locations"],
        json!(["Ensure this list has at most 50 locations."])
    );
    assert_eq!(client.get(&path).await.expect("get").body, replaced.body);
}

/// Retries with an `Idempotency-Key`: the same key and body answer the first answer and
/// write nothing new, another body is a 422, a failed request gives its key back, and keys
/// of different accounts never meet.
#[tokio::test]
async fn idempotency_keys_make_retries_safe() {
    let server = TestApp::spawn().await;
    let client = server.client("agency", None).await;
    let path = "/api/v2/businesses/";
    let body = json!({"business_name": "Once"});
    let first = client
        .post_once(path, &body, "key-1")
        .await
        .expect("create");
    assert_eq!(first.status, 201, "{}", first.body);
    let again = client.post_once(path, &body, "key-1").await.expect("retry");
    assert_eq!(again.status, 201);
    assert_eq!(again.body, first.body);
    assert_eq!(again.headers["location"], first.headers["location"]);
    assert_eq!(again.headers["idempotent-replayed"], "true");
    assert!(first.headers.get("idempotent-replayed").is_none());

    let other_body = json!({"business_name": "Twice"});
    let refused = client
        .post_once(path, &other_body, "key-1")
        .await
        .expect("reuse");
    assert_eq!(refused.status, 422, "{}", refused.body);
    assert!(refused.body["error"]
        .as_str()
        .is_some_and(|m| m.contains("another request")));

    // A request that failed gives its key back: the corrected retry runs.
    let invalid = client
        .post_once(path, &json!({"business_name": ""}), "key-2")
        .await
        .expect("invalid");
    assert_eq!(invalid.status, 400);
    let fixed = client
        .post_once(path, &other_body, "key-2")
        .await
        .expect("fixed");
    assert_eq!(fixed.status, 201, "{}", fixed.body);

    let list = client.get(path).await.expect("list");
    assert_eq!(list.body["meta"]["total_count"], 2, "Once and Twice");

    // Another account's key of the same name is its own.
    let other = server.client("other agency", None).await;
    let theirs = other.post_once(path, &body, "key-1").await.expect("create");
    assert_eq!(theirs.status, 201);
    assert_ne!(theirs.body["id"], first.body["id"]);

    // Uploads too: one image, however often the upload is retried.
    let upload = json!({
        "upload": {"name": "dot.png", "file": support::media::b64(&support::media::png(4, 4))},
        "site_id": 1
    });
    let uploaded = client
        .post_once("/api/v2/images/", &upload, "upload-1")
        .await
        .expect("upload");
    assert_eq!(uploaded.status, 201, "{}", uploaded.body);
    let retried = client
        .post_once("/api/v2/images/", &upload, "upload-1")
        .await
        .expect("upload retry");
    assert_eq!(retried.body, uploaded.body);
    let images = client.get("/api/v2/images/").await.expect("images");
    assert_eq!(images.body["meta"]["total_count"], 1);

    let malformed = client
        .post_once(path, &body, &"k".repeat(256))
        .await
        .expect("long key");
    assert_eq!(malformed.status, 400);
    assert!(
        malformed.body["Idempotency-Key"].is_array(),
        "{}",
        malformed.body
    );
}

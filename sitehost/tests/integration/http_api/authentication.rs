//! Who may see what: tenancy and sub ids, refused signatures and nonces, and what the
//! request log says of the caller.

use serde_json::{json, Value};
use sitehost::auth::oauth1;
use sitehost::clock::{Clock, SystemClock};

use super::{assert_over_budget, create, server_with_budgets};
use crate::support;
use crate::support::app::TestApp;
use crate::support::openapi::CheckedClient;

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

// Reads better whole: every refused signature against one server and key, then that key revoked.
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

/// What a refused request costs does not grow with how many come: with a budget of 1 a
/// minute, a hundred refusals record one nonce between them (the first refusal's), and
/// every refusal after the first is answered without a store call.
#[tokio::test]
async fn refused_requests_record_no_nonce_after_the_first() {
    let server = server_with_budgets(1, 1).await;
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

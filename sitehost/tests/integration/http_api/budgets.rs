//! The per-key request budgets: over budget is 429 with Retry-After and does nothing.

use serde_json::{json, Value};

use super::{assert_over_budget, create, server_with_budgets};
use crate::support;
use crate::support::app::TestApp;
use crate::support::openapi::CheckedClient;

#[tokio::test]
async fn over_the_request_budget_is_429_with_retry_after_and_does_nothing() {
    let server = server_with_budgets(3, 60).await;
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
    let server = server_with_budgets(10, 2).await;
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
    let server = server_with_budgets(5, 60).await;
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

#[tokio::test]
async fn a_zero_budget_is_unlimited() {
    let server = server_with_budgets(0, 0).await;
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

//! `Idempotency-Key` over HTTP: retries are safe.

use serde_json::json;

use crate::support;
use crate::support::app::TestApp;

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

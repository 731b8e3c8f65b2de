//! `Idempotency-Key` over real HTTP (`sitehost serve` on the embedded stores), every reply
//! checked against docs/openapi.json: a replay is the caller's own, reads the object again
//! (a 404 once it is gone), and the header is checked only once the request is admitted.
//! The same rules on both stores: `store_contract::idempotent_creates`.

use crate::support;

use serde_json::json;
use sitehost::auth::oauth1;
use sitehost::clock::{Clock, SystemClock};

use support::app::TestApp;
use support::media::{b64, png};

const BUSINESSES: &str = "/api/v2/businesses/";
const IMAGES: &str = "/api/v2/images/";
const REPLAYED: &str = "idempotent-replayed";

fn location(reply: &sitehost::client::ClientResponse) -> String {
    let location = reply.headers.get("location").expect("a Location");
    location.to_str().expect("ASCII").to_string()
}

/// A key restricted to `south` that sends the key and body of a `north` key's upload gets
/// an upload of its own, never north's image or its path.
#[tokio::test]
async fn another_subs_key_and_body_upload_anew() {
    let server = TestApp::spawn().await;
    let north = server.client("agency", Some("north")).await;
    let south = server.client("agency", Some("south")).await;
    let upload = json!({"upload": {"name": "dot.png", "file": b64(&png(4, 4))}, "site_id": 1});
    let norths = north
        .post_once(IMAGES, &upload, "upload-1")
        .await
        .expect("north");
    assert_eq!(norths.status, 201, "{}", norths.body);
    let souths = south
        .post_once(IMAGES, &upload, "upload-1")
        .await
        .expect("south");
    assert_eq!(souths.status, 201, "{}", souths.body);
    assert!(souths.headers.get(REPLAYED).is_none(), "south's own upload");
    assert_ne!(souths.body["id"], norths.body["id"]);
    assert_ne!(souths.body["image"], norths.body["image"], "nor its path");
    let seen = south.get(&location(&souths)).await.expect("get");
    assert_eq!(seen.status, 200);
    assert_eq!(seen.body, souths.body);
}

/// A replay is what the caller's GET of the Location shows now, with the first answer's
/// status: an update shows, a soft-deleted business is still shown (as GET shows it), and
/// a deleted image is a 404.
#[tokio::test]
async fn a_replay_reads_the_object_again() {
    let server = TestApp::spawn().await;
    let client = server.client("agency", None).await;
    let body = json!({"business_name": "First name"});
    let created = client
        .post_once(BUSINESSES, &body, "create-1")
        .await
        .expect("create");
    assert_eq!(created.status, 201, "{}", created.body);
    let path = location(&created);
    let renamed = client
        .put(&path, &json!({"business_name": "Second name"}))
        .await
        .expect("rename");
    assert_eq!(renamed.status, 200, "{}", renamed.body);
    let replay = client
        .post_once(BUSINESSES, &body, "create-1")
        .await
        .expect("replay");
    assert_eq!(replay.status, 201, "{}", replay.body);
    assert_eq!(replay.headers[REPLAYED], "true");
    assert_eq!(location(&replay), path);
    assert_eq!(replay.body["business_name"], "Second name");
    assert_eq!(replay.body, client.get(&path).await.expect("get").body);

    let deleted = client
        .put(&path, &json!({"deleted": true}))
        .await
        .expect("soft delete");
    assert_eq!(deleted.status, 200, "{}", deleted.body);
    let replay = client
        .post_once(BUSINESSES, &body, "create-1")
        .await
        .expect("replay");
    assert_eq!(replay.status, 201, "{}", replay.body);
    assert_eq!(replay.body["deleted"], true, "as GET shows it");

    let upload = json!({"upload": {"name": "dot.png", "file": b64(&png(4, 4))}, "site_id": 1});
    let uploaded = client
        .post_once(IMAGES, &upload, "upload-1")
        .await
        .expect("upload");
    assert_eq!(uploaded.status, 201, "{}", uploaded.body);
    let image = location(&uploaded);
    let gone = client.send("DELETE", &image, None).await.expect("delete");
    assert_eq!(gone.status, 204);
    let replay = client
        .post_once(IMAGES, &upload, "upload-1")
        .await
        .expect("replay");
    assert_eq!(replay.status, 404, "{}", replay.body);
    assert!(replay.body["error"].is_string());
    let images = client.get(IMAGES).await.expect("images");
    assert_eq!(
        images.body["meta"]["total_count"], 0,
        "nothing uploaded again"
    );
}

/// An invalid key is refused only once the request is admitted (its nonce recorded, its
/// budget drawn): the same signed request again is a replayed nonce, 401.
#[tokio::test]
async fn an_invalid_key_is_refused_after_admission() {
    let server = TestApp::spawn().await;
    let key = server.key("agency").await;
    let url = format!("{}{BUSINESSES}", server.base());
    let header = oauth1::authorization_header(
        "POST",
        &url,
        &[],
        &key.key,
        &key.secret,
        SystemClock.now(),
        "one-nonce",
    );
    let send = || async {
        let response = reqwest::Client::new()
            .post(&url)
            .header("authorization", &header)
            .header("content-type", "application/json")
            .header("idempotency-key", "k".repeat(256))
            .body(json!({"business_name": "Shop"}).to_string())
            .send()
            .await
            .expect("send");
        support::openapi::checked("POST", response).await
    };
    let (status, body) = send().await;
    assert_eq!(status, 400, "{body}");
    assert!(body["Idempotency-Key"].is_array(), "{body}");
    let (status, body) = send().await;
    assert_eq!(status, 401, "a replayed nonce: {body}");
}

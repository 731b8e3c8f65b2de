//! Image uploads end to end on the embedded store over HTTP: both upload forms, files
//! served by the local frontend host, bad input refused with nothing stored, and faults
//! that leave no half state. The same flows on DynamoDB + S3 (moto) are in
//! `images_aws.rs`.

use crate::support;

use std::sync::Arc;

use serde_json::{json, Value};
use sitehost::domain::account::Caller;
use sitehost::error::ApiError;
use support::app::TestApp;
use support::media::{b64, file_server, jpeg, png, stored_files, FailingFiles};
// The signing client, every reply checked against docs/openapi.json.
use support::openapi::CheckedClient;

/// The app served, with the caller's key (user 5 of `agency`); `allow_hosts` are the hosts
/// an upload may fetch from.
async fn start(allow_hosts: Vec<String>) -> TestApp {
    TestApp::builder()
        .config(|config| {
            config.fetch.allow_hosts = allow_hosts;
            config.fetch.total_timeout = std::time::Duration::from_secs(3);
        })
        .caller("agency", Some(5))
        .spawn()
        .await
}

// Reads better whole: one upload, then its files, detail, list and what is not served.
#[tokio::test]
async fn base64_upload_stores_original_and_variants_served_locally() {
    let server = start(Vec::new()).await;
    let original = png(1200, 600);
    let reply = server
        .post("/api/v2/images/", &json!({"upload": {"name": "My Shop Front.png", "file": b64(&original)}, "site_id": 12345, "type": "image"}))
        .await
        .expect("upload");
    assert_eq!(reply.status, 201, "{}", reply.body);
    let image = &reply.body;
    let id = image["id"].as_i64().expect("id");
    assert_eq!(reply.headers["location"], format!("/api/v2/images/{id}/"));
    assert_eq!(image["mimetype"], "image/png");
    assert_eq!(
        (image["width"].as_u64(), image["height"].as_u64()),
        (Some(1200), Some(600))
    );
    assert_eq!(image["site_id"], 12345);
    assert_eq!(image["user_id"], 5);
    let path = image["image"].as_str().expect("path");
    assert!(
        path.starts_with("img/upload/my-shop-front-") && path.ends_with(".png"),
        "{path}"
    );
    assert_eq!(image["absolute_path"], format!("/{path}"));
    assert_eq!(image["sizes"]["original"], path);

    // The original byte for byte; each variant fits its box and is never upscaled.
    let http = reqwest::Client::new();
    let got = http
        .get(format!("{}/{path}", server.base()))
        .send()
        .await
        .expect("file");
    assert_eq!(got.headers()["content-type"], "image/png");
    assert_eq!(got.bytes().await.expect("bytes").to_vec(), original);
    for (size, w, h) in [
        ("big", 1200, 600),
        ("large", 1024, 512),
        ("medium", 640, 320),
        ("small", 320, 160),
        ("thumbnail", 150, 75),
    ] {
        let variant = image["sizes"][size].as_str().expect("variant");
        assert!(variant.ends_with(&format!(".{size}.png")), "{variant}");
        let bytes = http
            .get(format!("{}/{variant}", server.base()))
            .send()
            .await
            .expect("get")
            .bytes()
            .await
            .expect("bytes");
        let decoded = image::load_from_memory(&bytes).expect("variant decodes");
        assert_eq!((decoded.width(), decoded.height()), (w, h), "{size}");
        assert!(decoded.color().has_alpha(), "{size} keeps alpha");
    }
    // Detail and list.
    let detail = server
        .get(&format!("/api/v2/images/{id}/"))
        .await
        .expect("get");
    assert_eq!(detail.body["image"], path);
    let list = server
        .get("/api/v2/images/?site_id=12345")
        .await
        .expect("list");
    assert_eq!(list.body["meta"]["total_count"], 1);
    assert_eq!(
        server
            .get("/api/v2/images/?site_id=1")
            .await
            .expect("list")
            .body["meta"]["total_count"],
        0
    );
    // Outside the files directory nothing is served.
    for bad in [
        "/../sitehost.db",
        "/%2e%2e/sitehost.db",
        "/sitehost.db",
        "/img/upload/nothing.png",
    ] {
        let reply = http
            .get(format!("{}{bad}", server.base()))
            .send()
            .await
            .expect("get");
        assert_eq!(reply.status(), 404, "{bad}");
    }
}

// Reads better whole: one URL upload, then its variants, links and another account's view of it.
#[tokio::test]
async fn url_upload_and_business_links() {
    let host = file_server(jpeg(300, 200), "image/jpeg").await;
    let server = start(vec![host.clone()]).await;
    let business = server
        .post("/api/v2/businesses/", &json!({"business_name": "Cafe"}))
        .await
        .expect("create")
        .body;
    let business_id = business["id"].as_i64().expect("id");
    let reply = server
        .post("/api/v2/images/", &json!({"external_url": format!("http://{host}/photos/cafe.jpg?v=2"), "business_id": business_id}))
        .await
        .expect("upload");
    assert_eq!(reply.status, 201, "{}", reply.body);
    assert_eq!(reply.body["mimetype"], "image/jpeg");
    assert_eq!(reply.body["business_id"], business_id);
    assert!(reply.body["image"]
        .as_str()
        .is_some_and(|p| p.starts_with("img/upload/cafe-") && p.ends_with(".jpg")));
    // Small images keep their size in every variant.
    let thumb = reply.body["sizes"]["thumbnail"].as_str().expect("thumb");
    let bytes = reqwest::get(format!("{}/{thumb}", server.base()))
        .await
        .expect("get")
        .bytes()
        .await
        .expect("bytes");
    let decoded = image::load_from_memory(&bytes).expect("decodes");
    assert_eq!((decoded.width(), decoded.height()), (150, 100));
    let big = reply.body["sizes"]["big"].as_str().expect("big");
    let bytes = reqwest::get(format!("{}/{big}", server.base()))
        .await
        .expect("get")
        .bytes()
        .await
        .expect("bytes");
    assert_eq!(
        image::load_from_memory(&bytes)
            .map(|i| (i.width(), i.height()))
            .ok(),
        Some((300, 200))
    );

    let image_id = reply.body["id"].as_i64().expect("id");
    let with_logo = server
        .put(
            &format!("/api/v2/businesses/{business_id}/"),
            &json!({"logo_image_id": image_id}),
        )
        .await
        .expect("put");
    assert_eq!(with_logo.status, 200, "{}", with_logo.body);
    assert_eq!(with_logo.body["logo_image"]["id"], image_id);
    assert_eq!(with_logo.body["images"][0]["id"], image_id);
    // Another account can neither see the image nor use it as a logo.
    let key = server.key("other").await;
    let other = CheckedClient::new(server.base(), &key.key, &key.secret);
    assert_eq!(
        other
            .get(&format!("/api/v2/images/{image_id}/"))
            .await
            .expect("get")
            .status,
        404
    );
    let stolen = other
        .post(
            "/api/v2/businesses/",
            &json!({"business_name": "x", "logo_image_id": image_id}),
        )
        .await
        .expect("post");
    assert_eq!(stolen.status, 400);
    let wrong_business = other
        .post(
            "/api/v2/images/",
            &json!({"external_url": format!("http://{host}/a.jpg"), "business_id": business_id}),
        )
        .await
        .expect("post");
    assert_eq!(wrong_business.status, 400, "{}", wrong_business.body);
}

// Reads better whole: every bad upload against one server, then one check that nothing was stored.
#[tokio::test]
async fn bad_uploads_are_refused_and_store_nothing() {
    let html_host = file_server(
        b"<html><body>not an image</body></html>".to_vec(),
        "text/html",
    )
    .await;
    let server = start(vec![html_host.clone()]).await;
    let valid = png(20, 20);
    let mut truncated = valid.clone();
    truncated.truncate(valid.len() / 2);
    // A PNG header declaring 100000 x 100000 pixels.
    let mut huge = valid[..33].to_vec();
    huge[16..20].copy_from_slice(&100_000u32.to_be_bytes());
    huge[20..24].copy_from_slice(&100_000u32.to_be_bytes());
    let svg = br#"<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"></svg>"#;
    let upload = |bytes: &[u8]| json!({"upload": {"name": "x.png", "file": b64(bytes)}});
    let cases: Vec<(&str, Value, u16)> = vec![
        (
            "invalid base64",
            json!({"upload": {"file": "@@@ not base64 @@@"}}),
            400,
        ),
        ("empty file", json!({"upload": {"file": ""}}), 400),
        ("text", upload(b"just some text"), 400),
        ("html", upload(b"<!doctype html><html></html>"), 400),
        ("svg", upload(svg), 400),
        ("truncated png", upload(&truncated), 400),
        ("100000x100000 png", upload(&huge), 413),
        (
            "both",
            json!({"upload": {"file": b64(&valid)}, "external_url": "https://example.com/a.png"}),
            400,
        ),
        ("neither", json!({"site_id": 3}), 400),
        ("upload not an object", json!({"upload": b64(&valid)}), 400),
        (
            "site_id not an integer",
            json!({"upload": {"file": b64(&valid)}, "site_id": "abc"}),
            400,
        ),
        (
            "file url",
            json!({"external_url": "file:///etc/passwd"}),
            400,
        ),
        (
            "gopher url",
            json!({"external_url": "gopher://example.com/"}),
            400,
        ),
        (
            "private address",
            json!({"external_url": "http://10.0.0.1/a.png"}),
            400,
        ),
        (
            "loopback by name",
            json!({"external_url": format!("http://localhost:{}/a.png", server.base().rsplit(':').next().unwrap_or("80"))}),
            400,
        ),
        (
            "html from a url",
            json!({"external_url": format!("http://{html_host}/page")}),
            400,
        ),
        (
            "over the base64 cap",
            json!({"upload": {"file": "QUFB".repeat(1_700_000)}}),
            413,
        ),
    ];
    for (what, body, status) in cases {
        let reply = server.post("/api/v2/images/", &body).await.expect("post");
        assert_eq!(reply.status, status, "{what}: {}", reply.body);
        let message = reply.body.to_string();
        assert!(message.len() > 20, "{what}: a clear message, got {message}");
    }
    let truncated_reply = server
        .post("/api/v2/images/", &upload(&truncated))
        .await
        .expect("post");
    assert!(
        truncated_reply
            .body
            .to_string()
            .to_lowercase()
            .contains("png"),
        "{}",
        truncated_reply.body
    );
    let svg_reply = server
        .post("/api/v2/images/", &upload(svg))
        .await
        .expect("post");
    assert!(
        svg_reply.body.to_string().contains("SVG"),
        "{}",
        svg_reply.body
    );
    assert_eq!(
        server.get("/api/v2/images/").await.expect("list").body["meta"]["total_count"],
        0
    );
    assert!(
        stored_files(server.dir()).is_empty(),
        "{:?}",
        stored_files(server.dir())
    );
}

fn caller() -> Caller {
    Caller {
        account_id: 1,
        user_id: 1,
        restrict_sub_id: None,
    }
}

#[tokio::test]
async fn a_failed_file_write_leaves_no_record_and_no_files() {
    let app = TestApp::builder()
        .wrap_stores(|stores| {
            let files = stores.files.clone().expect("files");
            stores.files = Some(Arc::new(FailingFiles::new(files, ".small.")));
        })
        .build()
        .await;
    let account = app.store.ensure_account("a").await.expect("account");
    assert_eq!(account.id, caller().account_id);
    let body = json!({"upload": {"file": b64(&png(400, 300))}}).to_string();
    let result = app.upload(&caller(), body.as_bytes()).await;
    assert!(matches!(result, Err(ApiError::Internal(_))));
    let query = sitehost::domain::image_record::ImageQuery {
        filter: Default::default(),
        descending: false,
        limit: 10,
        offset: 0,
    };
    assert_eq!(
        app.store
            .list_images(1, &query)
            .await
            .expect("list")
            .total_count,
        0
    );
    assert!(
        stored_files(app.dir()).is_empty(),
        "{:?}",
        stored_files(app.dir())
    );
}

/// The record write and the check of its outcome both fail: whether a record exists is
/// unknown, so the files stay (`sitehost files sweep` removes them once they are orphans;
/// `images_integrity/unknown_outcomes.rs` has the cases where the outcome can be found out).
#[tokio::test]
async fn a_failed_record_write_that_cannot_be_checked_keeps_the_files() {
    let app = TestApp::embedded().await;
    app.store.ensure_account("a").await.expect("account");
    // Break the record write underneath the store: the images table is gone.
    let db = rusqlite::Connection::open(app.dir().join("sitehost.db")).expect("db");
    db.execute_batch("DROP TABLE images").expect("drop");
    let body = json!({"upload": {"file": b64(&png(64, 64))}}).to_string();
    let result = app.upload(&caller(), body.as_bytes()).await;
    assert!(matches!(result, Err(ApiError::Internal(_))), "{result:?}");
    assert_eq!(
        stored_files(app.dir()).len(),
        8,
        "{:?}",
        stored_files(app.dir())
    );
}

/// `DELETE /api/v2/images/<id>/` through `sitehost serve`: 204 and no body; the record, its
/// place in lists and counts, and every file go (the paths answer 404); a second delete,
/// another account's key and a logo are refused as documented.
// Reads better whole: one image and one logo through each delete, each step from the last.
#[tokio::test]
async fn delete_removes_the_record_and_its_files_unless_it_is_a_logo() {
    let server = start(Vec::new()).await;
    let upload =
        |name: &str| json!({"upload": {"name": name, "file": b64(&png(400, 300))}, "site_id": 7});
    let mut ids = Vec::new();
    for name in ["gone.png", "logo.png"] {
        let reply = server
            .post("/api/v2/images/", &upload(name))
            .await
            .expect("upload");
        assert_eq!(reply.status, 201, "{}", reply.body);
        ids.push((reply.body["id"].as_i64().expect("id"), reply.body.clone()));
    }
    let (gone, gone_body) = &ids[0];
    let (logo, _) = &ids[1];
    let files_before = stored_files(server.dir());
    assert_eq!(files_before.len(), 16, "{files_before:?}");

    // Another account's key: 404, and the image stays.
    let other_key = server.key("other").await;
    let stranger = CheckedClient::new(server.base(), &other_key.key, &other_key.secret);
    let path = format!("/api/v2/images/{gone}/");
    let refused = stranger.send("DELETE", &path, None).await.expect("delete");
    assert_eq!(refused.status, 404, "{}", refused.body);
    assert_eq!(stored_files(server.dir()), files_before);

    let deleted = server.delete(&path).await.expect("delete");
    assert_eq!(deleted.status, 204, "{}", deleted.body);
    assert_eq!(deleted.body, Value::Null);
    assert!(deleted.headers.get("content-type").is_none());
    let get = server.get(&path).await.expect("get");
    assert_eq!(get.status, 404);
    let list = server.get("/api/v2/images/?site_id=7").await.expect("list");
    assert_eq!(list.body["meta"]["total_count"], 1);
    assert_eq!(list.body["objects"][0]["id"], *logo);
    // Its eight files (original, variants, WebP siblings) are gone from the data directory
    // and from the local frontend host; the logo's eight remain.
    let left = stored_files(server.dir());
    assert_eq!(left.len(), 8, "{left:?}");
    assert!(
        left.iter().all(|f| !f.contains(&format!("--{gone}."))),
        "{left:?}"
    );
    let http = reqwest::Client::new();
    let original = gone_body["image"].as_str().expect("path");
    let variants = gone_body["sizes"].as_object().expect("sizes");
    for file in variants
        .values()
        .filter_map(Value::as_str)
        .chain([original])
    {
        let status = http
            .get(format!("{}/{file}", server.base()))
            .send()
            .await
            .expect("get")
            .status();
        assert_eq!(status, 404, "{file}");
    }
    // Twice: 404. Without the trailing slash: the same route.
    let again = server
        .delete(&format!("/api/v2/images/{gone}"))
        .await
        .expect("delete");
    assert_eq!(again.status, 404);

    // A logo: 409 naming the business, and the image and its files stay.
    let business = server
        .post(
            "/api/v2/businesses/",
            &json!({"business_name": "Harbour Cafe", "logo_image_id": logo}),
        )
        .await
        .expect("create");
    assert_eq!(business.status, 201, "{}", business.body);
    let logo_path = format!("/api/v2/images/{logo}/");
    let conflict = server.delete(&logo_path).await.expect("delete");
    assert_eq!(conflict.status, 409, "{}", conflict.body);
    let message = conflict.body["error"].as_str().expect("message");
    assert!(
        message.contains(&format!("business {} ", business.body["id"]))
            && message.contains("Harbour Cafe"),
        "{message}"
    );
    assert_eq!(stored_files(server.dir()), left);
    // Once the business has no logo, the image can go.
    let id = business.body["id"].as_i64().expect("id");
    let cleared = server
        .put(
            &format!("/api/v2/businesses/{id}/"),
            &json!({"id": id, "logo_image_id": null}),
        )
        .await
        .expect("update");
    assert_eq!(cleared.status, 200, "{}", cleared.body);
    let deleted = server.delete(&logo_path).await.expect("delete");
    assert_eq!(deleted.status, 204, "{}", deleted.body);
    assert_eq!(stored_files(server.dir()), Vec::<String>::new());
}

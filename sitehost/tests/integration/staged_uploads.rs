//! Staged uploads end to end: a session, the form posted as a partner posts it, then the
//! create naming its `upload_id`. On `sitehost serve` (the embedded stores: the form is on
//! the server itself) and on DynamoDB + S3 (moto: the form is an S3 presigned POST). The
//! refusals: limits, a second use, another account's (404, as every other account's
//! object) or sub id's (403), an expired one, a file
//! that is no image or over its declared size, and the key's upload budget.

use crate::support;

use std::sync::Arc;

use serde_json::{json, Value};
use sitehost::client::ClientResponse;
use sitehost::store::dynamo::DynamoStore;
use sitehost::store::s3::S3Files;
use sitehost::store::{Stores, UploadSession};
use support::app::TestApp;
use support::media::{b64, jpeg};

/// A `multipart/form-data` body of `fields` (in order), then `file` as `file`: what a
/// partner's HTTP library or a browser's `FormData` sends.
fn form_body(fields: &Value, file: &[u8]) -> (String, Vec<u8>) {
    let boundary = "----sitehost-test-boundary-7d1f";
    let mut body = Vec::new();
    for (name, value) in fields.as_object().into_iter().flatten() {
        body.extend_from_slice(
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{}\r\n",
                value.as_str().unwrap_or_default()
            )
            .as_bytes(),
        );
    }
    body.extend_from_slice(
        format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; \
             filename=\"IMG_2040.jpg\"\r\nContent-Type: image/jpeg\r\n\r\n"
        )
        .as_bytes(),
    );
    body.extend_from_slice(file);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), body)
}

/// Posts the session's form with `file`; the status.
async fn post_form(session: &Value, file: &[u8]) -> u16 {
    let (content_type, body) = form_body(&session["fields"], file);
    let url = session["url"].as_str().expect("url");
    reqwest::Client::new()
        .post(url)
        .header("content-type", content_type)
        .body(body)
        .send()
        .await
        .expect("form post")
        .status()
        .as_u16()
}

/// The whole flow for `file` on a served app: the session's answer and the create's.
async fn staged_upload(server: &TestApp, file: &[u8]) -> (Value, ClientResponse) {
    let session = server
        .post(
            "/api/v2/images/uploads/",
            &json!({"name": "IMG_2040.jpg", "size": file.len()}),
        )
        .await
        .expect("session");
    assert_eq!(session.status, 201, "{}", session.body);
    assert_eq!(post_form(&session.body, file).await, 204);
    let upload_id = session.body["upload_id"].as_str().expect("upload_id");
    let created = server
        .post(
            "/api/v2/images/",
            &json!({"upload_id": upload_id, "site_id": 3}),
        )
        .await
        .expect("create");
    (session.body, created)
}

#[tokio::test]
async fn a_staged_upload_makes_the_image_a_base64_upload_of_the_same_bytes_makes() {
    let server = TestApp::builder().caller("agency", Some(5)).spawn().await;
    let photo = jpeg(1600, 1200);
    let (session, staged) = staged_upload(&server, &photo).await;
    assert_eq!(staged.status, 201, "{}", staged.body);
    assert!(
        session["url"]
            .as_str()
            .is_some_and(|url| url.starts_with(&format!("{}/staging/", server.base()))),
        "{session}"
    );
    assert_eq!(session["method"], "POST");
    assert_eq!(session["max_bytes"], photo.len());
    let upload_id = session["upload_id"].as_str().expect("upload_id");
    assert_eq!(session["fields"]["key"], format!("staging/{upload_id}"));
    assert!(session["expires"]
        .as_str()
        .is_some_and(|e| e.ends_with('Z')));

    let base64 = server
        .post(
            "/api/v2/images/",
            &json!({"upload": {"name": "IMG_2040.jpg", "file": b64(&photo)}, "site_id": 3}),
        )
        .await
        .expect("base64 upload");
    assert_eq!(base64.status, 201, "{}", base64.body);
    for field in ["mimetype", "width", "height", "site_id", "user_id"] {
        assert_eq!(staged.body[field], base64.body[field], "{field}");
    }
    assert_eq!(staged.body["width"], 1600);
    // The same variants, byte for byte.
    let http = reqwest::Client::new();
    for size in ["original", "big", "large", "medium", "small", "thumbnail"] {
        let mut files = Vec::new();
        for image in [&staged.body, &base64.body] {
            let path = image["sizes"][size].as_str().expect("variant");
            let got = http
                .get(format!("{}/{path}", server.base()))
                .send()
                .await
                .expect("file");
            files.push(got.bytes().await.expect("bytes"));
        }
        assert_eq!(files[0], files[1], "{size}");
    }
    // The staged file is gone once used; the upload_id works once.
    assert!(!server.dir().join("files/staging").join(upload_id).exists());
    let again = server
        .post("/api/v2/images/", &json!({"upload_id": upload_id}))
        .await
        .expect("second create");
    assert_eq!(again.status, 409, "{}", again.body);
    assert_eq!(
        server
            .get("/api/v2/images/?site_id=3")
            .await
            .expect("list")
            .body["meta"]["total_count"],
        2
    );
}

// Reads better whole: every refusal against one server, then one check that none made an image.
#[tokio::test]
async fn staged_upload_refusals_make_nothing() {
    let server = TestApp::builder()
        .config(|config| config.fetch.max_bytes = 200_000)
        .caller("agency", Some(5))
        .spawn()
        .await;
    let photo = jpeg(160, 120);
    let session = |size: usize| {
        let server = &server;
        async move {
            server
                .post(
                    "/api/v2/images/uploads/",
                    &json!({"name": "a.jpg", "size": size}),
                )
                .await
                .expect("session")
        }
    };
    let create = |upload_id: String| {
        let server = &server;
        async move {
            server
                .post("/api/v2/images/", &json!({"upload_id": upload_id}))
                .await
                .expect("create")
        }
    };
    // Over the limit (a setting: external_url's) at the session.
    let over = session(200_001).await;
    assert_eq!(over.status, 413, "{}", over.body);
    assert!(over.body["error"]
        .as_str()
        .is_some_and(|e| e.contains("200,000 bytes")));

    // A file over its declared size is refused at the form, before it is stored.
    let small = session(photo.len() - 1).await;
    assert_eq!(post_form(&small.body, &photo).await, 413);
    let id = small.body["upload_id"].as_str().expect("id").to_string();
    // Nothing posted yet: a 400 that leaves the upload_id usable.
    let early = create(id.clone()).await;
    assert_eq!(early.status, 400, "{}", early.body);
    assert!(early.body["upload_id"][0]
        .as_str()
        .is_some_and(|e| e.contains("No file was posted")));

    // The form takes one file.
    let open = session(photo.len()).await;
    assert_eq!(post_form(&open.body, &photo).await, 204);
    assert_eq!(post_form(&open.body, &photo).await, 409);

    // Not an image: the pipeline's own refusal, then the upload_id is used and its file gone.
    let text = b"this is not an image at all".to_vec();
    let not_image = session(text.len()).await;
    assert_eq!(post_form(&not_image.body, &text).await, 204);
    let not_image_id = not_image.body["upload_id"]
        .as_str()
        .expect("id")
        .to_string();
    let refused = create(not_image_id.clone()).await;
    assert_eq!(refused.status, 400, "{}", refused.body);
    assert_eq!(create(not_image_id.clone()).await.status, 409);
    assert!(!server
        .dir()
        .join("files/staging")
        .join(&not_image_id)
        .exists());

    // A file over its declared size that reached the staging area anyway (a store whose
    // form does not check) is refused at the create with a 413.
    let store = &server.store;
    let now = sitehost::clock::Clock::now(&sitehost::clock::SystemClock);
    let key = server.key_for("agency", Some(5), None).await;
    let account_id = key.account_id;
    let seeded =
        |upload_id: &str, account_id: i64, sub: Option<&str>, expires_at: i64| UploadSession {
            upload_id: upload_id.into(),
            account_id,
            partner_sub_id: sub.map(str::to_string),
            name: "seeded.jpg".into(),
            size: 10,
            expires_at,
            used: false,
        };
    let oversized = seeded(
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        account_id,
        None,
        now + 900,
    );
    store
        .create_upload_session(&oversized, now)
        .await
        .expect("seed");
    let files = server.app.services.files.clone().expect("files");
    files
        .put(
            "staging/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
            photo.clone().into(),
            "image/jpeg",
        )
        .await
        .expect("stage");
    let too_large = create(oversized.upload_id.clone()).await;
    assert_eq!(too_large.status, 413, "{}", too_large.body);

    // Another account's, another sub id's, an expired one, an unknown one.
    for (upload_id, account, sub, expires_at, status) in [
        (
            "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
            account_id + 1000,
            None,
            now + 900,
            404,
        ),
        (
            "cccccccccccccccccccccccccccccccc",
            account_id,
            Some("sub-9"),
            now + 900,
            403,
        ),
        (
            "dddddddddddddddddddddddddddddddd",
            account_id,
            None,
            now - 2 * 3600,
            400,
        ),
    ] {
        store
            .create_upload_session(&seeded(upload_id, account, sub, expires_at), now)
            .await
            .expect("seed");
        files
            .put(
                &format!("staging/{upload_id}"),
                photo.clone().into(),
                "image/jpeg",
            )
            .await
            .expect("stage");
        let reply = create(upload_id.to_string()).await;
        assert_eq!(reply.status, status, "{upload_id}: {}", reply.body);
    }
    assert_eq!(create("0".repeat(32)).await.status, 404);
    assert_eq!(create("../etc/passwd".into()).await.status, 404);
    // None of them made an image.
    assert_eq!(
        server.get("/api/v2/images/").await.expect("list").body["meta"]["total_count"],
        0
    );
}

#[tokio::test]
async fn retries_with_an_idempotency_key_answer_as_before_and_sessions_draw_on_the_budget() {
    let server = TestApp::builder()
        .config(|config| config.budgets.uploads_per_minute = 4)
        .spawn()
        .await;
    let client = server.client("agency", None).await;
    let photo = jpeg(64, 48);
    let session = client
        .post("/api/v2/images/uploads/", &json!({"size": photo.len()}))
        .await
        .expect("session");
    assert_eq!(session.status, 201, "{}", session.body);
    assert_eq!(post_form(&session.body, &photo).await, 204);
    let body = json!({"upload_id": session.body["upload_id"], "site_id": 3});
    let first = client
        .post_once("/api/v2/images/", &body, "photo-1")
        .await
        .expect("create");
    assert_eq!(first.status, 201, "{}", first.body);
    let retry = client
        .post_once("/api/v2/images/", &body, "photo-1")
        .await
        .expect("retry");
    assert_eq!((retry.status, &retry.body["id"]), (201, &first.body["id"]));
    // Session, create and retry drew three of the four uploads; one session more is the
    // last this minute.
    let last = client
        .post("/api/v2/images/uploads/", &json!({"size": 10}))
        .await
        .expect("session");
    assert_eq!(last.status, 201, "{}", last.body);
    let over = client
        .post("/api/v2/images/uploads/", &json!({"size": 10}))
        .await
        .expect("session");
    assert_eq!(over.status, 429, "{}", over.body);
}

/// On DynamoDB and S3 (moto): the form is an S3 presigned POST onto the staging bucket,
/// and moto takes it as S3 does.
#[tokio::test]
async fn a_staged_upload_through_an_s3_presigned_post() {
    let Some(endpoint) = support::aws_endpoint() else {
        return;
    };
    let Some(table) = support::TestTable::create().await else {
        return;
    };
    let s3 = support::s3::client(&endpoint);
    let bucket = support::s3::create_bucket(&s3, "sitehost-test", &table.name).await;
    let staging = support::s3::create_bucket(&s3, "sitehost-staging", &table.name).await;
    let credentials = aws_sdk_s3::config::SharedCredentialsProvider::new(
        aws_sdk_s3::config::Credentials::new("testing", "testing", None, None, "tests"),
    );
    let files = S3Files::new(s3.clone(), bucket.clone()).with_staging(
        staging.clone(),
        Some(&endpoint),
        credentials,
    );
    let server = TestApp::builder()
        .stores(Stores {
            records: Arc::new(DynamoStore::new(table.client.clone(), table.name.clone())),
            files: Some(Arc::new(files)),
        })
        .caller("aws", None)
        .spawn()
        .await;
    let photo = jpeg(320, 240);
    let (session, created) = staged_upload(&server, &photo).await;
    assert_eq!(created.status, 201, "{}", created.body);
    assert_eq!(created.body["width"], 320);
    assert_eq!(session["url"], format!("{endpoint}/{staging}"));
    let fields = &session["fields"];
    for name in [
        "key",
        "x-amz-algorithm",
        "x-amz-credential",
        "x-amz-date",
        "policy",
        "x-amz-signature",
    ] {
        assert!(fields[name].is_string(), "{name} in {fields}");
    }
    // The policy binds the key, the bucket and the size declared (moto does not check
    // content-length-range; `store::s3::post_form`'s tests hold the document).
    let policy: Value = serde_json::from_slice(
        &base64::Engine::decode(
            &base64::engine::general_purpose::STANDARD,
            fields["policy"].as_str().expect("policy"),
        )
        .expect("base64"),
    )
    .expect("json");
    let conditions = policy["conditions"].as_array().expect("conditions");
    assert!(conditions.contains(&json!(["content-length-range", 1, photo.len()])));
    assert!(conditions.contains(&json!({"bucket": staging})));
    assert!(conditions.contains(&json!({"key": fields["key"]})));
    // Used once, then removed from the staging bucket.
    let listed = s3
        .list_objects_v2()
        .bucket(&staging)
        .send()
        .await
        .expect("list staging");
    assert_eq!(listed.contents().len(), 0);
    let again = server
        .post(
            "/api/v2/images/",
            &json!({"upload_id": session["upload_id"]}),
        )
        .await
        .expect("second create");
    assert_eq!(again.status, 409, "{}", again.body);
}

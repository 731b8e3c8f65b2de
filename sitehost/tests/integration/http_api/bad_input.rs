//! Bad input gets a 4xx that says what was wrong, and changes nothing.

use serde_json::{json, Value};

use super::create;
use crate::support;
use crate::support::app::TestApp;
use crate::support::openapi::CheckedClient;

/// A server with one business, "Keep", and a client of its account: (server, client, the
/// business's id).
async fn one_business() -> (TestApp, CheckedClient, i64) {
    let server = TestApp::spawn().await;
    let client = server.client("agency", None).await;
    let id = create(&client, json!({"business_name": "Keep"})).await["id"]
        .as_i64()
        .expect("id");
    (server, client, id)
}

/// Nothing changed, and the server still serves.
async fn assert_only_keep(client: &CheckedClient) {
    let list = client.get("/api/v2/businesses/").await.expect("list");
    assert_eq!(list.body["meta"]["total_count"], 1);
    assert_eq!(list.body["objects"][0]["business_name"], "Keep");
}

#[tokio::test]
async fn bad_bodies_get_a_400_naming_the_field_and_change_nothing() {
    let (_server, client, id) = one_business().await;
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
    assert_only_keep(&client).await;
}

#[tokio::test]
async fn bad_queries_and_ids_get_a_400_and_unknown_ones_a_404() {
    let (_server, client, _) = one_business().await;
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
}

/// A 10 MB body: 413 before it is read whole.
#[tokio::test]
async fn a_body_past_the_limit_is_413_and_changes_nothing() {
    let (_server, client, _) = one_business().await;
    let big = vec![b' '; 10 * 1024 * 1024];
    let reply = client.send("POST", "/api/v2/businesses/", Some(big)).await;
    assert!(reply.map(|r| r.status == 413).unwrap_or(true));

    assert_only_keep(&client).await;
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

//! A key restricted to a sub id lists, reads and references only images of its sub id (over
//! HTTP, embedded store; the store side is in `store_contract/images.rs`), and an embedded
//! store from before image sub ids is migrated.

use std::sync::Arc;

use serde_json::{json, Value};
use sitehost::client::PartnerClient;
use sitehost::domain::account::ApiKey;
use sitehost::domain::image_record::{ImageQuery, NewImage};
use sitehost::store::SharedStore;

use super::{all_images, status, upload_body};
use crate::support::app::TestApp;

async fn upload(client: &PartnerClient, business_id: Option<i64>) -> i64 {
    let reply = client
        .post("/api/v2/images/", &upload_body(business_id))
        .await
        .expect("upload");
    assert_eq!(reply.status, 201, "{}", reply.body);
    reply.body["id"].as_i64().expect("id")
}

async fn list_ids(client: &PartnerClient, query: &str) -> (Vec<i64>, u64) {
    let reply = client
        .get(&format!("/api/v2/images/{query}"))
        .await
        .expect("list");
    assert_eq!(reply.status, 200, "{}", reply.body);
    let ids = reply.body["objects"]
        .as_array()
        .expect("objects")
        .iter()
        .filter_map(|o| o["id"].as_i64())
        .collect();
    (
        ids,
        reply.body["meta"]["total_count"].as_u64().expect("count"),
    )
}

// Reads better whole: one north and one south key through uploads, logos and details, in turn.
#[tokio::test]
async fn sub_restricted_keys_neither_see_nor_reference_other_sub_ids_images() {
    let server = TestApp::spawn().await;
    let client = |k: &ApiKey| server.partner_client(k);
    let north = client(&server.key_for("agency", None, Some("north")).await);
    let south = client(&server.key_for("agency", None, Some("south")).await);
    let all = client(&server.key("agency").await);

    let north_shop = north
        .post(
            "/api/v2/businesses/",
            &json!({"business_name": "North Shop"}),
        )
        .await
        .expect("create")
        .body["id"]
        .as_i64()
        .expect("id");
    let south_shop = all
        .post(
            "/api/v2/businesses/",
            &json!({"business_name": "South Shop", "partner_sub_id": "south"}),
        )
        .await
        .expect("create")
        .body["id"]
        .as_i64()
        .expect("id");

    // How an image gets its sub id: the restricted key's own; an unrestricted key's
    // upload takes its business's, or none.
    let north_loose = upload(&north, None).await;
    let north_of_shop = upload(&north, Some(north_shop)).await;
    let south_loose = upload(&south, None).await;
    let south_by_all = upload(&all, Some(south_shop)).await;
    let no_sub = upload(&all, None).await;

    let everything = vec![
        north_loose,
        north_of_shop,
        south_loose,
        south_by_all,
        no_sub,
    ];
    assert_eq!(list_ids(&all, "").await, (everything.clone(), 5));
    assert_eq!(
        list_ids(&north, "").await,
        (vec![north_loose, north_of_shop], 2)
    );
    assert_eq!(
        list_ids(&south, "?order_by=-id").await,
        (vec![south_by_all, south_loose], 2)
    );
    assert_eq!(
        list_ids(&north, &format!("?business_id={north_shop}")).await,
        (vec![north_of_shop], 1)
    );
    assert_eq!(
        list_ids(&north, &format!("?business_id={south_shop}")).await,
        (vec![], 0)
    );
    assert_eq!(
        list_ids(&all, &format!("?business_id={south_shop}")).await,
        (vec![south_by_all], 1)
    );

    for id in &everything {
        let path = format!("/api/v2/images/{id}/");
        let expect = |visible: bool| if visible { 200 } else { 404 };
        assert_eq!(status(all.get(&path)).await.0, 200);
        assert_eq!(
            status(north.get(&path)).await.0,
            expect([north_loose, north_of_shop].contains(id)),
            "north GET {id}"
        );
        assert_eq!(
            status(south.get(&path)).await.0,
            expect([south_loose, south_by_all].contains(id)),
            "south GET {id}"
        );
    }

    // Neither an upload nor a logo can reference what the key cannot see.
    let (code, body) = status(north.post("/api/v2/images/", &upload_body(Some(south_shop)))).await;
    assert_eq!(
        (code, body.get("business_id").is_some()),
        (400, true),
        "{body}"
    );
    for (logo, expected) in [(south_loose, 400), (no_sub, 400), (north_loose, 201)] {
        let (code, body) = status(north.post(
            "/api/v2/businesses/",
            &json!({"business_name": "Logo Test", "logo_image_id": logo}),
        ))
        .await;
        assert_eq!(code, expected, "north logo {logo}: {body}");
        if code == 400 {
            assert!(body.get("logo_image_id").is_some(), "{body}");
        } else {
            assert_eq!(body["logo_image"]["id"], logo);
        }
    }
    let north_path = format!("/api/v2/businesses/{north_shop}/");
    let (code, body) =
        status(north.put(&north_path, &json!({"logo_image_id": south_by_all}))).await;
    assert_eq!(
        (code, body.get("logo_image_id").is_some()),
        (400, true),
        "{body}"
    );

    // Not even an unrestricted key may give a north business a south logo (a logo is of
    // the business's sub id or of none)...
    let (code, body) = status(all.put(&north_path, &json!({"logo_image_id": south_by_all}))).await;
    assert_eq!(
        (code, body.get("logo_image_id").is_some()),
        (400, true),
        "{body}"
    );
    // ...but it may give it one of no sub id: the north key then sees the id but not the
    // image, and may still write the object back unchanged.
    let (code, body) = status(all.put(&north_path, &json!({"logo_image_id": no_sub}))).await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["logo_image"]["id"], no_sub);
    let (code, seen) = status(north.get(&north_path)).await;
    assert_eq!(code, 200);
    assert_eq!(seen["logo_image_id"], no_sub);
    assert_eq!(seen["logo_image"], Value::Null);
    let image_ids = |v: &Value| -> Vec<i64> {
        v["images"]
            .as_array()
            .expect("images")
            .iter()
            .filter_map(|i| i["id"].as_i64())
            .collect()
    };
    assert_eq!(image_ids(&seen), vec![north_of_shop]);
    let mut written_back = seen.clone();
    written_back["business_name"] = json!("North Shop 2");
    let (code, body) = status(north.put(&north_path, &written_back)).await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["logo_image_id"], no_sub);

    // The south business's detail shows each key only its own sub id's images.
    let south_path = format!("/api/v2/businesses/{south_shop}/");
    assert_eq!(
        image_ids(&status(all.get(&south_path)).await.1),
        vec![south_by_all]
    );
    assert_eq!(
        image_ids(&status(south.get(&south_path)).await.1),
        vec![south_by_all]
    );
    assert_eq!(status(north.get(&south_path)).await.0, 404);
}

/// A data directory made before images had sub ids opens, and its images belong to none.
#[tokio::test]
async fn an_embedded_store_from_before_image_sub_ids_is_migrated() {
    let dir = tempfile::tempdir().expect("dir");
    let db = rusqlite::Connection::open(dir.path().join("sitehost.db")).expect("db");
    db.execute_batch(
        "CREATE TABLE images (
            id INTEGER PRIMARY KEY, account_id INTEGER NOT NULL, path TEXT NOT NULL UNIQUE,
            mimetype TEXT NOT NULL, width INTEGER NOT NULL, height INTEGER NOT NULL,
            site_id INTEGER, business_id INTEGER, user_id INTEGER NOT NULL,
            added INTEGER NOT NULL, modified INTEGER NOT NULL);
         INSERT INTO images VALUES (1, 1, 'img/upload/old-abcdefghijkl.png', 'image/png',
            2, 2, NULL, NULL, 1, 0, 0);",
    )
    .expect("old schema");
    drop(db);
    let store: SharedStore = Arc::new(
        sitehost::store::sqlite::SqliteStore::open(dir.path()).expect("opens and migrates"),
    );
    let old = store.get_image(1, 1).await.expect("get").expect("kept");
    assert_eq!(
        (old.path.as_str(), old.partner_sub_id),
        ("img/upload/old-abcdefghijkl.png", None)
    );
    let new = NewImage {
        id: Some(2),
        path: "img/upload/new-abcdefghijkl--2.png".into(),
        mimetype: "image/png".into(),
        width: 2,
        height: 2,
        site_id: None,
        business_id: None,
        partner_sub_id: Some("north".into()),
        user_id: 1,
    };
    store.create_image(1, new, 0).await.expect("create");
    let north = ImageQuery {
        filter: sitehost::domain::image_record::ImageFilter {
            partner_sub_id: Some("north".into()),
            ..Default::default()
        },
        ..all_images()
    };
    let page = store.list_images(1, &north).await.expect("list");
    assert_eq!(
        (
            page.items.iter().map(|i| i.id).collect::<Vec<_>>(),
            page.total_count
        ),
        (vec![2], 1)
    );
}

//! Businesses over HTTP: create, read, list, page and update, with their services and nested
//! locations.

use serde_json::{json, Value};

use super::create;
use crate::support::app::TestApp;

// Reads better whole: one business through create, read, list and update, each step from the last.
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

/// The platform's own create example (nested `locations` with phones, a description and a
/// contact address, `services`) is kept: the 201, the detail and the update answer it in
/// the documented shape, and an update replaces the locations, keeping the ids it names.
// Reads better whole: one business's services and locations through create, update and refusals.
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

//! `/api/v2/locations/` over real HTTP on the embedded store, every reply checked against
//! docs/openapi.json: the same records as a business's nested `locations`, hours, the
//! list's filters and orders, tenancy, and bad input named by its path with nothing
//! written.

use serde_json::{json, Value};

use crate::support::app::TestApp;
use crate::support::openapi::CheckedClient;

async fn created(client: &CheckedClient, path: &str, body: Value) -> Value {
    let reply = client.post(path, &body).await.expect("post");
    assert_eq!(reply.status, 201, "{}", reply.body);
    reply.body
}

fn place(business_id: &Value, name: &str, lat: f64, lon: f64) -> Value {
    json!({"business_id": business_id, "location_name": name, "street": "1 Main St",
           "city": "Minneapolis", "state": "MN", "postal_code": 55401, "country": "US",
           "lat": lat, "lon": lon})
}

async fn names(client: &CheckedClient, query: &str) -> Vec<String> {
    let reply = client
        .get(&format!("/api/v2/locations/?{query}"))
        .await
        .expect("list");
    assert_eq!(reply.status, 200, "{}", reply.body);
    reply.body["objects"]
        .as_array()
        .map(|objects| {
            objects
                .iter()
                .map(|o| o["location_name"].as_str().unwrap_or_default().to_string())
                .collect()
        })
        .unwrap_or_default()
}

// Reads better whole: one business's locations through every route, each step from the last.
#[tokio::test]
async fn locations_are_the_business_locations_by_id() {
    let server = TestApp::spawn().await;
    let a = server.client("a", None).await;
    let business = created(&a, "/api/v2/businesses/", json!({"business_name": "B", "partner_business_id": "pb",
        "locations": [{"location_name": "Quay", "city": "Minneapolis", "lat": 44.98, "lon": -93.27}]})).await;
    let business_id = business["id"].clone();
    let nested = business["locations"][0].clone();
    let nested_id = nested["id"].as_i64().unwrap_or_default();
    // Both ways out: the nested location is the resource's, key for key.
    let got = a
        .get(&format!("/api/v2/locations/{nested_id}"))
        .await
        .expect("get");
    assert_eq!(got.status, 200);
    assert_eq!(got.body, nested);
    assert_eq!(got.body["hours_by_type"], json!({}));

    let eclair = created(
        &a,
        "/api/v2/locations/",
        place(&business_id, "Éclair Corner", 44.95, -93.09),
    )
    .await;
    let airport = created(
        &a,
        "/api/v2/locations/",
        place(&business_id, "airport", 44.88, -93.22),
    )
    .await;
    let id = eclair["id"].as_i64().unwrap_or_default();
    assert_eq!(eclair["postal_code"], "55401");
    let detail = a
        .get(&format!("/api/v2/businesses/{business_id}/"))
        .await
        .expect("detail");
    assert_eq!(detail.body["locations"][1], eclair);

    let query = format!("business_id={business_id}&limit=600&order_by=location_name");
    assert_eq!(
        names(&a, &query).await,
        ["airport", "Éclair Corner", "Quay"]
    );
    let query = format!("business_id={business_id}&order_by=-location_name");
    assert_eq!(
        names(&a, &query).await,
        ["Quay", "Éclair Corner", "airport"]
    );
    let query = format!("business_id={business_id}&near_lat=44.95&near_lon=-93.10");
    assert_eq!(
        names(&a, &query).await,
        ["Éclair Corner", "airport", "Quay"]
    );
    assert_eq!(
        names(&a, "partner_business_id=pb&order_by=-id").await,
        ["airport", "Éclair Corner", "Quay"]
    );

    // Hours: the client's PUT replaces the type it gives; the day and range of a bad time
    // are named, and nothing is written.
    let week = json!([[["09:00:00", "17:00:00"]], [], [], [], [], ["24_HOURS"], []]);
    let put = a
        .put(
            &format!("/api/v2/locations/{id}/"),
            &json!({"hours": [{"type": "primary", "hours": week}]}),
        )
        .await
        .expect("put");
    assert_eq!(put.status, 200, "{}", put.body);
    assert_eq!(put.body["hours_of_operation"], week);
    assert_eq!(put.body["location_name"], "Éclair Corner");
    let bad = json!([
        [["09:00:00", "17:00:00"]],
        [["18:00", "08:00"]],
        [],
        [],
        [],
        [],
        []
    ]);
    let refused = a
        .put(
            &format!("/api/v2/locations/{id}/"),
            &json!({"city": "X", "hours_of_operation": bad}),
        )
        .await
        .expect("put");
    assert_eq!(refused.status, 400);
    assert!(
        refused.body["hours_of_operation"]["1"]["0"].is_array(),
        "{}",
        refused.body
    );
    let after = a
        .get(&format!("/api/v2/locations/{id}/"))
        .await
        .expect("get");
    assert_eq!(after.body["city"], "Minneapolis");

    // A create names every missing field; no business filter is a 400, as are unknown
    // field-like filters; format=json is ignored.
    let missing = a
        .post("/api/v2/locations/", &json!({"city": "X"}))
        .await
        .expect("post");
    assert_eq!(missing.status, 400);
    for field in ["business_id", "street", "state", "postal_code", "country"] {
        assert!(missing.body[field].is_array(), "{field}: {}", missing.body);
    }
    for query in [
        "",
        "near_lat=1&near_lon=2",
        &format!("business_id={business_id}&city=X"),
        &format!("business_id={business_id}&id__in=1,2"),
    ] {
        let reply = a
            .get(&format!("/api/v2/locations/?{query}"))
            .await
            .expect("list");
        assert_eq!(reply.status, 400, "{query}: {}", reply.body);
    }
    assert_eq!(
        names(&a, &format!("business_id={business_id}&format=json"))
            .await
            .len(),
        3
    );

    // Tenancy: another account, and a key of another sub id, see none of it.
    let b = server.client("b", None).await;
    let north = server.client("a", Some("north")).await;
    for client in [&b, &north] {
        let reply = client
            .get(&format!("/api/v2/locations/{id}/"))
            .await
            .expect("get");
        assert_eq!(reply.status, 404);
        let reply = client
            .put(&format!("/api/v2/locations/{id}/"), &json!({"city": "Y"}))
            .await
            .expect("put");
        assert_eq!(reply.status, 404);
        assert_eq!(
            names(client, &format!("business_id={business_id}"))
                .await
                .len(),
            0
        );
        let reply = client
            .post("/api/v2/locations/", &place(&business_id, "X", 0.0, 0.0))
            .await
            .expect("post");
        assert_eq!(reply.status, 400);
    }

    // Delete: gone from the business and by id, for good.
    let airport_id = airport["id"].as_i64().unwrap_or_default();
    let deleted = a
        .send("DELETE", &format!("/api/v2/locations/{airport_id}/"), None)
        .await
        .expect("delete");
    assert_eq!(deleted.status, 204);
    let gone = a
        .get(&format!("/api/v2/locations/{airport_id}/"))
        .await
        .expect("get");
    assert_eq!(gone.status, 404);
    let detail = a
        .get(&format!("/api/v2/businesses/{business_id}/"))
        .await
        .expect("detail");
    assert_eq!(detail.body["locations"].as_array().map(Vec::len), Some(2));
}

#[tokio::test]
async fn business_lists_refuse_unsupported_filters_and_sort_accents_with_their_letter() {
    let server = TestApp::spawn().await;
    let a = server.client("a", None).await;
    for name in ["zzz", "Éclair House", "eagle", "Ñandú"] {
        created(&a, "/api/v2/businesses/", json!({"business_name": name})).await;
    }
    let listed = a
        .get("/api/v2/businesses/?order_by=business_name&project_type=default")
        .await
        .expect("list");
    let names: Vec<&str> = listed.body["objects"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|o| o["business_name"].as_str())
        .collect();
    assert_eq!(names, ["eagle", "Éclair House", "Ñandú", "zzz"]);
    for query in ["business_name=Foo", "id__in=1,2", "deleted__in=0"] {
        let reply = a
            .get(&format!("/api/v2/businesses/?{query}"))
            .await
            .expect("list");
        let name = query.split('=').next().unwrap_or_default();
        assert_eq!(reply.status, 400, "{query}");
        assert!(reply.body[name].is_array(), "{query}: {}", reply.body);
    }
    let other = a
        .get("/api/v2/businesses/?project_type=landing")
        .await
        .expect("list");
    assert_eq!(other.body["meta"]["total_count"], 0);
    let ignored = a
        .get("/api/v2/businesses/?format=json")
        .await
        .expect("list");
    assert_eq!(ignored.body["meta"]["total_count"], 4);
}

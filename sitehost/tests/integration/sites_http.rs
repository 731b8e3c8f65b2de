//! Sites and blog posts over HTTP on `sitehost serve`'s app (every reply checked against
//! docs/openapi.json): the platform client's address lookup, locations of the business,
//! tenancy by account and sub id, bad input named by field with nothing written, and the
//! rule for an image's `site_id`.

use serde_json::{json, Value};

use crate::support::app::TestApp;
use crate::support::media;

async fn business_with_locations(
    client: &crate::support::openapi::CheckedClient,
    sub: Option<&str>,
) -> Value {
    let reply = client
        .post(
            "/api/v2/businesses/",
            &json!({"business_name": "Harbour", "partner_sub_id": sub,
                    "locations": [{"location_name": "Quay", "city": "Duluth"}, {"location_name": "Market"}]}),
        )
        .await
        .expect("business");
    assert_eq!(reply.status, 201, "{}", reply.body);
    reply.body
}

// Reads better whole: one site through create, query, refusals, disable and enable.
#[tokio::test]
async fn sites_by_address_with_their_business_locations() {
    let server = TestApp::spawn().await;
    let acme = server.client("acme", None).await;
    let business = business_with_locations(&acme, None).await;
    let (id, locations) = (&business["id"], &business["locations"]);
    let site = json!({"business_id": id, "domain": "HarbourCafe.com", "subdomain": "www",
                      "title": "Harbour", "locations": [locations[1]["id"]], "theme_id": 449});
    let created = acme.post("/api/v2/sites", &site).await.expect("create");
    assert_eq!(created.status, 201, "{}", created.body);
    let body = &created.body;
    assert_eq!(body["formatted_url"], "http://www.harbourcafe.com/");
    assert_eq!(body["location_ids"], json!([locations[1]["id"]]));
    assert_eq!(body["locations"][0]["location_name"], "Market");
    assert_eq!(body["business"]["business_name"], "Harbour");
    let uri = body["resource_uri"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert_eq!(
        created.headers.get("location").map(|v| v.to_str().ok()),
        Some(Some(uri.as_str()))
    );

    // The platform client's site_from_url query.
    let found = acme
        .get("/api/v2/sites/?base_directory=/&deleted=0&domain=harbourcafe.com&subdomain=www")
        .await
        .expect("list");
    assert_eq!(found.body["meta"]["total_count"], 1);
    assert_eq!(found.body["objects"][0]["id"], body["id"]);

    // Bad input: each field named, nothing written.
    let bad = json!({"business_id": id, "domain": "a b", "subdomain": "www", "title": "X",
                     "locations": [locations[0]["id"], 999_999]});
    let refused = acme.post("/api/v2/sites/", &bad).await.expect("bad");
    assert_eq!(refused.status, 400);
    assert!(refused.body["domain"].is_array(), "{}", refused.body);
    let taken = acme.post("/api/v2/sites/", &site).await.expect("taken");
    assert_eq!(taken.status, 409, "{}", taken.body);
    let elsewhere = json!({"business_id": id, "domain": "harbourcafe.com", "subdomain": "shop",
                           "title": "X", "locations": [999_999]});
    let refused = acme
        .post("/api/v2/sites/", &elsewhere)
        .await
        .expect("bad location");
    assert_eq!(refused.status, 400);
    assert!(
        refused.body["locations"]["0"].is_array(),
        "{}",
        refused.body
    );
    let unfiltered = acme.get("/api/v2/sites/").await.expect("list");
    assert_eq!(unfiltered.body["meta"]["total_count"], 1);
    let combined = acme
        .get(&format!("/api/v2/sites/?business_id={id}&location_id=1"))
        .await
        .expect("list");
    assert_eq!(combined.status, 400);

    // Disabled, then enabled; another account sees nothing of it.
    let path = uri.trim_end_matches('/');
    assert_eq!(
        acme.send("DELETE", path, None)
            .await
            .expect("delete")
            .status,
        204
    );
    let active = acme.get("/api/v2/sites/?deleted=0").await.expect("list");
    assert_eq!(active.body["meta"]["total_count"], 0);
    let other = server.client("other", None).await;
    assert_eq!(other.get(&uri).await.expect("get").status, 404);
    assert_eq!(
        other
            .put(&uri, &json!({"deleted": false}))
            .await
            .expect("put")
            .status,
        404
    );
    let enabled = acme
        .put(&uri, &json!({"deleted": false, "title": "Harbour Cafe"}))
        .await
        .expect("put");
    assert_eq!(
        (enabled.status, &enabled.body["deleted"]),
        (200, &json!(false))
    );
    assert_eq!(enabled.body["title"], "Harbour Cafe");
}

// Reads better whole: one site's posts seen by each key in turn, each step from the last.
#[tokio::test]
async fn posts_through_their_site_and_sub_ids() {
    let server = TestApp::spawn().await;
    let agency = server.client("agency", None).await;
    let north = server.client("agency", Some("north")).await;
    let business = business_with_locations(&agency, Some("south")).await;
    let site = agency
        .post(
            "/api/v2/sites/",
            &json!({"business_id": business["id"], "domain": "south.example",
                                         "subdomain": "www", "title": "South"}),
        )
        .await
        .expect("site");
    assert_eq!(
        (site.status, &site.body["partner_sub_id"]),
        (201, &json!("south"))
    );
    let site_id = site.body["id"].clone();
    // Another sub id's site is not found, nor listed.
    assert_eq!(
        north
            .get(&format!("/api/v2/sites/{site_id}/"))
            .await
            .expect("get")
            .status,
        404
    );
    assert_eq!(
        north.get("/api/v2/sites/").await.expect("list").body["meta"]["total_count"],
        0
    );
    let refused = north
        .post(
            "/api/v2/posts/",
            &json!({"site_id": site_id, "title": "T", "content": "<p>x</p>"}),
        )
        .await
        .expect("post");
    assert_eq!(refused.status, 400);
    assert!(refused.body["site_id"].is_array());

    let html = "<h2>Hi</h2>\n<p>café</p>";
    let first = agency
        .post(
            "/api/v2/posts/",
            &json!({"site_id": site_id, "title": "First", "content": html,
                                         "date": "2024-05-01T09:30:00"}),
        )
        .await
        .expect("post");
    assert_eq!(first.status, 201, "{}", first.body);
    assert_eq!(
        (&first.body["content"], &first.body["date"]),
        (&json!(html), &json!("2024-05-01T09:30:00"))
    );
    let second = agency
        .post(
            "/api/v2/posts/",
            &json!({"site_id": site_id, "title": "Second", "content": "<p>2</p>"}),
        )
        .await
        .expect("post");
    let post_uri = first.body["resource_uri"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let updated = agency
        .put(&post_uri, &json!({"title": "First, again"}))
        .await
        .expect("put");
    assert_eq!(
        (&updated.body["title"], &updated.body["content"]),
        (&json!("First, again"), &json!(html))
    );
    assert_eq!(north.get(&post_uri).await.expect("get").status, 404);
    let listed = agency
        .get(&format!("/api/v2/posts/?site_id={site_id}"))
        .await
        .expect("list");
    let ids: Vec<&Value> = listed.body["objects"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| &p["id"])
        .collect();
    assert_eq!(ids, [&second.body["id"], &first.body["id"]]);
    let oversized = json!({"site_id": site_id, "title": "Big", "content": "x".repeat(100_001)});
    let refused = agency
        .post("/api/v2/posts/", &oversized)
        .await
        .expect("big");
    assert!(refused.status == 400 && refused.body["content"].is_array());
    assert_eq!(
        agency.get("/api/v2/posts/").await.expect("list").status,
        400
    );
    // A filter the list does not take is refused, naming it; `format` is not a filter.
    let unsupported = agency
        .get(&format!(
            "/api/v2/posts/?site_id={site_id}&title=First&format=json"
        ))
        .await
        .expect("list");
    assert_eq!(unsupported.status, 400, "{}", unsupported.body);
    assert!(unsupported.body["title"].is_array(), "{}", unsupported.body);
    let unsupported = agency.get("/api/v2/sites/?id__in=1,2").await.expect("list");
    assert!(
        unsupported.status == 400 && unsupported.body["id__in"].is_array(),
        "{}",
        unsupported.body
    );

    // An image naming the site takes its sub id: the site's own sub id lists it.
    let south = server.client("agency", Some("south")).await;
    let png = media::b64(&media::png(2, 2));
    let image = agency
        .post(
            "/api/v2/images/",
            &json!({"upload": {"name": "a.png", "file": png}, "site_id": site_id}),
        )
        .await
        .expect("upload");
    assert_eq!(image.status, 201, "{}", image.body);
    let listed = south
        .get(&format!("/api/v2/images/?site_id={site_id}"))
        .await
        .expect("list");
    assert_eq!(listed.body["objects"][0]["id"], image.body["id"]);
    // A site_id that names no site of the caller is kept as given, seen by the caller only.
    let stray = other_accounts_image(&server, &site_id).await;
    let listed = agency
        .get(&format!("/api/v2/images/?site_id={site_id}"))
        .await
        .expect("list");
    assert_eq!(listed.body["meta"]["total_count"], 1);
    assert!(listed.body["objects"][0]["id"] != stray);
}

/// Another account uploads an image naming `site_id` (not its site): 201, its own image.
async fn other_accounts_image(server: &TestApp, site_id: &Value) -> Value {
    let other = server.client("other", None).await;
    let png = media::b64(&media::png(2, 2));
    let image = other
        .post(
            "/api/v2/images/",
            &json!({"upload": {"name": "b.png", "file": png}, "site_id": site_id}),
        )
        .await
        .expect("upload");
    assert_eq!((image.status, &image.body["site_id"]), (201, site_id));
    let own = other
        .get(&format!("/api/v2/images/?site_id={site_id}"))
        .await
        .expect("list");
    assert_eq!(own.body["meta"]["total_count"], 1);
    image.body["id"].clone()
}

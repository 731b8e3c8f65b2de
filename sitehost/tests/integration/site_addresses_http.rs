//! Issue 45's findings on sites and posts, over HTTP on `sitehost serve` (every reply
//! checked against docs/openapi.json): another account cannot take a site's host, base
//! directories are case-folded, post content is text, posts pay for what they store, a
//! page of the largest posts fits, and a soft-deleted business keeps its sites.

use serde_json::{json, Value};

use crate::support::app::TestApp;
use crate::support::openapi::CheckedClient;

async fn business(client: &CheckedClient, name: &str) -> Value {
    let reply = client
        .post(
            "/api/v2/businesses/",
            &json!({"business_name": name, "locations": [{"location_name": "Quay"}]}),
        )
        .await
        .expect("business");
    assert_eq!(reply.status, 201, "{}", reply.body);
    reply.body
}

async fn site(client: &CheckedClient, business: &Value, address: (&str, &str, &str)) -> Value {
    let (domain, subdomain, dir) = address;
    let reply = client
        .post(
            "/api/v2/sites/",
            &json!({"business_id": business["id"], "domain": domain, "subdomain": subdomain,
                    "base_directory": dir, "title": "Site"}),
        )
        .await
        .expect("site");
    json!({"status": reply.status, "body": reply.body})
}

// Reads better whole: the probes, each refused, then what stays allowed.
#[tokio::test]
async fn another_account_cannot_take_a_sites_host_or_its_case() {
    let server = TestApp::spawn().await;
    let victim = server.client("harbour", None).await;
    let other = server.client("squatter", None).await;
    let (mine, theirs) = (
        business(&victim, "Harbour").await,
        business(&other, "Squat").await,
    );
    let cafe = site(&victim, &mine, ("harbourcafe.com", "www", "/")).await;
    assert_eq!(cafe["status"], 201, "{cafe}");
    for (address, host) in [
        (("com", "www.harbourcafe", "/"), "www.harbourcafe.com"),
        (("com", "harbourcafe", "/"), "harbourcafe.com"),
        (("harbourcafe.com", "www", "/blog/"), "www.harbourcafe.com"),
        (("HARBOURCAFE.com", "WWW", "/Blog/"), "www.harbourcafe.com"),
    ] {
        let taken = site(&other, &theirs, address).await;
        assert_eq!(taken["status"], 409, "{address:?}: {taken}");
        let message = taken["body"]["error"].as_str().unwrap_or_default();
        assert!(message.contains(host), "{message}");
    }
    // Base directories are case-folded: `/Blog/` is `/blog/`, one address.
    let blog = site(&victim, &mine, ("harbourcafe.com", "www", "/Blog/")).await;
    assert_eq!(blog["status"], 201, "{blog}");
    assert_eq!(blog["body"]["base_directory"], "/blog/");
    let again = site(&victim, &mine, ("harbourcafe.com", "www", "/BLOG")).await;
    assert_eq!(again["status"], 409, "{again}");
    // An internationalised name, in Unicode or in its xn-- form, is one host.
    let idn = site(&victim, &mine, ("Bücher.example", "www", "/")).await;
    assert_eq!(idn["status"], 201, "{idn}");
    assert_eq!(idn["body"]["domain"], "xn--bcher-kva.example");
    let punycode = site(&other, &theirs, ("xn--bcher-kva.example", "www", "/x/")).await;
    assert_eq!(punycode["status"], 409, "{punycode}");
    // Another host under the domain is the other account's to take.
    let shop = site(&other, &theirs, ("harbourcafe.com", "shop", "/")).await;
    assert_eq!(shop["status"], 201, "{shop}");
}

#[tokio::test]
async fn post_content_is_text() {
    let server = TestApp::spawn().await;
    let acme = server.client("acme", None).await;
    let owner = business(&acme, "Acme").await;
    let made = site(&acme, &owner, ("acme.test", "www", "/")).await;
    let site_id = &made["body"]["id"];
    for content in ["\u{1}", "a\u{0}b", "\u{1b}[31mred", "\u{7f}"] {
        let reply = acme
            .post(
                "/api/v2/posts/",
                &json!({"site_id": site_id, "title": "T", "content": content}),
            )
            .await
            .expect("post");
        assert_eq!(reply.status, 400, "{content:?}: {}", reply.body);
        assert!(reply.body["content"].is_array(), "{}", reply.body);
    }
    let prose = "<p>One\tTwo</p>\r\n<p>Three</p>\n";
    let reply = acme
        .post(
            "/api/v2/posts/",
            &json!({"site_id": site_id, "title": "T", "content": prose}),
        )
        .await
        .expect("post");
    assert_eq!(reply.status, 201, "{}", reply.body);
    assert_eq!(reply.body["content"], prose);
}

/// A 100 KB post costs 25 requests of budget: at 40 a minute, one is admitted and the
/// second refused with a 429 that says what it costs; a small post still fits.
#[tokio::test]
async fn posts_pay_for_what_they_store() {
    let server = TestApp::builder()
        .config(|config| config.budgets.requests_per_minute = 40)
        .spawn()
        .await;
    let acme = server.client("acme", None).await;
    let owner = business(&acme, "Acme").await;
    let made = site(&acme, &owner, ("acme.test", "www", "/")).await;
    let large = json!({"site_id": made["body"]["id"], "title": "Big",
                       "content": "x".repeat(100_000)});
    let first = acme.post("/api/v2/posts/", &large).await.expect("post");
    assert_eq!(first.status, 201, "{}", first.body);
    let second = acme.post("/api/v2/posts/", &large).await.expect("post");
    assert_eq!(second.status, 429, "{}", second.body);
    let message = second.body["error"].as_str().unwrap_or_default();
    assert!(message.contains("Storing 100003 bytes"), "{message}");
    let small = json!({"site_id": made["body"]["id"], "title": "Small", "content": "<p>x</p>"});
    let third = acme.post("/api/v2/posts/", &small).await.expect("post");
    assert_eq!(third.status, 201, "{}", third.body);
}

/// The default page of 20 of the largest posts that JSON writes longest (every byte a
/// `"`) was an 8 MB answer, over Lambda's 6 MB: a page stops before its bytes, and `next`
/// goes on from the first post not given.
#[tokio::test]
async fn a_page_of_the_largest_posts_fits_and_next_goes_on() {
    let server = TestApp::spawn().await;
    let acme = server.client("acme", None).await;
    let owner = business(&acme, "Acme").await;
    let made = site(&acme, &owner, ("acme.test", "www", "/")).await;
    let site_id = made["body"]["id"].as_i64().unwrap_or_default();
    let post = json!({"site_id": site_id, "title": "Quotes", "content": "\"".repeat(100_000)});
    for _ in 0..20 {
        let reply = acme.post("/api/v2/posts/", &post).await.expect("post");
        assert_eq!(reply.status, 201, "{}", reply.body);
    }
    let page = acme
        .get(&format!("/api/v2/posts/?site_id={site_id}"))
        .await
        .expect("list");
    assert_eq!(page.status, 200);
    let objects = page.body["objects"].as_array().map_or(0, Vec::len);
    assert_eq!(objects, 9, "{}", page.body["meta"]);
    // The limit the server applied, so `offset + meta.limit` is the next page's offset.
    assert_eq!(page.body["meta"]["limit"], 9);
    assert_eq!(
        page.body["meta"]["next"],
        format!("/api/v2/posts/?site_id={site_id}&limit=20&offset=9")
    );
    let mut seen = objects;
    let mut next = page.body["meta"]["next"].as_str().map(String::from);
    while let Some(path) = next {
        let page = acme.get(&path).await.expect("list");
        seen += page.body["objects"].as_array().map_or(0, Vec::len);
        next = page.body["meta"]["next"].as_str().map(String::from);
    }
    assert_eq!(seen, 20);
    // A client that pages by `offset += meta.limit` gets every post too.
    let (mut offset, mut seen) = (0, 0);
    while offset < 20 {
        let page = acme
            .get(&format!("/api/v2/posts/?site_id={site_id}&offset={offset}"))
            .await
            .expect("list");
        seen += page.body["objects"].as_array().map_or(0, Vec::len);
        offset += page.body["meta"]["limit"].as_u64().unwrap_or(20);
    }
    assert_eq!(seen, 20);
}

/// Decided (docs/api.md, "Businesses"): a soft delete does not cascade. The business's
/// active site stays active at its address, and the business still takes new locations,
/// sites and posts; a restore gives back exactly what was there.
#[tokio::test]
async fn a_soft_deleted_business_keeps_its_sites_and_takes_new_ones() {
    let server = TestApp::spawn().await;
    let acme = server.client("acme", None).await;
    let owner = business(&acme, "Acme").await;
    let made = site(&acme, &owner, ("acme.test", "www", "/")).await;
    let uri = owner["resource_uri"].as_str().unwrap_or_default();
    let deleted = acme
        .put(uri, &json!({"id": owner["id"], "deleted": true}))
        .await
        .expect("delete");
    assert_eq!(deleted.status, 200, "{}", deleted.body);
    let kept = acme
        .get(made["body"]["resource_uri"].as_str().unwrap_or_default())
        .await
        .expect("site");
    assert_eq!(kept.body["deleted"], false);
    let another = site(&acme, &owner, ("acme.test", "www", "/news/")).await;
    assert_eq!(another["status"], 201, "{another}");
    let location = acme
        .post(
            "/api/v2/locations/",
            &json!({"business_id": owner["id"], "location_name": "Annex",
                    "street": "1 Quay", "city": "Duluth", "state": "MN",
                    "postal_code": "55802", "country": "US"}),
        )
        .await
        .expect("location");
    assert_eq!(location.status, 201, "{}", location.body);
    let post = acme
        .post(
            "/api/v2/posts/",
            &json!({"site_id": made["body"]["id"], "title": "Still here", "content": "<p/>"}),
        )
        .await
        .expect("post");
    assert_eq!(post.status, 201, "{}", post.body);
}

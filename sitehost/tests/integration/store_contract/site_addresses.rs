//! One address, one owner (issue 45, item 6): a host belongs to one account's active sites,
//! compared whole (`www` + `harbourcafe.com` is `www.harbourcafe` + `com`; a `www` site
//! holds its bare host too), and a bare host and directory to one active site; also under
//! a burst of two accounts at one host. And a page of the largest posts stops at its bytes
//! (issue 45, item 4) and fits a Lambda response.

use serde_json::{json, Value};
use sitehost::domain::post::{NewPost, PostQuery, MAX_CONTENT_BYTES, PAGE_STORED_BYTES};
use sitehost::domain::site::{Address, SitePatch};
use sitehost::operations::listing::{page_envelope, Paging};
use sitehost::operations::posts::view;
use sitehost::store::SharedStore;
use sitehost::ApiError;

use super::fixtures::{account, DAY1, DAY2};
use super::sites::new_site;

fn at(domain: &str, subdomain: &str, base_directory: &str) -> Address {
    Address {
        domain: domain.into(),
        subdomain: subdomain.into(),
        base_directory: base_directory.into(),
    }
}

fn conflict_naming(result: Result<impl std::fmt::Debug, ApiError>, named: &str) {
    match result {
        Err(ApiError::StateConflict(message)) => {
            assert!(message.contains(named), "{message} should name {named}")
        }
        other => panic!("expected a 409 naming {named}, got {other:?}"),
    }
}

// Reads better whole: the probes in turn, then the host freed and taken again.
pub async fn a_host_belongs_to_one_accounts_active_sites(store: SharedStore) {
    let victim = account(&store, "harbour").await;
    let other = account(&store, "squatter").await;
    let cafe = store
        .create_site(
            victim,
            new_site("Cafe", at("harbourcafe.com", "www", "/")),
            DAY1,
        )
        .await
        .expect("the victim's site");
    // Another account: the same host spelled otherwise, the bare host, a directory under
    // the host; each a 409 naming the host, and nothing written.
    for (address, host) in [
        (at("com", "www.harbourcafe", "/"), "www.harbourcafe.com"),
        (at("com", "harbourcafe", "/"), "harbourcafe.com"),
        (
            at("harbourcafe.com", "www", "/blog/"),
            "www.harbourcafe.com",
        ),
        (at("com", "harbourcafe", "/menu/"), "harbourcafe.com"),
    ] {
        let taken = store
            .create_site(other, new_site("Squat", address), DAY1)
            .await;
        conflict_naming(taken, host);
    }
    // Another host under the domain is a host of its own.
    store
        .create_site(
            other,
            new_site("Shop", at("harbourcafe.com", "shop", "/")),
            DAY1,
        )
        .await
        .expect("another host");
    // The same account: another directory, yes; the bare host's root, no (the www site
    // is there).
    let blog = store
        .create_site(
            victim,
            new_site("Blog", at("com", "www.harbourcafe", "/blog/")),
            DAY1,
        )
        .await
        .expect("the owner's own directory");
    let twice = store
        .create_site(
            victim,
            new_site("Twice", at("com", "harbourcafe", "/")),
            DAY1,
        )
        .await;
    conflict_naming(twice, "harbourcafe.com/");
    // An update cannot move another account's site onto the host either.
    let shop = store
        .create_site(
            other,
            new_site("Shop 2", at("harbourcafe.com", "shop", "/two/")),
            DAY1,
        )
        .await
        .expect("a second shop");
    let onto = SitePatch {
        subdomain: Some("www".into()),
        ..Default::default()
    };
    let moved = store.update_site(other, shop.id, None, onto, DAY2).await;
    conflict_naming(moved, "www.harbourcafe.com");
    // Once the victim's sites are disabled, the host is free: another account takes it,
    // and the victim cannot enable its site again.
    for id in [cafe.id, blog.id] {
        let disable = SitePatch {
            deleted: Some(true),
            ..Default::default()
        };
        store
            .update_site(victim, id, None, disable, DAY2)
            .await
            .expect("disable");
    }
    store
        .create_site(
            other,
            new_site("Now mine", at("harbourcafe.com", "www", "/blog/")),
            DAY2,
        )
        .await
        .expect("a free host");
    let enable = SitePatch {
        deleted: Some(false),
        ..Default::default()
    };
    let back = store.update_site(victim, cafe.id, None, enable, DAY2).await;
    conflict_naming(back, "harbourcafe.com");
}

/// Of many creates by two accounts at one host at once (each at a directory of its own),
/// the sites made are all one account's.
pub async fn of_concurrent_creates_at_one_host_one_account_wins(store: SharedStore) {
    let accounts = [
        account(&store, "first").await,
        account(&store, "second").await,
    ];
    let tasks: Vec<_> = (0..12)
        .map(|i| {
            let store = store.clone();
            let owner = accounts[i % 2];
            let address = at("contested.com", "www", &format!("/d{i}/"));
            tokio::spawn(async move {
                let made = store
                    .create_site(owner, new_site(&format!("Race {i}"), address), DAY1)
                    .await;
                (owner, made)
            })
        })
        .collect();
    let mut owners = Vec::new();
    for task in tasks {
        match task.await.expect("task") {
            (owner, Ok(_)) => owners.push(owner),
            (_, Err(ApiError::StateConflict(_) | ApiError::Unavailable { .. })) => {}
            (_, Err(other)) => panic!("a create failed otherwise: {other:?}"),
        }
    }
    owners.dedup();
    assert_eq!(owners.len(), 1, "sites of both accounts at one host");
}

/// The body of a Lambda response carrying `body`, as API Gateway's payload holds it (the
/// body once more as a JSON string, in its JSON envelope).
fn lambda_payload_bytes(body: &Value) -> usize {
    json!({
        "statusCode": 200,
        "headers": {"content-type": "application/json", "etag": "\"0123456789abcdef\""},
        "multiValueHeaders": {},
        "body": body.to_string(),
        "isBase64Encoded": false,
        "cookies": []
    })
    .to_string()
    .len()
}

/// Lambda's limit on one invocation's response (cli's `RESPONSE_LIMIT_BYTES`).
const LAMBDA_RESPONSE_LIMIT: usize = 6_291_556;

/// The worst page of posts: 20 (the default page) of the largest content that JSON writes
/// longest (every byte a `"`, four bytes each in a Lambda payload). The store stops before
/// the page's bytes; the page then fits a Lambda response, and the rest follows by `next`.
pub async fn a_page_of_the_largest_posts_stops_at_its_bytes(store: SharedStore) {
    let a = account(&store, "acme").await;
    let content = "\"".repeat(MAX_CONTENT_BYTES);
    for i in 0..20 {
        let post = NewPost {
            site_id: 5,
            title: format!("Post {i}"),
            content: content.clone(),
            date: Some(DAY1 + i),
        };
        store.create_post(a, post, DAY2).await.expect("create");
    }
    let query = |limit: u64, offset: u64| PostQuery {
        site_id: 5,
        limit,
        offset,
        max_bytes: PAGE_STORED_BYTES,
    };
    let page = store.list_posts(a, &query(1000, 0)).await.expect("list");
    let fits = usize::try_from(PAGE_STORED_BYTES).unwrap_or(usize::MAX) / (MAX_CONTENT_BYTES + 7);
    assert_eq!((page.items.len(), page.total_count), (fits, 20));
    let paging = Paging {
        limit: 20,
        offset: 0,
    };
    let body = page_envelope(view::LIST_PATH, &[], paging, &page, view::post);
    let bytes = lambda_payload_bytes(&body);
    assert!(bytes < LAMBDA_RESPONSE_LIMIT, "{bytes} bytes");
    assert_eq!(
        body["meta"]["next"],
        format!("/api/v2/posts/?limit=20&offset={fits}")
    );
    // Page by page through `next`, every post once.
    let mut seen = page.items.len() as u64;
    while seen < 20 {
        let next = store.list_posts(a, &query(20, seen)).await.expect("list");
        assert!(!next.items.is_empty());
        seen += next.items.len() as u64;
    }
    assert_eq!(seen, 20);
}

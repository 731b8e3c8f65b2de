//! Sites and posts: round trips, one active site per address (also under a burst),
//! filters with exact counts, title order, tenancy, and a site's posts newest first.

use sitehost::domain::post::{NewPost, PostPatch, PostQuery, PAGE_STORED_BYTES};
use sitehost::domain::site::{
    Address, NewSite, Site, SiteFilter, SiteKeyFilter, SiteOrder, SitePatch, SiteQuery,
};
use sitehost::store::SharedStore;
use sitehost::ApiError;

use super::fixtures::{account, DAY1, DAY2};

pub(super) fn address(subdomain: &str, base_directory: &str) -> Address {
    Address {
        domain: "example.com".into(),
        subdomain: subdomain.into(),
        base_directory: base_directory.into(),
    }
}

pub(super) fn new_site(title: &str, at: Address) -> NewSite {
    NewSite {
        business_id: 10,
        user_id: 7,
        www_primary: at.subdomain == "www",
        address: at,
        title: title.into(),
        partner_site_id: None,
        partner_sub_id: None,
        partner_user_id: Some("pu-1".into()),
        theme_id: Some(449),
        published: true,
        location_ids: Vec::new(),
    }
}

async fn list(
    store: &SharedStore,
    account: i64,
    filter: SiteFilter,
    order: SiteOrder,
) -> (Vec<i64>, u64) {
    let query = SiteQuery {
        filter,
        order,
        limit: 100,
        offset: 0,
    };
    let page = store.list_sites(account, &query).await.expect("list_sites");
    (page.items.iter().map(|s| s.id).collect(), page.total_count)
}

fn key(key: SiteKeyFilter) -> SiteFilter {
    SiteFilter {
        key: Some(key),
        ..Default::default()
    }
}

async fn update(
    store: &SharedStore,
    account: i64,
    id: i64,
    patch: SitePatch,
) -> Result<Option<Site>, ApiError> {
    store.update_site(account, id, None, patch, DAY2).await
}

fn deleted(value: bool) -> SitePatch {
    SitePatch {
        deleted: Some(value),
        ..Default::default()
    }
}

// Reads better whole: one address taken, freed and taken again, each step from the last.
pub async fn an_active_site_holds_its_address_alone(store: SharedStore) {
    let a = account(&store, "acme").await;
    let b = account(&store, "other").await;
    let site = store
        .create_site(a, new_site("Harbour", address("www", "/")), DAY1)
        .await
        .expect("create_site");
    assert_eq!(
        store.get_site(a, site.id).await.ok(),
        Some(Some(site.clone()))
    );
    assert_eq!(store.get_site(b, site.id).await.ok(), Some(None));
    assert_eq!(
        (site.deleted, site.published, site.theme_id),
        (false, true, Some(449))
    );
    // One active site per address across the whole service; nothing is written.
    let taken = store
        .create_site(b, new_site("Copy", address("www", "/")), DAY1)
        .await;
    assert!(
        matches!(taken, Err(ApiError::StateConflict(_))),
        "{taken:?}"
    );
    assert_eq!(
        list(&store, b, SiteFilter::default(), SiteOrder::IdAsc).await,
        (vec![], 0)
    );
    // Another directory is another address, of the host's own account (another account's
    // site under the host is refused: site_addresses).
    let blog = store
        .create_site(a, new_site("Blog", address("www", "/blog/")), DAY1)
        .await
        .expect("another directory");
    // Disabling frees the address, and the account's last site there the host: the other
    // account takes it; enabling again is refused.
    for id in [site.id, blog.id] {
        update(&store, a, id, deleted(true)).await.expect("disable");
    }
    let moved = store
        .create_site(b, new_site("Copy", address("www", "/")), DAY2)
        .await
        .expect("the freed address");
    let again = update(&store, a, site.id, deleted(false)).await;
    assert!(
        matches!(again, Err(ApiError::StateConflict(_))),
        "{again:?}"
    );
    assert_eq!(
        store
            .get_site(a, site.id)
            .await
            .ok()
            .flatten()
            .map(|s| s.deleted),
        Some(true)
    );
    // Moving the other site away frees it for the first again.
    let away = SitePatch {
        subdomain: Some("shop".into()),
        ..Default::default()
    };
    update(&store, b, moved.id, away).await.expect("move");
    let enabled = update(&store, a, site.id, deleted(false))
        .await
        .expect("enable")
        .expect("site");
    assert!(!enabled.deleted && enabled.modified == DAY2);
    // Another account's site cannot be changed.
    assert_eq!(
        update(&store, b, site.id, deleted(true)).await.ok(),
        Some(None)
    );
    // A list without a filter shows active and disabled sites.
    let (ids, total) = list(&store, a, SiteFilter::default(), SiteOrder::IdAsc).await;
    assert_eq!((ids.len(), total), (2, 2));
    let active = SiteFilter {
        deleted: Some(false),
        ..Default::default()
    };
    assert_eq!(
        list(&store, a, active, SiteOrder::IdAsc).await,
        (vec![site.id], 1)
    );
}

// Reads better whole: one set of sites listed every way, moved between scopes, listed again.
pub async fn site_lists_follow_filters_orders_and_sub_ids(store: SharedStore) {
    let a = account(&store, "acme").await;
    let mut made = Vec::new();
    // "Éclair" sorts with the E's (collation), not after "z" as its bytes would.
    for (i, title) in ["Éclair shop", "A blog", "Fig Cafe", "a bakery"]
        .iter()
        .enumerate()
    {
        let mut new = new_site(title, address(&format!("s{i}"), "/"));
        new.business_id = if i < 2 { 10 } else { 11 };
        new.location_ids = if i % 2 == 0 {
            vec![100, 101]
        } else {
            vec![101]
        };
        new.partner_site_id = Some(format!("p{}", i % 2));
        new.partner_sub_id = (i == 3).then(|| "north".to_string());
        made.push(
            store
                .create_site(a, new, if i == 0 { DAY2 } else { DAY1 })
                .await
                .expect("create"),
        );
    }
    let id = |i: usize| made[i].id;
    let checks = [
        (key(SiteKeyFilter::Business(10)), vec![id(0), id(1)]),
        (key(SiteKeyFilter::Location(100)), vec![id(0), id(2)]),
        (
            key(SiteKeyFilter::Location(101)),
            vec![id(0), id(1), id(2), id(3)],
        ),
        (
            key(SiteKeyFilter::PartnerSiteId("p1".into())),
            vec![id(1), id(3)],
        ),
        (
            key(SiteKeyFilter::Domain("example.com".into())),
            made.iter().map(|s| s.id).collect(),
        ),
        (key(SiteKeyFilter::Address(address("s2", "/"))), vec![id(2)]),
        (
            key(SiteKeyFilter::AddedDate(sitehost::clock::utc_date(DAY2))),
            vec![id(0)],
        ),
        (
            SiteFilter {
                partner_sub_id: Some("north".into()),
                key: Some(SiteKeyFilter::Location(101)),
                ..Default::default()
            },
            vec![id(3)],
        ),
    ];
    for (filter, expected) in checks {
        let total = expected.len() as u64;
        assert_eq!(
            list(&store, a, filter.clone(), SiteOrder::IdAsc).await,
            (expected, total),
            "{filter:?}"
        );
    }
    let (by_title, _) = list(&store, a, SiteFilter::default(), SiteOrder::TitleAsc).await;
    assert_eq!(by_title, vec![id(3), id(1), id(0), id(2)]);
    let (reversed, _) = list(
        &store,
        a,
        key(SiteKeyFilter::Location(101)),
        SiteOrder::TitleDesc,
    )
    .await;
    assert_eq!(reversed, vec![id(2), id(0), id(1), id(3)]);
    // A change of locations, business and title moves the site between scopes.
    let patch = SitePatch {
        location_ids: Some(vec![102]),
        business_id: Some(11),
        title: Some("Z last".into()),
        ..Default::default()
    };
    update(&store, a, id(0), patch)
        .await
        .expect("update")
        .expect("site");
    assert_eq!(
        list(
            &store,
            a,
            key(SiteKeyFilter::Location(100)),
            SiteOrder::IdAsc
        )
        .await,
        (vec![id(2)], 1)
    );
    assert_eq!(
        list(
            &store,
            a,
            key(SiteKeyFilter::Location(102)),
            SiteOrder::IdAsc
        )
        .await,
        (vec![id(0)], 1)
    );
    assert_eq!(
        list(
            &store,
            a,
            key(SiteKeyFilter::Business(11)),
            SiteOrder::IdAsc
        )
        .await
        .1,
        3
    );
    let (by_title, _) = list(&store, a, SiteFilter::default(), SiteOrder::TitleAsc).await;
    assert_eq!(by_title.last(), Some(&id(0)));
    // A key restricted to a sub id cannot change another sub id's site.
    let hidden = store
        .update_site(a, id(0), Some("north"), deleted(true), DAY2)
        .await;
    assert_eq!(hidden.ok(), Some(None));
    // Paging past the end answers the total alone.
    let far = SiteQuery {
        filter: key(SiteKeyFilter::Location(101)),
        order: SiteOrder::IdAsc,
        limit: 2,
        offset: 5,
    };
    let page = store.list_sites(a, &far).await.expect("far page");
    assert_eq!((page.items.len(), page.total_count), (0, 3));
}

/// Of many creates at one address at once, exactly one is made.
pub async fn of_concurrent_creates_at_one_address_exactly_one_is_made(store: SharedStore) {
    let a = account(&store, "acme").await;
    let tasks: Vec<_> = (0..12)
        .map(|i| {
            let store = store.clone();
            tokio::spawn(async move {
                store
                    .create_site(a, new_site(&format!("Race {i}"), address("www", "/")), DAY1)
                    .await
            })
        })
        .collect();
    let mut made = 0;
    for task in tasks {
        match task.await.expect("task") {
            Ok(_) => made += 1,
            Err(ApiError::StateConflict(_)) => {}
            // Conflicts that outlast the retries (a loaded machine overlaps more of them)
            // are a 503 with Retry-After: nothing was made, and a retry finds the site.
            Err(ApiError::Unavailable { .. }) => {}
            Err(other) => panic!("a create failed otherwise: {other:?}"),
        }
    }
    assert_eq!(made, 1);
    assert_eq!(
        list(&store, a, SiteFilter::default(), SiteOrder::IdAsc)
            .await
            .1,
        1
    );
}

pub async fn posts_are_stored_and_listed_newest_first(store: SharedStore) {
    let a = account(&store, "acme").await;
    let b = account(&store, "other").await;
    let post = |title: &str, date: Option<i64>| NewPost {
        site_id: 5,
        title: title.into(),
        content: "<h2>Hi</h2>\n<p>é</p>".into(),
        date,
    };
    let first = store
        .create_post(a, post("First", Some(DAY1)), DAY2)
        .await
        .expect("create");
    let second = store
        .create_post(a, post("Second", None), DAY2)
        .await
        .expect("create");
    let older = store
        .create_post(a, post("Older", Some(DAY1 - 10)), DAY2)
        .await
        .expect("create");
    assert_eq!((first.date, second.date, first.added), (DAY1, DAY2, DAY2));
    assert_eq!(
        store.get_post(a, first.id).await.ok(),
        Some(Some(first.clone()))
    );
    assert_eq!(store.get_post(b, first.id).await.ok(), Some(None));
    let query = PostQuery {
        site_id: 5,
        limit: 2,
        offset: 0,
        max_bytes: PAGE_STORED_BYTES,
    };
    let page = store.list_posts(a, &query).await.expect("list");
    let ids: Vec<i64> = page.items.iter().map(|p| p.id).collect();
    assert_eq!((ids, page.total_count), (vec![second.id, first.id], 3));
    // A partial update changes only what it names; a new date reorders.
    let patch = PostPatch {
        date: Some(DAY2 + 5),
        ..Default::default()
    };
    let moved = store
        .update_post(a, older.id, patch, DAY2 + 9)
        .await
        .expect("update")
        .expect("post");
    assert_eq!(
        (moved.title.as_str(), moved.content.as_str()),
        ("Older", older.content.as_str())
    );
    assert_eq!(moved.modified, DAY2 + 9);
    let page = store.list_posts(a, &query).await.expect("list");
    assert_eq!(page.items.first().map(|p| p.id), Some(older.id));
    assert_eq!(
        store
            .update_post(b, older.id, PostPatch::default(), DAY2)
            .await
            .ok(),
        Some(None)
    );
    let none = PostQuery {
        site_id: 6,
        ..query
    };
    assert_eq!(
        store.list_posts(a, &none).await.map(|p| p.total_count).ok(),
        Some(0)
    );
}

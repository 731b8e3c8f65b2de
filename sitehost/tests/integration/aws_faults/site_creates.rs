//! Keyed site creates on DynamoDB (issue #46 items 3 and 4). A site whose transaction has
//! room writes the key's answer as its last action, so a create applied and answered 500
//! is replayed by its retry, never made twice nor refused 409 on its own address. The
//! largest `www` site is DynamoDB's 100 actions without the answer: it names itself in the
//! claim first, and the retry after a failed request answers with it if it was made.

use serde_json::json;
use sitehost::clock::{Clock, SystemClock};
use sitehost::domain::site::{Address, NewSite, MAX_SITE_LOCATIONS};
use sitehost::store::held_key::{self, Created, HeldKey};
use sitehost::store::sites::{site_write_actions, MAX_WRITE_ACTIONS};
use sitehost::store::{IdempotencyClaim, IdempotencyKey, SharedStore, StoredAnswer};

use super::applied_then_failed::{every_write_applied_then_failed, start};
use super::Aws;
use dynamo_double::Faults;

/// A keyed site create whose transaction is applied and answered 500 on every try is a
/// 503; its answer was written with it, so the retry is a replay of the one site (not a
/// 409 on the address the first try took).
#[tokio::test]
async fn a_site_create_applied_then_failed_is_a_503_and_its_retry_a_replay() {
    let Some((aws, app, key)) = start().await else {
        return;
    };
    let client = app.partner_client(&key);
    let body = json!({"business_name": "Quay"}).to_string().into_bytes();
    let business = client
        .send_with_headers("POST", "/api/v2/businesses/", Some(body), &[])
        .await
        .expect("business");
    assert_eq!(business.status, 201, "{}", business.body);
    // A first site takes a block of site ids, as a running service holds one.
    let site = |subdomain: &str, title: &str| {
        json!({"business_id": business.body["id"], "domain": "quay.test",
               "subdomain": subdomain, "base_directory": "/", "title": title})
        .to_string()
        .into_bytes()
    };
    let first = client
        .send_with_headers("POST", "/api/v2/sites/", Some(site("shop", "Shop")), &[])
        .await
        .expect("first site");
    assert_eq!(first.status, 201, "{}", first.body);

    aws.double
        .set_faults(every_write_applied_then_failed())
        .expect("faults");
    let body = site("www", "Quay");
    let headers = [("idempotency-key", "quay-site")];
    let failed = client
        .send_with_headers("POST", "/api/v2/sites/", Some(body.clone()), &headers)
        .await
        .expect("create");
    assert_eq!(failed.status, 503, "{}", failed.body);
    assert_eq!(failed.headers["retry-after"], "1");
    assert!(aws.double.stats().dynamodb_faults_after >= 1);

    aws.double.set_faults(Faults::none()).expect("no faults");
    let retried = client
        .send_with_headers("POST", "/api/v2/sites/", Some(body), &headers)
        .await
        .expect("retry");
    assert_eq!(retried.status, 201, "{}", retried.body);
    assert_eq!(retried.headers["idempotent-replayed"], "true");
    assert_eq!(retried.body["title"], "Quay");
    let listed = client.get("/api/v2/sites/").await.expect("list");
    assert_eq!(listed.body["meta"]["total_count"], 2, "{}", listed.body);
    aws.table.delete().await;
}

/// The largest `www` site: two hosts, every location, a sub id (more scopes).
fn largest_site(domain: &str) -> NewSite {
    NewSite {
        business_id: 10,
        user_id: 7,
        address: Address {
            domain: domain.into(),
            subdomain: "www".into(),
            base_directory: "/".into(),
        },
        title: "Largest".into(),
        partner_site_id: Some("p1".into()),
        partner_sub_id: Some("north".into()),
        partner_user_id: Some("pu-1".into()),
        theme_id: Some(449),
        published: true,
        www_primary: true,
        location_ids: (1..=MAX_SITE_LOCATIONS as i64).collect(),
    }
}

fn answer_of(created: Created) -> StoredAnswer {
    StoredAnswer {
        status: 201,
        created_uri: format!("/api/v2/created/{created:?}/"),
    }
}

/// One request holding `key` under `claim`: claims it, creates the site inside it, and
/// (its answer lost with the request, as when its 201 never left) releases the key.
async fn create_then_lose_the_answer(
    store: &SharedStore,
    key: &IdempotencyKey<'_>,
    claim: &str,
    site: NewSite,
) -> sitehost::error::Result<sitehost::domain::site::Site> {
    let now = SystemClock.now();
    let claimed = store
        .claim_idempotency_key(key, "fp", claim, now)
        .await
        .expect("claim");
    assert_eq!(claimed, IdempotencyClaim::Claimed);
    let held = HeldKey::new(key, "fp", claim, answer_of);
    let created = held_key::hold(held, store.create_site(key.account_id, site, now)).await;
    store
        .release_idempotency_key(key, "fp")
        .await
        .expect("release");
    created
}

#[tokio::test]
async fn the_largest_site_named_in_its_claim_answers_the_retry_after_a_lost_answer() {
    let Some(aws) = Aws::start(Faults::none()).await else {
        return;
    };
    let store = aws.direct_stores().records;
    let account = store.ensure_account("largest").await.expect("account").id;
    let now = SystemClock.now();
    let new = largest_site("largest.test");
    let actions = site_write_actions(None, &new.clone().into_site(1, account, now));
    assert_eq!(actions, MAX_WRITE_ACTIONS, "no room for the answer");

    // Made, its answer lost: the retry is answered with it at once.
    let key = IdempotencyKey {
        account_id: account,
        api_key: "k",
        value: "made",
    };
    let site = create_then_lose_the_answer(&store, &key, "first", new.clone())
        .await
        .expect("the site");
    let retried = store
        .claim_idempotency_key(&key, "fp", "second", SystemClock.now())
        .await
        .expect("claim again");
    assert_eq!(
        retried,
        IdempotencyClaim::Answered(answer_of(Created::Site(site.id)))
    );

    // Named but not made (its address is held): the retry runs again.
    let key = IdempotencyKey {
        account_id: account,
        api_key: "k",
        value: "refused",
    };
    let refused = create_then_lose_the_answer(&store, &key, "first", new).await;
    assert!(refused.is_err(), "the address is the first site's");
    let retried = store
        .claim_idempotency_key(&key, "fp", "second", SystemClock.now())
        .await
        .expect("claim again");
    assert_eq!(retried, IdempotencyClaim::Claimed);
    aws.table.delete().await;
}

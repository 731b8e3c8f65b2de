//! Authentication through a real store and key (moved from the auth module's unit tests, which
//! build without the embedded store).

use sitehost::auth::{authenticate, oauth1, Authenticated, MAX_CONSUMER_KEY_BYTES};
use sitehost::domain::account::NewKey;
use sitehost::store::Stores;
use sitehost::ApiError;

const NOW: i64 = 1_714_564_805;

/// Through `authenticate` with a real store and key: a 401, not a panic (debug builds
/// check arithmetic overflow, and the README's `cargo run` is one).
#[tokio::test]
async fn authenticate_refuses_extreme_timestamps_with_a_401() {
    let dir = tempfile::tempdir().expect("temp dir");
    let stores = Stores::embedded(dir.path()).expect("stores");
    let account = stores
        .records
        .ensure_account("acme")
        .await
        .expect("account");
    stores
        .records
        .create_key(NewKey {
            key: "extremekey".into(),
            secret: "extremesecret".into(),
            account_id: account.id,
            user_id: Some(7),
            partner_sub_id: None,
            created: NOW,
        })
        .await
        .expect("key");
    for timestamp in [i64::MIN, i64::MAX] {
        let result = signed_get(&stores, "extremekey", "extremesecret", timestamp, "n1").await;
        assert!(
            matches!(&result, Err(ApiError::Unauthorized(m)) if m.contains("oauth_timestamp")),
            "{timestamp}: {result:?}"
        );
    }
    // The same key within the window is accepted, and its nonce expires 301 s on.
    let auth = signed_get(&stores, "extremekey", "extremesecret", NOW - 5, "n2")
        .await
        .expect("accepted");
    assert_eq!(auth.nonce_expires_at, NOW - 5 + 301);
    assert_eq!(auth.caller.user_id, 7);

    // A key longer than any stored one is unknown, without a lookup.
    let long_key = "k".repeat(MAX_CONSUMER_KEY_BYTES + 1);
    let result = signed_get(&stores, &long_key, "s", NOW, "n3").await;
    assert!(
        matches!(&result, Err(ApiError::Unauthorized(m)) if m.contains("unknown")),
        "{result:?}"
    );
}

/// A GET of the business list signed with `key` and `secret` at `timestamp`, authenticated
/// at `NOW` against the store.
async fn signed_get(
    stores: &Stores,
    key: &str,
    secret: &str,
    timestamp: i64,
    nonce: &str,
) -> Result<Authenticated, ApiError> {
    let uri = "http://127.0.0.1:3000/api/v2/businesses/";
    let header = oauth1::authorization_header("GET", uri, &[], key, secret, timestamp, nonce);
    authenticate(
        stores.records.as_ref(),
        NOW,
        "GET",
        &[uri.to_string()],
        Some(&header),
        &[],
    )
    .await
}

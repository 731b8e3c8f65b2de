//! API keys (created, found, listed, revoked) and OAuth nonces (each remembered once).

use std::collections::BTreeSet;

use sitehost::domain::account::{ApiKey, NewKey};
use sitehost::store::SharedStore;

pub async fn an_account_is_ensured_once_per_name(store: SharedStore) {
    let acme = store.ensure_account("acme").await.expect("ensure");
    assert_eq!(acme.name, "acme");
    assert_eq!(
        store.ensure_account("acme").await.expect("ensure again"),
        acme
    );
    let globex = store.ensure_account("globex").await.expect("ensure");
    assert_ne!(globex.id, acme.id);
    assert_eq!(
        store.ensure_account("globex").await.expect("ensure again"),
        globex
    );
}

fn new_key(
    account_id: i64,
    key: &str,
    user_id: Option<i64>,
    sub: Option<&str>,
    created: i64,
) -> NewKey {
    NewKey {
        key: key.into(),
        secret: format!("secret-of-{key}"),
        account_id,
        user_id,
        partner_sub_id: sub.map(Into::into),
        created,
    }
}

/// Four keys of acme (the second restricted to sub id `s1`), and one of globex with a user
/// id given: (acme's id, acme's keys, globex's key).
async fn keys_of_two_accounts(store: &SharedStore) -> (i64, Vec<ApiKey>, ApiKey) {
    let acme = store.ensure_account("acme").await.expect("ensure").id;
    let globex = store.ensure_account("globex").await.expect("ensure").id;
    let mut made: Vec<ApiKey> = Vec::new();
    for (i, key) in ["key-one", "key-two", "key-three", "key-four"]
        .into_iter()
        .enumerate()
    {
        let sub = (i == 1).then_some("s1");
        made.push(
            store
                .create_key(new_key(acme, key, None, sub, 100 + i as i64))
                .await
                .expect("create_key"),
        );
    }
    let fixed = store
        .create_key(new_key(globex, "key-fixed", Some(42), None, 200))
        .await
        .expect("create_key");
    assert_eq!(fixed.user_id, 42);
    assert_eq!(fixed.account_id, globex);
    (acme, made, fixed)
}

pub async fn created_keys_are_found_with_distinct_user_ids(store: SharedStore) {
    let (acme, made, _) = keys_of_two_accounts(&store).await;
    let user_ids: BTreeSet<i64> = made.iter().map(|k| k.user_id).collect();
    assert_eq!(
        user_ids.len(),
        4,
        "allocated user ids are distinct: {user_ids:?}"
    );
    assert_eq!(
        made[1],
        ApiKey {
            key: "key-two".into(),
            secret: "secret-of-key-two".into(),
            account_id: acme,
            user_id: made[1].user_id,
            partner_sub_id: Some("s1".into()),
            revoked: false,
            created: 101,
        }
    );
    for key in &made {
        assert_eq!(
            store.get_key(&key.key).await.expect("get_key").as_ref(),
            Some(key)
        );
    }
    assert_eq!(store.get_key("no-such-key").await.expect("get_key"), None);
    assert!(
        store
            .create_key(new_key(acme, "key-one", None, None, 300))
            .await
            .is_err(),
        "keys are unique"
    );
}

fn sorted(mut keys: Vec<ApiKey>) -> Vec<ApiKey> {
    keys.sort_by(|x, y| x.key.cmp(&y.key));
    keys
}

pub async fn every_key_of_every_account_is_listed(store: SharedStore) {
    let (_, made, fixed) = keys_of_two_accounts(&store).await;
    let mut everything = made.clone();
    everything.push(fixed.clone());
    assert_eq!(
        sorted(store.list_keys().await.expect("list_keys")),
        sorted(everything.clone())
    );
}

pub async fn a_revoked_key_is_still_found_and_listed_as_revoked(store: SharedStore) {
    let (_, made, _) = keys_of_two_accounts(&store).await;
    assert!(store.revoke_key("key-two").await.expect("revoke"));
    assert!(!store.revoke_key("no-such-key").await.expect("revoke"));
    assert!(
        store.revoke_key("key-two").await.expect("revoke again"),
        "revoking twice still finds the key"
    );
    let revoked = store
        .get_key("key-two")
        .await
        .expect("get_key")
        .expect("still there");
    assert_eq!(
        revoked,
        ApiKey {
            revoked: true,
            ..made[1].clone()
        }
    );
    assert!(
        !store
            .get_key("key-one")
            .await
            .expect("get_key")
            .expect("there")
            .revoked
    );
    let listed = store.list_keys().await.expect("list_keys");
    let revoked_keys: Vec<&str> = listed
        .iter()
        .filter(|k| k.revoked)
        .map(|k| k.key.as_str())
        .collect();
    assert_eq!(revoked_keys, vec!["key-two"]);
    assert_eq!(listed.len(), 5);
}

pub async fn a_nonce_is_accepted_once_until_it_expires(store: SharedStore) {
    let remember = |key: &'static str, nonce: &'static str, now: i64, expires_at: i64| {
        let store = store.clone();
        async move {
            store
                .remember_nonce(key, nonce, now, expires_at)
                .await
                .expect("remember_nonce")
        }
    };
    assert!(remember("k1", "n1", 1000, 1300).await, "first use");
    assert!(!remember("k1", "n1", 1100, 1400).await, "replay");
    assert!(
        !remember("k1", "n1", 1300, 1600).await,
        "still remembered at expires_at"
    );
    assert!(
        remember("k1", "n1", 1301, 1601).await,
        "accepted again once expired"
    );
    assert!(
        !remember("k1", "n1", 1400, 1700).await,
        "and remembered anew"
    );
    assert!(
        remember("k2", "n1", 1400, 1700).await,
        "another key may use the same nonce"
    );
    assert!(remember("k1", "n2", 1400, 1700).await, "another nonce");
    // Separators in values cannot make two pairs collide.
    assert!(remember("k#1", "n", 1400, 1700).await);
    assert!(remember("k", "1#n", 1400, 1700).await);
    assert!(!remember("k#1", "n", 1500, 1800).await);
    let long_nonce: &'static str = Box::leak("n".repeat(3000).into_boxed_str());
    assert!(remember("k1", long_nonce, 1400, 1700).await);
    assert!(!remember("k1", long_nonce, 1500, 1800).await);
}

//! `Idempotency-Key`s: claims, answers, releases, leases and expiry, alone and at once.

use sitehost::store::IdempotencyClaim::{Answered, Claimed, InProgress, OtherRequest};
use sitehost::store::{
    IdempotencyClaim, SharedStore, StoredAnswer, IDEMPOTENCY_KEY_SECS, IDEMPOTENCY_LEASE_SECS,
};

const NOW: i64 = 1_700_000_000;

async fn claim(
    store: &SharedStore,
    account: i64,
    key: &str,
    fp: &str,
    now: i64,
) -> IdempotencyClaim {
    store
        .claim_idempotency_key(account, key, fp, now)
        .await
        .expect("claim")
}

pub async fn idempotency_keys(store: SharedStore) {
    let answer = StoredAnswer {
        status: 201,
        body: r#"{"id": 7, "business_name": "Café"}"#.into(),
        location: Some("/api/v2/businesses/7/".into()),
    };
    assert_eq!(claim(&store, 1, "k", "fp-a", NOW).await, Claimed);
    assert_eq!(claim(&store, 1, "k", "fp-a", NOW + 1).await, InProgress);
    assert_eq!(claim(&store, 1, "k", "fp-b", NOW + 1).await, OtherRequest);
    assert_eq!(
        claim(&store, 2, "k", "fp-b", NOW + 1).await,
        Claimed,
        "keys of different accounts never meet"
    );
    store
        .answer_idempotency_key(1, "k", "fp-a", &answer)
        .await
        .expect("answer");
    assert_eq!(
        claim(&store, 1, "k", "fp-a", NOW + 2).await,
        Answered(answer.clone())
    );
    assert_eq!(claim(&store, 1, "k", "fp-b", NOW + 2).await, OtherRequest);
    // A day later the key is new again.
    let later = NOW + IDEMPOTENCY_KEY_SECS + 1;
    assert_eq!(claim(&store, 1, "k", "fp-b", later).await, Claimed);

    // A failed request gives its key back; an answer without a claim changes nothing.
    assert_eq!(claim(&store, 1, "released", "fp", NOW).await, Claimed);
    store
        .release_idempotency_key(1, "released", "fp")
        .await
        .expect("release");
    assert_eq!(claim(&store, 1, "released", "fp", NOW + 1).await, Claimed);
    store
        .release_idempotency_key(1, "released", "other")
        .await
        .expect("release of another fingerprint");
    assert_eq!(
        claim(&store, 1, "released", "fp", NOW + 2).await,
        InProgress,
        "another request's release does not free the key"
    );

    // A claim whose request died (no answer, no release) holds until its lease ends.
    assert_eq!(claim(&store, 1, "lease", "fp", NOW).await, Claimed);
    let after_lease = NOW + IDEMPOTENCY_LEASE_SECS + 1;
    assert_eq!(claim(&store, 1, "lease", "fp", after_lease).await, Claimed);
    assert_eq!(
        claim(&store, 1, "lease", "fp", after_lease + 1).await,
        InProgress
    );

    // Any visible ASCII, up to 255 characters.
    let long = format!("{}\"#%", "k".repeat(252));
    assert_eq!(claim(&store, 1, &long, "fp", NOW).await, Claimed);
    assert_eq!(claim(&store, 1, &long, "fp", NOW + 1).await, InProgress);
}

/// Many requests claiming one key at once: exactly one runs.
pub async fn concurrent_idempotency_claims(store: SharedStore) {
    let claims =
        futures_util::future::join_all((0..16).map(|_| claim(&store, 3, "race", "fp", NOW))).await;
    let claimed = claims.iter().filter(|c| **c == Claimed).count();
    assert_eq!(claimed, 1, "{claims:?}");
    assert!(claims.iter().all(|c| *c == Claimed || *c == InProgress));
}

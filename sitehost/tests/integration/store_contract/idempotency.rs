//! `Idempotency-Key`s: claims, answers, releases, leases and expiry, alone and at once.

use sitehost::store::IdempotencyClaim::{Answered, Claimed, InProgress, OtherRequest};
use sitehost::store::{
    IdempotencyClaim, IdempotencyKey, SharedStore, StoredAnswer, IDEMPOTENCY_KEY_SECS,
    IDEMPOTENCY_LEASE_SECS,
};

const NOW: i64 = 1_700_000_000;
/// The API key most cases claim with.
const API_KEY: &str = "pamuJL7pb1PEYMKig4Tj";

fn key(account_id: i64, value: &str) -> IdempotencyKey<'_> {
    IdempotencyKey {
        account_id,
        api_key: API_KEY,
        value,
    }
}

/// A claim by a new request (each with a token of its own).
async fn claim(
    store: &SharedStore,
    key: &IdempotencyKey<'_>,
    fp: &str,
    now: i64,
) -> IdempotencyClaim {
    static REQUESTS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let token = REQUESTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    store
        .claim_idempotency_key(key, fp, &format!("request-{token}"), now)
        .await
        .expect("claim")
}

fn answer() -> StoredAnswer {
    StoredAnswer {
        status: 201,
        created_uri: "/api/v2/businesses/7/".into(),
    }
}

/// A claim, a second claim of another request, and more of other accounts: the first
/// request's answer is given back to it alone, for a day.
pub async fn a_key_answers_its_own_request_for_a_day(store: SharedStore) {
    let answer = answer();
    let k = key(1, "k");
    assert_eq!(claim(&store, &k, "fp-a", NOW).await, Claimed);
    assert_eq!(claim(&store, &k, "fp-a", NOW + 1).await, InProgress);
    assert_eq!(claim(&store, &k, "fp-b", NOW + 1).await, OtherRequest);
    assert_eq!(
        claim(&store, &key(2, "k"), "fp-b", NOW + 1).await,
        Claimed,
        "keys of different accounts never meet"
    );
    store
        .answer_idempotency_key(&k, "fp-a", &answer)
        .await
        .expect("answer");
    assert_eq!(
        claim(&store, &k, "fp-a", NOW + 2).await,
        Answered(answer.clone())
    );
    assert_eq!(claim(&store, &k, "fp-b", NOW + 2).await, OtherRequest);

    // A day later the key is new again.
    let later = NOW + IDEMPOTENCY_KEY_SECS + 1;
    assert_eq!(claim(&store, &k, "fp-b", later).await, Claimed);
}

/// Another API key of the same account reaches another record: not the answer, not the held
/// key, not the fingerprint.
pub async fn another_api_keys_claim_is_its_own_record(store: SharedStore) {
    let answer = answer();
    let k = key(1, "k");
    claim(&store, &k, "fp-a", NOW).await;
    store
        .answer_idempotency_key(&k, "fp-a", &answer)
        .await
        .expect("answer");
    let other_key = |api_key| IdempotencyKey {
        account_id: 1,
        api_key,
        value: "k",
    };
    assert_eq!(
        claim(&store, &other_key("other-key-1"), "fp-a", NOW + 2).await,
        Claimed,
        "another API key's key is its own"
    );
    assert_eq!(
        claim(&store, &other_key("other-key-2"), "fp-b", NOW + 2).await,
        Claimed,
        "another API key's fingerprint is not compared"
    );
    assert_eq!(
        claim(&store, &k, "fp-a", NOW + 3).await,
        Answered(answer.clone()),
        "nor does it change this key's record"
    );
}

/// No (API key, value) pair runs into another, whatever characters either has.
pub async fn no_api_key_and_value_pair_runs_into_another(store: SharedStore) {
    let split = |api_key, value| IdempotencyKey {
        account_id: 1,
        api_key,
        value,
    };
    assert_eq!(claim(&store, &split("a#b", "c"), "fp", NOW).await, Claimed);
    assert_eq!(claim(&store, &split("a", "b#c"), "fp", NOW).await, Claimed);
    assert_eq!(
        claim(&store, &split("a%23b", "c"), "fp", NOW).await,
        Claimed
    );
}

/// A failed request gives its key back; an answer without a claim changes nothing.
pub async fn a_released_key_is_claimed_anew(store: SharedStore) {
    let released = key(1, "released");
    assert_eq!(claim(&store, &released, "fp", NOW).await, Claimed);
    store
        .release_idempotency_key(&released, "fp")
        .await
        .expect("release");
    assert_eq!(claim(&store, &released, "fp", NOW + 1).await, Claimed);
    store
        .release_idempotency_key(&released, "other")
        .await
        .expect("release of another fingerprint");
    assert_eq!(
        claim(&store, &released, "fp", NOW + 2).await,
        InProgress,
        "another request's release does not free the key"
    );
}

/// A claim whose request died (no answer, no release) holds until its lease ends.
pub async fn a_dead_requests_claim_holds_until_its_lease_ends(store: SharedStore) {
    let lease = key(1, "lease");
    assert_eq!(claim(&store, &lease, "fp", NOW).await, Claimed);
    let after_lease = NOW + IDEMPOTENCY_LEASE_SECS + 1;
    assert_eq!(claim(&store, &lease, "fp", after_lease).await, Claimed);
    assert_eq!(
        claim(&store, &lease, "fp", after_lease + 1).await,
        InProgress
    );
}

/// Any visible ASCII, up to 255 characters.
pub async fn a_key_may_be_any_visible_ascii_up_to_255_characters(store: SharedStore) {
    let long = format!("{}\"#%", "k".repeat(252));
    assert_eq!(claim(&store, &key(1, &long), "fp", NOW).await, Claimed);
    assert_eq!(
        claim(&store, &key(1, &long), "fp", NOW + 1).await,
        InProgress
    );
}

/// Many requests claiming one key at once: exactly one runs.
pub async fn of_concurrent_claims_of_one_key_exactly_one_runs(store: SharedStore) {
    let race = key(3, "race");
    let claims =
        futures_util::future::join_all((0..16).map(|_| claim(&store, &race, "fp", NOW))).await;
    let claimed = claims.iter().filter(|c| **c == Claimed).count();
    assert_eq!(claimed, 1, "{claims:?}");
    assert!(claims.iter().all(|c| *c == Claimed || *c == InProgress));
}

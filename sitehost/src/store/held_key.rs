//! The `Idempotency-Key` a request holds while it runs, for the store's create to write the
//! key's answer in its own transaction: a key can then never run twice, whatever fails
//! between the change and its answer (docs/dynamodb-design.md, "Idempotency keys").
//!
//! The API claims the key, then runs the operation inside [`hold`]; a store's create asks
//! [`held`] and, when a key is held and not answered yet, adds the answer to its write,
//! conditioned on the claim still being this request's (a claim taken over after its lease
//! ended makes the create fail rather than run twice). It calls
//! [`HeldKey::mark_answered`] once that write committed, so the API does not write the
//! answer again. A store or create that does not take part leaves the answer to the API,
//! which writes it after the change, as before.
//!
//! A task-local rather than a parameter: the key belongs to the HTTP request, not to any
//! operation or record type, and it passes through the operations unchanged.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::{IdempotencyKey, StoredAnswer};

/// What a create made, as its answer names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Created {
    Business(i64),
    Image(i64),
    Location(i64),
    Site(i64),
    Post(i64),
}

/// An `Idempotency-Key` claimed by the running request.
#[derive(Debug, Clone)]
pub struct HeldKey {
    pub account_id: i64,
    pub api_key: String,
    pub value: String,
    /// The request's fingerprint (operation and body).
    pub fingerprint: String,
    /// The token the claim was written with: the answer is written only while the claim
    /// is still this one.
    pub claim: String,
    /// The answer of a create: its status and `Location` (the API's route table makes it).
    pub answer_of: fn(Created) -> StoredAnswer,
    answered: Arc<AtomicBool>,
}

impl HeldKey {
    pub fn new(
        key: &IdempotencyKey<'_>,
        fingerprint: &str,
        claim: &str,
        answer_of: fn(Created) -> StoredAnswer,
    ) -> HeldKey {
        HeldKey {
            account_id: key.account_id,
            api_key: key.api_key.to_string(),
            value: key.value.to_string(),
            fingerprint: fingerprint.to_string(),
            claim: claim.to_string(),
            answer_of,
            answered: Arc::new(AtomicBool::new(false)),
        }
    }

    pub fn key(&self) -> IdempotencyKey<'_> {
        IdempotencyKey {
            account_id: self.account_id,
            api_key: &self.api_key,
            value: &self.value,
        }
    }

    /// The store wrote the answer with the change, and the change committed.
    pub fn mark_answered(&self) {
        self.answered.store(true, Ordering::SeqCst);
    }

    /// Whether a store wrote the answer with the change (in this request).
    pub fn answered(&self) -> bool {
        self.answered.load(Ordering::SeqCst)
    }
}

tokio::task_local! {
    static HELD: HeldKey;
}

/// Runs `operation` holding `key`: the store's creates inside it may write its answer.
pub async fn hold<F: Future>(key: HeldKey, operation: F) -> F::Output {
    HELD.scope(key, operation).await
}

/// The key the running request holds and has not answered yet, if any: a create takes it
/// to write the answer with its change. A request answers its key once, so a second create
/// in the same request does not take it.
pub fn held() -> Option<HeldKey> {
    HELD.try_with(Clone::clone)
        .ok()
        .filter(|key| !key.answered())
}

//! What uploads may hold at once in one process, each slot taken only for the stage it
//! bounds, after authentication and budgets:
//! - **fetches** of `external_url`s: a fetch waits on a remote host (up to the fetch
//!   timeout) and holds up to the fetch size limit, so there are at most `max_fetches` at
//!   once, and one account holds at most a quarter of them;
//! - **pipeline runs** (decode, resize, encode): CPU and memory bound, so at most
//!   `max_uploads` at once; a few more may wait for one, up to `upload_wait`.
//!
//! A slow host named by one key then holds that key's fetch slots only: another account's
//! upload still fetches and runs. On Lambda an instance serves one request at a time, so
//! none of these bind there (see docs/deploy.md for what one key can hold).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::config::ServerLimits;
use crate::error::{ApiError, Result};

/// What a refused upload is told to wait before trying again.
const UPLOAD_RETRY_AFTER_SECS: u64 = 2;

/// How many uploads may wait for a pipeline slot per slot: each waiting upload holds its
/// image in memory, so the queue is bounded too and past it the answer is at once.
const WAITERS_PER_SLOT: usize = 4;

/// One account may hold this share of the fetch slots (at least one).
const FETCH_SHARE_PER_ACCOUNT: usize = 4;

#[derive(Default)]
struct Fetching {
    total: usize,
    by_account: HashMap<i64, usize>,
}

pub struct UploadSlots {
    fetching: Mutex<Fetching>,
    max_fetches: usize,
    max_fetches_per_account: usize,
    runs: Arc<Semaphore>,
    /// Runs admitted at all, running or waiting.
    queue: Arc<Semaphore>,
    max_runs: usize,
    run_wait: Duration,
}

/// A fetch slot, given back when dropped.
pub struct FetchSlot<'a> {
    slots: &'a UploadSlots,
    account_id: i64,
}

impl Drop for FetchSlot<'_> {
    fn drop(&mut self) {
        let mut fetching = self.slots.lock();
        fetching.total = fetching.total.saturating_sub(1);
        if let Some(count) = fetching.by_account.get_mut(&self.account_id) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                fetching.by_account.remove(&self.account_id);
            }
        }
    }
}

/// A pipeline slot and its place in the queue, given back when dropped.
pub struct RunSlot {
    _queued: OwnedSemaphorePermit,
    _running: OwnedSemaphorePermit,
}

impl UploadSlots {
    pub fn new(limits: &ServerLimits) -> Self {
        let max_runs = limits.max_uploads.max(1);
        let max_fetches = limits.max_fetches.max(1);
        UploadSlots {
            fetching: Mutex::default(),
            max_fetches,
            max_fetches_per_account: (max_fetches / FETCH_SHARE_PER_ACCOUNT).max(1),
            runs: Arc::new(Semaphore::new(max_runs)),
            queue: Arc::new(Semaphore::new(
                max_runs
                    .saturating_mul(1 + WAITERS_PER_SLOT)
                    .min(Semaphore::MAX_PERMITS),
            )),
            max_runs,
            run_wait: limits.upload_wait,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Fetching> {
        // The lock guards plain counters, consistent even after a panic elsewhere.
        self.fetching.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A slot for one fetch, at once or not at all: 429 when the account holds its share
    /// (it waits for its own fetches), 503 when every slot is taken.
    pub fn fetch(&self, account_id: i64, fetch_timeout: Duration) -> Result<FetchSlot<'_>> {
        let mut fetching = self.lock();
        let held = fetching.by_account.get(&account_id).copied().unwrap_or(0);
        if held >= self.max_fetches_per_account {
            return Err(ApiError::TooManyRequests {
                message: format!(
                    "This account has {held} image fetches in progress, as many as it may; \
                     retry when one has ended."
                ),
                retry_after_secs: fetch_timeout.as_secs().max(1),
            });
        }
        if fetching.total >= self.max_fetches {
            tracing::warn!(
                max_fetches = self.max_fetches,
                "image upload refused: every fetch slot is busy"
            );
            return Err(ApiError::Unavailable {
                message: format!(
                    "The server is fetching as many images as it allows ({}); retry in a \
                     moment.",
                    self.max_fetches
                ),
                retry_after_secs: UPLOAD_RETRY_AFTER_SECS,
            });
        }
        fetching.total += 1;
        *fetching.by_account.entry(account_id).or_default() += 1;
        Ok(FetchSlot {
            slots: self,
            account_id,
        })
    }

    /// A slot for one pipeline run, waiting at most `upload_wait`; refused at once when the
    /// queue is full.
    pub async fn run(&self) -> Result<RunSlot> {
        let queued = Arc::clone(&self.queue).try_acquire_owned();
        let slot = match queued {
            Ok(queued) => {
                tokio::time::timeout(self.run_wait, Arc::clone(&self.runs).acquire_owned())
                    .await
                    .ok()
                    .and_then(Result::ok)
                    .map(|running| RunSlot {
                        _queued: queued,
                        _running: running,
                    })
            }
            Err(_) => None,
        };
        // None: timed out, or the queue is full (the semaphores are never closed).
        slot.ok_or_else(|| {
            tracing::warn!(
                max_uploads = self.max_runs,
                "image upload refused: every upload slot stayed busy"
            );
            ApiError::Unavailable {
                message: format!(
                    "The server is processing as many image uploads as it allows ({}); \
                     retry in a moment.",
                    self.max_runs
                ),
                retry_after_secs: UPLOAD_RETRY_AFTER_SECS,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slots(max_fetches: usize, max_uploads: usize) -> UploadSlots {
        UploadSlots::new(&ServerLimits {
            max_fetches,
            max_uploads,
            upload_wait: Duration::from_millis(50),
            ..ServerLimits::default()
        })
    }

    #[test]
    fn one_account_holds_at_most_a_quarter_of_the_fetch_slots() {
        let slots = slots(8, 1);
        let timeout = Duration::from_secs(15);
        let first = slots.fetch(1, timeout).expect("first");
        let _second = slots.fetch(1, timeout).expect("second");
        let third = slots.fetch(1, timeout);
        assert!(
            matches!(
                third,
                Err(ApiError::TooManyRequests {
                    retry_after_secs: 15,
                    ..
                })
            ),
            "the account's third fetch waits for its own"
        );
        let others: Vec<_> = (2..=7)
            .map(|account| slots.fetch(account, timeout))
            .collect();
        assert!(
            others.iter().all(Result::is_ok),
            "other accounts still fetch"
        );
        assert!(matches!(
            slots.fetch(9, timeout),
            Err(ApiError::Unavailable { .. })
        ));
        drop(first);
        assert!(slots.fetch(1, timeout).is_ok(), "a slot given back is free");
        drop(others);
        assert_eq!(slots.lock().total, 1, "only the second fetch is held");
    }

    #[tokio::test]
    async fn runs_wait_briefly_for_a_slot_and_the_queue_is_bounded() {
        let slots = slots(4, 1);
        let running = slots.run().await.expect("a slot");
        assert!(
            matches!(slots.run().await, Err(ApiError::Unavailable { .. })),
            "waited 50 ms, then refused"
        );
        drop(running);
        assert!(slots.run().await.is_ok());
    }
}

//! Request budgets of the embedded store: counters in memory.
//!
//! One `sitehost serve` owns a data directory (the nonce memory's lock sees to that), so
//! the counters of the current minute can live in its memory: a map lookup under a mutex
//! per request, where a SQLite write would cost more than the request itself. A restart
//! forgets the current minute's counts, which gives a key at most one extra minute's
//! budget. The map holds only keys that made a request in the current window: entries of
//! earlier windows are dropped when a new window starts.

use std::collections::HashMap;
use std::sync::Mutex;

use async_trait::async_trait;

use super::SqliteStore;
use crate::error::Result;
use crate::store::{budget_window, BudgetDecision, BudgetKind, BudgetStore};

/// What one key has spent in one window.
#[derive(Debug, Clone, Copy)]
struct Spent {
    window: i64,
    requests: u64,
    uploads: u64,
}

impl Spent {
    fn count(&mut self, kind: BudgetKind) -> &mut u64 {
        match kind {
            BudgetKind::Requests => &mut self.requests,
            BudgetKind::Uploads => &mut self.uploads,
        }
    }
}

#[derive(Default)]
struct Windows {
    by_key: HashMap<String, Spent>,
    /// The newest window seen; entries of older ones have been dropped.
    newest: i64,
}

#[derive(Default)]
pub(super) struct BudgetCounters {
    windows: Mutex<Windows>,
}

impl BudgetCounters {
    pub(super) fn consume(
        &self,
        key: &str,
        kind: BudgetKind,
        limit: u64,
        tokens: u64,
        now: i64,
    ) -> BudgetDecision {
        let (window, _) = budget_window(now);
        // The lock guards plain counters, consistent even after a panic elsewhere.
        let mut windows = self.windows.lock().unwrap_or_else(|p| p.into_inner());
        if window > windows.newest {
            windows.newest = window;
            windows.by_key.retain(|_, spent| spent.window >= window);
        }
        let fresh = Spent {
            window,
            requests: 0,
            uploads: 0,
        };
        let spent = match windows.by_key.get_mut(key) {
            Some(spent) => spent,
            None => windows.by_key.entry(key.to_string()).or_insert(fresh),
        };
        if spent.window < window {
            *spent = fresh;
        }
        // A request that read the clock just before a new window began counts in the new
        // one (spent.window > window): never more than `limit` in any window.
        let retry_after = (spent.window + crate::store::BUDGET_WINDOW_SECS - now).max(1) as u64;
        let count = spent.count(kind);
        // All the tokens or none: a refused large draw leaves the rest for small ones.
        if count.saturating_add(tokens) <= limit {
            *count += tokens;
            BudgetDecision::Admitted
        } else {
            BudgetDecision::Refused { retry_after }
        }
    }
}

#[async_trait]
impl BudgetStore for SqliteStore {
    async fn consume_budget(
        &self,
        key: &str,
        kind: BudgetKind,
        limit: u64,
        tokens: u64,
        now: i64,
    ) -> Result<BudgetDecision> {
        Ok(self.budgets.consume(key, kind, limit, tokens, now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn old_windows_are_dropped_when_a_new_one_starts() {
        let counters = BudgetCounters::default();
        for key in ["a", "b", "c"] {
            assert_eq!(
                counters.consume(key, BudgetKind::Requests, 1, 1, 600),
                BudgetDecision::Admitted
            );
        }
        assert_eq!(counters.windows.lock().expect("lock").by_key.len(), 3);
        assert_eq!(
            counters.consume("a", BudgetKind::Requests, 1, 1, 660),
            BudgetDecision::Admitted
        );
        assert_eq!(counters.windows.lock().expect("lock").by_key.len(), 1);
    }

    #[test]
    fn a_late_request_counts_in_the_newer_window() {
        let counters = BudgetCounters::default();
        assert_eq!(
            counters.consume("a", BudgetKind::Uploads, 1, 1, 660),
            BudgetDecision::Admitted
        );
        assert_eq!(
            counters.consume("a", BudgetKind::Uploads, 1, 1, 659),
            BudgetDecision::Refused { retry_after: 61 }
        );
    }
}

//! Per-key budgets as the API draws on them, after a request's nonce has proven it fresh:
//! every request against the request budget, an upload against the upload budget as well.
//!
//! A refusal is remembered in this process until its window ends, so every later request of
//! that key and kind in the window is refused at once: no nonce is recorded and no store is
//! called for it. What a key's refused requests cost the stores is then O(1) per key, kind,
//! window and process (one nonce, one budget draw), however fast they come.

use std::collections::HashSet;
use std::sync::Mutex;

use crate::api::Operation;
use crate::auth::Authenticated;
use crate::config::{RequestBudgets, STORED_BYTES_PER_REQUEST, WRITE_UNITS_PER_REQUEST};
use crate::error::{ApiError, Result};
use crate::operations::WriteBudget;
use crate::store::{budget_window, BudgetDecision, BudgetKind, BudgetStore};

/// The keys and kinds this process saw refused in the current window.
#[derive(Default)]
struct Refused {
    window: i64,
    spent: HashSet<(String, BudgetKind)>,
}

/// What [`crate::api::admission`] knows of budgets beyond the store: which are spent this
/// minute. Holds at most one entry per key refused in the current window.
#[derive(Default)]
pub struct Budgets {
    refused: Mutex<Refused>,
}

/// The budgets a request of `operation` draws on, with their limits (0 = unlimited).
fn drawn(settings: RequestBudgets, operation: Operation) -> [(BudgetKind, u64); 2] {
    // A staged upload's session counts as an upload too, so sessions cannot be minted
    // without end (its create counts once more).
    let uploads = if matches!(
        operation,
        Operation::ImageUpload | Operation::ImageUploadSession
    ) {
        settings.uploads_per_minute
    } else {
        0
    };
    // The narrower budget first: an upload refused by both is told about uploads.
    [
        (BudgetKind::Uploads, uploads),
        (BudgetKind::Requests, settings.requests_per_minute),
    ]
}

fn over_budget(kind: BudgetKind, limit: u64, retry_after: u64) -> ApiError {
    let what = match kind {
        BudgetKind::Requests => "requests",
        BudgetKind::Uploads => "image uploads",
    };
    ApiError::TooManyRequests {
        message: format!(
            "This key is over its budget of {limit} {what} a minute; retry after {retry_after} \
             seconds."
        ),
        retry_after_secs: retry_after,
    }
}

impl Budgets {
    /// A 429 for a request whose budget this process already saw spent in the current
    /// window; costs a lock and a hash lookup, and records nothing.
    pub fn refuse_if_spent(
        &self,
        settings: RequestBudgets,
        key: &str,
        operation: Operation,
        now: i64,
    ) -> Result<()> {
        let (window, retry_after) = budget_window(now);
        // The lock guards a plain set, consistent even after a panic elsewhere.
        let refused = self.refused.lock().unwrap_or_else(|p| p.into_inner());
        if refused.window != window {
            return Ok(());
        }
        for (kind, limit) in drawn(settings, operation) {
            if limit > 0 && refused.spent.contains(&(key.to_string(), kind)) {
                return Err(over_budget(kind, limit, retry_after));
            }
        }
        Ok(())
    }

    /// Counts the request against its key's budgets (both at once for an upload). A budget
    /// of 0 is unlimited and costs nothing. Over either budget is a 429, remembered for the
    /// rest of the window.
    pub async fn draw(
        &self,
        store: &dyn BudgetStore,
        settings: RequestBudgets,
        auth: &Authenticated,
        operation: Operation,
        now: i64,
    ) -> Result<()> {
        let [(first, first_limit), (second, second_limit)] = drawn(settings, operation);
        let draw = |kind: BudgetKind, limit: u64| async move {
            if limit == 0 {
                return Ok(BudgetDecision::Admitted);
            }
            store.consume_budget(&auth.key, kind, limit, 1, now).await
        };
        let decisions = tokio::try_join!(draw(first, first_limit), draw(second, second_limit))?;
        for (kind, limit, decision) in [
            (first, first_limit, decisions.0),
            (second, second_limit, decisions.1),
        ] {
            if let BudgetDecision::Refused { retry_after } = decision {
                tracing::info!(
                    account_id = auth.caller.account_id,
                    budget = kind.name(),
                    limit,
                    retry_after,
                    "request over budget"
                );
                self.remember_spent(&auth.key, kind, now);
                return Err(over_budget(kind, limit, retry_after));
            }
        }
        Ok(())
    }

    fn remember_spent(&self, key: &str, kind: BudgetKind, now: i64) {
        let (window, _) = budget_window(now);
        let mut refused = self.refused.lock().unwrap_or_else(|p| p.into_inner());
        if refused.window < window {
            *refused = Refused {
                window,
                spent: HashSet::new(),
            };
        }
        if refused.window == window {
            refused.spent.insert((key.to_string(), kind));
        }
    }
}

/// The requests' worth a write storing `bytes` pays beyond the request itself: one per
/// started [`STORED_BYTES_PER_REQUEST`] past the first. At most the rest of a minute's
/// `limit`, so that every write fits a fresh window.
pub fn stored_cost(bytes: u64, limit: u64) -> u64 {
    extra_requests(bytes, STORED_BYTES_PER_REQUEST, limit)
}

/// The requests' worth a write that may use `units` DynamoDB write units pays beyond the
/// request itself: one per started [`WRITE_UNITS_PER_REQUEST`] past the first, at most the
/// rest of a minute's `limit`.
pub fn write_units_cost(units: u64, limit: u64) -> u64 {
    extra_requests(units, WRITE_UNITS_PER_REQUEST, limit)
}

fn extra_requests(amount: u64, per_request: u64, limit: u64) -> u64 {
    amount
        .div_ceil(per_request)
        .saturating_sub(1)
        .min(limit.saturating_sub(1))
}

/// One admitted request's key budget, as its write draws on it for what it stores. A
/// refusal here is not remembered as a spent budget: smaller requests may still fit.
pub struct KeyWrites<'a> {
    pub store: &'a dyn BudgetStore,
    pub settings: RequestBudgets,
    pub auth: &'a Authenticated,
    pub now: i64,
}

impl KeyWrites<'_> {
    /// Draws `tokens` more requests for a write, or refuses it with a 429 that says what
    /// the write costs (`cost`, a phrase such as "Storing 9000 bytes").
    async fn draw_extra(&self, tokens: u64, cost: &str) -> Result<()> {
        let limit = self.settings.requests_per_minute;
        if limit == 0 || tokens == 0 {
            return Ok(());
        }
        let decision = self
            .store
            .consume_budget(
                &self.auth.key,
                BudgetKind::Requests,
                limit,
                tokens,
                self.now,
            )
            .await?;
        match decision {
            BudgetDecision::Admitted => Ok(()),
            BudgetDecision::Refused { retry_after } => {
                tracing::info!(
                    account_id = self.auth.caller.account_id,
                    tokens,
                    limit,
                    retry_after,
                    "write over budget"
                );
                Err(ApiError::TooManyRequests {
                    message: format!(
                        "{cost} costs {tokens} more requests than this key has left of its \
                         budget of {limit} requests a minute; retry after {retry_after} \
                         seconds."
                    ),
                    retry_after_secs: retry_after,
                })
            }
        }
    }
}

#[async_trait::async_trait]
impl WriteBudget for KeyWrites<'_> {
    async fn pay_for_stored(&self, bytes: u64) -> Result<()> {
        let tokens = stored_cost(bytes, self.settings.requests_per_minute);
        let cost = format!("Storing {bytes} bytes (one request per started 4 KB past the first)");
        self.draw_extra(tokens, &cost).await
    }

    async fn pay_for_write_units(&self, units: u64) -> Result<()> {
        let tokens = write_units_cost(units, self.settings.requests_per_minute);
        let cost = format!(
            "This write, up to {units} DynamoDB write units (one request per started \
             {WRITE_UNITS_PER_REQUEST} past the first),"
        );
        self.draw_extra(tokens, &cost).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: RequestBudgets = RequestBudgets {
        requests_per_minute: 10,
        uploads_per_minute: 2,
    };

    #[test]
    fn a_spent_budget_refuses_until_its_window_ends_and_forgets_older_windows() {
        let budgets = Budgets::default();
        budgets.remember_spent("k", BudgetKind::Uploads, 600);
        let refused = budgets.refuse_if_spent(LIMITS, "k", Operation::ImageUpload, 659);
        assert!(
            matches!(
                refused,
                Err(ApiError::TooManyRequests {
                    retry_after_secs: 1,
                    ..
                })
            ),
            "{refused:?}"
        );
        // Other operations, other keys and the next window are not refused.
        assert!(budgets
            .refuse_if_spent(LIMITS, "k", Operation::ImageList, 630)
            .is_ok());
        assert!(budgets
            .refuse_if_spent(LIMITS, "other", Operation::ImageUpload, 630)
            .is_ok());
        assert!(budgets
            .refuse_if_spent(LIMITS, "k", Operation::ImageUpload, 660)
            .is_ok());
        budgets.remember_spent("k2", BudgetKind::Requests, 660);
        let refused = budgets.refused.lock().expect("lock");
        assert_eq!(refused.window, 660);
        assert_eq!(refused.spent.len(), 1, "the older window's entry is gone");
    }

    #[test]
    fn a_write_pays_one_request_per_started_4_kb_past_the_first_at_most_a_minute() {
        assert_eq!(stored_cost(0, 1_200), 0);
        assert_eq!(stored_cost(4_096, 1_200), 0);
        assert_eq!(stored_cost(4_097, 1_200), 1);
        assert_eq!(stored_cost(251_000, 1_200), 61);
        assert_eq!(
            stored_cost(251_000, 10),
            9,
            "never more than a fresh minute holds"
        );
        assert_eq!(stored_cost(251_000, 0), 0);
        assert_eq!(write_units_cost(100, 1_200), 0);
        assert_eq!(write_units_cost(101, 1_200), 1);
        assert_eq!(write_units_cost(650, 1_200), 6);
    }

    #[test]
    fn an_unlimited_budget_is_never_refused() {
        let budgets = Budgets::default();
        budgets.remember_spent("k", BudgetKind::Requests, 600);
        let unlimited = RequestBudgets {
            requests_per_minute: 0,
            uploads_per_minute: 0,
        };
        assert!(budgets
            .refuse_if_spent(unlimited, "k", Operation::BusinessList, 601)
            .is_ok());
    }
}

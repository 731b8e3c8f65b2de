//! Request budgets: one counter item per key, kind and one-minute window.

use async_trait::async_trait;

use super::items;
use super::DynamoStore;
use crate::error::Result;
use crate::store::{budget_window, BudgetDecision, BudgetKind, BudgetStore, BUDGET_WINDOW_SECS};

#[async_trait]
impl BudgetStore for DynamoStore {
    /// One `UpdateItem ADD n :1` on the window's counter, answering the new count: the
    /// request is admitted when it is within the limit. Every call counts, refused ones
    /// too; nothing reads the count but the calls of the same window. TTL removes the item
    /// a window after its own ends.
    async fn consume_budget(
        &self,
        key: &str,
        kind: BudgetKind,
        limit: u64,
        now: i64,
    ) -> Result<BudgetDecision> {
        let (window, retry_after) = budget_window(now);
        let count = self
            .add_to_counter(
                "budget",
                items::budget_key(key, kind.name(), window),
                1,
                Some(window + 2 * BUDGET_WINDOW_SECS),
            )
            .await?;
        Ok(if u64::try_from(count).is_ok_and(|count| count <= limit) {
            BudgetDecision::Admitted
        } else {
            BudgetDecision::Refused { retry_after }
        })
    }
}

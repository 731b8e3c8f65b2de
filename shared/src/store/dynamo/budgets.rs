//! Request budgets: one counter item per key, kind and one-minute window.

use std::collections::HashMap;

use async_trait::async_trait;
use aws_sdk_dynamodb::types::{ReturnConsumedCapacity, ReturnValue};

use super::items::{self, get_n, n};
use super::{aws_error, log_capacity, DynamoStore};
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
        let out = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(items::budget_key(key, kind.name(), window)))
            .update_expression("ADD #n :one SET #e = :expires")
            .expression_attribute_names("#n", "n")
            .expression_attribute_names("#e", "expires_at")
            .expression_attribute_values(":one", n(1))
            .expression_attribute_values(":expires", n(window + 2 * BUDGET_WINDOW_SECS))
            .return_values(ReturnValue::UpdatedNew)
            .return_consumed_capacity(ReturnConsumedCapacity::Total)
            .send()
            .await
            .map_err(|e| aws_error("UpdateItem (budget)", e))?;
        log_capacity("UpdateItem", out.consumed_capacity());
        let count: i64 = get_n(out.attributes().unwrap_or(&HashMap::new()), "n")?;
        Ok(if u64::try_from(count).is_ok_and(|count| count <= limit) {
            BudgetDecision::Admitted
        } else {
            BudgetDecision::Refused { retry_after }
        })
    }
}

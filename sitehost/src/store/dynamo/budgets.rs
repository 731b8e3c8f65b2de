//! Request budgets: one counter item per key, kind and one-minute window, drawn on in
//! chunks when the budget is large.

use std::collections::HashMap;
use std::sync::Mutex;

use async_trait::async_trait;

use aws_sdk_dynamodb::types::ReturnConsumedCapacity;

use super::items;
use super::{conditional, log_capacity, DynamoStore};
use crate::error::Result;
use crate::store::{budget_window, BudgetDecision, BudgetKind, BudgetStore, BUDGET_WINDOW_SECS};

/// A chunk is at most this share of the limit (1/1000), so the tokens an instance takes and
/// never uses leave at most 0.1% of a window's budget unused per instance. Budgets under
/// 2,000 a minute draw one token a call, as before.
const CHUNK_SHARE_OF_LIMIT: u64 = 1_000;
/// The largest chunk. One key at 1,000 requests a second then writes its budget item about
/// 10 times a second, far under the 1,000 a second one item takes.
const MAX_CHUNK: u64 = 100;

/// Tokens this instance took from the shared budget of one key, kind and window and has not
/// handed out yet.
#[derive(Debug, Default)]
pub struct Tokens {
    left: u64,
    /// The size of this instance's next chunk: 1 at first, doubling with each chunk taken
    /// in the window, so an instance that sends little takes little.
    next_chunk: u64,
}

/// The tokens of every (key, kind, window) this instance holds; only the current window's
/// are kept.
pub type TokenCache = Mutex<HashMap<(String, BudgetKind, i64), Tokens>>;

fn chunk_cap(limit: u64) -> u64 {
    (limit / CHUNK_SHARE_OF_LIMIT).clamp(1, MAX_CHUNK)
}

#[async_trait]
impl BudgetStore for DynamoStore {
    /// Tokens held by this instance admit the request at once. Otherwise one token is drawn
    /// as before: one `UpdateItem ADD n :chunk` on the window's counter takes a chunk,
    /// answering the new count, and the tokens granted are those of the chunk still within
    /// the limit (refused calls count too: the window is spent). A draw of several tokens
    /// (what a write pays for its bytes) uses those this instance holds and adds the rest
    /// with a condition that the count stays within the limit: all or nothing, so a refused
    /// large draw leaves the window's rest to small ones. Every instance's grants together
    /// never exceed the limit. TTL removes the item a window after its own ends.
    async fn consume_budget(
        &self,
        key: &str,
        kind: BudgetKind,
        limit: u64,
        tokens: u64,
        now: i64,
    ) -> Result<BudgetDecision> {
        let (window, retry_after) = budget_window(now);
        let slot = (key.to_string(), kind, window);
        let tokens = tokens.clamp(1, limit.max(1));
        let (held, chunk) = {
            // The lock only guards plain data; a poisoned one is still consistent.
            let mut cache = self.budget_tokens.lock().unwrap_or_else(|p| p.into_inner());
            cache.retain(|(_, _, w), _| *w >= window);
            let entry = cache.entry(slot.clone()).or_default();
            if entry.left >= tokens {
                entry.left -= tokens;
                return Ok(BudgetDecision::Admitted);
            }
            let chunk = entry.next_chunk.clamp(1, chunk_cap(limit));
            if tokens == 1 {
                entry.next_chunk = chunk.saturating_mul(2);
            }
            (std::mem::take(&mut entry.left), chunk)
        };
        let counter = items::budget_key(key, kind.name(), window);
        let expires = window + 2 * BUDGET_WINDOW_SECS;
        let (admitted, keep) = if tokens == 1 {
            let count = self
                .add_to_counter("budget", counter, to_i64(chunk), Some(expires))
                .await?;
            let before = u64::try_from(count).unwrap_or(0).saturating_sub(chunk);
            let granted = limit.saturating_sub(before).min(chunk);
            (granted > 0, granted.saturating_sub(1))
        } else {
            let need = tokens - held;
            let added = self.add_within_limit(counter, need, limit, expires).await?;
            // Refused, the tokens this instance held stay with it.
            if added {
                (true, 0)
            } else {
                (false, held)
            }
        };
        let mut cache = self.budget_tokens.lock().unwrap_or_else(|p| p.into_inner());
        cache.entry(slot).or_default().left += keep;
        Ok(if admitted {
            BudgetDecision::Admitted
        } else {
            BudgetDecision::Refused { retry_after }
        })
    }
}

fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl DynamoStore {
    /// `ADD n :amount` on a budget counter if the count stays within `limit`; whether it
    /// did. A failed condition writes nothing (and costs one write unit).
    async fn add_within_limit(
        &self,
        counter: items::Item,
        amount: u64,
        limit: u64,
        expires_at: i64,
    ) -> Result<bool> {
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(counter))
            .update_expression("ADD #n :amount SET #e = :expires")
            .condition_expression("attribute_not_exists(#n) OR #n <= :most")
            .expression_attribute_names("#n", "n")
            .expression_attribute_names("#e", "expires_at")
            .expression_attribute_values(":amount", items::n(to_i64(amount)))
            .expression_attribute_values(":most", items::n(to_i64(limit.saturating_sub(amount))))
            .expression_attribute_values(":expires", items::n(expires_at))
            .return_consumed_capacity(ReturnConsumedCapacity::Total)
            .send()
            .await;
        let out = conditional("UpdateItem (budget)", result)?;
        if let Some(out) = &out {
            log_capacity("UpdateItem", out.consumed_capacity());
        }
        Ok(out.is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_budgets_draw_one_token_a_call_and_large_ones_chunks() {
        assert_eq!(chunk_cap(1), 1);
        assert_eq!(chunk_cap(1_200), 1);
        assert_eq!(chunk_cap(60_000), 60);
        assert_eq!(chunk_cap(u64::MAX), MAX_CHUNK);
    }
}

//! Request budgets: one counter item per key, kind and one-minute window, drawn on in
//! chunks when the budget is large.

use std::collections::HashMap;
use std::sync::Mutex;

use async_trait::async_trait;

use super::items;
use super::DynamoStore;
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
    /// A token held by this instance admits the request at once. Otherwise one `UpdateItem
    /// ADD n :chunk` on the window's counter takes a chunk of tokens, answering the new
    /// count: the tokens granted are those of the chunk still within the limit. Every
    /// instance's grants together never exceed the limit; refused calls count too (the
    /// window is spent). TTL removes the item a window after its own ends.
    async fn consume_budget(
        &self,
        key: &str,
        kind: BudgetKind,
        limit: u64,
        now: i64,
    ) -> Result<BudgetDecision> {
        let (window, retry_after) = budget_window(now);
        let slot = (key.to_string(), kind, window);
        let chunk = {
            // The lock only guards plain data; a poisoned one is still consistent.
            let mut cache = self.budget_tokens.lock().unwrap_or_else(|p| p.into_inner());
            cache.retain(|(_, _, w), _| *w >= window);
            let tokens = cache.entry(slot.clone()).or_default();
            if tokens.left > 0 {
                tokens.left -= 1;
                return Ok(BudgetDecision::Admitted);
            }
            let chunk = tokens.next_chunk.clamp(1, chunk_cap(limit));
            tokens.next_chunk = chunk.saturating_mul(2);
            chunk
        };
        let count = self
            .add_to_counter(
                "budget",
                items::budget_key(key, kind.name(), window),
                i64::try_from(chunk).unwrap_or(1),
                Some(window + 2 * BUDGET_WINDOW_SECS),
            )
            .await?;
        let before = u64::try_from(count).unwrap_or(0).saturating_sub(chunk);
        let granted = limit.saturating_sub(before).min(chunk);
        if granted == 0 {
            return Ok(BudgetDecision::Refused { retry_after });
        }
        let mut cache = self.budget_tokens.lock().unwrap_or_else(|p| p.into_inner());
        cache.entry(slot).or_default().left += granted - 1;
        Ok(BudgetDecision::Admitted)
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

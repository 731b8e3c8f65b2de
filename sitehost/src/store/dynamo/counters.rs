//! Id sequences: counter items raised with `UpdateItem ADD`, handed out in blocks (the
//! request budgets raise their counters with the same call).

use std::collections::HashMap;

use aws_sdk_dynamodb::types::{ReturnConsumedCapacity, ReturnValue};

use super::items::{self, get_n, n, Item, Seq};
use super::{aws_error, log_capacity, DynamoStore};
use crate::error::{ApiError, Result};

impl DynamoStore {
    fn take_spare_id(&self, seq: Seq) -> Option<i64> {
        // The lock only guards plain data; a poisoned one is still consistent.
        let mut spare = self.spare_ids.lock().unwrap_or_else(|p| p.into_inner());
        let ranges = spare.get_mut(&seq)?;
        while let Some(range) = ranges.first_mut() {
            if let Some(id) = range.next() {
                return Some(id);
            }
            ranges.remove(0);
        }
        None
    }

    /// The next id of a sequence: `UpdateItem ADD n :block` on its counter item, keeping the
    /// rest of the block for later creates. Accounts and users always take one id.
    pub(super) async fn next_id(&self, seq: Seq) -> Result<i64> {
        if let Some(id) = self.take_spare_id(seq) {
            return Ok(id);
        }
        let block = match seq {
            Seq::Business | Seq::Image | Seq::Location | Seq::Site | Seq::Post => {
                i64::from(self.id_block)
            }
            Seq::Account | Seq::User => 1,
        };
        let last = self
            .add_to_counter("sequence", items::seq_key(seq), block, None)
            .await?;
        let first = last - block + 1;
        if block > 1 {
            let mut spare = self.spare_ids.lock().unwrap_or_else(|p| p.into_inner());
            spare.entry(seq).or_default().push(first + 1..=last);
        }
        Ok(first)
    }

    /// `n` ids of a sequence: the spare ones first, then one `UpdateItem` for the rest (a
    /// block of at least `with_id_block`), keeping what is left over.
    pub(super) async fn next_ids(&self, seq: Seq, n: usize) -> Result<Vec<i64>> {
        let mut ids = Vec::with_capacity(n);
        while ids.len() < n {
            match self.take_spare_id(seq) {
                Some(id) => ids.push(id),
                None => break,
            }
        }
        let missing = i64::try_from(n - ids.len()).map_err(ApiError::internal)?;
        if missing == 0 {
            return Ok(ids);
        }
        let block = missing.max(i64::from(self.id_block));
        let last = self
            .add_to_counter("sequence", items::seq_key(seq), block, None)
            .await?;
        let first = last - block + 1;
        ids.extend(first..first + missing);
        if block > missing {
            let mut spare = self.spare_ids.lock().unwrap_or_else(|p| p.into_inner());
            spare.entry(seq).or_default().push(first + missing..=last);
        }
        Ok(ids)
    }

    /// `UpdateItem ADD n :amount` on a counter item (setting its TTL `expires_at` when
    /// given), answering the counter's new value: id sequences and request budgets.
    pub(super) async fn add_to_counter(
        &self,
        what: &str,
        key: Item,
        amount: i64,
        expires_at: Option<i64>,
    ) -> Result<i64> {
        let mut update = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(key))
            .expression_attribute_names("#n", "n")
            .expression_attribute_values(":amount", n(amount))
            .return_values(ReturnValue::UpdatedNew)
            .return_consumed_capacity(ReturnConsumedCapacity::Total);
        update = match expires_at {
            Some(at) => update
                .update_expression("ADD #n :amount SET #e = :expires")
                .expression_attribute_names("#e", "expires_at")
                .expression_attribute_values(":expires", n(at)),
            None => update.update_expression("ADD #n :amount"),
        };
        let out = update
            .send()
            .await
            .map_err(|e| aws_error(&format!("UpdateItem ({what})"), e))?;
        log_capacity("UpdateItem", out.consumed_capacity());
        get_n(out.attributes().unwrap_or(&HashMap::new()), "n")
    }
}

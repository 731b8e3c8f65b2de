//! Locations by id. A location is one of its business's (`BusinessStore`: the detail holds
//! them, and `BusinessPatch::location_edit` changes one); what a store adds is finding the
//! business of a location id without knowing it.

use async_trait::async_trait;

use crate::error::Result;

#[async_trait]
pub trait LocationStore: Send + Sync {
    /// The business that holds (or held) location `id` in this account; `None` when the id
    /// names no location of the account. The caller reads that business, whose locations
    /// say whether it still holds it.
    async fn location_business(&self, account_id: i64, id: i64) -> Result<Option<i64>>;
    /// Makes every stored location findable by id (a store written before locations were a
    /// resource); idempotent. Returns (businesses with locations, locations indexed).
    async fn backfill_location_pointers(&self) -> Result<(u64, u64)>;
}

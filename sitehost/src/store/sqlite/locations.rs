//! Locations by id: the `locations` rows (one per location, written with their business's
//! details) carry the business id, so a location's business is one primary-key lookup.

use async_trait::async_trait;
use rusqlite::{params, OptionalExtension};

use super::SqliteStore;
use crate::error::Result;
use crate::store::LocationStore;

#[async_trait]
impl LocationStore for SqliteStore {
    async fn location_business(&self, account_id: i64, id: i64) -> Result<Option<i64>> {
        self.read(|conn| {
            conn.prepare_cached(
                "SELECT business_id FROM locations WHERE id = ?1 AND account_id = ?2",
            )?
            .query_row(params![id, account_id], |row| row.get(0))
            .optional()
        })
    }

    /// The rows are the index: nothing to add. Reports what there is.
    async fn backfill_location_pointers(&self) -> Result<(u64, u64)> {
        self.read(|conn| {
            conn.query_row(
                "SELECT COUNT(DISTINCT business_id), COUNT(*) FROM locations",
                [],
                |row| Ok((row.get::<_, i64>(0)? as u64, row.get::<_, i64>(1)? as u64)),
            )
        })
    }
}

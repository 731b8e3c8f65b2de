//! Locations by id: a pointer item `LOCATION#<id>` names the business whose `DETAILS`
//! item holds the location (docs/dynamodb-design.md, "Locations"). The location itself is
//! only in `DETAILS`: one source of truth for the business's nested `locations` and
//! `/api/v2/locations/`.
//!
//! A pointer is written when its id is taken, before the transaction that stores the
//! location (a location never changes business, and an id is never reused): a pointer
//! whose transaction failed, or whose location was removed since, names a business that
//! does not hold that id, which reads as no location.

use async_trait::async_trait;
use aws_sdk_dynamodb::types::{PutRequest, WriteRequest};

use super::items::{self, n, Item, SK};
use super::{aws_error, backoff, build_error, busy, DynamoStore, MAX_ATTEMPTS};
use crate::error::Result;
use crate::store::LocationStore;

/// Most items one `BatchWriteItem` call may write.
const BATCH_WRITE_MAX: usize = 25;

fn pointer_key(id: i64) -> Item {
    items::key(format!("LOCATION#{id}"), "LOCATION")
}

impl DynamoStore {
    /// Writes the pointers of new location ids of `business_id` (one `BatchWriteItem` per
    /// 25, unprocessed ones sent again with backoff; 503 if DynamoDB keeps refusing).
    pub(super) async fn put_location_pointers(
        &self,
        account_id: i64,
        business_id: i64,
        ids: &[i64],
    ) -> Result<()> {
        for chunk in ids.chunks(BATCH_WRITE_MAX) {
            let mut requests = chunk
                .iter()
                .map(|&id| {
                    let mut item = pointer_key(id);
                    item.insert("business_id".into(), n(business_id));
                    item.insert("account_id".into(), n(account_id));
                    let put = PutRequest::builder()
                        .set_item(Some(item))
                        .build()
                        .map_err(build_error)?;
                    Ok(WriteRequest::builder().put_request(put).build())
                })
                .collect::<Result<Vec<_>>>()?;
            for attempt in 1..=MAX_ATTEMPTS {
                let out = self
                    .client
                    .batch_write_item()
                    .request_items(&self.table, requests)
                    .send()
                    .await
                    .map_err(|e| aws_error("BatchWriteItem (location pointers)", e))?;
                requests = out
                    .unprocessed_items
                    .and_then(|mut left| left.remove(&self.table))
                    .unwrap_or_default();
                if requests.is_empty() {
                    break;
                }
                if attempt == MAX_ATTEMPTS {
                    return Err(busy("write location pointers"));
                }
                backoff(attempt, self.stretch).await;
            }
        }
        Ok(())
    }

    /// Removes a location's pointer once the location is gone (best effort: a pointer left
    /// behind reads as no location).
    pub(super) async fn delete_location_pointer(&self, id: i64) {
        let result = self
            .client
            .delete_item()
            .table_name(&self.table)
            .set_key(Some(pointer_key(id)))
            .send()
            .await;
        if let Err(err) = result {
            tracing::warn!(
                location_id = id,
                error = %crate::error::error_chain(&err),
                "a deleted location's pointer stays"
            );
        }
    }

    /// Writes the pointer of every location of every business that has some (tables written
    /// before locations had pointers). A `Scan` for `DETAILS` items, for an operator to run
    /// once (`sitehost locations backfill`); idempotent, and safe while the API serves (a
    /// pointer never changes). Returns (businesses, pointers written).
    async fn backfill_pointers(&self) -> Result<(u64, u64)> {
        let (mut businesses, mut pointers) = (0, 0);
        let mut start = None;
        loop {
            let page = self
                .client
                .scan()
                .table_name(&self.table)
                .filter_expression("#sk = :details AND attribute_exists(#locations)")
                .expression_attribute_names("#sk", SK)
                .expression_attribute_names("#locations", "locations")
                .expression_attribute_values(":details", items::s(items::DETAILS))
                .set_exclusive_start_key(start.take())
                .consistent_read(true)
                .send()
                .await
                .map_err(|e| aws_error("scan for locations", e))?;
            for item in page.items() {
                let business_id = items::business_id_of(item)?;
                let Some(record) = self.get_item(items::business_key(business_id)).await? else {
                    continue;
                };
                let (business, _) = super::records::business_from(&record)?;
                let (_, locations, _) = super::records::details_from(item)?;
                let ids: Vec<i64> = locations.iter().map(|l| l.id).collect();
                self.put_location_pointers(business.account_id, business_id, &ids)
                    .await?;
                businesses += 1;
                pointers += ids.len() as u64;
            }
            match page.last_evaluated_key {
                Some(key) if !key.is_empty() => start = Some(key),
                _ => return Ok((businesses, pointers)),
            }
        }
    }
}

#[async_trait]
impl LocationStore for DynamoStore {
    async fn location_business(&self, account_id: i64, id: i64) -> Result<Option<i64>> {
        let Some(item) = self.get_item(pointer_key(id)).await? else {
            return Ok(None);
        };
        // Another account's location reads as absent.
        if items::get_n::<i64>(&item, "account_id")? != account_id {
            return Ok(None);
        }
        Ok(Some(items::get_n(&item, "business_id")?))
    }

    async fn backfill_location_pointers(&self) -> Result<(u64, u64)> {
        self.backfill_pointers().await
    }
}

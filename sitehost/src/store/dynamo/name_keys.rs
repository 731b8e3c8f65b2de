//! Rewrites the `by_name` sort keys (`nk`) of businesses written before names sorted
//! accent-insensitively (`collation::sort_key`): one pass over the table, for an operator to
//! run once after deploying that release (`sitehost businesses rekey-names`, docs/deploy.md).
//! A `Scan`, like the logo-mark pass: a migration, never a request's work.

use aws_sdk_dynamodb::types::{ConditionCheck, TransactWriteItem, Update};

use super::items::{self, n, name_sort_key, s, Kind, NK, SK};
use super::records;
use super::transactions::TxOutcome;
use super::{aws_error, build_error, busy, DynamoStore, MAX_ATTEMPTS};
use crate::error::{ApiError, Result};
use crate::store::scope;

impl DynamoStore {
    /// Sets each business's `nk` in every scope it is listed in to the current sort key, in
    /// one transaction per business conditioned on the version it read (a business changed
    /// meanwhile is read again). Idempotent, and safe while the API serves. Returns the
    /// number of businesses rewritten.
    pub async fn rekey_business_names(&self) -> Result<u64> {
        let mut done = 0;
        let mut start = None;
        loop {
            let page = self
                .client
                .scan()
                .table_name(&self.table)
                .filter_expression("#sk = :business")
                .expression_attribute_names("#sk", SK)
                .expression_attribute_values(":business", s("BUSINESS"))
                .set_exclusive_start_key(start.take())
                .consistent_read(true)
                .send()
                .await
                .map_err(|e| aws_error("scan for businesses", e))?;
            for item in page.items() {
                let (business, _) = records::business_from(item)?;
                self.rekey_one(business.id).await?;
                done += 1;
            }
            match page.last_evaluated_key {
                Some(key) if !key.is_empty() => start = Some(key),
                _ => return Ok(done),
            }
        }
    }

    async fn rekey_one(&self, id: i64) -> Result<()> {
        for _ in 0..MAX_ATTEMPTS {
            let Some(item) = self.get_item(items::business_key(id)).await? else {
                return Ok(());
            };
            let (business, version) = records::business_from(&item)?;
            let nk = name_sort_key(&business);
            let scopes = scope::business_scopes(&business);
            let actions = || -> Result<Vec<TransactWriteItem>> {
                let unchanged = ConditionCheck::builder()
                    .table_name(&self.table)
                    .set_key(Some(items::business_key(id)))
                    .condition_expression("version = :v")
                    .expression_attribute_values(":v", n(version))
                    .build()
                    .map_err(build_error)?;
                let mut actions = vec![TransactWriteItem::builder()
                    .condition_check(unchanged)
                    .build()];
                for scope in &scopes {
                    let key = items::entry_key(Kind::Business, business.account_id, scope, id);
                    let update = Update::builder()
                        .table_name(&self.table)
                        .set_key(Some(key))
                        .update_expression("SET #nk = :nk")
                        .condition_expression("attribute_exists(pk)")
                        .expression_attribute_names("#nk", NK)
                        .expression_attribute_values(":nk", s(nk.clone()))
                        .build()
                        .map_err(build_error)?;
                    actions.push(TransactWriteItem::builder().update(update).build());
                }
                Ok(actions)
            };
            match self.transact("rekey a name", MAX_ATTEMPTS, actions).await? {
                TxOutcome::Committed => return Ok(()),
                TxOutcome::Busy(_) => return Err(busy("rekey a name")),
                // Changed since it was read: read it again.
                TxOutcome::Cancelled(codes) if TxOutcome::failed_condition(&codes, 0) => {}
                TxOutcome::Cancelled(codes) => {
                    return Err(ApiError::internal(format!(
                        "dynamodb rekey business {id} cancelled: {codes:?}"
                    )))
                }
            }
        }
        Err(busy("rekey a name"))
    }
}

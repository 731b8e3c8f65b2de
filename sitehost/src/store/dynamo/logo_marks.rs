//! Marks the logos of businesses written before images carried `logo_of` marks: the marks
//! are what an image delete refuses on (409), so an image that an older business has as
//! its logo, unmarked, could be deleted from under it. One pass over the table, for an
//! operator to run once after deploying the release that added the marks
//! (`sitehost images mark-logos`, docs/deploy.md). It is the one `Scan` in the code: a
//! migration, never a request's work.

use aws_sdk_dynamodb::types::{ConditionCheck, TransactWriteItem};

use super::items::{self, n, PK, SK};
use super::transactions::{LogoOf, TxOutcome};
use super::{aws_error, build_error, busy, DynamoStore, MAX_ATTEMPTS};
use crate::error::{ApiError, Result};

/// What a pass found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct LogoMarks {
    /// Businesses with a logo.
    pub businesses: u64,
    /// Their logos, marked now or already (adding a mark twice changes nothing).
    pub marked: u64,
    /// Businesses whose logo changed between the scan and the mark: their new logo was
    /// marked by that write itself.
    pub changed: u64,
    /// (business, image): the logo's image is gone or not the business's account's. Left
    /// as it is, for the operator to look at.
    pub missing: Vec<(i64, i64)>,
}

impl DynamoStore {
    /// Scans the table for business records with a logo and, for each, adds the business
    /// to its image's marks in one transaction with a check that the business still has
    /// that logo, so that a business that changed its logo meanwhile never leaves a stale
    /// mark. Idempotent.
    pub async fn mark_existing_logos(&self) -> Result<LogoMarks> {
        let mut found = LogoMarks::default();
        let mut start = None;
        loop {
            let page = self
                .client
                .scan()
                .table_name(&self.table)
                .filter_expression("#sk = :business AND attribute_exists(#logo)")
                .projection_expression("#pk, #logo, #account")
                .expression_attribute_names("#pk", PK)
                .expression_attribute_names("#sk", SK)
                .expression_attribute_names("#logo", "logo_image_id")
                .expression_attribute_names("#account", "account_id")
                .expression_attribute_values(":business", items::s("BUSINESS"))
                .set_exclusive_start_key(start.take())
                .consistent_read(true)
                .send()
                .await
                .map_err(|e| aws_error("scan for logos", e))?;
            for item in page.items() {
                let business = items::business_id_of(item)?;
                let logo = items::get_n(item, "logo_image_id")?;
                let account = items::get_n(item, "account_id")?;
                found.businesses += 1;
                self.mark_one(business, logo, account, &mut found).await?;
            }
            match page.last_evaluated_key {
                Some(key) if !key.is_empty() => start = Some(key),
                _ => return Ok(found),
            }
        }
    }

    async fn mark_one(
        &self,
        business: i64,
        logo: i64,
        account: i64,
        found: &mut LogoMarks,
    ) -> Result<()> {
        let actions = || -> Result<Vec<TransactWriteItem>> {
            let still_logo = ConditionCheck::builder()
                .table_name(&self.table)
                .set_key(Some(items::business_key(business)))
                .condition_expression("#logo = :logo")
                .expression_attribute_names("#logo", "logo_image_id")
                .expression_attribute_values(":logo", n(logo))
                .build()
                .map_err(build_error)?;
            Ok(vec![
                TransactWriteItem::builder()
                    .condition_check(still_logo)
                    .build(),
                // The barred item of a deleted image has no account, so it fails too.
                self.mark_logo(logo, account, LogoOf::Any, business)?,
            ])
        };
        match self.transact("mark a logo", MAX_ATTEMPTS, actions).await? {
            TxOutcome::Committed => found.marked += 1,
            TxOutcome::Busy(_) => return Err(busy("mark a logo")),
            TxOutcome::Cancelled(codes) if TxOutcome::failed_condition(&codes, 0) => {
                found.changed += 1;
            }
            TxOutcome::Cancelled(codes) if TxOutcome::failed_condition(&codes, 1) => {
                tracing::warn!(business, image = logo, "a business's logo image is gone");
                found.missing.push((business, logo));
            }
            TxOutcome::Cancelled(codes) => {
                return Err(ApiError::internal(format!(
                    "dynamodb mark a logo cancelled: {codes:?}"
                )))
            }
        }
        Ok(())
    }
}

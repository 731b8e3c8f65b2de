//! Images: one transaction per create, lists by id on one scope partition.

use async_trait::async_trait;

use aws_sdk_dynamodb::types::{Put, TransactWriteItem};

use super::items::{self, Kind, Seq};
use super::reads::ScopeList;
use super::records;
use super::transactions::{NewEntries, TxOutcome};
use super::{backoff, build_error, busy, conditional, spread, DynamoStore, MAX_ATTEMPTS};
use crate::domain::image_record::{Image, ImageQuery, NewImage};
use crate::error::{ApiError, Result};
use crate::store::held_key::Created;
use crate::store::rules::{image_is_logo, no_such_business};
use crate::store::scope;
use crate::store::{ImageStore, Page};

#[async_trait]
impl ImageStore for DynamoStore {
    async fn allocate_image_id(&self) -> Result<i64> {
        self.next_id(Seq::Image).await
    }

    async fn create_image(&self, account_id: i64, new: NewImage, now: i64) -> Result<Image> {
        let business = new.business_id;
        let id = match new.id {
            Some(id) => id,
            None => self.next_id(Seq::Image).await?,
        };
        let image = new.into_image(id, account_id, now);
        if let Some(business) = business {
            // The business must be this account's and have the sub id the image takes from
            // it. A read, not a `ConditionCheck` in the transaction: every upload into one
            // business would check the same item, and DynamoDB cancels transactions that
            // share an item. A business's account never changes and it is never deleted;
            // its sub id may change after this read, which orders this upload before that
            // change (existing images keep their sub id either way).
            let found = self.get_item(items::business_key(business)).await?;
            let matches = match found {
                Some(item) => {
                    let (found, _) = records::business_from(&item)?;
                    found.account_id == account_id && found.partner_sub_id == image.partner_sub_id
                }
                None => false,
            };
            if !matches {
                return Err(no_such_business(business));
            }
        }
        let scopes = scope::image_scopes(&image);
        let entries = NewEntries {
            kind: Kind::Image,
            account_id,
            id,
            scopes: &scopes,
            nk: None,
        };
        let actions = || {
            let mut actions = vec![self.put_new(records::image_item(&image))?];
            actions.extend(self.entries_and_counts(entries, spread::random_lane())?);
            Ok(actions)
        };
        let created = Some(Created::Image(id));
        match self
            .transact_create("create image", MAX_ATTEMPTS, created, actions)
            .await?
        {
            TxOutcome::Committed => Ok(image),
            TxOutcome::Busy(_) => Err(busy("create image")),
            TxOutcome::Cancelled(codes) => match () {
                _ if TxOutcome::failed_condition(&codes, 0) => Err(ApiError::internal(format!(
                    "image id {id} is taken or was settled as never recorded"
                ))),
                _ => Err(ApiError::internal(format!(
                    "dynamodb create image cancelled: {codes:?}"
                ))),
            },
        }
    }

    async fn get_image(&self, account_id: i64, id: i64) -> Result<Option<Image>> {
        let image = self.find_image_any_account(id).await?;
        Ok(image.filter(|image| image.account_id == account_id))
    }

    async fn list_images(&self, account_id: i64, query: &ImageQuery) -> Result<Page<Image>> {
        let scope = scope::image_filter_scope(&query.filter);
        let (records, total_count) = self
            .list_page(ScopeList {
                kind: Kind::Image,
                account_id,
                scope: &scope,
                by_name: false,
                descending: query.descending,
                offset: query.offset,
                limit: query.limit,
            })
            .await?;
        let items = records
            .iter()
            .map(records::image_from)
            .collect::<Result<Vec<_>>>()?;
        Ok(Page { items, total_count })
    }

    async fn find_image_any_account(&self, id: i64) -> Result<Option<Image>> {
        match self.get_item(items::image_key(id)).await? {
            Some(item) => records::image_record(&item),
            None => Ok(None),
        }
    }

    /// `PutItem` of the barring item with `attribute_not_exists(pk)`: it succeeds only when
    /// no record was written, and then no create of this id can succeed any more (a
    /// transaction still in flight fails its own `attribute_not_exists`). When it fails,
    /// the item that exists is read (consistently) and returned.
    async fn settle_image(&self, id: i64) -> Result<Option<Image>> {
        let mut attempt = 0;
        let barred = loop {
            let result = self
                .client
                .put_item()
                .table_name(&self.table)
                .set_item(Some(records::barred_image_item(id)))
                .condition_expression("attribute_not_exists(#pk)")
                .expression_attribute_names("#pk", items::PK)
                .send()
                .await;
            match conditional("PutItem (bar image id)", result) {
                // The record's own transaction may still hold the item
                // (`TransactionConflictException`): wait for it to end.
                Err(ApiError::Unavailable { .. } | ApiError::Temporary { .. })
                    if attempt + 1 < MAX_ATTEMPTS =>
                {
                    attempt += 1;
                    backoff(attempt, self.stretch).await;
                }
                other => break other?.is_some(),
            }
        };
        if barred {
            tracing::info!(image_id = id, "image id settled as never recorded");
            return Ok(None);
        }
        self.find_image_any_account(id).await
    }

    /// A consistent read of the image (its scopes and logo marks), then one transaction:
    /// the record replaced by the barred item on the condition that it is still this
    /// account's and unmarked, its entries deleted and one counter lane of each scope
    /// decremented. A failed condition (a business took it as its logo, or another delete
    /// won since the read) reads again.
    async fn delete_image(
        &self,
        account_id: i64,
        id: i64,
        restrict_sub_id: Option<&str>,
    ) -> Result<Option<Image>> {
        for attempt in 1..=MAX_ATTEMPTS {
            let Some(item) = self.get_item(items::image_key(id)).await? else {
                return Ok(None);
            };
            let Some(image) = records::image_record(&item)? else {
                return Ok(None);
            };
            // An image's account and sub id never change, so this part of the read cannot
            // go stale.
            if image.account_id != account_id || !image.visible_to(restrict_sub_id) {
                return Ok(None);
            }
            if let Some(business) = first_logo_of(&item)? {
                return Err(self.logo_conflict(id, business, restrict_sub_id).await);
            }
            let scopes = scope::image_scopes(&image);
            let actions = || {
                let lane = spread::random_lane();
                let mut actions = vec![self.bar_unmarked_image(id, account_id)?];
                for scope in &scopes {
                    actions.push(self.delete(items::entry_key(
                        Kind::Image,
                        account_id,
                        scope,
                        id,
                    ))?);
                    actions.push(
                        self.add(items::counter_key(Kind::Image, account_id, scope, lane), -1)?,
                    );
                }
                Ok(actions)
            };
            match self.transact("delete image", MAX_ATTEMPTS, actions).await? {
                TxOutcome::Committed => return Ok(Some(image)),
                TxOutcome::Busy(_) => return Err(busy("delete image")),
                TxOutcome::Cancelled(codes) if TxOutcome::failed_condition(&codes, 0) => {
                    tracing::debug!(
                        id,
                        attempt,
                        "image changed since it was read; reading again"
                    );
                    backoff(attempt, self.stretch).await;
                }
                TxOutcome::Cancelled(codes) => {
                    return Err(ApiError::internal(format!(
                        "dynamodb delete image cancelled: {codes:?}"
                    )))
                }
            }
        }
        Err(busy("delete image"))
    }
}

/// The smallest business id among an image item's logo marks.
fn first_logo_of(item: &items::Item) -> Result<Option<i64>> {
    let Some(value) = item.get(records::LOGO_OF) else {
        return Ok(None);
    };
    let ids = value
        .as_ns()
        .map_err(|_| ApiError::internal(format!("{} is not a number set", records::LOGO_OF)))?;
    let mut first = None;
    for id in ids {
        let id: i64 = id
            .parse()
            .map_err(|_| ApiError::internal(format!("{} holds {id:?}", records::LOGO_OF)))?;
        first = Some(first.map_or(id, |f: i64| f.min(id)));
    }
    Ok(first)
}

impl DynamoStore {
    /// The `Put` of the barred item over an image record that is `account_id`'s and is no
    /// business's logo.
    fn bar_unmarked_image(&self, id: i64, account_id: i64) -> Result<TransactWriteItem> {
        let put = Put::builder()
            .table_name(&self.table)
            .set_item(Some(records::barred_image_item(id)))
            .condition_expression("#a = :a AND attribute_not_exists(#l)")
            .expression_attribute_names("#a", "account_id")
            .expression_attribute_names("#l", records::LOGO_OF)
            .expression_attribute_values(":a", items::n(account_id))
            .build()
            .map_err(build_error)?;
        Ok(TransactWriteItem::builder().put(put).build())
    }

    /// The 409 of an image that `business` has as its logo, naming the business.
    async fn logo_conflict(
        &self,
        id: i64,
        business: i64,
        restrict_sub_id: Option<&str>,
    ) -> ApiError {
        match self.get_item(items::business_key(business)).await {
            Ok(Some(item)) => match records::business_from(&item) {
                Ok((found, _)) => image_is_logo(id, &found, restrict_sub_id),
                Err(err) => err,
            },
            Ok(None) => ApiError::internal(format!(
                "image {id} is marked as the logo of business {business}, which does not exist"
            )),
            Err(err) => err,
        }
    }
}

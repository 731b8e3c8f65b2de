//! Images: one transaction per create, lists by id on one scope partition.

use async_trait::async_trait;

use super::items::{self, Kind, Seq};
use super::{conditional, DynamoStore, ScopeList, TxOutcome};
use crate::error::{ApiError, Result};
use crate::image::{Image, ImageQuery, NewImage};
use crate::store::rules::no_such_business;
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
        let mut actions = Vec::new();
        if let Some(business) = business {
            // The business must still have the sub id the image takes from it.
            actions.push(self.check_owner_and_sub(
                items::business_key(business),
                account_id,
                Some(image.partner_sub_id.as_deref()),
            )?);
        }
        let record = actions.len();
        actions.push(self.put_new(items::image_item(&image))?);
        actions.extend(self.entries_and_counts(
            Kind::Image,
            account_id,
            id,
            &scope::image_scopes(&image),
            None,
        )?);
        match self.transact(actions).await? {
            TxOutcome::Committed => Ok(image),
            TxOutcome::Cancelled(codes) => match business {
                Some(business) if TxOutcome::failed_condition(&codes, 0) => {
                    Err(no_such_business(business))
                }
                _ if TxOutcome::failed_condition(&codes, record) => Err(ApiError::internal(
                    format!("image id {id} is taken or was settled as never recorded"),
                )),
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
            .map(items::image_from)
            .collect::<Result<Vec<_>>>()?;
        Ok(Page { items, total_count })
    }

    async fn find_image_any_account(&self, id: i64) -> Result<Option<Image>> {
        match self.get_item(items::image_key(id)).await? {
            Some(item) => items::image_record(&item),
            None => Ok(None),
        }
    }

    /// `PutItem` of the barring item with `attribute_not_exists(pk)`: it succeeds only when
    /// no record was written, and then no create of this id can succeed any more (a
    /// transaction still in flight fails its own `attribute_not_exists`). When it fails,
    /// the item that exists is read (consistently) and returned.
    async fn settle_image(&self, id: i64) -> Result<Option<Image>> {
        let result = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(items::barred_image_item(id)))
            .condition_expression("attribute_not_exists(#pk)")
            .expression_attribute_names("#pk", items::PK)
            .send()
            .await;
        if conditional("PutItem (bar image id)", result)?.is_some() {
            tracing::info!(image_id = id, "image id settled as never recorded");
            return Ok(None);
        }
        self.find_image_any_account(id).await
    }
}

//! Images: one transaction per create, lists by id on one scope partition.

use async_trait::async_trait;

use super::items::{self, Kind, Seq};
use super::{DynamoStore, ScopeList, TxOutcome};
use crate::error::{ApiError, Result};
use crate::image::{Image, ImageQuery, NewImage};
use crate::store::{ImageStore, Page};

#[async_trait]
impl ImageStore for DynamoStore {
    async fn create_image(&self, account_id: i64, new: NewImage, now: i64) -> Result<Image> {
        let business = new.business_id;
        let id = self.next_id(Seq::Image).await?;
        let image = new.into_image(id, account_id, now);
        let mut actions = Vec::new();
        if let Some(business) = business {
            actions.push(self.check_owner(items::business_key(business), account_id)?);
        }
        actions.push(self.put_new(items::image_item(&image))?);
        actions.extend(self.entries_and_counts(
            Kind::Image,
            account_id,
            id,
            &image.scopes(),
            None,
        )?);
        match self.transact(actions).await? {
            TxOutcome::Committed => Ok(image),
            TxOutcome::Cancelled(codes) => match business {
                Some(business) if TxOutcome::failed_condition(&codes, 0) => Err(ApiError::field(
                    "business_id",
                    format!("There is no business {business} in this account."),
                )),
                _ => Err(ApiError::internal(format!(
                    "dynamodb create image cancelled: {codes:?}"
                ))),
            },
        }
    }

    async fn get_image(&self, account_id: i64, id: i64) -> Result<Option<Image>> {
        let Some(item) = self.get_item(items::image_key(id)).await? else {
            return Ok(None);
        };
        let image = items::image_from(&item)?;
        Ok((image.account_id == account_id).then_some(image))
    }

    async fn list_images(&self, account_id: i64, query: &ImageQuery) -> Result<Page<Image>> {
        let scope = query.filter.scope();
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
}

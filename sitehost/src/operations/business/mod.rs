//! The business endpoints: list, detail, create and update. What a business looks like to
//! a client is `view`, the list's query parameters `params`; the domain (`crate::domain::business`)
//! holds the record and the rules of a create or update body.

mod ignored_fields;
mod params;
mod view;

use serde_json::Value;

use super::{Reply, Services, WriteBudget};
use crate::domain::account::Caller;
use crate::domain::business::{BusinessDetail, BusinessPatch, NewBusiness};
use crate::domain::image_record::{ImageFilter, ImageQuery};
use crate::domain::location;
use crate::domain::validate::json_object;
use crate::error::{ApiError, Result};
use crate::operations::images;
use crate::operations::listing::{page_envelope, Paging};
use ignored_fields::IgnoredFields;

/// A business's list object as its detail shows it (the site detail shows it too).
pub use view::business as business_object;

/// The detail view lists at most this many of a business's images.
pub const DETAIL_IMAGES_LIMIT: u64 = 1000;

fn not_found(id: i64) -> ApiError {
    ApiError::NotFound(format!("no business with id {id}"))
}

pub async fn list(
    services: &Services,
    caller: &Caller,
    query_pairs: &[(String, String)],
) -> Result<Reply> {
    let paging = Paging::parse(query_pairs)?;
    let page = match params::query(query_pairs, paging, caller)? {
        Some(query) => {
            services
                .store
                .list_businesses(caller.account_id, &query)
                .await?
        }
        None => crate::store::Page::empty(),
    };
    Ok(Reply::ok(page_envelope(
        view::LIST_PATH,
        query_pairs,
        paging,
        &page,
        view::business,
    )))
}

/// A business the caller may see, with its services and locations: its account's, and its
/// sub id's if the key is restricted.
async fn visible(services: &Services, caller: &Caller, id: i64) -> Result<BusinessDetail> {
    services
        .store
        .get_business_detail(caller.account_id, id)
        .await?
        .filter(|d| d.business.visible_to(caller.restrict_sub_id.as_deref()))
        .ok_or_else(|| not_found(id))
}

/// Whether the detail object reads the business's images.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Images {
    Read,
    /// A business just created has none: an image names a business that exists, so
    /// listing them would only cost a list read (12 `Query` calls on DynamoDB) per create.
    NoneYet,
}

/// The detail object: the business with its logo image, its images, its services and its
/// locations.
async fn detail(
    services: &Services,
    caller: &Caller,
    detail: &BusinessDetail,
    images_read: Images,
) -> Result<Value> {
    let business = &detail.business;
    let restrict = caller.restrict_sub_id.as_deref();
    let images_query = ImageQuery {
        filter: ImageFilter {
            site_id: None,
            business_id: Some(business.id),
            partner_sub_id: caller.restrict_sub_id.clone(),
        },
        descending: false,
        limit: DETAIL_IMAGES_LIMIT,
        offset: 0,
    };
    let logo = async {
        match business.logo_image_id {
            Some(id) => services.store.get_image(caller.account_id, id).await,
            None => Ok(None),
        }
    };
    let listed = async {
        match images_read {
            Images::Read => Ok(services
                .store
                .list_images(caller.account_id, &images_query)
                .await?
                .items),
            Images::NoneYet => Ok(Vec::new()),
        }
    };
    let (logo, listed) = tokio::try_join!(logo, listed)?;
    // A logo of another sub id (set by an unrestricted key) keeps its id but is not shown.
    let logo = logo.filter(|image| image.visible_to(restrict));
    Ok(view::detail(
        detail,
        logo.as_ref().map(images::view::image),
        listed.iter().map(images::view::image).collect(),
    ))
}

pub async fn get(services: &Services, caller: &Caller, id: i64) -> Result<Reply> {
    let business = visible(services, caller, id).await?;
    Ok(Reply::ok(
        detail(services, caller, &business, Images::Read).await?,
    ))
}

/// Creates a business, once its key's budget has paid for what it stores.
pub async fn create(
    services: &Services,
    caller: &Caller,
    body: &[u8],
    budget: &dyn WriteBudget,
) -> Result<Reply> {
    let body = json_object(body)?;
    let new = NewBusiness::from_json(&body, caller)?;
    IgnoredFields::of(&body, true).log();
    if let (Some(logo), Some(_)) = (new.logo_image_id, &caller.restrict_sub_id) {
        // An image's account and sub id never change and images are never deleted, so this
        // check cannot go stale before the store's own (account) check in its transaction.
        let visible = services
            .store
            .get_image(caller.account_id, logo)
            .await?
            .is_some_and(|image| image.visible_to(caller.restrict_sub_id.as_deref()));
        if !visible {
            return Err(crate::store::rules::no_such_logo(logo));
        }
    }
    let stored = location::details_bytes(&new.services, new.locations.iter().map(|l| &l.fields));
    budget.pay_for_stored(stored).await?;
    let business = services
        .store
        .create_business(caller.account_id, new, services.clock.now())
        .await?;
    tracing::info!(
        business_id = business.business.id,
        account_id = caller.account_id,
        locations = business.locations.len(),
        "business created"
    );
    let body = detail(services, caller, &business, Images::NoneYet).await?;
    Ok(Reply::created(
        body,
        view::resource_uri(business.business.id),
    ))
}

/// Updates a business; one that replaces its services or locations first pays for what it
/// will store.
pub async fn update(
    services: &Services,
    caller: &Caller,
    id: i64,
    body: &[u8],
    budget: &dyn WriteBudget,
) -> Result<Reply> {
    let body = json_object(body)?;
    let patch = BusinessPatch::from_json(&body, id, caller)?;
    IgnoredFields::of(&body, false).log();
    if patch.services.is_some() || patch.locations.is_some() {
        // The stored item holds both lists, so a patch of one rewrites the other too: what
        // it stores is known only from the current detail (one more read, an eighth of
        // the write's units or less).
        let current = visible(services, caller, id).await?;
        let stored = location::details_bytes(
            patch.services.as_ref().unwrap_or(&current.services),
            match &patch.locations {
                Some(given) => given.iter().map(|l| &l.fields).collect::<Vec<_>>(),
                None => current.locations.iter().map(|l| &l.fields).collect(),
            },
        );
        budget.pay_for_stored(stored).await?;
    }
    let business = store_patch(services, caller, id, patch)
        .await?
        .ok_or_else(|| not_found(id))?;
    Ok(Reply::ok(
        detail(services, caller, &business, Images::Read).await?,
    ))
}

/// Stores `patch` to business `id` as the caller may (its sub id's only, if the key is
/// restricted); `None` for a business it may not see.
async fn store_patch(
    services: &Services,
    caller: &Caller,
    id: i64,
    patch: BusinessPatch,
) -> Result<Option<BusinessDetail>> {
    services
        .store
        .update_business(
            caller.account_id,
            id,
            caller.restrict_sub_id.as_deref(),
            patch,
            services.clock.now(),
        )
        .await
}

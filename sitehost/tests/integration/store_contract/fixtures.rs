//! What the contract's cases share: the two days records are made on, and short ways to
//! make and list accounts, businesses and images (each panics on a store error).

use sitehost::domain::business::{
    Business, BusinessFilter, BusinessOrder, BusinessPatch, BusinessQuery, NewBusiness,
};
use sitehost::domain::image_record::{Image, ImageFilter, ImageQuery, NewImage};
use sitehost::store::{Page, SharedStore};
use sitehost::ApiError;

/// 2013-05-24T11:40:21 and the same time the next day.
pub const DAY1: i64 = 1_369_395_621;

pub const DAY2: i64 = DAY1 + 86_400;

pub async fn account(store: &SharedStore, name: &str) -> i64 {
    store.ensure_account(name).await.expect("ensure_account").id
}

pub fn new_business(name: &str) -> NewBusiness {
    NewBusiness {
        business_name: name.to_string(),
        partner_business_id: None,
        partner_sub_id: None,
        category_id: None,
        logo_image_id: None,
        user_id: 7,
        ..Default::default()
    }
}

pub async fn create(store: &SharedStore, account: i64, new: NewBusiness, now: i64) -> Business {
    store
        .create_business(account, new, now)
        .await
        .expect("create_business")
        .business
}

pub async fn patch(
    store: &SharedStore,
    account: i64,
    id: i64,
    patch: BusinessPatch,
    now: i64,
) -> Business {
    store
        .update_business(account, id, None, patch, now)
        .await
        .expect("update_business")
        .expect("the business exists")
        .business
}

pub async fn list(
    store: &SharedStore,
    account: i64,
    filter: BusinessFilter,
    order: BusinessOrder,
    offset: u64,
    limit: u64,
) -> Page<Business> {
    store
        .list_businesses(
            account,
            &BusinessQuery {
                filter,
                order,
                limit,
                offset,
            },
        )
        .await
        .expect("list_businesses")
}

/// Ids of the whole list in one order, and the total.
pub async fn ids(
    store: &SharedStore,
    account: i64,
    filter: BusinessFilter,
    order: BusinessOrder,
) -> (Vec<i64>, u64) {
    let page = list(store, account, filter, order, 0, 1000).await;
    (page.items.iter().map(|b| b.id).collect(), page.total_count)
}

pub async fn total(store: &SharedStore, account: i64, filter: BusinessFilter) -> u64 {
    list(store, account, filter, BusinessOrder::IdAsc, 0, 1)
        .await
        .total_count
}

pub fn all() -> BusinessFilter {
    BusinessFilter::default()
}

pub fn deleted(d: bool) -> BusinessFilter {
    BusinessFilter {
        deleted: Some(d),
        ..all()
    }
}

pub fn sub(s: &str) -> BusinessFilter {
    BusinessFilter {
        partner_sub_id: Some(s.into()),
        ..all()
    }
}

pub fn pbid(p: &str) -> BusinessFilter {
    BusinessFilter {
        partner_business_id: Some(p.into()),
        ..all()
    }
}

pub fn new_image(path: &str, site_id: Option<i64>, business_id: Option<i64>) -> NewImage {
    NewImage {
        id: None,
        path: path.to_string(),
        mimetype: "image/jpeg".into(),
        width: 640,
        height: 480,
        site_id,
        business_id,
        partner_sub_id: None,
        user_id: 7,
    }
}

pub async fn image(store: &SharedStore, account: i64, new: NewImage, now: i64) -> Image {
    store
        .create_image(account, new, now)
        .await
        .expect("create_image")
}

pub async fn list_images(
    store: &SharedStore,
    account: i64,
    filter: ImageFilter,
    descending: bool,
    offset: u64,
    limit: u64,
) -> Page<Image> {
    store
        .list_images(
            account,
            &ImageQuery {
                filter,
                descending,
                limit,
                offset,
            },
        )
        .await
        .expect("list_images")
}

/// Asserts a failure the API answers as a 400 on exactly this field: a validation error, or
/// a store's domain error (a missing reference, a conflict) that error.rs maps to one.
pub fn assert_field_error<T: std::fmt::Debug>(result: Result<T, ApiError>, field: &str) {
    match result {
        Err(err) if err.status() == 400 => {
            let body = err.body();
            let fields: Vec<&String> = body.as_object().expect("a field map").keys().collect();
            assert_eq!(fields, vec![field], "{err:?}");
        }
        other => panic!("expected a validation error on {field}, got {other:?}"),
    }
}

//! The location endpoints: list, detail, create, update and delete. A location is one of
//! its business's: every write is an update of that business's locations
//! (`BusinessPatch::location_edit`), so a business's nested `locations` and
//! `/api/v2/locations/` are the same records with the same ids. A location is visible when
//! its business is (its account's, and its sub id's for a restricted key).

mod params;
pub mod view;

use futures_util::future::try_join_all;

use super::{Reply, Services, WriteBudget};
use crate::domain::account::Caller;
use crate::domain::business::BusinessQuery;
use crate::domain::business::{
    Business, BusinessDetail, BusinessFilter, BusinessOrder, BusinessPatch,
};
use crate::domain::collation;
use crate::domain::location::{self, Location, LocationEdit};
use crate::domain::validate::json_object;
use crate::error::{ApiError, Result};
use crate::operations::listing::{envelope, Paging};
use params::LocationOrder;

pub use params::{distance_km, FIELDS, FILTERS};

/// Most businesses one `partner_business_id` may name in a location list (each is one
/// read); more is a 400 asking for `business_id`.
pub const MAX_LIST_BUSINESSES: u64 = 10;

fn not_found(id: i64) -> ApiError {
    ApiError::NotFound(format!("no location with id {id}"))
}

/// The business with its locations, if the caller may see it (sites read their locations
/// through it too).
pub(crate) async fn visible_business(
    services: &Services,
    caller: &Caller,
    id: i64,
) -> Result<Option<BusinessDetail>> {
    Ok(services
        .store
        .get_business_detail(caller.account_id, id)
        .await?
        .filter(|d| d.business.visible_to(caller.restrict_sub_id.as_deref())))
}

/// Location `id` and its business, if the caller may see them.
async fn visible(services: &Services, caller: &Caller, id: i64) -> Result<BusinessDetail> {
    let business_id = services
        .store
        .location_business(caller.account_id, id)
        .await?
        .ok_or_else(|| not_found(id))?;
    visible_business(services, caller, business_id)
        .await?
        .filter(|d| d.locations.iter().any(|l| l.id == id))
        .ok_or_else(|| not_found(id))
}

fn shown(detail: &BusinessDetail, id: i64) -> Result<serde_json::Value> {
    let location = detail
        .locations
        .iter()
        .find(|l| l.id == id)
        .ok_or_else(|| not_found(id))?;
    Ok(view::location(location, &detail.business))
}

/// The businesses a list reads: the one of `business_id`, or those of
/// `partner_business_id` (at most [`MAX_LIST_BUSINESSES`]), or both (the one, if it has
/// that partner id).
async fn listed_businesses(
    services: &Services,
    caller: &Caller,
    query: &params::LocationQuery,
) -> Result<Vec<BusinessDetail>> {
    let restrict = caller.restrict_sub_id.as_deref();
    if let Some(id) = query.business_id {
        let detail = visible_business(services, caller, id).await?.filter(|d| {
            query.partner_business_id.is_none()
                || d.business.partner_business_id == query.partner_business_id
        });
        return Ok(detail.into_iter().collect());
    }
    let business_query = BusinessQuery {
        filter: BusinessFilter {
            partner_business_id: query.partner_business_id.clone(),
            partner_sub_id: restrict.map(str::to_string),
            ..Default::default()
        },
        order: BusinessOrder::IdAsc,
        limit: MAX_LIST_BUSINESSES,
        offset: 0,
    };
    let page = services
        .store
        .list_businesses(caller.account_id, &business_query)
        .await?;
    if page.total_count > MAX_LIST_BUSINESSES {
        return Err(ApiError::field(
            "partner_business_id",
            format!(
                "{} businesses have this partner_business_id; a location list reads at most \
                 {MAX_LIST_BUSINESSES}: filter by business_id.",
                page.total_count
            ),
        ));
    }
    let details = try_join_all(
        page.items
            .iter()
            .map(|b| visible_business(services, caller, b.id)),
    )
    .await?;
    Ok(details.into_iter().flatten().collect())
}

/// Sorts the listed locations: by id, by name (accent- and case-insensitive, ties by id),
/// or by distance (those without coordinates last, by id).
fn sort(rows: &mut [(&Location, &Business)], order: LocationOrder) {
    match order {
        LocationOrder::Id { descending } => {
            rows.sort_by_key(|(l, _)| l.id);
            if descending {
                rows.reverse();
            }
        }
        LocationOrder::Name { descending } => {
            let key = |l: &Location| {
                let name = l.fields.location_name.as_deref().unwrap_or_default();
                (collation::sort_key(name), l.id)
            };
            rows.sort_by_cached_key(|(l, _)| key(l));
            if descending {
                rows.reverse();
            }
        }
        LocationOrder::Near { lat, lon } => {
            let distance = |l: &Location| match (l.fields.lat, l.fields.lon) {
                (Some(a), Some(b)) => distance_km(lat, lon, a, b),
                _ => f64::INFINITY,
            };
            rows.sort_by(|(a, _), (b, _)| {
                distance(a).total_cmp(&distance(b)).then(a.id.cmp(&b.id))
            });
        }
    }
}

pub async fn list(
    services: &Services,
    caller: &Caller,
    query_pairs: &[(String, String)],
) -> Result<Reply> {
    let paging = Paging::parse(query_pairs)?;
    let query = params::query(query_pairs)?;
    let details = listed_businesses(services, caller, &query).await?;
    let mut rows: Vec<(&Location, &Business)> = details
        .iter()
        .flat_map(|d| d.locations.iter().map(move |l| (l, &d.business)))
        .filter(|(l, _)| {
            query.partner_location_id.is_none()
                || l.fields.partner_location_id == query.partner_location_id
        })
        .collect();
    sort(&mut rows, query.order);
    let total_count = rows.len() as u64;
    let objects = rows
        .iter()
        .skip(usize::try_from(paging.offset).unwrap_or(usize::MAX))
        .take(usize::try_from(paging.limit).unwrap_or(usize::MAX))
        .map(|(l, b)| view::location(l, b))
        .collect();
    let body = envelope(view::LIST_PATH, query_pairs, paging, total_count, objects);
    Ok(Reply::ok(body))
}

pub async fn get(services: &Services, caller: &Caller, id: i64) -> Result<Reply> {
    let detail = visible(services, caller, id).await?;
    Ok(Reply::ok(shown(&detail, id)?))
}

/// What a write of `edit` pays for: the business's services and locations as they will
/// be stored (they are one stored item).
async fn pay_for(
    budget: &dyn WriteBudget,
    current: &BusinessDetail,
    edit: &LocationEdit,
    now: i64,
) -> Result<()> {
    let mut locations = current.locations.clone();
    // Ids are not known before the write; a placeholder one costs the same bytes.
    edit.apply(&mut locations, now, &mut std::iter::once(i64::MAX))?;
    let stored = location::details_bytes(&current.services, locations.iter().map(|l| &l.fields));
    budget.pay_for_stored(stored).await
}

/// Applies `edit` to business `business_id`'s locations in one store write.
async fn write(
    services: &Services,
    caller: &Caller,
    business_id: i64,
    edit: LocationEdit,
) -> Result<Option<BusinessDetail>> {
    let patch = BusinessPatch {
        location_edit: Some(edit),
        ..Default::default()
    };
    services
        .store
        .update_business(
            caller.account_id,
            business_id,
            caller.restrict_sub_id.as_deref(),
            patch,
            services.clock.now(),
        )
        .await
}

/// Creates a location in a business the caller may see (a 400 on `business_id` otherwise).
pub async fn create(
    services: &Services,
    caller: &Caller,
    body: &[u8],
    budget: &dyn WriteBudget,
) -> Result<Reply> {
    let body = json_object(body)?;
    let (business_id, fields) = location::edit::parse_create(&body)?;
    let no_business = || {
        ApiError::field(
            "business_id",
            format!("There is no business with id {business_id} that this key can use."),
        )
    };
    let current = visible_business(services, caller, business_id)
        .await?
        .ok_or_else(no_business)?;
    let edit = LocationEdit::Add(fields);
    pay_for(budget, &current, &edit, services.clock.now()).await?;
    let detail = write(services, caller, business_id, edit)
        .await?
        .ok_or_else(no_business)?;
    // The write appends the new location to the business's, as it read them.
    let created = detail
        .locations
        .last()
        .ok_or_else(|| ApiError::internal("a location create wrote no location"))?;
    tracing::info!(
        location_id = created.id,
        business_id,
        account_id = caller.account_id,
        "location created"
    );
    Ok(Reply::created(
        view::location(created, &detail.business),
        view::resource_uri(created.id),
    ))
}

pub async fn update(
    services: &Services,
    caller: &Caller,
    id: i64,
    body: &[u8],
    budget: &dyn WriteBudget,
) -> Result<Reply> {
    let body = json_object(body)?;
    let current = visible(services, caller, id).await?;
    let business_id = current.business.id;
    let edit = LocationEdit::Update(id, location::edit::parse_update(&body, id, business_id)?);
    pay_for(budget, &current, &edit, services.clock.now()).await?;
    let detail = write(services, caller, business_id, edit)
        .await?
        .ok_or_else(|| not_found(id))?;
    Ok(Reply::ok(shown(&detail, id)?))
}

/// Removes the location from its business: a hard delete, as a business update that
/// leaves it out of `locations` does (the id is never used again). 204.
pub async fn delete(services: &Services, caller: &Caller, id: i64) -> Result<Reply> {
    let current = visible(services, caller, id).await?;
    write(
        services,
        caller,
        current.business.id,
        LocationEdit::Remove(id),
    )
    .await?
    .ok_or_else(|| not_found(id))?;
    tracing::info!(
        location_id = id,
        account_id = caller.account_id,
        "location deleted"
    );
    Ok(Reply::no_content())
}

//! The site endpoints: list, detail, create, update and delete (which disables). What a
//! site looks like to a client is `view`, the list's query parameters `params`; the domain
//! (`crate::domain::site`) holds the record and the rules of a body.

mod params;
pub mod view;

use serde_json::Value;

use super::{Reply, Services, WriteBudget};
use crate::domain::account::Caller;
use crate::domain::business::BusinessDetail;
use crate::domain::site::{NewSite, Site, SitePatch};
use crate::domain::validate::json_object;
use crate::error::{ApiError, FieldErrors, Result};
use crate::operations::business::business_object;
use crate::operations::listing::{page_envelope, Paging};
use crate::operations::locations::view::location as location_object;
use crate::operations::locations::visible_business;
use crate::store::rules::no_such_business;
use crate::store::sites::site_write_units;
use crate::store::Page;

fn not_found(id: i64) -> ApiError {
    ApiError::NotFound(format!("no site with id {id}"))
}

/// Every id of `location_ids` must be a location of `business` (a 400 on `field.<i>`).
fn check_locations(field: &str, location_ids: &[i64], business: &BusinessDetail) -> Result<()> {
    let mut fields = FieldErrors::default();
    for (i, id) in location_ids.iter().enumerate() {
        if !business.locations.iter().any(|l| l.id == *id) {
            fields.add_at(
                &[field, &i.to_string()],
                format!(
                    "Location {id} is not a location of business {}; a site lists its own \
                     business's locations.",
                    business.business.id
                ),
            );
        }
    }
    fields.into_result()
}

/// The detail object. `business` is the site's business as read for this request, if any.
async fn detail(
    services: &Services,
    caller: &Caller,
    site: &Site,
    business: Option<BusinessDetail>,
) -> Result<Value> {
    let business = match business.filter(|b| b.business.id == site.business_id) {
        Some(business) => Some(business),
        None => visible_business(services, caller, site.business_id).await?,
    };
    let Some(business) = business else {
        return Ok(view::detail(site, None, Vec::new()));
    };
    let locations = site
        .location_ids
        .iter()
        .filter_map(|id| business.locations.iter().find(|l| l.id == *id))
        .map(|l| location_object(l, &business.business))
        .collect();
    Ok(view::detail(
        site,
        Some(business_object(&business.business)),
        locations,
    ))
}

/// A site the caller may see: its account's, and its sub id's if the key is restricted.
pub async fn visible_site(services: &Services, caller: &Caller, id: i64) -> Result<Option<Site>> {
    Ok(services
        .store
        .get_site(caller.account_id, id)
        .await?
        .filter(|s| s.visible_to(caller.restrict_sub_id.as_deref())))
}

pub async fn list(
    services: &Services,
    caller: &Caller,
    query_pairs: &[(String, String)],
) -> Result<Reply> {
    let paging = Paging::parse(query_pairs)?;
    let page = match params::query(query_pairs, paging, caller)? {
        Some(query) => services.store.list_sites(caller.account_id, &query).await?,
        None => Page::empty(),
    };
    Ok(Reply::ok(page_envelope(
        view::LIST_PATH,
        query_pairs,
        paging,
        &page,
        view::site,
    )))
}

pub async fn get(services: &Services, caller: &Caller, id: i64) -> Result<Reply> {
    let site = visible_site(services, caller, id)
        .await?
        .ok_or_else(|| not_found(id))?;
    Ok(Reply::ok(detail(services, caller, &site, None).await?))
}

/// Creates a site; it pays for the write units its transaction may use
/// ([`site_write_units`]) before anything is written.
pub async fn create(
    services: &Services,
    caller: &Caller,
    body: &[u8],
    budget: &dyn WriteBudget,
) -> Result<Reply> {
    let body = json_object(body)?;
    let mut new = NewSite::from_json(&body, caller)?;
    let business = visible_business(services, caller, new.business_id)
        .await?
        .ok_or_else(|| no_such_business(new.business_id))?;
    let field = if body.contains_key("locations") {
        "locations"
    } else {
        "location_ids"
    };
    check_locations(field, &new.location_ids, &business)?;
    if new.partner_sub_id.is_none() {
        new.partner_sub_id = business.business.partner_sub_id.clone();
    }
    let now = services.clock.now();
    let planned = new.clone().into_site(0, caller.account_id, now);
    budget
        .pay_for_write_units(site_write_units(None, &planned))
        .await?;
    let site = services
        .store
        .create_site(caller.account_id, new, services.clock.now())
        .await?;
    tracing::info!(
        site_id = site.id,
        account_id = caller.account_id,
        "site created"
    );
    let body = detail(services, caller, &site, Some(business)).await?;
    Ok(Reply::created(body, view::resource_uri(site.id)))
}

/// Updates a site; it pays for the write units its transaction may use, as a create.
pub async fn update(
    services: &Services,
    caller: &Caller,
    id: i64,
    body: &[u8],
    budget: &dyn WriteBudget,
) -> Result<Reply> {
    let body = json_object(body)?;
    let patch = SitePatch::from_json(&body, id, caller)?;
    let current = visible_site(services, caller, id)
        .await?
        .ok_or_else(|| not_found(id))?;
    let business_id = patch.business_id.unwrap_or(current.business_id);
    let mut business = None;
    if patch.business_id.is_some() || patch.location_ids.is_some() {
        let read = visible_business(services, caller, business_id)
            .await?
            .ok_or_else(|| no_such_business(business_id))?;
        match &patch.location_ids {
            Some(ids) => {
                let field = if body.contains_key("locations") {
                    "locations"
                } else {
                    "location_ids"
                };
                check_locations(field, ids, &read)?;
            }
            // The site moves to another business with the locations it has: they must be
            // that business's too.
            None => check_locations("locations", &current.location_ids, &read)?,
        }
        business = Some(read);
    }
    pay_for_patch(services, budget, &current, &patch).await?;
    let site = store_patch(services, caller, id, patch).await?;
    Ok(Reply::ok(detail(services, caller, &site, business).await?))
}

/// Stores `patch` to site `id` as the caller may (its sub id's only, if the key is
/// restricted); a 404 for a site it may not see.
async fn store_patch(
    services: &Services,
    caller: &Caller,
    id: i64,
    patch: SitePatch,
) -> Result<Site> {
    services
        .store
        .update_site(
            caller.account_id,
            id,
            caller.restrict_sub_id.as_deref(),
            patch,
            services.clock.now(),
        )
        .await?
        .ok_or_else(|| not_found(id))
}

/// Pays for what `patch` would write to `current` (the store applies it again to the site
/// as it then is: a race that changes the site in between changes its cost by a little).
async fn pay_for_patch(
    services: &Services,
    budget: &dyn WriteBudget,
    current: &Site,
    patch: &SitePatch,
) -> Result<()> {
    let mut after = current.clone();
    if !after.apply(patch, services.clock.now()) {
        return Ok(());
    }
    budget
        .pay_for_write_units(site_write_units(Some(current), &after))
        .await
}

/// Disables the site (`deleted: true`); `PUT {"deleted": false}` enables it again. 204,
/// also for a site already disabled. It pays for the entries it moves, as an update.
pub async fn delete(
    services: &Services,
    caller: &Caller,
    id: i64,
    budget: &dyn WriteBudget,
) -> Result<Reply> {
    let patch = SitePatch {
        deleted: Some(true),
        ..Default::default()
    };
    let current = visible_site(services, caller, id)
        .await?
        .ok_or_else(|| not_found(id))?;
    pay_for_patch(services, budget, &current, &patch).await?;
    store_patch(services, caller, id, patch).await?;
    Ok(Reply::no_content())
}

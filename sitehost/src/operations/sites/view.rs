//! How a site looks to a client: the list object, the detail object with its business and
//! locations, and its paths.

use serde_json::{json, Value};

use crate::clock::format_timestamp;
use crate::domain::site::Site;

/// The list's path: the base of its paging links and of every site's URI.
pub const LIST_PATH: &str = "/api/v2/sites/";

pub fn resource_uri(id: i64) -> String {
    format!("{LIST_PATH}{id}/")
}

/// The list object. There are no themes or users here: `theme_id`, `user_id` and
/// `partner_user_id` are kept as sent.
pub fn site(site: &Site) -> Value {
    json!({
        "id": site.id,
        "business_id": site.business_id,
        "user_id": site.user_id,
        "partner_user_id": site.partner_user_id,
        "domain": site.address.domain,
        "subdomain": site.address.subdomain,
        "base_directory": site.address.base_directory,
        "formatted_domain": site.formatted_domain(),
        "formatted_url": site.formatted_url(),
        "title": site.title,
        "partner_site_id": site.partner_site_id,
        "partner_sub_id": site.partner_sub_id,
        "theme_id": site.theme_id,
        "deleted": site.deleted,
        "published": site.published,
        "www_primary": site.www_primary,
        "location_ids": site.location_ids,
        "added": format_timestamp(site.added),
        "modified": format_timestamp(site.modified),
        "resource_uri": resource_uri(site.id),
    })
}

/// The detail object: the list one plus `business` (the business's list object, or null
/// when the caller cannot see it) and `locations` (the objects of `location_ids` that the
/// business still has, in that order).
pub fn detail(site: &Site, business: Option<Value>, locations: Vec<Value>) -> Value {
    let mut value = self::site(site);
    if let Value::Object(map) = &mut value {
        map.insert("business".into(), business.unwrap_or(Value::Null));
        map.insert("locations".into(), Value::Array(locations));
    }
    value
}

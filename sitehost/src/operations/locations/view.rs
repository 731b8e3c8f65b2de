//! How a location looks to a client, in `/api/v2/locations/` and nested in its business's
//! detail alike: every key present, null when unset.

use serde_json::{json, Map, Value};

use crate::clock::format_timestamp;
use crate::domain::business::Business;
use crate::domain::location::{hours, Location, TEXT_FIELDS};

/// The list's path: the base of its paging links and of every location's URI.
pub const LIST_PATH: &str = "/api/v2/locations/";

pub fn resource_uri(id: i64) -> String {
    format!("{LIST_PATH}{id}/")
}

/// The location object. `user_id` is its business's; `added` and `modified` are its
/// own, or its business's for a location stored before locations kept them.
pub fn location(location: &Location, business: &Business) -> Value {
    let f = &location.fields;
    let mut map = Map::new();
    map.insert("id".into(), json!(location.id));
    map.insert("business_id".into(), json!(business.id));
    map.insert("user_id".into(), json!(business.user_id));
    for name in TEXT_FIELDS {
        map.insert(name.into(), json!(f.text(name)));
    }
    map.insert("lat".into(), json!(f.lat));
    map.insert("lon".into(), json!(f.lon));
    let phones: Vec<Value> = f
        .phones
        .iter()
        .map(|p| json!({"type": p.kind, "number": p.number}))
        .collect();
    map.insert("phones".into(), Value::Array(phones));
    map.insert("description".into(), json!(f.description));
    map.insert("service_area_only".into(), json!(f.service_area_only));
    map.insert(
        "hours_of_operation".into(),
        json!(f.hours_by_type.get(hours::PRIMARY)),
    );
    map.insert("hours_by_type".into(), json!(f.hours_by_type));
    let added = location.added.unwrap_or(business.added);
    let modified = location.modified.unwrap_or(business.modified);
    map.insert("added".into(), json!(format_timestamp(added)));
    map.insert("modified".into(), json!(format_timestamp(modified)));
    map.insert("resource_uri".into(), json!(resource_uri(location.id)));
    Value::Object(map)
}

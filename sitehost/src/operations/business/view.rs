//! How a business looks to a client: the list object, the detail object with its services
//! and locations, and its paths. Built as `serde_json::Value` maps (keys sorted), which is
//! the JSON every test and the OpenAPI document hold; `json!` states each object in fewer
//! lines than a derived struct and its constructor would.

use serde_json::{json, Value};

use crate::clock::format_timestamp;
use crate::domain::business::{Business, BusinessDetail};
use crate::operations::locations::view::location;

/// The list's path: the base of its paging links and of every business's URI.
pub const LIST_PATH: &str = "/api/v2/businesses/";

pub fn resource_uri(id: i64) -> String {
    format!("{LIST_PATH}{id}/")
}

/// The list object.
pub fn business(business: &Business) -> Value {
    json!({
        "id": business.id,
        "business_name": business.business_name,
        "slug": business.slug,
        "deleted": business.deleted,
        "partner_business_id": business.partner_business_id,
        "partner_sub_id": business.partner_sub_id,
        "category_id": business.category_id,
        "logo_image_id": business.logo_image_id,
        "user_id": business.user_id,
        "added": format_timestamp(business.added),
        "modified": format_timestamp(business.modified),
        "resource_uri": resource_uri(business.id),
    })
}

/// The detail object: the list one plus `logo_image`, `images` (image objects),
/// `category` (`{"id": category_id}`: there is no category resource here), `services`
/// and `locations`.
pub fn detail(detail: &BusinessDetail, logo_image: Option<Value>, images: Vec<Value>) -> Value {
    let business = &detail.business;
    let mut value = self::business(business);
    if let Value::Object(map) = &mut value {
        map.insert("logo_image".into(), logo_image.unwrap_or(Value::Null));
        map.insert("images".into(), Value::Array(images));
        let category = business.category_id.map(|id| json!({ "id": id }));
        map.insert("category".into(), category.unwrap_or(Value::Null));
        map.insert("services".into(), json!(detail.services));
        let locations = detail.locations.iter().map(|l| location(l, business));
        map.insert("locations".into(), Value::Array(locations.collect()));
    }
    value
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::location::parse_locations;
    use crate::error::FieldErrors;

    #[test]
    fn locations_show_every_documented_key_and_no_unknown_one() {
        let mut fields = FieldErrors::default();
        let body = json!({"locations": [{
            "location_name": "Downtown", "street": "1 Main St", "city": "San Diego",
            "state": "CA", "postal_code": 92101, "country": "US", "lat": "32.7",
            "lon": -117.16, "phones": [{"type": "main", "number": "(619) 555-0100", "ext": 1}],
            "description": "By the harbour", "contact_email": "a@example.com",
            "partner_location_id": "loc-1", "hours": [], "made_up": {"x": 1}
        }]});
        let body = body.as_object().cloned().unwrap_or_default();
        let locations = parse_locations(&mut fields, &body).unwrap_or_default();
        assert!(fields.into_result().is_ok());
        let business = crate::domain::business::NewBusiness {
            business_name: "B".into(),
            ..Default::default()
        }
        .into_business(4, 1, 0);
        let shown = location(
            &crate::domain::location::Location {
                id: 9,
                fields: locations[0].fields.clone(),
                added: None,
                modified: None,
            },
            &business,
        );
        assert_eq!(shown["street2"], Value::Null);
        assert_eq!(shown["business_id"], json!(4));
        assert!(shown.get("hours").is_none() && shown.get("made_up").is_none());
        assert_eq!(shown["hours_by_type"], json!({}));
        assert_eq!(shown["hours_of_operation"], Value::Null);
        assert_eq!(shown["resource_uri"], json!("/api/v2/locations/9/"));
    }
}

//! A business's locations and services: what a client may send nested in a business body
//! (`locations`, `services`), their field rules and bounds, and how an update replaces
//! them. Stored with the business by both stores (docs/dynamodb-design.md); the business
//! detail's view (`operations::business`) shows them.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::domain::validate;
use crate::error::FieldErrors;

pub mod edit;
mod fields;
pub mod hours;

pub use fields::parse_location_body;

pub use edit::{LocationEdit, LocationPatch};
pub use hours::{HoursByType, Week};

/// Most locations one business may hold.
pub const MAX_LOCATIONS: usize = 50;
/// Most phones one location may hold.
pub const MAX_PHONES: usize = 10;
/// Most services one business may list.
pub const MAX_SERVICES: usize = 50;
/// Characters of a service, a phone's number or type, and every text field of a location
/// but `description`.
pub const MAX_TEXT_CHARS: usize = 255;
/// Characters of a location's `description`.
pub const MAX_DESCRIPTION_CHARS: usize = 2_000;
/// The bounds of `lat` and `lon` (either sign).
pub const MAX_LATITUDE: f64 = 90.0;
pub const MAX_LONGITUDE: f64 = 180.0;
/// Bytes of a business's locations as stored (compact JSON, ids included). Each field is
/// bounded, but 50 locations of full 4-byte fields would take 1.9 MB: this keeps the
/// DynamoDB item that holds them (with the services, at most 51 KB) far under 400 KB.
pub const MAX_LOCATIONS_BYTES: usize = 200_000;
/// What one location's id adds to its stored form (`"id":` and 20 digits, a comma).
const STORED_ID_BYTES: usize = 28;

/// The text fields of a location, in the order the detail view shows them.
pub const TEXT_FIELDS: [&str; 10] = [
    "partner_location_id",
    "location_name",
    "street",
    "street2",
    "city",
    "state",
    "postal_code",
    "country",
    "contact_email",
    "location_url",
];

/// One phone of a location: `{"type": "main", "number": "(619) 555-0100"}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Phone {
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    pub number: String,
}

/// What a client gives of a location (everything but its id).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LocationFields {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partner_location_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub street: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub street2: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub city: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub postal_code: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub country: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lat: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lon: Option<f64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub phones: Vec<Phone>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contact_email: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location_url: Option<String>,
    /// The location serves an area and shows no street address (then `street` is not
    /// required on create).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub service_area_only: bool,
    /// Weeks by hours type (`hours::PRIMARY` is `hours_of_operation`).
    #[serde(default, skip_serializing_if = "HoursByType::is_empty")]
    pub hours_by_type: HoursByType,
}

/// A location as a body gives it: its fields, and the id it claims (an update keeps the
/// id when it is one of the business's locations).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NewLocation {
    pub id: Option<i64>,
    pub fields: LocationFields,
    /// Whether the body gave hours: a kept location given none keeps its own (written
    /// through `/locations/`, unknown to older partner code that sends the rest).
    pub hours_given: bool,
}

/// A stored location: unique id (the `location` sequence, like business and image ids)
/// and its fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Location {
    pub id: i64,
    #[serde(flatten)]
    pub fields: LocationFields,
    /// Unix seconds; absent on locations stored before they were kept (the view shows the
    /// business's then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub added: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modified: Option<i64>,
}

impl LocationFields {
    /// The text field `name` (one of [`TEXT_FIELDS`]).
    pub fn text(&self, name: &str) -> Option<&str> {
        match name {
            "partner_location_id" => self.partner_location_id.as_deref(),
            "location_name" => self.location_name.as_deref(),
            "street" => self.street.as_deref(),
            "street2" => self.street2.as_deref(),
            "city" => self.city.as_deref(),
            "state" => self.state.as_deref(),
            "postal_code" => self.postal_code.as_deref(),
            "country" => self.country.as_deref(),
            "contact_email" => self.contact_email.as_deref(),
            "location_url" => self.location_url.as_deref(),
            _ => None,
        }
    }

    fn text_mut(&mut self, name: &str) -> Option<&mut Option<String>> {
        match name {
            "partner_location_id" => Some(&mut self.partner_location_id),
            "location_name" => Some(&mut self.location_name),
            "street" => Some(&mut self.street),
            "street2" => Some(&mut self.street2),
            "city" => Some(&mut self.city),
            "state" => Some(&mut self.state),
            "postal_code" => Some(&mut self.postal_code),
            "country" => Some(&mut self.country),
            "contact_email" => Some(&mut self.contact_email),
            "location_url" => Some(&mut self.location_url),
            _ => None,
        }
    }
}

/// How many new ids `given` needs to replace `current`: one per location that does not
/// keep an id (see [`replace`]).
pub fn ids_needed(current: &[Location], given: &[NewLocation]) -> usize {
    given.len() - kept_ids(current, given).iter().flatten().count()
}

/// The ids `given` keeps, in order: a location's `id` is kept when it names one of
/// `current` and no earlier location of `given` kept it. Any other id is ignored (a
/// read-only field, as on create) and the location gets a new one.
fn kept_ids(current: &[Location], given: &[NewLocation]) -> Vec<Option<i64>> {
    let mut used: Vec<i64> = Vec::with_capacity(given.len());
    given
        .iter()
        .map(|location| {
            let id = location
                .id
                .filter(|id| current.iter().any(|c| c.id == *id) && !used.contains(id))?;
            used.push(id);
            Some(id)
        })
        .collect()
}

/// The locations that replace `current`, as an update (or a create, with no `current`)
/// gives them: in the given order, ids kept as [`kept_ids`] says, the others taken from
/// `fresh` (at least [`ids_needed`] of them). Both stores apply this one rule.
pub fn replace(
    current: &[Location],
    given: &[NewLocation],
    now: i64,
    fresh: &mut impl Iterator<Item = i64>,
) -> Option<Vec<Location>> {
    let kept = kept_ids(current, given);
    given
        .iter()
        .zip(kept)
        .map(|(location, kept)| {
            let Some(before) = kept.and_then(|id| current.iter().find(|c| c.id == id)) else {
                return Some(Location {
                    id: fresh.next()?,
                    fields: location.fields.clone(),
                    added: Some(now),
                    modified: Some(now),
                });
            };
            let mut fields = location.fields.clone();
            if !location.hours_given {
                fields.hours_by_type = before.fields.hours_by_type.clone();
            }
            let changed = fields != before.fields;
            Some(Location {
                id: before.id,
                fields,
                added: before.added,
                modified: if changed { Some(now) } else { before.modified },
            })
        })
        .collect()
}

/// Bytes of these locations as stored: compact JSON, with their ids.
pub fn stored_bytes<'a>(locations: impl IntoIterator<Item = &'a LocationFields>) -> usize {
    locations
        .into_iter()
        .map(|l| serde_json::to_vec(l).map_or(usize::MAX, |v| v.len()) + STORED_ID_BYTES)
        .fold(2, usize::saturating_add)
}

/// Bytes of a business's services and locations as stored (each service with its quotes
/// and separator): what a write of them stores beside the business record.
pub fn details_bytes<'a>(
    services: &[String],
    locations: impl IntoIterator<Item = &'a LocationFields>,
) -> u64 {
    let services = services.iter().map(|s| s.len() + 3).sum::<usize>();
    u64::try_from(services.saturating_add(stored_bytes(locations))).unwrap_or(u64::MAX)
}

/// Parses `locations` of a body: absent is `None`; null is no locations. Errors are named
/// by their path (`locations.0.phones.1.number`).
pub fn parse_locations(
    fields: &mut FieldErrors,
    body: &Map<String, Value>,
) -> Option<Vec<NewLocation>> {
    let items = match body.get("locations")? {
        Value::Null => return Some(Vec::new()),
        Value::Array(items) => items,
        _ => {
            fields.add("locations", "Must be a list of location objects.");
            return None;
        }
    };
    if items.len() > MAX_LOCATIONS {
        fields.add(
            "locations",
            format!("Ensure this list has at most {MAX_LOCATIONS} locations."),
        );
        return None;
    }
    let mut ok = true;
    let mut parsed = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        match parse_location(fields, &i.to_string(), item) {
            Some(location) => parsed.push(location),
            None => ok = false,
        }
    }
    if !ok {
        return None;
    }
    let stored = stored_bytes(parsed.iter().map(|l| &l.fields));
    if stored > MAX_LOCATIONS_BYTES {
        fields.add(
            "locations",
            format!(
                "These locations take {stored} bytes; a business's locations may take at \
                 most {MAX_LOCATIONS_BYTES} bytes together."
            ),
        );
        return None;
    }
    Some(parsed)
}

fn parse_location(fields: &mut FieldErrors, index: &str, value: &Value) -> Option<NewLocation> {
    let Value::Object(body) = value else {
        fields.add_at(&["locations", index], "Must be an object.");
        return None;
    };
    parse_location_body(fields, &["locations", index], body)
}

/// Parses `services` of a body: absent is `None`; null is no services. Each is a
/// non-blank text (numbers taken as their text) of at most 255 characters, kept in order.
pub fn parse_services(fields: &mut FieldErrors, body: &Map<String, Value>) -> Option<Vec<String>> {
    let items = match body.get("services")? {
        Value::Null => return Some(Vec::new()),
        Value::Array(items) => items,
        _ => {
            fields.add("services", "Must be a list of strings.");
            return None;
        }
    };
    if items.len() > MAX_SERVICES {
        fields.add(
            "services",
            format!("Ensure this list has at most {MAX_SERVICES} services."),
        );
        return None;
    }
    let mut services = Vec::with_capacity(items.len());
    let mut ok = true;
    for (i, item) in items.iter().enumerate() {
        let parsed = match item {
            Value::String(_) | Value::Number(_) => validate::text_value(item, MAX_TEXT_CHARS)
                .and_then(|s| s.ok_or_else(|| "This field may not be blank.".to_string())),
            _ => Err("Must be a string.".to_string()),
        };
        match parsed {
            Ok(service) => services.push(service),
            Err(message) => {
                fields.add_at(&["services", &i.to_string()], message);
                ok = false;
            }
        }
    }
    ok.then_some(services)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ApiError;
    use serde_json::json;

    fn body(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    fn errors(v: Value) -> Value {
        let mut fields = FieldErrors::default();
        let b = body(v);
        parse_locations(&mut fields, &b);
        parse_services(&mut fields, &b);
        match fields.into_result() {
            Err(e @ ApiError::Validation(_)) => e.body(),
            other => panic!("expected a validation error, got {other:?}"),
        }
    }

    #[test]
    fn the_platform_example_is_kept_and_unknown_nested_fields_ignored() {
        let mut fields = FieldErrors::default();
        let b = body(json!({"locations": [{
            "location_name": "Downtown", "street": "1 Main St", "city": "San Diego",
            "state": "CA", "postal_code": 92101, "country": "US", "lat": "32.7",
            "lon": -117.16, "phones": [{"type": "main", "number": "(619) 555-0100", "ext": 1}],
            "description": "By the harbour", "contact_email": "a@example.com",
            "partner_location_id": "loc-1", "hours": [], "made_up": {"x": 1}
        }], "services": ["Repairs", 24]}));
        let locations = parse_locations(&mut fields, &b).unwrap_or_default();
        let services = parse_services(&mut fields, &b);
        assert!(fields.into_result().is_ok());
        assert_eq!(
            services,
            Some(vec!["Repairs".to_string(), "24".to_string()])
        );
        let f = &locations[0].fields;
        assert_eq!(f.postal_code.as_deref(), Some("92101"));
        assert_eq!((f.lat, f.lon), (Some(32.7), Some(-117.16)));
        assert_eq!(
            f.phones,
            vec![Phone {
                kind: Some("main".into()),
                number: "(619) 555-0100".into()
            }]
        );
        assert_eq!(f.partner_location_id.as_deref(), Some("loc-1"));
    }

    #[test]
    fn location_names_that_render_blank_are_refused() {
        let blank = ["\u{3164}", "\u{FFA0}", "\u{2800}", "\u{301}\u{302}"];
        let locations: Vec<Value> = blank
            .iter()
            .map(|name| json!({"location_name": name, "city": "\u{3164}"}))
            .chain([json!({"location_name": "Downtown \u{2800}"})])
            .collect();
        let message = json!([validate::BLANK_NAME_MESSAGE]);
        assert_eq!(
            errors(json!({ "locations": locations })),
            json!({"locations": {
                "0": {"location_name": message},
                "1": {"location_name": message},
                "2": {"location_name": message},
                "3": {"location_name": message},
            }})
        );
    }

    #[test]
    fn wrong_types_name_the_nested_field() {
        let body = errors(json!({
            "locations": [
                {"city": "ok"},
                {"city": ["x"], "lat": 91, "phones": [{"number": ""}, "555", {"number": 5, "type": {}}]},
                7
            ],
            "services": ["ok", {"name": "x"}]
        }));
        assert_eq!(
            body,
            json!({
                "locations": {
                    "1": {
                        "city": ["Must be a string or null."],
                        "lat": ["Must be a number from -90 to 90, or null."],
                        "phones": {
                            "0": {"number": ["This field may not be blank."]},
                            "1": ["Must be an object."],
                            "2": {"type": ["Must be a string or null."]}
                        }
                    },
                    "2": ["Must be an object."]
                },
                "services": {"1": ["Must be a string."]}
            })
        );
        assert_eq!(
            errors(json!({"locations": {"city": "x"}, "services": "x"})),
            json!({
                "locations": ["Must be a list of location objects."],
                "services": ["Must be a list of strings."]
            })
        );
    }

    #[test]
    fn lists_and_fields_are_bounded() {
        let many: Vec<Value> = (0..=MAX_LOCATIONS).map(|_| json!({})).collect();
        assert!(errors(json!({"locations": many}))["locations"].is_array());
        let services: Vec<Value> = (0..=MAX_SERVICES).map(|i| json!(i)).collect();
        assert!(errors(json!({"services": services}))["services"].is_array());
        let phones: Vec<Value> = (0..=MAX_PHONES).map(|_| json!({"number": "1"})).collect();
        assert!(
            errors(json!({"locations": [{"phones": phones}]}))["locations"]["0"]["phones"]
                .is_array()
        );
        let long = "x".repeat(MAX_TEXT_CHARS + 1);
        assert!(
            errors(json!({"locations": [{"street": long}]}))["locations"]["0"]["street"].is_array()
        );
        let description = "x".repeat(MAX_DESCRIPTION_CHARS + 1);
        assert!(
            errors(json!({"locations": [{"description": description}]}))["locations"]["0"]
                ["description"]
                .is_array()
        );
        // Every field within its bound, but 50 of them in 4-byte characters: over the total.
        let full = "\u{1F600}".repeat(MAX_TEXT_CHARS);
        let big: Vec<Value> = (0..MAX_LOCATIONS)
            .map(|_| json!({"street": full, "street2": full, "city": full, "state": full}))
            .collect();
        assert!(errors(json!({"locations": big}))["locations"].is_array());
    }

    #[test]
    fn updates_keep_the_ids_of_the_business_locations_once() {
        let current = vec![
            Location {
                id: 10,
                fields: LocationFields::default(),
                added: None,
                modified: None,
            },
            Location {
                id: 11,
                fields: LocationFields::default(),
                added: None,
                modified: None,
            },
        ];
        let given = |id: Option<i64>, city: &str| NewLocation {
            id,
            fields: LocationFields {
                city: Some(city.into()),
                ..Default::default()
            },
            hours_given: false,
        };
        let body = vec![
            given(Some(11), "a"),
            given(Some(11), "b"),
            given(Some(99), "c"),
            given(None, "d"),
        ];
        assert_eq!(ids_needed(&current, &body), 3);
        let replaced = replace(&current, &body, 0, &mut (50..)).unwrap_or_default();
        let ids: Vec<i64> = replaced.iter().map(|l| l.id).collect();
        assert_eq!(ids, [11, 50, 51, 52]);
        assert_eq!(replaced[1].fields.city.as_deref(), Some("b"));
        assert_eq!(replace(&current, &body, 0, &mut (50..51)), None);
    }

    #[test]
    fn stored_form_round_trips() {
        let location = Location {
            id: 3,
            fields: LocationFields {
                city: Some("X".into()),
                lat: Some(1.5),
                phones: vec![Phone {
                    kind: None,
                    number: "1".into(),
                }],
                ..Default::default()
            },
            added: None,
            modified: None,
        };
        let text = serde_json::to_string(&[&location]).unwrap_or_default();
        assert_eq!(
            text,
            r#"[{"id":3,"city":"X","lat":1.5,"phones":[{"number":"1"}]}]"#
        );
        let back: Vec<Location> = serde_json::from_str(&text).unwrap_or_default();
        assert_eq!(back, vec![location]);
    }
}

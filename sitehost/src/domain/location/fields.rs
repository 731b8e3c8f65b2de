//! One location's object in a body (nested at `locations.<i>`, or a location's own body):
//! its fields parsed and checked, each error named by its path.

use serde_json::{Map, Value};

use super::{hours, NewLocation, Phone, MAX_DESCRIPTION_CHARS, MAX_LATITUDE, MAX_LONGITUDE};
use super::{MAX_PHONES, MAX_TEXT_CHARS, TEXT_FIELDS};
use crate::domain::validate;
use crate::error::FieldErrors;

/// The path of field `rest` of the location at `prefix` (`["locations", "0"]`, or `[]` for
/// a location's own body).
fn at<'a>(prefix: &[&'a str], rest: &[&'a str]) -> Vec<&'a str> {
    prefix.iter().chain(rest).copied().collect()
}

/// A location's fields from its object at `prefix`; `None` (with the errors recorded) when
/// any is wrong. Unknown fields are ignored.
pub fn parse_location_body(
    fields: &mut FieldErrors,
    prefix: &[&str],
    body: &Map<String, Value>,
) -> Option<NewLocation> {
    let errors_before = fields.len();
    let id = match body.get("id") {
        None | Some(Value::Null) => None,
        Some(id) => {
            let parsed = validate::id_value(id);
            if parsed.is_none() {
                fields.add_at(&at(prefix, &["id"]), "Must be a positive integer or null.");
            }
            parsed
        }
    };
    let mut location = NewLocation {
        id,
        ..Default::default()
    };
    for name in TEXT_FIELDS {
        if let Some(value) = body.get(name) {
            match validate::text_value(value, MAX_TEXT_CHARS) {
                // A name that shows nothing would list as a nameless location.
                Ok(Some(text)) if name == "location_name" && validate::renders_blank(&text) => {
                    fields.add_at(&at(prefix, &[name]), validate::BLANK_NAME_MESSAGE);
                }
                Ok(text) => {
                    if let Some(slot) = location.fields.text_mut(name) {
                        *slot = text;
                    }
                }
                Err(message) => fields.add_at(&at(prefix, &[name]), message),
            }
        }
    }
    if let Some(value) = body.get("description") {
        match validate::prose_value(value, MAX_DESCRIPTION_CHARS) {
            Ok(text) => location.fields.description = text,
            Err(message) => fields.add_at(&at(prefix, &["description"]), message),
        }
    }
    location.fields.lat = coordinate(fields, prefix, body, "lat", MAX_LATITUDE);
    location.fields.lon = coordinate(fields, prefix, body, "lon", MAX_LONGITUDE);
    location.fields.phones = phones(fields, prefix, body);
    match body
        .get("service_area_only")
        .map(|v| (v, validate::bool_value(v)))
    {
        None | Some((Value::Null, _)) => {}
        Some((_, Some(flag))) => location.fields.service_area_only = flag,
        Some((_, None)) => fields.add_at(
            &at(prefix, &["service_area_only"]),
            "Must be true or false.",
        ),
    }
    // `hours` (a list of `{"type", "hours"}`) is what the platform's client PUTs to a
    // location; nested in a business body it was always ignored, and partner code sends
    // other shapes there, so only a location's own body reads it.
    let own_body = prefix.is_empty();
    if let Some(hours) = hours::parse_hours(fields, prefix, body, own_body) {
        location.fields.hours_by_type = hours;
        location.hours_given = true;
    }
    (fields.len() == errors_before).then_some(location)
}

/// A latitude or longitude: a number (or numeric text, as Tastypie took decimals) within
/// ±`limit`, or null.
fn coordinate(
    fields: &mut FieldErrors,
    prefix: &[&str],
    body: &Map<String, Value>,
    name: &str,
    limit: f64,
) -> Option<f64> {
    let parsed = match body.get(name)? {
        Value::Null => return None,
        Value::Number(n) => n.as_f64(),
        Value::String(s) if s.trim().is_empty() => return None,
        Value::String(s) => s.trim().parse::<f64>().ok(),
        _ => None,
    };
    match parsed.filter(|v| v.is_finite() && v.abs() <= limit) {
        Some(v) => Some(v),
        None => {
            fields.add_at(
                &at(prefix, &[name]),
                format!("Must be a number from -{limit} to {limit}, or null."),
            );
            None
        }
    }
}

fn phones(fields: &mut FieldErrors, prefix: &[&str], body: &Map<String, Value>) -> Vec<Phone> {
    let items = match body.get("phones") {
        None | Some(Value::Null) => return Vec::new(),
        Some(Value::Array(items)) => items,
        Some(_) => {
            fields.add_at(&at(prefix, &["phones"]), "Must be a list of phone objects.");
            return Vec::new();
        }
    };
    if items.len() > MAX_PHONES {
        fields.add_at(
            &at(prefix, &["phones"]),
            format!("Ensure this list has at most {MAX_PHONES} phones."),
        );
        return Vec::new();
    }
    let mut phones = Vec::with_capacity(items.len());
    for (j, item) in items.iter().enumerate() {
        let j = j.to_string();
        let Value::Object(phone) = item else {
            fields.add_at(&at(prefix, &["phones", &j]), "Must be an object.");
            continue;
        };
        let number = match phone.get("number") {
            None | Some(Value::Null) => Err("This field is required.".to_string()),
            Some(value) => validate::text_value(value, MAX_TEXT_CHARS)
                .and_then(|n| n.ok_or_else(|| "This field may not be blank.".to_string())),
        };
        let kind = match phone.get("type") {
            None => Ok(None),
            Some(value) => validate::text_value(value, MAX_TEXT_CHARS),
        };
        match (number, kind) {
            (Ok(number), Ok(kind)) => phones.push(Phone { kind, number }),
            (number, kind) => {
                if let Err(message) = number {
                    fields.add_at(&at(prefix, &["phones", &j, "number"]), message);
                }
                if let Err(message) = kind {
                    fields.add_at(&at(prefix, &["phones", &j, "type"]), message);
                }
            }
        }
    }
    phones
}

//! One location written through `/api/v2/locations/`: the create and update bodies, and
//! the edit a store applies to its business's locations as it reads them in its write (so
//! concurrent edits of one business's locations all survive, as business patches do).

use serde_json::{Map, Value};

use super::{parse_location_body, stored_bytes, Location, LocationFields, TEXT_FIELDS};
use super::{MAX_LOCATIONS, MAX_LOCATIONS_BYTES};
use crate::domain::validate;
use crate::error::{ApiError, FieldErrors, Result};

/// What a create requires besides `business_id` (`street` not with `service_area_only`).
pub const REQUIRED_FIELDS: [&str; 5] = ["street", "city", "state", "postal_code", "country"];

/// Fields of a location an update may name, besides the hours.
const PATCH_FIELDS: [&str; 5] = ["lat", "lon", "phones", "description", "service_area_only"];

/// A validated update of one location: the fields it names replace the location's, and
/// each hours type it gives replaces that type (the others stay).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LocationPatch {
    pub fields: LocationFields,
    /// The names of the fields the body gave (null included).
    pub present: Vec<&'static str>,
}

/// A change of one of a business's locations.
#[derive(Debug, Clone, PartialEq)]
pub enum LocationEdit {
    /// A new location, last of the business's; it takes one new id.
    Add(LocationFields),
    Update(i64, LocationPatch),
    /// Removes it from the business (a hard delete: the id is never used again).
    Remove(i64),
}

fn no_location(id: i64) -> ApiError {
    ApiError::NotFound(format!("no location with id {id}"))
}

impl LocationEdit {
    pub fn ids_needed(&self) -> usize {
        usize::from(matches!(self, LocationEdit::Add(_)))
    }

    /// Applies the edit to `locations` (the business's, as just read), a new location
    /// taking its id from `fresh`. `NotFound` when the location it names is not there (it
    /// was removed meanwhile); a 400 when the business would hold too many or too much.
    pub fn apply(
        &self,
        locations: &mut Vec<Location>,
        now: i64,
        fresh: &mut impl Iterator<Item = i64>,
    ) -> Result<()> {
        match self {
            LocationEdit::Add(fields) => {
                if locations.len() >= MAX_LOCATIONS {
                    return Err(ApiError::field(
                        "business_id",
                        format!(
                            "This business has {MAX_LOCATIONS} locations, the most one may \
                             hold; delete one first."
                        ),
                    ));
                }
                let id = fresh
                    .next()
                    .ok_or_else(|| ApiError::internal("too few location ids allocated"))?;
                locations.push(Location {
                    id,
                    fields: fields.clone(),
                    added: Some(now),
                    modified: Some(now),
                });
            }
            LocationEdit::Update(id, patch) => {
                let location = locations
                    .iter_mut()
                    .find(|l| l.id == *id)
                    .ok_or_else(|| no_location(*id))?;
                let before = location.fields.clone();
                patch.apply_to(&mut location.fields);
                if location.fields != before {
                    location.modified = Some(now);
                }
            }
            LocationEdit::Remove(id) => {
                let before = locations.len();
                locations.retain(|l| l.id != *id);
                if locations.len() == before {
                    return Err(no_location(*id));
                }
            }
        }
        let stored = stored_bytes(locations.iter().map(|l| &l.fields));
        if stored > MAX_LOCATIONS_BYTES {
            return Err(ApiError::field(
                "locations",
                format!(
                    "The business's locations would take {stored} bytes; they may take at \
                     most {MAX_LOCATIONS_BYTES} bytes together."
                ),
            ));
        }
        Ok(())
    }
}

impl LocationPatch {
    fn apply_to(&self, fields: &mut LocationFields) {
        let given = &self.fields;
        for name in &self.present {
            match *name {
                "lat" => fields.lat = given.lat,
                "lon" => fields.lon = given.lon,
                "phones" => fields.phones = given.phones.clone(),
                "description" => fields.description = given.description.clone(),
                "service_area_only" => fields.service_area_only = given.service_area_only,
                "hours" => {
                    for (kind, week) in &given.hours_by_type {
                        fields.hours_by_type.insert(kind.clone(), week.clone());
                    }
                }
                text => {
                    if let Some(slot) = fields.text_mut(text) {
                        *slot = given.text(text).map(str::to_string);
                    }
                }
            }
        }
    }
}

/// Missing required fields of a create, each named.
fn require(fields: &mut FieldErrors, location: &LocationFields, names: &[&'static str]) {
    for name in names {
        if *name == "street" && location.service_area_only {
            continue;
        }
        if location.text(name).is_none() {
            fields.add(
                name,
                if *name == "street" {
                    "This field is required (unless service_area_only is true)."
                } else {
                    "This field is required."
                },
            );
        }
    }
}

/// A create body: the business it joins and the new location's fields. Each missing
/// required field is named; `id` is read-only and ignored.
pub fn parse_create(body: &Map<String, Value>) -> Result<(i64, LocationFields)> {
    let mut fields = FieldErrors::default();
    let business_id = match body.get("business_id") {
        None | Some(Value::Null) => {
            fields.add("business_id", "This field is required.");
            None
        }
        Some(value) => {
            let id = validate::id_value(value);
            if id.is_none() {
                fields.add("business_id", "Must be a positive integer.");
            }
            id
        }
    };
    let parsed = parse_location_body(&mut fields, &[], body);
    if let Some(location) = &parsed {
        require(&mut fields, &location.fields, &REQUIRED_FIELDS);
    }
    fields.into_result()?;
    match (business_id, parsed) {
        (Some(business_id), Some(location)) => Ok((business_id, location.fields)),
        _ => Err(ApiError::internal(
            "a create body passed with a field missing",
        )),
    }
}

/// An update body of location `id` (currently of business `business_id`): the fields it
/// gives. An `id` other than the path's, or another `business_id`, is a 400 (a location
/// never moves to another business); a required field may not be emptied.
pub fn parse_update(body: &Map<String, Value>, id: i64, business_id: i64) -> Result<LocationPatch> {
    let mut fields = FieldErrors::default();
    match body.get("id") {
        None | Some(Value::Null) => {}
        Some(value) if validate::id_value(value) == Some(id) => {}
        Some(_) => fields.add(
            "id",
            format!("Must be {id}, the id in the path, or absent."),
        ),
    }
    match body.get("business_id") {
        None | Some(Value::Null) => {}
        Some(value) if validate::id_value(value) == Some(business_id) => {}
        Some(_) => fields.add(
            "business_id",
            format!(
                "A location stays with its business ({business_id}); create a location in \
                 the other business instead."
            ),
        ),
    }
    let parsed = parse_location_body(&mut fields, &[], body);
    let mut patch = LocationPatch::default();
    if let Some(location) = parsed {
        patch.present = TEXT_FIELDS
            .iter()
            .chain(&PATCH_FIELDS)
            .copied()
            .filter(|name| body.contains_key(*name))
            .collect();
        if location.hours_given {
            patch.present.push("hours");
        }
        let emptied: Vec<&'static str> = REQUIRED_FIELDS
            .iter()
            .copied()
            .filter(|name| patch.present.contains(name) && *name != "street")
            .collect();
        require(&mut fields, &location.fields, &emptied);
        patch.fields = location.fields;
    }
    fields.into_result()?;
    Ok(patch)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn a_create_names_each_missing_field() {
        let err = parse_create(&object(json!({"city": "X"}))).err();
        assert_eq!(
            err.map(|e| e.body()),
            Some(json!({
                "business_id": ["This field is required."],
                "street": ["This field is required (unless service_area_only is true)."],
                "state": ["This field is required."],
                "postal_code": ["This field is required."],
                "country": ["This field is required."],
            }))
        );
        let area = json!({"business_id": 3, "service_area_only": true, "city": "X",
                          "state": "CA", "postal_code": "1", "country": "US"});
        assert!(parse_create(&object(area)).is_ok());
    }

    #[test]
    fn an_update_replaces_what_it_names_and_the_hours_types_it_gives() {
        let week = json!([[], [], [], [], [], [], ["24_HOURS"]]);
        let mut location = Location {
            id: 5,
            fields: LocationFields {
                city: Some("Old".into()),
                street: Some("1 Main".into()),
                ..Default::default()
            },
            added: Some(1),
            modified: Some(1),
        };
        location
            .fields
            .hours_by_type
            .insert("holiday".into(), vec![json!([]); 7]);
        let mut locations = vec![location];
        let patch = parse_update(
            &object(json!({"city": "New", "hours": [{"type": "primary", "hours": week}]})),
            5,
            9,
        );
        let edit = LocationEdit::Update(5, patch.unwrap_or_default());
        assert!(edit
            .apply(&mut locations, 7, &mut std::iter::empty())
            .is_ok());
        let fields = &locations[0].fields;
        assert_eq!(fields.city.as_deref(), Some("New"));
        assert_eq!(fields.street.as_deref(), Some("1 Main"));
        assert_eq!(fields.hours_by_type.len(), 2);
        assert_eq!(locations[0].modified, Some(7));
        let moved = parse_update(&object(json!({"business_id": 8})), 5, 9).err();
        assert!(moved.is_some_and(|e| e.body()["business_id"].is_array()));
        let emptied = parse_update(&object(json!({"city": null})), 5, 9).err();
        assert!(emptied.is_some_and(|e| e.body()["city"].is_array()));
        let gone = LocationEdit::Remove(6).apply(&mut locations, 7, &mut std::iter::empty());
        assert!(matches!(gone, Err(ApiError::NotFound(_))));
    }
}

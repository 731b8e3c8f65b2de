//! Businesses: the record, the rules of what a client may send in a create or update
//! body, and the filters and orders of a list. What a business looks like over HTTP (its
//! JSON, its paths, the list's query parameters) is `operations::business`.

use chrono::NaiveDate;
use serde_json::{Map, Value};

use crate::domain::account::Caller;
use crate::domain::location::{self, Location, LocationEdit, NewLocation};
use crate::domain::validate;
use crate::error::{ApiError, FieldErrors, Result};

pub const MAX_NAME_CHARS: usize = 255;
pub const MAX_PARTNER_ID_CHARS: usize = 255;

#[derive(Debug, Clone, PartialEq)]
pub struct Business {
    pub id: i64,
    pub account_id: i64,
    pub business_name: String,
    pub slug: String,
    pub deleted: bool,
    pub partner_business_id: Option<String>,
    pub partner_sub_id: Option<String>,
    pub category_id: Option<i64>,
    pub logo_image_id: Option<i64>,
    pub user_id: i64,
    /// Unix seconds.
    pub added: i64,
    pub modified: i64,
}

/// A business with what only its detail view shows: its services and its locations. The
/// stores keep them apart from the record, so lists never read them.
#[derive(Debug, Clone, PartialEq)]
pub struct BusinessDetail {
    pub business: Business,
    pub services: Vec<String>,
    pub locations: Vec<Location>,
}

/// A validated create request; the store assigns `id` and the timestamps (and the ids of
/// the locations).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NewBusiness {
    pub business_name: String,
    pub partner_business_id: Option<String>,
    pub partner_sub_id: Option<String>,
    pub category_id: Option<i64>,
    pub logo_image_id: Option<i64>,
    pub user_id: i64,
    pub services: Vec<String>,
    /// Their `id`s are ignored: every location of a new business gets a new id.
    pub locations: Vec<NewLocation>,
}

/// A validated update: `None` leaves a field as it is; `Some(None)` sets a nullable field
/// to null.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BusinessPatch {
    pub business_name: Option<String>,
    pub deleted: Option<bool>,
    pub partner_business_id: Option<Option<String>>,
    pub partner_sub_id: Option<Option<String>>,
    pub category_id: Option<Option<i64>>,
    pub logo_image_id: Option<Option<i64>>,
    /// Replaces the services.
    pub services: Option<Vec<String>>,
    /// Replaces the locations (`location::replace`: a location keeps the `id` it gives
    /// when that is one of this business's locations).
    pub locations: Option<Vec<NewLocation>>,
    /// Changes one location (`/api/v2/locations/`), applied to the locations as the store
    /// reads them in its write.
    pub location_edit: Option<LocationEdit>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BusinessOrder {
    IdAsc,
    IdDesc,
    NameAsc,
    NameDesc,
}

impl BusinessOrder {
    pub fn by_name(self) -> bool {
        matches!(self, Self::NameAsc | Self::NameDesc)
    }

    pub fn descending(self) -> bool {
        matches!(self, Self::IdDesc | Self::NameDesc)
    }
}

/// The filters of a business list. `partner_sub_id` also carries a key's restriction.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BusinessFilter {
    pub deleted: Option<bool>,
    pub partner_sub_id: Option<String>,
    pub added_date: Option<NaiveDate>,
    pub partner_business_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct BusinessQuery {
    pub filter: BusinessFilter,
    pub order: BusinessOrder,
    pub limit: u64,
    pub offset: u64,
}

impl Business {
    /// Whether a key restricted to `restrict_sub_id` (if any) may see this business.
    pub fn visible_to(&self, restrict_sub_id: Option<&str>) -> bool {
        restrict_sub_id.is_none_or(|sub| self.partner_sub_id.as_deref() == Some(sub))
    }

    /// Applies a validated patch; returns whether anything changed.
    pub fn apply(&mut self, patch: &BusinessPatch, now: i64) -> bool {
        let before = self.clone();
        if let Some(name) = &patch.business_name {
            self.business_name = name.clone();
            self.slug = slugify(name);
        }
        if let Some(deleted) = patch.deleted {
            self.deleted = deleted;
        }
        if let Some(v) = &patch.partner_business_id {
            self.partner_business_id = v.clone();
        }
        if let Some(v) = &patch.partner_sub_id {
            self.partner_sub_id = v.clone();
        }
        if let Some(v) = patch.category_id {
            self.category_id = v;
        }
        if let Some(v) = patch.logo_image_id {
            self.logo_image_id = v;
        }
        let changed = *self != before;
        if changed {
            self.modified = now;
        }
        changed
    }
}

impl BusinessDetail {
    /// A business without services or locations.
    pub fn bare(business: Business) -> Self {
        BusinessDetail {
            business,
            services: Vec::new(),
            locations: Vec::new(),
        }
    }

    /// How many new location ids applying `patch` takes.
    pub fn ids_needed(&self, patch: &BusinessPatch) -> usize {
        let replaced = patch
            .locations
            .as_ref()
            .map_or(0, |given| location::ids_needed(&self.locations, given));
        replaced
            + patch
                .location_edit
                .as_ref()
                .map_or(0, LocationEdit::ids_needed)
    }

    /// Applies a validated patch, new locations taking their ids from `fresh` (at least
    /// [`Self::ids_needed`] of them); returns whether anything changed.
    pub fn apply(
        &mut self,
        patch: &BusinessPatch,
        now: i64,
        fresh: &mut impl Iterator<Item = i64>,
    ) -> Result<bool> {
        let before = self.clone();
        self.business.apply(patch, now);
        if let Some(services) = &patch.services {
            self.services = services.clone();
        }
        if let Some(given) = &patch.locations {
            self.locations = location::replace(&before.locations, given, now, fresh)
                .ok_or_else(|| ApiError::internal("too few location ids allocated"))?;
        }
        if let Some(edit) = &patch.location_edit {
            edit.apply(&mut self.locations, now, fresh)?;
        }
        let changed = *self != before;
        if changed {
            self.business.modified = now;
        }
        Ok(changed)
    }
}

/// Django-style slug: ASCII letters and digits, runs of anything else become one hyphen.
pub fn slugify(name: &str) -> String {
    let mut slug = String::with_capacity(name.len());
    for c in name.chars() {
        if c.is_ascii_alphanumeric() {
            slug.push(c.to_ascii_lowercase());
        } else if c == '\'' {
            // "Joe's Pizza" -> "joes-pizza", as Django does.
        } else if !slug.is_empty() && !slug.ends_with('-') {
            slug.push('-');
        }
    }
    while slug.ends_with('-') {
        slug.pop();
    }
    if slug.is_empty() {
        slug.push_str("business");
    }
    slug
}

fn parse_name(fields: &mut FieldErrors, value: &Value) -> Option<String> {
    let Some(raw) = value.as_str() else {
        fields.add("business_name", "Must be a string.");
        return None;
    };
    // Normalised before any check, so length, slug and sort key see what is stored.
    let name = validate::nfc(raw.trim());
    if name.is_empty() {
        fields.add("business_name", "This field may not be blank.");
        return None;
    }
    if name.chars().count() > MAX_NAME_CHARS {
        fields.add(
            "business_name",
            format!("Ensure this value has at most {MAX_NAME_CHARS} characters."),
        );
        return None;
    }
    if name.chars().any(char::is_control) {
        fields.add("business_name", "Must not contain control characters.");
        return None;
    }
    if let Some(c) = validate::format_char(&name) {
        fields.add("business_name", validate::format_char_message(c));
        return None;
    }
    if validate::renders_blank(&name) {
        fields.add("business_name", validate::BLANK_NAME_MESSAGE);
        return None;
    }
    Some(name)
}

/// The sub id a body asks for, checked against the key's restriction.
fn checked_sub_id(
    fields: &mut FieldErrors,
    caller: &Caller,
    requested: Option<Option<String>>,
) -> Option<Option<String>> {
    match (&caller.restrict_sub_id, requested) {
        (Some(fixed), Some(asked)) if asked.as_ref() != Some(fixed) => {
            fields.add(
                "partner_sub_id",
                format!("This key may only use partner_sub_id '{fixed}'."),
            );
            None
        }
        (Some(fixed), _) => Some(Some(fixed.clone())),
        (None, requested) => requested,
    }
}

impl NewBusiness {
    /// Validates a create body. Unknown and read-only fields are ignored.
    pub fn from_json(body: &Map<String, Value>, caller: &Caller) -> Result<Self> {
        let mut fields = FieldErrors::default();
        let business_name = match body.get("business_name") {
            None | Some(Value::Null) => {
                fields.add("business_name", "This field is required.");
                None
            }
            Some(v) => parse_name(&mut fields, v),
        };
        let partner_business_id = validate::optional_text(
            &mut fields,
            body,
            "partner_business_id",
            MAX_PARTNER_ID_CHARS,
        )
        .flatten();
        let sub =
            validate::optional_text(&mut fields, body, "partner_sub_id", MAX_PARTNER_ID_CHARS);
        let partner_sub_id = checked_sub_id(&mut fields, caller, sub).flatten();
        let category_id = validate::optional_id(&mut fields, body, "category_id").flatten();
        let logo_image_id = validate::optional_id(&mut fields, body, "logo_image_id").flatten();
        let services = location::parse_services(&mut fields, body).unwrap_or_default();
        let locations = location::parse_locations(&mut fields, body).unwrap_or_default();
        fields.into_result()?;
        Ok(NewBusiness {
            business_name: business_name.unwrap_or_default(),
            partner_business_id,
            partner_sub_id,
            category_id,
            logo_image_id,
            user_id: caller.user_id,
            services,
            locations,
        })
    }

    /// The detail this request becomes, its locations taking ids from `fresh` (as many as
    /// it has locations).
    pub fn into_detail(
        self,
        id: i64,
        account_id: i64,
        now: i64,
        fresh: &mut impl Iterator<Item = i64>,
    ) -> Result<BusinessDetail> {
        let locations = location::replace(&[], &self.locations, now, fresh)
            .ok_or_else(|| ApiError::internal("too few location ids allocated"))?;
        let services = self.services.clone();
        Ok(BusinessDetail {
            business: self.into_business(id, account_id, now),
            services,
            locations,
        })
    }

    /// The record this request becomes, once the store has picked an id.
    pub fn into_business(self, id: i64, account_id: i64, now: i64) -> Business {
        Business {
            id,
            account_id,
            slug: slugify(&self.business_name),
            business_name: self.business_name,
            deleted: false,
            partner_business_id: self.partner_business_id,
            partner_sub_id: self.partner_sub_id,
            category_id: self.category_id,
            logo_image_id: self.logo_image_id,
            user_id: self.user_id,
            added: now,
            modified: now,
        }
    }
}

impl BusinessPatch {
    /// Validates an update body for the business at `path_id`. A body `id` must match it.
    pub fn from_json(body: &Map<String, Value>, path_id: i64, caller: &Caller) -> Result<Self> {
        let mut fields = FieldErrors::default();
        if let Some(id) = body.get("id") {
            match validate::id_value(id) {
                Some(id) if id == path_id => {}
                Some(_) => fields.add(
                    "id",
                    format!("Does not match the id in the path ({path_id})."),
                ),
                None => fields.add("id", "Must be a positive integer."),
            }
        }
        let business_name = match body.get("business_name") {
            None => None,
            Some(Value::Null) => {
                fields.add("business_name", "This field may not be null.");
                None
            }
            Some(v) => parse_name(&mut fields, v),
        };
        let deleted = match body.get("deleted") {
            None => None,
            Some(v) => match validate::bool_value(v) {
                Some(b) => Some(b),
                None => {
                    fields.add("deleted", "Must be a boolean.");
                    None
                }
            },
        };
        let partner_business_id = validate::optional_text(
            &mut fields,
            body,
            "partner_business_id",
            MAX_PARTNER_ID_CHARS,
        );
        let sub =
            validate::optional_text(&mut fields, body, "partner_sub_id", MAX_PARTNER_ID_CHARS);
        let partner_sub_id = match (&caller.restrict_sub_id, sub) {
            // A restricted key never moves a business out of its own sub id.
            (Some(_), None) => None,
            (_, requested) => checked_sub_id(&mut fields, caller, requested),
        };
        let category_id = validate::optional_id(&mut fields, body, "category_id");
        let logo_image_id = validate::optional_id(&mut fields, body, "logo_image_id");
        let services = location::parse_services(&mut fields, body);
        let locations = location::parse_locations(&mut fields, body);
        fields.into_result()?;
        Ok(BusinessPatch {
            business_name,
            deleted,
            partner_business_id,
            partner_sub_id,
            category_id,
            logo_image_id,
            services,
            locations,
            location_edit: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn caller() -> Caller {
        Caller {
            account_id: 1,
            user_id: 7,
            restrict_sub_id: None,
        }
    }

    fn body(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn slugs_follow_django() {
        assert_eq!(slugify("Joe's Pizza & Grill"), "joes-pizza-grill");
        assert_eq!(slugify("  --Hello__World--  "), "hello-world");
        assert_eq!(slugify("日本"), "business");
    }

    #[test]
    fn create_requires_a_trimmed_name() {
        let new = NewBusiness::from_json(&body(json!({"business_name": "  Cafe  "})), &caller());
        assert_eq!(new.map(|b| b.business_name).ok(), Some("Cafe".to_string()));
        for bad in [
            json!({}),
            json!({"business_name": 5}),
            json!({"business_name": "   "}),
            json!({"business_name": "x".repeat(256)}),
        ] {
            let err = NewBusiness::from_json(&body(bad.clone()), &caller());
            assert!(
                matches!(err, Err(ApiError::Validation(ref m)) if m.contains_key("business_name")),
                "{bad}"
            );
        }
        assert!(NewBusiness::from_json(
            &body(json!({"business_name": "x".repeat(255)})),
            &caller()
        )
        .is_ok());
    }

    #[test]
    fn names_refuse_format_characters_on_create_and_update() {
        for c in ['\u{202E}', '\u{2066}', '\u{200B}', '\u{200F}', '\u{FEFF}'] {
            let name = format!("Harbour{c} Cafe");
            let create = NewBusiness::from_json(&body(json!({"business_name": name})), &caller());
            let update =
                BusinessPatch::from_json(&body(json!({"business_name": name})), 1, &caller());
            let expected = format!(
                "Must not contain invisible formatting characters (found U+{:04X}).",
                u32::from(c)
            );
            for result in [create.map(|_| ()), update.map(|_| ())] {
                match result {
                    Err(ApiError::Validation(m)) => {
                        assert_eq!(m.get("business_name"), Some(&vec![expected.clone()]))
                    }
                    other => panic!("{c:?}: expected a 400 on business_name, got {other:?}"),
                }
            }
        }
    }

    #[test]
    fn names_that_render_blank_are_refused_on_create_and_update() {
        for name in [
            "\u{3164}",
            "\u{FFA0}",
            "\u{2800}",
            "\u{115F}\u{1160}",
            "\u{301}",
            "\u{20DD}\u{FE0F}",
            " \u{3164} \u{2800} ",
        ] {
            let create = NewBusiness::from_json(&body(json!({"business_name": name})), &caller());
            let update =
                BusinessPatch::from_json(&body(json!({"business_name": name})), 1, &caller());
            for result in [create.map(|_| ()), update.map(|_| ())] {
                match result {
                    Err(ApiError::Validation(m)) => assert_eq!(
                        m.get("business_name"),
                        Some(&vec![validate::BLANK_NAME_MESSAGE.to_string()]),
                        "{name:?}"
                    ),
                    other => panic!("{name:?}: expected a 400 on business_name, got {other:?}"),
                }
            }
        }
        // A filler beside a letter shows the letter.
        assert!(
            NewBusiness::from_json(&body(json!({"business_name": "\u{3164}K"})), &caller()).is_ok()
        );
    }

    #[test]
    fn names_are_stored_nfc_normalised() {
        let decomposed = "Cafe\u{301} Ole\u{301}";
        let new = NewBusiness::from_json(&body(json!({"business_name": decomposed})), &caller());
        assert_eq!(
            new.map(|b| b.business_name).ok().as_deref(),
            Some("Caf\u{E9} Ol\u{E9}")
        );
        let patch =
            BusinessPatch::from_json(&body(json!({"business_name": decomposed})), 1, &caller());
        assert_eq!(
            patch.ok().and_then(|p| p.business_name).as_deref(),
            Some("Caf\u{E9} Ol\u{E9}")
        );
        // 255 characters once composed pass, though 510 code points were sent.
        let long = "e\u{301}".repeat(255);
        assert!(NewBusiness::from_json(&body(json!({"business_name": long})), &caller()).is_ok());
    }

    #[test]
    fn restricted_keys_pin_the_sub_id() {
        let restricted = Caller {
            restrict_sub_id: Some("s1".into()),
            ..caller()
        };
        let new = NewBusiness::from_json(&body(json!({"business_name": "A"})), &restricted);
        assert_eq!(
            new.ok().and_then(|b| b.partner_sub_id),
            Some("s1".to_string())
        );
        let other = NewBusiness::from_json(
            &body(json!({"business_name": "A", "partner_sub_id": "s2"})),
            &restricted,
        );
        assert!(other.is_err());
    }

    #[test]
    fn patch_id_must_match_path() {
        assert!(BusinessPatch::from_json(&body(json!({"id": 3})), 3, &caller()).is_ok());
        assert!(BusinessPatch::from_json(&body(json!({"id": 4})), 3, &caller()).is_err());
        assert!(BusinessPatch::from_json(&body(json!({"id": "x"})), 3, &caller()).is_err());
    }
}

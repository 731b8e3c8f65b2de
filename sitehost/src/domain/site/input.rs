//! What a client may send to create or update a site. Unknown and read-only fields
//! (`formatted_domain`, `added`, ...) are ignored; every problem is named by its field.

use serde_json::{Map, Value};

use super::address::{self, Address};
use super::{NewSite, SitePatch, MAX_PARTNER_ID_CHARS, MAX_SITE_LOCATIONS, MAX_TITLE_CHARS};
use crate::domain::account::Caller;
use crate::domain::validate;
use crate::error::{ApiError, FieldErrors, Result};

fn title(fields: &mut FieldErrors, value: &Value) -> Option<String> {
    let Some(raw) = value.as_str() else {
        fields.add("title", "Must be a string.");
        return None;
    };
    let title = validate::nfc(raw.trim());
    let problem = if title.is_empty() || validate::renders_blank(&title) {
        Some(validate::BLANK_NAME_MESSAGE.to_string())
    } else if title.chars().count() > MAX_TITLE_CHARS {
        Some(format!(
            "Ensure this value has at most {MAX_TITLE_CHARS} characters."
        ))
    } else if title.chars().any(char::is_control) {
        Some("Must not contain control characters.".into())
    } else {
        validate::format_char(&title).map(validate::format_char_message)
    };
    match problem {
        Some(message) => {
            fields.add("title", message);
            None
        }
        None => Some(title),
    }
}

/// A text field checked by `check` (a host name, a directory), when present.
fn checked(
    fields: &mut FieldErrors,
    body: &Map<String, Value>,
    name: &str,
    check: fn(&str) -> std::result::Result<String, String>,
) -> Option<String> {
    let value = body.get(name)?;
    let Some(text) = value.as_str() else {
        fields.add(name, "Must be a string.");
        return None;
    };
    check(text)
        .map_err(|message| fields.add(name, message))
        .ok()
}

fn boolean(fields: &mut FieldErrors, body: &Map<String, Value>, name: &str) -> Option<bool> {
    let value = body.get(name)?;
    let parsed = validate::bool_value(value);
    if parsed.is_none() {
        fields.add(name, "Must be true or false.");
    }
    parsed
}

/// `locations` (ids, or location objects with their `id`, as the detail shows them), or
/// else `location_ids`: distinct ids, at most [`MAX_SITE_LOCATIONS`].
fn location_ids(fields: &mut FieldErrors, body: &Map<String, Value>) -> Option<Vec<i64>> {
    let name = if body.contains_key("locations") {
        "locations"
    } else {
        "location_ids"
    };
    let items = match body.get(name)? {
        Value::Null => return Some(Vec::new()),
        Value::Array(items) => items,
        _ => {
            fields.add(name, "Must be a list of location ids.");
            return None;
        }
    };
    if items.len() > MAX_SITE_LOCATIONS {
        fields.add(
            name,
            format!("Ensure this list has at most {MAX_SITE_LOCATIONS} locations."),
        );
        return None;
    }
    let mut ids = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let id = match item {
            Value::Object(object) => object.get("id").and_then(validate::id_value),
            other => validate::id_value(other),
        };
        match id {
            Some(id) if ids.contains(&id) => {
                fields.add_at(
                    &[name, &i.to_string()],
                    format!("Location {id} is listed twice."),
                );
            }
            Some(id) => ids.push(id),
            None => fields.add_at(
                &[name, &i.to_string()],
                "Must be a location id (a positive integer) or an object with its id.",
            ),
        }
    }
    (ids.len() == items.len()).then_some(ids)
}

/// The sub id a body asks for, checked against the key's restriction.
fn sub_id(
    fields: &mut FieldErrors,
    body: &Map<String, Value>,
    caller: &Caller,
) -> Option<Option<String>> {
    let asked = validate::optional_text(fields, body, "partner_sub_id", MAX_PARTNER_ID_CHARS);
    match (&caller.restrict_sub_id, asked) {
        (Some(fixed), Some(asked)) if asked.as_ref() != Some(fixed) => {
            fields.add(
                "partner_sub_id",
                format!("This key may only use partner_sub_id '{fixed}'."),
            );
            None
        }
        (Some(fixed), _) => Some(Some(fixed.clone())),
        (None, asked) => asked,
    }
}

fn required(fields: &mut FieldErrors, body: &Map<String, Value>, name: &str) -> bool {
    let present = !matches!(body.get(name), None | Some(Value::Null));
    if !present {
        fields.add(name, "This field is required.");
    }
    present
}

impl NewSite {
    /// Validates a create body. `partner_sub_id` is `None` unless given (or fixed by the
    /// key): the operation then gives the site its business's.
    pub fn from_json(body: &Map<String, Value>, caller: &Caller) -> Result<Self> {
        let mut fields = FieldErrors::default();
        for name in ["domain", "subdomain", "title", "business_id"] {
            required(&mut fields, body, name);
        }
        let domain = checked(&mut fields, body, "domain", address::host);
        let subdomain = checked(&mut fields, body, "subdomain", address::host);
        let base_directory = checked(&mut fields, body, "base_directory", address::base_directory);
        let title = body.get("title").and_then(|v| title(&mut fields, v));
        let business_id = validate::optional_id(&mut fields, body, "business_id").flatten();
        let user_id = validate::optional_id(&mut fields, body, "user_id").flatten();
        let theme_id = validate::optional_id(&mut fields, body, "theme_id").flatten();
        let partner_site_id =
            validate::optional_text(&mut fields, body, "partner_site_id", MAX_PARTNER_ID_CHARS);
        let partner_user_id =
            validate::optional_text(&mut fields, body, "partner_user_id", MAX_PARTNER_ID_CHARS);
        let partner_sub_id = sub_id(&mut fields, body, caller);
        let published = boolean(&mut fields, body, "published");
        let www_primary = boolean(&mut fields, body, "www_primary");
        let location_ids = location_ids(&mut fields, body);
        fields.into_result()?;
        let (Some(domain), Some(subdomain), Some(title), Some(business_id)) =
            (domain, subdomain, title, business_id)
        else {
            return Err(ApiError::internal("a required site field passed unchecked"));
        };
        Ok(NewSite {
            business_id,
            user_id: user_id.unwrap_or(caller.user_id),
            www_primary: www_primary.unwrap_or(subdomain == "www"),
            address: Address {
                domain,
                subdomain,
                base_directory: base_directory.unwrap_or_else(|| "/".into()),
            },
            title,
            partner_site_id: partner_site_id.flatten(),
            partner_sub_id: partner_sub_id.flatten(),
            partner_user_id: partner_user_id.flatten(),
            theme_id,
            published: published.unwrap_or(true),
            location_ids: location_ids.unwrap_or_default(),
        })
    }
}

impl SitePatch {
    /// Validates an update body for site `id`: fields absent stay as they are; an `id` in
    /// the body must be the path's.
    pub fn from_json(body: &Map<String, Value>, id: i64, caller: &Caller) -> Result<Self> {
        let mut fields = FieldErrors::default();
        if let Some(given) = body.get("id").filter(|v| !v.is_null()) {
            if validate::id_value(given) != Some(id) {
                fields.add(
                    "id",
                    format!("Must be {id}, the id in the path, or absent."),
                );
            }
        }
        for name in ["domain", "subdomain", "title", "business_id", "user_id"] {
            if body.get(name).is_some_and(Value::is_null) {
                fields.add(name, "This field may not be null.");
            }
        }
        let nonnull = |name: &str| body.get(name).filter(|v| !v.is_null());
        let patch = SitePatch {
            business_id: validate::optional_id(&mut fields, body, "business_id").flatten(),
            user_id: validate::optional_id(&mut fields, body, "user_id").flatten(),
            domain: checked(&mut fields, body, "domain", address::host),
            subdomain: checked(&mut fields, body, "subdomain", address::host),
            base_directory: match body.get("base_directory") {
                Some(Value::Null) => Some("/".into()),
                _ => checked(&mut fields, body, "base_directory", address::base_directory),
            },
            title: nonnull("title").and_then(|v| title(&mut fields, v)),
            partner_site_id: validate::optional_text(
                &mut fields,
                body,
                "partner_site_id",
                MAX_PARTNER_ID_CHARS,
            ),
            partner_sub_id: sub_id(&mut fields, body, caller)
                .filter(|_| body.contains_key("partner_sub_id")),
            partner_user_id: validate::optional_text(
                &mut fields,
                body,
                "partner_user_id",
                MAX_PARTNER_ID_CHARS,
            ),
            theme_id: validate::optional_id(&mut fields, body, "theme_id"),
            deleted: boolean(&mut fields, body, "deleted"),
            published: boolean(&mut fields, body, "published"),
            www_primary: boolean(&mut fields, body, "www_primary"),
            location_ids: location_ids(&mut fields, body),
        };
        fields.into_result()?;
        Ok(patch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn caller(sub: Option<&str>) -> Caller {
        Caller {
            account_id: 1,
            user_id: 7,
            restrict_sub_id: sub.map(Into::into),
        }
    }

    fn object(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(map) => map,
            _ => Map::new(),
        }
    }

    fn field_errors(result: Result<impl std::fmt::Debug>) -> Vec<String> {
        match result {
            Err(ApiError::Validation(map)) => map.into_keys().collect(),
            other => vec![format!("not a validation error: {other:?}")],
        }
    }

    #[test]
    fn a_create_names_every_missing_field() {
        let missing = field_errors(NewSite::from_json(&object(json!({})), &caller(None)));
        assert_eq!(missing, ["business_id", "domain", "subdomain", "title"]);
    }

    #[test]
    fn a_create_takes_defaults() {
        let body = object(
            json!({"domain": "Example.com", "subdomain": "www", "title": " Shop ",
                                 "business_id": "4", "locations": [3, {"id": 5}]}),
        );
        let new = NewSite::from_json(&body, &caller(None)).ok();
        let new = new.as_ref();
        assert_eq!(
            new.map(|n| n.address.key()).as_deref(),
            Some("example.com www /")
        );
        assert_eq!(
            new.map(|n| (n.user_id, n.published, n.www_primary)),
            Some((7, true, true))
        );
        assert_eq!(new.map(|n| n.location_ids.clone()), Some(vec![3, 5]));
        assert_eq!(new.map(|n| n.title.as_str()), Some("Shop"));
    }

    #[test]
    fn bad_fields_are_named_by_path() {
        let body = object(json!({"domain": "a b", "subdomain": "www", "title": "T",
                                 "business_id": 1, "locations": [1, 1, "x"],
                                 "base_directory": "blog", "published": "maybe"}));
        let named = field_errors(NewSite::from_json(&body, &caller(None)));
        assert_eq!(
            named,
            [
                "base_directory",
                "domain",
                "locations.1",
                "locations.2",
                "published"
            ]
        );
        let many: Vec<i64> = (1..=16).collect();
        let body = object(json!({"location_ids": many}));
        assert_eq!(
            field_errors(SitePatch::from_json(&body, 1, &caller(None))),
            ["location_ids"]
        );
    }

    #[test]
    fn a_restricted_key_keeps_its_sub_id() {
        let body = object(json!({"partner_sub_id": "south"}));
        let named = field_errors(SitePatch::from_json(&body, 1, &caller(Some("north"))));
        assert_eq!(named, ["partner_sub_id"]);
        let patch = SitePatch::from_json(&object(json!({"title": "x"})), 1, &caller(Some("north")));
        assert_eq!(patch.ok().map(|p| p.partner_sub_id), Some(None));
        let wrong_id = SitePatch::from_json(&object(json!({"id": 2})), 1, &caller(None));
        assert_eq!(field_errors(wrong_id), ["id"]);
    }
}

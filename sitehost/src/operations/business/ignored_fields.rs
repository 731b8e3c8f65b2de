//! What a create or update body sent that was not used, for the log: clients echo the
//! business object back (`resource_uri`, `images`, ...) or send fields of their own.

use serde_json::{Map, Value};

/// Read-only fields of the business object: ignored in a body (`id` only on create: an
/// update checks it against the path; `category` follows `category_id`).
const READ_ONLY_FIELDS: [&str; 8] = [
    "category",
    "slug",
    "user_id",
    "added",
    "modified",
    "resource_uri",
    "logo_image",
    "images",
];

/// The fields a business body may set.
const WRITABLE_FIELDS: [&str; 8] = [
    "business_name",
    "partner_business_id",
    "partner_sub_id",
    "category_id",
    "logo_image_id",
    "deleted",
    "services",
    "locations",
];

/// What a create or update body sent that was not used. Known names are listed; other
/// names are only counted, so a client's text never reaches the logs.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct IgnoredFields {
    pub known: Vec<&'static str>,
    pub unknown: usize,
}

impl IgnoredFields {
    pub fn of(body: &Map<String, Value>, create: bool) -> Self {
        let mut ignored = IgnoredFields::default();
        for name in body.keys() {
            let name = name.as_str();
            if WRITABLE_FIELDS.contains(&name) || (!create && name == "id") {
                continue;
            }
            match READ_ONLY_FIELDS
                .iter()
                .chain(std::iter::once(&"id"))
                .find(|known| **known == name)
            {
                Some(known) => ignored.known.push(known),
                None => ignored.unknown += 1,
            }
        }
        ignored.known.sort_unstable();
        ignored
    }

    /// Logs the ignored field names (never their values), if any.
    pub fn log(&self) {
        if self.known.is_empty() && self.unknown == 0 {
            return;
        }
        tracing::info!(
            // The target it has always had: `RUST_LOG` directives may name it.
            target: "sitehost::domain::business",
            ignored_fields = %self.known.join(","),
            unknown_fields = self.unknown,
            "business fields ignored"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn body(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn ignored_fields_are_named_when_known_and_counted_otherwise() {
        let body_of = body;
        let body = body_of(json!({
            "business_name": "Cafe", "locations": [{"city": "x"}], "services": [],
            "category": {"id": 3}, "resource_uri": "/x/", "id": 4, "made_up": 1, "other": 2
        }));
        let created = IgnoredFields::of(&body, true);
        assert_eq!(created.known, ["category", "id", "resource_uri"]);
        assert_eq!(created.unknown, 2);
        let updated = IgnoredFields::of(&body, false);
        assert_eq!(updated.known, ["category", "resource_uri"]);
        let plain = IgnoredFields::of(&body_of(json!({"business_name": "Cafe"})), true);
        assert_eq!(plain, IgnoredFields::default());
    }
}

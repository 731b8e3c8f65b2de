//! Rules every list's query parameters follow (businesses, locations, sites): a filter the
//! list does not support is refused when it looks like one, so a partner who believes they
//! filtered never silently gets everything, as Tastypie refused it.

use crate::error::{FieldErrors, Result};

/// Parameters every list takes besides its filters: paging, order, and what clients of the
/// platform send with no meaning here (`format=json`, the OAuth parameters).
const GENERAL: [&str; 4] = ["limit", "offset", "order_by", "format"];

/// Refuses (400, naming each) a parameter that is a field of the resource (`fields`) or is
/// written as a lookup (`field__in`), unless the list supports it (`supported`). Other
/// unknown parameters (`format=json`, a cache buster) are ignored.
pub fn reject_unsupported_filters(
    params: &[(String, String)],
    fields: &[&str],
    supported: &[&str],
) -> Result<()> {
    let mut errors = FieldErrors::default();
    for (name, _) in params {
        let name = name.as_str();
        if supported.contains(&name) || GENERAL.contains(&name) || name.starts_with("oauth_") {
            continue;
        }
        if fields.contains(&name) || name.contains("__") {
            errors.add(
                name,
                format!(
                    "'{name}' is not a filter of this list; it filters by {}.",
                    supported.join(", ")
                ),
            );
        }
    }
    errors.into_result()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(names: &[&str]) -> Vec<(String, String)> {
        names
            .iter()
            .map(|n| (n.to_string(), "1".to_string()))
            .collect()
    }

    #[test]
    fn field_like_parameters_are_refused_and_others_ignored() {
        let fields = ["id", "business_name", "deleted"];
        let supported = ["deleted", "added__date"];
        assert!(reject_unsupported_filters(
            &params(&[
                "deleted",
                "added__date",
                "format",
                "limit",
                "oauth_nonce",
                "_"
            ]),
            &fields,
            &supported
        )
        .is_ok());
        let refused = reject_unsupported_filters(
            &params(&["business_name", "id__in", "deleted__in"]),
            &fields,
            &supported,
        )
        .err()
        .map(|e| e.body());
        let refused = refused.unwrap_or_default();
        for name in ["business_name", "id__in", "deleted__in"] {
            assert!(refused[name].is_array(), "{name}: {refused}");
        }
    }
}

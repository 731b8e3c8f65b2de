//! Rules both stores apply the same way, kept once so the two cannot drift.

use crate::business::Business;
use crate::error::ApiError;

/// A `logo_image_id` that names no image of the account (or of the key's sub id).
pub fn no_such_logo(image_id: i64) -> ApiError {
    ApiError::MissingReference {
        field: "logo_image_id",
        kind: "image",
        id: image_id,
    }
}

/// A `business_id` that names no business of the account with the image's sub id.
pub fn no_such_business(business_id: i64) -> ApiError {
    ApiError::MissingReference {
        field: "business_id",
        kind: "business",
        id: business_id,
    }
}

/// An image that a business has as its logo cannot be deleted (409). The business is
/// named by id and name when the caller may see it; one of another sub id (its logo set by
/// an unrestricted key) is not named to a sub-restricted key.
pub fn image_is_logo(
    image_id: i64,
    business: &Business,
    restrict_sub_id: Option<&str>,
) -> ApiError {
    let which = if business.visible_to(restrict_sub_id) {
        format!("business {} ({:?})", business.id, business.business_name)
    } else {
        "a business of another sub id".to_string()
    };
    ApiError::StateConflict(format!(
        "Image {image_id} is the logo of {which}; give that business another logo (or none) \
         before deleting the image."
    ))
}

/// The logo an update must check: only a new one. A client writing back the object it
/// read keeps a logo it may not see (set by an unrestricted key).
pub fn new_logo(before: &Business, after: &Business) -> Option<i64> {
    after
        .logo_image_id
        .filter(|&logo| before.logo_image_id != Some(logo))
}

/// How a record's list scopes changed in an update.
#[derive(Debug, Default, PartialEq)]
pub struct ScopeChange<'a> {
    /// Scopes the record is no longer in (their counters go down).
    pub left: Vec<&'a String>,
    /// Scopes the record is newly in (their counters go up).
    pub joined: Vec<&'a String>,
}

impl<'a> ScopeChange<'a> {
    pub fn between(before: &'a [String], after: &'a [String]) -> Self {
        ScopeChange {
            left: before.iter().filter(|s| !after.contains(s)).collect(),
            joined: after.iter().filter(|s| !before.contains(s)).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scope_change_lists_only_the_difference() {
        let before = vec!["*".to_string(), "d=0".to_string()];
        let after = vec!["*".to_string(), "d=1".to_string()];
        let change = ScopeChange::between(&before, &after);
        assert_eq!(change.left, vec!["d=0"]);
        assert_eq!(change.joined, vec!["d=1"]);
    }
}

//! Rules both stores apply the same way, kept once so the two cannot drift.

use crate::domain::business::Business;
use crate::error::ApiError;

/// A `logo_image_id` that names no image of the account (or of the key's sub id).
pub fn no_such_logo(image_id: i64) -> ApiError {
    ApiError::MissingReference {
        field: "logo_image_id",
        kind: "image",
        id: image_id,
    }
}

/// A logo of another sub id than its business's: refused, so that an image's own sub id
/// always sees every business that holds it as a logo (and can release it before a delete).
pub fn logo_of_another_sub_id(image_id: i64) -> ApiError {
    ApiError::field(
        "logo_image_id",
        format!(
            "Image {image_id} has another sub id than this business; a business's logo must \
             be an image of the business's own partner_sub_id, or one without a sub id."
        ),
    )
}

/// Whether an image of sub id `image_sub` may be the logo of a business of sub id
/// `business_sub`: one of the business's own sub id, or one of none.
pub fn logo_fits(image_sub: Option<&str>, business_sub: Option<&str>) -> bool {
    image_sub.is_none() || image_sub == business_sub
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
/// named by id and name when the caller may see it. A logo is held to its business's sub id
/// ([`logo_fits`]), so a sub-restricted key meets a business it cannot see only through a
/// logo set before that rule: the answer then names nothing of it (no id, name or sub id).
pub fn image_is_logo(
    image_id: i64,
    business: &Business,
    restrict_sub_id: Option<&str>,
) -> ApiError {
    if !business.visible_to(restrict_sub_id) {
        return ApiError::StateConflict(format!(
            "Image {image_id} is in use as a logo and cannot be deleted with this key."
        ));
    }
    ApiError::StateConflict(format!(
        "Image {image_id} is the logo of business {} ({:?}); give that business another logo \
         (or none) before deleting the image.",
        business.id, business.business_name
    ))
}

/// The logo an update must check: a new one, or the one kept by a business whose sub id
/// changes ([`logo_fits`] holds it to the new sub id). A client writing back the object it
/// read keeps a logo it may not see.
pub fn new_logo(before: &Business, after: &Business) -> Option<i64> {
    after.logo_image_id.filter(|&logo| {
        before.logo_image_id != Some(logo) || before.partner_sub_id != after.partner_sub_id
    })
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
    fn a_logo_is_of_its_business_sub_id_or_of_none() {
        assert!(logo_fits(None, None));
        assert!(logo_fits(None, Some("north")));
        assert!(logo_fits(Some("north"), Some("north")));
        assert!(!logo_fits(Some("south"), Some("north")));
        assert!(!logo_fits(Some("south"), None));
    }

    #[test]
    fn a_logo_conflict_names_nothing_the_key_cannot_see() {
        let business = Business {
            id: 41,
            account_id: 1,
            business_name: "South Cafe".into(),
            slug: "south-cafe".into(),
            deleted: false,
            partner_business_id: None,
            partner_sub_id: Some("south".into()),
            category_id: None,
            logo_image_id: Some(7),
            user_id: 1,
            added: 0,
            modified: 0,
        };
        let hidden = image_is_logo(7, &business, Some("north")).to_string();
        for secret in ["41", "South Cafe", "south", "business", "sub id"] {
            assert!(!hidden.contains(secret), "{hidden}");
        }
        let shown = image_is_logo(7, &business, Some("south")).to_string();
        assert!(shown.contains("business 41 (\"South Cafe\")"), "{shown}");
    }

    #[test]
    fn scope_change_lists_only_the_difference() {
        let before = vec!["*".to_string(), "d=0".to_string()];
        let after = vec!["*".to_string(), "d=1".to_string()];
        let change = ScopeChange::between(&before, &after);
        assert_eq!(change.left, vec!["d=0"]);
        assert_eq!(change.joined, vec!["d=1"]);
    }
}

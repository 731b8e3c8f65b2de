//! List scopes: the canonical name of a filter combination.
//!
//! Every record belongs to the scopes of all subsets of its filterable attributes. Both
//! stores keep a counter per (account, scope), updated in the same transaction as the record,
//! so `total_count` of any filter combination is one counter read; the DynamoDB store also
//! keeps one list entry per scope so that every filtered list is a single `Query`.

use percent_encoding::{utf8_percent_encode, AsciiSet, CONTROLS};

use crate::clock::utc_date;
use crate::domain::business::{Business, BusinessFilter};
use crate::domain::image_record::{Image, ImageFilter};

/// Characters escaped in scope values, so values can never forge a separator.
const SCOPE_VALUE: &AsciiSet = &CONTROLS.add(b'|').add(b'=').add(b'%').add(b'#');

/// One filter term: a short attribute tag and its value.
pub type Term = (&'static str, String);

/// The scope name of a set of terms. Terms must come in the record type's fixed tag order.
pub fn scope_name(terms: &[Term]) -> String {
    if terms.is_empty() {
        return "*".to_string();
    }
    terms
        .iter()
        .map(|(tag, value)| format!("{tag}={}", utf8_percent_encode(value, SCOPE_VALUE)))
        .collect::<Vec<_>>()
        .join("|")
}

/// The names of all scopes a record with these terms belongs to (every subset, `*` first).
pub fn all_scopes(terms: &[Term]) -> Vec<String> {
    let n = terms.len();
    (0u32..(1 << n))
        .map(|mask| {
            let subset: Vec<Term> = terms
                .iter()
                .enumerate()
                .filter(|(i, _)| mask & (1 << i) != 0)
                .map(|(_, t)| t.clone())
                .collect();
            scope_name(&subset)
        })
        .collect()
}

fn business_terms(filter: &BusinessFilter) -> Vec<Term> {
    let mut terms = Vec::new();
    if let Some(deleted) = filter.deleted {
        terms.push(("d", if deleted { "1" } else { "0" }.to_string()));
    }
    if let Some(sub) = &filter.partner_sub_id {
        terms.push(("s", sub.clone()));
    }
    if let Some(day) = filter.added_date {
        terms.push(("t", day.to_string()));
    }
    if let Some(pbid) = &filter.partner_business_id {
        terms.push(("p", pbid.clone()));
    }
    terms
}

/// The scope whose counter (and DynamoDB entries) answer a business list filter.
pub fn business_filter_scope(filter: &BusinessFilter) -> String {
    scope_name(&business_terms(filter))
}

/// Every list scope a business belongs to (one per subset of its filter values).
pub fn business_scopes(business: &Business) -> Vec<String> {
    all_scopes(&business_terms(&BusinessFilter {
        deleted: Some(business.deleted),
        partner_sub_id: business.partner_sub_id.clone(),
        added_date: Some(utc_date(business.added)),
        partner_business_id: business.partner_business_id.clone(),
    }))
}

/// The accent- and case-insensitive sort key of a business name (`collation`); the stores
/// break ties by id.
pub fn name_key(business: &Business) -> String {
    crate::domain::collation::sort_key(&business.business_name)
}

fn image_terms(filter: &ImageFilter) -> Vec<Term> {
    let mut terms = Vec::new();
    if let Some(site) = filter.site_id {
        terms.push(("site", site.to_string()));
    }
    if let Some(business) = filter.business_id {
        terms.push(("biz", business.to_string()));
    }
    // Last, so that images without a sub id keep the scope names they always had.
    if let Some(sub) = &filter.partner_sub_id {
        terms.push(("sub", sub.clone()));
    }
    terms
}

/// The scope whose counter (and DynamoDB entries) answer an image list filter.
pub fn image_filter_scope(filter: &ImageFilter) -> String {
    scope_name(&image_terms(filter))
}

/// Every list scope an image belongs to.
pub fn image_scopes(image: &Image) -> Vec<String> {
    all_scopes(&image_terms(&ImageFilter {
        site_id: image.site_id,
        business_id: image.business_id,
        partner_sub_id: image.partner_sub_id.clone(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::business::NewBusiness;
    use crate::domain::image_record::NewImage;

    #[test]
    fn subsets_are_named_in_tag_order() {
        let terms = vec![("d", "0".to_string()), ("s", "a|b".to_string())];
        assert_eq!(
            all_scopes(&terms),
            vec!["*", "d=0", "s=a%7Cb", "d=0|s=a%7Cb"]
        );
    }

    #[test]
    fn values_cannot_forge_separators() {
        let forged = scope_name(&[("s", "x|d=1".to_string())]);
        assert_ne!(forged, scope_name(&[("s", "x".into()), ("d", "1".into())]));
    }

    fn image(site_id: Option<i64>, business_id: Option<i64>, sub: Option<&str>) -> Image {
        NewImage {
            id: None,
            path: "img/upload/a.png".into(),
            mimetype: "image/png".into(),
            width: 1,
            height: 1,
            site_id,
            business_id,
            partner_sub_id: sub.map(Into::into),
            user_id: 1,
        }
        .into_image(9, 1, 0)
    }

    #[test]
    fn an_image_is_in_the_scopes_of_its_filters() {
        assert_eq!(
            image_scopes(&image(Some(3), None, None)),
            vec!["*", "site=3"]
        );
    }

    #[test]
    fn the_sub_id_is_a_scope_term_after_the_others() {
        let image = image(None, Some(4), Some("north"));
        assert_eq!(
            image_scopes(&image),
            vec!["*", "biz=4", "sub=north", "biz=4|sub=north"]
        );
        let restricted = ImageFilter {
            business_id: Some(4),
            partner_sub_id: Some("north".into()),
            ..Default::default()
        };
        assert_eq!(image_filter_scope(&restricted), "biz=4|sub=north");
        assert!(image_scopes(&image).contains(&image_filter_scope(&restricted)));
    }

    #[test]
    fn scopes_cover_every_matching_filter() {
        let b = NewBusiness {
            business_name: "A".into(),
            partner_business_id: Some("p".into()),
            partner_sub_id: Some("s".into()),
            category_id: None,
            logo_image_id: None,
            user_id: 1,
            ..Default::default()
        }
        .into_business(1, 1, 1_369_395_621);
        let scopes = business_scopes(&b);
        assert_eq!(scopes.len(), 16);
        let matching = BusinessFilter {
            deleted: Some(false),
            partner_sub_id: Some("s".into()),
            ..Default::default()
        };
        assert!(scopes.contains(&business_filter_scope(&matching)));
        let other = BusinessFilter {
            deleted: Some(true),
            ..Default::default()
        };
        assert!(!scopes.contains(&business_filter_scope(&other)));
    }

    #[test]
    fn names_sort_case_and_accent_insensitively() {
        let b = NewBusiness {
            business_name: "Joe's PÏZZA".into(),
            partner_business_id: None,
            partner_sub_id: None,
            category_id: None,
            logo_image_id: None,
            user_id: 1,
            ..Default::default()
        }
        .into_business(1, 1, 0);
        assert_eq!(name_key(&b), "joe's pizza");
    }
}

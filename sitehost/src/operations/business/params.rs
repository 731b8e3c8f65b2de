//! The query parameters of the business list beyond paging (`listing`): `order_by` and the
//! filters `deleted`, `added__date`, `partner_business_id`, `partner_sub_id` and
//! `project_type`. A parameter named after another field of the business, or written as a
//! lookup (`id__in`), is a 400 (`list_rules`); other unknown parameters are ignored.

use chrono::NaiveDate;

use crate::domain::account::Caller;
use crate::domain::business::{BusinessFilter, BusinessOrder, BusinessQuery};
use crate::error::{ApiError, FieldErrors, Result};
use crate::operations::list_rules::reject_unsupported_filters;
use crate::operations::listing::Paging;

/// The filters this list supports.
pub const FILTERS: [&str; 5] = [
    "deleted",
    "added__date",
    "partner_business_id",
    "partner_sub_id",
    "project_type",
];

/// The fields of a business object (list and detail).
pub const FIELDS: [&str; 17] = [
    "id",
    "business_name",
    "slug",
    "deleted",
    "partner_business_id",
    "partner_sub_id",
    "category_id",
    "logo_image_id",
    "user_id",
    "added",
    "modified",
    "resource_uri",
    "logo_image",
    "images",
    "category",
    "services",
    "locations",
];

/// The one project type every business here has: the platform's client filters by it.
pub const PROJECT_TYPE: &str = "default";

/// The query of a list request on `paging`, or `None` when it matches nothing: a key
/// restricted to one sub id asking for another.
pub fn query(
    params: &[(String, String)],
    paging: Paging,
    caller: &Caller,
) -> Result<Option<BusinessQuery>> {
    let order = match params.iter().rev().find(|(n, _)| n == "order_by") {
        Some((_, value)) => order(value)?,
        None => BusinessOrder::IdAsc,
    };
    Ok(filter(params, caller)?.map(|filter| BusinessQuery {
        filter,
        order,
        limit: paging.limit,
        offset: paging.offset,
    }))
}

fn order(value: &str) -> Result<BusinessOrder> {
    match value {
        "id" => Ok(BusinessOrder::IdAsc),
        "-id" => Ok(BusinessOrder::IdDesc),
        "business_name" => Ok(BusinessOrder::NameAsc),
        "-business_name" => Ok(BusinessOrder::NameDesc),
        other => Err(ApiError::field(
            "order_by",
            format!(
                "'{other}' is not an allowed ordering; use one of id, -id, business_name, -business_name"
            ),
        )),
    }
}

/// The filters, with a restricted key's sub id; `None` when they match nothing.
fn filter(params: &[(String, String)], caller: &Caller) -> Result<Option<BusinessFilter>> {
    reject_unsupported_filters(params, &FIELDS, &FILTERS)?;
    let mut fields = FieldErrors::default();
    let mut other_project_type = false;
    let mut filter = BusinessFilter::default();
    for (name, value) in params {
        match name.as_str() {
            "deleted" => match value.as_str() {
                "0" | "false" | "False" => filter.deleted = Some(false),
                "1" | "true" | "True" => filter.deleted = Some(true),
                _ => fields.add(
                    "deleted",
                    format!("'{value}' is not one of 0, 1, false, true."),
                ),
            },
            "added__date" => match NaiveDate::parse_from_str(value, "%Y-%m-%d") {
                Ok(day) if value.len() == 10 => filter.added_date = Some(day),
                _ => fields.add(
                    "added__date",
                    format!("'{value}' is not a valid date (YYYY-MM-DD)."),
                ),
            },
            "partner_business_id" => filter.partner_business_id = Some(value.clone()),
            "partner_sub_id" => filter.partner_sub_id = Some(value.clone()),
            // Every business here is of the platform's default project type.
            "project_type" => other_project_type = value != PROJECT_TYPE,
            _ => {}
        }
    }
    fields.into_result()?;
    if other_project_type {
        return Ok(None);
    }
    if let Some(fixed) = &caller.restrict_sub_id {
        match &filter.partner_sub_id {
            // A restricted key asking for another sub id simply matches nothing.
            Some(asked) if asked != fixed => return Ok(None),
            _ => filter.partner_sub_id = Some(fixed.clone()),
        }
    }
    Ok(Some(filter))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caller() -> Caller {
        Caller {
            account_id: 1,
            user_id: 7,
            restrict_sub_id: None,
        }
    }

    #[test]
    fn restricted_keys_asking_for_another_sub_id_match_nothing() {
        let restricted = Caller {
            restrict_sub_id: Some("s1".into()),
            ..caller()
        };
        let filter = filter(&[("partner_sub_id".into(), "s2".into())], &restricted);
        assert_eq!(filter.ok(), Some(None));
    }

    #[test]
    fn filters_reject_bad_values() {
        for (k, v) in [
            ("deleted", "maybe"),
            ("added__date", "2024-02-30"),
            ("added__date", "2024-2-3"),
        ] {
            assert!(
                filter(&[(k.into(), v.into())], &caller()).is_err(),
                "{k}={v}"
            );
        }
        let f = filter(
            &[
                ("deleted".into(), "true".into()),
                ("project_type".into(), "default".into()),
            ],
            &caller(),
        );
        assert_eq!(f.ok().flatten().and_then(|f| f.deleted), Some(true));
    }

    #[test]
    fn unsupported_filters_are_refused_and_project_types_filter() {
        for name in ["business_name", "id__in", "deleted__in", "slug"] {
            let refused = filter(&[(name.into(), "1".into())], &caller());
            let body = refused.err().map(|e| e.body()).unwrap_or_default();
            assert!(body[name].is_array(), "{name}: {body}");
        }
        let other = filter(&[("project_type".into(), "landing".into())], &caller());
        assert_eq!(other.ok(), Some(None));
        let ignored = filter(&[("format".into(), "json".into())], &caller());
        assert!(ignored.is_ok_and(|f| f.is_some()));
    }
}

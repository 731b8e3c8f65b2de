//! The query parameters of the site list beyond paging (`listing`): `order_by` and the
//! filters `deleted`, `partner_sub_id` and one of `added__date`, `business_id`,
//! `location_id`, `partner_site_id`, `domain`, or the address (`domain`, `subdomain` and
//! `base_directory` together, as the platform's client sends them). Another parameter named
//! after a site field, or written as a lookup (`id__in`), is a 400 (`list_rules`); other
//! unknown parameters are ignored.

use chrono::NaiveDate;

use crate::domain::account::Caller;
use crate::domain::site::{
    base_directory_filter, host_filter, Address, SiteFilter, SiteKeyFilter, SiteOrder, SiteQuery,
};
use crate::domain::validate::parse_id;
use crate::error::{FieldErrors, Result};
use crate::operations::list_rules::reject_unsupported_filters;
use crate::operations::listing::Paging;

/// The filters this list supports.
pub const FILTERS: [&str; 9] = [
    "deleted",
    "partner_sub_id",
    "added__date",
    "business_id",
    "location_id",
    "partner_site_id",
    "domain",
    "subdomain",
    "base_directory",
];

/// The fields of a site object (a parameter named so, unsupported, is a 400).
pub const FIELDS: [&str; 22] = [
    "id",
    "business_id",
    "user_id",
    "partner_user_id",
    "domain",
    "subdomain",
    "base_directory",
    "formatted_domain",
    "formatted_url",
    "title",
    "partner_site_id",
    "partner_sub_id",
    "theme_id",
    "deleted",
    "published",
    "www_primary",
    "location_ids",
    "added",
    "modified",
    "resource_uri",
    "business",
    "locations",
];

/// The filters of which a list takes one at a time (with `deleted` and `partner_sub_id`).
const ONE_OF: &str = "added__date, business_id, location_id, partner_site_id, domain (alone, \
     or with subdomain and base_directory)";

/// The query of a list request on `paging`, or `None` when it matches nothing: a key
/// restricted to one sub id asking for another.
pub fn query(
    params: &[(String, String)],
    paging: Paging,
    caller: &Caller,
) -> Result<Option<SiteQuery>> {
    reject_unsupported_filters(params, &FIELDS, &FILTERS)?;
    let mut fields = FieldErrors::default();
    let mut filter = SiteFilter::default();
    let mut order = SiteOrder::IdAsc;
    let mut keys: Vec<(&str, SiteKeyFilter)> = Vec::new();
    let (mut domain, mut subdomain, mut base_directory) = (None, None, None);
    for (name, value) in params {
        let id = |fields: &mut FieldErrors| {
            let parsed = parse_id(value);
            if parsed.is_none() {
                fields.add(name, format!("'{value}' is not a positive integer."));
            }
            parsed
        };
        match name.as_str() {
            "deleted" => filter.deleted = deleted_flag(value, &mut fields).or(filter.deleted),
            "partner_sub_id" => filter.partner_sub_id = Some(value.clone()),
            "added__date" => {
                if let Some(key) = added_date(value, &mut fields) {
                    keys.push(("added__date", key));
                }
            }
            "business_id" => {
                if let Some(id) = id(&mut fields) {
                    keys.push(("business_id", SiteKeyFilter::Business(id)));
                }
            }
            "location_id" => {
                if let Some(id) = id(&mut fields) {
                    keys.push(("location_id", SiteKeyFilter::Location(id)));
                }
            }
            "partner_site_id" => keys.push((
                "partner_site_id",
                SiteKeyFilter::PartnerSiteId(value.clone()),
            )),
            "domain" => domain = Some(host_filter(value)),
            "subdomain" => subdomain = Some(host_filter(value)),
            "base_directory" => base_directory = Some(base_directory_filter(value)),
            "order_by" => order = site_order(value, &mut fields).unwrap_or(order),
            _ => {}
        }
    }
    if let Some(key) = address_key(domain, subdomain, base_directory, &mut fields) {
        keys.push(("domain", key));
    }
    // Tastypie would filter by any combination; each list here is one scope, so the narrow
    // filters come one at a time.
    if let [_, (second, _), ..] = keys.as_slice() {
        fields.add(
            second,
            format!("Filter by one of {ONE_OF} at a time; deleted and partner_sub_id combine with any of them."),
        );
    }
    fields.into_result()?;
    filter.key = keys.pop().map(|(_, key)| key);
    if let Some(fixed) = &caller.restrict_sub_id {
        match &filter.partner_sub_id {
            Some(asked) if asked != fixed => return Ok(None),
            _ => filter.partner_sub_id = Some(fixed.clone()),
        }
    }
    Ok(Some(SiteQuery {
        filter,
        order,
        limit: paging.limit,
        offset: paging.offset,
    }))
}

/// `deleted`'s value, or `None` with a field error.
fn deleted_flag(value: &str, fields: &mut FieldErrors) -> Option<bool> {
    match value {
        "0" | "false" | "False" => Some(false),
        "1" | "true" | "True" => Some(true),
        _ => {
            fields.add(
                "deleted",
                format!("'{value}' is not one of 0, 1, false, true."),
            );
            None
        }
    }
}

/// `added__date`'s day, or `None` with a field error.
fn added_date(value: &str, fields: &mut FieldErrors) -> Option<SiteKeyFilter> {
    match NaiveDate::parse_from_str(value, "%Y-%m-%d") {
        Ok(day) if value.len() == 10 => Some(SiteKeyFilter::AddedDate(day)),
        _ => {
            fields.add(
                "added__date",
                format!("'{value}' is not a valid date (YYYY-MM-DD)."),
            );
            None
        }
    }
}

/// `order_by`'s order, or `None` with a field error.
fn site_order(value: &str, fields: &mut FieldErrors) -> Option<SiteOrder> {
    match value {
        "id" => Some(SiteOrder::IdAsc),
        "-id" => Some(SiteOrder::IdDesc),
        "title" => Some(SiteOrder::TitleAsc),
        "-title" => Some(SiteOrder::TitleDesc),
        other => {
            fields.add(
                "order_by",
                format!("'{other}' is not an allowed ordering; use one of id, -id, title, -title"),
            );
            None
        }
    }
}

/// The filter of `domain` alone or of the whole address; an address given in part is a
/// field error for each part missing.
fn address_key(
    domain: Option<String>,
    subdomain: Option<String>,
    base_directory: Option<String>,
    fields: &mut FieldErrors,
) -> Option<SiteKeyFilter> {
    match (domain, subdomain, base_directory) {
        (None, None, None) => None,
        (Some(domain), None, None) => Some(SiteKeyFilter::Domain(domain)),
        (Some(domain), Some(subdomain), Some(base_directory)) => {
            Some(SiteKeyFilter::Address(Address {
                domain,
                subdomain,
                base_directory,
            }))
        }
        (_, subdomain, base_directory) => {
            for (name, given) in [
                ("subdomain", subdomain.is_some()),
                ("base_directory", base_directory.is_some()),
            ] {
                if !given {
                    fields.add(name, "An address filter gives domain, subdomain and base_directory together (or domain alone).");
                }
            }
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ApiError;

    fn caller() -> Caller {
        Caller {
            account_id: 1,
            user_id: 7,
            restrict_sub_id: None,
        }
    }

    fn parse(pairs: &[(&str, &str)]) -> Result<Option<SiteQuery>> {
        let params: Vec<(String, String)> = pairs
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        query(
            &params,
            Paging {
                limit: 20,
                offset: 0,
            },
            &caller(),
        )
    }

    fn named(result: Result<Option<SiteQuery>>) -> Vec<String> {
        match result {
            Err(ApiError::Validation(map)) => map.into_keys().collect(),
            other => vec![format!("{other:?}")],
        }
    }

    #[test]
    fn the_clients_address_filter_is_one_address() {
        let q = parse(&[
            ("base_directory", "/"),
            ("deleted", "0"),
            ("domain", "Example.com"),
            ("subdomain", "www"),
            ("format", "json"),
        ]);
        let filter = q.ok().flatten().map(|q| q.filter);
        assert_eq!(filter.as_ref().and_then(|f| f.deleted), Some(false));
        assert!(matches!(filter.and_then(|f| f.key),
                         Some(SiteKeyFilter::Address(a)) if a.key() == "example.com www /"));
    }

    #[test]
    fn narrow_filters_come_one_at_a_time() {
        assert_eq!(
            named(parse(&[("business_id", "1"), ("location_id", "2")])),
            ["location_id"]
        );
        assert_eq!(
            named(parse(&[("domain", "a.com"), ("subdomain", "www")])),
            ["base_directory"]
        );
        assert_eq!(
            named(parse(&[("business_id", "x"), ("order_by", "name")])),
            ["business_id", "order_by"]
        );
    }

    #[test]
    fn field_like_parameters_the_list_does_not_take_are_refused() {
        assert_eq!(
            named(parse(&[
                ("title", "Shop"),
                ("id__in", "1,2"),
                ("deleted", "0")
            ])),
            ["id__in", "title"]
        );
        assert!(parse(&[("format", "json"), ("_", "17"), ("deleted", "0")]).is_ok());
    }
}

//! The query parameters of the location list beyond paging: the filters `business_id`,
//! `partner_business_id` and `partner_location_id`, `order_by` (`id`, `location_name`, `-`
//! for descending) and `near_lat` with `near_lon` (nearest first).

use crate::domain::location::{MAX_LATITUDE, MAX_LONGITUDE};
use crate::error::{ApiError, FieldErrors, Result};
use crate::operations::list_rules::reject_unsupported_filters;

/// The filters this list supports.
pub const FILTERS: [&str; 5] = [
    "business_id",
    "partner_business_id",
    "partner_location_id",
    "near_lat",
    "near_lon",
];

/// The fields of a location object (a parameter named so, unsupported, is a 400).
pub const FIELDS: [&str; 23] = [
    "id",
    "business_id",
    "user_id",
    "partner_location_id",
    "location_name",
    "street",
    "street2",
    "city",
    "state",
    "postal_code",
    "country",
    "contact_email",
    "location_url",
    "lat",
    "lon",
    "phones",
    "description",
    "service_area_only",
    "hours_of_operation",
    "hours_by_type",
    "added",
    "modified",
    "resource_uri",
];

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LocationOrder {
    Id {
        descending: bool,
    },
    Name {
        descending: bool,
    },
    /// Great-circle distance from this point (degrees), nearest first.
    Near {
        lat: f64,
        lon: f64,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct LocationQuery {
    pub business_id: Option<i64>,
    pub partner_business_id: Option<String>,
    pub partner_location_id: Option<String>,
    pub order: LocationOrder,
}

fn coordinate(fields: &mut FieldErrors, name: &str, value: &str, limit: f64) -> Option<f64> {
    match value.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v.abs() <= limit => Some(v),
        _ => {
            fields.add(
                name,
                format!("'{value}' is not a number from -{limit} to {limit}."),
            );
            None
        }
    }
}

pub fn query(params: &[(String, String)]) -> Result<LocationQuery> {
    reject_unsupported_filters(params, &FIELDS, &FILTERS)?;
    let mut fields = FieldErrors::default();
    let mut query = LocationQuery {
        business_id: None,
        partner_business_id: None,
        partner_location_id: None,
        order: LocationOrder::Id { descending: false },
    };
    let (mut near_lat, mut near_lon, mut order_by) = (None, None, None);
    for (name, value) in params {
        match name.as_str() {
            "business_id" => match crate::domain::validate::parse_id(value) {
                Some(id) => query.business_id = Some(id),
                None => fields.add(
                    "business_id",
                    format!("'{value}' is not a valid id; ids are positive 64-bit integers."),
                ),
            },
            "partner_business_id" => query.partner_business_id = Some(value.clone()),
            "partner_location_id" => query.partner_location_id = Some(value.clone()),
            "near_lat" => near_lat = coordinate(&mut fields, "near_lat", value, MAX_LATITUDE),
            "near_lon" => near_lon = coordinate(&mut fields, "near_lon", value, MAX_LONGITUDE),
            "order_by" => order_by = Some(value.as_str()),
            _ => {}
        }
    }
    let named = |name: &str| params.iter().any(|(n, _)| n == name);
    match (named("near_lat"), named("near_lon")) {
        (true, false) => fields.add("near_lon", "near_lat needs near_lon too."),
        (false, true) => fields.add("near_lat", "near_lon needs near_lat too."),
        _ => {}
    }
    fields.into_result()?;
    query.order = match (near_lat.zip(near_lon), order_by) {
        (Some(_), Some(_)) => {
            return Err(ApiError::field(
                "order_by",
                "near_lat and near_lon order the list by distance; leave order_by out.",
            ))
        }
        (Some((lat, lon)), None) => LocationOrder::Near { lat, lon },
        (None, None) | (None, Some("id")) => LocationOrder::Id { descending: false },
        (None, Some("-id")) => LocationOrder::Id { descending: true },
        (None, Some("location_name")) => LocationOrder::Name { descending: false },
        (None, Some("-location_name")) => LocationOrder::Name { descending: true },
        (None, Some(other)) => {
            return Err(ApiError::field(
                "order_by",
                format!(
                    "'{other}' is not an allowed ordering; use one of id, -id, location_name, \
                     -location_name"
                ),
            ))
        }
    };
    if query.business_id.is_none() && query.partner_business_id.is_none() {
        let what = if matches!(query.order, LocationOrder::Near { .. }) {
            "near_lat and near_lon need"
        } else {
            "A location list needs"
        };
        return Err(ApiError::field(
            "business_id",
            format!(
                "{what} business_id or partner_business_id: locations are listed per \
                 business, never across the whole account."
            ),
        ));
    }
    Ok(query)
}

/// Great-circle distance in kilometres (haversine, mean Earth radius).
pub fn distance_km(lat1: f64, lon1: f64, lat2: f64, lon2: f64) -> f64 {
    const EARTH_RADIUS_KM: f64 = 6_371.008_8;
    let (p1, p2) = (lat1.to_radians(), lat2.to_radians());
    let dp = p2 - p1;
    let dl = (lon2 - lon1).to_radians();
    let a = (dp / 2.0).sin().powi(2) + p1.cos() * p2.cos() * (dl / 2.0).sin().powi(2);
    2.0 * EARTH_RADIUS_KM * a.sqrt().min(1.0).asin()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(pairs: &[(&str, &str)]) -> Result<LocationQuery> {
        let params: Vec<(String, String)> = pairs
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect();
        query(&params)
    }

    #[test]
    fn the_clients_queries_parse() {
        let list = parse(&[
            ("business_id", "4"),
            ("limit", "600"),
            ("order_by", "location_name"),
        ]);
        assert_eq!(
            list.ok().map(|q| q.order),
            Some(LocationOrder::Name { descending: false })
        );
        let near = parse(&[
            ("business_id", "4"),
            ("near_lat", "44.98"),
            ("near_lon", "-93.27"),
        ]);
        assert_eq!(
            near.ok().map(|q| q.order),
            Some(LocationOrder::Near {
                lat: 44.98,
                lon: -93.27
            })
        );
    }

    #[test]
    fn bad_queries_name_the_parameter() {
        for (pairs, field) in [
            (vec![("near_lat", "1"), ("near_lon", "2")], "business_id"),
            (vec![("partner_location_id", "x")], "business_id"),
            (
                vec![("business_id", "1"), ("near_lat", "91"), ("near_lon", "2")],
                "near_lat",
            ),
            (vec![("business_id", "1"), ("near_lat", "1")], "near_lon"),
            (vec![("business_id", "1"), ("order_by", "city")], "order_by"),
            (vec![("business_id", "1"), ("city", "X")], "city"),
            (vec![("business_id", "1"), ("id__in", "1,2")], "id__in"),
            (vec![("business_id", "x")], "business_id"),
        ] {
            let body = parse(&pairs).err().map(|e| e.body()).unwrap_or_default();
            assert!(body[field].is_array(), "{pairs:?}: {body}");
        }
        assert!(parse(&[("business_id", "1"), ("format", "json")]).is_ok());
    }

    #[test]
    fn distances_are_great_circle() {
        // Minneapolis to St Paul, about 14 km; a quarter of the equator, 10,008 km.
        let d = distance_km(44.98, -93.27, 44.95, -93.09);
        assert!((13.0..16.0).contains(&d), "{d}");
        assert!((distance_km(0.0, 0.0, 0.0, 90.0) - 10_007.5).abs() < 1.0);
    }
}

//! A location's hours: a week per hours type (`primary` unless named), each day closed
//! (`[]`), open all day (`["24_HOURS"]`) or one to four `["HH:MM:SS", "HH:MM:SS"]` ranges.
//! Stored and shown as the client's shape, normalised (seconds added, ranges in order).

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use crate::error::FieldErrors;

/// The hours type `hours_of_operation` reads and writes.
pub const PRIMARY: &str = "primary";
/// Days in a week; day 0 is Monday.
pub const DAYS: usize = 7;
/// Most ranges one day may hold.
pub const MAX_RANGES: usize = 4;
/// Most hours types one location may hold.
pub const MAX_TYPES: usize = 10;
/// Characters of an hours type's name.
pub const MAX_TYPE_CHARS: usize = 50;
/// The day that is open all day.
pub const ALL_DAY: &str = "24_HOURS";
/// The latest time a range may give: it closes at midnight.
pub const END_OF_DAY: &str = "24:00:00";

/// A week as stored: seven days, each `[]`, `["24_HOURS"]` or a list of `[start, end]`.
pub type Week = Vec<Value>;
/// Hours by type.
pub type HoursByType = BTreeMap<String, Week>;

/// Seconds since midnight of `HH:MM` or `HH:MM:SS` ([`END_OF_DAY`] allowed, as a closing
/// time).
fn seconds(text: &str) -> Option<u32> {
    let parts: Vec<&str> = text.split(':').collect();
    if !(2..=3).contains(&parts.len())
        || parts
            .iter()
            .any(|p| p.len() != 2 || !p.bytes().all(|b| b.is_ascii_digit()))
    {
        return None;
    }
    let number = |i: usize| parts.get(i).map_or(Some(0), |p| p.parse::<u32>().ok());
    let (h, m, s) = (number(0)?, number(1)?, number(2)?);
    let total = h * 3600 + m * 60 + s;
    (h <= 24 && m < 60 && s < 60 && total <= 24 * 3600).then_some(total)
}

fn time_text(total: u32) -> String {
    format!(
        "{:02}:{:02}:{:02}",
        total / 3600,
        total % 3600 / 60,
        total % 60
    )
}

/// A week at `path` (`hours_of_operation`, `hours.0.hours`): errors name the day and the
/// range (`hours_of_operation.2.1`).
pub fn parse_week(fields: &mut FieldErrors, path: &[&str], value: &Value) -> Option<Week> {
    let Value::Array(days) = value else {
        fields.add_at(
            path,
            "Must be a list of 7 days (Monday first), each [], [\"24_HOURS\"] or a list of \
             [\"HH:MM:SS\", \"HH:MM:SS\"] ranges.",
        );
        return None;
    };
    if days.len() != DAYS {
        fields.add_at(
            path,
            format!(
                "Must have exactly {DAYS} days (Monday first); this has {}.",
                days.len()
            ),
        );
        return None;
    }
    let before = fields.len();
    let week: Week = days
        .iter()
        .enumerate()
        .map(|(d, day)| parse_day(fields, path, d, day))
        .collect();
    (fields.len() == before).then_some(week)
}

fn parse_day(fields: &mut FieldErrors, path: &[&str], d: usize, value: &Value) -> Value {
    let day = d.to_string();
    let at = |rest: &[&str]| -> Vec<String> {
        path.iter()
            .map(|p| p.to_string())
            .chain(std::iter::once(day.clone()))
            .chain(rest.iter().map(|r| r.to_string()))
            .collect()
    };
    let mut add = |rest: &[&str], message: String| {
        let path = at(rest);
        let path: Vec<&str> = path.iter().map(String::as_str).collect();
        fields.add_at(&path, message);
    };
    let Value::Array(ranges) = value else {
        add(
            &[],
            format!("Day {d}: must be [], [\"{ALL_DAY}\"] or a list of ranges."),
        );
        return Value::Null;
    };
    if ranges.len() == 1 && ranges[0] == json!(ALL_DAY) {
        return json!([ALL_DAY]);
    }
    if ranges.len() > MAX_RANGES {
        add(
            &[],
            format!(
                "Day {d}: at most {MAX_RANGES} ranges; this has {}.",
                ranges.len()
            ),
        );
        return Value::Null;
    }
    let mut parsed: Vec<(u32, u32)> = Vec::with_capacity(ranges.len());
    for (r, range) in ranges.iter().enumerate() {
        let previous_end = parsed.last().map(|&(_, end)| end);
        match parse_range(d, r, range, previous_end) {
            Ok(range) => parsed.push(range),
            Err(message) => add(&[r.to_string().as_str()], message),
        }
    }
    Value::Array(
        parsed
            .into_iter()
            .map(|(start, end)| json!([time_text(start), time_text(end)]))
            .collect(),
    )
}

/// Range `r` of day `d`, after one that ends at `previous_end`: its start and end in
/// seconds, or what is wrong with it.
fn parse_range(
    d: usize,
    r: usize,
    range: &Value,
    previous_end: Option<u32>,
) -> Result<(u32, u32), String> {
    let pair = match range {
        Value::Array(pair) if pair.len() == 2 => pair,
        _ => {
            return Err(format!(
                "Day {d}, range {r}: must be [\"HH:MM:SS\", \"HH:MM:SS\"] (or the day \
                 [\"{ALL_DAY}\"] alone)."
            ))
        }
    };
    let time = |v: &Value| v.as_str().and_then(seconds);
    match (time(&pair[0]), time(&pair[1])) {
        (Some(start), Some(end)) if end > start => {
            if previous_end.is_some_and(|previous_end| start < previous_end) {
                return Err(format!(
                    "Day {d}, range {r}: starts before range {} ends; give the \
                     ranges in order, without overlaps.",
                    r - 1
                ));
            }
            Ok((start, end))
        }
        (Some(_), Some(_)) => Err(format!(
            "Day {d}, range {r}: ends before (or when) it starts."
        )),
        _ => Err(format!(
            "Day {d}, range {r}: {} is not a time from 00:00:00 to 24:00:00 \
             (HH:MM:SS).",
            if time(&pair[0]).is_none() {
                &pair[0]
            } else {
                &pair[1]
            }
        )),
    }
}

/// An hours type's name: 1 to 50 of `a-z`, `0-9`, `_`, `-`.
fn type_name(fields: &mut FieldErrors, path: &[&str], value: Option<&Value>) -> Option<String> {
    match value {
        None | Some(Value::Null) => Some(PRIMARY.to_string()),
        Some(Value::String(name))
            if !name.is_empty()
                && name.len() <= MAX_TYPE_CHARS
                && name.bytes().all(|b| {
                    b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-'
                }) =>
        {
            Some(name.clone())
        }
        Some(_) => {
            fields.add_at(
                path,
                format!(
                    "Must be an hours type: 1 to {MAX_TYPE_CHARS} of a-z, 0-9, _ and - \
                     (primary when absent)."
                ),
            );
            None
        }
    }
}

/// The hours a location body gives, by type: `hours_of_operation` (the primary week),
/// `hours_by_type` (an object of weeks) and, with `read_hours_list`, `hours` (a list of
/// `{"type", "hours"}`), later ones winning for the same type. `prefix` is where the
/// location sits in the body (`["locations", "0"]`, or nothing). `None` when the body gives
/// no hours.
pub fn parse_hours(
    fields: &mut FieldErrors,
    prefix: &[&str],
    body: &Map<String, Value>,
    read_hours_list: bool,
) -> Option<HoursByType> {
    let path = |name: &'static str| -> Vec<&str> {
        prefix
            .iter()
            .copied()
            .chain(std::iter::once(name))
            .collect()
    };
    let mut given = HoursByType::new();
    let mut any = false;
    if let Some(value) = body.get("hours_of_operation") {
        any = true;
        if !value.is_null() {
            if let Some(week) = parse_week(fields, &path("hours_of_operation"), value) {
                given.insert(PRIMARY.into(), week);
            }
        }
    }
    if let Some(value) = body.get("hours_by_type") {
        any = true;
        match value {
            Value::Null => {}
            Value::Object(types) => {
                parse_hours_by_type(fields, &path("hours_by_type"), types, &mut given)
            }
            _ => fields.add_at(
                &path("hours_by_type"),
                "Must be an object of hours types to weeks.",
            ),
        }
    }
    if let Some(value) = body.get("hours").filter(|_| read_hours_list) {
        any = true;
        match value {
            Value::Null => {}
            Value::Array(items) => parse_hours_list(fields, &path("hours"), items, &mut given),
            _ => fields.add_at(
                &path("hours"),
                "Must be a list of {\"type\", \"hours\"} objects.",
            ),
        }
    }
    if given.len() > MAX_TYPES {
        fields.add_at(
            &path("hours"),
            format!("A location may hold at most {MAX_TYPES} hours types."),
        );
    }
    any.then_some(given)
}

/// `hours_by_type` (at `path`): an object of hours types to weeks, into `given`.
fn parse_hours_by_type(
    fields: &mut FieldErrors,
    path: &[&str],
    types: &Map<String, Value>,
    given: &mut HoursByType,
) {
    for (name, week) in types {
        let mut at = path.to_vec();
        at.push(name);
        let name = type_name(fields, &at, Some(&Value::String(name.clone())));
        if let (Some(name), Some(week)) = (name, parse_week(fields, &at, week)) {
            given.insert(name, week);
        }
    }
}

/// `hours` (at `path`): a list of `{"type", "hours"}` objects, into `given`.
fn parse_hours_list(
    fields: &mut FieldErrors,
    path: &[&str],
    items: &[Value],
    given: &mut HoursByType,
) {
    for (i, item) in items.iter().enumerate() {
        let index = i.to_string();
        let mut at = path.to_vec();
        at.push(&index);
        let Value::Object(item) = item else {
            fields.add_at(&at, "Must be an object {\"type\", \"hours\"}.");
            continue;
        };
        let mut type_at = at.clone();
        type_at.push("type");
        let name = type_name(fields, &type_at, item.get("type"));
        let mut hours_at = at.clone();
        hours_at.push("hours");
        let week = match item.get("hours") {
            None => {
                fields.add_at(&hours_at, "This field is required.");
                None
            }
            Some(week) => parse_week(fields, &hours_at, week),
        };
        if let (Some(name), Some(week)) = (name, week) {
            given.insert(name, week);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ApiError;

    fn errors(body: Value) -> Value {
        let mut fields = FieldErrors::default();
        parse_hours(
            &mut fields,
            &[],
            body.as_object().unwrap_or(&Map::new()),
            true,
        );
        match fields.into_result() {
            Err(e @ ApiError::Validation(_)) => e.body(),
            other => panic!("expected a validation error, got {other:?}"),
        }
    }

    #[test]
    fn weeks_are_normalised_and_typed() {
        let mut fields = FieldErrors::default();
        let week = json!([
            [["09:00", "17:00"]],
            [],
            ["24_HOURS"],
            [["08:00:00", "12:00:00"], ["13:00:00", "24:00:00"]],
            [],
            [],
            []
        ]);
        let body =
            json!({"hours": [{"type": "holiday", "hours": week}], "hours_of_operation": week});
        let parsed = parse_hours(
            &mut fields,
            &[],
            body.as_object().unwrap_or(&Map::new()),
            true,
        );
        assert!(fields.is_empty());
        let parsed = parsed.unwrap_or_default();
        assert_eq!(parsed.len(), 2);
        assert_eq!(parsed[PRIMARY][0], json!([["09:00:00", "17:00:00"]]));
        assert_eq!(parsed["holiday"][2], json!([ALL_DAY]));
        assert_eq!(parsed["holiday"][3][1][1], json!(END_OF_DAY));
    }

    #[test]
    fn errors_name_the_day_and_the_range() {
        let bad = json!([
            [["09:00:00", "25:00:00"]],
            [["17:00:00", "09:00:00"]],
            [["09:00:00", "12:00:00"], ["11:00:00", "13:00:00"]],
            "x",
            [],
            [],
            [[1, 2, 3]]
        ]);
        assert_eq!(
            errors(json!({"hours_of_operation": bad})),
            json!({"hours_of_operation": {
                "0": {"0": ["Day 0, range 0: \"25:00:00\" is not a time from 00:00:00 to 24:00:00 (HH:MM:SS)."]},
                "1": {"0": ["Day 1, range 0: ends before (or when) it starts."]},
                "2": {"1": ["Day 2, range 1: starts before range 0 ends; give the ranges in order, without overlaps."]},
                "3": ["Day 3: must be [], [\"24_HOURS\"] or a list of ranges."],
                "6": {"0": ["Day 6, range 0: must be [\"HH:MM:SS\", \"HH:MM:SS\"] (or the day [\"24_HOURS\"] alone)."]},
            }})
        );
        assert_eq!(
            errors(json!({"hours": [{"type": "Bad Type", "hours": [[], []]}]})),
            json!({"hours": {"0": {
                "type": ["Must be an hours type: 1 to 50 of a-z, 0-9, _ and - (primary when absent)."],
                "hours": ["Must have exactly 7 days (Monday first); this has 2."],
            }}})
        );
        let five = json!([
            [
                ["01:00", "02:00"],
                ["03:00", "04:00"],
                ["05:00", "06:00"],
                ["07:00", "08:00"],
                ["09:00", "10:00"]
            ],
            [],
            [],
            [],
            [],
            [],
            []
        ]);
        assert!(errors(json!({"hours_of_operation": five}))["hours_of_operation"]["0"].is_array());
    }
}

//! The list envelope: `limit`/`offset` parsing and `meta` with `next`/`previous` links that
//! keep the request's filters and order.

use std::collections::{BTreeSet, HashMap};

use serde_json::{json, Value};

use crate::error::{FieldErrors, Result};
use crate::store::Page;

pub const DEFAULT_LIMIT: u64 = 20;
pub const MAX_LIMIT: u64 = 1000;

/// The most bytes a page's objects may take in a Lambda response (their JSON, written once
/// more as the JSON string API Gateway's response holds it): a page stops before the object
/// that would pass it, and its `next` goes on from there. Lambda refuses a response over
/// 6 MB (6,291,556 bytes) with a 502; this leaves 2.2 MB for the envelope, the headers and
/// the response's own JSON. A page holds at least one object, and no object of the API is
/// near this size (the largest, a post, is about 402,000 bytes: `tests::page_bytes`).
pub const PAGE_MAX_BYTES: usize = 4_000_000;

/// The bytes `json` takes in a Lambda response: its compact JSON, each byte written as a
/// JSON string writes it (`"` and `\` as two bytes, control characters as two or six).
pub fn response_bytes(json: &Value) -> usize {
    let text = json.to_string();
    text.bytes()
        .map(|b| match b {
            b'"' | b'\\' | b'\n' | b'\r' | b'\t' | 0x08 | 0x0c => 2,
            0..=0x1f => 6,
            _ => 1,
        })
        .sum()
}

/// The first of `objects` that fit [`PAGE_MAX_BYTES`] together (at least one).
fn within_page_bytes(objects: Vec<Value>) -> Vec<Value> {
    let mut used = 0;
    let mut kept = Vec::with_capacity(objects.len());
    for object in objects {
        used += response_bytes(&object);
        if used > PAGE_MAX_BYTES && !kept.is_empty() {
            break;
        }
        kept.push(object);
    }
    kept
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Paging {
    pub limit: u64,
    pub offset: u64,
}

fn parse_count(fields: &mut FieldErrors, name: &str, value: &str) -> Option<u64> {
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        // All digits: only overflow can fail, and a huge number means "as many as allowed".
        Some(value.parse().unwrap_or(u64::MAX))
    } else {
        fields.add(name, format!("'{value}' is not a non-negative integer."));
        None
    }
}

/// Refuses a parameter given twice with different values (`deleted=0&deleted=1`): which
/// one wins is a guess, and a client that sent both meant something we cannot know. The
/// same value repeated passes. `oauth_*` parameters are authentication's (a repeated one
/// is its 401).
pub fn reject_conflicting_duplicates(params: &[(String, String)]) -> Result<()> {
    // Linear in the number of parameters: a long query string costs no more than reading it.
    let mut first_values: HashMap<&str, &str> = HashMap::with_capacity(params.len());
    let mut conflicting: BTreeSet<&str> = BTreeSet::new();
    for (name, value) in params {
        if name.starts_with("oauth_") {
            continue;
        }
        let first = first_values.entry(name).or_insert(value);
        if *first != value.as_str() {
            conflicting.insert(name);
        }
    }
    let mut fields = FieldErrors::default();
    for name in conflicting {
        fields.add(
            name,
            format!("'{name}' is given more than once with different values; send it once."),
        );
    }
    fields.into_result()
}

impl Paging {
    /// `limit` and `offset`. Every list parses its query here first, so this is also where
    /// conflicting duplicate parameters are refused.
    pub fn parse(params: &[(String, String)]) -> Result<Paging> {
        reject_conflicting_duplicates(params)?;
        let mut fields = FieldErrors::default();
        let mut paging = Paging {
            limit: DEFAULT_LIMIT,
            offset: 0,
        };
        for (name, value) in params {
            match name.as_str() {
                "limit" => {
                    if let Some(limit) = parse_count(&mut fields, "limit", value) {
                        paging.limit = if limit == 0 {
                            MAX_LIMIT
                        } else {
                            limit.min(MAX_LIMIT)
                        };
                    }
                }
                "offset" => {
                    if let Some(offset) = parse_count(&mut fields, "offset", value) {
                        paging.offset = offset.min(i64::MAX as u64);
                    }
                }
                _ => {}
            }
        }
        fields.into_result()?;
        Ok(paging)
    }
}

/// A link to another page: the same path and parameters, oauth ones dropped.
fn page_link(path: &str, params: &[(String, String)], limit: u64, offset: u64) -> String {
    let mut query = form_urlencoded::Serializer::new(String::new());
    query.extend_pairs(
        params
            .iter()
            .filter(|(n, _)| n != "limit" && n != "offset" && !n.starts_with("oauth_")),
    );
    query.append_pair("limit", &limit.to_string());
    query.append_pair("offset", &offset.to_string());
    format!("{path}?{}", query.finish())
}

/// The [`envelope`] of one page of records, each shown by `view`.
pub fn page_envelope<T>(
    path: &str,
    params: &[(String, String)],
    paging: Paging,
    page: &Page<T>,
    view: impl Fn(&T) -> Value,
) -> Value {
    let objects = page.items.iter().map(view).collect();
    envelope(path, params, paging, page.total_count, objects)
}

/// `{"meta": {...}, "objects": [...]}`. `path` is the canonical list path. A page whose
/// objects pass [`PAGE_MAX_BYTES`] ends before the one that would pass it, and `next` goes
/// on from there (with the `limit` asked). Such a page's `meta.limit` is the number of
/// objects it holds, the limit the server applied: a client that follows `next`, or adds
/// `meta.limit` to `offset` as tastypie clients do, gets every object.
pub fn envelope(
    path: &str,
    params: &[(String, String)],
    paging: Paging,
    total_count: u64,
    objects: Vec<Value>,
) -> Value {
    let Paging { limit, offset } = paging;
    let offered = objects.len() as u64;
    let objects = within_page_bytes(objects);
    // Fewer than `limit` objects: the end of the list, a page cut to its bytes, or (on
    // DynamoDB) a page the store already cut to the bytes it reads.
    let shown = objects.len() as u64;
    let cut = shown < offered || (shown < limit && offset.saturating_add(shown) < total_count);
    let step = if cut && shown > 0 { shown } else { limit };
    let next = (offset.saturating_add(step) < total_count)
        .then(|| page_link(path, params, limit, offset + step));
    // Past the end, `previous` is the last page, not the empty one before this one.
    let previous = (offset > 0).then(|| {
        let previous = offset
            .saturating_sub(limit)
            .min(total_count.saturating_sub(limit));
        page_link(path, params, limit, previous)
    });
    let applied_limit = if cut && shown > 0 { shown } else { limit };
    json!({
        "meta": {
            "limit": applied_limit,
            "offset": offset,
            "next": next,
            "previous": previous,
            "total_count": total_count,
        },
        "objects": objects,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::post::{Post, MAX_CONTENT_BYTES, MAX_TITLE_CHARS};
    use crate::operations::posts::view;

    fn post_of(title: &str, content: &str) -> Value {
        view::post(&Post {
            id: i64::MAX,
            account_id: 1,
            site_id: i64::MAX,
            title: title.into(),
            content: content.into(),
            date: 253_402_300_799,
            added: 253_402_300_799,
            modified: 253_402_300_799,
        })
    }

    /// The largest object of the API in a Lambda response: a post whose every byte JSON
    /// writes longest (`"`, four bytes once written twice). A page of 1,000 of them is cut
    /// to what fits, with room to spare under Lambda's 6 MB; so is one of posts stored with
    /// control characters before content refused them (seven bytes each).
    #[test]
    fn page_bytes() {
        let worst = post_of(
            &"\"".repeat(MAX_TITLE_CHARS),
            &"\"".repeat(MAX_CONTENT_BYTES),
        );
        let bytes = response_bytes(&worst);
        assert!((400_000..402_000).contains(&bytes), "{bytes}");
        let page = within_page_bytes(vec![worst; 1000]);
        assert_eq!(page.len(), PAGE_MAX_BYTES / bytes);
        let legacy = post_of("T", &"\u{1}".repeat(MAX_CONTENT_BYTES));
        assert!(response_bytes(&legacy) < 701_000);
        assert!(!within_page_bytes(vec![legacy; 1000]).is_empty());
        // `next` goes on from the first object not given, with the limit asked.
        let paging = Paging {
            limit: 1000,
            offset: 0,
        };
        let cut = envelope(
            "/api/v2/posts/",
            &[],
            paging,
            1000,
            vec![post_of("T", &"\"".repeat(MAX_CONTENT_BYTES)); 1000],
        );
        let shown = cut["objects"].as_array().map_or(0, Vec::len);
        assert_eq!(
            cut["meta"]["next"],
            format!("/api/v2/posts/?limit=1000&offset={shown}")
        );
        // The limit applied: `offset + meta.limit` is the next page's offset.
        assert_eq!(cut["meta"]["limit"], shown);
    }

    fn p(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn limits_default_clamp_and_zero_means_max() {
        assert_eq!(
            Paging::parse(&[]).ok(),
            Some(Paging {
                limit: 20,
                offset: 0
            })
        );
        assert_eq!(
            Paging::parse(&p(&[("limit", "5000")]))
                .ok()
                .map(|x| x.limit),
            Some(1000)
        );
        assert_eq!(
            Paging::parse(&p(&[("limit", "0")])).ok().map(|x| x.limit),
            Some(1000)
        );
        for bad in ["-1", "1.5", "abc", ""] {
            assert!(Paging::parse(&p(&[("limit", bad)])).is_err(), "{bad}");
            assert!(Paging::parse(&p(&[("offset", bad)])).is_err(), "{bad}");
        }
    }

    #[test]
    fn conflicting_duplicates_are_refused_naming_the_parameter() {
        for (query, field) in [
            (p(&[("deleted", "0"), ("deleted", "1")]), "deleted"),
            (p(&[("limit", "5"), ("x", "1"), ("limit", "6")]), "limit"),
            (
                p(&[("order_by", "id"), ("order_by", "id"), ("order_by", "-id")]),
                "order_by",
            ),
        ] {
            match Paging::parse(&query) {
                Err(crate::error::ApiError::Validation(m)) => {
                    assert_eq!(m.len(), 1, "{m:?}");
                    assert_eq!(
                        m.get(field),
                        Some(&vec![format!(
                            "'{field}' is given more than once with different values; send it once."
                        )])
                    );
                }
                other => panic!("{query:?}: expected a 400, got {other:?}"),
            }
        }
        // The same value twice, distinct names, and oauth parameters pass here.
        assert!(Paging::parse(&p(&[("deleted", "1"), ("deleted", "1"), ("limit", "2")])).is_ok());
        assert!(Paging::parse(&p(&[("oauth_nonce", "a"), ("oauth_nonce", "b")])).is_ok());
    }

    #[test]
    fn links_keep_filters_and_drop_oauth() {
        let params = p(&[
            ("deleted", "0"),
            ("order_by", "-id"),
            ("oauth_nonce", "x"),
            ("limit", "2"),
        ]);
        let v = envelope(
            "/api/v2/businesses/",
            &params,
            Paging {
                limit: 2,
                offset: 2,
            },
            5,
            vec![],
        );
        assert_eq!(
            v["meta"]["next"],
            "/api/v2/businesses/?deleted=0&order_by=-id&limit=2&offset=4"
        );
        assert_eq!(
            v["meta"]["previous"],
            "/api/v2/businesses/?deleted=0&order_by=-id&limit=2&offset=0"
        );
        let last = envelope(
            "/api/v2/businesses/",
            &params,
            Paging {
                limit: 2,
                offset: 4,
            },
            5,
            vec![],
        );
        assert_eq!(last["meta"]["next"], Value::Null);
    }

    #[test]
    fn offsets_past_the_end_link_back_to_the_last_page_without_overflow() {
        let paging = Paging::parse(&p(&[("offset", "99999999999999999999"), ("limit", "20")]))
            .expect("a huge offset is valid");
        assert_eq!(paging.offset, i64::MAX as u64);
        for (offset, total, previous) in [
            (i64::MAX as u64, 45, "/api/v2/images/?limit=20&offset=25"),
            (
                1_000_000_000_000_000_000,
                5,
                "/api/v2/images/?limit=20&offset=0",
            ),
            (40, 0, "/api/v2/images/?limit=20&offset=0"),
            (30, 45, "/api/v2/images/?limit=20&offset=10"),
        ] {
            let v = envelope(
                "/api/v2/images/",
                &[],
                Paging { limit: 20, offset },
                total,
                vec![],
            );
            assert_eq!(v["meta"]["next"], Value::Null, "{offset}");
            assert_eq!(v["meta"]["previous"], previous, "{offset}");
            assert_eq!(v["meta"]["offset"], offset);
        }
        let near_max = envelope(
            "/api/v2/images/",
            &[],
            Paging {
                limit: 1000,
                offset: u64::MAX - 10,
            },
            u64::MAX,
            vec![],
        );
        assert_eq!(near_max["meta"]["next"], Value::Null);
    }
}

//! Where each item lives: its keys (docs/dynamodb-design.md, "Items"), and how attribute
//! values are written and read. The records themselves are in `records`.

use std::collections::HashMap;
use std::str::FromStr;

use aws_sdk_dynamodb::types::AttributeValue;
use percent_encoding::{utf8_percent_encode, AsciiSet, CONTROLS};
use sha1::{Digest, Sha1};

use crate::domain::business::Business;
use crate::error::{ApiError, Result};
use crate::store::IdempotencyKey;

use super::spread;

pub type Item = HashMap<String, AttributeValue>;

pub const PK: &str = "pk";
pub const SK: &str = "sk";
/// The sort key of the `by_name` local secondary index.
pub const NK: &str = "nk";
pub const BY_NAME: &str = "by_name";

/// Partition keys longer than this are replaced by a digest: DynamoDB allows 2048 bytes, and
/// scope values (partner ids, escaped) or client-sent key and nonce values can exceed it.
const MAX_PK_BYTES: usize = 1024;
/// The `nk` sort key is at most 1024 bytes; the name part is cut to this many bytes, so only
/// names that share their first ~960 bytes fall back to id order among themselves.
const MAX_NAME_KEY_BYTES: usize = 960;
/// Key values are also sort keys of the `KEYS` partition (1024 bytes at most).
pub const MAX_KEY_BYTES: usize = 512;

/// Escapes `#` (our separator) and `%` in values embedded in a key.
const KEY_VALUE: &AsciiSet = &CONTROLS.add(b'#').add(b'%');

/// The id sequences.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Seq {
    Business,
    Image,
    Account,
    User,
    Location,
    Site,
    Post,
}

impl Seq {
    fn name(self) -> &'static str {
        match self {
            Seq::Business => "business",
            Seq::Image => "image",
            Seq::Location => "location",
            Seq::Account => "account",
            Seq::User => "user",
            Seq::Site => "site",
            Seq::Post => "post",
        }
    }
}

/// The record kinds that have list entries and counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Business,
    Image,
    Site,
    Post,
}

impl Kind {
    fn entry_tag(self) -> &'static str {
        match self {
            Kind::Business => "B",
            Kind::Image => "I",
            Kind::Site => "S",
            Kind::Post => "P",
        }
    }

    fn counter_tag(self) -> &'static str {
        match self {
            Kind::Business => "BC",
            Kind::Image => "IC",
            Kind::Site => "SC",
            Kind::Post => "PC",
        }
    }
}

fn escaped(value: &str) -> String {
    utf8_percent_encode(value, KEY_VALUE).to_string()
}

/// Caps a partition key's length: long ones become `H#<sha1 of the key>`. Every other
/// partition key starts with an upper-case word and `#`, so a digest cannot collide with
/// one, and the mapping is deterministic so readers and writers agree.
fn bounded(pk: String) -> String {
    if pk.len() <= MAX_PK_BYTES {
        return pk;
    }
    let digest = Sha1::digest(pk.as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("H#{hex}")
}

pub fn key(pk: String, sk: impl Into<String>) -> Item {
    HashMap::from([(PK.to_string(), s(pk)), (SK.to_string(), s(sk))])
}

pub fn seq_key(seq: Seq) -> Item {
    key(format!("SEQ#{}", seq.name()), "SEQ")
}

pub fn account_key(name: &str) -> Item {
    key(bounded(format!("ACCOUNT#{name}")), "ACCOUNT")
}

pub fn api_key_key(api_key: &str) -> Item {
    key(bounded(format!("KEY#{api_key}")), "KEY")
}

pub const KEYS_PK: &str = "KEYS";

pub fn key_listing_key(api_key: &str) -> Item {
    key(KEYS_PK.to_string(), api_key)
}

pub fn nonce_key(api_key: &str, nonce: &str) -> Item {
    key(
        bounded(format!("NONCE#{}#{}", escaped(api_key), escaped(nonce))),
        "NONCE",
    )
}

/// The counter of one key's budget of one kind in one window (`window`: its start, unix
/// seconds). The key is escaped like in nonce keys, so no two (key, kind, window) share one.
pub fn budget_key(api_key: &str, kind: &str, window: i64) -> Item {
    key(
        bounded(format!("BUDGET#{}#{kind}#{window}", escaped(api_key))),
        "BUDGET",
    )
}

/// One caller's `Idempotency-Key`: the account, then a digest of the API key (escaped, so it
/// has no `#`) and the key's value (any length, any characters) after it, so that no two
/// (API key, value) pairs share an item, and the partition key stays short and under the
/// `IDEMPOTENCY#` prefix the functions' IAM policies allow.
pub fn idempotency_key(key: &IdempotencyKey<'_>) -> Item {
    let digest = Sha1::digest(format!("{}#{}", escaped(key.api_key), key.value).as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    self::key(
        format!("IDEMPOTENCY#{}#{hex}", key.account_id),
        "IDEMPOTENCY",
    )
}

/// A staged upload's session, under the `UPLOAD#` prefix the functions' IAM policies allow
/// (the id is random hex, checked before any store call).
pub fn upload_session_key(upload_id: &str) -> Item {
    key(format!("UPLOAD#{upload_id}"), "UPLOAD")
}

pub fn business_key(id: i64) -> Item {
    key(business_pk(id), "BUSINESS")
}

/// The sort key of a business's services and locations, in the business's partition: a
/// `Query` of `BUSINESS#<id>` reads the record and them at once.
pub const DETAILS: &str = "DETAILS";

pub fn business_pk(id: i64) -> String {
    format!("BUSINESS#{id}")
}

/// The business id of an item in a business's partition (`business_pk`'s inverse), read
/// from its `pk`.
pub fn business_id_of(item: &Item) -> Result<i64> {
    get_s(item, PK)?
        .strip_prefix("BUSINESS#")
        .and_then(|id| id.parse::<i64>().ok())
        .ok_or_else(|| ApiError::internal("an item of a business's partition with an odd key"))
}

pub fn details_key(id: i64) -> Item {
    key(business_pk(id), DETAILS)
}

pub fn image_key(id: i64) -> Item {
    key(format!("IMAGE#{id}"), "IMAGE")
}

pub fn record_key(kind: Kind, id: i64) -> Item {
    match kind {
        Kind::Business => business_key(id),
        Kind::Image => image_key(id),
        Kind::Site => site_key(id),
        Kind::Post => post_key(id),
    }
}

pub fn site_key(id: i64) -> Item {
    key(format!("SITE#{id}"), "SITE")
}

pub fn post_key(id: i64) -> Item {
    key(format!("POST#{id}"), "POST")
}

/// The item that holds a host (`www.example.com`) for one account's active sites: `acct`
/// and `n`, how many of its sites are there (`store::dynamo::sites`). Taken on the
/// condition that no other account's site is there, so of two accounts at one host one only
/// creates or enables a site.
pub fn site_host_key(host: &str) -> Item {
    key(bounded(format!("SITEHOST#{}", escaped(host))), "SITEHOST")
}

/// The item that holds a path (bare host and base directory, `example.com/blog/`) for its
/// one active site: written with `attribute_not_exists`, so of two sites at one address
/// one only is created or enabled.
pub fn site_path_key(path: &str) -> Item {
    key(bounded(format!("SITEADDR#{}", escaped(path))), "SITEADDR")
}

/// One of the partitions holding the list entries of one scope of an account: `shard` is
/// `spread::entry_shard` of the record's id. Scope names escape `#`, so the suffix cannot
/// be forged by a value.
pub fn entries_pk(kind: Kind, account_id: i64, scope: &str, shard: u32) -> String {
    bounded(format!(
        "A#{account_id}#{}#{scope}#{shard}",
        kind.entry_tag()
    ))
}

/// One of the partitions holding the counter lanes of one scope of an account.
pub fn counter_pk(kind: Kind, account_id: i64, scope: &str, partition: u32) -> String {
    bounded(format!(
        "A#{account_id}#{}#{scope}#{partition}",
        kind.counter_tag()
    ))
}

/// One lane of a scope's counter: the scope's count is the sum of all its lanes.
pub fn counter_key(kind: Kind, account_id: i64, scope: &str, lane: u32) -> Item {
    key(
        counter_pk(kind, account_id, scope, spread::lane_partition(lane)),
        format!("LANE#{lane:03}"),
    )
}

/// Ids in sort keys: zero-padded so that string order is numeric order.
pub fn padded(id: i64) -> String {
    format!("{id:020}")
}

/// The `by_name` sort key: the case-insensitive name, `\u{1}` (below any character a name
/// may hold: control characters are rejected), then the padded id, so ties break by id.
pub fn name_sort_key(business: &Business) -> String {
    text_sort_key(crate::store::scope::name_key(business), business.id)
}

/// A `by_name` sort key of any text key (a business name's, a site title's, a post's date):
/// cut to [`MAX_NAME_KEY_BYTES`], then `\u{1}` and the padded id.
pub fn text_sort_key(mut name: String, id: i64) -> String {
    if name.len() > MAX_NAME_KEY_BYTES {
        let mut end = MAX_NAME_KEY_BYTES;
        while !name.is_char_boundary(end) {
            end -= 1;
        }
        name.truncate(end);
    }
    format!("{name}\u{1}{}", padded(id))
}

/// The key of a record's list entry in one scope: in the shard its id hashes to.
pub fn entry_key(kind: Kind, account_id: i64, scope: &str, id: i64) -> Item {
    key(
        entries_pk(kind, account_id, scope, spread::entry_shard(id)),
        padded(id),
    )
}

/// A list entry: the scope shard, the padded id, and the id (projected into `by_name`).
pub fn entry_item(kind: Kind, account_id: i64, scope: &str, id: i64, nk: Option<&str>) -> Item {
    let mut item = entry_key(kind, account_id, scope, id);
    item.insert("id".into(), n(id));
    if let Some(nk) = nk {
        item.insert(NK.into(), s(nk));
    }
    item
}

pub fn s(value: impl Into<String>) -> AttributeValue {
    AttributeValue::S(value.into())
}

pub fn n(value: impl ToString) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

pub fn malformed(name: &str) -> ApiError {
    ApiError::internal(format!(
        "dynamodb item has a missing or malformed attribute {name}"
    ))
}

pub fn get_s(item: &Item, name: &str) -> Result<String> {
    opt_s(item, name)?.ok_or_else(|| malformed(name))
}

pub fn opt_s(item: &Item, name: &str) -> Result<Option<String>> {
    match item.get(name) {
        None | Some(AttributeValue::Null(_)) => Ok(None),
        Some(AttributeValue::S(v)) => Ok(Some(v.clone())),
        Some(_) => Err(malformed(name)),
    }
}

pub fn get_n<T: FromStr>(item: &Item, name: &str) -> Result<T> {
    opt_n(item, name)?.ok_or_else(|| malformed(name))
}

pub fn opt_n<T: FromStr>(item: &Item, name: &str) -> Result<Option<T>> {
    match item.get(name) {
        None | Some(AttributeValue::Null(_)) => Ok(None),
        Some(AttributeValue::N(v)) => v.parse().map(Some).map_err(|_| malformed(name)),
        Some(_) => Err(malformed(name)),
    }
}

pub fn get_bool(item: &Item, name: &str) -> Result<bool> {
    match item.get(name) {
        Some(AttributeValue::Bool(v)) => Ok(*v),
        _ => Err(malformed(name)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::dynamo::records::tests::business;

    #[test]
    fn name_keys_order_by_name_then_id() {
        let keys = [
            name_sort_key(&business(10, "a")),
            name_sort_key(&business(2, "ab")),
            name_sort_key(&business(3, "AB")),
            name_sort_key(&business(1, "b")),
        ];
        let mut sorted = keys.clone();
        sorted.sort();
        assert_eq!(sorted, keys);
        assert!(name_sort_key(&business(1, &"é".repeat(600))).len() <= 1024);
    }

    #[test]
    fn long_partition_keys_are_digested_and_values_escaped() {
        let long = "x".repeat(2000);
        let pk = entries_pk(Kind::Business, 1, &long, 3);
        assert!(pk.starts_with("H#") && pk.len() == 42);
        assert_eq!(pk, entries_pk(Kind::Business, 1, &long, 3));
        assert_ne!(pk, entries_pk(Kind::Business, 1, &long, 4));
        assert_ne!(nonce_key("a#b", "c"), nonce_key("a", "b#c"));
        assert_eq!(
            budget_key("a#b", "uploads", 60)[PK].as_s().ok(),
            Some(&"BUDGET#a%23b#uploads#60".to_string())
        );
        let long_budget = budget_key(&"k".repeat(2000), "uploads", 60);
        assert!(long_budget[PK].as_s().is_ok_and(|pk| pk.starts_with("H#")));
    }
}

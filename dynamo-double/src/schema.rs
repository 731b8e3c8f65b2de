//! Tables' key schemas (learnt from moto with `DescribeTable`) and the keys, partitions and
//! costs of the writes a request makes.

use std::collections::HashSet;

use serde_json::{Map, Value};

use crate::size::{item_size, write_units};

/// What the double needs to know about a table: its key attributes, the range-key
/// attributes of its local secondary indexes and its ARN (for throttling reasons).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableSchema {
    pub hash_key: String,
    pub range_key: Option<String>,
    /// One entry per local secondary index: the attribute its sort key is made of.
    pub lsi_range_keys: Vec<String>,
    pub arn: String,
}

impl TableSchema {
    /// Reads a `DescribeTable` answer (`{"Table": {"KeySchema": [...], ...}}`).
    pub fn from_describe_table(answer: &Value) -> Option<TableSchema> {
        let table = answer.get("Table")?;
        let (hash_key, range_key) = key_schema(table.get("KeySchema")?)?;
        let lsi_range_keys = table
            .get("LocalSecondaryIndexes")
            .and_then(Value::as_array)
            .map(|indexes| {
                indexes
                    .iter()
                    .filter_map(|index| key_schema(index.get("KeySchema")?)?.1)
                    .collect()
            })
            .unwrap_or_default();
        let arn = table
            .get("TableArn")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        Some(TableSchema {
            hash_key,
            range_key,
            lsi_range_keys,
            arn,
        })
    }

    /// The primary key of an item or `Key` map, as canonical JSON text per key attribute;
    /// `None` when an attribute of the key is missing (moto will reject the request).
    pub fn key_of(&self, attributes: &Map<String, Value>) -> Option<(String, Option<String>)> {
        let hash = canonical(attributes.get(&self.hash_key)?);
        let range = match &self.range_key {
            Some(name) => Some(canonical(attributes.get(name)?)),
            None => None,
        };
        Some((hash, range))
    }
}

fn key_schema(schema: &Value) -> Option<(String, Option<String>)> {
    let elements = schema.as_array()?;
    let named = |kind: &str| {
        elements
            .iter()
            .find(|e| e.get("KeyType").and_then(Value::as_str) == Some(kind))
            .and_then(|e| e.get("AttributeName")?.as_str())
            .map(str::to_owned)
    };
    Some((named("HASH")?, named("RANGE")))
}

/// `serde_json` maps are sorted (no `preserve_order` feature here), so equal values print
/// equal: the text is a key for hash maps.
fn canonical(value: &Value) -> String {
    value.to_string()
}

/// The kind of one write, which decides what it costs and whether it holds its item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteKind {
    Put,
    Update,
    Delete,
    ConditionCheck,
}

/// One write of a request, as far as the model needs it: which table and item, and what
/// it costs.
#[derive(Debug, Clone)]
pub struct Write {
    pub table: String,
    pub hash: String,
    pub range: Option<String>,
    /// Write capacity units, transactional doubling and index writes included.
    pub wcu: f64,
}

/// The body of a `Put`/`Update`/`Delete`/`ConditionCheck` (a transaction's action or a
/// single-item call's whole request): its table name.
pub fn table_name(body: &Value) -> Option<&str> {
    body.get("TableName")?.as_str()
}

/// The write a `Put`/`Update`/`Delete`/`ConditionCheck` body makes on a table of `schema`;
/// `None` when the body lacks what DynamoDB requires (the request goes to moto unmodelled,
/// and moto answers the validation error).
///
/// Cost: the item's write units (see [`crate::size`]), doubled in a transaction, plus one
/// more write of the same cost per local secondary index the write touches. Only a `Put`
/// shows the item, so:
/// - `Put`: the item's own size; an index write for each LSI whose sort-key attribute the
///   item has.
/// - `Update`: 1 KB (the stored item is unseen); an index write for each LSI whose sort-key
///   attribute the update names (in `UpdateExpression`, through `ExpressionAttributeNames`
///   or in legacy `AttributeUpdates`), counted once, as if it set a value the item did not
///   have. Changing an existing index key costs two index writes on DynamoDB (delete and
///   put): under-counted here.
/// - `Delete`: 1 KB, and an index delete for every LSI, as if the stored item had every
///   index key (conservative: deleting an item outside the index costs less).
/// - `ConditionCheck`: 1 KB, no index write (nothing is written).
pub fn write_of(
    schema: &TableSchema,
    kind: WriteKind,
    body: &Value,
    transactional: bool,
) -> Option<Write> {
    let table = table_name(body)?.to_owned();
    let (attributes, units, index_writes) = match kind {
        WriteKind::Put => {
            let item = body.get("Item")?.as_object()?;
            let units = write_units(item_size(item));
            let index_writes = schema
                .lsi_range_keys
                .iter()
                .filter(|name| item.contains_key(name.as_str()))
                .count();
            (item, units, index_writes)
        }
        WriteKind::Update => {
            let key = body.get("Key")?.as_object()?;
            let named = names_in_update(body);
            let index_writes = schema
                .lsi_range_keys
                .iter()
                .filter(|name| named.contains(name.as_str()))
                .count();
            (key, 1, index_writes)
        }
        WriteKind::Delete => {
            let key = body.get("Key")?.as_object()?;
            (key, 1, schema.lsi_range_keys.len())
        }
        WriteKind::ConditionCheck => (body.get("Key")?.as_object()?, 1, 0),
    };
    let (hash, range) = schema.key_of(attributes)?;
    let per_write = if transactional { 2 * units } else { units };
    let wcu = (per_write * (1 + index_writes as u64)) as f64;
    Some(Write {
        table,
        hash,
        range,
        wcu,
    })
}

/// The attribute names an update writes or reads, as far as can be told without parsing
/// the expression grammar: every identifier-like token of `UpdateExpression` (placeholders
/// resolved through `ExpressionAttributeNames`) and the keys of legacy `AttributeUpdates`.
fn names_in_update(body: &Value) -> HashSet<&str> {
    let placeholders = body
        .get("ExpressionAttributeNames")
        .and_then(Value::as_object);
    let mut names = HashSet::new();
    if let Some(expression) = body.get("UpdateExpression").and_then(Value::as_str) {
        let tokens = expression
            .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '#' || c == '-'))
            .filter(|t| !t.is_empty());
        for token in tokens {
            let resolved = if token.starts_with('#') {
                placeholders
                    .and_then(|p| p.get(token))
                    .and_then(Value::as_str)
            } else {
                Some(token)
            };
            names.extend(resolved);
        }
    }
    if let Some(updates) = body.get("AttributeUpdates").and_then(Value::as_object) {
        names.extend(updates.keys().map(String::as_str));
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn records() -> TableSchema {
        TableSchema::from_describe_table(&json!({"Table": {
            "TableArn": "arn:aws:dynamodb:us-east-1:123456789012:table/t",
            "KeySchema": [
                {"AttributeName": "sk", "KeyType": "RANGE"},
                {"AttributeName": "pk", "KeyType": "HASH"}
            ],
            "LocalSecondaryIndexes": [{"IndexName": "by_name", "KeySchema": [
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "nk", "KeyType": "RANGE"}
            ]}]
        }}))
        .expect("schema")
    }

    #[test]
    fn reads_the_key_schema_and_index_keys() {
        let schema = records();
        assert_eq!(schema.hash_key, "pk");
        assert_eq!(schema.range_key.as_deref(), Some("sk"));
        assert_eq!(schema.lsi_range_keys, vec!["nk".to_owned()]);
    }

    #[test]
    fn a_put_with_an_index_key_costs_an_index_write() {
        let schema = records();
        let body = json!({"TableName": "t", "Item": {
            "pk": {"S": "A"}, "sk": {"S": "1"}, "nk": {"S": "x"}
        }});
        let single = write_of(&schema, WriteKind::Put, &body, false).expect("write");
        assert_eq!(single.wcu, 2.0);
        assert_eq!(single.hash, r#"{"S":"A"}"#);
        let transactional = write_of(&schema, WriteKind::Put, &body, true).expect("write");
        assert_eq!(transactional.wcu, 4.0);
    }

    #[test]
    fn an_update_costs_an_index_write_only_when_it_names_the_index_key() {
        let schema = records();
        let counter = json!({"TableName": "t", "Key": {"pk": {"S": "A"}, "sk": {"S": "C"}},
            "UpdateExpression": "ADD n :one"});
        assert_eq!(
            write_of(&schema, WriteKind::Update, &counter, true).map(|w| w.wcu),
            Some(2.0)
        );
        let rename = json!({"TableName": "t", "Key": {"pk": {"S": "A"}, "sk": {"S": "C"}},
            "UpdateExpression": "SET #k = :v", "ExpressionAttributeNames": {"#k": "nk"}});
        assert_eq!(
            write_of(&schema, WriteKind::Update, &rename, false).map(|w| w.wcu),
            Some(2.0)
        );
    }

    #[test]
    fn a_body_without_its_key_is_not_modelled() {
        let schema = records();
        let body = json!({"TableName": "t", "Key": {"pk": {"S": "A"}}});
        assert!(write_of(&schema, WriteKind::Delete, &body, false).is_none());
    }
}

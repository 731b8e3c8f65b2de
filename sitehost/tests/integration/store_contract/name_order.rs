//! Name order: accent- and case-insensitive, ties by id, on both stores ("Éclair" sits with
//! the E's, not after "zzz"); and the one-off rewrite of sort keys stored before it.

use std::sync::Arc;

use aws_sdk_dynamodb::types::AttributeValue;
use sitehost::domain::business::{BusinessFilter, BusinessOrder};
use sitehost::store::dynamo::DynamoStore;
use sitehost::store::SharedStore;

use super::fixtures::{account, create, list, new_business, DAY1};
use crate::support;

const NAMES: [&str; 7] = [
    "zzz",
    "Österreich",
    "Éclair House",
    "apple",
    "Ñandú",
    "eagle",
    "ECLAIR HOUSE",
];
const ORDERED: [&str; 7] = [
    "apple",
    "eagle",
    "Éclair House",
    "ECLAIR HOUSE",
    "Ñandú",
    "Österreich",
    "zzz",
];

async fn names(store: &SharedStore, account: i64, order: BusinessOrder) -> Vec<String> {
    list(store, account, BusinessFilter::default(), order, 0, 100)
        .await
        .items
        .into_iter()
        .map(|b| b.business_name)
        .collect()
}

pub async fn names_sort_with_their_base_letter(store: SharedStore) {
    let a = account(&store, "acme").await;
    for name in NAMES {
        create(&store, a, new_business(name), DAY1).await;
    }
    assert_eq!(names(&store, a, BusinessOrder::NameAsc).await, ORDERED);
    let mut reversed = ORDERED.to_vec();
    reversed.reverse();
    assert_eq!(names(&store, a, BusinessOrder::NameDesc).await, reversed);
}

/// The keys as the release before stored them: the name in lower case.
fn old_key(name: &str) -> String {
    name.to_lowercase()
}

#[tokio::test]
async fn sqlite_names_keyed_the_old_way_are_rekeyed() {
    let dir = tempfile::tempdir().expect("dir");
    let sqlite = Arc::new(sitehost::store::sqlite::SqliteStore::open(dir.path()).expect("open"));
    let store: SharedStore = sqlite.clone();
    let a = account(&store, "acme").await;
    for name in NAMES {
        create(&store, a, new_business(name), DAY1).await;
    }
    let db = rusqlite::Connection::open(dir.path().join("sitehost.db")).expect("db");
    for name in NAMES {
        db.execute(
            "UPDATE businesses SET name_key = ?1 WHERE business_name = ?2",
            rusqlite::params![old_key(name), name],
        )
        .expect("old key");
    }
    assert_ne!(names(&store, a, BusinessOrder::NameAsc).await, ORDERED);
    assert_eq!(sqlite.rekey_business_names().expect("rekey"), 3);
    assert_eq!(names(&store, a, BusinessOrder::NameAsc).await, ORDERED);
    assert_eq!(sqlite.rekey_business_names().expect("rekey"), 0);
}

#[tokio::test]
async fn dynamodb_names_keyed_the_old_way_are_rekeyed() {
    let Some(table) = support::TestTable::create().await else {
        return;
    };
    let dynamo = Arc::new(DynamoStore::new(table.client.clone(), table.name.clone()));
    let store: SharedStore = dynamo.clone();
    let a = account(&store, "acme").await;
    let mut ids = Vec::new();
    for name in NAMES {
        ids.push((create(&store, a, new_business(name), DAY1).await.id, name));
    }
    // Every list entry of the account gets its name's old key.
    let entries = table
        .client
        .scan()
        .table_name(&table.name)
        .filter_expression("attribute_exists(nk)")
        .send()
        .await
        .expect("scan");
    for entry in entries.items() {
        let id: i64 = entry["id"]
            .as_n()
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or_default();
        let name = ids
            .iter()
            .find(|(i, _)| *i == id)
            .map(|(_, n)| *n)
            .unwrap_or_default();
        table
            .client
            .update_item()
            .table_name(&table.name)
            .key("pk", entry["pk"].clone())
            .key("sk", entry["sk"].clone())
            .update_expression("SET nk = :nk")
            .expression_attribute_values(
                ":nk",
                AttributeValue::S(format!("{}\u{1}{id:020}", old_key(name))),
            )
            .send()
            .await
            .expect("old key");
    }
    assert_ne!(names(&store, a, BusinessOrder::NameAsc).await, ORDERED);
    assert_eq!(dynamo.rekey_business_names().await.expect("rekey"), 7);
    assert_eq!(names(&store, a, BusinessOrder::NameAsc).await, ORDERED);
    table.delete().await;
}

//! The DynamoDB double (`dynamo-double`) in front of moto, on tables made from
//! `template.yaml`: transaction conflicts, partition throttling, write costs, the time
//! stretch and the statistics, as the AWS SDK sees them (its retries off).
//!
//! Timing assertions compare with the modelled durations (hundreds of milliseconds) and
//! leave wide margins: the double shares moto's gate with every other test of the process.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::operation::delete_item::DeleteItemError;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{AttributeValue, ConditionCheck, Put, TransactWriteItem, Update};
use aws_sdk_dynamodb::Client;
use dynamo_double::{Model, Stats};

use crate::support::double::{client_without_retries, table_behind_double};

fn s(value: &str) -> AttributeValue {
    AttributeValue::S(value.to_owned())
}

fn n(value: i64) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

fn key(pk: &str, sk: &str) -> HashMap<String, AttributeValue> {
    HashMap::from([("pk".to_owned(), s(pk)), ("sk".to_owned(), s(sk))])
}

fn item(pk: &str, sk: &str, extra: &[(&str, AttributeValue)]) -> HashMap<String, AttributeValue> {
    let mut item = key(pk, sk);
    item.extend(
        extra
            .iter()
            .map(|(name, value)| ((*name).to_owned(), value.clone())),
    );
    item
}

fn put(table: &str, item: HashMap<String, AttributeValue>) -> TransactWriteItem {
    let put = Put::builder()
        .table_name(table)
        .set_item(Some(item))
        .build()
        .expect("put");
    TransactWriteItem::builder().put(put).build()
}

/// `ADD n :one` on a counter item, as the store's counters do.
fn increment(table: &str, pk: &str, sk: &str) -> TransactWriteItem {
    let update = Update::builder()
        .table_name(table)
        .set_key(Some(key(pk, sk)))
        .update_expression("ADD n :one")
        .expression_attribute_values(":one", n(1))
        .build()
        .expect("update");
    TransactWriteItem::builder().update(update).build()
}

fn exists(table: &str, pk: &str, sk: &str) -> TransactWriteItem {
    let check = ConditionCheck::builder()
        .table_name(table)
        .set_key(Some(key(pk, sk)))
        .condition_expression("attribute_exists(pk)")
        .build()
        .expect("condition check");
    TransactWriteItem::builder().condition_check(check).build()
}

async fn transact(
    client: &Client,
    actions: Vec<TransactWriteItem>,
) -> Result<(), TransactWriteItemsError> {
    client
        .transact_write_items()
        .set_transact_items(Some(actions))
        .send()
        .await
        .map(drop)
        .map_err(|e| e.into_service_error())
}

async fn put_item(
    client: &Client,
    table: &str,
    item: HashMap<String, AttributeValue>,
) -> Result<(), PutItemError> {
    client
        .put_item()
        .table_name(table)
        .set_item(Some(item))
        .send()
        .await
        .map(drop)
        .map_err(|e| e.into_service_error())
}

async fn get(
    client: &Client,
    table: &str,
    pk: &str,
    sk: &str,
) -> Option<HashMap<String, AttributeValue>> {
    client
        .get_item()
        .table_name(table)
        .set_key(Some(key(pk, sk)))
        .consistent_read(true)
        .send()
        .await
        .expect("GetItem")
        .item
}

async fn number(client: &Client, table: &str, pk: &str, sk: &str, attribute: &str) -> Option<i64> {
    let item = get(client, table, pk, sk).await?;
    item.get(attribute)?.as_n().ok()?.parse().ok()
}

/// The cancellation reasons' codes, or a panic naming what came instead.
fn cancellation_codes(error: TransactWriteItemsError) -> (Vec<String>, String) {
    match error {
        TransactWriteItemsError::TransactionCanceledException(e) => (
            e.cancellation_reasons()
                .iter()
                .map(|r| r.code().unwrap_or("<none>").to_owned())
                .collect(),
            e.message().unwrap_or_default().to_owned(),
        ),
        other => panic!("expected TransactionCanceledException, got {other:?}"),
    }
}

fn short_transactions(transaction_ms: u64) -> Model {
    Model {
        transaction: Duration::from_millis(transaction_ms),
        ..Model::default()
    }
}

#[tokio::test]
async fn of_two_transactions_on_one_item_one_commits_and_the_other_is_told_which_action_conflicted()
{
    let Some((table, client, double)) = table_behind_double(short_transactions(400)).await else {
        return;
    };
    let t = table.name.clone();
    put_item(&client, &t, item("A#1#BC", "COUNT", &[("n", n(0))]))
        .await
        .expect("seed the counter");

    // The first holds the counter for 400 ms; the second arrives meanwhile.
    let first = tokio::spawn({
        let client = client.clone();
        let actions = vec![
            put(&t, item("A#1#B", "1", &[])),
            increment(&t, "A#1#BC", "COUNT"),
        ];
        async move { transact(&client, actions).await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let second = transact(
        &client,
        vec![
            put(&t, item("A#1#B", "2", &[])),
            increment(&t, "A#1#BC", "COUNT"),
        ],
    )
    .await;
    let (codes, message) = cancellation_codes(second.expect_err("the second must be cancelled"));
    assert_eq!(codes, ["None", "TransactionConflict"]);
    assert!(
        message.contains("[None, TransactionConflict]"),
        "message: {message}"
    );
    first.await.expect("task").expect("the first commits");
    assert_eq!(number(&client, &t, "A#1#BC", "COUNT", "n").await, Some(1));
    assert!(get(&client, &t, "A#1#B", "1").await.is_some());
    assert!(
        get(&client, &t, "A#1#B", "2").await.is_none(),
        "a cancelled transaction writes nothing"
    );

    // Sent at the same instant: still exactly one.
    let (a, b) = tokio::join!(
        transact(
            &client,
            vec![
                increment(&t, "A#1#BC", "COUNT"),
                put(&t, item("A#1#B", "3", &[]))
            ]
        ),
        transact(
            &client,
            vec![
                increment(&t, "A#1#BC", "COUNT"),
                put(&t, item("A#1#B", "4", &[]))
            ]
        ),
    );
    let committed = [a.is_ok(), b.is_ok()].iter().filter(|&&ok| ok).count();
    assert_eq!(
        committed, 1,
        "exactly one of two racing transactions commits: {a:?} {b:?}"
    );
    let loser = if a.is_err() { a } else { b };
    let (codes, _) = cancellation_codes(loser.expect_err("the other is cancelled"));
    assert_eq!(codes, ["TransactionConflict", "None"]);
    assert_eq!(number(&client, &t, "A#1#BC", "COUNT", "n").await, Some(2));

    let stats = double.stats();
    assert_eq!(stats.transactions, 4);
    assert_eq!(stats.committed, 2);
    assert_eq!(stats.transaction_conflicts, 2);
    assert_eq!(stats.held_items, 0);
    table.delete().await;
}

// Reads better whole: one held transaction, and each single write tried while it holds.
#[tokio::test]
async fn single_writes_on_an_item_a_transaction_holds_fail_with_transaction_conflict() {
    let Some((table, client, double)) = table_behind_double(short_transactions(500)).await else {
        return;
    };
    let t = table.name.clone();
    put_item(&client, &t, item("IMAGE#1", "IMAGE", &[("v", n(1))]))
        .await
        .expect("seed");
    let holder = tokio::spawn({
        let client = client.clone();
        let actions = vec![
            exists(&t, "IMAGE#1", "IMAGE"),
            put(&t, item("BUSINESS#1", "BUSINESS", &[])),
        ];
        async move { transact(&client, actions).await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;

    let put_error = put_item(&client, &t, item("IMAGE#1", "IMAGE", &[("v", n(2))])).await;
    assert!(
        matches!(
            put_error,
            Err(PutItemError::TransactionConflictException(_))
        ),
        "PutItem on a held item: {put_error:?}"
    );
    let update_error = client
        .update_item()
        .table_name(&t)
        .set_key(Some(key("IMAGE#1", "IMAGE")))
        .update_expression("SET v = :v")
        .expression_attribute_values(":v", n(3))
        .send()
        .await
        .map_err(|e| e.into_service_error());
    assert!(
        matches!(
            update_error,
            Err(UpdateItemError::TransactionConflictException(_))
        ),
        "UpdateItem on a held item: {update_error:?}"
    );
    let delete_error = client
        .delete_item()
        .table_name(&t)
        .set_key(Some(key("BUSINESS#1", "BUSINESS")))
        .send()
        .await
        .map_err(|e| e.into_service_error());
    assert!(
        matches!(
            delete_error,
            Err(DeleteItemError::TransactionConflictException(_))
        ),
        "DeleteItem on a held item: {delete_error:?}"
    );
    // Another item of the same partition is not held.
    put_item(&client, &t, item("IMAGE#1", "OTHER", &[]))
        .await
        .expect("an item the transaction does not touch");
    assert!(
        !holder.is_finished(),
        "the refusals came while the transaction was in flight"
    );

    holder
        .await
        .expect("task")
        .expect("the holding transaction commits");
    assert_eq!(
        number(&client, &t, "IMAGE#1", "IMAGE", "v").await,
        Some(1),
        "the refused writes wrote nothing"
    );
    put_item(&client, &t, item("IMAGE#1", "IMAGE", &[("v", n(4))]))
        .await
        .expect("once the transaction is over the item is free");
    let stats = double.stats();
    assert_eq!(stats.single_write_conflicts, 3);
    assert_eq!(stats.committed, 1);
    table.delete().await;
}

#[tokio::test]
async fn reads_during_a_hold_are_answered_at_once_with_the_committed_value() {
    let Some((table, client, double)) = table_behind_double(short_transactions(600)).await else {
        return;
    };
    let t = table.name.clone();
    put_item(&client, &t, item("A#1#BC", "COUNT", &[("n", n(7))]))
        .await
        .expect("seed");
    let started = Instant::now();
    let writer = tokio::spawn({
        let client = client.clone();
        let actions = vec![increment(&t, "A#1#BC", "COUNT")];
        async move { transact(&client, actions).await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;

    let asked = Instant::now();
    assert_eq!(number(&client, &t, "A#1#BC", "COUNT", "n").await, Some(7));
    let queried = client
        .query()
        .table_name(&t)
        .key_condition_expression("pk = :pk")
        .expression_attribute_values(":pk", s("A#1#BC"))
        .consistent_read(true)
        .send()
        .await
        .expect("Query");
    let answered = asked.elapsed();
    assert_eq!(queried.count, 1);
    assert!(
        !writer.is_finished(),
        "the reads were answered during the hold"
    );
    assert!(
        answered < Duration::from_millis(300),
        "reads are never blocked: {answered:?}"
    );

    writer
        .await
        .expect("task")
        .expect("the transaction commits");
    assert!(started.elapsed() >= Duration::from_millis(600));
    assert_eq!(number(&client, &t, "A#1#BC", "COUNT", "n").await, Some(8));
    assert_eq!(double.stats().committed, 1);
    table.delete().await;
}

#[tokio::test]
async fn transactions_on_disjoint_items_both_commit_and_overlap() {
    let Some((table, client, double)) = table_behind_double(short_transactions(400)).await else {
        return;
    };
    let t = table.name.clone();
    let started = Instant::now();
    // Same partition, different items: holds are per item.
    let (a, b) = tokio::join!(
        transact(
            &client,
            vec![
                put(&t, item("A#1#B", "1", &[])),
                increment(&t, "A#1#BC", "X")
            ]
        ),
        transact(
            &client,
            vec![
                put(&t, item("A#1#B", "2", &[])),
                increment(&t, "A#1#BC", "Y")
            ]
        ),
    );
    let elapsed = started.elapsed();
    a.expect("first");
    b.expect("second");
    assert!(
        elapsed >= Duration::from_millis(400),
        "each takes the modelled time: {elapsed:?}"
    );
    assert!(
        elapsed < Duration::from_millis(750),
        "they ran side by side, not one after the other: {elapsed:?}"
    );
    let stats = double.stats();
    assert_eq!((stats.committed, stats.transaction_conflicts), (2, 0));
    table.delete().await;
}

#[tokio::test]
async fn a_partition_over_its_write_rate_is_throttled_and_nothing_is_written() {
    // 1 WCU a second, four saved up: four small writes pass, the fifth is over.
    let model = Model {
        partition_wcu_per_sec: 1.0,
        burst_secs: 4.0,
        ..Model::default()
    };
    let Some((table, client, double)) = table_behind_double(model).await else {
        return;
    };
    let t = table.name.clone();
    for i in 0..4 {
        put_item(&client, &t, item("HOT", &i.to_string(), &[]))
            .await
            .expect("within the burst");
    }
    let throttled = put_item(&client, &t, item("HOT", "4", &[])).await;
    match throttled {
        Err(PutItemError::ProvisionedThroughputExceededException(e)) => {
            let reasons = e.throttling_reasons();
            assert_eq!(reasons.len(), 1);
            assert_eq!(
                reasons[0].reason(),
                Some("TableWriteKeyRangeThroughputExceeded")
            );
            assert!(
                reasons[0].resource().is_some_and(|arn| arn.ends_with(&t)),
                "{reasons:?}"
            );
        }
        other => panic!("expected ProvisionedThroughputExceededException, got {other:?}"),
    }
    assert!(
        get(&client, &t, "HOT", "4").await.is_none(),
        "a throttled write writes nothing"
    );
    // Other partitions have their own budget.
    put_item(&client, &t, item("COLD", "0", &[]))
        .await
        .expect("another partition");

    let cancelled = transact(
        &client,
        vec![
            put(&t, item("HOT", "t", &[])),
            put(&t, item("COOL", "t", &[])),
        ],
    )
    .await;
    let (codes, message) = cancellation_codes(cancelled.expect_err("over the limit"));
    assert_eq!(codes, ["ThrottlingError", "None"]);
    assert!(
        message.contains("[ThrottlingError, None]"),
        "message: {message}"
    );
    assert!(
        get(&client, &t, "COOL", "t").await.is_none(),
        "a throttled transaction writes nothing"
    );

    let stats = double.stats();
    assert_eq!(stats.throttled, 2);
    assert_eq!(stats.throttled_transactions, 1);
    assert_eq!(stats.wcu, 5.0, "only admitted writes are charged");
    assert_eq!(stats.committed, 0);
    table.delete().await;
}

#[tokio::test]
async fn writes_cost_their_size_doubled_in_transactions_plus_index_writes() {
    let Some((table, client, double)) = table_behind_double(Model::default()).await else {
        return;
    };
    let t = table.name.clone();
    let charged = |before: f64| double.stats().wcu - before;

    // A small item outside the name index: 1.
    put_item(&client, &t, item("A#1#I", "1", &[("id", n(1))]))
        .await
        .expect("put");
    assert_eq!(charged(0.0), 1.0);
    // A list entry with `nk` (the by_name index key): the write and the index write.
    let entry = item("A#1#B", "1", &[("nk", s("acme\u{1}1")), ("id", n(1))]);
    put_item(&client, &t, entry).await.expect("put entry");
    assert_eq!(charged(1.0), 2.0);
    // 1.5 KB: two units.
    put_item(
        &client,
        &t,
        item("BUSINESS#1", "BUSINESS", &[("name", s(&"x".repeat(1500)))]),
    )
    .await
    .expect("put large");
    assert_eq!(charged(3.0), 2.0);
    // A create-like transaction: entry with nk 2×(1+1), counter ADD 2×1, condition check 2×1.
    transact(
        &client,
        vec![
            put(&t, item("A#1#B", "2", &[("nk", s("bolt\u{1}2"))])),
            increment(&t, "A#1#BC", "COUNT"),
            exists(&t, "BUSINESS#1", "BUSINESS"),
        ],
    )
    .await
    .expect("transaction");
    assert_eq!(charged(5.0), 8.0);
    // A delete is assumed to remove an index entry too.
    client
        .delete_item()
        .table_name(&t)
        .set_key(Some(key("A#1#I", "1")))
        .send()
        .await
        .expect("delete");
    assert_eq!(double.stats().wcu, 15.0);
    table.delete().await;
}

#[tokio::test]
async fn the_stretch_multiplies_hold_time_and_call_latency() {
    let model = Model {
        stretch: 3.0,
        transaction: Duration::from_millis(100),
        call_latency: Duration::from_millis(20),
        ..Model::default()
    };
    let Some((table, client, double)) = table_behind_double(model).await else {
        return;
    };
    let t = table.name.clone();
    let asked = Instant::now();
    assert!(get(&client, &t, "NOPE", "NOPE").await.is_none());
    assert!(
        asked.elapsed() >= Duration::from_millis(60),
        "call latency × 3: {:?}",
        asked.elapsed()
    );

    let started = Instant::now();
    let holder = tokio::spawn({
        let client = client.clone();
        let actions = vec![put(&t, item("A#1#B", "1", &[]))];
        async move { transact(&client, actions).await }
    });
    // Past the unstretched 100 ms, inside the stretched 300 ms.
    tokio::time::sleep(Duration::from_millis(180)).await;
    let refused = put_item(&client, &t, item("A#1#B", "1", &[])).await;
    assert!(
        matches!(refused, Err(PutItemError::TransactionConflictException(_))),
        "still held at 180 ms: {refused:?}"
    );
    holder.await.expect("task").expect("commits");
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(double.stats().single_write_conflicts, 1);
    table.delete().await;
}

#[tokio::test]
async fn the_statistics_are_served_over_http_and_bad_requests_get_dynamodb_answers() {
    let Some((table, client, double)) = table_behind_double(Model::default()).await else {
        return;
    };
    let http = reqwest::Client::new();
    let malformed = http
        .post(double.url())
        .header("x-amz-target", "DynamoDB_20120810.PutItem")
        .header("content-type", "application/x-amz-json-1.0")
        .body("{\"TableName\": ")
        .send()
        .await
        .expect("send");
    assert_eq!(malformed.status(), 400);
    let body: serde_json::Value =
        serde_json::from_slice(&malformed.bytes().await.expect("body")).expect("a JSON error");
    assert!(
        body["__type"]
            .as_str()
            .is_some_and(|t| t.ends_with("#SerializationException")),
        "{body}"
    );

    // A table moto does not know: not modelled, moto's own answer comes back.
    let missing = put_item(&client, "no-such-table", item("A", "B", &[])).await;
    assert!(
        matches!(missing, Err(PutItemError::ResourceNotFoundException(_))),
        "{missing:?}"
    );
    put_item(&client, &table.name, item("A", "B", &[]))
        .await
        .expect("put");

    let served = http
        .get(format!("{}/__double/stats", double.url()))
        .send()
        .await
        .expect("GET stats")
        .bytes()
        .await
        .expect("stats body");
    let served: Stats = serde_json::from_slice(&served).expect("stats JSON");
    let direct = double.stats();
    assert_eq!(served.requests, 3);
    assert_eq!(served.wcu, 1.0);
    assert_eq!(
        Stats {
            upstream_busy_secs: 0.0,
            ..served
        },
        Stats {
            upstream_busy_secs: 0.0,
            ..direct
        }
    );
    table.delete().await;
}

/// How fast moto itself is through the gate (run alone, with `--ignored --nocapture`):
/// GetItem, PutItem and a create-like 9-action `TransactWriteItems`, from 8 clients at
/// once, the double adding no time. The rates decide the stretch a benchmark needs: to
/// stand for DynamoDB at `R` writes a second with moto doing `r`, stretch ≥ `R / r`.
///
/// Transactions are measured on the empty table and again at the end: moto deep-copies
/// the whole table once per action of a transaction (its rollback copy), so their rate
/// falls as the table grows.
// Reads better whole: a measurement, run alone: each rate is measured on the table the last left.
#[tokio::test]
#[ignore = "a measurement, not a test: several seconds of moto at full load"]
async fn moto_rates_through_the_gate() {
    let model = Model {
        transaction: Duration::ZERO,
        partition_wcu_per_sec: 1e12,
        ..Model::default()
    };
    let Some((table, client, double)) = table_behind_double(model).await else {
        return;
    };
    let t = table.name.clone();
    let workers = 8;
    let period = Duration::from_secs(4);
    put_item(&client, &t, item("READ", "ME", &[("n", n(1))]))
        .await
        .expect("seed");

    let phases = [
        "TransactWriteItems (9 actions)",
        "GetItem",
        "PutItem",
        "TransactWriteItems (9 actions)",
    ];
    for operation in phases {
        let items = client
            .scan()
            .table_name(&t)
            .select(aws_sdk_dynamodb::types::Select::Count)
            .send()
            .await
            .expect("Scan")
            .count;
        let before = double.stats();
        let started = Instant::now();
        let mut tasks = Vec::new();
        for worker in 0..workers {
            let client = client_without_retries(&double.url());
            let t = t.clone();
            tasks.push(tokio::spawn(async move {
                let mut done = 0u64;
                while started.elapsed() < period {
                    let id = format!("{worker}-{done}");
                    match operation {
                        "GetItem" => {
                            get(&client, &t, "READ", "ME").await;
                        }
                        "PutItem" => put_item(
                            &client,
                            &t,
                            item(&format!("BUSINESS#{id}"), "BUSINESS", &[("v", n(1))]),
                        )
                        .await
                        .expect("put"),
                        _ => {
                            // One record, four scopes' entries and counters (per worker,
                            // so the workers never conflict), like create_business.
                            let account = format!("A#{worker}");
                            let mut actions = vec![put(
                                &t,
                                item(
                                    &format!("BUSINESS#{id}"),
                                    "BUSINESS",
                                    &[("name", s("Acme"))],
                                ),
                            )];
                            for scope in ["*", "d=0", "day=2024-01-01", "d=0,day=2024-01-01"] {
                                actions.push(put(
                                    &t,
                                    item(
                                        &format!("{account}#B#{scope}"),
                                        &id,
                                        &[("nk", s(&format!("acme\u{1}{id}")))],
                                    ),
                                ));
                                actions.push(increment(
                                    &t,
                                    &format!("{account}#BC#{scope}"),
                                    "COUNT",
                                ));
                            }
                            transact(&client, actions).await.expect("transaction");
                        }
                    }
                    done += 1;
                }
                done
            }));
        }
        let mut total = 0;
        for task in tasks {
            total += task.await.expect("worker");
        }
        let wall = started.elapsed().as_secs_f64();
        let after = double.stats();
        println!(
            "{operation} on {items} items: {:.1}/s ({total} in {wall:.1} s; moto busy {:.0}% of the time)",
            total as f64 / wall,
            100.0 * (after.upstream_busy_secs - before.upstream_busy_secs) / wall
        );
    }
    table.delete().await;
}

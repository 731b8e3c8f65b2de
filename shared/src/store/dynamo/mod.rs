//! The DynamoDB store: one table, every list a `Query` on one scope partition, every write
//! one transaction. See docs/dynamodb-design.md for the model and the calls per operation.

use std::collections::HashMap;
use std::ops::RangeInclusive;
use std::sync::Mutex;
use std::time::Duration;

use anyhow::Context;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{
    ConsumedCapacity, Delete, KeysAndAttributes, Put, ReturnConsumedCapacity, ReturnValue,
    TransactWriteItem, Update,
};
use aws_sdk_dynamodb::Client;
use futures_util::future::try_join_all;
use tokio::task::JoinSet;

use crate::error::{ApiError, Result};

mod budgets;
mod businesses;
mod idempotency;
mod images;
mod items;
mod keys;
mod logo_marks;
mod spread;

pub use logo_marks::LogoMarks;
pub use spread::{COUNTER_LANES, COUNTER_PARTITIONS, ENTRY_SHARDS};

use items::{get_n, get_s, n, record_key, s, Item, Kind, Seq, BY_NAME, NK, PK, SK};

/// Every read is strongly consistent, so a request sees everything earlier requests wrote
/// (a partner that creates a business and then GETs its `Location` or lists must find it, as
/// it did with the Django service). It doubles read units (a consistent read of an item
/// under 4 KB is 1 RCU instead of 0.5); there is no GSI, so it is available for every read.
const CONSISTENT_READS: bool = true;
/// Most keys one `BatchGetItem` call may ask for.
const BATCH_GET_MAX: usize = 100;
/// Attempts of a transaction cancelled only by conflicts with other transactions or by
/// throttling, and of an update that lost its optimistic-lock race (each attempt re-reads).
const MAX_ATTEMPTS: u32 = 10;
/// What a partner is told to wait when DynamoDB is past its capacity for this work.
const BUSY_RETRY_AFTER_SECS: u64 = 1;
/// Errors of a single call that say nothing was written and the same call may succeed
/// later: throttling (after the SDK's own retries) and a conflict with a transaction in
/// flight on the same item.
const BUSY_ERRORS: [&str; 4] = [
    "ProvisionedThroughputExceededException",
    "ThrottlingException",
    "RequestLimitExceeded",
    "TransactionConflictException",
];
/// Cancellation reasons that say nothing about the data: the same transaction may succeed
/// when sent again.
const TRANSIENT_CANCELLATIONS: [&str; 3] = [
    "TransactionConflict",
    "ThrottlingError",
    "ProvisionedThroughputExceeded",
];
/// Attempts of a `BatchGetItem` chunk that keeps returning unprocessed keys.
const MAX_BATCH_ATTEMPTS: u32 = 8;

pub struct DynamoStore {
    client: Client,
    table: String,
    id_block: u32,
    query_page: i32,
    batch_chunk: usize,
    /// Real seconds per second of the modelled DynamoDB: every retry wait is this much
    /// longer (1 in production; the write benchmark's double runs slower than real time).
    stretch: f64,
    /// Ids handed out by the sequences but not used yet (block allocation).
    spare_ids: Mutex<HashMap<Seq, Vec<RangeInclusive<i64>>>>,
    /// Budget tokens taken in chunks and not handed out yet.
    budget_tokens: budgets::TokenCache,
}

/// One page of one scope partition to read.
#[derive(Debug, Clone, Copy)]
struct ScopeList<'a> {
    kind: Kind,
    account_id: i64,
    scope: &'a str,
    /// In `by_name` order (else id order).
    by_name: bool,
    descending: bool,
    offset: u64,
    limit: u64,
}

/// A new record's list entries: one per scope, each with a counter increment.
#[derive(Debug, Clone, Copy)]
struct NewEntries<'a> {
    kind: Kind,
    account_id: i64,
    id: i64,
    scopes: &'a [String],
    /// The `by_name` sort key (businesses only).
    nk: Option<&'a str>,
}

/// How a transaction ended when DynamoDB did not fail outright.
enum TxOutcome {
    Committed,
    /// The cancellation reason code of every action, in request order (`None` for those
    /// that did not fail).
    Cancelled(Vec<String>),
    /// Still cancelled only for transient reasons (conflicts, throttling) after every
    /// attempt: nothing was written.
    Busy(Vec<String>),
}

impl TxOutcome {
    fn failed_condition(codes: &[String], index: usize) -> bool {
        codes.get(index).map(String::as_str) == Some("ConditionalCheckFailed")
    }
}

fn aws_error<E, R>(operation: &str, err: aws_sdk_dynamodb::error::SdkError<E, R>) -> ApiError
where
    E: aws_sdk_dynamodb::error::ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug + Send + Sync + 'static,
{
    let code = err.as_service_error().and_then(|e| e.code());
    if let Some(code) = code.filter(|code| BUSY_ERRORS.contains(code)) {
        tracing::warn!(
            operation,
            code,
            "dynamodb is past its capacity for this call"
        );
        return busy(operation);
    }
    ApiError::from(anyhow::Error::new(err).context(format!("dynamodb {operation}")))
}

/// DynamoDB refused the work for now and wrote nothing: 503, retry shortly.
fn busy(operation: &str) -> ApiError {
    tracing::debug!(operation, "answering 503: dynamodb busy");
    ApiError::Unavailable {
        message: format!(
            "The service is busy with this account's writes; nothing was changed. Retry \
             after {BUSY_RETRY_AFTER_SECS} second."
        ),
        retry_after_secs: BUSY_RETRY_AFTER_SECS,
    }
}

/// A conditional write's result: `Some(output)` when it was written, `None` when its
/// condition failed, an internal error otherwise.
fn conditional<O, E, R>(
    operation: &str,
    result: std::result::Result<O, aws_sdk_dynamodb::error::SdkError<E, R>>,
) -> Result<Option<O>>
where
    E: aws_sdk_dynamodb::error::ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug + Send + Sync + 'static,
{
    match result {
        Ok(out) => Ok(Some(out)),
        Err(err)
            if err.as_service_error().and_then(|e| e.code())
                == Some("ConditionalCheckFailedException") =>
        {
            Ok(None)
        }
        Err(err) => Err(aws_error(operation, err)),
    }
}

fn build_error(err: aws_sdk_dynamodb::error::BuildError) -> ApiError {
    ApiError::from(anyhow::Error::new(err).context("building a dynamodb request"))
}

fn log_capacity(operation: &'static str, capacity: Option<&ConsumedCapacity>) {
    if let Some(c) = capacity {
        tracing::debug!(
            operation,
            capacity_units = c.capacity_units(),
            read_units = c.read_capacity_units(),
            write_units = c.write_capacity_units(),
            "dynamodb consumed capacity"
        );
    }
}

/// The number set `{business}` of a logo mark.
fn logo_set(business: i64) -> aws_sdk_dynamodb::types::AttributeValue {
    aws_sdk_dynamodb::types::AttributeValue::Ns(vec![business.to_string()])
}

/// Full-jitter exponential backoff: attempt `n` waits up to 10·2ⁿ ms (at most 640 ms),
/// times `stretch` (1 but under the DynamoDB double, which stretches time). A retry of a
/// conflict draws another counter lane, so it need not wait long.
async fn backoff(attempt: u32, stretch: f64) {
    let ceiling = 10u64 << attempt.min(6);
    let wait = Duration::from_millis(rand::random_range(0..=ceiling));
    tokio::time::sleep(wait.mul_f64(stretch)).await;
}

impl DynamoStore {
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        DynamoStore {
            client,
            table: table.into(),
            id_block: 1,
            query_page: i32::MAX,
            batch_chunk: BATCH_GET_MAX,
            stretch: 1.0,
            spare_ids: Mutex::new(HashMap::new()),
            budget_tokens: Default::default(),
        }
    }

    /// Takes business and image ids from their sequences `n` at a time (one `UpdateItem`
    /// per `n` creates of this instance). Ids stay unique; with several instances they are
    /// no longer in creation order.
    pub fn with_id_block(mut self, n: u32) -> Self {
        self.id_block = n.max(1);
        self
    }

    /// Caps how many entries one `Query` call asks for and how many keys one `BatchGetItem`
    /// call asks for (DynamoDB itself stops a `Query` page at 1 MB and a batch at 100 keys).
    /// Lists give the same results with any value; tests set it low to exercise paging.
    pub fn with_read_page_size(mut self, n: u32) -> Self {
        let n = n.max(1);
        self.query_page = i32::try_from(n).unwrap_or(i32::MAX);
        self.batch_chunk = usize::try_from(n)
            .unwrap_or(BATCH_GET_MAX)
            .min(BATCH_GET_MAX);
        self
    }

    /// Stretches every retry wait by `stretch` (at least 1), for a DynamoDB double that
    /// models the service with time running `stretch` times slower (`scripts/bench-writes`).
    pub fn with_time_stretch(mut self, stretch: f64) -> Self {
        self.stretch = if stretch.is_finite() {
            stretch.max(1.0)
        } else {
            1.0
        };
        self
    }

    pub fn table(&self) -> &str {
        &self.table
    }

    fn take_spare_id(&self, seq: Seq) -> Option<i64> {
        // The lock only guards plain data; a poisoned one is still consistent.
        let mut spare = self.spare_ids.lock().unwrap_or_else(|p| p.into_inner());
        let ranges = spare.get_mut(&seq)?;
        while let Some(range) = ranges.first_mut() {
            if let Some(id) = range.next() {
                return Some(id);
            }
            ranges.remove(0);
        }
        None
    }

    /// The next id of a sequence: `UpdateItem ADD n :block` on its counter item, keeping the
    /// rest of the block for later creates. Accounts and users always take one id.
    async fn next_id(&self, seq: Seq) -> Result<i64> {
        if let Some(id) = self.take_spare_id(seq) {
            return Ok(id);
        }
        let block = match seq {
            Seq::Business | Seq::Image | Seq::Location => i64::from(self.id_block),
            Seq::Account | Seq::User => 1,
        };
        let last = self
            .add_to_counter("sequence", items::seq_key(seq), block, None)
            .await?;
        let first = last - block + 1;
        if block > 1 {
            let mut spare = self.spare_ids.lock().unwrap_or_else(|p| p.into_inner());
            spare.entry(seq).or_default().push(first + 1..=last);
        }
        Ok(first)
    }

    /// `n` ids of a sequence: the spare ones first, then one `UpdateItem` for the rest (a
    /// block of at least `with_id_block`), keeping what is left over.
    async fn next_ids(&self, seq: Seq, n: usize) -> Result<Vec<i64>> {
        let mut ids = Vec::with_capacity(n);
        while ids.len() < n {
            match self.take_spare_id(seq) {
                Some(id) => ids.push(id),
                None => break,
            }
        }
        let missing = i64::try_from(n - ids.len()).map_err(ApiError::internal)?;
        if missing == 0 {
            return Ok(ids);
        }
        let block = missing.max(i64::from(self.id_block));
        let last = self
            .add_to_counter("sequence", items::seq_key(seq), block, None)
            .await?;
        let first = last - block + 1;
        ids.extend(first..first + missing);
        if block > missing {
            let mut spare = self.spare_ids.lock().unwrap_or_else(|p| p.into_inner());
            spare.entry(seq).or_default().push(first + missing..=last);
        }
        Ok(ids)
    }

    /// `UpdateItem ADD n :amount` on a counter item (setting its TTL `expires_at` when
    /// given), answering the counter's new value: id sequences and request budgets.
    async fn add_to_counter(
        &self,
        what: &str,
        key: Item,
        amount: i64,
        expires_at: Option<i64>,
    ) -> Result<i64> {
        let mut update = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(key))
            .expression_attribute_names("#n", "n")
            .expression_attribute_values(":amount", n(amount))
            .return_values(ReturnValue::UpdatedNew)
            .return_consumed_capacity(ReturnConsumedCapacity::Total);
        update = match expires_at {
            Some(at) => update
                .update_expression("ADD #n :amount SET #e = :expires")
                .expression_attribute_names("#e", "expires_at")
                .expression_attribute_values(":expires", n(at)),
            None => update.update_expression("ADD #n :amount"),
        };
        let out = update
            .send()
            .await
            .map_err(|e| aws_error(&format!("UpdateItem ({what})"), e))?;
        log_capacity("UpdateItem", out.consumed_capacity());
        get_n(out.attributes().unwrap_or(&HashMap::new()), "n")
    }

    /// A (consistent) `GetItem`.
    async fn get_item(&self, key: Item) -> Result<Option<Item>> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(key))
            .consistent_read(CONSISTENT_READS)
            .return_consumed_capacity(ReturnConsumedCapacity::Total)
            .send()
            .await
            .map_err(|e| aws_error("GetItem", e))?;
        log_capacity("GetItem", out.consumed_capacity());
        Ok(out.item)
    }

    /// Runs a transaction, retrying (with fresh idempotency tokens) while it is cancelled only
    /// for transient reasons: another transaction writing one of its items, or throttling.
    /// `actions` builds it for each attempt, so a retry can draw another counter lane.
    /// Still cancelled that way after `attempts`, it is `Busy`: nothing was written.
    async fn transact(
        &self,
        what: &str,
        attempts: u32,
        mut actions: impl FnMut() -> Result<Vec<TransactWriteItem>>,
    ) -> Result<TxOutcome> {
        let mut attempt = 0;
        loop {
            let result = self
                .client
                .transact_write_items()
                .set_transact_items(Some(actions()?))
                .return_consumed_capacity(ReturnConsumedCapacity::Total)
                .send()
                .await;
            let err = match result {
                Ok(out) => {
                    for capacity in out.consumed_capacity() {
                        log_capacity("TransactWriteItems", Some(capacity));
                    }
                    return Ok(TxOutcome::Committed);
                }
                Err(err) => err,
            };
            let codes: Vec<String> = match err.as_service_error() {
                Some(TransactWriteItemsError::TransactionCanceledException(cancelled)) => cancelled
                    .cancellation_reasons()
                    .iter()
                    .map(|r| r.code().unwrap_or("None").to_string())
                    .collect(),
                _ => return Err(aws_error("TransactWriteItems", err)),
            };
            let transient = codes
                .iter()
                .any(|c| TRANSIENT_CANCELLATIONS.contains(&c.as_str()))
                && codes
                    .iter()
                    .all(|c| c == "None" || TRANSIENT_CANCELLATIONS.contains(&c.as_str()));
            if !transient {
                tracing::debug!(?codes, attempt, "dynamodb transaction cancelled");
                return Ok(TxOutcome::Cancelled(codes));
            }
            attempt += 1;
            if attempt >= attempts {
                tracing::warn!(
                    what,
                    ?codes,
                    attempt,
                    "dynamodb transaction still cancelled"
                );
                return Ok(TxOutcome::Busy(codes));
            }
            backoff(attempt, self.stretch).await;
        }
    }

    fn put(&self, item: Item) -> Result<TransactWriteItem> {
        let put = Put::builder()
            .table_name(&self.table)
            .set_item(Some(item))
            .build()
            .map_err(build_error)?;
        Ok(TransactWriteItem::builder().put(put).build())
    }

    /// A `Put` that only writes a new item.
    fn put_new(&self, item: Item) -> Result<TransactWriteItem> {
        let put = Put::builder()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(#pk)")
            .expression_attribute_names("#pk", PK)
            .build()
            .map_err(build_error)?;
        Ok(TransactWriteItem::builder().put(put).build())
    }

    /// A `Put` that replaces the item only if it still has the `version` we read.
    fn put_if_version(&self, item: Item, version: i64) -> Result<TransactWriteItem> {
        let put = Put::builder()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression("#v = :v")
            .expression_attribute_names("#v", "version")
            .expression_attribute_values(":v", n(version))
            .build()
            .map_err(build_error)?;
        Ok(TransactWriteItem::builder().put(put).build())
    }

    fn delete(&self, key: Item) -> Result<TransactWriteItem> {
        let delete = Delete::builder()
            .table_name(&self.table)
            .set_key(Some(key))
            .build()
            .map_err(build_error)?;
        Ok(TransactWriteItem::builder().delete(delete).build())
    }

    /// `ADD n :delta` on a counter item (created at 0 when absent).
    fn add(&self, key: Item, delta: i64) -> Result<TransactWriteItem> {
        let update = Update::builder()
            .table_name(&self.table)
            .set_key(Some(key))
            .update_expression("ADD #n :delta")
            .expression_attribute_names("#n", "n")
            .expression_attribute_values(":delta", n(delta))
            .build()
            .map_err(build_error)?;
        Ok(TransactWriteItem::builder().update(update).build())
    }

    /// Marks an image as the logo of `business` (`ADD logo_of :b`, a number set), on the
    /// condition that the image exists in the account and, with `sub`, has that sub id:
    /// `Some(Some(s))` asks for sub id `s`, `Some(None)` for none, `None` for any. The mark
    /// is what `delete_image` refuses on, and both write the image item, so a delete and a
    /// business write that sets the logo never both succeed (DynamoDB serializes
    /// transactions on one item).
    fn mark_logo(
        &self,
        image: i64,
        account_id: i64,
        sub: Option<Option<&str>>,
        business: i64,
    ) -> Result<TransactWriteItem> {
        let update = Update::builder()
            .table_name(&self.table)
            .set_key(Some(items::image_key(image)))
            .update_expression("ADD #l :b")
            .expression_attribute_names("#l", items::LOGO_OF)
            .expression_attribute_values(":b", logo_set(business))
            .expression_attribute_names("#a", "account_id")
            .expression_attribute_values(":a", n(account_id));
        let update = match sub {
            None => update.condition_expression("#a = :a"),
            Some(sub) => {
                let update = update.expression_attribute_names("#s", "partner_sub_id");
                match sub {
                    Some(sub) => update
                        .condition_expression("#a = :a AND #s = :s")
                        .expression_attribute_values(":s", s(sub)),
                    None => update.condition_expression("#a = :a AND attribute_not_exists(#s)"),
                }
            }
        };
        Ok(TransactWriteItem::builder()
            .update(update.build().map_err(build_error)?)
            .build())
    }

    /// Takes `business` off an image's logo marks (`DELETE logo_of :b`; the attribute goes
    /// with its last element). The image item exists: a marked image cannot be deleted, and
    /// a deleted one leaves its barred item; the condition keeps a stray update from ever
    /// creating an item.
    fn unmark_logo(&self, image: i64, business: i64) -> Result<TransactWriteItem> {
        let update = Update::builder()
            .table_name(&self.table)
            .set_key(Some(items::image_key(image)))
            .update_expression("DELETE #l :b")
            .condition_expression("attribute_exists(#pk)")
            .expression_attribute_names("#l", items::LOGO_OF)
            .expression_attribute_names("#pk", PK)
            .expression_attribute_values(":b", logo_set(business))
            .build()
            .map_err(build_error)?;
        Ok(TransactWriteItem::builder().update(update).build())
    }

    /// The `Put` and counter `ADD`s of a new record's list entries, one per scope, on the
    /// counter lane `lane` of each.
    fn entries_and_counts(&self, new: NewEntries<'_>, lane: u32) -> Result<Vec<TransactWriteItem>> {
        let NewEntries {
            kind,
            account_id,
            id,
            scopes,
            nk,
        } = new;
        let mut actions = Vec::with_capacity(scopes.len() * 2);
        for scope in scopes {
            actions.push(self.put(items::entry_item(kind, account_id, scope, id, nk))?);
            actions.push(self.add(items::counter_key(kind, account_id, scope, lane), 1)?);
        }
        Ok(actions)
    }

    /// The number of records of a scope: the sum of its counter lanes, read with one
    /// (consistent) `Query` per lane partition, all at once. Absent lanes count 0; a lane
    /// may be negative (a record left the scope on another lane than it joined on).
    async fn count(&self, kind: Kind, account_id: i64, scope: &str) -> Result<u64> {
        let partitions = (0..spread::COUNTER_PARTITIONS).map(|partition| async move {
            let pk = items::counter_pk(kind, account_id, scope, partition);
            let mut sum: i64 = 0;
            for lane in self.whole_partition(&pk, "n", "Query (count)").await? {
                sum += get_n::<i64>(&lane, "n")?;
            }
            Ok::<_, ApiError>(sum)
        });
        let sums = try_join_all(partitions).await?;
        Ok(u64::try_from(sums.into_iter().sum::<i64>()).unwrap_or(0))
    }

    /// Every item of one partition, whole (consistently, all pages).
    async fn partition(&self, pk: &str) -> Result<Vec<Item>> {
        self.query_partition(pk, None, "Query").await
    }

    /// A conditional `Put`: `attribute_not_exists(pk)` when `version` is `None`, else
    /// `version = :v` (the version read).
    fn put_if_read(&self, item: Item, version: Option<i64>) -> Result<TransactWriteItem> {
        match version {
            Some(version) => self.put_if_version(item, version),
            None => self.put_new(item),
        }
    }

    /// Every item of one partition (consistently, all pages), with only `attribute`.
    async fn whole_partition(&self, pk: &str, attribute: &str, what: &str) -> Result<Vec<Item>> {
        self.query_partition(pk, Some(attribute), what).await
    }

    /// Every item of one partition (consistently, all pages): whole, or with only the
    /// `projected` attribute. `what` names the call in errors.
    async fn query_partition(
        &self,
        pk: &str,
        projected: Option<&str>,
        what: &str,
    ) -> Result<Vec<Item>> {
        let mut items = Vec::new();
        let mut start: Option<Item> = None;
        loop {
            let mut query = self
                .client
                .query()
                .table_name(&self.table)
                .key_condition_expression("#pk = :pk")
                .expression_attribute_names("#pk", PK)
                .expression_attribute_values(":pk", s(pk))
                .consistent_read(CONSISTENT_READS)
                .set_exclusive_start_key(start.take())
                .return_consumed_capacity(ReturnConsumedCapacity::Total);
            if let Some(attribute) = projected {
                query = query
                    .expression_attribute_names("#a", attribute)
                    .projection_expression("#a");
            }
            let out = query.send().await.map_err(|e| aws_error(what, e))?;
            log_capacity("Query", out.consumed_capacity());
            items.extend(out.items.unwrap_or_default());
            match out.last_evaluated_key {
                Some(key) if !key.is_empty() => start = Some(key),
                _ => return Ok(items),
            }
        }
    }

    /// One page of a scope: the records at `offset..offset+limit` in the order of the table
    /// (id) or of `by_name`, and the scope's total. For the first page the counter read runs
    /// concurrently with the `Query` and the `BatchGetItem` that follows it; a later page
    /// reads the counter first, and a page past the end is answered from it alone (a
    /// `Query` would read every entry up to the offset).
    async fn list_page(&self, list: ScopeList<'_>) -> Result<(Vec<Item>, u64)> {
        let ScopeList {
            kind,
            account_id,
            scope,
            ..
        } = list;
        let page = async {
            let ids = self.scope_ids(&list).await?;
            let keys = ids.iter().map(|&id| record_key(kind, id)).collect();
            let mut found: HashMap<i64, Item> = HashMap::with_capacity(ids.len());
            for item in self.batch_get(keys).await? {
                found.insert(get_n(&item, "id")?, item);
            }
            let mut records = Vec::with_capacity(ids.len());
            for id in ids {
                match found.remove(&id) {
                    Some(item) => records.push(item),
                    // Entries and records are written in one transaction and never
                    // deleted, so this means a damaged table, not a race.
                    None => tracing::warn!(id, ?kind, "list entry without its record"),
                }
            }
            Ok::<_, ApiError>(records)
        };
        if list.offset == 0 {
            return tokio::try_join!(page, self.count(kind, account_id, scope));
        }
        let total = self.count(kind, account_id, scope).await?;
        if list.offset >= total {
            return Ok((Vec::new(), total));
        }
        Ok((page.await?, total))
    }

    /// The ids at `offset..offset+limit` of a scope: each entry shard is read up to
    /// `offset+limit` entries (all shards at once), and the shards are merged in order. A
    /// shard's first `offset+limit` entries hold every one of the scope's first
    /// `offset+limit` that lives there, so the merge is exact.
    async fn scope_ids(&self, list: &ScopeList<'_>) -> Result<Vec<i64>> {
        let shards = (0..spread::ENTRY_SHARDS).map(|shard| self.shard_entries(list, shard));
        let mut entries: Vec<(String, i64)> =
            try_join_all(shards).await?.into_iter().flatten().collect();
        // Sort keys are unique (the padded id, or the name key ending in it).
        entries.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        if list.descending {
            entries.reverse();
        }
        let offset = usize::try_from(list.offset).unwrap_or(usize::MAX);
        let limit = usize::try_from(list.limit).unwrap_or(usize::MAX);
        Ok(entries
            .into_iter()
            .skip(offset)
            .take(limit)
            .map(|(_, id)| id)
            .collect())
    }

    /// The first `offset+limit` entries of one shard in list order, each with its sort key
    /// (`sk` in id order, `nk` in `by_name` order), following `LastEvaluatedKey` over 1 MB
    /// pages.
    async fn shard_entries(&self, list: &ScopeList<'_>, shard: u32) -> Result<Vec<(String, i64)>> {
        let ScopeList {
            by_name,
            descending,
            offset,
            limit,
            ..
        } = *list;
        let pk = items::entries_pk(list.kind, list.account_id, list.scope, shard);
        let sort_key = if by_name { NK } else { SK };
        let wanted = offset.saturating_add(limit);
        let mut entries = Vec::new();
        let mut seen: u64 = 0;
        let mut start: Option<Item> = None;
        while limit > 0 && seen < wanted {
            let page = i32::try_from(wanted - seen)
                .map_or(self.query_page, |left| left.min(self.query_page));
            let out = self
                .client
                .query()
                .table_name(&self.table)
                .set_index_name(by_name.then(|| BY_NAME.to_string()))
                .key_condition_expression("#pk = :pk")
                .expression_attribute_names("#pk", PK)
                .expression_attribute_names("#id", "id")
                .expression_attribute_names("#sort", sort_key)
                .expression_attribute_values(":pk", s(pk.as_str()))
                .projection_expression("#id, #sort")
                .scan_index_forward(!descending)
                .consistent_read(CONSISTENT_READS)
                .limit(page)
                .set_exclusive_start_key(start.take())
                .return_consumed_capacity(ReturnConsumedCapacity::Total)
                .send()
                .await
                .map_err(|e| aws_error("Query", e))?;
            log_capacity("Query", out.consumed_capacity());
            for item in out.items() {
                if seen < wanted {
                    entries.push((get_s(item, sort_key)?, get_n(item, "id")?));
                }
                seen += 1;
            }
            match out.last_evaluated_key {
                Some(key) if !key.is_empty() => start = Some(key),
                _ => break,
            }
        }
        Ok(entries)
    }

    /// (Consistent) `BatchGetItem` of any number of keys: chunks of at most 100 run
    /// concurrently; unprocessed keys are asked for again with backoff. Unordered.
    async fn batch_get(&self, keys: Vec<Item>) -> Result<Vec<Item>> {
        if keys.len() <= self.batch_chunk {
            return batch_get_chunk(&self.client, &self.table, keys, self.stretch).await;
        }
        let mut tasks = JoinSet::new();
        for chunk in keys.chunks(self.batch_chunk) {
            let (client, table, chunk) = (self.client.clone(), self.table.clone(), chunk.to_vec());
            let stretch = self.stretch;
            tasks.spawn(async move { batch_get_chunk(&client, &table, chunk, stretch).await });
        }
        let mut items = Vec::with_capacity(keys.len());
        while let Some(joined) = tasks.join_next().await {
            items.extend(joined.context("a BatchGetItem task")??);
        }
        Ok(items)
    }
}

async fn batch_get_chunk(
    client: &Client,
    table: &str,
    keys: Vec<Item>,
    stretch: f64,
) -> Result<Vec<Item>> {
    let mut items = Vec::with_capacity(keys.len());
    let mut pending = keys;
    let mut attempt = 0;
    while !pending.is_empty() {
        let request = KeysAndAttributes::builder()
            .set_keys(Some(pending))
            .consistent_read(CONSISTENT_READS)
            .build()
            .map_err(build_error)?;
        let out = client
            .batch_get_item()
            .request_items(table, request)
            .return_consumed_capacity(ReturnConsumedCapacity::Total)
            .send()
            .await
            .map_err(|e| aws_error("BatchGetItem", e))?;
        for capacity in out.consumed_capacity() {
            log_capacity("BatchGetItem", Some(capacity));
        }
        if let Some(found) = out.responses.and_then(|mut r| r.remove(table)) {
            items.extend(found);
        }
        pending = out
            .unprocessed_keys
            .and_then(|mut u| u.remove(table))
            .map(|k| k.keys)
            .unwrap_or_default();
        if !pending.is_empty() {
            attempt += 1;
            if attempt >= MAX_BATCH_ATTEMPTS {
                return Err(ApiError::internal(format!(
                    "dynamodb BatchGetItem: {} keys still unprocessed after {attempt} attempts",
                    pending.len()
                )));
            }
            backoff(attempt, stretch).await;
        }
    }
    Ok(items)
}

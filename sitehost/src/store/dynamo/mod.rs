//! The DynamoDB store: one table, every list a `Query` on one scope partition, every write
//! one transaction. See docs/dynamodb-design.md for the model and the calls per operation.
//!
//! Here: the store, its settings, and what every call shares (how DynamoDB's failures
//! become errors, backoff). `transactions` builds and runs the writes, `reads` the
//! `GetItem`s, `Query`s and `BatchGetItem`s with their paging, `counters` the id sequences;
//! `items` and `records` are the item layout. One module per record kind (`businesses`,
//! `images`, `keys`, `budgets`, `idempotency`, `upload_sessions`), `spread` (how a scope spreads over lanes
//! and shards) and `logo_marks` (a one-off migration).

use std::collections::HashMap;
use std::ops::RangeInclusive;
use std::sync::Mutex;
use std::time::Duration;

use aws_sdk_dynamodb::types::ConsumedCapacity;
use aws_sdk_dynamodb::Client;

use crate::error::{ApiError, Result};

mod budgets;
mod businesses;
mod counters;
mod idempotency;
mod images;
mod items;
mod keys;
mod locations;
mod logo_marks;
mod name_keys;
mod posts;
mod reads;
mod records;
mod site_records;
mod sites;
mod spread;
mod transactions;
mod upload_sessions;

pub use logo_marks::LogoMarks;
pub use spread::{COUNTER_LANES, COUNTER_PARTITIONS, ENTRY_SHARDS};

use items::Seq;

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

/// A DynamoDB call's failure, by the one mapping ([`ApiError::from_aws`]): a 503 with
/// `Retry-After` when AWS documents it as retryable (throttling, a 5xx, a timeout, a
/// conflict with a transaction in flight), an internal error otherwise.
fn aws_error<E>(operation: &str, err: aws_sdk_dynamodb::error::SdkError<E>) -> ApiError
where
    E: aws_sdk_dynamodb::error::ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    ApiError::from_aws("dynamodb", operation, err)
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
/// condition failed, [`aws_error`] otherwise.
fn conditional<O, E>(
    operation: &str,
    result: std::result::Result<O, aws_sdk_dynamodb::error::SdkError<E>>,
) -> Result<Option<O>>
where
    E: aws_sdk_dynamodb::error::ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
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

/// The attribute a conditional single-item write stores its [`write_token`] in. DynamoDB may
/// apply a write and still answer an error (a 500, a timeout: "the request may or may not
/// have succeeded"); the SDK then sends it again and its condition fails on the item it
/// wrote itself. Reading the item back and finding this call's token tells the two apart
/// ([`DynamoStore::written_by`]), so a fault never turns a success into a refusal.
const WRITTEN_BY: &str = "written_by";

/// A new token naming one call's conditional write (128 random bits, hex).
fn write_token() -> String {
    format!("{:032x}", rand::random::<u128>())
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
}

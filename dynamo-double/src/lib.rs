//! A DynamoDB test double: an HTTP proxy between the AWS SDK and a `moto_server` that adds
//! what moto, which applies requests one after another, never shows: transaction
//! conflicts, per-partition write throughput, and latency, all on a stretchable clock.
//!
//! ```text
//! SDK ──HTTP──▶ dynamo-double ──(one at a time, through the gate)──▶ moto_server
//!                 │ holds items of in-flight transactions, token bucket per partition,
//!                 │ waits out the modelled durations (outside the gate)
//! ```
//!
//! Everything the double does not model is forwarded unchanged (method, path, headers but
//! hop-by-hop ones, body) and moto's status, headers and body come back unchanged. S3 goes
//! through it only when a client is pointed at it (to inject its faults, below).
//!
//! # The rules modelled, and where AWS documents them
//!
//! **Transaction conflicts.** An in-flight `TransactWriteItems` holds every item it puts,
//! updates, deletes or condition-checks (keyed by table, hash and range key) for its whole
//! duration. Another `TransactWriteItems` touching a held item is cancelled with
//! `TransactionCanceledException`, reason `TransactionConflict` at each conflicting action
//! and `None` elsewhere; a `PutItem`/`UpdateItem`/`DeleteItem` on a held item fails with
//! `TransactionConflictException`; reads are never blocked and see committed data (the
//! double forwards a transaction to moto only at the end of its hold, so reads during the
//! hold see the values from before it). Single-item writes hold nothing.
//! - "Transaction conflict handling in DynamoDB" (`TransactionConflictException` for a
//!   single-item write on an item of an ongoing transaction; `TransactionCanceledException`
//!   for a transaction touching one) and "Isolation levels" (reads are read-committed):
//!   <https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis.html#transaction-conflict-handling>
//! - The reasons, in request order, their codes (`None`, `TransactionConflict`,
//!   `ThrottlingError`, ...) and messages ("Transaction is ongoing for the item", "Throughput
//!   exceeds the current capacity of your table or index. DynamoDB is automatically scaling
//!   ..." for an on-demand table): `TransactionCanceledException` in
//!   <https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_TransactWriteItems.html>,
//!   <https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_CancellationReason.html>,
//!   <https://docs.aws.amazon.com/botocore/latest/reference/services/dynamodb/client/exceptions/TransactionCanceledException.html>.
//!   The top-level message follows DynamoDB's ("Transaction cancelled, please refer
//!   cancellation reasons for specific reasons [None, TransactionConflict]", as quoted in
//!   <https://repost.aws/knowledge-center/dynamodb-transactwriteitems>).
//!
//! **Per-partition write throughput.** Each partition serves at most 1,000 write units a
//! second (3,000 read units), whatever the table's capacity mode; past it DynamoDB throttles
//! with the throttling reason `KeyRangeThroughputExceeded`. Burst capacity does not lift the
//! partition limit, so the bucket depth is small (`burst_secs`, default 1 s).
//! - <https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/warm-throughput-scenarios.html>
//!   ("each individual partition is limited to 1,000 write units per second and 3,000 read
//!   units per second")
//! - <https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/bp-partition-key-design.html>,
//!   <https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/TroubleshootingThrottling.html>,
//!   <https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/throttling-key-range-limit-exceeded-mitigation.html>
//!   (key-range throttling "in both modes"),
//!   <https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_ThrottlingReason.html>
//! - Burst: <https://repost.aws/knowledge-center/dynamodb-spiky-workloads-short-intervals>
//!   ("Burst capacity can't alleviate partition-level throttling").
//!
//! A throttled single write is answered `ProvisionedThroughputExceededException` with
//! `ThrottlingReasons: [{reason: TableWriteKeyRangeThroughputExceeded, resource: <table
//! ARN>}]`, also on an on-demand (`PAY_PER_REQUEST`) table: DynamoDB's data-plane
//! throttling exception; `ThrottlingException` is what the error guide lists for control
//! plane calls made too fast
//! (<https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Programming.Errors.html>,
//! <https://docs.aws.amazon.com/botocore/latest/reference/services/dynamodb/client/exceptions/ProvisionedThroughputExceededException.html>).
//! For the Rust SDK the choice does not matter: `aws-runtime`'s retry classifier lists both
//! `ProvisionedThroughputExceededException` and `ThrottlingException` as throttling errors.
//! A throttled transaction is cancelled with `ThrottlingError` at every action on an
//! over-limit partition (`None` elsewhere) and writes nothing.
//!
//! **Write costs.** One write unit per started KB of item size, by DynamoDB's item-size
//! rules (attribute names plus values; see [`size`] for the approximation of numbers and
//! sets); a transactional write costs two (a `ConditionCheck` counts as one); a write that
//! touches a local secondary index costs one more write of the same size per index.
//! - Item sizes: <https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/CapacityUnitCalculations.html>
//! - Write units: <https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/read-write-operations.html>
//! - Transactions cost two units per item:
//!   <https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis.html#transaction-capacity-handling>,
//!   <https://aws.amazon.com/dynamodb/pricing/provisioned/>
//! - Index writes (one per index whose key the item has; two when the key changes):
//!   <https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/LSI.html> (provisioned
//!   throughput considerations, writes) and
//!   <https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/GSI.html#GSI.Writes>.
//!
//! Only a `Put` shows the item; for `Update`, `Delete` and `ConditionCheck` the stored item
//! is unseen and the double assumes 1 KB, with the index rules of [`schema::write_of`]
//! (an `Update` pays an index write when it names the index key; a `Delete` pays one per
//! index).
//!
//! **The item-collection rule.** On a table with a local secondary index all items of one
//! partition key value (an item collection, at most 10 GB) stay in one partition, so the
//! partition limit is a limit per partition key value: the buckets are per table and hash
//! key value. <https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/LSI.html#LSI.ItemCollections>,
//! <https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_CreateTable.html>
//! ("There is a 10 GB size limit per partition key value"). On a table without an LSI,
//! DynamoDB may split a hot partition key by sort key; the double does not (see below).
//!
//! **Latency and time stretch.** With `stretch` k ≥ 1 the model runs k times slower than
//! real time, so a moto that manages tens of writes a second can stand for DynamoDB at
//! 1,000: every modelled duration is multiplied by k (the transaction's duration, the call
//! latency) and every rate divided by k (partition write units per second). A transaction
//! answers no earlier than `start + transaction × k` and holds its items until then, and at
//! least until moto has answered; every other call answers no earlier than
//! `start + call_latency × k`.
//!
//! **moto is not thread-safe.** Requests reach moto one at a time through a gate, a
//! `tokio::sync::Mutex<()>` the caller may share with its own moto clients. Holds and
//! waits never keep the gate.
//!
//! **Key schemas** come from moto (`DescribeTable`, once per table, with the request's own
//! credentials so moto looks in the same account and region), never from configuration.
//!
//! **Statistics** ([`Stats`]) are read from [`DoubleHandle::stats`] or, from another
//! process, as JSON at `GET /__double/stats`.
//!
//! **Idempotency tokens**: a `TransactWriteItems` sent again with the `ClientRequestToken` of
//! one that succeeded in the last 10 minutes is answered as the first, and writes nothing;
//! with another request, `IdempotentParameterMismatchException` ([`faults`] cites it).
//!
//! **Faults** ([`Faults`], [`start_with_faults`]): DynamoDB and S3 failures at set rates
//! from a seed, before a call is applied and after a write was, and short outages; S3
//! requests sent to the double are forwarded to moto like any other. See [`faults`] for
//! what is injected and where AWS documents it.
//!
//! # What it does not model
//!
//! - Adaptive capacity and partition splits ("split for heat" by sort key on tables
//!   without an LSI): every partition key value is one partition, forever, with its own
//!   1,000 WCU; conversely different partition key values never share a partition.
//! - Table-level and account-level limits (on-demand table quotas, the previous-peak
//!   doubling, `MaxOnDemandThroughput`, provisioned capacity): only the partition limit.
//! - Reads: no read units, no read throttling (3,000 RCU per partition), reads never
//!   conflict (also not `TransactGetItems` against writes).
//! - Item sizes of `Update`/`Delete`/`ConditionCheck` (assumed 1 KB), changed index keys
//!   (an `Update` is charged one index write, not two), numbers' exact encoding.
//! - `BatchWriteItem` (forwarded, neither throttled nor checked for holds), and single-item
//!   writes racing each other or a transaction starting while one is in flight.
//! - Eventual consistency (every read is strongly consistent in moto), global tables,
//!   streams, global secondary indexes' own throughput.
//! - Capacity consumed by cancelled transactions: a conflict or throttle charges nothing.
//! - Everything moto itself gets wrong or leaves out.

mod answers;
pub mod faults;
mod ledger;
mod proxy;
pub mod schema;
pub mod size;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

pub use faults::{Faults, Outage, Rates};
pub use proxy::MAX_BODY_BYTES;

/// Where the statistics are served as JSON (`GET`).
pub const STATS_PATH: &str = "/__double/stats";

/// The modelled DynamoDB. Durations and rates are in model time: see `stretch`.
#[derive(Debug, Clone)]
pub struct Model {
    /// How many times slower than real time the model runs (≥ 1): durations are multiplied
    /// by it, rates divided by it.
    pub stretch: f64,
    /// How long a `TransactWriteItems` takes, holding its items.
    pub transaction: Duration,
    /// The least time any other call takes.
    pub call_latency: Duration,
    /// Write capacity units per second per partition key value.
    pub partition_wcu_per_sec: f64,
    /// How many seconds of `partition_wcu_per_sec` a partition may save up (bucket depth).
    pub burst_secs: f64,
}

impl Default for Model {
    fn default() -> Model {
        Model {
            stretch: 1.0,
            transaction: Duration::from_millis(10),
            call_latency: Duration::ZERO,
            partition_wcu_per_sec: 1000.0,
            burst_secs: 1.0,
        }
    }
}

impl Model {
    /// A model duration in real time.
    pub fn stretched(&self, duration: Duration) -> Duration {
        duration.mul_f64(self.stretch)
    }

    fn check(&self) -> anyhow::Result<()> {
        anyhow::ensure!(
            self.stretch.is_finite() && self.stretch >= 1.0,
            "stretch must be a finite number ≥ 1, got {}",
            self.stretch
        );
        anyhow::ensure!(
            self.partition_wcu_per_sec.is_finite() && self.partition_wcu_per_sec > 0.0,
            "partition_wcu_per_sec must be positive, got {}",
            self.partition_wcu_per_sec
        );
        anyhow::ensure!(
            self.burst_secs.is_finite() && self.burst_secs > 0.0,
            "burst_secs must be positive, got {}",
            self.burst_secs
        );
        Ok(())
    }
}

/// What the double has seen and decided since it started.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct Stats {
    /// DynamoDB requests received (the statistics endpoint excluded).
    pub requests: u64,
    /// `TransactWriteItems` requests received (with a JSON body).
    pub transactions: u64,
    /// Transactions moto applied (answered 2xx).
    pub committed: u64,
    /// Transactions the double cancelled because an item was held (`TransactionConflict`).
    pub transaction_conflicts: u64,
    /// `PutItem`/`UpdateItem`/`DeleteItem` refused on a held item
    /// (`TransactionConflictException`).
    pub single_write_conflicts: u64,
    /// Calls refused for partition throughput: single writes and transactions.
    pub throttled: u64,
    /// Of `throttled`, the transactions (cancelled with `ThrottlingError`).
    pub throttled_transactions: u64,
    /// Write capacity units charged to partitions (admitted writes only).
    pub wcu: f64,
    /// Items held by in-flight transactions at the time of reading.
    pub held_items: u64,
    /// Seconds moto spent answering (inside the gate): against wall time, how busy moto is,
    /// i.e. whether the stretch is large enough for the load.
    pub upstream_busy_secs: f64,
    /// Requests moto could not answer (connection refused, broken answer): answered 500.
    pub upstream_failures: u64,
    /// S3 requests received (with faults on, S3 goes through the double too).
    #[serde(default)]
    pub s3_requests: u64,
    /// DynamoDB calls answered with an injected error before reaching moto.
    #[serde(default)]
    pub dynamodb_faults_before: u64,
    /// DynamoDB writes applied by moto, then answered with an injected 500.
    #[serde(default)]
    pub dynamodb_faults_after: u64,
    /// S3 calls answered with an injected error before reaching moto.
    #[serde(default)]
    pub s3_faults_before: u64,
    /// S3 writes applied by moto, then answered with an injected 500.
    #[serde(default)]
    pub s3_faults_after: u64,
    /// Transactions sent again with the `ClientRequestToken` of one that succeeded:
    /// answered as the first, nothing written again.
    #[serde(default)]
    pub token_replays: u64,
}

impl Stats {
    /// Every injected failure.
    pub fn faults(&self) -> u64 {
        self.dynamodb_faults_before
            + self.dynamodb_faults_after
            + self.s3_faults_before
            + self.s3_faults_after
    }
}

/// A running double. It stops when dropped, or with [`DoubleHandle::shutdown`].
pub struct DoubleHandle {
    address: SocketAddr,
    shared: Arc<proxy::Shared>,
    server: JoinHandle<()>,
}

impl std::fmt::Debug for DoubleHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DoubleHandle")
            .field("address", &self.address)
            .finish_non_exhaustive()
    }
}

impl DoubleHandle {
    /// The base URL to give the SDK as its endpoint, e.g. `http://127.0.0.1:40123`.
    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.address
    }

    /// The statistics so far.
    pub fn stats(&self) -> Stats {
        self.shared.stats()
    }

    /// Injects `faults` from now on instead of those it started with.
    pub fn set_faults(&self, faults: Faults) -> anyhow::Result<()> {
        self.shared.set_faults(faults)
    }

    /// Stops accepting and ends every connection (in-flight transactions release their
    /// holds; their clients see the connection close).
    pub async fn shutdown(mut self) {
        self.server.abort();
        // Aborted on purpose: the join error says just that.
        let _ = (&mut self.server).await;
    }
}

impl Drop for DoubleHandle {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// Starts a double on `listen` (port 0: any free port) in front of the moto_server at
/// `upstream` (`http://host:port`). `gate` is the lock every request to moto takes: pass
/// the one the process's other moto clients use, or `None` for a new one.
pub async fn start(
    upstream: &str,
    listen: SocketAddr,
    model: Model,
    gate: Option<Arc<tokio::sync::Mutex<()>>>,
) -> anyhow::Result<DoubleHandle> {
    start_with_faults(upstream, listen, model, Faults::none(), gate).await
}

/// [`start`], injecting `faults` into the DynamoDB and S3 requests it receives (point the
/// S3 client at the double too, path style) and honouring `TransactWriteItems`'
/// `ClientRequestToken`.
pub async fn start_with_faults(
    upstream: &str,
    listen: SocketAddr,
    model: Model,
    faults: Faults,
    gate: Option<Arc<tokio::sync::Mutex<()>>>,
) -> anyhow::Result<DoubleHandle> {
    model.check()?;
    faults.check()?;
    let shared = Arc::new(proxy::Shared::new(
        upstream,
        model,
        faults,
        gate.unwrap_or_default(),
    )?);
    let listener = TcpListener::bind(listen)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {listen}: {e}"))?;
    let address = listener.local_addr()?;
    let server = tokio::spawn(proxy::serve(listener, Arc::clone(&shared)));
    Ok(DoubleHandle {
        address,
        shared,
        server,
    })
}

//! The write benchmark: one partner's burst of writes, open loop, through the real
//! handlers, on DynamoDB (in practice the DynamoDB double of `dynamo-double/`, which
//! models transaction conflicts and per-partition throughput on moto with time stretched
//! `k` times). `scripts/bench-writes` starts moto, the double and the table, then runs this;
//! run that, not this, unless you know why. The script's header documents the options.
//!
//! Every figure it prints is *modelled*: the double runs `k` times slower than DynamoDB, so
//! requests are sent at `rate / k` per real second, steps last `k ×` their modelled
//! length, and a latency is the real one divided by `k`.
//!
//! Each request is signed (OAuth1 HMAC-SHA1, a fresh nonce) exactly as a partner signs, and
//! goes through `App::handle` like a Lambda invocation: nonce, budget draws (budgets high
//! but on), the operation's store calls. Lambda is modelled as a pool of instances, each
//! with its own `App`, `DynamoStore` (its own spare ids) and SDK client (its own retry
//! quota); an instance serves one request at a time, and a request that finds none idle
//! gets a new one, as Lambda scales out. `--one-instance` shares one `App` instead (what
//! `sitehost serve` does). `--serve-url` sends the same requests over HTTP to a running
//! `sitehost serve --store dynamodb` instead.

use std::collections::BTreeMap;
use std::io::Cursor;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use aws_sdk_dynamodb::config::retry::{RetryConfig, RetryPartition};
use aws_sdk_dynamodb::config::{BehaviorVersion, Credentials, Region, SharedHttpClient};
use base64::Engine;
use bytes::Bytes;
use clap::{Parser, ValueEnum};
use http_body_util::BodyExt;
use serde_json::{json, Value};
use sitehost::api::App;
use sitehost::client::PartnerClient;
use sitehost::clock::{Clock, SystemClock};
use sitehost::config::{Config, Defaults, RequestBudgets};
use sitehost::domain::account::NewKey;
use sitehost::store::dynamo::DynamoStore;
use sitehost::store::files::SharedFiles;
use sitehost::store::s3::S3Files;
use sitehost::store::{SharedStore, Stores};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

/// The host in-process requests are sent to and signed against (never resolved).
const HOST: &str = "bench.sitehost.invalid";

#[derive(Parser)]
#[command(about = "Open-loop write benchmark of the partner API on DynamoDB (modelled time)")]
struct Cli {
    /// DynamoDB endpoint (the double's URL). Without it, the normal AWS resolution applies,
    /// which only `--real-aws` allows.
    #[arg(long)]
    dynamodb_endpoint: Option<String>,
    /// S3 endpoint of the upload files (moto); path-style addressing is used with it.
    #[arg(long)]
    s3_endpoint: Option<String>,
    /// The double's counters (`GET /__double/stats`); none: conflicts and throttles are not shown.
    #[arg(long)]
    stats_url: Option<String>,
    /// Allows an endpoint that is not on the loopback interface (real DynamoDB: it costs money).
    #[arg(long)]
    real_aws: bool,
    /// Use the fixed credentials `testing`/`testing` (moto and the double accept any).
    #[arg(long)]
    test_credentials: bool,
    #[arg(long, default_value = "us-east-1")]
    region: String,
    #[arg(long)]
    table: String,
    /// Upload bucket; without it the upload workloads are skipped.
    #[arg(long)]
    bucket: Option<String>,
    /// Real seconds per modelled second (the double's `--stretch`); 1 on real DynamoDB.
    #[arg(long, default_value_t = 1.0)]
    stretch: f64,
    /// Workloads to run, in order.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = Workload::all())]
    workloads: Vec<Workload>,
    /// Offered rates of the business workloads (creates, mixed), modelled requests/s.
    #[arg(long, value_delimiter = ',', default_values_t = vec![50.0, 100.0, 250.0, 500.0, 1000.0, 1500.0])]
    rates: Vec<f64>,
    /// Offered rates of the upload workloads, modelled requests/s.
    #[arg(long, value_delimiter = ',', default_values_t = vec![25.0, 50.0, 100.0, 200.0, 400.0])]
    upload_rates: Vec<f64>,
    /// Length of each step, modelled seconds.
    #[arg(long, default_value_t = 5.0)]
    step_seconds: f64,
    /// Most requests in flight at once; a request due while this many are in flight is not
    /// sent (and counted).
    #[arg(long, default_value_t = 1000)]
    max_in_flight: usize,
    /// Ids taken per sequence update; default: the functions' (`SITEHOST_ID_BLOCK` or the
    /// code's default).
    #[arg(long)]
    id_block: Option<u32>,
    /// The key's request budget per minute (`SITEHOST_REQUESTS_PER_MINUTE`); 0 turns it off.
    #[arg(long, default_value_t = 10_000_000)]
    requests_per_minute: u64,
    /// The key's upload budget per minute (`SITEHOST_UPLOADS_PER_MINUTE`); 0 turns it off.
    #[arg(long, default_value_t = 1_000_000)]
    uploads_per_minute: u64,
    /// One `App` (one store, one SDK client) for every request, as `sitehost serve` has,
    /// instead of a pool of Lambda-like instances.
    #[arg(long)]
    one_instance: bool,
    /// Account the key is made in (default: `bench-<unix time>`, a fresh one per run).
    #[arg(long)]
    account: Option<String>,
    /// Send the requests over HTTP to a running `sitehost serve --store dynamodb` on the same
    /// table (the key is still made here, through the table).
    #[arg(long)]
    serve_url: Option<String>,
    /// Writes the steps and checks as JSON.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Writes the steps as CSV.
    #[arg(long)]
    csv: Option<PathBuf>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Workload {
    /// (a) business creates, a third with a partner_business_id.
    Creates,
    /// (b) base64 image uploads into one site.
    SiteUploads,
    /// (c) base64 image uploads into one business (created first).
    BusinessUploads,
    /// (d) creates mixed with soft deletes, restores and renames of businesses of the run.
    Mixed,
    /// (e) a partner syncing locations: half creates (POST /api/v2/locations/, round robin
    /// over businesses made first, at most 40 each), half hours updates (PUT
    /// /api/v2/locations/<id>/ with {"hours": [...]}) of the locations it made.
    Locations,
}

impl Workload {
    fn all() -> Vec<Workload> {
        vec![
            Workload::Creates,
            Workload::SiteUploads,
            Workload::BusinessUploads,
            Workload::Mixed,
            Workload::Locations,
        ]
    }

    fn name(self) -> &'static str {
        match self {
            Workload::Creates => "creates",
            Workload::SiteUploads => "site-uploads",
            Workload::BusinessUploads => "business-uploads",
            Workload::Mixed => "mixed",
            Workload::Locations => "locations",
        }
    }

    fn uploads(self) -> bool {
        matches!(self, Workload::SiteUploads | Workload::BusinessUploads)
    }
}

// ---------------------------------------------------------------------------------------
// Lambda-like instances and the two ways of sending a request.

/// What builds one instance's `App`.
struct AppFactory {
    dynamodb: aws_sdk_dynamodb::Config,
    table: String,
    id_block: u32,
    stretch: f64,
    files: Option<SharedFiles>,
    config: Config,
}

impl AppFactory {
    fn store(&self, instance: usize) -> DynamoStore {
        // Its own retry partition: its own retry quota (token bucket), as each Lambda
        // instance, a process of its own, has. Clients in one process share one otherwise.
        let config = self
            .dynamodb
            .to_builder()
            .retry_partition(RetryPartition::custom(format!("bench-instance-{instance}")).build())
            .build();
        DynamoStore::new(aws_sdk_dynamodb::Client::from_conf(config), &self.table)
            .with_id_block(self.id_block)
            .with_time_stretch(self.stretch)
    }

    fn app(&self, instance: usize) -> Result<App> {
        let stores = Stores {
            records: Arc::new(self.store(instance)),
            files: self.files.clone(),
        };
        App::new(stores, self.config.clone()).context("building the App")
    }
}

enum Instances {
    One(Arc<App>),
    Pool {
        factory: Box<AppFactory>,
        idle: Mutex<Vec<Arc<App>>>,
        created: AtomicUsize,
    },
}

impl Instances {
    fn take(&self) -> Result<Arc<App>> {
        match self {
            Instances::One(app) => Ok(Arc::clone(app)),
            Instances::Pool {
                factory,
                idle,
                created,
            } => {
                if let Some(app) = lock(idle).pop() {
                    return Ok(app);
                }
                let n = created.fetch_add(1, Ordering::Relaxed);
                Ok(Arc::new(factory.app(n)?))
            }
        }
    }

    fn give_back(&self, app: Arc<App>) {
        if let Instances::Pool { idle, .. } = self {
            lock(idle).push(app);
        }
    }

    fn created(&self) -> usize {
        match self {
            Instances::One(_) => 1,
            Instances::Pool { created, .. } => created.load(Ordering::Relaxed),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Plain data only: a poisoned lock is still consistent.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A reply: status (0: the request failed in transport, `--serve-url` only) and JSON body.
struct Answer {
    status: u16,
    body: Value,
}

enum Sender {
    InProcess {
        instances: Instances,
        signer: PartnerClient,
    },
    Http(PartnerClient),
}

impl Sender {
    async fn send(&self, method: &str, path: &str, body: Option<&Value>) -> Result<Answer> {
        match self {
            Sender::InProcess { instances, signer } => {
                let mut request = http::Request::builder()
                    .method(method)
                    .uri(path)
                    .header(http::header::HOST, HOST)
                    .header(
                        http::header::AUTHORIZATION,
                        signer.authorization(method, path),
                    );
                if body.is_some() {
                    request = request.header(http::header::CONTENT_TYPE, "application/json");
                }
                let bytes = body.map_or_else(Bytes::new, |b| Bytes::from(b.to_string()));
                let request = request.body(bytes).context("building a request")?;
                let app = instances.take()?;
                let response = app.handle(request).await;
                instances.give_back(app);
                Ok(Answer {
                    status: response.status().as_u16(),
                    body: serde_json::from_slice(response.body()).unwrap_or(Value::Null),
                })
            }
            Sender::Http(client) => {
                let body = body.map(|b| b.to_string().into_bytes());
                Ok(match client.send(method, path, body).await {
                    Ok(reply) => Answer {
                        status: reply.status,
                        body: reply.body,
                    },
                    Err(_) => Answer {
                        status: 0,
                        body: Value::Null,
                    },
                })
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// The double's counters.

#[derive(Clone, Copy, Default)]
struct DoubleCounters {
    conflicts: u64,
    throttled: u64,
    /// Seconds moto spent answering (real time): how close to its limit moto ran.
    upstream_busy_secs: f64,
}

/// `GET` of the double's stats over a plain HTTP/1.1 connection.
async fn double_counters(url: &str) -> Result<DoubleCounters> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| anyhow!("--stats-url must be http://host:port/path, not {url}"))?;
    let (host, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let path = if path.is_empty() { "/" } else { path };
    let stream = tokio::net::TcpStream::connect(host)
        .await
        .with_context(|| format!("connecting to the double's stats at {url}"))?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await?;
    tokio::spawn(connection);
    let request = http::Request::get(path)
        .header(http::header::HOST, host)
        .body(http_body_util::Empty::<Bytes>::new())?;
    let response = sender.send_request(request).await?;
    let status = response.status();
    let body = response.into_body().collect().await?.to_bytes();
    if !status.is_success() {
        bail!("the double's stats at {url} answered {status}");
    }
    let stats: Value = serde_json::from_slice(&body)
        .with_context(|| format!("the double's stats at {url} are not JSON"))?;
    let n = |name: &str| stats[name].as_u64().unwrap_or(0);
    Ok(DoubleCounters {
        conflicts: n("transaction_conflicts") + n("single_write_conflicts"),
        throttled: n("throttled"),
        upstream_busy_secs: stats["upstream_busy_secs"].as_f64().unwrap_or(0.0),
    })
}

// ---------------------------------------------------------------------------------------
// What each workload sends, and what the run remembers of it.

/// One request of a workload, and what its reply tells the run.
enum Op {
    Create {
        name: String,
        partner_id: Option<String>,
    },
    Upload,
    Delete(i64),
    Restore(i64),
    Rename(i64),
    AddLocation(i64),
    SetHours(i64),
}

/// Businesses of the run and the counts the checks compare with the lists.
#[derive(Default)]
struct RunState {
    /// Businesses believed active (not deleted), free for the mixed workload.
    active: Mutex<Vec<i64>>,
    /// Businesses believed deleted.
    deleted: Mutex<Vec<i64>>,
    /// Business creates answered 201, over the whole run.
    businesses_created: AtomicU64,
    /// Image uploads answered 201, in the current workload.
    images_created: AtomicU64,
    /// Updates whose outcome is unknown (no 200, no 4xx): a deleted count may be off by these.
    uncertain_updates: AtomicU64,
    sequence: AtomicU64,
    /// The businesses the locations workload adds locations to.
    location_businesses: Mutex<Vec<i64>>,
    /// Locations created, free for an hours update.
    locations: Mutex<Vec<i64>>,
    /// Location creates answered 201, and those of unknown outcome (a 5xx, a lost reply).
    locations_created: AtomicU64,
    uncertain_locations: AtomicU64,
}

struct Run {
    sender: Sender,
    state: RunState,
    /// Distinct per run, so names and partner ids do not collide across runs on one table.
    tag: String,
    site_id: i64,
    /// The business the business-uploads workload uploads into.
    upload_business: Mutex<Option<i64>>,
    png_base64: String,
    stretch: f64,
    stats_url: Option<String>,
}

impl Run {
    /// The next request of `workload`. Businesses an update takes are out of the pools while
    /// it runs, so two requests never change one business at once.
    fn plan(&self, workload: Workload) -> Op {
        let i = self.state.sequence.fetch_add(1, Ordering::Relaxed);
        let create = || Op::Create {
            name: format!("Bench {} {i}", self.tag),
            partner_id: i.is_multiple_of(3).then(|| format!("pb-{}-{i}", self.tag)),
        };
        match workload {
            Workload::Creates => create(),
            Workload::SiteUploads | Workload::BusinessUploads => Op::Upload,
            // 40 % creates, 20 % each of deletes, restores and renames.
            Workload::Mixed => match i % 10 {
                0..=3 => create(),
                4 | 5 => take_random(&self.state.active).map_or_else(create, Op::Delete),
                6 | 7 => match take_random(&self.state.deleted) {
                    Some(id) => Op::Restore(id),
                    None => take_random(&self.state.active).map_or_else(create, Op::Delete),
                },
                _ => take_random(&self.state.active).map_or_else(create, Op::Rename),
            },
            Workload::Locations => {
                let add = || {
                    let businesses = lock(&self.state.location_businesses);
                    let n = businesses.len().max(1) as u64;
                    Op::AddLocation(businesses.get((i / 2 % n) as usize).copied().unwrap_or(0))
                };
                if i.is_multiple_of(2) {
                    add()
                } else {
                    take_random(&self.state.locations).map_or_else(add, Op::SetHours)
                }
            }
        }
    }

    fn request(&self, workload: Workload, op: &Op) -> Result<(&'static str, String, Value)> {
        Ok(match op {
            Op::Create { name, partner_id } => {
                let mut body = json!({ "business_name": name });
                if let Some(p) = partner_id {
                    body["partner_business_id"] = json!(p);
                }
                ("POST", "/api/v2/businesses/".into(), body)
            }
            Op::Upload => {
                let mut body =
                    json!({ "upload": { "name": "bench.png", "file": self.png_base64 } });
                if workload == Workload::SiteUploads {
                    body["site_id"] = json!(self.site_id);
                } else {
                    let business = lock(&self.upload_business)
                        .ok_or_else(|| anyhow!("no business to upload into"))?;
                    body["business_id"] = json!(business);
                }
                ("POST", "/api/v2/images/".into(), body)
            }
            Op::Delete(id) => update(*id, json!({ "id": id, "deleted": true })),
            Op::Restore(id) => update(*id, json!({ "id": id, "deleted": false })),
            Op::Rename(id) => update(
                *id,
                json!({ "id": id, "business_name": format!("Renamed {} {id}", self.tag) }),
            ),
            Op::AddLocation(business) => (
                "POST",
                "/api/v2/locations/".into(),
                json!({ "business_id": business, "location_name": format!("Shop {}", self.tag),
                        "street": "1 Main St", "city": "Minneapolis", "state": "MN",
                        "postal_code": "55401", "country": "US", "lat": 44.98, "lon": -93.27 }),
            ),
            Op::SetHours(id) => {
                let day = json!([["09:00:00", "17:00:00"]]);
                let week = json!([day, day, day, day, day, [], []]);
                (
                    "PUT",
                    format!("/api/v2/locations/{id}/"),
                    json!({ "hours": [{ "type": "primary", "hours": week }] }),
                )
            }
        })
    }

    /// Remembers what a reply says: new businesses, images, deleted state.
    fn record(&self, op: Op, answer: &Answer) {
        let state = &self.state;
        let ok = (200..300).contains(&answer.status);
        // A 4xx changed nothing; a 5xx or a lost reply may have.
        let known = ok || (400..500).contains(&answer.status);
        match op {
            Op::Create { .. } => {
                if answer.status == 201 {
                    state.businesses_created.fetch_add(1, Ordering::Relaxed);
                    if let Some(id) = answer.body["id"].as_i64() {
                        lock(&state.active).push(id);
                    }
                }
            }
            Op::Upload => {
                if answer.status == 201 {
                    state.images_created.fetch_add(1, Ordering::Relaxed);
                }
            }
            Op::AddLocation(_) => {
                if answer.status == 201 {
                    state.locations_created.fetch_add(1, Ordering::Relaxed);
                    if let Some(id) = answer.body["id"].as_i64() {
                        lock(&state.locations).push(id);
                    }
                } else if !known {
                    state.uncertain_locations.fetch_add(1, Ordering::Relaxed);
                }
            }
            Op::SetHours(id) => lock(&state.locations).push(id),
            Op::Delete(id) | Op::Restore(id) | Op::Rename(id) => {
                if !known {
                    state.uncertain_updates.fetch_add(1, Ordering::Relaxed);
                }
                let deleted = match answer.body["deleted"].as_bool() {
                    Some(d) if ok => d,
                    // Not changed (or unknown): back where it was.
                    _ => matches!(op, Op::Restore(_)),
                };
                let pool = if deleted {
                    &state.deleted
                } else {
                    &state.active
                };
                lock(pool).push(id);
            }
        }
    }
}

fn update(id: i64, body: Value) -> (&'static str, String, Value) {
    ("PUT", format!("/api/v2/businesses/{id}/"), body)
}

fn take_random(pool: &Mutex<Vec<i64>>) -> Option<i64> {
    let mut pool = lock(pool);
    if pool.is_empty() {
        return None;
    }
    let i = rand::random_range(0..pool.len());
    Some(pool.swap_remove(i))
}

/// An 8×8 PNG, made here: the records are what the benchmark is about, not the pixels.
fn tiny_png() -> Result<Vec<u8>> {
    let pixels = image::RgbImage::from_fn(8, 8, |x, y| {
        image::Rgb([(x * 32) as u8, (y * 32) as u8, 128])
    });
    let mut out = Cursor::new(Vec::new());
    pixels
        .write_to(&mut out, image::ImageFormat::Png)
        .context("encoding the test PNG")?;
    Ok(out.into_inner())
}

// ---------------------------------------------------------------------------------------
// Steps.

/// What one step measured; every rate, latency and duration modelled.
#[derive(serde::Serialize)]
struct Step {
    workload: &'static str,
    offered_per_s: f64,
    step_seconds: f64,
    due: u64,
    sent: u64,
    not_sent_cap: u64,
    ok_2xx: u64,
    done_per_s: f64,
    status_5xx: u64,
    status_429_503: u64,
    other_4xx: u64,
    transport_errors: u64,
    p50_ms: f64,
    p99_ms: f64,
    max_ms: f64,
    /// From the end of the schedule to the last reply of the step.
    drain_s: f64,
    conflicts: Option<u64>,
    throttled: Option<u64>,
    /// Share of the step's real time moto spent answering: near 100 %, moto (not the
    /// modelled DynamoDB) limits the step, and a larger stretch is needed.
    moto_busy_pct: Option<f64>,
    statuses: BTreeMap<u16, u64>,
}

#[derive(serde::Serialize)]
struct Check {
    workload: &'static str,
    list: String,
    expected: u64,
    total_count: Option<u64>,
    uncertain: u64,
    ok: bool,
}

async fn run_step(
    run: &Arc<Run>,
    workload: Workload,
    rate: f64,
    step_seconds: f64,
    in_flight: &Arc<Semaphore>,
) -> Result<Step> {
    let k = run.stretch;
    let due = (rate * step_seconds).round().max(0.0) as u64;
    let period = Duration::from_secs_f64(k / rate);
    let before = match &run.stats_url {
        Some(url) => Some(double_counters(url).await?),
        None => None,
    };
    let mut tasks = JoinSet::new();
    let mut not_sent = 0;
    let mut outcomes: Vec<(u16, Duration)> = Vec::with_capacity(due as usize);
    let started = tokio::time::Instant::now();
    for i in 0..due {
        tokio::time::sleep_until(started + period.mul_f64(i as f64)).await;
        let Ok(permit) = Arc::clone(in_flight).try_acquire_owned() else {
            not_sent += 1;
            continue;
        };
        let op = run.plan(workload);
        let (method, path, body) = run.request(workload, &op)?;
        let run = Arc::clone(run);
        tasks.spawn(async move {
            let sent = Instant::now();
            let answer = run.sender.send(method, &path, Some(&body)).await;
            let latency = sent.elapsed();
            drop(permit);
            let answer = answer?;
            let status = answer.status;
            run.record(op, &answer);
            anyhow::Ok((status, latency))
        });
        while let Some(done) = tasks.try_join_next() {
            outcomes.push(done.context("a request task panicked")??);
        }
    }
    let schedule_end = Instant::now();
    while let Some(done) = tasks.join_next().await {
        outcomes.push(done.context("a request task panicked")??);
    }
    let drain = schedule_end.elapsed();
    let real_duration = started.elapsed();
    let after = match &run.stats_url {
        Some(url) => Some(double_counters(url).await?),
        None => None,
    };
    let mut statuses = BTreeMap::new();
    for (status, _) in &outcomes {
        *statuses.entry(*status).or_insert(0) += 1;
    }
    let count = |f: &dyn Fn(u16) -> bool| -> u64 {
        statuses
            .iter()
            .filter(|(s, _)| f(**s))
            .map(|(_, n)| n)
            .sum()
    };
    let ok = count(&|s| (200..300).contains(&s));
    let mut latencies: Vec<Duration> = outcomes.iter().map(|(_, l)| *l).collect();
    latencies.sort_unstable();
    let modelled_ms = |p: f64| {
        latencies
            .get(((latencies.len() as f64 * p) as usize).min(latencies.len().saturating_sub(1)))
            .map_or(0.0, |d| d.as_secs_f64() * 1000.0 / k)
    };
    let delta =
        |f: fn(&DoubleCounters) -> u64| before.zip(after).map(|(b, a)| f(&a).saturating_sub(f(&b)));
    Ok(Step {
        workload: workload.name(),
        offered_per_s: rate,
        step_seconds,
        due,
        sent: outcomes.len() as u64,
        not_sent_cap: not_sent,
        ok_2xx: ok,
        done_per_s: ok as f64 / step_seconds,
        status_5xx: count(&|s| s >= 500 && s != 503),
        status_429_503: count(&|s| s == 429 || s == 503),
        other_4xx: count(&|s| (400..500).contains(&s) && s != 429),
        transport_errors: count(&|s| s == 0),
        p50_ms: modelled_ms(0.50),
        p99_ms: modelled_ms(0.99),
        max_ms: modelled_ms(1.0),
        drain_s: drain.as_secs_f64() / k,
        conflicts: delta(|c| c.conflicts),
        throttled: delta(|c| c.throttled),
        moto_busy_pct: before.zip(after).map(|(b, a)| {
            100.0 * (a.upstream_busy_secs - b.upstream_busy_secs) / real_duration.as_secs_f64()
        }),
        statuses,
    })
}

/// Above this share of a step's real time spent in moto, moto's own speed shaped the step.
const MOTO_BUSY_WARN: f64 = 80.0;

fn print_header() {
    println!(
        "{:<17} {:>9} {:>7} {:>7} {:>8} {:>6} {:>7} {:>5} {:>8} {:>8} {:>7} {:>9} {:>9} {:>6}",
        "workload",
        "offered/s",
        "sent",
        "no-send",
        "done/s",
        "5xx",
        "429/503",
        "4xx",
        "p50 ms",
        "p99 ms",
        "drain s",
        "conflicts",
        "throttled",
        "moto%"
    );
}

fn print_step(s: &Step) {
    let opt = |v: Option<u64>| v.map_or_else(|| "-".to_string(), |v| v.to_string());
    // A step that kept moto this busy measured moto as much as the model: flagged.
    let busy = s.moto_busy_pct.map_or_else(
        || "-".to_string(),
        |p| format!("{p:.0}{}", if p > MOTO_BUSY_WARN { "!" } else { "" }),
    );
    println!(
        "{:<17} {:>9.0} {:>7} {:>7} {:>8.1} {:>6} {:>7} {:>5} {:>8.1} {:>8.1} {:>7.1} {:>9} {:>9} {:>6}{}",
        s.workload,
        s.offered_per_s,
        s.sent,
        s.not_sent_cap,
        s.done_per_s,
        s.status_5xx,
        s.status_429_503,
        s.other_4xx,
        s.p50_ms,
        s.p99_ms,
        s.drain_s,
        opt(s.conflicts),
        opt(s.throttled),
        busy,
        if s.transport_errors > 0 {
            format!("  ({} transport errors)", s.transport_errors)
        } else {
            String::new()
        }
    );
}

// ---------------------------------------------------------------------------------------
// Checks: the lists' total_count against what was answered 201.

async fn total_count(run: &Run, path: &str) -> Result<Option<u64>> {
    // The load is over, but a throttled budget item may still refuse for a moment.
    for attempt in 0..5u32 {
        let answer = run.sender.send("GET", path, None).await?;
        if answer.status == 200 {
            return Ok(answer.body["meta"]["total_count"].as_u64());
        }
        eprintln!("GET {path}: {} (attempt {})", answer.status, attempt + 1);
        tokio::time::sleep(Duration::from_secs_f64(run.stretch * 0.5)).await;
    }
    Ok(None)
}

async fn check(
    run: &Run,
    workload: Workload,
    list: String,
    (expected, what): (u64, &str),
    uncertain: u64,
) -> Result<Check> {
    let total = total_count(run, &list).await?;
    let ok = total == Some(expected);
    let shown = total.map_or_else(|| "unreadable".to_string(), |t| t.to_string());
    println!(
        "check {:<17} GET {list}: total_count {shown}, {what} {expected}{}",
        workload.name(),
        if uncertain > 0 {
            format!(", {uncertain} updates of unknown outcome")
        } else {
            String::new()
        }
    );
    if !ok {
        println!(
            "MISMATCH {}: {list} total_count {shown} != {expected}",
            workload.name()
        );
    }
    Ok(Check {
        workload: workload.name(),
        list,
        expected,
        total_count: total,
        uncertain,
        ok,
    })
}

const CREATED: &str = "business creates answered 201 in the run:";
const UPLOADED: &str = "uploads answered 201 in the workload:";
const DELETED: &str = "deleted per the answers:";
const LOCATED: &str = "location creates answered 201:";

/// The locations workload's count: the sum of its businesses' location lists (a location
/// list always names its business).
async fn locations_check(run: &Run) -> Result<Check> {
    let state = &run.state;
    let businesses = lock(&state.location_businesses).clone();
    let mut total = Some(0);
    for business in &businesses {
        let path = format!("/api/v2/locations/?business_id={business}&limit=1");
        total = match (total, total_count(run, &path).await?) {
            (Some(sum), Some(count)) => Some(sum + count),
            _ => None,
        };
    }
    let expected = state.locations_created.load(Ordering::Relaxed);
    let uncertain = state.uncertain_locations.load(Ordering::Relaxed);
    // A create of unknown outcome may have written its location.
    let ok = total.is_some_and(|t| (expected..=expected + uncertain).contains(&t));
    let list = format!(
        "/api/v2/locations/?business_id=<each of {}>",
        businesses.len()
    );
    let shown = total.map_or_else(|| "unreadable".to_string(), |t| t.to_string());
    println!("check locations         GET {list}: total_count {shown}, {LOCATED} {expected}");
    if !ok {
        println!("MISMATCH locations: {list} total_count {shown} != {expected}");
    }
    Ok(Check {
        workload: Workload::Locations.name(),
        list,
        expected,
        total_count: total,
        uncertain,
        ok,
    })
}

async fn checks_after(run: &Run, workload: Workload) -> Result<Vec<Check>> {
    let state = &run.state;
    let businesses = state.businesses_created.load(Ordering::Relaxed);
    let mut checks = Vec::new();
    match workload {
        Workload::Creates => {
            checks.push(
                check(
                    run,
                    workload,
                    "/api/v2/businesses/?limit=1".into(),
                    (businesses, CREATED),
                    0,
                )
                .await?,
            );
        }
        Workload::SiteUploads => {
            let list = format!("/api/v2/images/?site_id={}&limit=1", run.site_id);
            let images = state.images_created.load(Ordering::Relaxed);
            checks.push(check(run, workload, list, (images, UPLOADED), 0).await?);
        }
        Workload::BusinessUploads => {
            let business = lock(&run.upload_business).unwrap_or(0);
            let list = format!("/api/v2/images/?business_id={business}&limit=1");
            let images = state.images_created.load(Ordering::Relaxed);
            checks.push(check(run, workload, list, (images, UPLOADED), 0).await?);
        }
        Workload::Locations => checks.push(locations_check(run).await?),
        Workload::Mixed => {
            let uncertain = state.uncertain_updates.load(Ordering::Relaxed);
            let deleted = lock(&state.deleted).len() as u64;
            checks.push(
                check(
                    run,
                    workload,
                    "/api/v2/businesses/?limit=1".into(),
                    (businesses, CREATED),
                    0,
                )
                .await?,
            );
            checks.push(
                check(
                    run,
                    workload,
                    "/api/v2/businesses/?deleted=1&limit=1".into(),
                    (deleted, DELETED),
                    uncertain,
                )
                .await?,
            );
        }
    }
    Ok(checks)
}

// ---------------------------------------------------------------------------------------
// Setup.

fn is_loopback(url: &str) -> bool {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .unwrap_or(url);
    let host = rest.split(['/', '?']).next().unwrap_or("");
    let host = match host.rsplit_once(':') {
        Some((h, port)) if port.chars().all(|c| c.is_ascii_digit()) => h,
        _ => host,
    };
    matches!(host, "127.0.0.1" | "localhost" | "[::1]")
}

fn credentials(cli: &Cli) -> Option<Credentials> {
    cli.test_credentials
        .then(|| Credentials::new("testing", "testing", None, None, "bench-writes"))
}

/// The SDK's default retry configuration (what `aws_config::load_defaults` gives the
/// functions: standard, 3 attempts, backoff from 1 s up to 20 s), its waits times `k`.
fn retry_config(stretch: f64) -> RetryConfig {
    RetryConfig::standard()
        .with_initial_backoff(Duration::from_secs(1).mul_f64(stretch))
        .with_max_backoff(Duration::from_secs(20).mul_f64(stretch))
}

async fn sdk_config(cli: &Cli) -> aws_config::SdkConfig {
    let mut loader = aws_config::defaults(BehaviorVersion::latest())
        .region(Region::new(cli.region.clone()))
        .retry_config(retry_config(cli.stretch));
    if let Some(c) = credentials(cli) {
        loader = loader.credentials_provider(c);
    }
    loader.load().await
}

fn dynamodb_config(
    cli: &Cli,
    sdk: &aws_config::SdkConfig,
    http: &SharedHttpClient,
) -> aws_sdk_dynamodb::Config {
    let mut builder = aws_sdk_dynamodb::config::Builder::from(sdk).http_client(http.clone());
    if let Some(endpoint) = &cli.dynamodb_endpoint {
        builder = builder.endpoint_url(endpoint);
    }
    builder.build()
}

fn s3_client(cli: &Cli, sdk: &aws_config::SdkConfig) -> aws_sdk_s3::Client {
    let mut builder = aws_sdk_s3::config::Builder::from(sdk);
    if let Some(endpoint) = &cli.s3_endpoint {
        builder = builder.endpoint_url(endpoint).force_path_style(true);
    }
    aws_sdk_s3::Client::from_conf(builder.build())
}

/// A function's configuration, as `Config::from_env` reads it on Lambda (its defaults, the
/// `SITEHOST_*` variables set), with the benchmark's table, bucket, budgets and id block,
/// and plain http for the in-process requests' signatures.
fn app_config(cli: &Cli) -> Result<Config> {
    let mut config = Config::from_env(Defaults {
        store_choice: Some("dynamodb".into()),
        table_choice: Some(cli.table.clone()),
        ..Defaults::lambda()
    })
    .context("reading the SITEHOST_* configuration")?;
    config.default_scheme = "http".into();
    if let Some(n) = cli.id_block {
        config.id_block = n;
    }
    config.bucket = cli.bucket.clone();
    config.budgets = RequestBudgets {
        requests_per_minute: cli.requests_per_minute,
        uploads_per_minute: cli.uploads_per_minute,
    };
    Ok(config)
}

fn check_arguments(cli: &Cli) -> Result<()> {
    match &cli.dynamodb_endpoint {
        Some(e) if is_loopback(e) => {}
        Some(e) if !cli.real_aws => bail!(
            "{e} is not a loopback endpoint: real DynamoDB costs money; pass --real-aws if you mean it"
        ),
        None if !cli.real_aws => bail!(
            "no --dynamodb-endpoint: that is real DynamoDB, which costs money; pass --real-aws if you mean it"
        ),
        _ => {}
    }
    if !(cli.stretch.is_finite() && cli.stretch >= 1.0) {
        bail!("--stretch must be a number of at least 1");
    }
    if !(cli.step_seconds.is_finite() && cli.step_seconds > 0.0) {
        bail!("--step-seconds must be positive");
    }
    if cli
        .rates
        .iter()
        .chain(&cli.upload_rates)
        .any(|r| !(r.is_finite() && *r > 0.0))
    {
        bail!("every rate must be positive");
    }
    if cli.max_in_flight == 0 {
        bail!("--max-in-flight must be at least 1");
    }
    Ok(())
}

fn init_logging() -> Result<()> {
    // 5xx are logged at ERROR with their cause chain; the request lines (INFO) are off.
    let filter = std::env::var("RUST_LOG").unwrap_or_else(|_| "error".into());
    // JSON lines (the functions' format): the script sums up their `error` fields.
    let settings = sitehost::config::LogSettings::from_values(Some(&filter), Some("json"), None)?;
    sitehost::api::logging::init_cli(&settings);
    Ok(())
}

#[tokio::main]
async fn main() -> Result<()> {
    let cli = Cli::parse();
    check_arguments(&cli)?;
    init_logging()?;
    let sdk = sdk_config(&cli).await;
    let http = aws_smithy_http_client::Builder::new()
        .tls_provider(aws_smithy_http_client::tls::Provider::Rustls(
            aws_smithy_http_client::tls::rustls_provider::CryptoMode::AwsLc,
        ))
        .build_https();
    let files: Option<SharedFiles> = cli
        .bucket
        .as_ref()
        .map(|bucket| -> SharedFiles { Arc::new(S3Files::new(s3_client(&cli, &sdk), bucket)) });
    let config = app_config(&cli)?;
    let factory = AppFactory {
        dynamodb: dynamodb_config(&cli, &sdk, &http),
        table: cli.table.clone(),
        id_block: config.id_block,
        stretch: cli.stretch,
        files,
        config,
    };
    let id_block = factory.id_block;

    // The key, made through the store as `sitehost keys create` makes it.
    let now = SystemClock.now();
    let account_name = cli
        .account
        .clone()
        .unwrap_or_else(|| format!("bench-{now}"));
    let admin: SharedStore = Arc::new(factory.store(usize::MAX));
    let account = admin
        .ensure_account(&account_name)
        .await
        .with_context(|| format!("making the account {account_name} in table {}", cli.table))?;
    let key = admin
        .create_key(NewKey::generate(account.id, None, None, now))
        .await
        .context("making the key")?;

    let sender = match &cli.serve_url {
        Some(url) => Sender::Http(PartnerClient::new(url, &key.key, &key.secret)),
        None => Sender::InProcess {
            instances: if cli.one_instance {
                Instances::One(Arc::new(factory.app(0)?))
            } else {
                Instances::Pool {
                    factory: Box::new(factory),
                    idle: Mutex::new(Vec::new()),
                    created: AtomicUsize::new(0),
                }
            },
            signer: PartnerClient::new(&format!("http://{HOST}"), &key.key, &key.secret),
        },
    };
    let png = tiny_png()?;
    let run = Arc::new(Run {
        sender,
        state: RunState::default(),
        tag: format!("{now}"),
        site_id: now,
        upload_business: Mutex::new(None),
        png_base64: base64::engine::general_purpose::STANDARD.encode(png),
        stretch: cli.stretch,
        stats_url: cli.stats_url.clone(),
    });
    if let Some(url) = &cli.stats_url {
        double_counters(url).await?;
    }

    println!(
        "bench-writes: account {account_name} (id {}), table {}, stretch k = {} (every rate, \
         latency and duration below is modelled: real rate × k, real time / k), step {} s, \
         in-flight cap {}, id block {}, budgets {}/min requests and {}/min uploads, {}",
        account.id,
        cli.table,
        cli.stretch,
        cli.step_seconds,
        cli.max_in_flight,
        id_block,
        cli.requests_per_minute,
        cli.uploads_per_minute,
        match (&cli.serve_url, cli.one_instance) {
            (Some(url), _) => format!("over HTTP to {url}"),
            (None, true) => "in process, one App".into(),
            (None, false) => "in process, Lambda-like instances".into(),
        }
    );
    let in_flight = Arc::new(Semaphore::new(cli.max_in_flight));
    let mut steps = Vec::new();
    let mut checks = Vec::new();
    let started = Instant::now();
    for &workload in &cli.workloads {
        if workload.uploads() && cli.bucket.is_none() {
            println!("{}: skipped (no --bucket)", workload.name());
            continue;
        }
        if workload == Workload::BusinessUploads {
            let answer = run
                .sender
                .send(
                    "POST",
                    "/api/v2/businesses/",
                    Some(&json!({ "business_name": format!("Uploads {}", run.tag) })),
                )
                .await?;
            if answer.status != 201 {
                bail!("creating the business to upload into: {}", answer.status);
            }
            run.state.businesses_created.fetch_add(1, Ordering::Relaxed);
            *lock(&run.upload_business) = answer.body["id"].as_i64();
        }
        if workload == Workload::Locations {
            // Room for every create the steps offer, at most 40 a business (of 50 allowed).
            let creates = cli.rates.iter().sum::<f64>() * cli.step_seconds / 2.0;
            let needed = (creates / 40.0).ceil() as usize + 1;
            for n in 0..needed {
                let body = json!({ "business_name": format!("Locations {} {n}", run.tag) });
                let answer = run
                    .sender
                    .send("POST", "/api/v2/businesses/", Some(&body))
                    .await?;
                if answer.status != 201 {
                    bail!("creating a business for locations: {}", answer.status);
                }
                run.state.businesses_created.fetch_add(1, Ordering::Relaxed);
                if let Some(id) = answer.body["id"].as_i64() {
                    lock(&run.state.location_businesses).push(id);
                }
            }
        }
        run.state.images_created.store(0, Ordering::Relaxed);
        println!();
        print_header();
        let rates = if workload.uploads() {
            &cli.upload_rates
        } else {
            &cli.rates
        };
        for &rate in rates {
            let step = run_step(&run, workload, rate, cli.step_seconds, &in_flight).await?;
            print_step(&step);
            steps.push(step);
        }
        checks.extend(checks_after(&run, workload).await?);
    }
    if let Sender::InProcess { instances, .. } = &run.sender {
        println!(
            "instances (Apps) created: {}; real time {:.0} s",
            instances.created(),
            started.elapsed().as_secs_f64()
        );
    }

    if let Some(path) = &cli.out {
        let out = json!({
            "modelled": true,
            "stretch": cli.stretch,
            "step_seconds": cli.step_seconds,
            "max_in_flight": cli.max_in_flight,
            "id_block": id_block,
            "requests_per_minute": cli.requests_per_minute,
            "uploads_per_minute": cli.uploads_per_minute,
            "one_instance": cli.one_instance,
            "serve_url": cli.serve_url,
            "table": cli.table,
            "account": account_name,
            "steps": steps,
            "checks": checks,
        });
        std::fs::write(path, serde_json::to_vec_pretty(&out)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = &cli.csv {
        let mut csv = String::from(
            "workload,offered_per_s,step_seconds,due,sent,not_sent_cap,ok_2xx,done_per_s,\
             status_5xx,status_429_503,other_4xx,transport_errors,p50_ms,p99_ms,max_ms,drain_s,\
             conflicts,throttled,moto_busy_pct\n",
        );
        let opt = |v: Option<u64>| v.map_or_else(String::new, |v| v.to_string());
        for s in &steps {
            csv.push_str(&format!(
                "{},{},{},{},{},{},{},{:.2},{},{},{},{},{:.2},{:.2},{:.2},{:.2},{},{},{}\n",
                s.workload,
                s.offered_per_s,
                s.step_seconds,
                s.due,
                s.sent,
                s.not_sent_cap,
                s.ok_2xx,
                s.done_per_s,
                s.status_5xx,
                s.status_429_503,
                s.other_4xx,
                s.transport_errors,
                s.p50_ms,
                s.p99_ms,
                s.max_ms,
                s.drain_s,
                opt(s.conflicts),
                opt(s.throttled),
                s.moto_busy_pct
                    .map_or_else(String::new, |p| format!("{p:.1}"))
            ));
        }
        std::fs::write(path, csv).with_context(|| format!("writing {}", path.display()))?;
    }
    if steps
        .iter()
        .any(|s| s.moto_busy_pct.is_some_and(|p| p > MOTO_BUSY_WARN))
    {
        println!(
            "moto% marked !: moto was busy over {MOTO_BUSY_WARN}% of that step's real time, so \
             its own speed shaped the step; run again with a larger --stretch"
        );
    }
    if checks.iter().any(|c| !c.ok) {
        println!("MISMATCH: a list's total_count differs from the 201s (see above)");
    }
    Ok(())
}

//! Load generator for `sitehost serve`: wrk cannot sign OAuth1, this can.
//!
//!   loadgen seed --data-dir D --count 100000      # prints {"key":..,"secret":..}
//!   loadgen run --url http://127.0.0.1:3000 --key K --secret S \
//!       --path '/api/v2/businesses/?limit=20' --concurrency 32 --seconds 10
//!
//! `scripts/bench-api` runs both against a release build; see docs/benchmarks.md.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};
use http_body_util::BodyExt;
use serde_json::json;
use sitehost::client::PartnerClient;
use sitehost::clock::{Clock, SystemClock};
use sitehost::domain::account::NewKey;
use sitehost::domain::business::NewBusiness;
use sitehost::store::sqlite::SqliteStore;
use sitehost::store::{BusinessStore, KeyStore};

#[derive(Parser)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Fills an embedded store with businesses in one account and prints a key for it.
    Seed {
        #[arg(long)]
        data_dir: PathBuf,
        #[arg(long, default_value_t = 100_000)]
        count: u64,
    },
    /// Sends signed GETs from concurrent clients and reports throughput and latency.
    Run {
        #[arg(long)]
        url: String,
        #[arg(long)]
        key: String,
        #[arg(long)]
        secret: String,
        /// Path and query; `{id}` is replaced by a rotating id in 1..=ids.
        #[arg(long)]
        path: String,
        #[arg(long, default_value_t = 100_000)]
        ids: u64,
        #[arg(long, default_value_t = 32)]
        concurrency: usize,
        #[arg(long, default_value_t = 10)]
        seconds: u64,
    },
}

async fn seed(data_dir: PathBuf, count: u64) -> Result<(), Box<dyn std::error::Error>> {
    let store = SqliteStore::open(&data_dir)?;
    let account = store.ensure_account("bench").await?;
    let now = SystemClock.now();
    let key = store
        .create_key(NewKey::generate(account.id, None, None, now))
        .await?;
    let started = Instant::now();
    for i in 0..count {
        let new = NewBusiness {
            business_name: format!("Business {i:06}"),
            partner_business_id: Some(format!("pb-{i}")),
            partner_sub_id: Some(format!("sub-{}", i % 10)),
            category_id: Some((i % 50) as i64 + 1),
            logo_image_id: None,
            user_id: key.user_id,
            ..Default::default()
        };
        store
            .create_business(account.id, new, now - (count - i) as i64)
            .await?;
    }
    eprintln!(
        "seeded {count} businesses in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    println!("{}", json!({"key": key.key, "secret": key.secret}));
    Ok(())
}

/// One client: its own keep-alive HTTP/1.1 connection, one request at a time, each signed
/// with a fresh nonce. Bodies are read in full but not parsed: the generator shares the
/// server's two cores, so it spends as little of them as it can.
async fn client(
    signer: Arc<PartnerClient>,
    host: String,
    path: String,
    ids: u64,
    worker: u64,
    deadline: Instant,
) -> Result<(Vec<Duration>, u64), Box<dyn std::error::Error + Send + Sync>> {
    let stream = tokio::net::TcpStream::connect(&host).await?;
    stream.set_nodelay(true)?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await?;
    tokio::spawn(connection);
    let mut latencies = Vec::new();
    let mut failures = 0u64;
    let mut n = worker;
    while Instant::now() < deadline {
        n = n.wrapping_add(7919);
        let target = path.replace("{id}", &(n % ids + 1).to_string());
        let request = http::Request::get(&target)
            .header(http::header::HOST, &host)
            .header(
                http::header::AUTHORIZATION,
                signer.authorization("GET", &target),
            )
            .body(http_body_util::Empty::<bytes::Bytes>::new())?;
        let sent = Instant::now();
        let response = sender.send_request(request).await?;
        let ok = response.status() == http::StatusCode::OK;
        response.into_body().collect().await?;
        if ok {
            latencies.push(sent.elapsed());
        } else {
            failures += 1;
        }
    }
    Ok((latencies, failures))
}

async fn run(
    url: String,
    key: String,
    secret: String,
    path: String,
    ids: u64,
    concurrency: usize,
    seconds: u64,
) -> Result<(), Box<dyn std::error::Error>> {
    let host = url
        .strip_prefix("http://")
        .ok_or("--url must be http://host:port")?
        .trim_end_matches('/')
        .to_string();
    let signer = Arc::new(PartnerClient::new(&url, &key, &secret));
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let tasks: Vec<_> = (0..concurrency as u64)
        .map(|worker| {
            tokio::spawn(client(
                Arc::clone(&signer),
                host.clone(),
                path.clone(),
                ids,
                worker,
                deadline,
            ))
        })
        .collect();
    let started = Instant::now();
    let mut latencies = Vec::new();
    let mut failures = 0;
    for task in tasks {
        match task.await {
            Ok(Ok((l, f))) => {
                latencies.extend(l);
                failures += f;
            }
            Ok(Err(err)) => return Err(format!("a client failed: {err}").into()),
            Err(err) => return Err(format!("a client panicked: {err}").into()),
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    latencies.sort_unstable();
    let pct = |p: f64| {
        latencies
            .get(((latencies.len() as f64 * p) as usize).min(latencies.len().saturating_sub(1)))
            .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
    };
    println!(
        "{}",
        json!({
            "path": path,
            "concurrency": concurrency,
            "requests": latencies.len(),
            "failures": failures,
            "requests_per_second": (latencies.len() as f64 / elapsed).round(),
            "p50_ms": (pct(0.50) * 100.0).round() / 100.0,
            "p99_ms": (pct(0.99) * 100.0).round() / 100.0,
        })
    );
    Ok(())
}

// One thread: the generator runs beside the server on the same cores, and a single event
// loop drives 32 connections without cross-thread wake-ups.
#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    match Cli::parse().command {
        Command::Seed { data_dir, count } => seed(data_dir, count).await?,
        Command::Run {
            url,
            key,
            secret,
            path,
            ids,
            concurrency,
            seconds,
        } => run(url, key, secret, path, ids, concurrency, seconds).await?,
    }
    Ok(())
}

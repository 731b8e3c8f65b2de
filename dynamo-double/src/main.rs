//! `dynamo-double`: the DynamoDB test double as a process, for benchmarks that run the API
//! elsewhere. Prints `dynamo-double listening on http://127.0.0.1:NNNN` as its first line on
//! stdout, then serves until killed. See the library documentation for the model.

use std::io::Write;
use std::net::SocketAddr;
use std::time::Duration;

use clap::Parser;
use dynamo_double::{Faults, Model, Outage, Rates};

#[derive(Parser, Debug)]
#[command(
    name = "dynamo-double",
    about = "A DynamoDB test double in front of moto_server"
)]
struct Args {
    /// The moto_server to forward to, e.g. http://127.0.0.1:5000.
    #[arg(long)]
    upstream: String,
    /// Where to listen (port 0: any free port).
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// How many times slower than real time the model runs (≥ 1).
    #[arg(long, default_value_t = 1.0)]
    stretch: f64,
    /// How long a TransactWriteItems takes, holding its items (model milliseconds).
    #[arg(long, default_value_t = 10)]
    transaction_ms: u64,
    /// The least time any other call takes (model milliseconds).
    #[arg(long, default_value_t = 0)]
    call_latency_ms: u64,
    /// Write capacity units per second per partition key value (model time).
    #[arg(long, default_value_t = 1000.0)]
    partition_wcu: f64,
    /// Seconds of partition throughput a partition may save up.
    #[arg(long, default_value_t = 1.0)]
    burst_secs: f64,
    /// Seed of the injected faults' generator.
    #[arg(long, default_value_t = 0)]
    fault_seed: u64,
    /// Share of DynamoDB calls failed before they are applied (InternalServerError or
    /// ThrottlingException).
    #[arg(long, default_value_t = 0.0)]
    dynamodb_fail_before: f64,
    /// Share of DynamoDB writes applied, then answered InternalServerError.
    #[arg(long, default_value_t = 0.0)]
    dynamodb_fail_after: f64,
    /// Share of S3 calls failed before they are applied (InternalError or SlowDown).
    #[arg(long, default_value_t = 0.0)]
    s3_fail_before: f64,
    /// Share of S3 writes applied, then answered InternalError.
    #[arg(long, default_value_t = 0.0)]
    s3_fail_after: f64,
    /// Outages: every this many seconds (0: none), ...
    #[arg(long, default_value_t = 0.0)]
    outage_every_secs: f64,
    /// for this many seconds, ...
    #[arg(long, default_value_t = 0.0)]
    outage_secs: f64,
    /// this share of calls fails before it is applied.
    #[arg(long, default_value_t = 0.9)]
    outage_rate: f64,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    init_logging();
    let args = Args::parse();
    let model = Model {
        stretch: args.stretch,
        transaction: Duration::from_millis(args.transaction_ms),
        call_latency: Duration::from_millis(args.call_latency_ms),
        partition_wcu_per_sec: args.partition_wcu,
        burst_secs: args.burst_secs,
    };
    let faults = Faults {
        seed: args.fault_seed,
        dynamodb: Rates {
            before: args.dynamodb_fail_before,
            after: args.dynamodb_fail_after,
        },
        s3: Rates {
            before: args.s3_fail_before,
            after: args.s3_fail_after,
        },
        outage: (args.outage_every_secs > 0.0).then(|| Outage {
            every: Duration::from_secs_f64(args.outage_every_secs),
            length: Duration::from_secs_f64(args.outage_secs),
            rate: args.outage_rate,
        }),
    };
    let double =
        dynamo_double::start_with_faults(&args.upstream, args.listen, model, faults, None).await?;
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "dynamo-double listening on {}", double.url())?;
    stdout.flush()?;
    drop(stdout);
    tokio::signal::ctrl_c().await?;
    double.shutdown().await;
    Ok(())
}

/// Logs to stderr, as much as `RUST_LOG` asks (e.g. `dynamo_double=debug` for every
/// cancellation); nothing by default but warnings.
fn init_logging() {
    use tracing_subscriber::filter::{LevelFilter, Targets};
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::Layer;
    let wanted: Targets = std::env::var("RUST_LOG")
        .ok()
        .and_then(|directives| directives.parse().ok())
        .unwrap_or_else(|| Targets::new().with_default(LevelFilter::WARN));
    tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_filter(wanted),
        )
        .init();
}

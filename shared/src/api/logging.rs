//! Structured logs with `tracing`, filtered by `RUST_LOG` (default `info`).
//!
//! `RUST_LOG` takes comma-separated `level` and `target=level` directives (`warn`,
//! `info,sitehost=debug`). A `Targets` filter reads that without the regex engine an
//! `EnvFilter` would add to every function binary.

use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

use crate::api::request_log::{self, LambdaFormat};

fn filter() -> Targets {
    std::env::var("RUST_LOG")
        .ok()
        .and_then(|directives| directives.parse().ok())
        .unwrap_or_else(|| Targets::new().with_default(LevelFilter::INFO))
}

/// JSON lines without timestamps (CloudWatch adds its own); the request line is also the
/// request's metrics, in Embedded Metric Format (`request_log`).
pub fn init_lambda() {
    let _ = tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .json()
                .event_format(LambdaFormat::new(metrics_namespace())),
        )
        .with(filter())
        .try_init();
}

/// Logs on stderr for the `sitehost` command: human-readable, or with
/// `SITEHOST_LOG_FORMAT=json` the Lambda format (JSON lines, EMF request lines).
pub fn init_cli() {
    let layer = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let _ = if std::env::var("SITEHOST_LOG_FORMAT").is_ok_and(|format| format == "json") {
        tracing_subscriber::registry()
            .with(
                layer
                    .json()
                    .event_format(LambdaFormat::new(metrics_namespace())),
            )
            .with(filter())
            .try_init()
    } else {
        tracing_subscriber::registry()
            .with(layer)
            .with(filter())
            .try_init()
    };
}

fn metrics_namespace() -> String {
    std::env::var(request_log::NAMESPACE_VAR)
        .ok()
        .filter(|namespace| !namespace.trim().is_empty())
        .unwrap_or_else(|| request_log::DEFAULT_NAMESPACE.to_string())
}

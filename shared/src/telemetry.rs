//! Structured logs with `tracing`, filtered by `RUST_LOG` (default `info`).
//!
//! `RUST_LOG` takes comma-separated `level` and `target=level` directives (`warn`,
//! `info,sitehost=debug`). A `Targets` filter reads that without the regex engine an
//! `EnvFilter` would add to every function binary.

use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

fn filter() -> Targets {
    std::env::var("RUST_LOG")
        .ok()
        .and_then(|directives| directives.parse().ok())
        .unwrap_or_else(|| Targets::new().with_default(LevelFilter::INFO))
}

/// JSON lines without timestamps: CloudWatch adds its own.
pub fn init_lambda() {
    let _ = tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .json()
                .without_time()
                .with_current_span(false),
        )
        .with(filter())
        .try_init();
}

/// Human-readable logs on stderr for the `sitehost` command.
pub fn init_cli() {
    let _ = tracing_subscriber::registry()
        .with(tracing_subscriber::fmt::layer().with_writer(std::io::stderr))
        .with(filter())
        .try_init();
}

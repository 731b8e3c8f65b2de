//! Structured logs with `tracing`, filtered by `RUST_LOG` (default `info`).

use tracing_subscriber::EnvFilter;

fn filter() -> EnvFilter {
    EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"))
}

/// JSON lines without timestamps: CloudWatch adds its own.
pub fn init_lambda() {
    let _ = tracing_subscriber::fmt()
        .json()
        .with_env_filter(filter())
        .without_time()
        .with_current_span(false)
        .try_init();
}

/// Human-readable logs on stderr for the `sitehost` command.
pub fn init_cli() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter())
        .with_writer(std::io::stderr)
        .try_init();
}

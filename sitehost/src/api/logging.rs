//! Structured logs with `tracing`, as [`LogSettings`] say (`RUST_LOG`, default `info`).
//!
//! The filter is a `Targets` (`warn`, `info,sitehost=debug`), which reads `RUST_LOG`
//! without the regex engine an `EnvFilter` would add to every function binary.

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

use crate::api::request_log::LambdaFormat;
use crate::config::LogSettings;

/// JSON lines without timestamps (CloudWatch adds its own); the request line is also the
/// request's metrics, in Embedded Metric Format (`request_log`).
pub fn init_lambda(settings: &LogSettings) {
    let _ = tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .json()
                .event_format(LambdaFormat::new(settings.metrics_namespace.clone())),
        )
        .with(settings.filter.clone())
        .try_init();
}

/// Logs on stderr for the `sitehost` command: human-readable, or with
/// `SITEHOST_LOG_FORMAT=json` the Lambda format (JSON lines, EMF request lines).
pub fn init_cli(settings: &LogSettings) {
    let layer = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let _ = if settings.json {
        tracing_subscriber::registry()
            .with(
                layer
                    .json()
                    .event_format(LambdaFormat::new(settings.metrics_namespace.clone())),
            )
            .with(settings.filter.clone())
            .try_init()
    } else {
        tracing_subscriber::registry()
            .with(layer)
            .with(settings.filter.clone())
            .try_init()
    };
}

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

/// An error and its causes (`std::error::Error::source`), outermost first, as one line:
/// `outer: cause: root cause`. A cause whose text its wrapper's message already ends with
/// (`#[error("...: {0}")]` around `#[source]`) is not repeated.
pub fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut chain = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !chain.ends_with(&text) {
            chain.push_str(": ");
            chain.push_str(&text);
        }
        source = cause.source();
    }
    chain
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("{message}")]
    struct Layer {
        message: &'static str,
        #[source]
        source: Option<Box<Layer>>,
    }

    fn layer(message: &'static str, source: Option<Layer>) -> Layer {
        Layer {
            message,
            source: source.map(Box::new),
        }
    }

    #[test]
    fn error_chain_walks_every_source_once() {
        let root = layer("connection reset by peer", None);
        let middle = layer("dispatch failure", Some(root));
        let outer = layer(
            "internal error: could not write the image record",
            Some(middle),
        );
        assert_eq!(
            error_chain(&outer),
            "internal error: could not write the image record: dispatch failure: connection \
             reset by peer"
        );
        // A wrapper that already shows its source's text does not repeat it.
        let shown = layer("internal error: timed out", Some(layer("timed out", None)));
        assert_eq!(error_chain(&shown), "internal error: timed out");
        let internal = crate::ApiError::internal("dynamodb said no");
        assert_eq!(error_chain(&internal), "dynamodb said no");
    }
}

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
/// `SITEHOST_LOG_FORMAT=json` the Lambda format (JSON lines, EMF request lines). Colours
/// only on a terminal, and not with `NO_COLOR` set (no-color.org): a log file or pipe gets
/// plain text, without escape codes.
pub fn init_cli(settings: &LogSettings) {
    use std::io::IsTerminal;
    let colour = colours(
        std::io::stderr().is_terminal(),
        std::env::var_os("NO_COLOR").as_deref(),
    );
    let layer = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(colour);
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

/// Whether human-readable logs are coloured: on a terminal, unless `NO_COLOR` is set to
/// anything but the empty string.
fn colours(terminal: bool, no_color: Option<&std::ffi::OsStr>) -> bool {
    terminal && no_color.is_none_or(|value| value.is_empty())
}

#[cfg(test)]
mod tests {
    use super::colours;
    use std::ffi::OsStr;

    #[test]
    fn colours_only_on_a_terminal_without_no_color() {
        assert!(colours(true, None));
        assert!(colours(true, Some(OsStr::new(""))));
        assert!(!colours(true, Some(OsStr::new("1"))));
        assert!(!colours(false, None));
    }
}

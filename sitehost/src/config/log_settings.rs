//! How the process logs ([`LogSettings`]): read before the rest of the configuration,
//! because logging starts first.

use super::{var, ConfigError, ConfigResult};

/// The CloudWatch namespace of the request metrics; the template sets `sitehost/<stack>`.
pub const METRICS_NAMESPACE_VAR: &str = "SITEHOST_METRICS_NAMESPACE";
pub const DEFAULT_METRICS_NAMESPACE: &str = "sitehost";

/// How the process logs: `RUST_LOG`, `SITEHOST_LOG_FORMAT` and `SITEHOST_METRICS_NAMESPACE`.
/// Read apart from [`Config`](super::Config) and before it, because logging starts first: a bad value in
/// the rest of the configuration is then logged. A process whose log settings are bad logs
/// with the defaults, says so, and does not start.
#[derive(Debug, Clone)]
pub struct LogSettings {
    /// `RUST_LOG`: comma-separated `level` and `target=level` directives; `info` when unset.
    pub filter: tracing_subscriber::filter::Targets,
    /// `SITEHOST_LOG_FORMAT=json`: the command writes the functions' format (JSON lines,
    /// request lines with their metrics) instead of readable text. Functions always do.
    pub json: bool,
    /// `SITEHOST_METRICS_NAMESPACE`.
    pub metrics_namespace: String,
}

impl Default for LogSettings {
    fn default() -> Self {
        LogSettings {
            filter: tracing_subscriber::filter::Targets::new()
                .with_default(tracing_subscriber::filter::LevelFilter::INFO),
            json: false,
            metrics_namespace: DEFAULT_METRICS_NAMESPACE.to_string(),
        }
    }
}

impl LogSettings {
    pub fn from_env() -> ConfigResult<Self> {
        Self::from_values(
            var("RUST_LOG").as_deref(),
            var("SITEHOST_LOG_FORMAT").as_deref(),
            var(METRICS_NAMESPACE_VAR).as_deref(),
        )
    }

    /// The settings from the variables' values (`None`: unset or blank).
    pub fn from_values(
        rust_log: Option<&str>,
        log_format: Option<&str>,
        metrics_namespace: Option<&str>,
    ) -> ConfigResult<Self> {
        let defaults = LogSettings::default();
        let filter = match rust_log {
            None => defaults.filter,
            Some(directives) => directives.parse().map_err(|err| {
                ConfigError(format!(
                    "RUST_LOG must be comma-separated `level` or `target=level` directives \
                     (levels: off, error, warn, info, debug, trace), not '{directives}': {err}"
                ))
            })?,
        };
        let json = match log_format.map(str::trim) {
            None | Some("text") => false,
            Some("json") => true,
            Some(other) => {
                return Err(ConfigError(format!(
                    "SITEHOST_LOG_FORMAT must be 'text' or 'json', not '{other}'"
                )))
            }
        };
        Ok(LogSettings {
            filter,
            json,
            metrics_namespace: metrics_namespace
                .map(|namespace| namespace.trim().to_string())
                .unwrap_or(defaults.metrics_namespace),
        })
    }
}

#[cfg(test)]
mod tests {
    use tracing_subscriber::filter::LevelFilter;

    use super::*;

    #[test]
    fn log_settings_default_to_info_text_and_the_plain_namespace() {
        let settings = LogSettings::from_values(None, None, None).expect("defaults");
        assert_eq!(settings.filter.default_level(), Some(LevelFilter::INFO));
        assert!(!settings.json);
        assert_eq!(settings.metrics_namespace, "sitehost");
    }

    #[test]
    fn log_settings_read_filter_format_and_namespace() {
        let settings = LogSettings::from_values(
            Some("warn,sitehost::request=info"),
            Some(" json "),
            Some(" sitehost/prod "),
        )
        .expect("settings");
        assert_eq!(settings.filter.default_level(), Some(LevelFilter::WARN));
        assert!(settings
            .filter
            .would_enable("sitehost::request", &tracing::Level::INFO));
        assert!(!settings
            .filter
            .would_enable("sitehost::store", &tracing::Level::INFO));
        assert!(settings.json);
        assert_eq!(settings.metrics_namespace, "sitehost/prod");
        let text = LogSettings::from_values(None, Some("text"), None).expect("text");
        assert!(!text.json);
    }

    #[test]
    fn bad_log_settings_are_configuration_errors_naming_the_variable() {
        let err = LogSettings::from_values(Some("sitehost=loud"), None, None)
            .expect_err("an unknown level");
        assert!(err.to_string().starts_with("RUST_LOG must be"), "{err}");
        assert!(err.to_string().contains("'sitehost=loud'"), "{err}");
        let err = LogSettings::from_values(None, Some("jsno"), None).expect_err("a format");
        assert_eq!(
            err.to_string(),
            "SITEHOST_LOG_FORMAT must be 'text' or 'json', not 'jsno'"
        );
    }
}

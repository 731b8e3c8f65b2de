//! Settings from the environment, read once per process (a function's cold start, a
//! `sitehost` command): [`LogSettings::from_env`] first, then [`Config::from_env`]. They are
//! the only readers of `SITEHOST_*` variables (and `RUST_LOG`). Every variable is listed in
//! the README.

use std::path::PathBuf;
use std::time::Duration;

/// A setting that cannot be used: the process does not start. Never an API error.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(String);

/// The secret that proves a request came through our CloudFront distribution
/// (`SITEHOST_ORIGIN_VERIFY`). Only such requests may name the host and scheme the client
/// called in `X-Forwarded-Host`/`X-Forwarded-Proto`: anyone else could use them to have a
/// signature made for another host (another deployment sharing the key) accepted here.
#[derive(Clone, PartialEq)]
pub struct OriginSecret(String);

impl OriginSecret {
    /// `None` for an empty or blank value: no secret is configured.
    pub fn new(value: &str) -> Option<Self> {
        let value = value.trim();
        (!value.is_empty()).then(|| OriginSecret(value.to_string()))
    }

    /// The secret itself, for the one comparison that needs it (`auth::origin`).
    pub fn expose(&self) -> &str {
        &self.0
    }
}

/// Never printed, not even in a `Debug` dump of the configuration.
impl std::fmt::Debug for OriginSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OriginSecret(<redacted>)")
    }
}

pub type ConfigResult<T> = std::result::Result<T, ConfigError>;

/// The CloudWatch namespace of the request metrics; the template sets `sitehost/<stack>`.
pub const METRICS_NAMESPACE_VAR: &str = "SITEHOST_METRICS_NAMESPACE";
pub const DEFAULT_METRICS_NAMESPACE: &str = "sitehost";

/// How the process logs: `RUST_LOG`, `SITEHOST_LOG_FORMAT` and `SITEHOST_METRICS_NAMESPACE`.
/// Read apart from [`Config`] and before it, because logging starts first: a bad value in
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

/// Which record store to use.
#[derive(Debug, Clone, PartialEq)]
pub enum StoreKind {
    /// SQLite in a data directory (the default of `sitehost serve`).
    Embedded { data_dir: PathBuf },
    /// DynamoDB through the normal AWS configuration (`AWS_ENDPOINT_URL` works).
    DynamoDb { table: String },
}

/// What the process reading the configuration decides rather than the environment: its
/// defaults (a function defaults to DynamoDB and https, the `sitehost` command to the
/// embedded store and http) and the command line's choices, which win over variables.
#[derive(Debug, Clone)]
pub struct Defaults {
    /// `embedded` or `dynamodb`, when neither a choice nor `SITEHOST_STORE` says.
    pub store: &'static str,
    /// When `SITEHOST_DEFAULT_SCHEME` is unset.
    pub scheme: &'static str,
    /// `--store`, `--data-dir`, `--table`.
    pub store_choice: Option<String>,
    pub data_dir_choice: Option<PathBuf>,
    pub table_choice: Option<String>,
}

impl Defaults {
    /// A Lambda function.
    pub fn lambda() -> Self {
        Defaults {
            store: "dynamodb",
            scheme: "https",
            store_choice: None,
            data_dir_choice: None,
            table_choice: None,
        }
    }

    /// The `sitehost` command.
    pub fn command() -> Self {
        Defaults {
            store: "embedded",
            scheme: "http",
            ..Defaults::lambda()
        }
    }
}

#[derive(Debug, Clone)]
pub struct Config {
    pub store: StoreKind,
    /// Hosts (with port when not the default) partners may sign requests against besides
    /// the request's own `Host`/`X-Forwarded-Host`: the frontend host, a custom domain.
    pub public_hosts: Vec<String>,
    /// The scheme assumed when no trusted `X-Forwarded-Proto` header says otherwise.
    pub default_scheme: String,
    /// The secret our CloudFront sends in `X-Origin-Verify` (`SITEHOST_ORIGIN_VERIFY`): only
    /// requests carrying it may name the called host and scheme in `X-Forwarded-*`. `None`
    /// (`sitehost serve` by default): those headers are never trusted.
    pub origin_verify: Option<OriginSecret>,
    /// Largest request body accepted (413 beyond).
    pub max_body_bytes: usize,
    /// Ids handed out per DynamoDB counter update ([`DEFAULT_ID_BLOCK`]).
    pub id_block: u32,
    /// S3 bucket of upload files (DynamoDB deployments); the embedded store keeps files in
    /// its data directory.
    pub bucket: Option<String>,
    /// Largest decoded base64 upload (413 beyond): what a 6 MB Lambda request leaves.
    pub upload_max_bytes: usize,
    /// Per-key request budgets (429 beyond).
    pub budgets: RequestBudgets,
    /// Pixel and side limits, checked from the header before decoding.
    pub image_limits: ImageLimits,
    /// External URL fetching: size cap, timeouts, the test-only allowlist.
    pub fetch: FetchConfig,
    /// What `sitehost serve` allows a client (Lambda has API Gateway's).
    pub server: ServerLimits,
}

/// Size limits, checked against the header before any pixel is decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageLimits {
    /// Most pixels (width x height) an image may have.
    pub max_pixels: u64,
    /// Most pixels along either side.
    pub max_side: u32,
}

impl Default for ImageLimits {
    /// 50 megapixels and 16,384 pixels a side.
    fn default() -> Self {
        ImageLimits {
            max_pixels: 50_000_000,
            max_side: 16_384,
        }
    }
}

const ENV_ALLOW_HOSTS: &str = "SITEHOST_FETCH_ALLOW_HOSTS";
const ENV_FETCH_MAX_BYTES: &str = "SITEHOST_FETCH_MAX_BYTES";
/// Set by the Lambda runtime in every function's environment.
const ENV_LAMBDA_FUNCTION: &str = "AWS_LAMBDA_FUNCTION_NAME";
const DEFAULT_FETCH_MAX_BYTES: u64 = 25 * 1024 * 1024;

/// URL fetching: limits and the test-only allowlist.
#[derive(Debug, Clone)]
pub struct FetchConfig {
    /// `host` or `host:port` entries (lower case) exempt from the address check. For local
    /// testing only; empty in every deployed stage.
    pub allow_hosts: Vec<String>,
    /// Largest body accepted, in bytes.
    pub max_bytes: u64,
    /// Per connection attempt: DNS, TCP and TLS.
    pub connect_timeout: Duration,
    /// The whole fetch: every hop, including reading the body.
    pub total_timeout: Duration,
    pub max_redirects: usize,
}

impl Default for FetchConfig {
    fn default() -> Self {
        FetchConfig {
            allow_hosts: Vec::new(),
            max_bytes: DEFAULT_FETCH_MAX_BYTES,
            connect_timeout: Duration::from_secs(3),
            total_timeout: Duration::from_secs(15),
            max_redirects: 3,
        }
    }
}

impl FetchConfig {
    /// `SITEHOST_FETCH_ALLOW_HOSTS` (comma-separated, default empty) and
    /// `SITEHOST_FETCH_MAX_BYTES` (default 25 MiB). A malformed value is our own
    /// misconfiguration, so it fails the start rather than being ignored.
    pub fn from_values(allow_hosts: Option<&str>, max_bytes: Option<&str>) -> ConfigResult<Self> {
        let mut config = FetchConfig::default();
        if let Some(list) = allow_hosts {
            config.allow_hosts = parse_allow_hosts(list)?;
        }
        if let Some(raw) = max_bytes.map(str::trim).filter(|s| !s.is_empty()) {
            config.max_bytes = match raw.parse::<u64>() {
                Ok(n) if n > 0 => n,
                _ => {
                    return Err(ConfigError(format!(
                        "{ENV_FETCH_MAX_BYTES} must be a positive number of bytes, got {raw:?}"
                    )))
                }
            };
        }
        Ok(config)
    }

    /// The allowlist turns the address check off for its hosts; it exists for tests against
    /// local servers and must never reach a deployment: on Lambda (`lambda_function`, the
    /// value of `AWS_LAMBDA_FUNCTION_NAME`) a non-empty allowlist fails the cold start.
    pub fn refuse_allowlist_on_lambda(&self, lambda_function: Option<&str>) -> ConfigResult<()> {
        let Some(function) = lambda_function.filter(|name| !name.trim().is_empty()) else {
            return Ok(());
        };
        if self.allow_hosts.is_empty() {
            return Ok(());
        }
        tracing::error!(
            function,
            allow_hosts = ?self.allow_hosts,
            "{ENV_ALLOW_HOSTS} is set on Lambda; refusing to start (it disables the fetch address check and is for local testing only)"
        );
        Err(ConfigError(format!(
            "{ENV_ALLOW_HOSTS} is for local testing only and must not be set on Lambda \
             (function {function}); remove it from the function's environment"
        )))
    }
}

fn parse_allow_hosts(list: &str) -> ConfigResult<Vec<String>> {
    let mut hosts = Vec::new();
    for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        // A URL here would silently never match; say so at the start instead.
        if entry.contains('/') || entry.contains('@') {
            return Err(ConfigError(format!(
                "{ENV_ALLOW_HOSTS} entries are host or host:port, got {entry:?}"
            )));
        }
        hosts.push(entry.to_ascii_lowercase());
    }
    Ok(hosts)
}

/// How much a client may cost `sitehost serve`: how long it may take to send a request,
/// and how many image uploads (each decodes up to `SITEHOST_MAX_PIXELS` pixels) run at once.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerLimits {
    /// From accepting a connection (or finishing the previous request on it) to the end
    /// of the request head; a slower client is disconnected.
    pub header_timeout: Duration,
    /// From the end of the head to the end of the body; a slower client gets 408.
    pub body_timeout: Duration,
    /// Image uploads processed at once; more wait for a slot.
    pub max_uploads: usize,
    /// How long an upload waits for a slot before it gets 503 with `Retry-After`.
    pub upload_wait: Duration,
    /// External URL fetches of uploads at once; one account may hold at most a quarter of
    /// them (at least one), so a slow host named by one key cannot stall the others.
    pub max_fetches: usize,
    /// Open connections at most; past it a new one is answered 503 and closed at once.
    /// Below the file descriptor limit, so the server never runs out of them.
    pub max_connections: usize,
    /// How long a write to a client may make no progress before the connection is dropped
    /// (a client that stops reading its answer holds nothing for longer).
    pub write_timeout: Duration,
}

/// Most permits a tokio semaphore holds.
const MAX_PERMITS: usize = usize::MAX >> 3;

impl Default for ServerLimits {
    fn default() -> Self {
        ServerLimits {
            header_timeout: Duration::from_secs(30),
            body_timeout: Duration::from_secs(60),
            // The pipeline is CPU-bound: more at once than cores only adds memory.
            max_uploads: std::thread::available_parallelism().map_or(2, usize::from),
            upload_wait: Duration::from_secs(5),
            max_fetches: 16,
            max_connections: default_max_connections(open_files_limit()),
            write_timeout: Duration::from_secs(30),
        }
    }
}

/// Half the file descriptor limit, at most 512: the rest is left for files, the database
/// and outbound fetches. With no limit known, 512.
fn default_max_connections(open_files: Option<u64>) -> usize {
    let half = open_files.map_or(u64::MAX, |limit| limit / 2);
    usize::try_from(half.clamp(16, 512)).unwrap_or(512)
}

/// This process's soft limit of open files (`ulimit -n`), where the system tells it.
fn open_files_limit() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line["Max open files".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

impl ServerLimits {
    fn from_env() -> ConfigResult<Self> {
        let defaults = ServerLimits::default();
        let seconds = |name, default: Duration| {
            positive_setting(name, default.as_secs()).map(Duration::from_secs)
        };
        let count = |name, default: usize| {
            positive_setting(name, default as u64)
                .map(|n| usize::try_from(n).unwrap_or(usize::MAX).min(MAX_PERMITS))
        };
        Ok(ServerLimits {
            header_timeout: seconds("SITEHOST_HEADER_TIMEOUT_SECS", defaults.header_timeout)?,
            body_timeout: seconds("SITEHOST_BODY_TIMEOUT_SECS", defaults.body_timeout)?,
            max_uploads: usize::try_from(positive_setting(
                "SITEHOST_MAX_UPLOADS",
                defaults.max_uploads as u64,
            )?)
            .unwrap_or(usize::MAX)
            .min(MAX_PERMITS),
            upload_wait: seconds("SITEHOST_UPLOAD_WAIT_SECS", defaults.upload_wait)?,
            max_fetches: count("SITEHOST_MAX_FETCHES", defaults.max_fetches)?,
            max_connections: count("SITEHOST_MAX_CONNECTIONS", defaults.max_connections)?,
            write_timeout: seconds("SITEHOST_WRITE_TIMEOUT_SECS", defaults.write_timeout)?,
        })
    }
}

/// A positive whole number from the environment, or `default` when unset.
fn positive_setting(name: &str, default: u64) -> ConfigResult<u64> {
    match var(name) {
        None => Ok(default),
        Some(raw) => match raw.trim().parse::<u64>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(ConfigError(format!(
                "{name} must be a positive whole number, not {raw:?}"
            ))),
        },
    }
}

/// 4560 KiB: its base64 is 6 MiB less 64 KiB, which leaves the rest of a Lambda event
/// (headers, request context, JSON) room under Lambda's 6 MB payload limit
/// (`a_maximum_size_upload_event_fits_the_lambda_payload_limit` in tests/lambda_events.rs).
pub const DEFAULT_UPLOAD_MAX_BYTES: usize = 4_669_440;

/// Business and image ids one instance reserves per update of the id sequence item. Every
/// create of every account draws on the one sequence item of its kind, and one item takes
/// at most 1,000 writes a second: with blocks of 20, 1,000 creates a second write it 50
/// times. An instance that stops leaves the rest of its block unused (gaps in the ids).
pub const DEFAULT_ID_BLOCK: u32 = 20;

/// How many requests one key may make per minute (fixed, clock-aligned windows); 0 means
/// unlimited. Over a budget a request is answered 429 and does nothing else.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestBudgets {
    /// Every authenticated request (`SITEHOST_REQUESTS_PER_MINUTE`).
    pub requests_per_minute: u64,
    /// Image uploads, which count as requests too (`SITEHOST_UPLOADS_PER_MINUTE`).
    pub uploads_per_minute: u64,
}

/// 20 a second: far above what a partner's sync job needs (a list page holds up to 1,000
/// businesses, so a full walk of 1.2 million businesses fits in one minute), about what
/// one account's creates can sustain on DynamoDB (its counters serialize them), and it caps
/// what one leaked key can spend at 1,200 requests a minute.
pub const DEFAULT_REQUESTS_PER_MINUTE: u64 = 1_200;
/// One a second: each upload decodes and re-encodes an image (hundreds of milliseconds of
/// CPU, up to 25 MiB fetched) and writes six files.
pub const DEFAULT_UPLOADS_PER_MINUTE: u64 = 60;

impl Default for RequestBudgets {
    fn default() -> Self {
        RequestBudgets {
            requests_per_minute: DEFAULT_REQUESTS_PER_MINUTE,
            uploads_per_minute: DEFAULT_UPLOADS_PER_MINUTE,
        }
    }
}

impl RequestBudgets {
    fn from_env() -> ConfigResult<Self> {
        Ok(RequestBudgets {
            requests_per_minute: parse_number(
                "SITEHOST_REQUESTS_PER_MINUTE",
                DEFAULT_REQUESTS_PER_MINUTE,
            )?,
            uploads_per_minute: parse_number(
                "SITEHOST_UPLOADS_PER_MINUTE",
                DEFAULT_UPLOADS_PER_MINUTE,
            )?,
        })
    }
}

fn image_limits_from_env() -> ConfigResult<ImageLimits> {
    let defaults = ImageLimits::default();
    Ok(ImageLimits {
        max_pixels: parse_number("SITEHOST_MAX_PIXELS", defaults.max_pixels)?,
        max_side: parse_number("SITEHOST_MAX_SIDE", defaults.max_side)?,
    })
}

pub const DEFAULT_MAX_BODY_BYTES: usize = 7 * 1024 * 1024;

/// A size limit as every refusal states it: the exact bytes, then the size a file manager
/// or a phone shows (decimal units, rounded down so a file shown at that size is within
/// it): `7,340,032 bytes (7.3 MB)`, `65,536 bytes (65.5 KB)`.
pub fn byte_size(bytes: u64) -> String {
    let tenths = |unit: u64| {
        let tenths = bytes / (unit / 10);
        match tenths % 10 {
            0 => (tenths / 10).to_string(),
            d => format!("{}.{d}", tenths / 10),
        }
    };
    let shown = if bytes >= 1_000_000 {
        format!(" ({} MB)", tenths(1_000_000))
    } else if bytes >= 1_000 {
        format!(" ({} KB)", tenths(1_000))
    } else {
        String::new()
    };
    format!("{} bytes{shown}", thousands(bytes))
}

/// `4669440` as `4,669,440`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// What a partner does with an image over the base64 limit, said by every refusal of one.
pub fn larger_images_by_url(fetch_max_bytes: u64) -> String {
    format!(
        "send a larger image by external_url, which takes files up to {}",
        byte_size(fetch_max_bytes)
    )
}

fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

fn parse_number<T: std::str::FromStr>(name: &str, default: T) -> ConfigResult<T> {
    match var(name) {
        None => Ok(default),
        Some(v) => v
            .trim()
            .parse()
            .map_err(|_| ConfigError(format!("{name} must be a number, not '{v}'"))),
    }
}

impl Config {
    /// Reads every `SITEHOST_*` variable (and notes whether this is Lambda), once.
    pub fn from_env(defaults: Defaults) -> ConfigResult<Self> {
        let store_name = defaults
            .store_choice
            .or_else(|| var("SITEHOST_STORE"))
            .unwrap_or_else(|| defaults.store.to_string());
        let store = match store_name.as_str() {
            "dynamodb" => StoreKind::DynamoDb {
                table: defaults
                    .table_choice
                    .or_else(|| var("SITEHOST_TABLE"))
                    .ok_or_else(|| {
                        ConfigError(
                            "the dynamodb store needs a table (SITEHOST_TABLE or --table)".into(),
                        )
                    })?,
            },
            "embedded" => StoreKind::Embedded {
                data_dir: defaults
                    .data_dir_choice
                    .or_else(|| var("SITEHOST_DATA_DIR").map(PathBuf::from))
                    .unwrap_or_else(|| PathBuf::from(".sitehost")),
            },
            other => {
                return Err(ConfigError(format!(
                    "the store (SITEHOST_STORE or --store) must be 'embedded' or 'dynamodb', not '{other}'"
                )))
            }
        };
        let fetch = FetchConfig::from_values(
            var(ENV_ALLOW_HOSTS).as_deref(),
            var(ENV_FETCH_MAX_BYTES).as_deref(),
        )?;
        fetch.refuse_allowlist_on_lambda(var(ENV_LAMBDA_FUNCTION).as_deref())?;
        Ok(Config {
            store,
            public_hosts: var("SITEHOST_PUBLIC_HOSTS")
                .map(|v| {
                    v.split(',')
                        .map(|h| h.trim().to_ascii_lowercase())
                        .filter(|h| !h.is_empty())
                        .collect()
                })
                .unwrap_or_default(),
            default_scheme: var("SITEHOST_DEFAULT_SCHEME")
                .unwrap_or_else(|| defaults.scheme.to_string()),
            origin_verify: var("SITEHOST_ORIGIN_VERIFY").and_then(|v| OriginSecret::new(&v)),
            max_body_bytes: parse_number("SITEHOST_MAX_BODY_BYTES", DEFAULT_MAX_BODY_BYTES)?,
            id_block: parse_number("SITEHOST_ID_BLOCK", DEFAULT_ID_BLOCK)?,
            bucket: var("SITEHOST_BUCKET"),
            upload_max_bytes: parse_number("SITEHOST_UPLOAD_MAX_BYTES", DEFAULT_UPLOAD_MAX_BYTES)?,
            budgets: RequestBudgets::from_env()?,
            image_limits: image_limits_from_env()?,
            fetch,
            server: ServerLimits::from_env()?,
        })
    }

    /// Settings for tests and `sitehost serve` defaults.
    pub fn embedded(data_dir: PathBuf) -> Self {
        Config {
            store: StoreKind::Embedded { data_dir },
            public_hosts: Vec::new(),
            default_scheme: "http".into(),
            origin_verify: None,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            id_block: DEFAULT_ID_BLOCK,
            bucket: None,
            upload_max_bytes: DEFAULT_UPLOAD_MAX_BYTES,
            budgets: RequestBudgets::default(),
            image_limits: ImageLimits::default(),
            fetch: FetchConfig::default(),
            server: ServerLimits::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use tracing_subscriber::filter::LevelFilter;

    use super::*;

    #[test]
    fn sizes_are_stated_in_bytes_and_rounded_down_decimal_units() {
        assert_eq!(byte_size(7_340_032), "7,340,032 bytes (7.3 MB)");
        assert_eq!(byte_size(4_669_440), "4,669,440 bytes (4.6 MB)");
        assert_eq!(byte_size(26_214_400), "26,214,400 bytes (26.2 MB)");
        assert_eq!(byte_size(5_000_000), "5,000,000 bytes (5 MB)");
        assert_eq!(byte_size(65_536), "65,536 bytes (65.5 KB)");
        assert_eq!(byte_size(999), "999 bytes");
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(100), "100");
        assert_eq!(thousands(1_000), "1,000");
        assert_eq!(thousands(u64::MAX), "18,446,744,073,709,551,615");
    }

    #[test]
    fn serve_keeps_half_its_file_descriptors_for_other_things() {
        assert_eq!(default_max_connections(Some(1024)), 512);
        assert_eq!(default_max_connections(Some(256)), 128);
        assert_eq!(default_max_connections(Some(1_048_576)), 512);
        assert_eq!(default_max_connections(Some(8)), 16);
        assert_eq!(default_max_connections(None), 512);
    }

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

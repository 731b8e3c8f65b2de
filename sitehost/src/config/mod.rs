//! Settings from the environment, read once per process (a function's cold start, a
//! `sitehost` command): [`LogSettings::from_env`] first, then [`Config::from_env`]. They are
//! the only readers of `SITEHOST_*` variables (and `RUST_LOG`). Every variable is listed in
//! docs/configuration.md.

use std::path::PathBuf;

mod limits;
mod log_settings;
mod sizes;

// The submodules are private: these are the one path of their items, `config::X`.
pub use limits::{
    FetchConfig, ImageLimits, RequestBudgets, ServerLimits, DEFAULT_REQUESTS_PER_MINUTE,
    DEFAULT_UPLOADS_PER_MINUTE, MAX_ANIMATED_SIBLING_PIXELS, MAX_ANIMATION_PIXELS, MAX_FRAMES,
    STORED_BYTES_PER_REQUEST, WRITE_UNITS_PER_REQUEST,
};
pub use log_settings::{LogSettings, DEFAULT_METRICS_NAMESPACE, METRICS_NAMESPACE_VAR};
pub use sizes::{byte_size, larger_images_by_url, thousands};

/// A setting that cannot be used: the process does not start. Never an API error.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(String);

/// The secret that proves a request came through our CloudFront distribution
/// (`SITEHOST_ORIGIN_VERIFY`). When it is configured, a request without it is refused (403)
/// before any store call; only requests carrying it may name the host and scheme the client
/// called in `X-Forwarded-Host`/`X-Forwarded-Proto`. During a rotation the secret being
/// replaced (`SITEHOST_ORIGIN_VERIFY_PREVIOUS`) is accepted too, so requests CloudFront
/// still sends with it are served while the distribution deploys the new one.
#[derive(Clone, PartialEq)]
pub struct OriginSecret {
    current: String,
    previous: Option<String>,
}

impl OriginSecret {
    /// `None` for an empty or blank value: no secret is configured.
    pub fn new(value: &str) -> Option<Self> {
        let value = value.trim();
        (!value.is_empty()).then(|| OriginSecret {
            current: value.to_string(),
            previous: None,
        })
    }

    /// Also accepts `previous` (a blank value is none): the secret a rotation replaces.
    pub fn with_previous(self, previous: Option<&str>) -> Self {
        let previous = previous
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(str::to_string);
        OriginSecret { previous, ..self }
    }

    /// The values accepted, the current one first, for the one comparison that needs them
    /// (`auth::origin`).
    pub fn accepted(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.current.as_str()).chain(self.previous.as_deref())
    }
}

/// Never printed, not even in a `Debug` dump of the configuration.
impl std::fmt::Debug for OriginSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OriginSecret(<redacted>)")
    }
}

pub type ConfigResult<T> = std::result::Result<T, ConfigError>;

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
    /// The secret our CloudFront sends in `X-Origin-Verify` (`SITEHOST_ORIGIN_VERIFY`, and
    /// `SITEHOST_ORIGIN_VERIFY_PREVIOUS` during a rotation): requests without it are refused
    /// (403), and only requests carrying it may name the called host and scheme in
    /// `X-Forwarded-*`. `None` (`sitehost serve` by default): nothing is refused for the
    /// header, and those headers are never trusted.
    pub origin_verify: Option<OriginSecret>,
    /// Largest request body accepted (413 beyond).
    pub max_body_bytes: usize,
    /// Ids handed out per DynamoDB counter update ([`DEFAULT_ID_BLOCK`]).
    pub id_block: u32,
    /// S3 bucket of upload files (DynamoDB deployments); the embedded store keeps files in
    /// its data directory.
    pub bucket: Option<String>,
    /// S3 bucket staged uploads are posted to (`SITEHOST_STAGING_BUCKET`); the embedded
    /// store keeps them in its data directory.
    pub staging_bucket: Option<String>,
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

/// 4560 KiB: its base64 is 6 MiB less 64 KiB, which leaves the rest of a Lambda event
/// (headers, request context, JSON) room under Lambda's 6 MB payload limit
/// (`a_maximum_size_upload_event_fits_the_lambda_payload_limit` in
/// tests/integration/lambda_events/payload_limits.rs).
pub const DEFAULT_UPLOAD_MAX_BYTES: usize = 4_669_440;

/// Business and image ids one instance reserves per update of the id sequence item. Every
/// create of every account draws on the one sequence item of its kind, and one item takes
/// at most 1,000 writes a second: with blocks of 20, 1,000 creates a second write it 50
/// times. An instance that stops leaves the rest of its block unused (gaps in the ids).
pub const DEFAULT_ID_BLOCK: u32 = 20;

pub const DEFAULT_MAX_BODY_BYTES: usize = 7 * 1024 * 1024;

/// `SITEHOST_ORIGIN_VERIFY`, with `SITEHOST_ORIGIN_VERIFY_PREVIOUS` during a rotation. A
/// previous secret without a current one is refused: it would turn the check on with only
/// the secret being retired.
fn origin_secret() -> ConfigResult<Option<OriginSecret>> {
    let previous = var("SITEHOST_ORIGIN_VERIFY_PREVIOUS");
    match var("SITEHOST_ORIGIN_VERIFY").and_then(|v| OriginSecret::new(&v)) {
        Some(secret) => Ok(Some(secret.with_previous(previous.as_deref()))),
        None if previous.is_some() => Err(ConfigError(
            "SITEHOST_ORIGIN_VERIFY_PREVIOUS is set but SITEHOST_ORIGIN_VERIFY is not: the \
             previous secret is accepted only beside the current one"
                .into(),
        )),
        None => Ok(None),
    }
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
        let fetch = FetchConfig::from_env()?;
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
            origin_verify: origin_secret()?,
            max_body_bytes: parse_number("SITEHOST_MAX_BODY_BYTES", DEFAULT_MAX_BODY_BYTES)?,
            id_block: parse_number("SITEHOST_ID_BLOCK", DEFAULT_ID_BLOCK)?,
            bucket: var("SITEHOST_BUCKET"),
            staging_bucket: var("SITEHOST_STAGING_BUCKET"),
            upload_max_bytes: parse_number("SITEHOST_UPLOAD_MAX_BYTES", DEFAULT_UPLOAD_MAX_BYTES)?,
            budgets: RequestBudgets::from_env()?,
            image_limits: ImageLimits::from_env()?,
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
            staging_bucket: None,
            upload_max_bytes: DEFAULT_UPLOAD_MAX_BYTES,
            budgets: RequestBudgets::default(),
            image_limits: ImageLimits::default(),
            fetch: FetchConfig::default(),
            server: ServerLimits::default(),
        }
    }
}

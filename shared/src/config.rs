//! Settings from the environment, read once per cold start. Every variable is listed in the
//! README.

use std::path::PathBuf;

use crate::error::{ApiError, Result};

/// Which record store to use.
#[derive(Debug, Clone, PartialEq)]
pub enum StoreKind {
    /// SQLite in a data directory (the default of `sitehost serve`).
    Embedded { data_dir: PathBuf },
    /// DynamoDB through the normal AWS configuration (`AWS_ENDPOINT_URL` works).
    DynamoDb { table: String },
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
    pub origin_verify: Option<crate::auth::OriginSecret>,
    /// Largest request body accepted (413 beyond).
    pub max_body_bytes: usize,
    /// Ids handed out per DynamoDB counter update.
    pub id_block: u32,
    /// S3 bucket of upload files (DynamoDB deployments); the embedded store keeps files in
    /// its data directory.
    pub bucket: Option<String>,
    /// Largest decoded base64 upload (413 beyond): what a 6 MB Lambda request leaves.
    pub upload_max_bytes: usize,
    /// Per-key request budgets (429 beyond).
    pub budgets: RequestBudgets,
    /// Pixel and side limits, checked from the header before decoding.
    #[cfg(feature = "images")]
    pub image_limits: crate::image::pipeline::Limits,
    /// External URL fetching: size cap, timeouts, the test-only allowlist.
    #[cfg(feature = "images")]
    pub fetch: crate::image::fetch::FetchConfig,
}

/// 4560 KiB: its base64 is 6 MiB less 64 KiB, which leaves the rest of a Lambda event
/// (headers, request context, JSON) room under Lambda's 6 MB payload limit
/// (`a_maximum_size_upload_event_fits_the_lambda_payload_limit` in tests/lambda_events.rs).
pub const DEFAULT_UPLOAD_MAX_BYTES: usize = 4_669_440;

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
    fn from_env() -> Result<Self> {
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

#[cfg(feature = "images")]
fn image_limits_from_env() -> Result<crate::image::pipeline::Limits> {
    let defaults = crate::image::pipeline::Limits::default();
    Ok(crate::image::pipeline::Limits {
        max_pixels: parse_number("SITEHOST_MAX_PIXELS", defaults.max_pixels)?,
        max_side: parse_number("SITEHOST_MAX_SIDE", defaults.max_side)?,
    })
}

pub const DEFAULT_MAX_BODY_BYTES: usize = 7 * 1024 * 1024;

fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

fn parse_number<T: std::str::FromStr>(name: &str, default: T) -> Result<T> {
    match var(name) {
        None => Ok(default),
        Some(v) => v
            .trim()
            .parse()
            .map_err(|_| ApiError::internal(format!("{name} must be a number, not '{v}'"))),
    }
}

impl Config {
    /// Reads `SITEHOST_*` variables. `default_store` (`embedded` or `dynamodb`) applies when
    /// `SITEHOST_STORE` is unset.
    pub fn from_env(default_store: &str) -> Result<Self> {
        let store = match var("SITEHOST_STORE").as_deref().unwrap_or(default_store) {
            "dynamodb" => StoreKind::DynamoDb {
                table: var("SITEHOST_TABLE").ok_or_else(|| {
                    ApiError::internal("SITEHOST_STORE=dynamodb needs SITEHOST_TABLE")
                })?,
            },
            "embedded" => StoreKind::Embedded {
                data_dir: var("SITEHOST_DATA_DIR")
                    .map(PathBuf::from)
                    .unwrap_or_else(|| PathBuf::from(".sitehost")),
            },
            other => {
                return Err(ApiError::internal(format!(
                    "SITEHOST_STORE must be 'embedded' or 'dynamodb', not '{other}'"
                )))
            }
        };
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
            default_scheme: var("SITEHOST_DEFAULT_SCHEME").unwrap_or_else(|| "https".into()),
            origin_verify: var("SITEHOST_ORIGIN_VERIFY")
                .and_then(|v| crate::auth::OriginSecret::new(&v)),
            max_body_bytes: parse_number("SITEHOST_MAX_BODY_BYTES", DEFAULT_MAX_BODY_BYTES)?,
            id_block: parse_number("SITEHOST_ID_BLOCK", 1)?,
            bucket: var("SITEHOST_BUCKET"),
            upload_max_bytes: parse_number("SITEHOST_UPLOAD_MAX_BYTES", DEFAULT_UPLOAD_MAX_BYTES)?,
            budgets: RequestBudgets::from_env()?,
            #[cfg(feature = "images")]
            image_limits: image_limits_from_env()?,
            #[cfg(feature = "images")]
            fetch: crate::image::fetch::FetchConfig::from_env()?,
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
            id_block: 1,
            bucket: None,
            upload_max_bytes: DEFAULT_UPLOAD_MAX_BYTES,
            budgets: RequestBudgets::default(),
            #[cfg(feature = "images")]
            image_limits: crate::image::pipeline::Limits::default(),
            #[cfg(feature = "images")]
            fetch: crate::image::fetch::FetchConfig::default(),
        }
    }
}

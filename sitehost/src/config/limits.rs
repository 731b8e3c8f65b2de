//! The limits a deployment sets: image sizes, URL fetches, what `sitehost serve` allows a
//! client, and the per-key request budgets; each with its defaults and its variables.

use std::time::Duration;

use super::{parse_number, var, ConfigError, ConfigResult};

/// Size limits, checked against the header before any pixel is decoded, and what an upload
/// makes besides its variants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageLimits {
    /// Most pixels (width x height) an image may have.
    pub max_pixels: u64,
    /// Most pixels along either side.
    pub max_side: u32,
    /// Most frames an animated GIF or WebP may have ([`MAX_FRAMES`]).
    pub max_frames: u32,
    /// Most pixels an animation may have in all its frames together: its canvas (width x
    /// height) times its frame count ([`MAX_ANIMATION_PIXELS`]).
    pub max_animation_pixels: u64,
    /// Whether an upload makes the WebP siblings of `image_record::WEBP_SIBLINGS_AT_UPLOAD`:
    /// always, but for a measurement of what they cost (`sitehost serve` and `sitehost
    /// variants` with SITEHOST_BENCH_NO_WEBP_SIBLINGS=1, docs/image-pipeline-bench.md).
    pub webp_siblings_at_upload: bool,
}

/// Most frames of an animation. Each frame costs a fixed overhead in every variant and
/// sibling encoder (a palette, a frame header, libwebp's per-frame analysis) however few
/// pixels it has, so a file of many tiny frames is bounded here rather than by its
/// pixels (docs/budgets.md). Real animations have tens to a few hundred frames; image
/// services cut them at 100 to 500.
pub const MAX_FRAMES: u32 = 1_000;

/// Most pixels of an animation, every frame counted at its canvas's size: each frame is
/// composited on the whole canvas, resized and encoded at every variant size, so the work
/// of an upload grows with canvas x frames. As many as a still image may have
/// (`max_pixels`' default); an animation costs about 0.1 s of CPU per megapixel of frames
/// (release, x86_64: docs/budgets.md), a still image a few milliseconds.
pub const MAX_ANIMATION_PIXELS: u64 = 50_000_000;

/// Most pixels, in all its frames, of an animated variant whose WebP sibling is made on
/// its first request (`image-sibling`, one vCPU, 10 s timeout): libwebp's animation
/// encoder takes about 0.1 s per megapixel of frames on one core (docs/budgets.md), so
/// this keeps the first request within a few seconds. A larger animated variant is served
/// in its own format (GIF) to every viewer.
pub const MAX_ANIMATED_SIBLING_PIXELS: u64 = 25_000_000;

impl Default for ImageLimits {
    /// 50 megapixels and 16,384 pixels a side; animations [`MAX_FRAMES`] frames and
    /// [`MAX_ANIMATION_PIXELS`] pixels in all.
    fn default() -> Self {
        ImageLimits {
            max_pixels: 50_000_000,
            max_side: 16_384,
            max_frames: MAX_FRAMES,
            max_animation_pixels: MAX_ANIMATION_PIXELS,
            webp_siblings_at_upload: true,
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
    /// `SITEHOST_FETCH_ALLOW_HOSTS` and `SITEHOST_FETCH_MAX_BYTES` ([`Self::from_values`]),
    /// refused on Lambda ([`Self::refuse_allowlist_on_lambda`]).
    pub(super) fn from_env() -> ConfigResult<Self> {
        let fetch = FetchConfig::from_values(
            var(ENV_ALLOW_HOSTS).as_deref(),
            var(ENV_FETCH_MAX_BYTES).as_deref(),
        )?;
        fetch.refuse_allowlist_on_lambda(var(ENV_LAMBDA_FUNCTION).as_deref())?;
        Ok(fetch)
    }

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
    /// Open connections at most; at it a new one evicts the one waiting longest for a
    /// request head, or is answered 503 and closed at once when all are mid-request.
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
    pub(super) fn from_env() -> ConfigResult<Self> {
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
/// CPU, up to 25 MiB fetched) and writes its files: the original, the variants and their
/// siblings made at upload.
pub const DEFAULT_UPLOADS_PER_MINUTE: u64 = 60;

/// A write that stores a business's services and locations costs one request of its key's
/// budget per started 4 KB of them (the request itself pays for the first): a maximal
/// business (about 250 KB) costs 62. DynamoDB charges a transactional write 2 write units
/// per started KB, so this keeps a key's write units within a fixed multiple of its
/// request budget whatever it stores (docs/budgets.md).
pub const STORED_BYTES_PER_REQUEST: u64 = 4_096;

/// A write whose transaction writes many list entries (a site: up to 100 items, most of
/// them with an index entry) costs one request of its key's budget per started 100
/// DynamoDB write units it may use (`store::sites::site_write_units`, an upper bound; the
/// request itself pays for the first 100). Under the write units one request of a business
/// create may buy (docs/budgets.md), so that bound holds for sites too.
pub const WRITE_UNITS_PER_REQUEST: u64 = 100;

impl Default for RequestBudgets {
    fn default() -> Self {
        RequestBudgets {
            requests_per_minute: DEFAULT_REQUESTS_PER_MINUTE,
            uploads_per_minute: DEFAULT_UPLOADS_PER_MINUTE,
        }
    }
}

impl RequestBudgets {
    pub(super) fn from_env() -> ConfigResult<Self> {
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

impl ImageLimits {
    pub(super) fn from_env() -> ConfigResult<Self> {
        let defaults = ImageLimits::default();
        Ok(ImageLimits {
            max_pixels: parse_number("SITEHOST_MAX_PIXELS", defaults.max_pixels)?,
            max_side: parse_number("SITEHOST_MAX_SIDE", defaults.max_side)?,
            // Fixed, like the JPEG scan and segment limits: they bound the work per pixel
            // budget, which SITEHOST_MAX_PIXELS sets.
            ..defaults
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serve_keeps_half_its_file_descriptors_for_other_things() {
        assert_eq!(default_max_connections(Some(1024)), 512);
        assert_eq!(default_max_connections(Some(256)), 128);
        assert_eq!(default_max_connections(Some(1_048_576)), 512);
        assert_eq!(default_max_connections(Some(8)), 16);
        assert_eq!(default_max_connections(None), 512);
    }
}

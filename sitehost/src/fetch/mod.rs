//! Downloads a partner's `external_url` without letting it reach anything but the public
//! internet (SSRF protection), within a size cap and a time budget.
//!
//! How the address check cannot be bypassed:
//! - Literal IP hosts (any form the URL parser normalises, e.g. `0x7f.1`, `2130706433`)
//!   are checked before the request; reqwest connects to a literal without resolving it.
//! - Names are resolved by [`VettingResolver`], the only resolver of the strict client: it
//!   looks the name up once, refuses if ANY address is non-public, and hands exactly
//!   those vetted addresses to the connector. There is no second lookup, so DNS rebinding
//!   between check and connect is impossible; TLS SNI and `Host` stay the hostname.
//! - Redirects are followed by hand (reqwest's policy is `none`), so every hop goes
//!   through the same scheme, allowlist and address checks.
//! - No proxy is used (a proxy would resolve the name itself).
//! - Only ports 80 and 443: a public host's other ports are its administration and
//!   internal services (SSH banners, Redis, metrics), not where images are served.

mod ip;
mod vetting_resolver;

use std::fmt;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use anyhow::Context;
use bytes::{Bytes, BytesMut};
use reqwest::header::{CONTENT_TYPE, LOCATION};
use reqwest::{Client, StatusCode, Url};
use tracing::{info, warn};

use crate::error::{ApiError, Result};

pub use ip::check_ip;
use vetting_resolver::{ResolveRefusal, VettingResolver};

/// The request field every client-facing message is attached to.
const FIELD: &str = "external_url";
/// The ports a non-allowlisted URL (and every redirect) may name, explicitly or by scheme.
pub const ALLOWED_PORTS: [u16; 2] = [80, 443];

use crate::config::FetchConfig;

impl FetchConfig {
    /// Whether `host` (as `Url::host_str` gives it) on `port` is exempt from the check.
    fn allows(&self, host: &str, port: u16) -> bool {
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        let with_port = format!("{host}:{port}");
        self.allow_hosts
            .iter()
            .any(|entry| entry == host || entry == bare || *entry == with_port)
    }
}

/// A downloaded body. The pipeline checks that it is an image.
#[derive(Debug, Clone)]
pub struct Fetched {
    pub bytes: Bytes,
    /// The URL after redirects.
    pub final_url: String,
    pub content_type: Option<String>,
}

/// Holds the HTTP clients; build once per cold start and share.
pub struct Fetcher {
    config: FetchConfig,
    /// Every non-allowlisted hop: names resolve through [`VettingResolver`].
    strict: Client,
    /// Allowlisted hops only (system resolver, no check). Built only when the allowlist
    /// is non-empty, so deployed stages have no unchecked client at all. Two clients
    /// rather than an exemption inside the resolver because the allowlist may name a
    /// port and a resolver only sees the host name.
    exempt: Option<Client>,
}

impl fmt::Debug for Fetcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Fetcher")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Fetcher {
    pub fn new(config: FetchConfig) -> Result<Fetcher> {
        let strict = client_builder(&config)
            .dns_resolver(VettingResolver)
            .build()
            .context("building the fetch client")?;
        let exempt = if config.allow_hosts.is_empty() {
            None
        } else {
            warn!(allow_hosts = ?config.allow_hosts, "fetch address check disabled for allowlisted hosts (local testing only)");
            Some(
                client_builder(&config)
                    .build()
                    .context("building the fetch client (allowlisted hosts)")?,
            )
        };
        Ok(Fetcher {
            config,
            strict,
            exempt,
        })
    }

    pub fn config(&self) -> &FetchConfig {
        &self.config
    }

    /// Downloads `url`, following at most `max_redirects` redirects, all within
    /// `total_timeout`. Every refusal is a 400 on `external_url`, except an oversized
    /// body (413).
    pub async fn fetch(&self, url: &str) -> Result<Fetched> {
        let started = Instant::now();
        match tokio::time::timeout(self.config.total_timeout, self.fetch_hops(url)).await {
            Ok(result) => result,
            Err(_) => {
                warn!(
                    elapsed_ms = elapsed_ms(started),
                    "external_url fetch timed out"
                );
                Err(timed_out(self.config.total_timeout))
            }
        }
    }

    async fn fetch_hops(&self, url: &str) -> Result<Fetched> {
        let started = Instant::now();
        let mut current = parse_url(url)?;
        // One request per hop: the original plus `max_redirects` redirects.
        for hop in 0..=self.config.max_redirects {
            let client = self.client_for(&current)?;
            let response = client
                .get(current.clone())
                .send()
                .await
                .map_err(|e| self.send_error(e, &current))?;
            let status = response.status();
            if is_followed_redirect(status) {
                let next = redirect_target(&current, &response)?;
                info!(hop, status = status.as_u16(), from = %origin(&current), to = %origin(&next), "external_url redirected");
                current = next;
                continue;
            }
            if !status.is_success() {
                warn!(status = status.as_u16(), host = %origin(&current), "external_url answered non-2xx");
                return Err(ApiError::field(
                    FIELD,
                    format!("The URL answered with HTTP status {}.", status_text(status)),
                ));
            }
            let fetched = self.read_body(response, &current).await?;
            info!(
                host = %origin(&current),
                bytes = fetched.bytes.len(),
                redirects = hop,
                elapsed_ms = elapsed_ms(started),
                "external_url fetched"
            );
            return Ok(fetched);
        }
        warn!(host = %origin(&current), "external_url redirected too often");
        Err(ApiError::field(
            FIELD,
            format!(
                "The URL redirected more than {} times.",
                self.config.max_redirects
            ),
        ))
    }

    /// The address check for one hop that can be done before connecting, and the client
    /// that will do the rest.
    fn client_for(&self, url: &Url) -> Result<&Client> {
        let (Some(host), Some(port)) = (url.host_str(), url.port_or_known_default()) else {
            return Err(ApiError::field(FIELD, "The URL has no host."));
        };
        if let Some(exempt) = &self.exempt {
            if self.config.allows(host, port) {
                return Ok(exempt);
            }
        }
        // `host_str` is normalised by the URL parser (`0x7f.1` is `127.0.0.1`, IPv6 is
        // bracketed), so a literal IP always parses here; reqwest connects to literals
        // without resolving, so this is their only check.
        let literal = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<IpAddr>()
            .ok();
        if let Some(ip) = literal {
            check_ip(ip).map_err(|reason| blocked(host, reason))?;
        }
        if !ALLOWED_PORTS.contains(&port) {
            return Err(ApiError::field(
                FIELD,
                format!(
                    "The URL's port {port} is not allowed; only ports 80 and 443 can be fetched."
                ),
            ));
        }
        Ok(&self.strict)
    }

    /// Turns a failed send into the client's message; logs the cause without the URL.
    fn send_error(&self, err: reqwest::Error, url: &Url) -> ApiError {
        let host = url.host_str().unwrap_or_default();
        if let Some(refusal) = find_cause::<ResolveRefusal>(&err) {
            warn!(host = %origin(url), refusal = %refusal, "external_url refused at resolution");
            return match refusal {
                ResolveRefusal::Blocked(reason) => blocked(host, reason),
                ResolveRefusal::NoAddresses | ResolveRefusal::Lookup(_) => ApiError::field(
                    FIELD,
                    format!("The URL could not be fetched: host {host} could not be resolved."),
                ),
            };
        }
        let err = err.without_url();
        warn!(host = %origin(url), error = %ErrorChain(&err), "external_url fetch failed");
        if err.is_timeout() {
            return timed_out(self.config.connect_timeout);
        }
        let what = if err.is_connect() {
            "could not connect"
        } else {
            "the request failed"
        };
        ApiError::field(FIELD, format!("The URL could not be fetched: {what}."))
    }

    async fn read_body(&self, mut response: reqwest::Response, url: &Url) -> Result<Fetched> {
        let max = self.config.max_bytes;
        // Refuse early when the server announces too much.
        let announced = response.content_length();
        if announced.is_some_and(|len| len > max) {
            warn!(host = %origin(url), announced, max, "external_url too large (Content-Length)");
            return Err(too_large(max));
        }
        let content_type = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        // `announced` is at most `max` here, so this allocation is bounded.
        let capacity = usize::try_from(announced.unwrap_or(0).min(max)).unwrap_or(0);
        let mut body = BytesMut::with_capacity(capacity);
        loop {
            let chunk = match response.chunk().await {
                Ok(Some(chunk)) => chunk,
                Ok(None) => break,
                Err(e) => {
                    let e = e.without_url();
                    warn!(host = %origin(url), error = %ErrorChain(&e), "external_url body read failed");
                    return Err(ApiError::field(
                        FIELD,
                        "The URL could not be fetched: the connection failed while reading the body.",
                    ));
                }
            };
            // Enforced while streaming: stop at the first chunk past the cap.
            if body.len() as u64 + chunk.len() as u64 > max {
                warn!(host = %origin(url), max, "external_url too large (streamed)");
                return Err(too_large(max));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(Fetched {
            bytes: body.freeze(),
            final_url: url.to_string(),
            content_type,
        })
    }
}

fn client_builder(config: &FetchConfig) -> reqwest::ClientBuilder {
    Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .connect_timeout(config.connect_timeout)
        .user_agent(concat!("sitehost-fetch/", env!("CARGO_PKG_VERSION")))
}

fn find_cause<'a, T: std::error::Error + 'static>(
    err: &'a (dyn std::error::Error + 'static),
) -> Option<&'a T> {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = cause {
        if let Some(found) = e.downcast_ref::<T>() {
            return Some(found);
        }
        cause = e.source();
    }
    None
}

/// Displays an error with its causes, for the logs.
struct ErrorChain<'a>(&'a (dyn std::error::Error + 'static));

impl fmt::Display for ErrorChain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)?;
        let mut cause = self.0.source();
        while let Some(e) = cause {
            write!(f, ": {e}")?;
            cause = e.source();
        }
        Ok(())
    }
}

fn parse_url(raw: &str) -> Result<Url> {
    let url = Url::parse(raw.trim())
        .map_err(|e| ApiError::field(FIELD, format!("Enter a valid URL ({e}).")))?;
    check_scheme(&url)?;
    Ok(url)
}

fn check_scheme(url: &Url) -> Result<()> {
    match url.scheme() {
        "http" | "https" => Ok(()),
        other => Err(ApiError::field(
            FIELD,
            format!("The URL scheme {other:?} is not allowed; use http or https."),
        )),
    }
}

fn is_followed_redirect(status: StatusCode) -> bool {
    matches!(status.as_u16(), 301 | 302 | 303 | 307 | 308)
}

fn redirect_target(current: &Url, response: &reqwest::Response) -> Result<Url> {
    let status = response.status();
    let location = response
        .headers()
        .get(LOCATION)
        .and_then(|v| v.to_str().ok())
        .ok_or_else(|| {
            ApiError::field(
                FIELD,
                format!(
                    "The URL answered with a redirect ({}) without a valid Location.",
                    status.as_u16()
                ),
            )
        })?;
    let next = current.join(location).map_err(|_| {
        ApiError::field(
            FIELD,
            format!(
                "The URL answered with a redirect ({}) to an invalid URL.",
                status.as_u16()
            ),
        )
    })?;
    check_scheme(&next).map_err(|_| {
        ApiError::field(
            FIELD,
            format!(
                "The URL redirected to the scheme {:?}, which is not allowed.",
                next.scheme()
            ),
        )
    })?;
    Ok(next)
}

fn blocked(host: &str, reason: &str) -> ApiError {
    // The reason, not the address: resolved internal addresses are not the client's business.
    ApiError::field(
        FIELD,
        format!("The URL's host {host} is not allowed ({reason}); only public addresses can be fetched."),
    )
}

fn timed_out(after: Duration) -> ApiError {
    ApiError::field(
        FIELD,
        format!(
            "Fetching the URL timed out after {}.",
            human_duration(after)
        ),
    )
}

fn too_large(max: u64) -> ApiError {
    ApiError::TooLarge(format!(
        "The file at external_url is over the limit of {}.",
        crate::config::byte_size(max)
    ))
}

fn status_text(status: StatusCode) -> String {
    match status.canonical_reason() {
        Some(reason) => format!("{} {reason}", status.as_u16()),
        None => status.as_u16().to_string(),
    }
}

fn human_duration(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{} ms", d.as_millis())
    }
}

/// Scheme, host and port only: paths and queries may carry the partner's secrets
/// (e.g. presigned URLs), so they stay out of the logs.
fn origin(url: &Url) -> String {
    url.origin().ascii_serialization()
}

fn elapsed_ms(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests;

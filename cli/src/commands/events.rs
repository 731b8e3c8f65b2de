//! `sitehost events sign`: re-signs API Gateway HTTP API (payload v2) event files for now,
//! so `sam local invoke` and `scripts/invoke` get a request the function accepts (the
//! files in `events/` are signed at a fixed time with a fixture key).

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use base64::Engine;
use clap::Subcommand;
use serde_json::{json, Map, Value};
use sitehost::api::params;
use sitehost::auth::oauth1;
use sitehost::auth::origin::{self, ORIGIN_VERIFY_HEADER};
use sitehost::clock::{Clock, SystemClock};
use sitehost::config::{Config, Defaults, OriginSecret};

#[derive(Subcommand)]
pub enum EventsCommand {
    /// Re-signs API Gateway HTTP API (payload 2.0) event files for the current time: a
    /// fresh OAuth timestamp and nonce, signed as the functions verify it, for
    /// `sam local invoke -e` and `scripts/invoke`. One file (or standard input) is printed
    /// to standard output; several need --in-place or --out-dir. The signed host is the
    /// event's X-Forwarded-Host when it came through our CloudFront, else its Host; --host
    /// replaces that header. Came through CloudFront means: its X-Origin-Verify holds
    /// SITEHOST_ORIGIN_VERIFY, the function's origin secret, when that is set (another value
    /// is signed for Host, as such a function verifies it, with a warning); when it is not
    /// set, the header's value is not checked, any X-Origin-Verify counts, and a note says
    /// so (a function whose secret differs then answers 401).
    Sign {
        /// API key (from `sitehost keys create`).
        #[arg(long, env = "SITEHOST_KEY")]
        key: String,
        /// Its secret.
        #[arg(long, env = "SITEHOST_SECRET", hide_env_values = true)]
        secret: String,
        /// Sign for this host (and write it into the event) instead of the event's own.
        #[arg(long)]
        host: Option<String>,
        /// Scheme signed unless the event came through CloudFront (then its
        /// X-Forwarded-Proto): https, as the functions assume on Lambda.
        #[arg(long, default_value = "https")]
        scheme: String,
        /// Overwrites each file.
        #[arg(long, conflicts_with = "out_dir")]
        in_place: bool,
        /// Writes each signed file into DIR under its own name.
        #[arg(long, value_name = "DIR")]
        out_dir: Option<PathBuf>,
        /// Event files; standard input when none.
        files: Vec<PathBuf>,
    },
}

pub fn run(command: EventsCommand) -> Result<()> {
    let EventsCommand::Sign {
        key,
        secret,
        host,
        scheme,
        in_place,
        out_dir,
        files,
    } = command;
    // The function's origin secret, read as every setting is.
    let origin_secret = Config::from_env(Defaults::command())
        .context("reading the configuration (SITEHOST_ORIGIN_VERIFY)")?
        .origin_verify;
    let signer = Signer {
        key: &key,
        secret: &secret,
        host: host.as_deref(),
        scheme: &scheme,
        now: SystemClock.now(),
        origin_secret: origin_secret.as_ref(),
    };
    let output = match (in_place, out_dir) {
        (true, _) => Output::InPlace,
        (false, Some(dir)) => Output::Dir(dir),
        (false, None) => Output::Stdout,
    };
    sign_files(&files, &signer, &output)
}

/// What to sign with.
pub struct Signer<'a> {
    pub key: &'a str,
    pub secret: &'a str,
    /// The host the partner called; `None` keeps the event's.
    pub host: Option<&'a str>,
    /// The scheme signed when the event names none the function trusts.
    pub scheme: &'a str,
    /// Unix seconds.
    pub now: i64,
    /// The function's origin secret (`SITEHOST_ORIGIN_VERIFY`), when configured: the event's
    /// `X-Origin-Verify` is checked against it, as the function checks it.
    pub origin_secret: Option<&'a OriginSecret>,
}

/// What [`sign_event`] made of the event's `X-Origin-Verify`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OriginCheck {
    /// No such header: the event went straight to API Gateway.
    Absent,
    /// It holds the configured secret: the forwarded host and scheme are signed.
    Matches,
    /// It does not: a function with that secret ignores `X-Forwarded-Host` and
    /// `X-Forwarded-Proto`, so `Host` and the default scheme are signed.
    Differs,
    /// No secret is configured to check it against: its presence is taken as "came
    /// through our CloudFront" and the forwarded host and scheme are signed.
    Unchecked,
}

/// Re-signs one event in place: a fresh `Authorization` header for `now` with a random
/// nonce, signed exactly as the function verifies it (the same base string code), and the
/// request context's time and id brought along.
///
/// The signed host is the one the function takes as called: `X-Forwarded-Host` when the
/// event carries the origin secret in `X-Origin-Verify` (it came through our CloudFront),
/// else `Host`. With no secret configured, any `X-Origin-Verify` counts ([`OriginCheck`]).
/// `--host` replaces that header's value (and the context's `domainName` when it is `Host`).
pub fn sign_event(event: &mut Value, signer: &Signer) -> Result<OriginCheck> {
    let text = |value: &Value, what: &str| -> Result<String> {
        value
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| anyhow!("the event has no {what}"))
    };
    if event["version"] != "2.0" {
        bail!("not an API Gateway HTTP API (payload version 2.0) event");
    }
    let method = text(
        &event["requestContext"]["http"]["method"],
        "requestContext.http.method",
    )?;
    let path = text(&event["rawPath"], "rawPath")?;
    let query = event["rawQueryString"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let headers = event["headers"]
        .as_object_mut()
        .context("the event has no headers object")?;
    let origin = origin_check(headers, signer.origin_secret);
    let via_cdn = matches!(origin, OriginCheck::Matches | OriginCheck::Unchecked);
    let host_header = if via_cdn && headers.contains_key("x-forwarded-host") {
        "x-forwarded-host"
    } else {
        "host"
    };
    if let Some(host) = signer.host {
        headers.insert(host_header.into(), json!(host));
    }
    let host = headers
        .get(host_header)
        .and_then(Value::as_str)
        .ok_or_else(|| anyhow!("the event has no {host_header} header: give --host"))?
        .to_string();
    let scheme = match headers.get("x-forwarded-proto").and_then(Value::as_str) {
        Some(proto) if via_cdn => proto.to_string(),
        _ => signer.scheme.to_string(),
    };
    let content_type = headers
        .get("content-type")
        .and_then(Value::as_str)
        .map(str::to_string);
    let body = event_body(event)?;
    let query_params = params::parse(&query)
        .context("the query string is not valid UTF-8 once percent-decoded")?;
    let params = params::signed(&query_params, content_type.as_deref(), &body)?;
    let nonce = format!("{:032x}", rand::random::<u128>());
    let authorization = oauth1::authorization_header(
        &method,
        &oauth1::base_uri(&scheme, &host, &path),
        &params,
        signer.key,
        signer.secret,
        signer.now,
        &nonce,
    );
    event["headers"]["authorization"] = json!(authorization);
    let context = &mut event["requestContext"];
    if signer.host.is_some() && host_header == "host" {
        context["domainName"] = json!(host);
    }
    stamp_context(context, signer.now, &nonce);
    Ok(origin)
}

/// Whether the event's `X-Origin-Verify` holds the origin secret ([`OriginCheck`]).
fn origin_check(headers: &Map<String, Value>, origin_secret: Option<&OriginSecret>) -> OriginCheck {
    match (headers.get(ORIGIN_VERIFY_HEADER), origin_secret) {
        (None, _) => OriginCheck::Absent,
        (Some(_), None) => OriginCheck::Unchecked,
        (Some(value), Some(secret)) if origin::holds_secret(secret, value.as_str()) => {
            OriginCheck::Matches
        }
        (Some(_), Some(_)) => OriginCheck::Differs,
    }
}

/// The event's body as bytes (decoded when `isBase64Encoded`); none is empty.
fn event_body(event: &Value) -> Result<Vec<u8>> {
    Ok(match (&event["body"], event["isBase64Encoded"].as_bool()) {
        (Value::String(body), Some(true)) => base64::engine::general_purpose::STANDARD
            .decode(body)
            .context("the body is not base64")?,
        (Value::String(body), _) => body.clone().into_bytes(),
        _ => Vec::new(),
    })
}

/// The request context's id and time, as API Gateway sets them, for a request at `now`.
fn stamp_context(context: &mut Value, now: i64, nonce: &str) {
    context["requestId"] = json!(format!("req-{nonce}"));
    context["timeEpoch"] = json!(now * 1000);
    if let Some(time) = chrono::DateTime::from_timestamp(now, 0) {
        context["time"] = json!(time.format("%d/%b/%Y:%H:%M:%S +0000").to_string());
    }
}

/// Where the signed events go.
pub enum Output {
    /// One event (a file, or standard input) to standard output.
    Stdout,
    /// Each file overwritten.
    InPlace,
    /// Each file written under this directory with its own name.
    Dir(PathBuf),
}

/// Signs `files` (standard input when empty) and writes them to `output`.
pub fn sign_files(files: &[PathBuf], signer: &Signer, output: &Output) -> Result<()> {
    if files.is_empty() {
        if !matches!(output, Output::Stdout) {
            bail!("--in-place and --out-dir need event files");
        }
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
            .context("standard input")?;
        println!("{}", sign_text(&text, signer, Path::new("standard input"))?);
        return Ok(());
    }
    if files.len() > 1 && matches!(output, Output::Stdout) {
        bail!("several files need --in-place or --out-dir");
    }
    if let Output::Dir(dir) = output {
        std::fs::create_dir_all(dir).with_context(|| format!("{}", dir.display()))?;
    }
    for file in files {
        let text = std::fs::read_to_string(file).with_context(|| format!("{}", file.display()))?;
        let signed = sign_text(&text, signer, file)? + "\n";
        let target = match output {
            Output::Stdout => {
                print!("{signed}");
                continue;
            }
            Output::InPlace => file.clone(),
            Output::Dir(dir) => dir.join(file.file_name().context("a file has no name")?),
        };
        std::fs::write(&target, signed).with_context(|| format!("{}", target.display()))?;
    }
    Ok(())
}

fn sign_text(text: &str, signer: &Signer, from: &Path) -> Result<String> {
    let mut event: Value =
        serde_json::from_str(text).with_context(|| format!("{}: not JSON", from.display()))?;
    let origin = sign_event(&mut event, signer).with_context(|| format!("{}", from.display()))?;
    match origin {
        OriginCheck::Absent | OriginCheck::Matches => {}
        OriginCheck::Differs => eprintln!(
            "{}: its X-Origin-Verify is not the configured origin secret \
             (SITEHOST_ORIGIN_VERIFY): a function with that secret ignores X-Forwarded-Host \
             and X-Forwarded-Proto, so it is signed for Host, as that function verifies it",
            from.display()
        ),
        OriginCheck::Unchecked => eprintln!(
            "{}: its X-Origin-Verify is not checked (SITEHOST_ORIGIN_VERIFY is not set) and \
             taken as coming through CloudFront: signed for X-Forwarded-Host; a function whose \
             origin secret differs verifies Host instead and answers 401 (set \
             SITEHOST_ORIGIN_VERIFY to its secret to have the header checked)",
            from.display()
        ),
    }
    serde_json::to_string_pretty(&event).map_err(anyhow::Error::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(origin_verify: Option<&str>) -> Value {
        let mut headers = json!({
            "host": "abc123.execute-api.us-east-1.amazonaws.com",
            "x-forwarded-host": "d111111abcdef8.cloudfront.net",
            "x-forwarded-proto": "https",
        });
        if let Some(value) = origin_verify {
            headers[ORIGIN_VERIFY_HEADER] = json!(value);
        }
        json!({
            "version": "2.0",
            "rawPath": "/api/v2/businesses/",
            "rawQueryString": "",
            "headers": headers,
            "requestContext": {"http": {"method": "GET"}},
        })
    }

    fn check(origin_verify: Option<&str>, configured: Option<&str>) -> OriginCheck {
        let secret = configured.and_then(OriginSecret::new);
        let signer = Signer {
            key: "k",
            secret: "s",
            host: Some("d2222.cloudfront.net"),
            scheme: "https",
            now: 1_714_564_800,
            origin_secret: secret.as_ref(),
        };
        let mut event = event(origin_verify);
        let check = sign_event(&mut event, &signer).expect("signed");
        // `--host` lands on the header that was signed.
        let forwarded = event["headers"]["x-forwarded-host"] == "d2222.cloudfront.net";
        let direct = event["headers"]["host"] == "d2222.cloudfront.net";
        assert_eq!(
            (forwarded, direct),
            match check {
                OriginCheck::Matches | OriginCheck::Unchecked => (true, false),
                OriginCheck::Differs | OriginCheck::Absent => (false, true),
            },
            "{check:?}: {event}"
        );
        check
    }

    #[test]
    fn x_origin_verify_is_checked_against_the_configured_secret() {
        let ours = "theFunctionsOriginSecret0000001";
        assert_eq!(check(Some(ours), Some(ours)), OriginCheck::Matches);
        assert_eq!(check(Some("another"), Some(ours)), OriginCheck::Differs);
        assert_eq!(check(Some(""), Some(ours)), OriginCheck::Differs);
        assert_eq!(check(Some("another"), None), OriginCheck::Unchecked);
        assert_eq!(check(None, Some(ours)), OriginCheck::Absent);
        assert_eq!(check(None, None), OriginCheck::Absent);
    }
}

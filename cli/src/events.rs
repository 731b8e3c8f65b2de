//! `sitehost events sign`: re-signs API Gateway HTTP API (payload v2) event files for now,
//! so `sam local invoke` and `scripts/invoke` get a request the function accepts (the
//! files in `events/` are signed at a fixed time with a fixture key).

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use base64::Engine;
use serde_json::{json, Value};
use sitehost::auth::{oauth1, signed_params, ORIGIN_VERIFY_HEADER};

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
}

/// Re-signs one event in place: a fresh `Authorization` header for `now` with a random
/// nonce, signed exactly as the function verifies it (the same base string code), and the
/// request context's time and id brought along.
///
/// The signed host is the one the function takes as called: `X-Forwarded-Host` when the
/// event carries `X-Origin-Verify` (it came through CloudFront), else `Host`. `--host`
/// replaces that header's value (and the context's `domainName` when it is `Host`).
pub fn sign_event(event: &mut Value, signer: &Signer) -> Result<()> {
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
    let via_cdn = headers.contains_key(ORIGIN_VERIFY_HEADER);
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
    let body = match (&event["body"], event["isBase64Encoded"].as_bool()) {
        (Value::String(body), Some(true)) => base64::engine::general_purpose::STANDARD
            .decode(body)
            .context("the body is not base64")?,
        (Value::String(body), _) => body.clone().into_bytes(),
        _ => Vec::new(),
    };
    let query_params = oauth1::parse_query(&query)?;
    let params = signed_params(&query_params, content_type.as_deref(), &body)?;
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
    context["requestId"] = json!(format!("req-{nonce}"));
    context["timeEpoch"] = json!(signer.now * 1000);
    if let Some(time) = chrono::DateTime::from_timestamp(signer.now, 0) {
        context["time"] = json!(time.format("%d/%b/%Y:%H:%M:%S +0000").to_string());
    }
    Ok(())
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
    sign_event(&mut event, signer).with_context(|| format!("{}", from.display()))?;
    serde_json::to_string_pretty(&event).map_err(anyhow::Error::from)
}

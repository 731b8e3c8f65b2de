//! `sitehost events sign`: events signed for their own host or another, checked against the
//! configured origin secret, written one file or a directory at a time.

use std::path::Path;
use std::process::Command;

use serde_json::Value;
use sitehost::api::{lambda, Operation};

use super::{repo, run};
use crate::support::{function_app, BIN, ORIGIN_SECRET};

/// A key in a fresh embedded store: (key, secret).
fn embedded_key(dir: &Path) -> (String, String) {
    let dir = dir.to_str().expect("utf-8 path");
    let (ok, out, err) = run(
        &[
            "keys",
            "create",
            "--account",
            "events",
            "--json",
            "--store",
            "embedded",
            "--data-dir",
            dir,
        ],
        &[],
    );
    assert!(ok, "keys create: {err}");
    let key: Value = serde_json::from_str(&out).expect("key json");
    (
        key["key"].as_str().expect("key").into(),
        key["secret"].as_str().expect("secret").into(),
    )
}

/// Runs a signed event through `operation`'s handler on the embedded store in `dir`
/// ([`function_app`]: configured as on Lambda, with the real clock).
async fn handle(dir: &Path, operation: Operation, event: &str, public_hosts: &[&str]) -> u16 {
    let app = function_app(dir, public_hosts);
    let request = lambda_http::request::from_str(event).expect("an API Gateway event");
    app.handle_operation(operation, lambda::from_lambda(request))
        .await
        .status()
        .as_u16()
}

// Reads better whole: one event signed, replayed and re-signed in turn, each step from the last.
#[tokio::test]
async fn signed_events_verify_for_their_own_host_and_for_another() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (key, secret) = embedded_key(dir.path());
    let event = |file: &str, extra: &[&str]| -> String {
        let path = repo().join("events").join(file);
        let mut args = vec!["events", "sign", "--key", &key, "--secret", &secret];
        args.extend_from_slice(extra);
        let path = path.to_str().expect("utf-8 path");
        args.push(path);
        let (ok, out, err) = run(&args, &[]);
        assert!(ok, "events sign {file}: {err}");
        out
    };

    // The fixture's event as it is: signed in 2024 by another key.
    let stale = std::fs::read_to_string(repo().join("events/business-list.json")).expect("event");
    assert_eq!(
        handle(dir.path(), Operation::BusinessList, &stale, &[]).await,
        401
    );

    let signed = event("business-list.json", &[]);
    assert_eq!(
        handle(dir.path(), Operation::BusinessList, &signed, &[]).await,
        200
    );
    // A fresh nonce each time: signing twice gives two requests that both pass.
    let again = event("business-list.json", &[]);
    assert_ne!(signed, again);
    assert_eq!(
        handle(dir.path(), Operation::BusinessList, &again, &[]).await,
        200
    );
    // Replaying one is refused (its nonce is spent).
    assert_eq!(
        handle(dir.path(), Operation::BusinessList, &signed, &[]).await,
        401
    );

    // A custom host is written into the event and signed for.
    let custom = event("business-list.json", &["--host", "api.example.com"]);
    let parsed: Value = serde_json::from_str(&custom).expect("json");
    assert_eq!(parsed["headers"]["host"], "api.example.com");
    assert_eq!(parsed["requestContext"]["domainName"], "api.example.com");
    assert_eq!(
        handle(dir.path(), Operation::BusinessList, &custom, &[]).await,
        200
    );

    // Through CloudFront: signed for the forwarded (frontend) host, verified for it with the
    // origin secret the event carries (the function's).
    let cdn = event(
        "cloudfront-business-list.json",
        &["--host", "d2222.cloudfront.net"],
    );
    let parsed: Value = serde_json::from_str(&cdn).expect("json");
    assert_eq!(
        parsed["headers"]["x-forwarded-host"],
        "d2222.cloudfront.net"
    );
    assert_eq!(
        parsed["headers"]["host"], "abc123.execute-api.us-east-1.amazonaws.com",
        "the origin host stays"
    );
    assert_eq!(
        handle(dir.path(), Operation::BusinessList, &cdn, &[]).await,
        200
    );
    // The same request around the edge (no X-Origin-Verify) is refused, even for a listed
    // public host.
    let cdn = event(
        "cloudfront-business-list.json",
        &["--host", "d2222.cloudfront.net"],
    );
    let mut bypass: Value = serde_json::from_str(&cdn).expect("json");
    bypass["headers"]
        .as_object_mut()
        .expect("headers")
        .remove("x-origin-verify");
    assert_eq!(
        handle(
            dir.path(),
            Operation::BusinessList,
            &bypass.to_string(),
            &["d2222.cloudfront.net"]
        )
        .await,
        403
    );
    // A POST with a JSON body (not signed) verifies too.
    let create = event("business-create.json", &[]);
    assert_eq!(
        handle(dir.path(), Operation::BusinessCreate, &create, &[]).await,
        201
    );
}

/// `events sign` of a CloudFront event: with `SITEHOST_ORIGIN_VERIFY` set, its
/// `X-Origin-Verify` is checked against it and the event is signed as a function with that
/// secret verifies it (the forwarded host only with the secret, else `Host`, and a warning);
/// without it, the header is not checked, and the command says so.
#[tokio::test]
async fn events_sign_checks_x_origin_verify_against_the_configured_secret() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (key, secret) = embedded_key(dir.path());
    let fixture: Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("events/cloudfront-business-list.json"))
            .expect("event"),
    )
    .expect("json");
    let fixture_secret = fixture["headers"]["x-origin-verify"]
        .as_str()
        .expect("the fixture came through CloudFront")
        .to_string();
    // The functions here have the sample events' secret (as env-vars.json gives it).
    assert_eq!(fixture_secret, ORIGIN_SECRET);
    const OTHER: &str = "anotherDistributionOriginVerifySecret000000001";
    // Signs `event` with SITEHOST_ORIGIN_VERIFY set to `configured` (or unset):
    // (signed event, standard error).
    let sign = |event: &Value, configured: Option<&str>, extra: &[&str]| -> (String, String) {
        let file = dir.path().join("event.json");
        std::fs::write(&file, event.to_string()).expect("written");
        let mut command = Command::new(BIN);
        command
            .args(["events", "sign", "--key", &key, "--secret", &secret])
            .args(extra)
            .arg(&file)
            .env_remove("SITEHOST_ORIGIN_VERIFY");
        if let Some(value) = configured {
            command.env("SITEHOST_ORIGIN_VERIFY", value);
        }
        let out = command.output().expect("sitehost runs");
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "events sign: {stderr}");
        (String::from_utf8_lossy(&out.stdout).into_owned(), stderr)
    };
    let list = Operation::BusinessList;

    // Signed for a function with another secret: it would ignore X-Forwarded-Host, so the
    // event is signed for its Host (and said so); this function holds the event's secret and
    // verifies Host among its hosts: it passes.
    let (signed, warning) = sign(&fixture, Some(OTHER), &[]);
    assert!(
        warning.contains("X-Origin-Verify") && warning.contains("signed for Host"),
        "{warning}"
    );
    let parsed: Value = serde_json::from_str(&signed).expect("json");
    assert_eq!(
        parsed["headers"]["x-origin-verify"],
        fixture_secret.as_str()
    );
    assert_eq!(handle(dir.path(), list, &signed, &[]).await, 200);

    // The function's own secret: signed for the forwarded host (`--host` replaces it).
    let mut ours = fixture.clone();
    ours["headers"]["x-origin-verify"] = Value::from(ORIGIN_SECRET);
    let (signed, quiet) = sign(
        &ours,
        Some(ORIGIN_SECRET),
        &["--host", "d2222.cloudfront.net"],
    );
    assert_eq!(quiet, "", "nothing to say");
    let parsed: Value = serde_json::from_str(&signed).expect("json");
    assert_eq!(
        parsed["headers"]["x-forwarded-host"],
        "d2222.cloudfront.net"
    );
    assert_eq!(handle(dir.path(), list, &signed, &[]).await, 200);

    // Nothing configured: the header is taken as it is (signed for the forwarded host), and
    // the command says it did not check it; the function, whose secret differs, refuses it
    // (403: not through its distribution).
    let mut theirs = fixture.clone();
    theirs["headers"]["x-origin-verify"] = Value::from(OTHER);
    let (signed, note) = sign(&theirs, None, &[]);
    assert!(
        note.contains("X-Origin-Verify") && note.contains("not checked"),
        "{note}"
    );
    assert_eq!(handle(dir.path(), list, &signed, &[]).await, 403);
}

#[test]
fn signing_several_files_writes_them_to_a_directory() {
    let out = tempfile::tempdir().expect("temp dir");
    let events = repo().join("events");
    let files: Vec<String> = ["business-get.json", "image-list.json"]
        .iter()
        .map(|f| events.join(f).to_string_lossy().into_owned())
        .collect();
    let common = ["events", "sign", "--key", "k", "--secret", "s"];
    // Several files to standard output would be one unparseable stream: refused.
    let mut args: Vec<&str> = common.to_vec();
    args.extend(files.iter().map(String::as_str));
    let (ok, _, err) = run(&args, &[]);
    assert!(!ok);
    assert!(err.contains("--in-place or --out-dir"), "{err}");
    let out_dir = out.path().to_str().expect("utf-8");
    args.extend(["--out-dir", out_dir]);
    let (ok, _, err) = run(&args, &[]);
    assert!(ok, "{err}");
    for name in ["business-get.json", "image-list.json"] {
        let signed: Value =
            serde_json::from_str(&std::fs::read_to_string(out.path().join(name)).expect("written"))
                .expect("json");
        let authorization = signed["headers"]["authorization"].as_str().expect("header");
        assert!(
            authorization.contains("oauth_consumer_key=\"k\""),
            "{authorization}"
        );
        assert!(
            !authorization.contains("1714564800"),
            "a fresh timestamp: {authorization}"
        );
    }
}

//! The Lambda side of the project as an operator or partner meets it outside AWS:
//! `sitehost events sign` (re-signs `events/` for now), and the seven real function
//! binaries under a Lambda Runtime API (`sitehost lambda invoke`), on moto.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use sitehost::config::Config;
use sitehost::http::{lambda, App, Operation};
use sitehost::store::Stores;

const BIN: &str = env!("CARGO_BIN_EXE_sitehost");

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn run(args: &[&str], env: &[(&str, &str)]) -> (bool, String, String) {
    let out = Command::new(BIN)
        .args(args)
        .envs(env.iter().copied())
        .output()
        .expect("sitehost runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

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

/// Runs a signed event through `operation`'s handler on the embedded store in `dir`, the
/// configuration a function has on Lambda (https by default), with the real clock.
async fn handle(dir: &Path, operation: Operation, event: &str, public_hosts: &[&str]) -> u16 {
    let stores = Stores::embedded(dir).expect("stores");
    let mut config = Config::embedded(dir.into());
    config.default_scheme = "https".into();
    config.public_hosts = public_hosts.iter().map(|h| h.to_string()).collect();
    config.origin_verify = sitehost::auth::OriginSecret::new("localOriginVerifySecret000000001");
    let app = App::new(stores, config).expect("app");
    let request = lambda_http::request::from_str(event).expect("an API Gateway event");
    app.handle_operation(operation, lambda::from_lambda(request))
        .await
        .status
        .as_u16()
}

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

    // Through CloudFront: signed for the forwarded (frontend) host, verified with the
    // origin secret the event carries... which is the fixture's, not this store's: so the
    // forwarded host is not trusted and only a listed public host lets it pass.
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
        401
    );
    let cdn = event(
        "cloudfront-business-list.json",
        &["--host", "d2222.cloudfront.net"],
    );
    assert_eq!(
        handle(
            dir.path(),
            Operation::BusinessList,
            &cdn,
            &["d2222.cloudfront.net"]
        )
        .await,
        200
    );
    // A POST with a JSON body (not signed) verifies too.
    let create = event("business-create.json", &[]);
    assert_eq!(
        handle(dir.path(), Operation::BusinessCreate, &create, &[]).await,
        201
    );
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

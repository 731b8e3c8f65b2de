//! The Lambda side of the project as an operator or partner meets it outside AWS:
//! `sitehost events sign` (re-signs `events/` for now), and the real function
//! binaries under a Lambda Runtime API (`sitehost lambda invoke`), on moto.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use sitehost::api::{lambda, Operation};

use crate::support::{function_app, BIN, ORIGIN_SECRET};

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

// ---- Every function binary under the Runtime API (`sitehost lambda invoke`) ----

/// Every function: one per routed operation (the route table names them), and the
/// frontend's `image-sibling`.
fn functions() -> Vec<&'static str> {
    let mut names: Vec<&'static str> = Operation::ALL.iter().map(|op| op.function_name()).collect();
    names.push("image-sibling");
    names
}

/// The function binaries, built for the host next to `sitehost` (target/debug). `cargo
/// test` does not build them (it builds each `main.rs` as a test harness);
/// `scripts/test` runs `cargo build --workspace --lib --bins --tests` first. `None` (after
/// saying so) when they are missing and not required.
fn function_binaries() -> Option<PathBuf> {
    let dir = Path::new(BIN).parent().expect("target dir").to_path_buf();
    let missing: Vec<&str> = functions()
        .into_iter()
        .filter(|f| !dir.join(f).is_file())
        .collect();
    if missing.is_empty() {
        return Some(dir);
    }
    assert!(
        std::env::var("SITEHOST_TEST_REQUIRE_AWS").as_deref() != Ok("1"),
        "the function binaries {missing:?} are not in {}: build them first with `cargo build \
         --workspace --all-targets --locked` (scripts/test does)",
        dir.display()
    );
    eprintln!("skipped: the function binaries {missing:?} are not built");
    None
}

/// moto's URL, or `None` (after saying so) when the AWS tests are skipped.
fn aws_endpoint() -> Option<String> {
    match std::env::var("SITEHOST_TEST_AWS_ENDPOINT") {
        Ok(endpoint) if !endpoint.trim().is_empty() => Some(endpoint),
        _ => {
            assert!(
                std::env::var("SITEHOST_TEST_REQUIRE_AWS").as_deref() != Ok("1"),
                "SITEHOST_TEST_REQUIRE_AWS=1 but SITEHOST_TEST_AWS_ENDPOINT is not set"
            );
            eprintln!("skipped: no moto (SITEHOST_TEST_AWS_ENDPOINT is not set)");
            None
        }
    }
}

const AWS_ENV: [(&str, &str); 3] = [
    ("AWS_ACCESS_KEY_ID", "testing"),
    ("AWS_SECRET_ACCESS_KEY", "testing"),
    ("AWS_REGION", "us-east-1"),
];

/// `sitehost lambda invoke BINARY EVENTS... --json` with env-vars.json and `env`
/// over it: the report, and whether the command succeeded.
fn invoke(binary: &Path, events: &[PathBuf], env: &[(&str, &str)]) -> (bool, Value) {
    let env_vars = repo().join("env-vars.json");
    let mut command = Command::new(BIN);
    command
        .args(["lambda", "invoke", "--json", "--quiet", "--env-vars"])
        .arg(&env_vars)
        .arg(binary)
        .args(events)
        .envs(AWS_ENV);
    for (name, value) in env {
        command.arg("--env").arg(format!("{name}={value}"));
    }
    let out = command.output().expect("sitehost lambda invoke runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "{}: no report ({e}): {stdout}{}",
            binary.display(),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.success(), report)
}

struct Case {
    function: &'static str,
    event: &'static str,
    status: u16,
    /// Checks one response body (parsed) of the cold and warm invocation.
    check: fn(&Value, usize),
}

/// In order: each event twice on one process (cold, then warm). The store starts empty
/// (and ids are taken one at a time), so the creates make businesses 1 to 4 and the uploads images 1 and 2, which the other
/// events (written for business 1 and image 1) find.
fn cases() -> Vec<Case> {
    vec![
        Case {
            function: "business-create",
            event: "business-create.json",
            status: 201,
            check: |body, n| {
                assert_eq!(body["business_name"], "Harbour Cafe");
                assert_eq!(body["id"], n as u64 + 1);
            },
        },
        Case {
            function: "business-create",
            event: "business-create-singular.json",
            status: 201,
            check: |body, n| assert_eq!(body["id"], n as u64 + 3),
        },
        Case {
            function: "business-get",
            event: "business-get.json",
            status: 200,
            check: |body, _| {
                assert_eq!(body["id"], 1);
                assert_eq!(body["partner_business_id"], "hc-77");
            },
        },
        Case {
            function: "business-list",
            event: "business-list.json",
            status: 200,
            check: |body, _| {
                assert_eq!(body["meta"]["total_count"], 4);
                assert_eq!(body["objects"].as_array().map(Vec::len), Some(2));
            },
        },
        Case {
            function: "business-list",
            event: "business-list-filtered.json",
            status: 200,
            check: |body, _| assert_eq!(body["meta"]["total_count"], 4),
        },
        Case {
            function: "image-upload",
            event: "image-upload.json",
            status: 201,
            check: |body, n| {
                assert_eq!(body["id"], n as u64 + 1);
                assert_eq!(
                    (body["width"].as_u64(), body["height"].as_u64()),
                    (Some(2), Some(2))
                );
                assert_eq!(body["business_id"], 1);
            },
        },
        // A staged upload's form (a presigned POST onto the staging bucket of env-vars.json).
        Case {
            function: "image-upload-session",
            event: "image-upload-session.json",
            status: 201,
            check: |body, _| {
                assert!(body["upload_id"].is_string(), "{body}");
                assert_eq!(body["method"], "POST");
                assert_eq!(body["max_bytes"], 5_508_789);
            },
        },
        Case {
            function: "image-get",
            event: "image-get.json",
            status: 200,
            check: |body, _| {
                assert_eq!(body["id"], 1);
                assert_eq!(body["mimetype"], "image/png");
            },
        },
        Case {
            function: "image-list",
            event: "image-list.json",
            status: 200,
            check: |body, _| {
                assert_eq!(body["meta"]["total_count"], 2);
                // order_by=-id
                assert_eq!(body["objects"][0]["id"], 2);
            },
        },
        // Locations of business 1: the create makes locations 1 and 2.
        Case {
            function: "location-create",
            event: "location-create.json",
            status: 201,
            check: |body, n| {
                assert_eq!(body["id"], n as u64 + 1);
                assert_eq!(body["business_id"], 1);
            },
        },
        Case {
            function: "location-get",
            event: "location-get.json",
            status: 200,
            check: |body, _| assert_eq!(body["location_name"], "Harbour Cafe Quay"),
        },
        Case {
            function: "location-list",
            event: "location-list.json",
            status: 200,
            check: |body, _| assert_eq!(body["meta"]["total_count"], 2),
        },
        Case {
            function: "location-update",
            event: "location-update.json",
            status: 200,
            check: |body, _| assert_eq!(body["location_name"], "Quay North"),
        },
        // Sites and posts of business 1, before location 1 goes: the create makes site 1
        // (its warm twin asks for the same address, a 409), the post create posts 1 and 2;
        // site 1 is then disabled.
        Case {
            function: "site-create",
            event: "site-create.json",
            status: 201,
            check: |body, n| {
                if n == 0 {
                    assert_eq!(body["id"], 1);
                    assert_eq!(body["location_ids"], serde_json::json!([1]));
                } else {
                    assert!(body["error"].is_string(), "{body}");
                }
            },
        },
        Case {
            function: "site-get",
            event: "site-get.json",
            status: 200,
            check: |body, _| assert_eq!(body["title"], "Harbour Cafe Shop"),
        },
        Case {
            function: "site-update",
            event: "site-update.json",
            status: 200,
            check: |body, _| assert_eq!(body["title"], "Harbour Cafe Online"),
        },
        Case {
            function: "post-create",
            event: "post-create.json",
            status: 201,
            check: |body, n| assert_eq!(body["id"], n as u64 + 1),
        },
        Case {
            function: "post-get",
            event: "post-get.json",
            status: 200,
            check: |body, _| assert_eq!(body["title"], "Opening day"),
        },
        Case {
            function: "post-update",
            event: "post-update.json",
            status: 200,
            check: |body, _| assert_eq!(body["title"], "Opening day, again"),
        },
        Case {
            function: "post-list",
            event: "post-list.json",
            status: 200,
            check: |body, _| assert_eq!(body["meta"]["total_count"], 2),
        },
        // Site 1 is disabled; a second disable answers 204 as well.
        Case {
            function: "site-delete",
            event: "site-delete.json",
            status: 204,
            check: |_, _| {},
        },
        Case {
            function: "site-list",
            event: "site-list.json",
            status: 200,
            check: |body, _| assert_eq!(body["meta"]["total_count"], 0),
        },
        // Location 1 goes; the warm invocation finds it gone (404).
        Case {
            function: "location-delete",
            event: "location-delete.json",
            status: 204,
            check: |body, n| {
                if n == 1 {
                    assert!(body["error"].is_string(), "{body}");
                }
            },
        },
        Case {
            function: "business-update",
            event: "business-update.json",
            status: 200,
            check: |body, _| {
                assert_eq!(body["id"], 1);
                assert_eq!(body["deleted"], true);
            },
        },
        Case {
            function: "business-update",
            event: "business-update-singular.json",
            status: 200,
            check: |body, _| assert_eq!(body["deleted"], true),
        },
        // Image 1 and its files go (204, no body); the warm invocation finds it gone (404).
        Case {
            function: "image-delete",
            event: "image-delete.json",
            status: 204,
            check: |body, n| {
                if n == 1 {
                    assert!(body["error"].is_string(), "{body}");
                }
            },
        },
    ]
}

#[test]
fn every_function_answers_its_events_cold_and_warm() {
    let (Some(bins), Some(endpoint)) = (function_binaries(), aws_endpoint()) else {
        return;
    };
    let python = std::env::var("SITEHOST_TEST_PYTHON").unwrap_or_else(|_| "python3".into());
    let unique = format!(
        "sitehost-runtime-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or_default()
    );
    let (table, bucket) = (unique.clone(), unique);
    // The table from template.yaml's RecordsTable, and the bucket, as docs/local-invoke.md does.
    let setup = Command::new(&python)
        .arg(repo().join("scripts/local_aws.py"))
        .args([
            "--endpoint",
            &endpoint,
            "--table",
            &table,
            "--bucket",
            &bucket,
        ])
        .envs(AWS_ENV)
        .output()
        .expect("python runs");
    assert!(
        setup.status.success(),
        "scripts/local_aws.py: {}",
        String::from_utf8_lossy(&setup.stderr)
    );
    let aws_env: Vec<(&str, &str)> = AWS_ENV
        .iter()
        .copied()
        .chain([("AWS_ENDPOINT_URL", endpoint.as_str())])
        .collect();
    let (ok, out, err) = run(
        &[
            "keys",
            "create",
            "--store",
            "dynamodb",
            "--table",
            &table,
            "--account",
            "runtime",
            "--json",
        ],
        &aws_env,
    );
    assert!(ok, "keys create: {err}");
    let key: Value = serde_json::from_str(&out).expect("key json");
    let (key, secret) = (
        key["key"].as_str().expect("key"),
        key["secret"].as_str().expect("secret"),
    );

    let work = tempfile::tempdir().expect("temp dir");
    let env = [
        ("AWS_ENDPOINT_URL", endpoint.as_str()),
        ("SITEHOST_TABLE", table.as_str()),
        ("SITEHOST_BUCKET", bucket.as_str()),
        // One id per sequence update, so that each cold process continues where the last
        // stopped and the cases can name the ids they made (the default of 20 would leave
        // a block's rest unused at every cold start).
        ("SITEHOST_ID_BLOCK", "1"),
    ];
    let mut tried = std::collections::BTreeSet::new();
    for case in cases() {
        tried.insert(case.function);
        // Two signatures of the same event: a nonce is accepted once.
        let signed: Vec<PathBuf> = ["cold", "warm"]
            .iter()
            .map(|which| {
                let dir = work.path().join(which);
                let file = repo().join("events").join(case.event);
                let (ok, _, err) = run(
                    &[
                        "events",
                        "sign",
                        "--key",
                        key,
                        "--secret",
                        secret,
                        "--out-dir",
                        dir.to_str().expect("utf-8"),
                        file.to_str().expect("utf-8"),
                    ],
                    &[],
                );
                assert!(ok, "events sign: {err}");
                dir.join(case.event)
            })
            .collect();
        let (ok, report) = invoke(&bins.join(case.function), &signed, &env);
        assert!(ok, "{} {}: {report}", case.function, case.event);
        assert!(report["init"]["ms"].as_f64().is_some(), "{report}");
        let invocations = report["invocations"].as_array().expect("invocations");
        assert_eq!(invocations.len(), 2, "{report}");
        for (n, invocation) in invocations.iter().enumerate() {
            let response = &invocation["response"];
            // A delete's second (warm) invocation finds the image gone.
            let status = match (case.function, case.status, n) {
                // One active site per address.
                ("site-create", 201, 1) => 409,
                // A disable of a disabled site succeeds again.
                ("site-delete", 204, 1) => 204,
                (_, 204, 1) => 404,
                (_, status, _) => status,
            };
            assert_eq!(
                response["statusCode"],
                status,
                "{} {} invocation {}: {invocation}",
                case.function,
                case.event,
                n + 1
            );
            if status == 204 {
                assert!(
                    response["body"].as_str().unwrap_or_default().is_empty(),
                    "{invocation}"
                );
                (case.check)(&Value::Null, n);
                continue;
            }
            assert_eq!(response["headers"]["content-type"], "application/json");
            let body: Value = serde_json::from_str(response["body"].as_str().expect("body"))
                .expect("a JSON body");
            (case.check)(&body, n);
        }
    }

    // image-sibling, behind the frontend rather than the API: its event (unsigned; CloudFront
    // signs for the function URL) asks for a medium variant's WebP sibling, then its AVIF,
    // which it makes from the variant in the bucket.
    let variant = work.path().join("medium.jpg");
    std::fs::write(&variant, jpeg(640, 480)).expect("variant");
    let put = Command::new(&python)
        .args([
            "-c",
            "import boto3, sys; boto3.client('s3', endpoint_url=sys.argv[1]).put_object(\
             Bucket=sys.argv[2], Key=sys.argv[3], Body=open(sys.argv[4], 'rb').read(), \
             ContentType='image/jpeg')",
            &endpoint,
            &bucket,
            "img/upload/shop-k3v9x0q2m1za--1.medium.jpg",
        ])
        .arg(&variant)
        .envs(AWS_ENV)
        .output()
        .expect("python runs");
    assert!(
        put.status.success(),
        "{}",
        String::from_utf8_lossy(&put.stderr)
    );
    // The same request for the AVIF sibling, as CloudFront sends it for a browser that
    // accepts AVIF.
    let event = repo().join("events/image-sibling.json");
    let text = std::fs::read_to_string(&event).expect("event");
    let avif_event = work.path().join("image-sibling-avif.json");
    let avif_text = text
        .replace(".medium.jpg.webp", ".medium.jpg.avif")
        .replace("\"image/webp\"", "\"image/avif\"");
    std::fs::write(&avif_event, avif_text).expect("the AVIF event");
    let events = [event.clone(), event, avif_event];
    let (ok, report) = invoke(&bins.join("image-sibling"), &events, &env);
    assert!(ok, "image-sibling: {report}");
    let invocations = report["invocations"].as_array().expect("invocations");
    assert_eq!(invocations.len(), 3);
    for (invocation, kind) in invocations.iter().zip(["webp", "webp", "avif"]) {
        let response = &invocation["response"];
        assert_eq!(response["statusCode"], 200, "{invocation}");
        assert_eq!(response["headers"]["content-type"], format!("image/{kind}"));
        assert_eq!(response["isBase64Encoded"], true, "{invocation}");
    }
    tried.insert("image-sibling");
    assert_eq!(tried.len(), functions().len(), "every function ran");
}

/// A JPEG of `width` x `height`, as the pipeline would store a variant.
fn jpeg(width: u32, height: u32) -> Vec<u8> {
    let pixels = image::RgbImage::from_fn(width, height, |x, y| {
        image::Rgb([(x % 256) as u8, (y % 256) as u8, 90])
    });
    let mut out = Vec::new();
    image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, 85)
        .encode_image(&pixels)
        .expect("JPEG");
    out
}

#[test]
fn a_failed_cold_start_is_the_runtimes_init_error() {
    let Some(bins) = function_binaries() else {
        return;
    };
    let event = repo().join("events/business-get.json");
    for (function, env) in [
        // A setting that is not a number.
        ("business-get", ("SITEHOST_MAX_BODY_BYTES", "lots")),
        // The test-only fetch allowlist, which a function on Lambda refuses.
        (
            "image-upload",
            ("SITEHOST_FETCH_ALLOW_HOSTS", "example.com"),
        ),
        // A log filter with a level that does not exist (read before the rest).
        ("business-list", ("RUST_LOG", "info,sitehost=loud")),
    ] {
        let (ok, report) = invoke(
            &bins.join(function),
            std::slice::from_ref(&event),
            &[env, ("AWS_ENDPOINT_URL", "http://127.0.0.1:9")],
        );
        assert!(!ok, "{function}: {report}");
        let error = &report["init"]["error"];
        assert_eq!(
            error["header"], "Sitehost.ConfigInvalid",
            "{function}: {report}"
        );
        assert_eq!(error["body"]["errorType"], "Sitehost.ConfigInvalid");
        let message = error["body"]["errorMessage"].as_str().expect("message");
        assert!(message.contains(env.0), "{function}: {message}");
        assert_eq!(report["invocations"], serde_json::json!([]));
    }
}

//! The `sitehost` command as a newcomer uses it: `serve` on a fresh data directory, keys
//! created and revoked from another process while it runs, partner code in Python.

use std::path::Path;
use std::process::Command;

use serde_json::{json, Value};
use sitehost::client::PartnerClient;

use crate::support::{serve, serve_with_env, BIN};

fn sitehost(args: &[&str], data_dir: &Path) -> (bool, String) {
    let out = Command::new(BIN)
        .args(args)
        .arg("--data-dir")
        .arg(data_dir)
        .env_remove("SITEHOST_STORE")
        .output()
        .expect("sitehost runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

// Reads better whole: one data directory through first start, key changes and restarts.
#[tokio::test]
async fn first_start_prints_a_key_and_keys_change_without_restart() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = serve(dir.path());
    assert_eq!(server.key.len(), 20, "serve printed the first key");
    let first = PartnerClient::new(&server.base, &server.key, &server.secret);
    assert_eq!(
        first.get("/api/v2/businesses/").await.expect("list").status,
        200
    );
    // The address it printed answers: the API root, every resource with its list endpoint
    // and schema.
    let root = first.get("/api/v2/").await.expect("the API root");
    assert_eq!(root.status, 200, "{}", root.body);
    assert_eq!(root.body["posts"]["list_endpoint"], "/api/v2/posts/");
    assert_eq!(
        root.body["businesses"]["schema"],
        "/api/v2/openapi.json#/components/schemas/Business"
    );

    let (ok, out) = sitehost(
        &[
            "keys",
            "create",
            "--account",
            "acme",
            "--sub-id",
            "north",
            "--user-id",
            "77",
            "--json",
        ],
        dir.path(),
    );
    assert!(ok, "{out}");
    let created: Value = serde_json::from_str(out.trim()).expect("one JSON object");
    for field in ["key", "secret", "account_id", "user_id"] {
        assert!(created.get(field).is_some(), "{field} in {created}");
    }
    assert_eq!(created["user_id"], 77);
    let key = created["key"].as_str().expect("key");
    let acme = PartnerClient::new(
        &server.base,
        key,
        created["secret"].as_str().expect("secret"),
    );
    let made = acme
        .post(
            "/api/v2/businesses/",
            &json!({"business_name": "Acme North"}),
        )
        .await
        .expect("create");
    assert_eq!(made.status, 201, "{}", made.body);
    assert_eq!(made.body["partner_sub_id"], "north");
    assert_eq!(made.body["user_id"], 77);
    // The first key's account does not see acme's business.
    assert_eq!(
        first.get("/api/v2/businesses/").await.expect("list").body["meta"]["total_count"],
        0
    );

    let (ok, _) = sitehost(&["keys", "revoke", key], dir.path());
    assert!(ok);
    assert_eq!(
        acme.get("/api/v2/businesses/").await.expect("list").status,
        401
    );
    let (ok, listed) = sitehost(&["keys", "list", "--json"], dir.path());
    assert!(ok);
    let listed: Value = serde_json::from_str(listed.trim()).expect("json list");
    let entry = listed
        .as_array()
        .and_then(|l| l.iter().find(|k| k["key"] == key).cloned())
        .expect("listed");
    assert_eq!(entry["revoked"], true);
    assert!(entry.get("secret").is_none(), "list never shows secrets");
    let (ok, _) = sitehost(&["keys", "revoke", "no-such-key"], dir.path());
    assert!(!ok);

    // A restart keeps the data and prints no new key.
    drop(server);
    let again = serve(dir.path());
    assert!(again.key.is_empty());
    // A second server on the same data directory stops at start and says why.
    let second = Command::new(BIN)
        .args(["serve", "--addr", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path())
        .env_remove("SITEHOST_STORE")
        .output()
        .expect("a second sitehost serve runs");
    assert!(!second.status.success());
    let said = String::from_utf8_lossy(&second.stderr);
    assert!(said.contains("in use by another process"), "{said}");
    let made_id = made.body["id"].as_i64().expect("id");
    let (_, out) = sitehost(
        &["keys", "create", "--account", "acme", "--json"],
        dir.path(),
    );
    let created: Value = serde_json::from_str(out.trim()).expect("json");
    let acme = PartnerClient::new(
        &again.base,
        created["key"].as_str().expect("key"),
        created["secret"].as_str().expect("secret"),
    );
    assert_eq!(
        acme.get(&format!("/api/v2/businesses/{made_id}/"))
            .await
            .expect("get")
            .status,
        200
    );
}

/// The README's Python example, run with requests_oauthlib from the project's virtualenv.
#[tokio::test]
async fn python_partner_example_works_unchanged() {
    let python = match std::env::var("SITEHOST_TEST_PYTHON") {
        Ok(p) => p,
        Err(_) => {
            assert!(
                std::env::var("SITEHOST_TEST_REQUIRE_AWS").is_err(),
                "scripts/test sets SITEHOST_TEST_PYTHON"
            );
            eprintln!("skipped: SITEHOST_TEST_PYTHON is not set (scripts/test sets it)");
            return;
        }
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let server = serve(dir.path());
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/partner.py");
    let out = Command::new(python)
        .arg(example)
        .env("SITEHOST_URL", &server.base)
        .env("SITEHOST_KEY", &server.key)
        .env("SITEHOST_SECRET", &server.secret)
        .output()
        .expect("python runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("total_count 1"), "{stdout}");
    assert!(stdout.contains("soft-deleted"), "{stdout}");
}

#[tokio::test]
async fn files_sweep_removes_an_old_orphan_set_and_says_so() {
    use sitehost::domain::image_record::{variant_path, VARIANTS};
    use sitehost::upload::naming::original_path;

    let dir = tempfile::tempdir().expect("dir");
    let stores = sitehost::store::Stores::embedded(dir.path()).expect("stores");
    let id = stores.records.allocate_image_id().await.expect("id");
    let original = original_path("lost", id, "png");
    let mut paths = vec![original.clone()];
    paths.extend(
        VARIANTS
            .iter()
            .map(|(size, _)| variant_path(&original, size)),
    );
    let legacy = "img/upload/legacy-abcdefghijkl.png".to_string();
    let two_hours_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(7_200);
    for path in paths.iter().chain([&legacy]) {
        stores
            .files
            .as_ref()
            .expect("files")
            .put(path, bytes::Bytes::from_static(b"png"), "image/png")
            .await
            .expect("put");
        std::fs::File::options()
            .write(true)
            .open(dir.path().join("files").join(path))
            .and_then(|f| f.set_modified(two_hours_ago))
            .expect("age the file");
    }
    drop(stores);
    // Staged files past their use expire as the staging bucket's do; a fresh one stays.
    let staging = dir.path().join("files/staging");
    std::fs::create_dir_all(&staging).expect("staging");
    let (old_staged, new_staged) = (staging.join("0a".repeat(16)), staging.join("0b".repeat(16)));
    std::fs::write(&old_staged, b"old").expect("staged");
    std::fs::write(&new_staged, b"new").expect("staged");
    std::fs::File::options()
        .write(true)
        .open(&old_staged)
        .and_then(|f| f.set_modified(two_hours_ago))
        .expect("age the staged file");
    let exists = |p: &String| dir.path().join("files").join(p).exists();
    let set = &original[..original.len() - ".png".len()];

    let (ok, out) = sitehost(&["files", "sweep", "--older-than", "1m"], dir.path());
    assert!(!ok, "a grace period under 5 minutes is refused: {out}");
    let (ok, out) = sitehost(&["files", "sweep", "--dry-run"], dir.path());
    assert!(ok, "{out}");
    assert!(out.contains(&format!("would remove {set}.*")), "{out}");
    assert!(paths.iter().all(exists), "a dry run removes nothing");
    assert!(old_staged.exists(), "a dry run removes no staged file");
    let (ok, out) = sitehost(&["files", "sweep", "--older-than", "90m"], dir.path());
    assert!(ok, "{out}");
    assert!(out.contains(&format!("removed {set}.*")), "{out}");
    assert!(out.contains("(6 files removed)"), "{out}");
    assert!(!paths.iter().any(exists), "the orphan set is gone");
    assert!(exists(&legacy), "a file without an id in its name stays");
    assert!(out.contains("1 expired staged files"), "{out}");
    assert!(!old_staged.exists() && new_staged.exists());
}

/// `SITEHOST_HEADER_TIMEOUT_SECS` reaches the server: a client sending its request head a
/// byte a second is cut off after it.
#[test]
fn serve_cuts_off_a_slow_client_at_the_configured_header_timeout() {
    use std::io::{Read, Write};
    use std::time::{Duration, Instant};
    let dir = tempfile::tempdir().expect("temp dir");
    let server = serve_with_env(dir.path(), &[("SITEHOST_HEADER_TIMEOUT_SECS", "1")]);
    let addr = server.base.trim_start_matches("http://").to_string();
    let mut stream = std::net::TcpStream::connect(&addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_millis(50)))
        .expect("read timeout");
    let started = Instant::now();
    let mut closed_after = None;
    for byte in b"GET /api/v2/businesses/ HTTP/1.1\r\nHost: x\r\n"
        .iter()
        .cycle()
        .take(10)
    {
        // Past the deadline the server has hung up: the write or the read says so.
        if stream.write_all(&[*byte]).is_err() {
            closed_after = Some(started.elapsed());
            break;
        }
        let mut buf = [0u8; 256];
        let waited = Instant::now();
        let mut hung_up = false;
        while waited.elapsed() < Duration::from_secs(1) {
            match stream.read(&mut buf) {
                Ok(0) => {
                    hung_up = true;
                    break;
                }
                // A 408 before the close is fine too.
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(_) => {
                    hung_up = true;
                    break;
                }
            }
        }
        if hung_up {
            closed_after = Some(started.elapsed());
            break;
        }
    }
    let closed_after = closed_after.expect("the server kept a one-byte-a-second client for 10 s");
    assert!(
        closed_after < Duration::from_secs(4),
        "closed only after {closed_after:?}"
    );
}

/// A malformed server setting stops `serve` at start, naming the variable.
#[test]
fn serve_refuses_a_malformed_limit_at_start() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = Command::new(BIN)
        .args(["serve", "--addr", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path())
        .env_remove("SITEHOST_STORE")
        .env("SITEHOST_MAX_UPLOADS", "0")
        .output()
        .expect("sitehost serve runs");
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("SITEHOST_MAX_UPLOADS must be a positive whole number"),
        "{said}"
    );
}

/// A malformed log setting stops the command before it does anything, naming the variable.
#[test]
fn a_malformed_log_setting_stops_the_command() {
    let dir = tempfile::tempdir().expect("temp dir");
    for (name, value) in [
        ("SITEHOST_LOG_FORMAT", "jsno"),
        ("RUST_LOG", "sitehost=loud"),
    ] {
        let out = Command::new(BIN)
            .args(["keys", "list", "--data-dir"])
            .arg(dir.path())
            .env_remove("SITEHOST_STORE")
            .env(name, value)
            .output()
            .expect("sitehost runs");
        assert!(!out.status.success(), "{name}={value}");
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(said.contains(&format!("{name} must be")), "{said}");
        // Nothing was done: no store was opened.
        assert!(!dir.path().join("sitehost.db").exists());
    }
}

/// The embedded store's files keep no versions: `files restore` says so and fails, for a
/// dry run too.
#[test]
fn files_restore_on_the_embedded_store_says_it_has_no_versions() {
    let dir = tempfile::tempdir().expect("dir");
    for args in [
        &["files", "restore"][..],
        &["files", "restore", "--dry-run"],
    ] {
        let out = Command::new(BIN)
            .args(args)
            .arg("--data-dir")
            .arg(dir.path())
            .env_remove("SITEHOST_STORE")
            .output()
            .expect("sitehost runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{stderr}");
        assert!(
            stderr.contains("keeps no earlier versions of its files"),
            "{stderr}"
        );
    }
}

/// `sitehost locations backfill` runs on the embedded store, whose location rows carry
/// their business already: it only counts them (the DynamoDB pass is a store contract case).
#[test]
fn locations_backfill_on_the_embedded_store_counts_them() {
    let dir = tempfile::tempdir().expect("dir");
    let out = Command::new(BIN)
        .args(["locations", "backfill", "--data-dir"])
        .arg(dir.path())
        .env_remove("SITEHOST_STORE")
        .output()
        .expect("sitehost runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("0 locations of 0 businesses are findable by id"),
        "{stdout}"
    );
}

/// Every `sitehost` command in docs/operations.md's code blocks is one the command
/// accepts: its subcommands and options parse (placeholders such as `<table>` stand for
/// values, optional parts in `[...]` are taken). `--help` stops before anything runs.
#[test]
fn the_operations_runbook_uses_only_commands_the_cli_has() {
    let doc = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/operations.md"),
    )
    .expect("docs/operations.md");
    let mut fenced = false;
    let mut checked = Vec::new();
    for line in doc.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        let line = line.split(" #").next().unwrap_or_default().trim();
        let Some(args) = line.strip_prefix("sitehost ").filter(|_| fenced) else {
            continue;
        };
        let args: Vec<String> = args
            .replace(['[', ']'], " ")
            .split_whitespace()
            .map(|arg| {
                if arg.contains('<') {
                    "X".to_string()
                } else {
                    arg.to_string()
                }
            })
            .collect();
        let out = Command::new(BIN)
            .args(&args)
            .arg("--help")
            .output()
            .expect("sitehost runs");
        assert!(
            out.status.success(),
            "docs/operations.md: `{line}`: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        checked.push(args[..2].join(" "));
    }
    for command in ["files restore", "files sweep", "keys create", "keys revoke"] {
        assert!(
            checked.iter().any(|c| c == command),
            "docs/operations.md shows `sitehost {command}`: {checked:?}"
        );
    }
}

/// `serve`'s log written to a file (not a terminal) is plain text: no colour codes.
#[tokio::test]
async fn serve_logs_to_a_file_without_colour_codes() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    let dir = tempfile::tempdir().expect("temp dir");
    let log_path = dir.path().join("serve.log");
    let mut child = Command::new(BIN)
        .args(["serve", "--addr", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path().join("data"))
        .env_remove("SITEHOST_STORE")
        .env_remove("NO_COLOR")
        .env("RUST_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log_path).expect("log file"))
        .spawn()
        .expect("sitehost serve starts");
    // Kept open to the end: the server's stdout stays readable.
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let base = lines
        .by_ref()
        .map_while(Result::ok)
        .find_map(|line| {
            let address = line.strip_prefix("sitehost listening on ")?;
            Some(address.trim().trim_end_matches("/api/v2/").to_string())
        })
        .expect("serve printed its address");
    // An unsigned request: a 401, and its request log line.
    let client = PartnerClient::new(&base, "no-such-key", "no-secret");
    let answer = client.get("/api/v2/businesses/").await.unwrap_or_else(|e| {
        let log = std::fs::read_to_string(&log_path).unwrap_or_default();
        panic!("request: {e}; serve's log: {log}")
    });
    assert_eq!(answer.status, 401);
    let mut log = String::new();
    for _ in 0..50 {
        log = std::fs::read_to_string(&log_path).expect("log");
        if log.contains("401") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let _ = child.kill();
    let _ = child.wait();
    drop(lines);
    assert!(log.contains("401"), "the request was logged: {log}");
    assert!(
        !log.contains('\u{1b}'),
        "colour codes in a log file: {log:?}"
    );
}

/// Deployed, `GET /api/v2/` has no route of its own: API Gateway's `$default` route brings
/// it to `business-get` (template.yaml), whose app answers the API root as `serve` does,
/// unsigned and before the origin check, like the router's 404.
#[tokio::test]
async fn the_default_routes_function_answers_the_api_root() {
    let dir = tempfile::tempdir().expect("temp dir");
    let app = crate::support::function_app(dir.path(), &[]);
    let request = http::Request::get("/api/v2/")
        .header("host", "d111111abcdef8.cloudfront.net")
        .body(bytes::Bytes::new())
        .expect("request");
    let answer = app
        .handle_operation(sitehost::api::Operation::BusinessGet, request)
        .await;
    assert_eq!(answer.status(), 200);
    let root: Value = serde_json::from_slice(answer.body()).expect("JSON");
    assert_eq!(root["images"]["list_endpoint"], "/api/v2/images/");
}

//! The API reference page of `sitehost serve` (`/docs/`), rendered by a real browser:
//! headless Chromium loads it from the server, offline, and every operation of
//! docs/openapi.json must appear in the rendered page.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::serve;
/// The test script installs Debian's `chromium`; this names another binary.
const CHROMIUM_VAR: &str = "SITEHOST_TEST_CHROMIUM";
/// Set by `scripts/test` when it found or installed Chromium: a missing binary then fails.
const REQUIRE_CHROMIUM_VAR: &str = "SITEHOST_TEST_REQUIRE_CHROMIUM";

/// The Chromium binary, or `None` (after saying so) when there is none and the run does
/// not require it (`scripts/test` does where it could install it).
pub(crate) fn chromium() -> Option<String> {
    let binary = std::env::var(CHROMIUM_VAR).unwrap_or_else(|_| "chromium".into());
    let found = Command::new(&binary)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if found {
        return Some(binary);
    }
    assert!(
        std::env::var(REQUIRE_CHROMIUM_VAR).as_deref() != Ok("1"),
        "no {binary}: install it (apt-get install -y chromium) or set {CHROMIUM_VAR}"
    );
    eprintln!("skipped: no {binary} (install Chromium, or set {CHROMIUM_VAR} to its binary)");
    None
}

/// Runs headless Chromium on `url` with `args`, killed after a minute at most.
pub(crate) fn headless(
    binary: &str,
    profile: &Path,
    url: &str,
    args: &[&str],
) -> std::process::Output {
    let mut child = Command::new(binary)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--virtual-time-budget=20000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(url)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromium starts");
    let started = Instant::now();
    let mut stdout = child.stdout.take().expect("stdout");
    let reader = std::thread::spawn(move || {
        let mut out = Vec::new();
        let _ = std::io::Read::read_to_end(&mut stdout, &mut out);
        out
    });
    loop {
        if let Some(status) = child.try_wait().expect("chromium runs") {
            let stdout = reader.join().expect("reader");
            return std::process::Output {
                status,
                stdout,
                stderr: Vec::new(),
            };
        }
        if started.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("chromium did not finish within a minute on {url}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn the_reference_page_renders_every_operation() {
    let Some(chromium) = chromium() else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let server = serve(&dir.path().join("data"));
    let profile = dir.path().join("chromium-profile");
    let page = format!("{}/docs/", server.base);
    let out = headless(&chromium, &profile, &page, &["--dump-dom"]);
    assert!(out.status.success(), "chromium failed on {page}");
    let dom = String::from_utf8_lossy(&out.stdout);

    let doc: Value = serde_json::from_str(
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/openapi.json"),
        )
        .expect("docs/openapi.json"),
    )
    .expect("JSON");
    let mut operations = 0;
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, operation) in item.as_object().expect("path item") {
            let Some(id) = operation.get("operationId").and_then(Value::as_str) else {
                continue;
            };
            operations += 1;
            let summary = operation["summary"].as_str().expect("summary");
            // Redoc gives each operation a section `operation/<operationId>` with its summary
            // as the heading.
            assert!(
                dom.contains(&format!("operation/{id}\"")),
                "{method} {path}: no section for {id} in the rendered page"
            );
            assert!(
                dom.contains(&format!(">{summary}<")),
                "{method} {path}: its summary '{summary}' is not in the rendered page"
            );
        }
    }
    // Every operation, plus the singular spellings of business create and update.
    assert_eq!(
        operations,
        sitehost::api::Operation::ALL.len() + 2,
        "the document's operations"
    );
    // The signing example is on the page too.
    assert!(dom.contains("mN/RykDy7Jq/1oWjGNur6Hzwe6Y="));
}

//! Partner code in Node.js against `sitehost serve`: `oauth-1.0a` and `oauth` (node-oauth,
//! which signs `oauth_version="1.0A"`), pinned in `cli/tests/node/package-lock.json`,
//! each driving list, filter, create, update and a base64 upload (`cli/tests/node/partner.mjs`).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::serve;

/// The stamp `npm ci` leaves: the lockfile it installed, so a rerun installs nothing.
const STAMP: &str = "node_modules/.sitehost-lock.json";

fn node_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/node")
}

/// `npm ci` in `cli/tests/node` unless its `node_modules` already holds that lockfile's
/// packages (about a second from the registry; nothing on a rerun).
fn install(dir: &Path) {
    let lock = std::fs::read(dir.join("package-lock.json")).expect("package-lock.json");
    if std::fs::read(dir.join(STAMP)).is_ok_and(|installed| installed == lock) {
        return;
    }
    let out = Command::new("npm")
        .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
        .current_dir(dir)
        .output()
        .expect("npm runs (it comes with node)");
    assert!(
        out.status.success(),
        "npm ci in {} failed:\n{}{}",
        dir.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::write(dir.join(STAMP), lock).expect("write the install stamp");
}

#[test]
fn node_partner_libraries_work_unchanged() {
    if Command::new("node").arg("--version").output().is_err() {
        eprintln!(
            "skipped: `node` is not on PATH; install Node.js (20 or later) to run the Node \
             partner libraries against sitehost serve"
        );
        return;
    }
    let dir = node_dir();
    install(&dir);
    let data = tempfile::tempdir().expect("temp dir");
    let server = serve(data.path());
    let out = Command::new("node")
        .arg("partner.mjs")
        .current_dir(&dir)
        .env("SITEHOST_URL", &server.base)
        .env("SITEHOST_KEY", &server.key)
        .env("SITEHOST_SECRET", &server.secret)
        .output()
        .expect("node runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for library in ["oauth-1.0a", "oauth"] {
        for step in [
            "create 201",
            "list 200",
            "filter 200",
            "update 200",
            "upload 201",
        ] {
            assert!(
                stdout.contains(&format!("{library} {step}\n")),
                "{library} {step}: {stdout}"
            );
        }
    }
}

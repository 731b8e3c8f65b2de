//! What the command tests share: the `sitehost` binary, a running `sitehost serve`, and the
//! app a function runs, in process on a data directory the commands use too.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use sitehost::api::App;
use sitehost::client::PartnerClient;
use sitehost::config::{Config, OriginSecret};
use sitehost::store::Stores;

pub const BIN: &str = env!("CARGO_BIN_EXE_sitehost");

/// The origin-verify secret of [`function_app`] (`SITEHOST_ORIGIN_VERIFY`).
pub const ORIGIN_SECRET: &str = "fixtureOriginVerify0secret0of0the0distribution1";

/// The app of a Lambda function on the embedded store in `data_dir`, configured as on
/// Lambda: https by default, [`ORIGIN_SECRET`], `public_hosts` as `SITEHOST_PUBLIC_HOSTS`,
/// and the real clock. Each call opens the store afresh, so it sees what `sitehost`
/// commands wrote there meanwhile.
pub fn function_app(data_dir: &Path, public_hosts: &[&str]) -> App {
    let stores = Stores::embedded(data_dir).expect("stores");
    let mut config = Config::embedded(data_dir.into());
    config.default_scheme = "https".into();
    config.public_hosts = public_hosts.iter().map(|h| h.to_string()).collect();
    config.origin_verify = OriginSecret::new(ORIGIN_SECRET);
    App::new(stores, config).expect("app")
}

/// A `sitehost serve` on a free port, stopped when dropped; `key` and `secret` are the key
/// it created for a new data directory (empty for an existing one).
pub struct Serve {
    child: Child,
    pub base: String,
    pub key: String,
    pub secret: String,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Serve {
    /// Uploads `bytes` as base64 under `name` into site 7 with the serve's key, and answers
    /// the image object (the upload must be a 201).
    pub async fn upload(&self, name: &str, bytes: &[u8]) -> serde_json::Value {
        use base64::Engine;
        let client = PartnerClient::new(&self.base, &self.key, &self.secret);
        let file = base64::engine::general_purpose::STANDARD.encode(bytes);
        let made = client
            .post(
                "/api/v2/images/",
                &serde_json::json!({"upload": {"name": name, "file": file}, "site_id": 7}),
            )
            .await
            .expect("upload");
        assert_eq!(made.status, 201, "{}", made.body);
        made.body
    }
}

pub fn serve(data_dir: &Path) -> Serve {
    serve_with_env(data_dir, &[])
}

pub fn serve_with_env(data_dir: &Path, env: &[(&str, &str)]) -> Serve {
    let mut child = Command::new(BIN)
        .args(["serve", "--addr", "127.0.0.1:0", "--data-dir"])
        .arg(data_dir)
        .env_remove("SITEHOST_STORE")
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("sitehost serve starts");
    let stdout = child.stdout.take().expect("stdout");
    let (mut key, mut secret, mut base) = (String::new(), String::new(), String::new());
    let mut reference = String::new();
    for line in BufReader::new(stdout).lines() {
        let line = line.expect("line");
        if let Some(v) = line.trim().strip_prefix("key:") {
            key = v.trim().to_string();
        } else if let Some(v) = line.trim().strip_prefix("secret:") {
            secret = v.trim().to_string();
        } else if let Some(v) = line.strip_prefix("sitehost listening on ") {
            base = v.trim().trim_end_matches("/api/v2/").to_string();
        } else if let Some(v) = line.trim().strip_prefix("API reference:") {
            // Printed with the address, in the same write.
            reference = v.trim().to_string();
            break;
        }
    }
    assert!(!base.is_empty(), "serve printed its address");
    assert_eq!(
        reference,
        format!("{base}/docs/"),
        "serve printed the reference's address"
    );
    Serve {
        child,
        base,
        key,
        secret,
    }
}

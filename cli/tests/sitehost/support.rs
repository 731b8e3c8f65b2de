//! What the command tests share: the `sitehost` binary and a running `sitehost serve`.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

pub const BIN: &str = env!("CARGO_BIN_EXE_sitehost");

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
    for line in BufReader::new(stdout).lines() {
        let line = line.expect("line");
        if let Some(v) = line.trim().strip_prefix("key:") {
            key = v.trim().to_string();
        } else if let Some(v) = line.trim().strip_prefix("secret:") {
            secret = v.trim().to_string();
        } else if let Some(v) = line.strip_prefix("sitehost listening on ") {
            base = v.trim().trim_end_matches("/api/v2/").to_string();
            break;
        }
    }
    assert!(!base.is_empty(), "serve printed its address");
    Serve {
        child,
        base,
        key,
        secret,
    }
}

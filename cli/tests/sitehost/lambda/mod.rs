//! The Lambda side of the project as an operator or partner meets it outside AWS:
//! `sitehost events sign` (re-signs `events/` for now), and the real function
//! binaries under a Lambda Runtime API (`sitehost lambda invoke`), on moto. This module holds
//! what the two share.

mod events_sign;
mod invoke;

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::BIN;

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

//! Runs JavaScript (the template's CloudFront Functions) with the machine's `node`.

/// Runs `script` with `node -e` and parses what it printed as JSON; `None` (and a note on
/// stderr) when node is not installed, so the caller skips its checks.
pub fn run_json(script: &str) -> Option<serde_json::Value> {
    let output = match std::process::Command::new("node")
        .args(["-e", script])
        .output()
    {
        Ok(output) => output,
        Err(_) => {
            eprintln!("skipped running the CloudFront Function: node is not installed");
            return None;
        }
    };
    assert!(
        output.status.success(),
        "node: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    Some(serde_json::from_slice(&output.stdout).expect("the function's results as JSON"))
}

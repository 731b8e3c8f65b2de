//! `sitehost lambda invoke` (hidden; `scripts/invoke`, `scripts/bench-init` and the tests use
//! it): a function binary under the local Runtime API of [`crate::local_lambda`], with its
//! environment as `sam local invoke` sets it, and its answers printed as that prints them.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use bytes::Bytes;
use clap::Subcommand;
use serde_json::{json, Value};

use crate::local_lambda::runtime_api::Outcome;
use crate::local_lambda::{invoke, Init, Report, Run};

#[derive(Subcommand)]
pub enum LambdaCommand {
    /// Runs a function binary under a local Lambda Runtime API and invokes it with each
    /// event in turn on the same process (the first cold, the rest warm), printing each
    /// response as `sam local invoke` does and a REPORT line with the init and invocation
    /// times on standard error. The function's environment is only what the Runtime API
    /// sets, AWS credentials and region from this environment, the function's entry of a
    /// SAM `--env-vars` file, and `--env`, in that order.
    Invoke {
        /// The function binary, e.g. target/debug/business-list.
        binary: PathBuf,
        /// API Gateway event files (re-signed with `sitehost events sign`).
        #[arg(required = true)]
        events: Vec<PathBuf>,
        /// A `sam local invoke --env-vars` file (env-vars.json).
        #[arg(long, value_name = "FILE")]
        env_vars: Option<PathBuf>,
        /// The function's entry in that file; by default from the binary's name
        /// (business-list: BusinessListFunction).
        #[arg(long)]
        function_id: Option<String>,
        /// One more variable, over the file's.
        #[arg(long = "env", value_name = "NAME=VALUE")]
        env: Vec<String>,
        /// Prints one JSON object with the init and each invocation instead.
        #[arg(long)]
        json: bool,
        /// Leaves the function's own log lines out.
        #[arg(long)]
        quiet: bool,
        /// Longest wait for the cold start and for each invocation, in seconds.
        #[arg(long, default_value_t = 30)]
        timeout_secs: u64,
    },
}

/// Runs `sitehost lambda ...`.
pub async fn run(command: LambdaCommand) -> Result<()> {
    let LambdaCommand::Invoke {
        binary,
        events,
        env_vars,
        function_id,
        env,
        json,
        quiet,
        timeout_secs,
    } = command;
    let package = binary
        .file_name()
        .and_then(|n| n.to_str())
        .context("the binary has no name")?
        .to_string();
    let id = function_id.unwrap_or_else(|| logical_id(&package));
    let vars = function_env(env_vars.as_deref(), &id, &env)?;
    let events = events
        .iter()
        .map(|path| {
            std::fs::read(path)
                .map(Bytes::from)
                .with_context(|| format!("{}", path.display()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let report = invoke(Run {
        binary,
        args: Vec::new(),
        name: id,
        env: vars,
        events,
        timeout: Duration::from_secs(timeout_secs),
        show_logs: !quiet,
    })
    .await?;
    if json {
        println!("{}", report_json(&report));
    } else {
        print_report(&report);
    }
    match report.init {
        Init::Ready(_) => Ok(()),
        Init::Failed { error_type, .. } => Err(anyhow!("init error ({error_type})")),
        Init::Silent(why) => Err(anyhow!(why)),
    }
}

/// The function's environment, each later source over the earlier: what `sam local invoke`
/// passes from the caller's session, the function's entry of the `--env-vars` file, and
/// `--env`.
fn function_env(
    env_vars: Option<&Path>,
    logical_id: &str,
    env: &[String],
) -> Result<Vec<(String, String)>> {
    let mut vars: Vec<(String, String)> = Vec::new();
    let set = |vars: &mut Vec<(String, String)>, name: &str, value: String| {
        vars.retain(|(n, _)| n != name);
        vars.push((name.to_string(), value));
    };
    for name in [
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_REGION",
    ] {
        if let Ok(value) = std::env::var(name) {
            set(&mut vars, name, value);
        }
    }
    if !vars.iter().any(|(n, _)| n == "AWS_REGION") {
        set(&mut vars, "AWS_REGION", "us-east-1".into());
    }
    if let Some(file) = env_vars {
        for (name, value) in env_vars_file(file, logical_id)? {
            set(&mut vars, &name, value);
        }
    }
    for pair in env {
        let (name, value) = pair
            .split_once('=')
            .ok_or_else(|| anyhow!("--env {pair}: use NAME=VALUE"))?;
        set(&mut vars, name, value.to_string());
    }
    Ok(vars)
}

/// The report as `sam local invoke` prints it: the answers on standard output, a REPORT
/// line with the durations on standard error.
fn print_report(report: &Report) {
    match &report.init {
        Init::Ready(_) => {}
        Init::Failed { body, .. } => println!("{body}"),
        Init::Silent(why) => eprintln!("{why}"),
    }
    for invocation in &report.invocations {
        match &invocation.outcome {
            Outcome::Response(body) | Outcome::Error(body) => println!("{body}"),
        }
    }
    let ms = |d: &Duration| format!("{:.2} ms", d.as_secs_f64() * 1000.0);
    let mut line = String::from("REPORT");
    if let Init::Ready(init) = &report.init {
        line += &format!("\tInit Duration: {}", ms(init));
    }
    for invocation in &report.invocations {
        line += &format!("\tDuration: {}", ms(&invocation.duration));
    }
    eprintln!("{line}");
}

/// `business-list` -> `BusinessListFunction`: the template's logical id of a function
/// package, the key of its entry in a `sam local invoke --env-vars` file.
fn logical_id(package: &str) -> String {
    let mut id: String = package
        .split('-')
        .map(|part| {
            let mut chars = part.chars();
            chars
                .next()
                .map(|c| c.to_ascii_uppercase().to_string() + chars.as_str())
                .unwrap_or_default()
        })
        .collect();
    id.push_str("Function");
    id
}

/// The variables of a SAM `--env-vars` file for one function: its `Parameters` (for all
/// functions), then its own entry, which wins.
fn env_vars_file(path: &Path, logical_id: &str) -> Result<Vec<(String, String)>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("{}", path.display()))?;
    let doc: Value =
        serde_json::from_str(&text).with_context(|| format!("{}: not JSON", path.display()))?;
    let mut vars: Vec<(String, String)> = Vec::new();
    for section in [&doc["Parameters"], &doc[logical_id]] {
        if let Some(map) = section.as_object() {
            for (name, value) in map {
                let value = match value {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                vars.retain(|(n, _)| n != name);
                vars.push((name.clone(), value));
            }
        }
    }
    if doc[logical_id].is_null() {
        return Err(anyhow!("{}: no entry for {logical_id}", path.display()));
    }
    Ok(vars)
}

/// The report as one JSON object (`--json`): for the tests and `scripts/bench-init`.
fn report_json(report: &Report) -> Value {
    let ms = |d: &Duration| d.as_secs_f64() * 1000.0;
    let init = match &report.init {
        Init::Ready(d) => json!({"ms": ms(d)}),
        Init::Failed { error_type, body } => {
            json!({"error": {"header": error_type, "body": body}})
        }
        Init::Silent(why) => json!({"silent": why}),
    };
    let invocations: Vec<Value> = report
        .invocations
        .iter()
        .map(|i| match &i.outcome {
            Outcome::Response(body) => json!({"ms": ms(&i.duration), "response": body}),
            Outcome::Error(body) => json!({"ms": ms(&i.duration), "error": body}),
        })
        .collect();
    json!({"init": init, "invocations": invocations})
}

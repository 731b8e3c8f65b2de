//! `sitehost lambda invoke` (hidden; `scripts/invoke`, `scripts/bench-init` and the tests use
//! it): runs a real function binary the way Lambda does, under a small implementation of
//! the Lambda Runtime API, and hands it events one after another on the same process.
//!
//! The Runtime API (<https://docs.aws.amazon.com/lambda/latest/dg/runtimes-api.html>):
//! `GET /2018-06-01/runtime/invocation/next` blocks until there is an event;
//! `POST .../invocation/{id}/response` and `.../{id}/error` answer it;
//! `POST /2018-06-01/runtime/init/error` reports a failed cold start.

use std::collections::HashMap;
use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, Context, Result};
use bytes::Bytes;
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::{Method, Request, Response, StatusCode};
use serde_json::{json, Value};
use tokio::sync::{mpsc, oneshot, Mutex};

/// What the function reported for one invocation.
#[derive(Debug)]
pub enum Outcome {
    /// `POST .../response`: the body (an API Gateway v2 response object).
    Response(Value),
    /// `POST .../error`: the error document.
    Error(Value),
}

/// What happened before the first event.
#[derive(Debug)]
pub enum Init {
    /// The function asked for its first event this long after it was started.
    Ready(Duration),
    /// It posted `/runtime/init/error`: the `Lambda-Runtime-Function-Error-Type` header
    /// and the body.
    Failed { error_type: String, body: Value },
    /// It exited (or hung) without either.
    Silent(String),
}

#[derive(Debug)]
pub struct Invocation {
    pub outcome: Outcome,
    /// From handing the event over to the response.
    pub duration: Duration,
}

#[derive(Debug)]
pub struct Report {
    pub init: Init,
    pub invocations: Vec<Invocation>,
}

/// How to run one function.
pub struct Run {
    pub binary: PathBuf,
    /// The function's name (`AWS_LAMBDA_FUNCTION_NAME`).
    pub name: String,
    /// Its environment besides the Runtime API's own variables; nothing else is inherited.
    pub env: Vec<(String, String)>,
    /// Events, handed over in order once the previous one is answered.
    pub events: Vec<Bytes>,
    /// Longest wait for the cold start, and for each invocation.
    pub timeout: Duration,
    /// Where the function's own output goes: inherited, or dropped.
    pub show_logs: bool,
}

type Pending = HashMap<String, oneshot::Sender<Outcome>>;

enum Signal {
    FirstNext(Instant),
    InitError { error_type: String, body: Value },
}

struct State {
    events: Mutex<mpsc::Receiver<(String, Bytes)>>,
    pending: Mutex<Pending>,
    signals: mpsc::UnboundedSender<Signal>,
    function_arn: String,
    timeout: Duration,
}

/// Lambda's limit on what a function answers one invocation with (its "6 MB"): past it the
/// Runtime API refuses the response with a 413 and the caller gets
/// `Function.ResponseSizeTooLarge`. Held here too, so a function that would fail on Lambda
/// fails here, and a runaway one cannot fill this process's memory.
pub const RESPONSE_LIMIT_BYTES: usize = 6_291_556;

fn reply(status: StatusCode, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body.into()));
    *response.status_mut() = status;
    response
}

/// One Runtime API request (generic over the body so the tests can hand it one directly).
async fn serve_request<B>(
    state: Arc<State>,
    request: Request<B>,
) -> Result<Response<Full<Bytes>>, Infallible>
where
    B: hyper::body::Body,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let method = request.method().clone();
    let path = request.uri().path().to_string();
    let error_type = request
        .headers()
        .get("lambda-runtime-function-error-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let body = match Limited::new(request.into_body(), RESPONSE_LIMIT_BYTES)
        .collect()
        .await
    {
        Ok(body) => body.to_bytes(),
        Err(err) if err.downcast_ref::<LengthLimitError>().is_some() => {
            return Ok(too_large(&state, &path).await)
        }
        Err(_) => return Ok(reply(StatusCode::BAD_REQUEST, "unreadable body")),
    };
    let parse = |bytes: &Bytes| {
        serde_json::from_slice(bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(bytes).into_owned()))
    };
    let rest = path.strip_prefix("/2018-06-01/runtime/");
    Ok(match (method, rest) {
        (Method::GET, Some("invocation/next")) => {
            let _ = state.signals.send(Signal::FirstNext(Instant::now()));
            // One `next` waits at a time, as a Lambda execution environment has one.
            let next = state.events.lock().await.recv().await;
            let Some((id, event)) = next else {
                // No more events: Lambda would freeze the process here; we stop it.
                std::future::pending::<()>().await;
                unreachable!()
            };
            let deadline = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default()
                + state.timeout;
            let mut response = reply(StatusCode::OK, event);
            let headers = response.headers_mut();
            let mut set = |name: &'static str, value: String| {
                if let Ok(value) = value.parse() {
                    headers.insert(name, value);
                }
            };
            set("lambda-runtime-aws-request-id", id);
            set(
                "lambda-runtime-deadline-ms",
                deadline.as_millis().to_string(),
            );
            set(
                "lambda-runtime-invoked-function-arn",
                state.function_arn.clone(),
            );
            set(
                "lambda-runtime-trace-id",
                "Root=1-00000000-000000000000000000000000;Sampled=0".into(),
            );
            set("content-type", "application/json".into());
            response
        }
        (Method::POST, Some("init/error")) => {
            let _ = state.signals.send(Signal::InitError {
                error_type,
                body: parse(&body),
            });
            reply(StatusCode::ACCEPTED, r#"{"status":"OK"}"#)
        }
        (Method::POST, Some(rest)) => {
            let answer = rest
                .strip_prefix("invocation/")
                .and_then(|r| r.rsplit_once('/'))
                .map(|(id, kind)| (id.to_string(), kind));
            match answer {
                Some((id, kind @ ("response" | "error"))) => {
                    match state.pending.lock().await.remove(&id) {
                        Some(waiter) => {
                            let outcome = if kind == "response" {
                                Outcome::Response(parse(&body))
                            } else {
                                Outcome::Error(parse(&body))
                            };
                            let _ = waiter.send(outcome);
                            reply(StatusCode::ACCEPTED, r#"{"status":"OK"}"#)
                        }
                        None => reply(
                            StatusCode::BAD_REQUEST,
                            r#"{"errorMessage":"unknown or answered request id","errorType":"InvalidRequestID"}"#,
                        ),
                    }
                }
                _ => reply(StatusCode::NOT_FOUND, "no such Runtime API path"),
            }
        }
        _ => reply(StatusCode::NOT_FOUND, "no such Runtime API path"),
    })
}

/// A response or error over [`RESPONSE_LIMIT_BYTES`]: the invocation fails as it does on
/// Lambda, and the function is told 413.
async fn too_large(state: &State, path: &str) -> Response<Full<Bytes>> {
    let id = path
        .strip_prefix("/2018-06-01/runtime/invocation/")
        .and_then(|rest| rest.rsplit_once('/'))
        .map(|(id, _)| id);
    if let Some(waiter) = match id {
        Some(id) => state.pending.lock().await.remove(id),
        None => None,
    } {
        let _ = waiter.send(Outcome::Error(json!({
            "errorType": "Function.ResponseSizeTooLarge",
            "errorMessage": format!(
                "Response payload size exceeded maximum allowed payload size \
                 ({RESPONSE_LIMIT_BYTES} bytes)."
            ),
        })));
    }
    reply(
        StatusCode::PAYLOAD_TOO_LARGE,
        json!({
            "errorMessage": format!("the payload is over {RESPONSE_LIMIT_BYTES} bytes"),
            "errorType": "RequestEntityTooLarge",
        })
        .to_string(),
    )
}

/// Starts the Runtime API on a loopback port, then the function, feeds it the events and
/// stops it.
pub async fn invoke(run: Run) -> Result<Report> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .context("cannot listen for the Runtime API")?;
    let address = listener.local_addr()?;
    let (event_tx, event_rx) = mpsc::channel(1);
    let (signal_tx, mut signals) = mpsc::unbounded_channel();
    let state = Arc::new(State {
        events: Mutex::new(event_rx),
        pending: Mutex::new(HashMap::new()),
        signals: signal_tx,
        function_arn: format!(
            "arn:aws:lambda:us-east-1:123456789012:function:{}",
            run.name
        ),
        timeout: run.timeout,
    });
    let server_state = Arc::clone(&state);
    let server = tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let state = Arc::clone(&server_state);
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |request| {
                    serve_request(Arc::clone(&state), request)
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
            });
        }
    });

    let output = || {
        if run.show_logs {
            Stdio::inherit()
        } else {
            Stdio::null()
        }
    };
    let started = Instant::now();
    let mut child = tokio::process::Command::new(&run.binary)
        .env_clear()
        .envs(run.env.iter().map(|(k, v)| (k, v)))
        .env("AWS_LAMBDA_RUNTIME_API", address.to_string())
        .env("AWS_LAMBDA_FUNCTION_NAME", &run.name)
        .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "1024")
        .env("AWS_LAMBDA_INITIALIZATION_TYPE", "on-demand")
        // Function logs go to our standard error, as `sam local invoke` prints them.
        .stdout(if run.show_logs {
            Stdio::from(std::io::stderr())
        } else {
            Stdio::null()
        })
        .stderr(output())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("cannot start {}", run.binary.display()))?;

    let init = tokio::select! {
        signal = signals.recv() => match signal {
            Some(Signal::FirstNext(at)) => Init::Ready(at - started),
            Some(Signal::InitError { error_type, body }) => Init::Failed { error_type, body },
            None => Init::Silent("the Runtime API stopped".into()),
        },
        status = child.wait() => Init::Silent(match status {
            Ok(status) => format!("the function exited ({status}) without asking for an event or reporting an init error"),
            Err(e) => e.to_string(),
        }),
        _ = tokio::time::sleep(run.timeout) => Init::Silent(format!("no call to the Runtime API within {:?}", run.timeout)),
    };
    if !matches!(init, Init::Ready(_)) {
        // A failed init is reported before the process exits; let it exit.
        let _ = tokio::time::timeout(Duration::from_secs(2), child.wait()).await;
        let _ = child.kill().await;
        server.abort();
        return Ok(Report {
            init,
            invocations: Vec::new(),
        });
    }

    let mut invocations = Vec::new();
    for (n, event) in run.events.into_iter().enumerate() {
        let id = format!("{:08x}-0000-4000-8000-{:012x}", std::process::id(), n + 1);
        let (done_tx, done_rx) = oneshot::channel();
        state.pending.lock().await.insert(id.clone(), done_tx);
        let handed = Instant::now();
        event_tx
            .send((id, event))
            .await
            .map_err(|_| anyhow!("the Runtime API stopped"))?;
        let outcome = tokio::select! {
            outcome = done_rx => outcome.map_err(|_| anyhow!("the Runtime API stopped"))?,
            status = child.wait() => return Err(anyhow!("the function exited ({}) during invocation {}", status.map(|s| s.to_string()).unwrap_or_default(), n + 1)),
            _ = tokio::time::sleep(run.timeout) => return Err(anyhow!("invocation {} timed out after {:?}", n + 1, run.timeout)),
        };
        invocations.push(Invocation {
            outcome,
            duration: handed.elapsed(),
        });
    }
    let _ = child.kill().await;
    server.abort();
    Ok(Report { init, invocations })
}

/// `business-list` -> `BusinessListFunction`: the template's logical id of a function
/// package, the key of its entry in a `sam local invoke --env-vars` file.
pub fn logical_id(package: &str) -> String {
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
pub fn env_vars_file(path: &Path, logical_id: &str) -> Result<Vec<(String, String)>> {
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
pub fn report_json(report: &Report) -> Value {
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

#[derive(clap::Subcommand)]
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
pub async fn command(command: LambdaCommand) -> Result<()> {
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
    let mut vars: Vec<(String, String)> = Vec::new();
    let set = |vars: &mut Vec<(String, String)>, name: &str, value: String| {
        vars.retain(|(n, _)| n != name);
        vars.push((name.to_string(), value));
    };
    // What `sam local invoke` passes from the caller's session.
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
    if let Some(file) = &env_vars {
        for (name, value) in env_vars_file(file, &id)? {
            set(&mut vars, &name, value);
        }
    }
    for pair in &env {
        let (name, value) = pair
            .split_once('=')
            .ok_or_else(|| anyhow!("--env {pair}: use NAME=VALUE"))?;
        set(&mut vars, name, value.to_string());
    }
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
    match report.init {
        Init::Ready(_) => Ok(()),
        Init::Failed { error_type, .. } => Err(anyhow!("init error ({error_type})")),
        Init::Silent(why) => Err(anyhow!(why)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Runtime API's state with one invocation (`inv-1`) waiting for its answer.
    async fn waiting_for(id: &str) -> (Arc<State>, oneshot::Receiver<Outcome>) {
        let (_events, event_rx) = mpsc::channel(1);
        let (signals, _) = mpsc::unbounded_channel();
        let state = Arc::new(State {
            events: Mutex::new(event_rx),
            pending: Mutex::new(HashMap::new()),
            signals,
            function_arn: "arn:aws:lambda:us-east-1:123456789012:function:test".into(),
            timeout: Duration::from_secs(1),
        });
        let (tx, rx) = oneshot::channel();
        state.pending.lock().await.insert(id.to_string(), tx);
        (state, rx)
    }

    fn post(path: &str, body: Vec<u8>) -> Request<Full<Bytes>> {
        Request::post(path)
            .body(Full::new(Bytes::from(body)))
            .expect("request")
    }

    #[tokio::test]
    async fn a_response_at_lambdas_limit_is_taken_and_one_byte_more_fails_the_invocation() {
        let path = "/2018-06-01/runtime/invocation/inv-1/response";
        let (state, answered) = waiting_for("inv-1").await;
        let at_limit = vec![b'a'; RESPONSE_LIMIT_BYTES];
        let reply = serve_request(state, post(path, at_limit))
            .await
            .expect("reply");
        assert_eq!(reply.status(), StatusCode::ACCEPTED);
        match answered.await.expect("an outcome") {
            Outcome::Response(Value::String(text)) => assert_eq!(text.len(), RESPONSE_LIMIT_BYTES),
            other => panic!("{other:?}"),
        }

        let (state, answered) = waiting_for("inv-1").await;
        let over = vec![b'a'; RESPONSE_LIMIT_BYTES + 1];
        let reply = serve_request(Arc::clone(&state), post(path, over))
            .await
            .expect("reply");
        assert_eq!(reply.status(), StatusCode::PAYLOAD_TOO_LARGE);
        let body = reply.into_body().collect().await.expect("body").to_bytes();
        let body: Value = serde_json::from_slice(&body).expect("JSON");
        assert_eq!(body["errorType"], "RequestEntityTooLarge");
        match answered.await.expect("an outcome") {
            Outcome::Error(error) => {
                assert_eq!(error["errorType"], "Function.ResponseSizeTooLarge");
                assert_eq!(
                    error["errorMessage"],
                    "Response payload size exceeded maximum allowed payload size (6291556 bytes)."
                );
            }
            other => panic!("{other:?}"),
        }
        // The invocation is over: nothing waits for it any more.
        assert!(state.pending.lock().await.is_empty());
    }
}

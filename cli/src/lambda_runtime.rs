//! `sitehost lambda invoke` (hidden; `scripts/invoke`, `scripts/bench-init` and the tests use
//! it): runs a real function binary the way Lambda does, under a small implementation of
//! the Lambda Runtime API, and hands it events one after another on the same process.
//!
//! The Runtime API (<https://docs.aws.amazon.com/lambda/latest/dg/runtimes-api.html>):
//! `GET /2018-06-01/runtime/invocation/next` blocks until there is an event;
//! `POST .../invocation/{id}/response` and `.../{id}/error` answer it;
//! `POST /2018-06-01/runtime/init/error` reports a failed cold start.
//!
//! Another local process can find the loopback port, so the API answers only the function:
//! every path starts with a secret segment (128 random bits) that only the function's
//! environment holds (`AWS_LAMBDA_RUNTIME_API=http://127.0.0.1:PORT/SECRET`; the Rust
//! runtime client puts a base path in front of its paths), and anything else is a 404 before
//! the body is read. Request ids are random version 4 UUIDs, an event is handed to one
//! `next` only, and an answer counts only for the id that was handed out, once. While an
//! event is out unanswered, or another `next` is waiting, a `next` is refused (400): an
//! execution environment asks for one event at a time.

use std::collections::HashMap;
use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
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
    /// Its arguments (none for a function; the tests run their own binary as one).
    pub args: Vec<String>,
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

/// An invocation not answered yet.
struct Waiting {
    /// Whether a `next` has taken its event; only then is an answer for it taken.
    handed_out: bool,
    done: oneshot::Sender<Outcome>,
}

type Pending = HashMap<String, Waiting>;

enum Signal {
    FirstNext(Instant),
    InitError { error_type: String, body: Value },
}

struct State {
    /// The secret first path segment, in the function's `AWS_LAMBDA_RUNTIME_API` only.
    secret: String,
    events: Mutex<mpsc::Receiver<(String, Bytes)>>,
    /// A `next` is waiting for an event.
    next_waiting: AtomicBool,
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

/// 128 bits from rand's thread generator (a CSPRNG, ChaCha seeded from the operating
/// system), in hex: the API's secret path segment.
fn secret_segment() -> String {
    format!("{:032x}", rand::random::<u128>())
}

/// A request id as Lambda's look: a version 4 UUID, 122 random bits from the same generator.
fn request_id() -> String {
    let bits = rand::random::<u128>();
    let bits = (bits & !(0xf << 76)) | (0x4 << 76); // version 4
    let bits = (bits & !(0x3 << 62)) | (0x2 << 62); // RFC 4122 variant
    format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        bits >> 96,
        (bits >> 80) & 0xffff,
        (bits >> 64) & 0xffff,
        (bits >> 48) & 0xffff,
        bits & 0xffff_ffff_ffff
    )
}

/// Whether `presented` is the secret, without stopping at the first differing byte.
fn is_secret(presented: &str, secret: &str) -> bool {
    presented.len() == secret.len()
        && presented
            .bytes()
            .zip(secret.bytes())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
}

/// Clears [`State::next_waiting`] when the `next` ends, answered or not (its connection
/// closed).
struct NextSlot<'a>(&'a AtomicBool);

impl Drop for NextSlot<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

fn invalid(message: &str) -> Response<Full<Bytes>> {
    reply(
        StatusCode::BAD_REQUEST,
        json!({"errorMessage": message, "errorType": "InvalidRequestID"}).to_string(),
    )
}

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
    // `/SECRET/2018-06-01/runtime/...`: anything else is not the function.
    let path = match request
        .uri()
        .path()
        .strip_prefix('/')
        .and_then(|p| p.split_once('/'))
    {
        Some((secret, rest)) if is_secret(secret, &state.secret) => format!("/{rest}"),
        _ => return Ok(reply(StatusCode::NOT_FOUND, "no such Runtime API path")),
    };
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
            // One `next` at a time, and none while an event is out: an execution
            // environment runs one invocation at a time.
            if state.next_waiting.swap(true, Ordering::SeqCst) {
                return Ok(invalid(
                    "another request is already waiting for the next event",
                ));
            }
            let _slot = NextSlot(&state.next_waiting);
            if state.pending.lock().await.values().any(|w| w.handed_out) {
                return Ok(invalid("the event handed out is not answered yet"));
            }
            let _ = state.signals.send(Signal::FirstNext(Instant::now()));
            let next = state.events.lock().await.recv().await;
            let Some((id, event)) = next else {
                // No more events: Lambda would freeze the process here; we stop it.
                std::future::pending::<()>().await;
                unreachable!()
            };
            if let Some(waiting) = state.pending.lock().await.get_mut(&id) {
                waiting.handed_out = true;
            }
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
                    match take_handed_out(&state, &id).await {
                        Some(done) => {
                            let outcome = if kind == "response" {
                                Outcome::Response(parse(&body))
                            } else {
                                Outcome::Error(parse(&body))
                            };
                            let _ = done.send(outcome);
                            reply(StatusCode::ACCEPTED, r#"{"status":"OK"}"#)
                        }
                        None => invalid("unknown or answered request id"),
                    }
                }
                _ => reply(StatusCode::NOT_FOUND, "no such Runtime API path"),
            }
        }
        _ => reply(StatusCode::NOT_FOUND, "no such Runtime API path"),
    })
}

/// The waiter of invocation `id` if its event was handed out and it is not answered yet;
/// it is answered now.
async fn take_handed_out(state: &State, id: &str) -> Option<oneshot::Sender<Outcome>> {
    let mut pending = state.pending.lock().await;
    if !pending.get(id).is_some_and(|w| w.handed_out) {
        return None;
    }
    pending.remove(id).map(|w| w.done)
}

/// A response or error over [`RESPONSE_LIMIT_BYTES`]: the invocation fails as it does on
/// Lambda, and the function is told 413.
async fn too_large(state: &State, path: &str) -> Response<Full<Bytes>> {
    let id = path
        .strip_prefix("/2018-06-01/runtime/invocation/")
        .and_then(|rest| rest.rsplit_once('/'))
        .map(|(id, _)| id);
    if let Some(waiter) = match id {
        Some(id) => take_handed_out(state, id).await,
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
    invoke_on(listener, run).await
}

/// [`invoke`] on a given listener (the tests know its port).
async fn invoke_on(listener: tokio::net::TcpListener, run: Run) -> Result<Report> {
    let address = listener.local_addr()?;
    let (event_tx, event_rx) = mpsc::channel(1);
    let (signal_tx, mut signals) = mpsc::unbounded_channel();
    let secret = secret_segment();
    let state = Arc::new(State {
        secret: secret.clone(),
        events: Mutex::new(event_rx),
        next_waiting: AtomicBool::new(false),
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
        // The same backoff as `sitehost serve`'s accept loop.
        let mut backoff = sitehost::local::server::AcceptBackoff::default();
        loop {
            let stream = match listener.accept().await {
                Ok((stream, _)) => {
                    backoff.succeeded();
                    stream
                }
                Err(err) => {
                    // Out of file descriptors, mostly: retrying at once would spin.
                    let (log, wait) = backoff.failed(Instant::now());
                    if let Some(left_out) = log {
                        tracing::warn!(
                            error = %err,
                            retry_in_ms = wait.as_millis() as u64,
                            left_out,
                            "the Runtime API cannot accept a connection"
                        );
                    }
                    tokio::time::sleep(wait).await;
                    continue;
                }
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
        .args(&run.args)
        .env_clear()
        .envs(run.env.iter().map(|(k, v)| (k, v)))
        // A URL with the secret as its path, which lambda_runtime_api_client (=1.1.1, as
        // the functions' report of an init error) takes as the base of every request.
        .env(
            "AWS_LAMBDA_RUNTIME_API",
            format!("http://{address}/{secret}"),
        )
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
        let id = request_id();
        let (done, done_rx) = oneshot::channel();
        let waiting = Waiting {
            handed_out: false,
            done,
        };
        state.pending.lock().await.insert(id.clone(), waiting);
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

    const SECRET: &str = "0123456789abcdef0123456789abcdef";

    fn state() -> (Arc<State>, mpsc::Sender<(String, Bytes)>) {
        let (events, event_rx) = mpsc::channel(1);
        let (signals, _) = mpsc::unbounded_channel();
        let state = Arc::new(State {
            secret: SECRET.into(),
            events: Mutex::new(event_rx),
            next_waiting: AtomicBool::new(false),
            pending: Mutex::new(HashMap::new()),
            signals,
            function_arn: "arn:aws:lambda:us-east-1:123456789012:function:test".into(),
            timeout: Duration::from_secs(1),
        });
        (state, events)
    }

    /// The Runtime API's state with one invocation (`id`) handed out and waiting for its
    /// answer.
    async fn waiting_for(id: &str) -> (Arc<State>, oneshot::Receiver<Outcome>) {
        let (state, _) = state();
        let (done, rx) = oneshot::channel();
        let waiting = Waiting {
            handed_out: true,
            done,
        };
        state.pending.lock().await.insert(id.to_string(), waiting);
        (state, rx)
    }

    fn path(rest: &str) -> String {
        format!("/{SECRET}/2018-06-01/runtime/{rest}")
    }

    fn get(path: &str) -> Request<Full<Bytes>> {
        Request::get(path)
            .body(Full::new(Bytes::new()))
            .expect("request")
    }

    async fn body_of(response: Response<Full<Bytes>>) -> String {
        let bytes = response
            .into_body()
            .collect()
            .await
            .expect("body")
            .to_bytes();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    #[test]
    fn request_ids_are_random_version_4_uuids() {
        let ids: std::collections::HashSet<String> = (0..1000).map(|_| request_id()).collect();
        assert_eq!(ids.len(), 1000);
        for id in &ids {
            let parts: Vec<&str> = id.split('-').collect();
            assert_eq!(
                parts.iter().map(|p| p.len()).collect::<Vec<_>>(),
                [8, 4, 4, 4, 12],
                "{id}"
            );
            assert!(
                id.chars().all(|c| c == '-' || c.is_ascii_hexdigit()),
                "{id}"
            );
            assert!(parts[2].starts_with('4'), "version 4: {id}");
            assert!(
                matches!(&parts[3][..1], "8" | "9" | "a" | "b"),
                "variant: {id}"
            );
            // Nothing of this process in it (ids used to be its pid and a counter).
            assert!(
                !id.starts_with(&format!("{:08x}", std::process::id())),
                "{id}"
            );
        }
        let a = secret_segment();
        assert_eq!(a.len(), 32);
        assert_ne!(a, secret_segment());
    }

    #[tokio::test]
    async fn only_the_secret_path_is_served_and_nothing_of_the_rest_is_read() {
        let (state, answered) = waiting_for("inv-1").await;
        for wrong in [
            "/2018-06-01/runtime/invocation/inv-1/response".to_string(),
            format!(
                "/{}/2018-06-01/runtime/invocation/inv-1/response",
                &SECRET[1..]
            ),
            format!("/{SECRET}0/2018-06-01/runtime/invocation/inv-1/response"),
            format!("/{SECRET}"),
        ] {
            let reply = serve_request(Arc::clone(&state), post(&wrong, b"{}".to_vec()))
                .await
                .expect("reply");
            assert_eq!(reply.status(), StatusCode::NOT_FOUND, "{wrong}");
        }
        let reply = serve_request(Arc::clone(&state), post(&path("init/error"), vec![]))
            .await
            .expect("reply");
        assert_eq!(reply.status(), StatusCode::ACCEPTED);
        assert!(state.pending.lock().await.contains_key("inv-1"));
        drop(state);
        assert!(answered.await.is_err(), "nothing answered the invocation");
    }

    #[tokio::test]
    async fn an_answer_counts_only_for_the_id_handed_out_and_only_once() {
        let (state, events) = state();
        let (done, mut answered) = oneshot::channel();
        let id = request_id();
        let waiting = Waiting {
            handed_out: false,
            done,
        };
        state.pending.lock().await.insert(id.clone(), waiting);
        let answer = |state: &Arc<State>, id: &str, kind: &str| {
            serve_request(
                Arc::clone(state),
                post(
                    &path(&format!("invocation/{id}/{kind}")),
                    b"{\"a\":1}".to_vec(),
                ),
            )
        };
        // Known, but not handed out yet: refused.
        for kind in ["response", "error"] {
            let reply = answer(&state, &id, kind).await.expect("reply");
            assert_eq!(reply.status(), StatusCode::BAD_REQUEST);
        }
        assert!(answered.try_recv().is_err());

        events
            .send((id.clone(), Bytes::from_static(b"{}")))
            .await
            .expect("queued");
        let next = serve_request(Arc::clone(&state), get(&path("invocation/next")))
            .await
            .expect("reply");
        assert_eq!(next.status(), StatusCode::OK);
        assert_eq!(next.headers()["lambda-runtime-aws-request-id"], id.as_str());

        // Another id: refused, and the invocation still waits.
        let reply = answer(&state, &request_id(), "response")
            .await
            .expect("reply");
        assert_eq!(reply.status(), StatusCode::BAD_REQUEST);
        assert!(answered.try_recv().is_err());
        // Its own: taken, once.
        let reply = answer(&state, &id, "response").await.expect("reply");
        assert_eq!(reply.status(), StatusCode::ACCEPTED);
        assert!(matches!(answered.try_recv(), Ok(Outcome::Response(_))));
        for kind in ["response", "error"] {
            let reply = answer(&state, &id, kind).await.expect("reply");
            assert_eq!(reply.status(), StatusCode::BAD_REQUEST);
            assert!(body_of(reply).await.contains("unknown or answered"));
        }
    }

    #[tokio::test]
    async fn a_second_next_is_refused_while_one_waits_or_an_event_is_out() {
        let (state, events) = state();
        let first = tokio::spawn(serve_request(
            Arc::clone(&state),
            get(&path("invocation/next")),
        ));
        while !state.next_waiting.load(Ordering::SeqCst) {
            tokio::task::yield_now().await;
        }
        let second = serve_request(Arc::clone(&state), get(&path("invocation/next")))
            .await
            .expect("reply");
        assert_eq!(second.status(), StatusCode::BAD_REQUEST);
        assert!(body_of(second).await.contains("already waiting"));

        let id = request_id();
        let (done, _answered) = oneshot::channel();
        let waiting = Waiting {
            handed_out: false,
            done,
        };
        state.pending.lock().await.insert(id.clone(), waiting);
        events
            .send((id, Bytes::from_static(b"{}")))
            .await
            .expect("queued");
        let first = first.await.expect("joined").expect("reply");
        assert_eq!(first.status(), StatusCode::OK);
        assert!(!state.next_waiting.load(Ordering::SeqCst));
        // The event is out and unanswered: no other `next` gets anything.
        let third = serve_request(Arc::clone(&state), get(&path("invocation/next")))
            .await
            .expect("reply");
        assert_eq!(third.status(), StatusCode::BAD_REQUEST);
        assert!(body_of(third).await.contains("not answered yet"));
    }

    fn post(path: &str, body: Vec<u8>) -> Request<Full<Bytes>> {
        Request::post(path)
            .body(Full::new(Bytes::from(body)))
            .expect("request")
    }

    #[tokio::test]
    async fn a_response_at_lambdas_limit_is_taken_and_one_byte_more_fails_the_invocation() {
        let path = &path("invocation/inv-1/response");
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

    // ---- Another local process against the Runtime API: the test binary runs itself as
    // the function (`fake_function`), and plays the other process with only the port. ----

    /// Set (to anything) in the environment of the test binary when it is run as the function.
    const FAKE_FUNCTION: &str = "SITEHOST_TEST_FAKE_FUNCTION";

    /// One HTTP/1.1 exchange on a fresh connection: (status, headers, body); status 0 when
    /// the connection failed or the answer did not come within the read timeout.
    fn exchange(
        authority: &str,
        method: &str,
        path: &str,
        body: &[u8],
        read_timeout: Duration,
    ) -> (u16, Vec<(String, String)>, Vec<u8>) {
        use std::io::{Read, Write};
        let Ok(mut stream) = std::net::TcpStream::connect(authority) else {
            return (0, Vec::new(), Vec::new());
        };
        let _ = stream.set_read_timeout(Some(read_timeout));
        let head = format!(
            "{method} {path} HTTP/1.1\r\nhost: {authority}\r\ncontent-type: application/json\r\n\
             content-length: {}\r\nconnection: close\r\n\r\n",
            body.len()
        );
        if stream.write_all(head.as_bytes()).is_err() || stream.write_all(body).is_err() {
            return (0, Vec::new(), Vec::new());
        }
        let mut raw = Vec::new();
        let _ = stream.read_to_end(&mut raw);
        let Some(split) = raw.windows(4).position(|w| w == b"\r\n\r\n") else {
            return (0, Vec::new(), Vec::new());
        };
        let head = String::from_utf8_lossy(&raw[..split]).into_owned();
        let mut lines = head.split("\r\n");
        let status = lines
            .next()
            .and_then(|l| l.split(' ').nth(1))
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let headers = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        (status, headers, raw[split + 4..].to_vec())
    }

    /// The function: answers each event with `{"echo": event}`, 100 ms after taking it.
    /// Does nothing unless [`FAKE_FUNCTION`] is set (a plain `cargo test` runs it too).
    #[test]
    fn fake_function() {
        if std::env::var(FAKE_FUNCTION).is_err() {
            return;
        }
        let api = std::env::var("AWS_LAMBDA_RUNTIME_API").expect("AWS_LAMBDA_RUNTIME_API");
        let api = api.strip_prefix("http://").unwrap_or(&api);
        let (authority, base) = match api.split_once('/') {
            Some((authority, base)) => (authority.to_string(), format!("/{base}")),
            None => (api.to_string(), String::new()),
        };
        let runtime = format!("{base}/2018-06-01/runtime");
        loop {
            let next = format!("{runtime}/invocation/next");
            let (status, headers, event) =
                exchange(&authority, "GET", &next, b"", Duration::from_secs(60));
            assert_eq!(status, 200, "next");
            let id = headers
                .iter()
                .find(|(n, _)| n == "lambda-runtime-aws-request-id")
                .map(|(_, v)| v.clone())
                .expect("a request id");
            let event: Value = serde_json::from_slice(&event).expect("a JSON event");
            std::thread::sleep(Duration::from_millis(100));
            let answer = json!({ "echo": event }).to_string();
            let path = format!("{runtime}/invocation/{id}/response");
            let (status, _, _) = exchange(
                &authority,
                "POST",
                &path,
                answer.as_bytes(),
                Duration::from_secs(5),
            );
            assert_eq!(status, 202, "response");
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn another_local_process_can_neither_take_an_event_nor_answer_one() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("listen");
        let authority = listener.local_addr().expect("address").to_string();
        let events: Vec<Bytes> = (1..=2)
            .map(|n| {
                Bytes::from(
                    json!({ "n": n, "headers": {"authorization": "OAuth secret"} }).to_string(),
                )
            })
            .collect();
        let run = Run {
            binary: std::env::current_exe().expect("the test binary"),
            args: [
                "--exact",
                "lambda_runtime::tests::fake_function",
                "--test-threads=1",
            ]
            .map(String::from)
            .to_vec(),
            name: "fake".into(),
            env: vec![(FAKE_FUNCTION.into(), "1".into())],
            events: events.clone(),
            timeout: Duration::from_secs(20),
            show_logs: false,
        };
        let invoked = tokio::spawn(invoke_on(listener, run));
        // The other process knows the port, the documented paths, and how ids used to be made.
        let attacker = std::thread::spawn(move || {
            let mut seen = Vec::new();
            let wait = Duration::from_secs(8);
            let (status, headers, body) = exchange(
                &authority,
                "GET",
                "/2018-06-01/runtime/invocation/next",
                b"",
                wait,
            );
            seen.push((status, String::from_utf8_lossy(&body).into_owned()));
            let mut ids: Vec<String> = (1..=2)
                .map(|n| format!("{:08x}-0000-4000-8000-{:012x}", std::process::id(), n))
                .collect();
            if let Some((_, id)) = headers
                .iter()
                .find(|(n, _)| n == "lambda-runtime-aws-request-id")
            {
                ids.insert(0, id.clone());
            }
            for id in ids {
                for kind in ["response", "error"] {
                    let path = format!("/2018-06-01/runtime/invocation/{id}/{kind}");
                    let (status, _, body) =
                        exchange(&authority, "POST", &path, br#"{"forged": true}"#, wait);
                    seen.push((status, String::from_utf8_lossy(&body).into_owned()));
                }
            }
            let (status, _, body) = exchange(
                &authority,
                "POST",
                "/2018-06-01/runtime/init/error",
                b"{}",
                wait,
            );
            seen.push((status, String::from_utf8_lossy(&body).into_owned()));
            seen
        });
        let report = invoked.await.expect("joined").expect("a report");
        let seen = tokio::task::spawn_blocking(move || attacker.join().expect("attacker"))
            .await
            .expect("joined");
        for (status, body) in &seen {
            assert_eq!(*status, 404, "the other process was answered: {body}");
            assert!(!body.contains("OAuth"), "it saw an event: {body}");
        }
        assert!(matches!(report.init, Init::Ready(_)), "{:?}", report.init);
        let answers: Vec<&Value> = report
            .invocations
            .iter()
            .map(|i| match &i.outcome {
                Outcome::Response(body) => body,
                Outcome::Error(body) => panic!("an error: {body}"),
            })
            .collect();
        assert_eq!(answers.len(), 2, "{report:?}");
        for (n, answer) in answers.iter().enumerate() {
            assert_eq!(answer["echo"]["n"], n as u64 + 1, "{answer}");
        }
    }
}

//! Runs a real function binary the way Lambda does, under a small implementation of the
//! Lambda Runtime API ([`runtime_api`]), and hands it events one after another on the same
//! process: `sitehost lambda invoke` (hidden; `scripts/invoke`, `scripts/bench-init` and the
//! tests use it).

pub mod runtime_api;

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use bytes::Bytes;
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::process::Child;
use tokio::sync::mpsc;

use runtime_api::{request_id, secret_segment, spawn_server, Outcome, Signal, State};

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

/// Starts the Runtime API on a loopback port, then the function, feeds it the events and
/// stops it.
pub async fn invoke(run: Run) -> Result<Report> {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .context("cannot listen for the Runtime API")?;
    invoke_on(listener, run).await
}

/// [`invoke`] on a given listener (the tests know its port).
async fn invoke_on(listener: TcpListener, run: Run) -> Result<Report> {
    let address = listener.local_addr()?;
    let (event_tx, event_rx) = mpsc::channel(1);
    let (signal_tx, mut signals) = mpsc::unbounded_channel();
    let secret = secret_segment();
    let state = Arc::new(State::new(
        secret.clone(),
        &run.name,
        run.timeout,
        event_rx,
        signal_tx,
    ));
    let server = spawn_server(listener, Arc::clone(&state));
    let started = Instant::now();
    // A URL with the secret as its path, which lambda_runtime_api_client (=1.1.1, as the
    // functions' report of an init error) takes as the base of every request.
    let runtime_api = format!("http://{address}/{secret}");
    let mut child = spawn_function(&run, &runtime_api)?;
    let init = wait_for_init(&mut signals, &mut child, started, run.timeout).await;
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
    let invocations = invoke_each(&state, &event_tx, &mut child, run.events, run.timeout).await;
    let _ = child.kill().await;
    server.abort();
    Ok(Report {
        init,
        invocations: invocations?,
    })
}

/// Starts the function binary with only its own environment and the Runtime API's
/// variables.
fn spawn_function(run: &Run, runtime_api: &str) -> Result<Child> {
    let output = || {
        if run.show_logs {
            Stdio::inherit()
        } else {
            Stdio::null()
        }
    };
    tokio::process::Command::new(&run.binary)
        .args(&run.args)
        .env_clear()
        .envs(run.env.iter().map(|(k, v)| (k, v)))
        .env("AWS_LAMBDA_RUNTIME_API", runtime_api)
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
        .with_context(|| format!("cannot start {}", run.binary.display()))
}

/// How the cold start ends: the first `next`, an init error, the process exiting, or
/// `timeout` passing.
async fn wait_for_init(
    signals: &mut mpsc::UnboundedReceiver<Signal>,
    child: &mut Child,
    started: Instant,
    timeout: Duration,
) -> Init {
    let from_signal = |signal| match signal {
        Some(Signal::FirstNext(at)) => Init::Ready(at - started),
        Some(Signal::InitError { error_type, body }) => Init::Failed { error_type, body },
        None => Init::Silent("the Runtime API stopped".into()),
    };
    // Biased, signals first: the Runtime API records an init error before it answers the
    // post, so a function that reports one and exits has both ready; the report must win.
    tokio::select! {
        biased;
        signal = signals.recv() => from_signal(signal),
        status = child.wait() => match signals.try_recv() {
            Ok(signal) => from_signal(Some(signal)),
            Err(_) => Init::Silent(match status {
                Ok(status) => format!("the function exited ({status}) without asking for an event or reporting an init error"),
                Err(e) => e.to_string(),
            }),
        },
        _ = tokio::time::sleep(timeout) => Init::Silent(format!("no call to the Runtime API within {timeout:?}")),
    }
}

/// Hands the events over one after another, each once the previous one is answered.
async fn invoke_each(
    state: &State,
    event_tx: &mpsc::Sender<(String, Bytes)>,
    child: &mut Child,
    events: Vec<Bytes>,
    timeout: Duration,
) -> Result<Vec<Invocation>> {
    let mut invocations = Vec::new();
    for (n, event) in events.into_iter().enumerate() {
        let id = request_id();
        let done_rx = state.wait_for_answer(&id).await;
        let handed = Instant::now();
        event_tx
            .send((id, event))
            .await
            .map_err(|_| anyhow!("the Runtime API stopped"))?;
        let outcome = tokio::select! {
            outcome = done_rx => outcome.map_err(|_| anyhow!("the Runtime API stopped"))?,
            status = child.wait() => return Err(anyhow!("the function exited ({}) during invocation {}", status.map(|s| s.to_string()).unwrap_or_default(), n + 1)),
            _ = tokio::time::sleep(timeout) => return Err(anyhow!("invocation {} timed out after {:?}", n + 1, timeout)),
        };
        invocations.push(Invocation {
            outcome,
            duration: handed.elapsed(),
        });
    }
    Ok(invocations)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

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

    /// [`FAKE_FUNCTION`]'s value for a function that reports an init error and exits.
    const FAILS_AT_INIT: &str = "fails-at-init";

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
        if std::env::var(FAKE_FUNCTION).as_deref() == Ok(FAILS_AT_INIT) {
            let path = format!("{runtime}/init/error");
            let body = br#"{"errorType":"Fake.InitFailed","errorMessage":"no"}"#;
            let (status, _, _) = exchange(&authority, "POST", &path, body, Duration::from_secs(5));
            assert_eq!(status, 202, "init error");
            // At once, as the functions do after reporting: both are ready together.
            std::process::exit(1);
        }
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

    /// The test binary as the fake function, with `FAKE_FUNCTION` set to `mode`.
    fn fake_run(mode: &str, events: Vec<Bytes>) -> Run {
        Run {
            binary: std::env::current_exe().expect("the test binary"),
            args: [
                "--exact",
                "local_lambda::tests::fake_function",
                "--test-threads=1",
            ]
            .map(String::from)
            .to_vec(),
            name: "fake".into(),
            env: vec![(FAKE_FUNCTION.into(), mode.into())],
            events,
            timeout: Duration::from_secs(20),
            show_logs: false,
        }
    }

    /// A function that reports an init error and exits at once: the report is what the
    /// cold start was, every time, though the exit may be seen in the same poll.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_init_error_then_an_exit_is_a_failed_init_every_time() {
        for _ in 0..12 {
            let report = invoke(fake_run(FAILS_AT_INIT, vec![Bytes::from("{}")]))
                .await
                .expect("a report");
            match &report.init {
                Init::Failed { body, .. } => {
                    assert_eq!(body["errorType"], "Fake.InitFailed");
                }
                other => panic!("{other:?}"),
            }
            assert!(report.invocations.is_empty());
        }
    }

    // Reads better whole: one runtime API and its impostor, tried in turn.
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
        let run = fake_run("echo", events.clone());
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

//! The local Lambda Runtime API that `sitehost lambda invoke` runs a function under
//! (<https://docs.aws.amazon.com/lambda/latest/dg/runtimes-api.html>):
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
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::{Method, Request, Response, StatusCode};
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot, Mutex};
use tokio::task::JoinHandle;

/// What the function reported for one invocation.
#[derive(Debug)]
pub enum Outcome {
    /// `POST .../response`: the body (an API Gateway v2 response object).
    Response(Value),
    /// `POST .../error`: the error document.
    Error(Value),
}

/// An invocation not answered yet.
struct Waiting {
    /// Whether a `next` has taken its event; only then is an answer for it taken.
    handed_out: bool,
    done: oneshot::Sender<Outcome>,
}

type Pending = HashMap<String, Waiting>;

/// How the cold start went, as the Runtime API saw it.
pub enum Signal {
    FirstNext(Instant),
    InitError { error_type: String, body: Value },
}

/// The Runtime API's side of one function and its invocations.
pub struct State {
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

impl State {
    /// The Runtime API of the function `name`: its paths start with `secret`, it hands out
    /// the events sent to `events` (with their request ids), and tells `signals` how the
    /// cold start went.
    pub fn new(
        secret: String,
        name: &str,
        timeout: Duration,
        events: mpsc::Receiver<(String, Bytes)>,
        signals: mpsc::UnboundedSender<Signal>,
    ) -> Self {
        State {
            secret,
            events: Mutex::new(events),
            next_waiting: AtomicBool::new(false),
            pending: Mutex::new(HashMap::new()),
            signals,
            function_arn: format!("arn:aws:lambda:us-east-1:123456789012:function:{name}"),
            timeout,
        }
    }

    /// Registers invocation `id` before its event is sent: the receiver gets what the
    /// function answers it with.
    pub async fn wait_for_answer(&self, id: &str) -> oneshot::Receiver<Outcome> {
        let (done, answer) = oneshot::channel();
        let waiting = Waiting {
            handed_out: false,
            done,
        };
        self.pending.lock().await.insert(id.to_string(), waiting);
        answer
    }
}

/// Lambda's limit on what a function answers one invocation with (its "6 MB"): past it the
/// Runtime API refuses the response with a 413 and the caller gets
/// `Function.ResponseSizeTooLarge`. Held here too, so a function that would fail on Lambda
/// fails here, and a runaway one cannot fill this process's memory.
pub const RESPONSE_LIMIT_BYTES: usize = 6_291_556;

/// 128 bits from rand's thread generator (a CSPRNG, ChaCha seeded from the operating
/// system), in hex: the API's secret path segment.
pub fn secret_segment() -> String {
    format!("{:032x}", rand::random::<u128>())
}

/// A request id as Lambda's look: a version 4 UUID, 122 random bits from the same generator.
pub fn request_id() -> String {
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

/// Serves the Runtime API on `listener` until the task is aborted.
pub fn spawn_server(listener: TcpListener, state: Arc<State>) -> JoinHandle<()> {
    tokio::spawn(async move {
        // The same backoff as `sitehost serve`'s accept loop.
        let mut backoff = sitehost::server::AcceptBackoff::default();
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
            let state = Arc::clone(&state);
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |request| {
                    serve_request(Arc::clone(&state), request)
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
            });
        }
    })
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
    let Some(path) = runtime_path(&state, request.uri().path()) else {
        return Ok(no_such_path());
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
    let rest = path.strip_prefix("/2018-06-01/runtime/");
    Ok(match (method, rest) {
        (Method::GET, Some("invocation/next")) => next_invocation(&state).await,
        (Method::POST, Some("init/error")) => {
            let _ = state.signals.send(Signal::InitError {
                error_type,
                body: parse_body(&body),
            });
            reply(StatusCode::ACCEPTED, r#"{"status":"OK"}"#)
        }
        (Method::POST, Some(rest)) => answer_invocation(&state, rest, &body).await,
        _ => no_such_path(),
    })
}

/// The path after the secret segment (`/SECRET/2018-06-01/runtime/...`): `None` for any
/// other path, which is not the function's.
fn runtime_path(state: &State, path: &str) -> Option<String> {
    match path.strip_prefix('/').and_then(|p| p.split_once('/')) {
        Some((secret, rest)) if is_secret(secret, &state.secret) => Some(format!("/{rest}")),
        _ => None,
    }
}

fn no_such_path() -> Response<Full<Bytes>> {
    reply(StatusCode::NOT_FOUND, "no such Runtime API path")
}

/// A body as JSON, or else as a JSON string of its text.
fn parse_body(bytes: &Bytes) -> Value {
    serde_json::from_slice(bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(bytes).into_owned()))
}

/// `GET .../invocation/next`: waits for the next event and hands it out.
async fn next_invocation(state: &State) -> Response<Full<Bytes>> {
    // One `next` at a time, and none while an event is out: an execution environment runs
    // one invocation at a time.
    if state.next_waiting.swap(true, Ordering::SeqCst) {
        return invalid("another request is already waiting for the next event");
    }
    let _slot = NextSlot(&state.next_waiting);
    if state.pending.lock().await.values().any(|w| w.handed_out) {
        return invalid("the event handed out is not answered yet");
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
    event_response(state, id, event)
}

/// The event with the headers Lambda's `next` answers carry.
fn event_response(state: &State, id: String, event: Bytes) -> Response<Full<Bytes>> {
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

/// `POST .../invocation/{id}/response` or `.../error` (`rest` is the path after
/// `runtime/`): the answer of an invocation handed out and not answered yet.
async fn answer_invocation(state: &State, rest: &str, body: &Bytes) -> Response<Full<Bytes>> {
    let answer = rest
        .strip_prefix("invocation/")
        .and_then(|r| r.rsplit_once('/'));
    let Some((id, kind @ ("response" | "error"))) = answer else {
        return no_such_path();
    };
    let Some(done) = take_handed_out(state, id).await else {
        return invalid("unknown or answered request id");
    };
    let outcome = if kind == "response" {
        Outcome::Response(parse_body(body))
    } else {
        Outcome::Error(parse_body(body))
    };
    let _ = done.send(outcome);
    reply(StatusCode::ACCEPTED, r#"{"status":"OK"}"#)
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
}

//! The local HTTP server of `sitehost serve`: hyper in front of the same `App` the Lambda
//! functions use, with the limits a server facing slow, heavy and numerous clients needs
//! (on Lambda, API Gateway and CloudFront set them):
//! - a cap on open connections, below the file descriptor limit; at it a new connection
//!   evicts the one that has waited longest for a request head, else the one whose request
//!   has waited longest for admission (`server::connections`), or is answered 503 and
//!   closed at once when every one holds an admitted request; accept errors back off
//!   instead of spinning;
//! - a deadline for the request head, one for the body with a minimum pace (shorter for a
//!   body read before admission: `server::paced_body`), and one for every write;
//! - a request body is read only once the request is admitted (signature, nonce, budget),
//!   so an unsigned or replayed request never has its body buffered; only a form body,
//!   whose parameters are signed, is read before, on an evictable connection;
//! - staged forms claimed per session, capped, and streamed to disk (`server::staged_form`);
//! - stored files are streamed from disk in bounded chunks.
//!
//! Image uploads bound their own fetches and pipeline runs (`upload::slots`).

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use bytes::BytesMut;
use futures_util::StreamExt;
use http::header::{HeaderValue, CONNECTION, X_CONTENT_TYPE_OPTIONS};
use http::{Request, Response, StatusCode};
use hyper::body::{Body, Frame, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio_io_timeout::TimeoutStream;

use crate::api::body::{body_too_large, OnAdmitted, RequestBody};
use crate::api::App;
use crate::config::{ServerLimits, StoreKind};
use crate::error::{ApiError, Result};
use crate::operations::siblings::Siblings;
use crate::server::connections::{Connection, Connections, Request as Underway};
use crate::server::file_answer::{serve_file, whole, ServedBody};
use crate::server::paced_body::{PaceError, PacedBody};
use crate::server::staged_form::StagedForms;
use crate::store::disk_files::LocalFiles;

pub mod connections;
pub mod docs;
mod file_answer;
pub mod paced_body;
pub mod staged_form;

/// What every connection shares: the app, the limits and the stored files.
struct Shared {
    app: Arc<App>,
    /// The embedded store's files, served as the local frontend host.
    local_files: Option<LocalFiles>,
    /// Makes the siblings not stored yet, in a build with the image pipeline.
    siblings: Option<Siblings>,
    /// The staged uploads' forms being received.
    staged_forms: StagedForms,
    limits: ServerLimits,
}

impl Shared {
    fn new(app: Arc<App>, limits: ServerLimits) -> Self {
        // With the embedded store, `sitehost serve` is also the frontend host of its files.
        let local_files = match &app.services.config.store {
            StoreKind::Embedded { data_dir } => match LocalFiles::open(data_dir) {
                Ok(files) => Some(files),
                Err(err) => {
                    tracing::error!(error = %crate::error::error_chain(&err), "the files directory cannot be opened; files are not served");
                    None
                }
            },
            StoreKind::DynamoDb { .. } => None,
        };
        let siblings = local_files
            .as_ref()
            .and_then(|_| crate::deployment::siblings(app.services.files.as_ref()));
        let staged_forms = StagedForms::new(local_files.clone(), limits.max_connections);
        Shared {
            app,
            local_files,
            siblings,
            staged_forms,
            limits,
        }
    }
}

/// A request body still on the connection: read, at its pace and within its deadline
/// (`server::paced_body`), only when the app asks for it.
struct ConnectionBody {
    body: Incoming,
    timeout: Duration,
    /// Whether the request is admitted: a body read before (a form's, whose parameters
    /// are signed) gets the short deadline of an unsigned one.
    underway: Arc<Underway>,
    /// Set once reading starts: an unread body makes the connection unusable.
    read: Arc<AtomicBool>,
}

#[async_trait::async_trait]
impl RequestBody for ConnectionBody {
    fn known_len(&self) -> Option<u64> {
        self.body.size_hint().exact()
    }

    async fn read(self, limit: usize) -> Result<Bytes> {
        self.read.store(true, Ordering::Relaxed);
        let timeout = if self.underway.is_admitted() {
            self.timeout
        } else {
            self.timeout.min(paced_body::UNSIGNED_BODY_TIMEOUT)
        };
        // Read at most one byte past the limit, so a huge body is refused without
        // buffering it, and at its pace, so a trickling one cannot hold the connection.
        let mut body = PacedBody::new(self.body, timeout);
        let mut collected = BytesMut::new();
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|err| match err {
                PaceError::Read(_) => ApiError::invalid("The request body could not be read."),
                late => {
                    tracing::warn!(error = %late, "request body not received in time");
                    late.to_api("The request body")
                }
            })?;
            if collected.len() + chunk.len() > limit {
                return Err(body_too_large(limit));
            }
            collected.extend_from_slice(&chunk);
        }
        Ok(collected.freeze())
    }
}

async fn serve_one(
    shared: &Shared,
    req: Request<Incoming>,
    underway: &Arc<Underway>,
) -> Response<ServedBody> {
    // The API reference (`/api/v2/openapi.json`, `/docs/`): public, so before any signing.
    if let Some(response) = crate::server::docs::serve(req.method(), req.uri().path()) {
        return response.map(whole);
    }
    let accept = req
        .headers()
        .get(http::header::ACCEPT)
        .and_then(|v| v.to_str().ok());
    if let Some(response) = serve_file(
        shared.local_files.as_ref(),
        shared.siblings.as_ref(),
        req.method(),
        req.uri().path(),
        accept,
    )
    .await
    {
        return response;
    }
    let (mut parts, body) = req.into_parts();
    // A staged upload's form, when this server keeps the files: unsigned, like S3's.
    let body = match shared
        .staged_forms
        .receive(
            &shared.app,
            &parts,
            body,
            shared.limits.body_timeout,
            underway,
        )
        .await
    {
        Ok(response) => return response.map(whole),
        Err(body) => body,
    };
    let has_body = body.size_hint().exact() != Some(0);
    let read = Arc::new(AtomicBool::new(false));
    let admitted = Arc::clone(underway);
    parts
        .extensions
        .insert(OnAdmitted(Arc::new(move || admitted.admitted())));
    let body = ConnectionBody {
        body,
        timeout: shared.limits.body_timeout,
        underway: Arc::clone(underway),
        read: Arc::clone(&read),
    };
    let mut response = shared.app.handle_head(parts, body).await;
    let unusable = matches!(
        response.status(),
        StatusCode::PAYLOAD_TOO_LARGE | StatusCode::REQUEST_TIMEOUT
    );
    if unusable || (has_body && !read.load(Ordering::Relaxed)) {
        // The unread rest of the body makes the connection unusable.
        response
            .headers_mut()
            .insert(CONNECTION, HeaderValue::from_static("close"));
    }
    response.map(whole)
}

/// What a connection over the cap is told when every open one is mid-request, written in
/// one go before it is closed: no task, no parsing, no timer.
const BUSY_RESPONSE: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\n\
content-type: application/json\r\n\
retry-after: 1\r\n\
connection: close\r\n\
content-length: 73\r\n\
\r\n\
{\"error\": \"The server has as many connections open as it allows; retry.\"}";

/// Waits after a failed `accept` (out of file descriptors, out of memory) before the
/// next, doubling from 5 ms to 1 s, and logs the failures at most once a second: a
/// failure that repeats at once would spin a core and flood the log.
#[derive(Debug)]
pub struct AcceptBackoff {
    delay: Duration,
    last_logged: Option<Instant>,
    unlogged: u64,
}

impl Default for AcceptBackoff {
    fn default() -> Self {
        AcceptBackoff {
            delay: Self::FIRST,
            last_logged: None,
            unlogged: 0,
        }
    }
}

impl AcceptBackoff {
    const FIRST: Duration = Duration::from_millis(5);
    const MOST: Duration = Duration::from_secs(1);
    const LOG_EVERY: Duration = Duration::from_secs(1);

    /// Records a failure: whether to log it now (with how many went unlogged before), and
    /// how long to wait.
    pub fn failed(&mut self, now: Instant) -> (Option<u64>, Duration) {
        let delay = self.delay;
        self.delay = (self.delay * 2).min(Self::MOST);
        let due = self
            .last_logged
            .is_none_or(|at| now.duration_since(at) >= Self::LOG_EVERY);
        let log = if due {
            self.last_logged = Some(now);
            Some(std::mem::take(&mut self.unlogged))
        } else {
            self.unlogged += 1;
            None
        };
        (log, delay)
    }

    /// A connection was accepted: the next failure waits the shortest time again.
    pub fn succeeded(&mut self) {
        self.delay = Self::FIRST;
    }
}

/// Accepts connections until `shutdown` completes, within the limits of the app's
/// configuration (`config.server`, which the upload slots follow too).
pub async fn serve(
    app: Arc<App>,
    listener: TcpListener,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let limits = app.services.config.server.clone();
    // HTTP/1.1 only (the API's clients and API Gateway's contract). hyper enforces the
    // header deadline itself, given a timer.
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout);
    let builder = Arc::new(builder);
    let connections = Connections::new(limits.max_connections);
    let shared = Arc::new(Shared::new(app, limits));
    // Staged files expire as the staging bucket's do; aborted when the server stops.
    let sweeping = shared.local_files.clone().map(|files| {
        let clock = Arc::clone(&shared.app.services.clock);
        tokio::spawn(crate::server::staged_form::sweep_forever(files, clock))
    });
    let mut backoff = AcceptBackoff::default();
    tokio::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut shutdown => break,
        };
        let stream = match accepted {
            Ok((stream, _)) => {
                backoff.succeeded();
                stream
            }
            Err(err) => {
                let (log, delay) = backoff.failed(Instant::now());
                if let Some(unlogged) = log {
                    tracing::warn!(error = %err, unlogged, retry_in_ms = delay.as_millis() as u64, "accept failed");
                }
                tokio::select! {
                    () = tokio::time::sleep(delay) => continue,
                    () = &mut shutdown => break,
                }
            }
        };
        let Some(connection) = connections.admit(Instant::now()) else {
            // Best effort and never waiting: a client that cannot take 200 bytes at once
            // gets the close alone.
            let _ = stream.try_write(BUSY_RESPONSE);
            continue;
        };
        let _ = stream.set_nodelay(true);
        let shared = Arc::clone(&shared);
        let builder = Arc::clone(&builder);
        tokio::spawn(async move {
            // Evicted while waiting for a head: dropping the connection closes it.
            tokio::select! {
                () = serve_connection(shared, &builder, stream, &connection) => {}
                () = connection.evicted() => {}
            }
        });
    }
    if let Some(sweeping) = sweeping {
        sweeping.abort();
    }
}

async fn serve_connection(
    shared: Arc<Shared>,
    builder: &http1::Builder,
    stream: TcpStream,
    connection: &Connection,
) {
    // A write that makes no progress for `write_timeout` fails the connection: a client
    // that stops reading holds its buffers and its slot no longer.
    let mut stream = TimeoutStream::new(stream);
    stream.set_write_timeout(Some(shared.limits.write_timeout));
    let stream: Pin<Box<TimeoutStream<TcpStream>>> = Box::pin(stream);
    let slot = connection.slot();
    let service = service_fn(move |req| {
        let shared = Arc::clone(&shared);
        // The head is in: evictable only until the request is admitted, or its answer is
        // ready; then kept until the answer's body is done.
        let underway = Arc::new(slot.request());
        async move {
            let mut response = serve_one(&shared, req, &underway).await;
            underway.admitted();
            // As the deployed frontend (CloudFront's response headers policy): a browser
            // never second-guesses the type of a stored file or an answer.
            response
                .headers_mut()
                .insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
            Ok::<_, Infallible>(response.map(|body| Answer {
                body,
                _underway: underway,
            }))
        }
    });
    if let Err(err) = builder
        .serve_connection(TokioIo::new(stream), service)
        .await
    {
        tracing::debug!(error = %err, "connection ended with an error");
    }
}

/// An answer's body, holding its request as under way (not evictable) until hyper has sent
/// it and drops it.
struct Answer {
    body: ServedBody,
    _underway: Arc<Underway>,
}

impl Body for Answer {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<std::result::Result<Frame<Bytes>, std::io::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_failures_back_off_and_log_once_a_second() {
        let mut backoff = AcceptBackoff::default();
        let start = Instant::now();
        let mut logged = Vec::new();
        let mut waited = Duration::ZERO;
        let mut now = start;
        for _ in 0..20 {
            let (log, delay) = backoff.failed(now);
            if let Some(unlogged) = log {
                logged.push(unlogged);
            }
            waited += delay;
            now += delay;
        }
        // 5, 10, ... ms, then 1 s each: 20 failures take about 14 s, not a busy loop.
        assert!(waited > Duration::from_secs(10), "{waited:?}");
        assert_eq!(backoff.failed(now).1, AcceptBackoff::MOST);
        // The first failure is logged, then about one a second, each with the count it
        // stands for.
        assert_eq!(logged.first(), Some(&0));
        assert!(logged.len() < 20 && logged.len() > 5, "{logged:?}");
        assert_eq!(logged.iter().sum::<u64>() + logged.len() as u64, 20);
        backoff.succeeded();
        assert_eq!(backoff.failed(now).1, AcceptBackoff::FIRST);
    }

    #[test]
    fn the_busy_answer_is_well_formed() {
        let text = std::str::from_utf8(BUSY_RESPONSE).expect("ascii");
        let (head, body) = text.split_once("\r\n\r\n").expect("head and body");
        assert!(head.contains(&format!("content-length: {}", body.len())));
        let json: serde_json::Value = serde_json::from_str(body).expect("json");
        assert!(json["error"].is_string());
        assert!(text.contains("content-type: application/json"));
    }
}

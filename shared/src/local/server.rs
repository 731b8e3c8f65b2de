//! The local HTTP server of `sitehost serve`: hyper in front of the same `App` the Lambda
//! functions use, with the limits a server facing slow, heavy and numerous clients needs
//! (on Lambda, API Gateway and CloudFront set them):
//! - a cap on open connections, below the file descriptor limit; at it a new connection
//!   evicts the one that has waited longest for a request head (`local::connections`), or
//!   is answered 503 and closed at once when every one is mid-request; accept errors back
//!   off instead of spinning;
//! - a deadline for the request head, one for the body, and one for every write;
//! - a request body is read only once the request is admitted (signature, nonce, budget),
//!   so an unsigned or replayed request never has its body buffered;
//! - stored files are streamed from disk in bounded chunks.
//!
//! Image uploads bound their own fetches and pipeline runs (`upload::slots`).

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::TryStreamExt;
use http::header::{HeaderValue, CONNECTION, CONTENT_LENGTH, VARY, X_CONTENT_TYPE_OPTIONS};
use http::{Request, Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, Limited, StreamBody};
use hyper::body::{Body, Frame, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio_io_timeout::TimeoutStream;

use crate::api::body::{body_too_large, RequestBody};
use crate::api::siblings::accepts_webp;
use crate::api::{error_response, App};
use crate::config::{ServerLimits, StoreKind};
use crate::error::{ApiError, Result};
use crate::image_record::upload_file;
use crate::local::connections::{Connection, Connections, Request as Underway};
use crate::local::disk_files::LocalFiles;
use crate::operations::siblings::{Sibling, WebpSiblings};

/// A response as hyper sends it: a whole body in memory, or a file streamed from disk.
type ServedBody = BoxBody<Bytes, std::io::Error>;

/// What every connection shares: the app, the limits and the stored files.
struct Shared {
    app: Arc<App>,
    /// The embedded store's files, served as the local frontend host.
    local_files: Option<LocalFiles>,
    /// Makes the WebP siblings not stored yet, in a build with the image pipeline.
    siblings: Option<WebpSiblings>,
    limits: ServerLimits,
}

/// Stored files are sent in chunks of this size: what a stalled reader holds is bounded.
const FILE_CHUNK_BYTES: usize = 64 * 1024;

/// A stored file, when `sitehost serve` is the frontend host: `GET /img/upload/x.jpg`.
/// A variant's path is answered with its WebP sibling when the client accepts WebP: the
/// stored one, or one made now and stored (`operations::siblings`), as the deployed
/// frontend's origin group does. When none can be made the variant itself is answered, never
/// an error. Variants always carry `Vary: Accept` (template.yaml, `ImageFilesFunction`).
async fn serve_file(
    files: Option<&LocalFiles>,
    siblings: Option<&WebpSiblings>,
    method: &http::Method,
    path: &str,
    accept: Option<&str>,
) -> Option<Response<ServedBody>> {
    let files = files?;
    if path.starts_with("/api/") || !(method == http::Method::GET || method == http::Method::HEAD) {
        return None;
    }
    let decoded = percent_encoding::percent_decode_str(path)
        .decode_utf8()
        .ok()?;
    // Only canonical paths in the stored-name grammar: no empty, `.` or `..` segments.
    let Some(_) = decoded.strip_prefix('/').and_then(upload_file) else {
        let missing = error_response(&ApiError::NotFound(format!("no file at {path}")));
        return Some(missing.map(whole));
    };
    let variant = crate::image_record::is_variant_path(&decoded);
    let mut content = None;
    if accept.is_some_and(accepts_webp) && crate::image_record::may_have_webp_sibling(&decoded) {
        let sibling = crate::image_record::webp_sibling_path(&decoded);
        content = match files.open_file(&sibling).await {
            Some(stored) => Some(Content::File(stored)),
            None => made_sibling(siblings, &sibling).await.map(Content::Made),
        };
    }
    if content.is_none() {
        content = files.open_file(&decoded).await.map(Content::File);
    }
    let Some(content) = content else {
        let missing = error_response(&ApiError::NotFound(format!("no file at {path}")));
        return Some(missing.map(whole));
    };
    let (content_type, len) = match &content {
        Content::File((_, len, content_type)) => (*content_type, *len),
        Content::Made(webp) => ("image/webp", webp.len() as u64),
    };
    let head = crate::api::file_response(
        method,
        content_type,
        crate::store::files::CACHE_CONTROL,
        Bytes::new(),
    );
    let (mut parts, _) = head.into_parts();
    parts.headers.insert(CONTENT_LENGTH, HeaderValue::from(len));
    if variant {
        parts
            .headers
            .insert(VARY, HeaderValue::from_static("Accept"));
    }
    let body = match content {
        _ if method == http::Method::HEAD => whole(Bytes::new()),
        Content::Made(webp) => whole(webp),
        Content::File((file, ..)) => {
            let chunks = tokio_util::io::ReaderStream::with_capacity(file, FILE_CHUNK_BYTES);
            BodyExt::boxed(StreamBody::new(chunks.map_ok(Frame::data)))
        }
    };
    Some(Response::from_parts(parts, body))
}

/// What a file answer sends: a stored file, streamed, or a WebP sibling just made.
enum Content {
    File((tokio::fs::File, u64, &'static str)),
    Made(Bytes),
}

/// The sibling at `sibling_path`, made and stored now; `None` (the variant is answered)
/// when there is no variant, it cannot be encoded, or the store failed (logged).
async fn made_sibling(siblings: Option<&WebpSiblings>, sibling_path: &str) -> Option<Bytes> {
    match siblings?.make(sibling_path.trim_start_matches('/')).await {
        Ok(Sibling::Made(webp)) => Some(webp),
        Ok(Sibling::Missing | Sibling::Variant { .. } | Sibling::NotNow) => None,
        Err(err) => {
            tracing::warn!(sibling_path, error = %crate::error::error_chain(&err), "a WebP sibling could not be made; the variant is answered");
            None
        }
    }
}

fn whole(bytes: Bytes) -> ServedBody {
    Full::new(bytes).map_err(|never| match never {}).boxed()
}

/// A request body still on the connection: read, within the body deadline, only when the
/// app asks for it.
struct ConnectionBody {
    body: Incoming,
    timeout: Duration,
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
        // Read at most one byte past the limit, so a huge body is refused without
        // buffering it, and within the body deadline, so a trickling one cannot hold the
        // connection.
        let reading = Limited::new(self.body, limit).collect();
        match tokio::time::timeout(self.timeout, reading).await {
            Ok(Ok(collected)) => Ok(collected.to_bytes()),
            Ok(Err(err))
                if err
                    .downcast_ref::<http_body_util::LengthLimitError>()
                    .is_some() =>
            {
                Err(body_too_large(limit))
            }
            Ok(Err(_)) => Err(ApiError::invalid("The request body could not be read.")),
            Err(_) => {
                tracing::warn!("request body not received in time");
                Err(ApiError::RequestTimeout(format!(
                    "The request body was not received within {} s.",
                    self.timeout.as_secs_f64()
                )))
            }
        }
    }
}

async fn serve_one(shared: &Shared, req: Request<Incoming>) -> Response<ServedBody> {
    // The API reference (`/api/v2/openapi.json`, `/docs/`): public, so before any signing.
    if let Some(response) = crate::local::docs::serve(req.method(), req.uri().path()) {
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
    let (parts, body) = req.into_parts();
    // A staged upload's form, when this server keeps the files: unsigned, like S3's.
    let body = match crate::local::staged_form::receive(
        &shared.app,
        &parts.method,
        parts.uri.path(),
        &parts.headers,
        body,
        shared.limits.body_timeout,
    )
    .await
    {
        Ok(response) => return response.map(whole),
        Err(body) => body,
    };
    let has_body = body.size_hint().exact() != Some(0);
    let read = Arc::new(AtomicBool::new(false));
    let body = ConnectionBody {
        body,
        timeout: shared.limits.body_timeout,
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
        .and_then(|_| crate::deployment::webp_siblings(app.services.files.as_ref()));
    let connections = Connections::new(limits.max_connections);
    let shared = Arc::new(Shared {
        app,
        local_files,
        siblings,
        limits,
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
        // The head is in: not evictable until the answer's body is done.
        let underway = slot.request();
        async move {
            let mut response = serve_one(&shared, req).await;
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
    _underway: Underway,
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

    /// Stands in for the pipeline (tested on its own in `upload::pipeline`): `made:` and the
    /// variant's bytes, or a failure for a variant that starts with `bad`.
    fn fake_webp(variant: &[u8]) -> crate::error::Result<Vec<u8>> {
        if variant.starts_with(b"bad") {
            return Err(ApiError::internal("not an image"));
        }
        Ok([&b"made:"[..], variant].concat())
    }

    #[tokio::test]
    async fn variants_are_answered_with_their_webp_sibling_when_accepted() {
        let dir = tempfile::tempdir().expect("dir");
        let files = LocalFiles::open(dir.path()).expect("files");
        let siblings = WebpSiblings::new(
            Arc::new(LocalFiles::open(dir.path()).expect("files")),
            fake_webp,
        );
        let set = "img/upload/a-b--7";
        for (path, bytes) in [
            (format!("{set}.jpg"), &b"original"[..]),
            (format!("{set}.small.jpg"), b"small jpeg"),
            (format!("{set}.small.jpg.webp"), b"webp"),
            (format!("{set}.big.jpg"), b"bad big jpeg"),
            (format!("{set}.medium.jpg"), b"medium jpeg"),
            (format!("{set}.thumbnail.jpg"), b"thumbnail jpeg"),
        ] {
            crate::store::files::FileStore::put(&files, &path, Bytes::from(bytes), "x")
                .await
                .expect("put");
        }
        let chrome = "image/avif,image/webp,image/apng,image/*,*/*;q=0.8";
        let get = |path: String, accept: Option<&'static str>| {
            let (files, siblings) = (&files, &siblings);
            async move {
                let response = serve_file(
                    Some(files),
                    Some(siblings),
                    &http::Method::GET,
                    &path,
                    accept,
                )
                .await
                .expect("a file answer");
                let (parts, body) = response.into_parts();
                let body = body.collect().await.expect("body").to_bytes();
                let header = |name| {
                    parts
                        .headers
                        .get(name)
                        .map(|v: &HeaderValue| v.to_str().unwrap_or_default().to_string())
                };
                (
                    parts.status.as_u16(),
                    header(http::header::CONTENT_TYPE),
                    header(VARY),
                    body,
                )
            }
        };
        let text = |s: &str| Some(s.to_string());
        // Accepted and stored: the sibling.
        let (status, kind, vary, body) = get(format!("/{set}.small.jpg"), Some(chrome)).await;
        assert_eq!(
            (status, kind, vary),
            (200, text("image/webp"), text("Accept"))
        );
        assert_eq!(&body[..], b"webp");
        // Not accepted: the variant itself, still varying on Accept.
        for accept in [None, Some("*/*"), Some("image/webp;q=0, image/*")] {
            let (status, kind, vary, body) = get(format!("/{set}.small.jpg"), accept).await;
            assert_eq!(
                (status, kind, vary),
                (200, text("image/jpeg"), text("Accept"))
            );
            assert_eq!(&body[..], b"small jpeg", "{accept:?}");
        }
        // Accepted and not stored yet: made, stored, answered; then answered from storage.
        for _ in 0..2 {
            let (status, kind, vary, body) = get(format!("/{set}.medium.jpg"), Some(chrome)).await;
            assert_eq!(
                (status, kind, vary),
                (200, text("image/webp"), text("Accept"))
            );
            assert_eq!(&body[..], b"made:medium jpeg");
        }
        let stored = std::fs::read(dir.path().join(format!("files/{set}.medium.jpg.webp")));
        assert_eq!(stored.expect("stored sibling"), b"made:medium jpeg");
        // One that cannot be made: the variant, never an error, and nothing stored.
        let (status, kind, vary, body) = get(format!("/{set}.big.jpg"), Some(chrome)).await;
        assert_eq!(
            (status, kind, vary),
            (200, text("image/jpeg"), text("Accept"))
        );
        assert_eq!(&body[..], b"bad big jpeg");
        assert!(!dir
            .path()
            .join(format!("files/{set}.big.jpg.webp"))
            .exists());
        // The original has no sibling and does not vary.
        let (status, kind, vary, body) = get(format!("/{set}.jpg"), Some(chrome)).await;
        assert_eq!((status, kind, vary), (200, text("image/jpeg"), None));
        assert_eq!(&body[..], b"original");
        // A path outside the stored-name grammar is a 404, even one that names a stored
        // file once its empty segments are dropped, and nothing is made for it.
        let pad = "/".repeat(4000);
        let inner = format!("/img/upload/{pad}{}.small.jpg", &set["img/upload/".len()..]);
        for path in [
            format!("{pad}/{set}.small.jpg"),
            inner,
            format!("/{set}.small.jpg/."),
        ] {
            assert_eq!(get(path.clone(), Some(chrome)).await.0, 404, "{path:.40}");
        }
        // A missing variant is a 404 whatever the Accept, and leaves no sibling.
        let (status, ..) = get(format!("/{set}.large.jpg"), Some(chrome)).await;
        assert_eq!(status, 404);
        assert!(!dir
            .path()
            .join(format!("files/{set}.large.jpg.webp"))
            .exists());
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

//! The local HTTP server of `sitehost serve`: hyper in front of the same `App` the Lambda
//! functions use, with the limits a server facing slow and heavy clients needs (on Lambda,
//! API Gateway sets them): a deadline for the request head and one for the body, and a
//! bound on image uploads processed at once.

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use http::header::{HeaderValue, CONNECTION};
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::api::{error_response, route, App, Operation};
use crate::config::StoreKind;
use crate::error::{ApiError, Result};
use crate::local::files::LocalFiles;

/// What a refused upload is told to wait before trying again.
const UPLOAD_RETRY_AFTER_SECS: u64 = 2;

pub use crate::config::ServerLimits;

/// What every connection shares: the app, the limits and the upload slots.
struct Shared {
    app: Arc<App>,
    /// The embedded store's files, served as the local frontend host.
    local_files: Option<LocalFiles>,
    limits: ServerLimits,
    upload_slots: Arc<Semaphore>,
    /// Uploads admitted at all, running or waiting: bounds the bodies held while waiting.
    upload_queue: Arc<Semaphore>,
}

/// A stored file, when `sitehost serve` is the frontend host: `GET /img/upload/x.jpg`.
async fn serve_file(
    files: Option<&LocalFiles>,
    method: &http::Method,
    path: &str,
) -> Option<Response<Bytes>> {
    let files = files?;
    if path.starts_with("/api/") || !(method == http::Method::GET || method == http::Method::HEAD) {
        return None;
    }
    let decoded = percent_encoding::percent_decode_str(path)
        .decode_utf8()
        .ok()?;
    Some(match files.read(&decoded).await {
        Some((bytes, content_type)) => super::file_response(
            method,
            content_type,
            crate::store::files::CACHE_CONTROL,
            bytes,
        ),
        None => error_response(&ApiError::NotFound(format!("no file at {path}"))),
    })
}

/// How many uploads may wait for a slot per slot: each waiting upload holds its body (up to
/// the body limit) in memory, so the queue is bounded too and past it the answer is at once.
const UPLOAD_WAITERS_PER_SLOT: usize = 4;

/// A slot for an image upload, waiting at most `upload_wait` for one; refused at once when
/// the queue is full. Both permits are held until the response is made.
async fn upload_slot(shared: &Shared) -> Result<(OwnedSemaphorePermit, OwnedSemaphorePermit)> {
    let queued = Arc::clone(&shared.upload_queue).try_acquire_owned();
    let waiting = Arc::clone(&shared.upload_slots).acquire_owned();
    let slot = match queued {
        Ok(queued) => tokio::time::timeout(shared.limits.upload_wait, waiting)
            .await
            .ok()
            .and_then(Result::ok)
            .map(|slot| (queued, slot)),
        Err(_) => None,
    };
    match slot {
        Some(permits) => Ok(permits),
        // Timed out, or the queue is full (the semaphores are never closed).
        None => {
            tracing::warn!(
                max_uploads = shared.limits.max_uploads,
                "image upload refused: every upload slot stayed busy"
            );
            Err(ApiError::Unavailable {
                message: format!(
                    "The server is processing as many image uploads as it allows ({}); \
                     retry in a moment.",
                    shared.limits.max_uploads
                ),
                retry_after_secs: UPLOAD_RETRY_AFTER_SECS,
            })
        }
    }
}

async fn serve_one(shared: &Shared, req: Request<Incoming>) -> Response<Bytes> {
    let app = &shared.app;
    // The API reference (`/api/v2/openapi.json`, `/docs/`): public, so before any signing.
    if let Some(response) = crate::local::docs::serve(req.method(), req.uri().path()) {
        return response;
    }
    if let Some(response) =
        serve_file(shared.local_files.as_ref(), req.method(), req.uri().path()).await
    {
        return response;
    }
    let (parts, body) = req.into_parts();
    // Read at most one byte past the limit, so a huge body is refused without buffering
    // it, and within the body deadline, so a trickling one cannot hold the connection.
    let reading = Limited::new(body, app.services.config.max_body_bytes).collect();
    let body = match tokio::time::timeout(shared.limits.body_timeout, reading).await {
        Ok(Ok(collected)) => collected.to_bytes(),
        Ok(Err(err))
            if err
                .downcast_ref::<http_body_util::LengthLimitError>()
                .is_some() =>
        {
            return error_response(&ApiError::TooLarge(format!(
                "the request body is over {} bytes",
                app.services.config.max_body_bytes
            )));
        }
        Ok(Err(_)) => {
            return error_response(&ApiError::invalid("The request body could not be read."))
        }
        Err(_) => {
            tracing::warn!(
                method = %parts.method,
                path = %parts.uri.path(),
                "request body not received in time"
            );
            return error_response(&ApiError::RequestTimeout(format!(
                "The request body was not received within {} s.",
                shared.limits.body_timeout.as_secs_f64()
            )));
        }
    };
    // Held until the response is made. Taken after the body is in, so only requests that
    // arrived whole queue for a slot (a slow client holds none).
    let _upload_slot = if route(&parts.method, parts.uri.path())
        .is_ok_and(|r| r.operation == Operation::ImageUpload)
    {
        match upload_slot(shared).await {
            Ok(permit) => Some(permit),
            Err(err) => return error_response(&err),
        }
    } else {
        None
    };
    app.handle(Request::from_parts(parts, body)).await
}

fn to_hyper(response: Response<Bytes>) -> Response<Full<Bytes>> {
    let mut out = response.map(Full::new);
    if matches!(
        out.status(),
        StatusCode::PAYLOAD_TOO_LARGE | StatusCode::REQUEST_TIMEOUT
    ) {
        // The unread rest of the body makes the connection unusable.
        out.headers_mut()
            .insert(CONNECTION, HeaderValue::from_static("close"));
    }
    out
}

/// Accepts connections until `shutdown` completes, with the default [`ServerLimits`].
pub async fn serve(
    app: Arc<App>,
    listener: TcpListener,
    shutdown: impl std::future::Future<Output = ()>,
) {
    serve_with_limits(app, listener, ServerLimits::default(), shutdown).await
}

/// Accepts connections until `shutdown` completes.
pub async fn serve_with_limits(
    app: Arc<App>,
    listener: TcpListener,
    limits: ServerLimits,
    shutdown: impl std::future::Future<Output = ()>,
) {
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
    let shared = Arc::new(Shared {
        app,
        local_files,
        upload_slots: Arc::new(Semaphore::new(limits.max_uploads.max(1))),
        upload_queue: Arc::new(Semaphore::new(
            limits
                .max_uploads
                .max(1)
                .saturating_mul(1 + UPLOAD_WAITERS_PER_SLOT)
                .min(Semaphore::MAX_PERMITS),
        )),
        limits,
    });
    tokio::pin!(shutdown);
    loop {
        let (stream, _) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(conn) => conn,
                Err(err) => {
                    tracing::warn!(error = %err, "accept failed");
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let shared = Arc::clone(&shared);
        let builder = Arc::clone(&builder);
        tokio::spawn(async move {
            let service = service_fn(move |req| {
                let shared = Arc::clone(&shared);
                async move { Ok::<_, Infallible>(to_hyper(serve_one(&shared, req).await)) }
            });
            if let Err(err) = builder
                .serve_connection(TokioIo::new(stream), service)
                .await
            {
                tracing::debug!(error = %err, "connection ended with an error");
            }
        });
    }
}

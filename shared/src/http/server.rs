//! The local HTTP server of `sitehost serve`: hyper in front of the same `App` the Lambda
//! functions use.

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder;
use tokio::net::TcpListener;

use crate::error::ApiError;
use crate::http::{ApiRequest, ApiResponse, App};

/// A stored file, when `sitehost serve` is the frontend host: `GET /img/upload/x.jpg`.
async fn serve_file(app: &App, method: &http::Method, path: &str) -> Option<ApiResponse> {
    let files = app.local_files.as_ref()?;
    if path.starts_with("/api/") || !(method == http::Method::GET || method == http::Method::HEAD) {
        return None;
    }
    let decoded = percent_encoding::percent_decode_str(path)
        .decode_utf8()
        .ok()?;
    Some(match files.read(&decoded).await {
        Some((bytes, content_type)) => ApiResponse {
            status: StatusCode::OK,
            headers: vec![
                ("content-type", content_type.to_string()),
                (
                    "cache-control",
                    crate::store::files::CACHE_CONTROL.to_string(),
                ),
            ],
            body: if method == http::Method::HEAD {
                Bytes::new()
            } else {
                bytes
            },
        },
        None => ApiResponse::error(&ApiError::NotFound(format!("no file at {path}"))),
    })
}

async fn serve_one(app: &App, req: Request<Incoming>) -> ApiResponse {
    // The API reference (`/api/v2/openapi.json`, `/docs/`): public, so before any signing.
    if let Some(response) = crate::http::docs::serve(req.method(), req.uri().path()) {
        return response;
    }
    if let Some(response) = serve_file(app, req.method(), req.uri().path()).await {
        return response;
    }
    let (parts, body) = req.into_parts();
    // Read at most one byte past the limit, so a huge body is refused without buffering it.
    let body = match Limited::new(body, app.config.max_body_bytes)
        .collect()
        .await
    {
        Ok(collected) => collected.to_bytes(),
        Err(err)
            if err
                .downcast_ref::<http_body_util::LengthLimitError>()
                .is_some() =>
        {
            return ApiResponse::error(&ApiError::TooLarge(format!(
                "the request body is over {} bytes",
                app.config.max_body_bytes
            )));
        }
        Err(_) => {
            return ApiResponse::error(&ApiError::invalid("The request body could not be read."))
        }
    };
    let req = ApiRequest {
        method: parts.method,
        path: parts.uri.path().to_string(),
        query: parts.uri.query().unwrap_or_default().to_string(),
        headers: parts.headers,
        body,
    };
    app.handle(req).await
}

fn to_hyper(response: ApiResponse) -> Response<Full<Bytes>> {
    let mut out = Response::new(Full::new(response.body));
    *out.status_mut() = response.status;
    for (name, value) in response.headers {
        if let Ok(value) = http::HeaderValue::from_str(&value) {
            out.headers_mut().append(name, value);
        }
    }
    if out.status() == StatusCode::PAYLOAD_TOO_LARGE {
        // The unread rest of the body makes the connection unusable.
        out.headers_mut().insert(
            http::header::CONNECTION,
            http::HeaderValue::from_static("close"),
        );
    }
    out
}

/// Accepts connections until `shutdown` completes.
pub async fn serve(
    app: Arc<App>,
    listener: TcpListener,
    shutdown: impl std::future::Future<Output = ()>,
) {
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
        let app = Arc::clone(&app);
        tokio::spawn(async move {
            let service = service_fn(move |req| {
                let app = Arc::clone(&app);
                async move { Ok::<_, Infallible>(to_hyper(serve_one(&app, req).await)) }
            });
            if let Err(err) = Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), service)
                .await
            {
                tracing::debug!(error = %err, "connection ended with an error");
            }
        });
    }
}

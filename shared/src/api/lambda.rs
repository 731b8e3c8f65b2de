//! The Lambda adapter: API Gateway (HTTP API, payload v2) events in, responses out.

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use lambda_http::request::RequestContext;
use lambda_http::{service_fn, Body, Request, RequestExt, Response};

use crate::api::{ApiRequest, ApiResponse, App, Operation};

pub fn from_lambda(req: Request) -> ApiRequest {
    // For the request log: API Gateway's id (its access log and the `apigw-requestid`
    // response header carry it) and the invocation's (the platform's REPORT line).
    let request_id = match req.request_context_ref() {
        Some(RequestContext::ApiGatewayV2(context)) => context.request_id.clone(),
        _ => None,
    };
    let invocation_id = req.lambda_context_ref().map(|c| c.request_id.clone());
    let (parts, body) = req.into_parts();
    let body = match body {
        Body::Empty => Bytes::new(),
        Body::Text(text) => Bytes::from(text),
        Body::Binary(bytes) => Bytes::from(bytes),
        // Any future variant carries no body we understand.
        #[allow(unreachable_patterns)]
        _ => Bytes::new(),
    };
    ApiRequest {
        method: parts.method,
        path: parts.uri.path().to_string(),
        query: parts.uri.query().unwrap_or_default().to_string(),
        headers: parts.headers,
        body,
        request_id,
        invocation_id,
    }
}

pub fn to_lambda(response: ApiResponse) -> Response<Body> {
    let mut builder = Response::builder().status(response.status);
    for (name, value) in &response.headers {
        builder = builder.header(*name, value);
    }
    let body = match String::from_utf8(response.body.to_vec()) {
        Ok(text) => Body::Text(text),
        Err(err) => Body::Binary(err.into_bytes()),
    };
    builder.body(body).unwrap_or_else(|_| {
        let mut fallback =
            Response::new(Body::Text("{\"error\": \"internal server error\"}".into()));
        *fallback.status_mut() = http::StatusCode::INTERNAL_SERVER_ERROR;
        fallback
    })
}

/// Serves one operation on Lambda until the runtime stops.
pub async fn run(app: Arc<App>, operation: Operation) -> Result<(), lambda_http::Error> {
    lambda_http::run(service_fn(move |req: Request| {
        let app = Arc::clone(&app);
        async move {
            let response = app.handle_operation(operation, from_lambda(req)).await;
            Ok::<_, Infallible>(to_lambda(response))
        }
    }))
    .await
}

/// The whole cold start of a function: logs, configuration, store clients, then the
/// runtime loop for its one operation.
pub async fn start(operation: Operation) -> Result<(), lambda_http::Error> {
    crate::telemetry::init_lambda();
    let config = crate::config::Config::from_env(crate::config::Defaults::lambda())?;
    let stores = crate::store::open(&config).await?;
    run(Arc::new(App::new(stores, config)?), operation).await
}

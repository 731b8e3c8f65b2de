//! The Lambda adapter: API Gateway (HTTP API, payload v2) events in, responses out.

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use lambda_http::request::RequestContext;
use lambda_http::{service_fn, Body, Request, RequestExt, Response};

use crate::api::{App, Operation, PlatformIds};
use crate::operations::siblings::Siblings;

/// An API Gateway event as the app's request: the same method, URI and headers, the body
/// as bytes, and the platform's ids for the request log.
pub fn from_lambda(req: Request) -> http::Request<Bytes> {
    // API Gateway's id (its access log and the `apigw-requestid` response header carry it)
    // and the invocation's (the platform's REPORT line).
    let ids = PlatformIds {
        request_id: match req.request_context_ref() {
            Some(RequestContext::ApiGatewayV2(context)) => context.request_id.clone(),
            _ => None,
        },
        invocation_id: req.lambda_context_ref().map(|c| c.request_id.clone()),
    };
    let mut req = req.map(|body| match body {
        Body::Empty => Bytes::new(),
        Body::Text(text) => Bytes::from(text),
        Body::Binary(bytes) => Bytes::from(bytes),
        // Any future variant carries no body we understand.
        #[allow(unreachable_patterns)]
        _ => Bytes::new(),
    });
    req.extensions_mut().insert(ids);
    req
}

/// The app's response as API Gateway's: none for an empty body (a 204), text when the body
/// is UTF-8 (every JSON answer), base64-encoded binary otherwise.
pub fn to_lambda(response: http::Response<Bytes>) -> Response<Body> {
    response.map(|body| {
        if body.is_empty() {
            return Body::Empty;
        }
        match String::from_utf8(body.into()) {
            Ok(text) => Body::Text(text),
            Err(err) => Body::Binary(err.into_bytes()),
        }
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
    let app = cold_start(app_cold_start()).await?;
    run(Arc::new(app), operation).await
}

/// The cold start of `image-sibling`, the frontend's maker of siblings (behind the
/// distribution's origin group, not the API): the bucket as its file store, then the
/// runtime loop, answering each request with `api::sibling_answer::answer`.
pub async fn start_siblings() -> Result<(), lambda_http::Error> {
    let siblings = Arc::new(cold_start(siblings_cold_start()).await?);
    lambda_http::run(service_fn(move |req: Request| {
        let siblings = Arc::clone(&siblings);
        async move {
            // The invocation's own deadline: the answer is sent before it (the variant when
            // the sibling is not made by then), never a timeout CloudFront caches nothing of.
            let deadline = req.lambda_context_ref().map(|context| {
                let left = context
                    .deadline()
                    .duration_since(std::time::SystemTime::now())
                    .unwrap_or_default();
                tokio::time::Instant::now() + left
            });
            let req = from_lambda(req);
            let (method, path) = (req.method(), req.uri().path());
            let response =
                crate::api::sibling_answer::answer(&siblings, method, path, deadline).await;
            Ok::<_, Infallible>(to_lambda(response))
        }
    }))
    .await
}

/// What a failed cold start reports: the Runtime API's error type and the error.
type ColdStartError = (&'static str, lambda_http::Error);

/// Logging first, with the defaults if its own settings are bad, so that any failure of
/// `rest` (theirs included) is logged as well as reported. A cold start that fails is
/// reported to the Runtime API's `/runtime/init/error` (lambda_runtime reports only
/// SnapStart failures there), so Lambda shows the reason as the init error instead of a
/// bare "Runtime exited".
async fn cold_start<T>(
    rest: impl std::future::Future<Output = Result<T, ColdStartError>>,
) -> Result<T, lambda_http::Error> {
    let log_settings = crate::config::LogSettings::from_env();
    crate::api::logging::init_lambda(&log_settings.as_ref().cloned().unwrap_or_default());
    let started = match log_settings {
        Ok(_) => rest.await,
        Err(err) => Err(("Sitehost.ConfigInvalid", err.into())),
    };
    match started {
        Ok(started) => Ok(started),
        Err((error_type, err)) => {
            let message = crate::error::error_chain(err.as_ref());
            tracing::error!(error = %message, error_type, "cold start failed");
            report_init_error(error_type, &message).await;
            Err(err)
        }
    }
}

async fn app_cold_start() -> Result<App, ColdStartError> {
    let config = crate::config::Config::from_env(crate::config::Defaults::lambda())
        .map_err(|e| ("Sitehost.ConfigInvalid", e.into()))?;
    let stores = match &config.store {
        crate::config::StoreKind::DynamoDb { table } => {
            crate::deployment::dynamodb_stores(&config, table).await
        }
        crate::config::StoreKind::Embedded { .. } => Err(crate::ApiError::internal(
            "a Lambda function uses DynamoDB: set SITEHOST_STORE=dynamodb and SITEHOST_TABLE",
        )),
    }
    .map_err(|e| ("Sitehost.StoreUnavailable", e.into()))?;
    App::new(stores, config).map_err(|e| ("Sitehost.ConfigInvalid", e.into()))
}

/// The bucket and the pipeline: no table, no authentication (only the distribution may
/// invoke the function, through its origin access control).
async fn siblings_cold_start() -> Result<Siblings, ColdStartError> {
    let config = crate::config::Config::from_env(crate::config::Defaults::lambda())
        .map_err(|e| ("Sitehost.ConfigInvalid", e.into()))?;
    let aws = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    let files = crate::deployment::bucket_files(&config, &aws);
    crate::deployment::siblings(files.as_ref()).ok_or((
        "Sitehost.ConfigInvalid",
        "image-sibling needs SITEHOST_BUCKET and a build with the image pipeline".into(),
    ))
}

/// POSTs `{"errorType", "errorMessage", "stackTrace"}` to `/runtime/init/error`, the
/// Runtime API's documented format. Best effort: the process exits with the error anyway.
async fn report_init_error(error_type: &str, message: &str) {
    use lambda_runtime_api_client::{body::Body as ApiBody, build_request, PooledClient};
    // The client panics on a missing or malformed address; a binary started by hand has none.
    let Some(endpoint) = std::env::var("AWS_LAMBDA_RUNTIME_API")
        .ok()
        .and_then(|address| http::Uri::try_from(address).ok())
    else {
        return;
    };
    let body = serde_json::json!({
        "errorType": error_type,
        "errorMessage": message,
        "stackTrace": [],
    });
    let request = build_request()
        .method(http::Method::POST)
        .uri("/2018-06-01/runtime/init/error")
        .header("lambda-runtime-function-error-type", error_type)
        .header("content-type", "application/json")
        .body(ApiBody::from(body.to_string()));
    let sent = match request {
        Ok(request) => {
            let client = PooledClient::builder().with_endpoint(endpoint).build();
            client.call(request).await.map(|_| ())
        }
        Err(e) => Err(e.into()),
    };
    if let Err(err) = sent {
        tracing::error!(error = %err, "could not report the init error to the Runtime API");
    }
}

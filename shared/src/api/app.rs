//! The application: built once per cold start, it authenticates and dispatches requests.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http::header::{ALLOW, LOCATION};
use http::request::Parts;
use http::{Request, Response};

use crate::api::budgets::Budgets;
use crate::api::idempotency;
use crate::api::request_log::{self, RequestLog};
use crate::api::{
    allowed_methods, error_response, header, json_response, query_params, route, set_header,
    Operation, PlatformIds, Route,
};
use crate::auth::{self, Authenticated};
use crate::clock::{Clock, SystemClock};
use crate::config::{byte_size, larger_images_by_url, Config};
use crate::error::{ApiError, Result};
use crate::operations::images as image;
use crate::operations::{business, Reply, Services};
use crate::store::Stores;

pub struct App {
    /// What the operations work with (stores, clock, configuration).
    pub services: Services,
    budgets: Budgets,
}

/// What is known of a request as it is dispatched, for its log line.
#[derive(Default)]
struct Progress {
    authenticated: Option<Authenticated>,
    body_bytes: usize,
}

/// A request's body as an adapter supplies it: already in memory (Lambda), or still to be
/// read from the connection (`sitehost serve`).
#[async_trait::async_trait]
pub trait RequestBody: Send {
    /// The length when known before reading (the bytes held, or a `Content-Length`).
    fn known_len(&self) -> Option<u64>;
    /// The whole body; one longer than `limit` is refused (413) without being buffered.
    async fn read(self, limit: usize) -> Result<Bytes>;
}

#[async_trait::async_trait]
impl RequestBody for Bytes {
    fn known_len(&self) -> Option<u64> {
        Some(self.len() as u64)
    }

    async fn read(self, limit: usize) -> Result<Bytes> {
        if self.len() > limit {
            return Err(body_too_large(limit));
        }
        Ok(self)
    }
}

/// The 413 of a body over `limit` bytes, as an adapter reading it answers; `dispatch`
/// restates it for the route ([`body_too_large_for`]).
pub fn body_too_large(limit: usize) -> ApiError {
    ApiError::TooLarge(format!(
        "The request body is over the limit of {}.",
        byte_size(limit as u64)
    ))
}

/// The 413 of a body over the configured limit. On the upload route it says what a base64
/// upload may hold and that a larger image goes by `external_url`: a phone photo of a few
/// MB is over the body limit once base64-encoded.
pub fn body_too_large_for(config: &Config, operation: Operation) -> ApiError {
    if operation != Operation::ImageUpload {
        return body_too_large(config.max_body_bytes);
    }
    ApiError::TooLarge(format!(
        "The request body is over the limit of {}. A base64 upload may hold at most {} \
         once decoded; {}.",
        byte_size(config.max_body_bytes as u64),
        byte_size(config.upload_max_bytes as u64),
        larger_images_by_url(config.fetch.max_bytes)
    ))
}

impl App {
    pub fn new(stores: Stores, config: Config) -> Result<Self> {
        Ok(App {
            services: Services {
                uploads: crate::deployment::image_uploads(&config, stores.files.as_ref())?,
                store: stores.records,
                files: stores.files,
                clock: Arc::new(SystemClock),
                config,
            },
            budgets: Budgets::default(),
        })
    }

    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.services.clock = clock;
        self
    }

    /// Serves any API request whose body is already in memory.
    pub async fn handle(&self, req: Request<Bytes>) -> Response<Bytes> {
        let (parts, body) = req.into_parts();
        self.respond(parts, body, None).await
    }

    /// Serves any API request whose body is still to be read (`sitehost serve`): it is
    /// read only once the request is admitted, so a refused request's body is never
    /// buffered.
    pub async fn handle_head(&self, parts: Parts, body: impl RequestBody) -> Response<Bytes> {
        self.respond(parts, body, None).await
    }

    /// Serves a request for one operation only (a Lambda function); any other operation's
    /// route is 404. An unknown path (404) or method (405 with `Allow`) is answered as
    /// `handle` answers it, before authentication: the function behind API Gateway's
    /// `$default` route relies on that.
    pub async fn handle_operation(
        &self,
        operation: Operation,
        req: Request<Bytes>,
    ) -> Response<Bytes> {
        let (parts, body) = req.into_parts();
        self.respond(parts, body, Some(operation)).await
    }

    async fn respond(
        &self,
        parts: Parts,
        body: impl RequestBody,
        only: Option<Operation>,
    ) -> Response<Bytes> {
        let started = Instant::now();
        // Filled in as the request goes: who made it (once the signature checks out) and
        // how much body was read.
        let mut progress = Progress::default();
        let (result, upload) = crate::operations::upload_stats::collecting_upload_stats(
            self.dispatch(&parts, body, only, &mut progress),
        )
        .await;
        let mut error = None;
        let path = parts.uri.path();
        let response = match result {
            Ok(response) => response,
            Err(err) => {
                let mut response = error_response(&err);
                if response.status().is_server_error() {
                    error = Some(crate::error::error_chain(&err));
                }
                if let ApiError::MethodNotAllowed(_) = err {
                    set_header(&mut response, ALLOW, &allowed_methods(path));
                }
                response
            }
        };
        // The key is the public half (never the secret, never the signature): with the
        // account and user it attributes every change to whoever made it.
        let who = progress.authenticated.as_ref();
        let ids = parts.extensions.get::<PlatformIds>();
        let request_id = ids
            .and_then(|ids| ids.request_id.clone())
            .unwrap_or_else(request_log::new_request_id);
        RequestLog {
            request_id: &request_id,
            invocation_id: ids.and_then(|ids| ids.invocation_id.as_deref()),
            operation: route(&parts.method, path).ok().map(|r| r.operation),
            method: parts.method.as_str(),
            path,
            status: response.status().as_u16(),
            latency: started.elapsed(),
            body_bytes: progress.body_bytes,
            key: who.map(|a| a.key.as_str()),
            account_id: who.map(|a| a.caller.account_id),
            user_id: who.map(|a| a.caller.user_id),
            upload,
            error,
        }
        .emit();
        response
    }

    /// Route, authenticate from the head, admit (nonce, then budgets), read the body, run.
    /// Only a form-encoded body, whose parameters are signed, is read before the signature
    /// is checked, and it may have at most [`auth::MAX_FORM_BODY_BYTES`].
    async fn dispatch(
        &self,
        parts: &Parts,
        body: impl RequestBody,
        only: Option<Operation>,
        progress: &mut Progress,
    ) -> Result<Response<Bytes>> {
        let path = parts.uri.path();
        let route = route(&parts.method, path)?;
        if only.is_some_and(|op| op != route.operation) {
            return Err(ApiError::NotFound(format!("no resource at {path}")));
        }
        let max_body = self.services.config.max_body_bytes;
        let too_large = || body_too_large_for(&self.services.config, route.operation);
        if body.known_len().is_some_and(|len| len > max_body as u64) {
            return Err(too_large());
        }
        let params = query_params(&parts.uri)?;
        let now = self.services.clock.now();
        let headers = &parts.headers;
        let content_type = header(headers, "content-type");
        // A form body is read now (its parameters are signed); any other waits for admission.
        let (form_body, unread) = if auth::is_form(content_type) {
            let form = body
                .read(auth::MAX_FORM_BODY_BYTES)
                .await
                .map_err(|err| match err {
                    ApiError::TooLarge(_) => auth::form_body_too_large(),
                    other => other,
                })?;
            progress.body_bytes = form.len();
            (Some(form), None)
        } else {
            (None, Some(body))
        };
        let base_uris = auth::candidate_base_uris(
            path,
            |name| header(headers, name).map(str::to_string),
            &self.services.config.default_scheme,
            &self.services.config.public_hosts,
            self.services.config.origin_verify.as_ref(),
        );
        let signed_params = auth::signed_params(
            &params,
            content_type,
            form_body.as_deref().unwrap_or_default(),
        )?;
        let auth = auth::authenticate(
            self.services.store.as_ref(),
            now,
            parts.method.as_str(),
            &base_uris,
            header(headers, "authorization"),
            &signed_params,
        )
        .await?;
        progress.authenticated = Some(auth.clone());
        let idempotency_key = idempotency::key_of(headers, route.operation)?;
        self.admit(&auth, route.operation, now).await?;
        let body = match unread {
            None => form_body.unwrap_or_default(),
            Some(body) => {
                let body = body.read(max_body).await.map_err(|err| match err {
                    ApiError::TooLarge(_) => too_large(),
                    other => other,
                })?;
                progress.body_bytes = body.len();
                body
            }
        };
        let run = self.run(route, &auth, &body, &params);
        match idempotency_key {
            None => run.await,
            Some(key) => {
                let fingerprint = idempotency::fingerprint(route.operation, &body);
                let store = self.services.store.as_ref();
                let account_id = auth.caller.account_id;
                idempotency::run_once(store, account_id, &key, &fingerprint, now, run).await
            }
        }
    }

    /// Admits an authenticated request, in the order that keeps a replay or a flood cheap:
    /// a budget this process already saw spent refuses at once, recording nothing; the
    /// nonce is recorded next, so a replay is a 401 that spends no budget; the budget is
    /// drawn last. Every operation, a read too, runs only after all three (a list may read
    /// thousands of items). This costs one more store round trip than drawing the budget
    /// alongside the nonce, where the budget is drawn from the store at all (the embedded
    /// store counts in memory; DynamoDB instances draw large budgets in chunks).
    async fn admit(&self, auth: &Authenticated, operation: Operation, now: i64) -> Result<()> {
        let settings = self.services.config.budgets;
        self.budgets
            .refuse_if_spent(settings, &auth.key, operation, now)?;
        auth::record_nonce(self.services.store.as_ref(), auth, now).await?;
        self.budgets
            .draw(self.services.store.as_ref(), settings, auth, operation, now)
            .await
    }

    async fn run(
        &self,
        route: Route,
        auth: &Authenticated,
        body: &[u8],
        params: &[(String, String)],
    ) -> Result<Response<Bytes>> {
        let caller = &auth.caller;
        let services = &self.services;
        let id = || {
            route
                .id
                .ok_or_else(|| ApiError::internal("routed without an id"))
        };
        let reply = match route.operation {
            Operation::BusinessList => business::list(services, caller, params).await,
            Operation::BusinessGet => business::get(services, caller, id()?).await,
            Operation::BusinessCreate => business::create(services, caller, body).await,
            Operation::BusinessUpdate => business::update(services, caller, id()?, body).await,
            Operation::ImageList => image::list(services, caller, params).await,
            Operation::ImageGet => image::get(services, caller, id()?).await,
            Operation::ImageDelete => image::delete(services, caller, id()?).await,
            Operation::ImageUpload => match &services.uploads {
                Some(uploads) => uploads.upload(services, caller, body).await,
                None => Err(ApiError::internal(
                    "no image uploads here: a build without the `images` feature, or no file \
                     store (SITEHOST_BUCKET)",
                )),
            },
        }?;
        Ok(to_response(reply))
    }
}

fn to_response(reply: Reply) -> Response<Bytes> {
    if reply.status == http::StatusCode::NO_CONTENT {
        let mut response = Response::new(Bytes::new());
        *response.status_mut() = reply.status;
        return response;
    }
    let mut response = json_response(reply.status, &reply.body);
    if let Some(location) = reply.location {
        set_header(&mut response, LOCATION, &location);
    }
    response
}

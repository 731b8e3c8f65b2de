//! The application: built once per cold start, it answers every API request. Each request
//! is routed, authenticated from its head, admitted (`admission`), dispatched to its
//! operation once its body is read, and answered, with one request log line.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http::header::{ALLOW, LOCATION};
use http::request::Parts;
use http::{Method, Request, Response};

use crate::api::admission::Admission;
use crate::api::body::{body_too_large_for, RequestBody};
use crate::api::budgets::KeyWrites;
use crate::api::request_log::{self, RequestLog};
use crate::api::{
    allowed_methods, error_response, header, idempotency, json_response, params, route, set_header,
    Operation, PlatformIds, Route,
};
use crate::auth::{self, Authenticated};
use crate::clock::{Clock, SystemClock};
use crate::config::Config;
use crate::error::{ApiError, Result};
use crate::operations::images as image;
use crate::operations::{business, locations, posts, sites, Reply, Services};
use crate::store::{IdempotencyKey, StoredAnswer, Stores};

pub struct App {
    /// What the operations work with (stores, clock, configuration).
    pub services: Services,
    admission: Admission,
}

/// What is known of a request as it is dispatched, for its log line.
#[derive(Default)]
struct Progress {
    /// The routed operation (also when a function serving another one answers 404).
    operation: Option<Operation>,
    authenticated: Option<Authenticated>,
    body_bytes: usize,
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
            admission: Admission::default(),
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

    /// Dispatches the request, answers it (an error as [`error_response`] has it) and logs
    /// its line.
    async fn respond(
        &self,
        parts: Parts,
        body: impl RequestBody,
        only: Option<Operation>,
    ) -> Response<Bytes> {
        let started = Instant::now();
        // Filled in as the request goes: its operation once routed, who made it (once the
        // signature checks out) and how much body was read.
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
            operation: progress.operation,
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

    /// Route, authenticate from the head, admit, read the body, run (once per
    /// `Idempotency-Key`). Only a form-encoded body, whose parameters are signed, is read
    /// before the signature is checked, and it may have at most
    /// [`params::MAX_FORM_BODY_BYTES`].
    async fn dispatch(
        &self,
        parts: &Parts,
        body: impl RequestBody,
        only: Option<Operation>,
        progress: &mut Progress,
    ) -> Result<Response<Bytes>> {
        let path = parts.uri.path();
        // The API root: public, like the router's 404, so before the origin check and the
        // signature; on Lambda the `$default` route's function answers it.
        if super::root::is_root(path) {
            return super::root::answer(&parts.method);
        }
        let route = route(&parts.method, path)?;
        progress.operation = Some(route.operation);
        if only.is_some_and(|op| op != route.operation) {
            return Err(ApiError::NotFound(format!("no resource at {path}")));
        }
        let config = &self.services.config;
        // Before anything reads the store (the key, the nonce, the budgets).
        auth::origin::require_secret(
            config.origin_verify.as_ref(),
            header(&parts.headers, auth::origin::ORIGIN_VERIFY_HEADER),
        )?;
        let too_large = || body_too_large_for(config, route.operation);
        if body
            .known_len()
            .is_some_and(|len| len > config.max_body_bytes as u64)
        {
            return Err(too_large());
        }
        let query = params::query(&parts.uri)?;
        let now = self.services.clock.now();
        // A form body is read now (its parameters are signed); any other waits for admission.
        let (form, unread) = if params::is_form(header(&parts.headers, "content-type")) {
            // Read before the signature is checked only when the body may carry it, or the
            // head's own signature parameters are whole and fresh.
            auth::head_may_be_signed(header(&parts.headers, "authorization"), &query, now)?;
            let limit = params::MAX_FORM_BODY_BYTES;
            let form = read(body, limit, params::form_body_too_large, progress).await?;
            (Some(form), None)
        } else {
            (None, Some(body))
        };
        let auth = self
            .authenticate(parts, &query, form.as_deref(), now)
            .await?;
        progress.authenticated = Some(auth.clone());
        let store = self.services.store.as_ref();
        self.admission
            .admit(store, config.budgets, &auth, route.operation, now)
            .await?;
        crate::api::body::OnAdmitted::notify(&parts.extensions);
        // Only now: a request refused for its key has spent its nonce and budget, so the
        // same signed request is not answered again and again for free.
        let idempotency_key = idempotency::key_of(&parts.headers, route.operation)?;
        let body = match unread {
            None => form.unwrap_or_default(),
            Some(body) => read(body, config.max_body_bytes, too_large, progress).await?,
        };
        let origin = format!(
            "{}://{}",
            config.default_scheme,
            header(&parts.headers, "host").unwrap_or("localhost")
        );
        let run = self.run(route, &auth, &body, &query, &origin);
        match idempotency_key {
            None => run.await,
            Some(value) => {
                let key = IdempotencyKey {
                    account_id: auth.caller.account_id,
                    api_key: &auth.key,
                    value: &value,
                };
                let fingerprint = idempotency::fingerprint(route.operation, &body);
                let replay = |answer| self.replay(&auth, answer);
                idempotency::run_once(store, &key, &fingerprint, now, run, replay).await
            }
        }
    }

    /// The replay of an `Idempotency-Key`'s answer: the created object read again as the
    /// caller's GET of its `Location` reads it (with that operation's visibility rules, so a
    /// 404 once the caller cannot see it), answered with the first answer's status.
    async fn replay(&self, auth: &Authenticated, answer: StoredAnswer) -> Result<Response<Bytes>> {
        let get = route(&Method::GET, &answer.created_uri)
            .ok()
            .filter(|get| {
                matches!(
                    get.operation,
                    Operation::BusinessGet
                        | Operation::ImageGet
                        | Operation::LocationGet
                        | Operation::SiteGet
                        | Operation::PostGet
                )
            })
            .ok_or_else(|| {
                ApiError::internal(format!(
                    "an Idempotency-Key's answer names no object: {}",
                    answer.created_uri
                ))
            })?;
        let response = self.run(get, auth, &[], &[], "").await?;
        Ok(idempotency::replayed(response, &answer))
    }

    /// Checks the request's signature, over its query's and form body's parameters, for
    /// any base URI it may have been signed against. Its nonce is not recorded yet.
    async fn authenticate(
        &self,
        parts: &Parts,
        query: &[(String, String)],
        form: Option<&[u8]>,
        now: i64,
    ) -> Result<Authenticated> {
        let config = &self.services.config;
        let headers = &parts.headers;
        let base_uris = auth::candidate_base_uris(
            parts.uri.path(),
            |name| header(headers, name).map(str::to_string),
            &config.default_scheme,
            &config.public_hosts,
            config.origin_verify.as_ref(),
        );
        let content_type = header(headers, "content-type");
        let signed = params::signed(query, content_type, form.unwrap_or_default())?;
        auth::authenticate(
            self.services.store.as_ref(),
            now,
            parts.method.as_str(),
            &base_uris,
            header(headers, "authorization"),
            &signed,
        )
        .await
    }

    /// Runs the routed operation. `origin` (the scheme and `Host` the request came to)
    /// completes a staged upload's form URL when it is on this server (`sitehost serve`).
    async fn run(
        &self,
        route: Route,
        auth: &Authenticated,
        body: &[u8],
        params: &[(String, String)],
        origin: &str,
    ) -> Result<Response<Bytes>> {
        let caller = &auth.caller;
        let services = &self.services;
        let budget = KeyWrites {
            store: services.store.as_ref(),
            settings: services.config.budgets,
            auth,
            now: services.clock.now(),
        };
        let id = || {
            route
                .id
                .ok_or_else(|| ApiError::internal("routed without an id"))
        };
        let reply = match route.operation {
            Operation::BusinessList => business::list(services, caller, params).await,
            Operation::BusinessGet => business::get(services, caller, id()?).await,
            Operation::BusinessCreate => business::create(services, caller, body, &budget).await,
            Operation::BusinessUpdate => {
                business::update(services, caller, id()?, body, &budget).await
            }
            Operation::ImageList => image::list(services, caller, params).await,
            Operation::ImageGet => image::get(services, caller, id()?).await,
            Operation::ImageDelete => image::delete(services, caller, id()?).await,
            Operation::LocationList => locations::list(services, caller, params).await,
            Operation::LocationGet => locations::get(services, caller, id()?).await,
            Operation::LocationCreate => locations::create(services, caller, body, &budget).await,
            Operation::LocationUpdate => {
                locations::update(services, caller, id()?, body, &budget).await
            }
            Operation::LocationDelete => locations::delete(services, caller, id()?).await,
            Operation::ImageUpload => match &services.uploads {
                Some(uploads) => uploads.upload(services, caller, body).await,
                None => Err(ApiError::internal(
                    "no image uploads here: a build without the `images` feature, or no file \
                     store (SITEHOST_BUCKET)",
                )),
            },
            Operation::ImageUploadSession => {
                image::staged::create_session(services, caller, body, origin).await
            }
            Operation::SiteList => sites::list(services, caller, params).await,
            Operation::SiteGet => sites::get(services, caller, id()?).await,
            Operation::SiteCreate => sites::create(services, caller, body, &budget).await,
            Operation::SiteUpdate => sites::update(services, caller, id()?, body, &budget).await,
            Operation::SiteDelete => sites::delete(services, caller, id()?, &budget).await,
            Operation::PostList => posts::list(services, caller, params).await,
            Operation::PostGet => posts::get(services, caller, id()?).await,
            Operation::PostCreate => posts::create(services, caller, body, &budget).await,
            Operation::PostUpdate => posts::update(services, caller, id()?, body, &budget).await,
        }?;
        Ok(to_response(reply))
    }
}

/// Reads a body of at most `limit` bytes (a longer one is `too_large`'s 413) and notes its
/// size for the log line.
async fn read(
    body: impl RequestBody,
    limit: usize,
    too_large: impl FnOnce() -> ApiError,
    progress: &mut Progress,
) -> Result<Bytes> {
    let bytes = body.read(limit).await.map_err(|err| match err {
        ApiError::TooLarge(_) => too_large(),
        other => other,
    })?;
    progress.body_bytes = bytes.len();
    Ok(bytes)
}

fn to_response(reply: Reply) -> Response<Bytes> {
    if reply.status == http::StatusCode::NO_CONTENT {
        let mut response = Response::new(Bytes::new());
        *response.status_mut() = reply.status;
        return response;
    }
    let mut response = json_response(reply.status, &reply.body);
    if let Some(created_uri) = reply.created_uri {
        set_header(&mut response, LOCATION, &created_uri);
    }
    response
}

//! The application: built once per cold start, it authenticates and dispatches requests.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http::header::{ALLOW, LOCATION};
use http::{Request, Response};

use crate::api::request_log::{self, RequestLog};
use crate::api::{
    allowed_methods, error_response, header, json_response, query_params, route, set_header,
    Operation, PlatformIds, Route,
};
use crate::auth::{self, Authenticated};
use crate::clock::{Clock, SystemClock};
use crate::config::Config;
use crate::error::{ApiError, Result};
use crate::operations::images as image;
use crate::operations::{business, Reply, Services};
use crate::store::{BudgetDecision, BudgetKind, Stores};

pub struct App {
    /// What the operations work with (stores, clock, configuration).
    pub services: Services,
}

impl App {
    pub fn new(stores: Stores, config: Config) -> Result<Self> {
        Ok(App {
            services: Services {
                uploads: crate::variant::image_uploads(&config, stores.files.as_ref())?,
                store: stores.records,
                files: stores.files,
                clock: Arc::new(SystemClock),
                config,
            },
        })
    }

    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.services.clock = clock;
        self
    }

    /// Serves any API request (`sitehost serve`).
    pub async fn handle(&self, req: Request<Bytes>) -> Response<Bytes> {
        self.respond(req, None).await
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
        self.respond(req, Some(operation)).await
    }

    async fn respond(&self, req: Request<Bytes>, only: Option<Operation>) -> Response<Bytes> {
        let started = Instant::now();
        // Set once the signature checks out, so the log line says who made the request.
        let mut authenticated = None;
        let (result, upload) =
            request_log::collecting_upload_stats(self.dispatch(&req, only, &mut authenticated))
                .await;
        let mut error = None;
        let path = req.uri().path();
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
        let who = authenticated.as_ref();
        let ids = req.extensions().get::<PlatformIds>();
        let request_id = ids
            .and_then(|ids| ids.request_id.clone())
            .unwrap_or_else(request_log::new_request_id);
        RequestLog {
            request_id: &request_id,
            invocation_id: ids.and_then(|ids| ids.invocation_id.as_deref()),
            operation: route(req.method(), path).ok().map(|r| r.operation),
            method: req.method().as_str(),
            path,
            status: response.status().as_u16(),
            latency: started.elapsed(),
            body_bytes: req.body().len(),
            key: who.map(|a| a.key.as_str()),
            account_id: who.map(|a| a.caller.account_id),
            user_id: who.map(|a| a.caller.user_id),
            upload,
            error,
        }
        .emit();
        response
    }

    async fn dispatch(
        &self,
        req: &Request<Bytes>,
        only: Option<Operation>,
        authenticated: &mut Option<Authenticated>,
    ) -> Result<Response<Bytes>> {
        let path = req.uri().path();
        let route = route(req.method(), path)?;
        if only.is_some_and(|op| op != route.operation) {
            return Err(ApiError::NotFound(format!("no resource at {path}")));
        }
        if req.body().len() > self.services.config.max_body_bytes {
            return Err(ApiError::TooLarge(format!(
                "the request body is over {} bytes",
                self.services.config.max_body_bytes
            )));
        }
        let params = query_params(req)?;
        let now = self.services.clock.now();
        let base_uris = auth::candidate_base_uris(
            path,
            |name| header(req, name).map(str::to_string),
            &self.services.config.default_scheme,
            &self.services.config.public_hosts,
            self.services.config.origin_verify.as_ref(),
        );
        let signed_params = auth::signed_params(&params, header(req, "content-type"), req.body())?;
        let auth = auth::authenticate(
            self.services.store.as_ref(),
            now,
            req.method().as_str(),
            &base_uris,
            header(req, "authorization"),
            &signed_params,
        )
        .await?;
        *authenticated = Some(auth.clone());
        // The budget is drawn alongside the nonce: a write runs once both have answered, a
        // read once the budget admits it. A request over budget costs its authentication,
        // nonce and budget draw, and nothing else (a list may read thousands of items).
        let budget = self.draw_budgets(&auth, route.operation, now);
        if route.operation.writes() {
            let (recorded, admitted) = tokio::join!(
                auth::record_nonce(self.services.store.as_ref(), &auth, now),
                budget
            );
            recorded?;
            admitted?;
            self.run(route, &auth, req, &params).await
        } else {
            // A read may run while its nonce is recorded; a replay still gets only a 401.
            let (recorded, response) = tokio::join!(
                auth::record_nonce(self.services.store.as_ref(), &auth, now),
                async {
                    budget.await?;
                    self.run(route, &auth, req, &params).await
                }
            );
            recorded?;
            response
        }
    }

    /// Counts the request against its key's budgets: every request against the request
    /// budget, an upload against the upload budget as well (both at once). A budget of 0
    /// is unlimited and costs nothing. Over either budget is a 429.
    async fn draw_budgets(
        &self,
        auth: &Authenticated,
        operation: Operation,
        now: i64,
    ) -> Result<()> {
        let budgets = self.services.config.budgets;
        let uploads = if operation == Operation::ImageUpload {
            budgets.uploads_per_minute
        } else {
            0
        };
        let (requests, uploads) = tokio::try_join!(
            self.draw(auth, BudgetKind::Requests, budgets.requests_per_minute, now),
            self.draw(auth, BudgetKind::Uploads, uploads, now),
        )?;
        // Report the narrower budget first: an upload refused by both is told about uploads.
        for (kind, limit, decision) in [
            (BudgetKind::Uploads, uploads.0, uploads.1),
            (BudgetKind::Requests, requests.0, requests.1),
        ] {
            if let BudgetDecision::Refused { retry_after } = decision {
                tracing::info!(
                    account_id = auth.caller.account_id,
                    budget = kind.name(),
                    limit,
                    retry_after,
                    "request over budget"
                );
                let what = match kind {
                    BudgetKind::Requests => "requests",
                    BudgetKind::Uploads => "image uploads",
                };
                return Err(ApiError::TooManyRequests {
                    message: format!(
                        "This key is over its budget of {limit} {what} a minute; retry after \
                         {retry_after} seconds."
                    ),
                    retry_after_secs: retry_after,
                });
            }
        }
        Ok(())
    }

    async fn draw(
        &self,
        auth: &Authenticated,
        kind: BudgetKind,
        limit: u64,
        now: i64,
    ) -> Result<(u64, BudgetDecision)> {
        if limit == 0 {
            return Ok((limit, BudgetDecision::Admitted));
        }
        let decision = self
            .services
            .store
            .consume_budget(&auth.key, kind, limit, now)
            .await?;
        Ok((limit, decision))
    }

    async fn run(
        &self,
        route: Route,
        auth: &Authenticated,
        req: &Request<Bytes>,
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
            Operation::BusinessCreate => business::create(services, caller, req.body()).await,
            Operation::BusinessUpdate => {
                business::update(services, caller, id()?, req.body()).await
            }
            Operation::ImageList => image::list(services, caller, params).await,
            Operation::ImageGet => image::get(services, caller, id()?).await,
            Operation::ImageUpload => match &services.uploads {
                Some(uploads) => uploads.upload(services, caller, req.body()).await,
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
    let mut response = json_response(reply.status, &reply.body);
    if let Some(location) = reply.location {
        set_header(&mut response, LOCATION, &location);
    }
    response
}

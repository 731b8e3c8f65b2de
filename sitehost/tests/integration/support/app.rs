//! The app under test, built the same way for every test that needs one (as
//! zero-to-production's `spawn_app`): a temporary data directory, the embedded stores in it
//! (or the stores a test brings: DynamoDB and S3 on moto, a faulty wrapper),
//! `Config::embedded` with the test's changes, and the `App`, served on a loopback port as
//! `sitehost serve` serves it when the test talks HTTP.
//!
//! ```ignore
//! let server = TestApp::builder()
//!     .config(|config| config.budgets.requests_per_minute = 3)
//!     .caller("agency", Some(5))
//!     .spawn()
//!     .await;
//! let reply = server.post("/api/v2/businesses/", &json!({"business_name": "Shop"})).await;
//! ```

use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response};
use serde_json::Value;
use sitehost::api::{App, Operation};
use sitehost::client::{ClientResponse, PartnerClient};
use sitehost::clock::{Clock, FixedClock, SystemClock};
use sitehost::config::Config;
use sitehost::domain::account::{ApiKey, Caller, NewKey};
use sitehost::store::{SharedStore, Stores};
use tempfile::TempDir;

use super::openapi::CheckedClient;

/// An app for one test, and what it was made of.
pub struct TestApp {
    pub app: Arc<App>,
    /// The records store the app was built on, beneath any wrapper `wrap_stores` put in
    /// front of it: where a test seeds and inspects records.
    pub store: SharedStore,
    /// The key made for `TestAppBuilder::caller`.
    caller_key: Option<ApiKey>,
    /// A client signing with `caller_key`, once served.
    caller: Option<CheckedClient>,
    /// `http://127.0.0.1:<port>` once served.
    base: Option<String>,
    dir: TempDir,
}

/// How a test's app differs from the default one (the embedded stores, the default
/// configuration, the real clock, not served).
pub struct TestAppBuilder {
    dir: TempDir,
    config: Config,
    stores: Option<Stores>,
    /// `stores.records` as given or opened, before any wrapper.
    store: Option<SharedStore>,
    now: Option<i64>,
    caller: Option<(String, Option<i64>)>,
}

impl TestApp {
    pub fn builder() -> TestAppBuilder {
        let dir = tempfile::tempdir().expect("temp dir");
        let config = Config::embedded(dir.path().into());
        TestAppBuilder {
            dir,
            config,
            stores: None,
            store: None,
            now: None,
            caller: None,
        }
    }

    /// The default app on the embedded stores, not served.
    pub async fn embedded() -> TestApp {
        TestApp::builder().build().await
    }

    /// The default app on the embedded stores, served.
    pub async fn spawn() -> TestApp {
        TestApp::builder().spawn().await
    }

    /// The data directory (the embedded stores' database and files).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The served app's URL, `http://127.0.0.1:<port>`.
    pub fn base(&self) -> &str {
        self.base
            .as_deref()
            .expect("the app is served (TestAppBuilder::spawn)")
    }

    /// The served app's `127.0.0.1:<port>`.
    pub fn addr(&self) -> &str {
        self.base().trim_start_matches("http://")
    }

    /// A new key of `account` (made if new), of no user and any sub id.
    pub async fn key(&self, account: &str) -> ApiKey {
        self.key_for(account, None, None).await
    }

    /// A new key of `account` (made if new) for `user_id`, restricted to `sub` if given.
    pub async fn key_for(&self, account: &str, user_id: Option<i64>, sub: Option<&str>) -> ApiKey {
        new_key(&self.store, account, user_id, sub).await
    }

    /// A client signing with a new key of `account` (restricted to `sub` if given), every
    /// reply checked against `docs/openapi.json`.
    pub async fn client(&self, account: &str, sub: Option<&str>) -> CheckedClient {
        let key = self.key_for(account, None, sub).await;
        CheckedClient::new(self.base(), &key.key, &key.secret)
    }

    /// A client signing with `key`, its replies unchecked.
    pub fn partner_client(&self, key: &ApiKey) -> PartnerClient {
        PartnerClient::new(self.base(), &key.key, &key.secret)
    }

    fn caller(&self) -> &CheckedClient {
        self.caller
            .as_ref()
            .expect("a caller of a served app (TestAppBuilder::caller, spawn)")
    }

    /// A GET signed with the caller's key, its reply checked against `docs/openapi.json`.
    pub async fn get(&self, path_and_query: &str) -> reqwest::Result<ClientResponse> {
        self.caller().get(path_and_query).await
    }

    /// A POST of `body` signed with the caller's key, its reply checked.
    pub async fn post(&self, path: &str, body: &Value) -> reqwest::Result<ClientResponse> {
        self.caller().post(path, body).await
    }

    /// A PUT of `body` signed with the caller's key, its reply checked.
    pub async fn put(&self, path: &str, body: &Value) -> reqwest::Result<ClientResponse> {
        self.caller().put(path, body).await
    }

    /// A DELETE signed with the caller's key, its reply checked.
    pub async fn delete(&self, path: &str) -> reqwest::Result<ClientResponse> {
        self.caller().send("DELETE", path, None).await
    }

    /// `App::handle`: any API request, in process.
    pub async fn handle(&self, request: Request<Bytes>) -> Response<Bytes> {
        self.app.handle(request).await
    }

    /// `App::handle_operation`: a request as one Lambda function takes it, in process.
    pub async fn handle_operation(
        &self,
        operation: Operation,
        request: Request<Bytes>,
    ) -> Response<Bytes> {
        self.app.handle_operation(operation, request).await
    }

    /// An upload's `body` by `caller` straight through the app's image uploads, as the
    /// upload operation runs it.
    pub async fn upload(
        &self,
        caller: &Caller,
        body: &[u8],
    ) -> sitehost::error::Result<sitehost::operations::Reply> {
        let services = &self.app.services;
        let uploads = services.uploads.as_ref().expect("uploads");
        uploads.upload(services, caller, body).await
    }
}

impl TestAppBuilder {
    /// Changes the configuration (`Config::embedded` of the data directory).
    pub fn config(mut self, configure: impl FnOnce(&mut Config)) -> Self {
        configure(&mut self.config);
        self
    }

    /// Runs the app on these stores instead of the embedded ones (the data directory stays
    /// the configuration's).
    pub fn stores(mut self, stores: Stores) -> Self {
        self.store = Some(Arc::clone(&stores.records));
        self.stores = Some(stores);
        self
    }

    /// Changes the stores before the app is built, e.g. puts a faulty wrapper in front of
    /// one; `TestApp::store` stays the records store beneath.
    pub fn wrap_stores(mut self, wrap: impl FnOnce(&mut Stores)) -> Self {
        let mut stores = match self.stores.take() {
            Some(stores) => stores,
            None => {
                let stores = Stores::embedded(self.dir.path()).expect("stores");
                self.store = Some(Arc::clone(&stores.records));
                stores
            }
        };
        wrap(&mut stores);
        self.stores = Some(stores);
        self
    }

    /// A clock fixed at `now` (Unix seconds) instead of the real one.
    pub fn clock(mut self, now: i64) -> Self {
        self.now = Some(now);
        self
    }

    /// A key of `account` for `user_id`, made on the records store once the app is built,
    /// which `TestApp::get`, `post`, `put` and `delete` sign with.
    pub fn caller(mut self, account: &str, user_id: Option<i64>) -> Self {
        self.caller = Some((account.to_string(), user_id));
        self
    }

    /// The app, not served: the test calls it in process.
    pub async fn build(self) -> TestApp {
        let stores = match self.stores {
            Some(stores) => stores,
            None => Stores::embedded(self.dir.path()).expect("stores"),
        };
        let store = self.store.unwrap_or_else(|| Arc::clone(&stores.records));
        let mut app = App::new(stores, self.config).expect("app");
        if let Some(now) = self.now {
            app = app.with_clock(Arc::new(FixedClock(now)));
        }
        let caller_key = match self.caller {
            Some((account, user_id)) => Some(new_key(&store, &account, user_id, None).await),
            None => None,
        };
        TestApp {
            app: Arc::new(app),
            store,
            caller_key,
            caller: None,
            base: None,
            dir: self.dir,
        }
    }

    /// The app served on a free loopback port for the rest of the test.
    pub async fn spawn(self) -> TestApp {
        let mut test_app = self.build().await;
        let base = serve(Arc::clone(&test_app.app)).await;
        test_app.caller = test_app
            .caller_key
            .as_ref()
            .map(|key| CheckedClient::new(&base, &key.key, &key.secret));
        test_app.base = Some(base);
        test_app
    }
}

async fn new_key(
    store: &SharedStore,
    account: &str,
    user_id: Option<i64>,
    sub: Option<&str>,
) -> ApiKey {
    let account = store.ensure_account(account).await.expect("account");
    let new = NewKey::generate(
        account.id,
        user_id,
        sub.map(str::to_string),
        SystemClock.now(),
    );
    store.create_key(new).await.expect("key")
}

/// Serves an app on a free loopback port, as `sitehost serve` does, for the rest of the
/// test; returns its base URL.
async fn serve(app: Arc<App>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(sitehost::server::serve(
        app,
        listener,
        std::future::pending(),
    ));
    base
}

//! A partner-side client that signs requests exactly like
//! `requests_oauthlib.OAuth1Session(key, client_secret=secret)`. The tests and the load
//! generator drive the API through it.

use serde_json::Value;

use crate::api::params;
use crate::auth::oauth1;
use crate::clock::{Clock, SystemClock};

#[derive(Clone)]
pub struct PartnerClient {
    http: reqwest::Client,
    /// `http://127.0.0.1:3000`: scheme and host, no trailing slash.
    base: String,
    key: String,
    secret: String,
}

/// What came back: status, headers, and the body parsed as JSON (`Null` if it was not).
#[derive(Debug)]
pub struct ClientResponse {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: Value,
}

impl PartnerClient {
    pub fn new(base: &str, key: &str, secret: &str) -> Self {
        PartnerClient {
            http: reqwest::Client::builder()
                .pool_max_idle_per_host(64)
                .build()
                .unwrap_or_default(),
            base: base.trim_end_matches('/').to_string(),
            key: key.to_string(),
            secret: secret.to_string(),
        }
    }

    /// The `Authorization` header for a request, with a fresh nonce and the current time.
    pub fn authorization(&self, method: &str, path_and_query: &str) -> String {
        let (path, query) = path_and_query
            .split_once('?')
            .unwrap_or((path_and_query, ""));
        let params = params::parse(query).unwrap_or_default();
        let nonce: u128 = rand::random();
        oauth1::authorization_header(
            method,
            &format!("{}{path}", self.base),
            &params,
            &self.key,
            &self.secret,
            SystemClock.now(),
            &nonce.to_string(),
        )
    }

    /// Sends a signed request. `path_and_query` starts with `/`.
    pub async fn send(
        &self,
        method: &str,
        path_and_query: &str,
        body: Option<Vec<u8>>,
    ) -> reqwest::Result<ClientResponse> {
        self.send_with_headers(method, path_and_query, body, &[])
            .await
    }

    /// [`Self::send`] with extra headers (an `Idempotency-Key`).
    pub async fn send_with_headers(
        &self,
        method: &str,
        path_and_query: &str,
        body: Option<Vec<u8>>,
        headers: &[(&str, &str)],
    ) -> reqwest::Result<ClientResponse> {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap_or(reqwest::Method::GET);
        let mut request = self
            .http
            .request(method.clone(), format!("{}{path_and_query}", self.base))
            .header(
                "authorization",
                self.authorization(method.as_str(), path_and_query),
            );
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        if let Some(body) = body {
            request = request
                .header("content-type", "application/json")
                .body(body);
        }
        let response = request.send().await?;
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let bytes = response.bytes().await?;
        Ok(ClientResponse {
            status,
            headers,
            body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        })
    }

    pub async fn get(&self, path_and_query: &str) -> reqwest::Result<ClientResponse> {
        self.send("GET", path_and_query, None).await
    }

    pub async fn post(&self, path: &str, body: &Value) -> reqwest::Result<ClientResponse> {
        self.send("POST", path, Some(body.to_string().into_bytes()))
            .await
    }

    pub async fn put(&self, path: &str, body: &Value) -> reqwest::Result<ClientResponse> {
        self.send("PUT", path, Some(body.to_string().into_bytes()))
            .await
    }
}

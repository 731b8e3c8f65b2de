//! moto behind the gate: requests forwarded as they came (hop-by-hop headers aside), one at
//! a time, and the tables' key schemas asked of it.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http::header::{
    HeaderName, HeaderValue, AUTHORIZATION, CONNECTION, CONTENT_LENGTH, CONTENT_TYPE,
};
use http::{HeaderMap, Method, Request, Response, Uri};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::{json, Value};

use super::{lock, Call};
use crate::answers;
use crate::schema::{table_name, TableSchema};

/// Headers that belong to one connection and never cross a proxy (RFC 9110 §7.6.1);
/// `Content-Length`, which hyper sets from the body actually sent; and `Expect`, already
/// answered: the double reads the whole body before it forwards anything.
const HOP_BY_HOP: [&str; 10] = [
    "connection",
    "expect",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "content-length",
];

/// Where moto listens, and the client that reaches it.
pub(super) struct Upstream {
    /// `http://host:port`, no trailing slash.
    base: String,
    client: Client<HttpConnector, Full<Bytes>>,
}

impl Upstream {
    pub(super) fn new(upstream: &str) -> anyhow::Result<Upstream> {
        let uri: Uri = upstream
            .parse()
            .map_err(|e| anyhow::anyhow!("upstream {upstream:?} is not a URL: {e}"))?;
        anyhow::ensure!(
            uri.scheme_str() == Some("http"),
            "upstream {upstream:?} must be a plain http:// URL (moto_server)"
        );
        let authority = uri
            .authority()
            .ok_or_else(|| anyhow::anyhow!("upstream {upstream:?} has no host"))?;
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        let client = Client::builder(TokioExecutor::new()).build(connector);
        Ok(Upstream {
            base: format!("http://{authority}"),
            client,
        })
    }
}

impl Call<'_> {
    /// Not modelled: forwarded, answered no earlier than the call latency.
    pub(super) async fn plain(&self) -> Response<Bytes> {
        let response = self.forward().await;
        self.wait_call_latency().await;
        response
    }

    pub(super) async fn delete_table(&self) -> Response<Bytes> {
        let response = self.plain().await;
        if let Some(table) = self.json().as_ref().and_then(table_name) {
            lock(&self.shared.schemas).remove(&(self.scope(), table.to_owned()));
        }
        response
    }

    /// The table's key schema, asked of moto once per table (`DescribeTable` with the
    /// request's own credentials, so moto looks in the same account and region).
    pub(super) async fn schema(&self, table: &str) -> Option<Arc<TableSchema>> {
        let cache_key = (self.scope(), table.to_owned());
        if let Some(schema) = lock(&self.shared.schemas).get(&cache_key) {
            return Some(Arc::clone(schema));
        }
        let mut headers = HeaderMap::new();
        headers.insert(
            CONTENT_TYPE,
            HeaderValue::from_static(answers::CONTENT_TYPE),
        );
        headers.insert(
            HeaderName::from_static("x-amz-target"),
            HeaderValue::from_static("DynamoDB_20120810.DescribeTable"),
        );
        // moto ignores signatures but reads the account and region from the credential.
        let authorization = self
            .parts
            .headers
            .get(AUTHORIZATION)
            .cloned()
            .unwrap_or_else(|| {
                HeaderValue::from_static(
                "AWS4-HMAC-SHA256 Credential=testing/20240101/us-east-1/dynamodb/aws4_request, \
                 SignedHeaders=content-type;host;x-amz-date;x-amz-target, Signature=0",
            )
            });
        headers.insert(AUTHORIZATION, authorization);
        let date = self
            .parts
            .headers
            .get("x-amz-date")
            .cloned()
            .unwrap_or_else(|| HeaderValue::from_static("20240101T000000Z"));
        headers.insert(HeaderName::from_static("x-amz-date"), date);
        let body = Bytes::from(json!({ "TableName": table }).to_string());
        let answer = self.send(Method::POST, "/", headers, body).await.ok()?;
        if !answer.status().is_success() {
            return None;
        }
        let described: Value = serde_json::from_slice(answer.body()).ok()?;
        let schema = Arc::new(TableSchema::from_describe_table(&described)?);
        lock(&self.shared.schemas).insert(cache_key, Arc::clone(&schema));
        Some(schema)
    }

    /// The request as it came (method, path, headers but hop-by-hop ones, body), and moto's
    /// answer as it came back (status, headers but hop-by-hop ones, body).
    pub(super) async fn forward(&self) -> Response<Bytes> {
        let path = self.parts.uri.path_and_query().map_or("/", |p| p.as_str());
        let headers = without_hop_by_hop(&self.parts.headers);
        match self
            .send(self.parts.method.clone(), path, headers, self.body.clone())
            .await
        {
            Ok(answer) => answer,
            Err(detail) => {
                tracing::warn!(%detail, "upstream failed");
                self.shared.count(|s| s.upstream_failures += 1);
                answers::upstream_failed(&detail)
            }
        }
    }

    /// One exchange with moto, inside the gate: the request goes out and the whole answer
    /// is read before the next request may go.
    async fn send(
        &self,
        method: Method,
        path: &str,
        headers: HeaderMap,
        body: Bytes,
    ) -> Result<Response<Bytes>, String> {
        let uri = format!("{}{}", self.shared.upstream.base, path);
        let mut request = Request::builder()
            .method(method)
            .uri(uri)
            .body(Full::new(body))
            .map_err(|e| format!("request not built: {e}"))?;
        *request.headers_mut() = headers;
        let turn = self.shared.gate.lock().await;
        let began = Instant::now();
        let result = async {
            let response = self
                .shared
                .upstream
                .client
                .request(request)
                .await
                .map_err(|e| format!("{e:?}"))?;
            let (parts, body) = response.into_parts();
            let body = body
                .collect()
                .await
                .map_err(|e| format!("answer body: {e}"))?
                .to_bytes();
            Ok::<_, String>(Response::from_parts(parts, body))
        }
        .await;
        let busy = began.elapsed();
        drop(turn);
        self.shared
            .count(|s| s.upstream_busy_secs += busy.as_secs_f64());
        let mut response = result?;
        let headers = without_hop_by_hop(response.headers());
        *response.headers_mut() = headers;
        Ok(response)
    }
}

fn without_hop_by_hop(headers: &HeaderMap) -> HeaderMap {
    let named_by_connection: HashSet<String> = headers
        .get_all(CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|name| name.trim().to_ascii_lowercase())
        .collect();
    let mut kept = HeaderMap::with_capacity(headers.len());
    for (name, value) in headers {
        let name_str = name.as_str();
        if HOP_BY_HOP.contains(&name_str) || named_by_connection.contains(name_str) {
            continue;
        }
        kept.append(name.clone(), value.clone());
    }
    debug_assert!(!kept.contains_key(CONTENT_LENGTH));
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hop_by_hop_headers_are_dropped() {
        let mut headers = HeaderMap::new();
        headers.insert(
            CONNECTION,
            HeaderValue::from_static("keep-alive, x-private"),
        );
        headers.insert(
            HeaderName::from_static("x-private"),
            HeaderValue::from_static("1"),
        );
        headers.insert(CONTENT_LENGTH, HeaderValue::from_static("12"));
        headers.insert(
            HeaderName::from_static("x-amz-target"),
            HeaderValue::from_static("t"),
        );
        let kept = without_hop_by_hop(&headers);
        assert_eq!(kept.len(), 1);
        assert!(kept.contains_key("x-amz-target"));
    }
}

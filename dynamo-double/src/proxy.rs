//! The HTTP side: the server the SDK talks to, the model applied per operation, and the
//! forwarding to moto through the gate.

use std::collections::{HashMap, HashSet};
use std::convert::Infallible;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header::{
    HeaderName, HeaderValue, AUTHORIZATION, CONNECTION, CONTENT_LENGTH, CONTENT_TYPE,
};
use http::request::Parts;
use http::{HeaderMap, Method, Request, Response, Uri};
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::task::JoinSet;

use crate::answers::{self, Reason};
use crate::ledger::{ItemKey, Ledger, Rates, SingleAdmission, TransactionAdmission};
use crate::schema::{table_name, write_of, TableSchema, WriteKind};
use crate::{Model, Stats, STATS_PATH};

/// DynamoDB's own request limit is 16 MB; nothing larger is read into memory.
pub const MAX_BODY_BYTES: usize = 16 * 1024 * 1024;

const TARGET_PREFIX: &str = "DynamoDB_20120810.";

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

/// What every connection shares.
pub struct Shared {
    model: Model,
    upstream: Upstream,
    /// moto is not thread-safe: one request at a time reaches it, whoever sends it.
    gate: Arc<tokio::sync::Mutex<()>>,
    ledger: Mutex<Ledger>,
    /// Key schemas by (credential scope, table name); a `DeleteTable` forgets its entry.
    schemas: Mutex<HashMap<(String, String), Arc<TableSchema>>>,
    stats: Mutex<Stats>,
}

struct Upstream {
    /// `http://host:port`, no trailing slash.
    base: String,
    client: Client<HttpConnector, Full<Bytes>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // The guarded values stay consistent between statements, so a panic elsewhere leaves
    // nothing half-done to refuse.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Shared {
    pub fn new(
        upstream: &str,
        model: Model,
        gate: Arc<tokio::sync::Mutex<()>>,
    ) -> anyhow::Result<Shared> {
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
        let rates = Rates {
            refill_per_sec: model.partition_wcu_per_sec / model.stretch,
            depth: model.partition_wcu_per_sec * model.burst_secs,
        };
        Ok(Shared {
            model,
            upstream: Upstream {
                base: format!("http://{authority}"),
                client,
            },
            gate,
            ledger: Mutex::new(Ledger::new(rates)),
            schemas: Mutex::new(HashMap::new()),
            stats: Mutex::new(Stats::default()),
        })
    }

    pub fn stats(&self) -> Stats {
        let mut stats = lock(&self.stats).clone();
        stats.held_items = lock(&self.ledger).held_items() as u64;
        stats
    }

    fn count(&self, update: impl FnOnce(&mut Stats)) {
        update(&mut lock(&self.stats));
    }
}

/// Accepts connections until the task is aborted; aborting drops the connection tasks
/// with it (and so ends their holds, see [`Hold`]).
pub async fn serve(listener: TcpListener, shared: Arc<Shared>) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    // Small request/answer pairs: Nagle's delay would be the model's latency.
                    let _ = stream.set_nodelay(true);
                    let shared = Arc::clone(&shared);
                    connections.spawn(async move {
                        let service = service_fn(move |request| handle(Arc::clone(&shared), request));
                        if let Err(e) = http1::Builder::new()
                            .serve_connection(TokioIo::new(stream), service)
                            .await
                        {
                            tracing::debug!(error = %e, "connection ended");
                        }
                    });
                }
                Err(e) => {
                    // Out of file descriptors and the like: wait rather than spin.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

async fn handle(
    shared: Arc<Shared>,
    request: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let start = Instant::now();
    let (parts, body) = request.into_parts();
    if parts.method == Method::GET && parts.uri.path() == STATS_PATH {
        let stats = serde_json::to_value(shared.stats())
            .unwrap_or_else(|e| json!({ "error": e.to_string() }));
        return Ok(answers::json_ok(&stats).map(Full::new));
    }
    let body = match Limited::new(body, MAX_BODY_BYTES).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => {
            return Ok(answers::too_large(MAX_BODY_BYTES).map(Full::new));
        }
        Err(e) => {
            tracing::debug!(error = %e, "request body not read");
            return Ok(answers::serialization("request body could not be read").map(Full::new));
        }
    };
    shared.count(|s| s.requests += 1);
    let operation = parts
        .headers
        .get("x-amz-target")
        .and_then(|t| t.to_str().ok())
        .and_then(|t| t.strip_prefix(TARGET_PREFIX))
        .map(str::to_owned);
    let call = Call {
        shared: &shared,
        parts: &parts,
        body,
        start,
    };
    let response = match operation.as_deref() {
        Some("TransactWriteItems") => call.transact_write_items().await,
        Some("PutItem") => call.single_write(WriteKind::Put).await,
        Some("UpdateItem") => call.single_write(WriteKind::Update).await,
        Some("DeleteItem") => call.single_write(WriteKind::Delete).await,
        Some("DeleteTable") => call.delete_table().await,
        _ => call.plain().await,
    };
    Ok(response.map(Full::new))
}

/// One request being answered.
struct Call<'a> {
    shared: &'a Shared,
    parts: &'a Parts,
    body: Bytes,
    start: Instant,
}

/// A transaction's holds, released when dropped: also when the client goes away and the
/// connection task is dropped mid-transaction.
struct Hold<'a> {
    ledger: &'a Mutex<Ledger>,
    transaction: u64,
}

impl Drop for Hold<'_> {
    fn drop(&mut self) {
        lock(self.ledger).release(self.transaction);
    }
}

impl Call<'_> {
    /// Not modelled: forwarded, answered no earlier than the call latency.
    async fn plain(&self) -> Response<Bytes> {
        let response = self.forward().await;
        self.wait_call_latency().await;
        response
    }

    async fn delete_table(&self) -> Response<Bytes> {
        let response = self.plain().await;
        if let Some(table) = self.json().as_ref().and_then(table_name) {
            lock(&self.shared.schemas).remove(&(self.scope(), table.to_owned()));
        }
        response
    }

    async fn single_write(&self, kind: WriteKind) -> Response<Bytes> {
        let Some(body) = self.json() else {
            self.wait_call_latency().await;
            return answers::serialization("request body is not JSON");
        };
        let Some(write) = self.modelled_write(kind, &body).await else {
            return self.plain().await;
        };
        let (write, arn) = write;
        let key = ItemKey::new(&self.scope(), &write);
        let admission = lock(&self.shared.ledger).admit_single(&key, write.wcu, Instant::now());
        match admission {
            SingleAdmission::Admitted => {
                self.shared.count(|s| s.wcu += write.wcu);
                self.plain().await
            }
            SingleAdmission::Conflict => {
                self.shared.count(|s| s.single_write_conflicts += 1);
                self.wait_call_latency().await;
                answers::transaction_conflict()
            }
            SingleAdmission::Throttled => {
                self.shared.count(|s| s.throttled += 1);
                self.wait_call_latency().await;
                answers::write_throttled(&arn)
            }
        }
    }

    /// The write of a single-item call and its table's ARN, or `None` when the call cannot
    /// be modelled (unknown table, missing key: moto answers the error).
    async fn modelled_write(
        &self,
        kind: WriteKind,
        body: &Value,
    ) -> Option<(crate::schema::Write, String)> {
        let schema = self.schema(table_name(body)?).await?;
        let write = write_of(&schema, kind, body, false)?;
        Some((write, schema.arn.clone()))
    }

    async fn transact_write_items(&self) -> Response<Bytes> {
        let Some(body) = self.json() else {
            self.wait_call_latency().await;
            return answers::serialization("request body is not JSON");
        };
        self.shared.count(|s| s.transactions += 1);
        let Some(items) = self.transaction_items(&body).await else {
            return self.plain().await;
        };
        let admission = lock(&self.shared.ledger).admit_transaction(&items, Instant::now());
        match admission {
            TransactionAdmission::Held(transaction) => {
                let hold = Hold {
                    ledger: &self.shared.ledger,
                    transaction,
                };
                let wcu: f64 = items.iter().map(|(_, wcu)| wcu).sum();
                self.shared.count(|s| s.wcu += wcu);
                // The items stay held for the modelled duration, then moto applies the
                // writes (the commit), then the holds end: readers see the old values
                // until then, like DynamoDB's readers during a transaction.
                sleep_until(
                    self.start + self.shared.model.stretched(self.shared.model.transaction),
                )
                .await;
                let response = self.forward().await;
                drop(hold);
                if response.status().is_success() {
                    self.shared.count(|s| s.committed += 1);
                }
                response
            }
            TransactionAdmission::Conflict(conflicts) => {
                self.shared.count(|s| s.transaction_conflicts += 1);
                tracing::debug!(?conflicts, "transaction cancelled: conflict");
                self.wait_call_latency().await;
                answers::transaction_canceled(&reasons(&conflicts, Reason::TransactionConflict))
            }
            TransactionAdmission::Throttled(throttled) => {
                self.shared.count(|s| {
                    s.throttled += 1;
                    s.throttled_transactions += 1;
                });
                tracing::debug!(?throttled, "transaction cancelled: throttled");
                self.wait_call_latency().await;
                answers::transaction_canceled(&reasons(&throttled, Reason::ThrottlingError))
            }
        }
    }

    /// Each action's item and cost, in request order; `None` when any action cannot be
    /// modelled (the whole transaction then goes to moto as it is).
    async fn transaction_items(&self, body: &Value) -> Option<Vec<(ItemKey, f64)>> {
        let actions = body.get("TransactItems")?.as_array()?;
        let scope = self.scope();
        let mut items = Vec::with_capacity(actions.len());
        for action in actions {
            let action = action.as_object().filter(|a| a.len() == 1)?;
            let (name, inner) = action.iter().next()?;
            let kind = match name.as_str() {
                "Put" => WriteKind::Put,
                "Update" => WriteKind::Update,
                "Delete" => WriteKind::Delete,
                "ConditionCheck" => WriteKind::ConditionCheck,
                _ => return None,
            };
            let schema = self.schema(table_name(inner)?).await?;
            let write = write_of(&schema, kind, inner, true)?;
            items.push((ItemKey::new(&scope, &write), write.wcu));
        }
        Some(items)
    }

    fn json(&self) -> Option<Value> {
        serde_json::from_slice(&self.body).ok()
    }

    /// The account and region of the request (from its SigV4 credential scope): moto keeps
    /// tables per account and region, so held items and partitions are kept apart the
    /// same way.
    fn scope(&self) -> String {
        credential_scope(&self.parts.headers).unwrap_or_default()
    }

    /// The table's key schema, asked of moto once per table (`DescribeTable` with the
    /// request's own credentials, so moto looks in the same account and region).
    async fn schema(&self, table: &str) -> Option<Arc<TableSchema>> {
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
    async fn forward(&self) -> Response<Bytes> {
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

    async fn wait_call_latency(&self) {
        sleep_until(self.start + self.shared.model.stretched(self.shared.model.call_latency)).await;
    }
}

fn reasons(flags: &[bool], reason: Reason) -> Vec<Reason> {
    flags
        .iter()
        .map(|&flagged| if flagged { reason } else { Reason::None })
        .collect()
}

async fn sleep_until(deadline: Instant) {
    tokio::time::sleep_until(tokio::time::Instant::from_std(deadline)).await;
}

/// `Credential=AKID/20240101/us-east-1/dynamodb/aws4_request` → `AKID/us-east-1`.
fn credential_scope(headers: &HeaderMap) -> Option<String> {
    let authorization = headers.get(AUTHORIZATION)?.to_str().ok()?;
    let credential = authorization
        .split([' ', ','])
        .find_map(|part| part.strip_prefix("Credential="))?;
    let mut fields = credential.split('/');
    let access_key = fields.next()?;
    let region = fields.nth(1)?;
    Some(format!("{access_key}/{region}"))
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
    fn the_scope_is_the_access_key_and_region() {
        let mut headers = HeaderMap::new();
        headers.insert(
            AUTHORIZATION,
            HeaderValue::from_static(
                "AWS4-HMAC-SHA256 Credential=testing/20240101/eu-west-1/dynamodb/aws4_request, SignedHeaders=host, Signature=abc",
            ),
        );
        assert_eq!(
            credential_scope(&headers).as_deref(),
            Some("testing/eu-west-1")
        );
        assert_eq!(credential_scope(&HeaderMap::new()), None);
    }

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

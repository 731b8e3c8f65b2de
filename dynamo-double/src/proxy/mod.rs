//! The HTTP side: the server the SDK talks to, and the way of each request through the
//! double: the modelled writes (`writes`), and the forwarding to moto through the gate
//! (`upstream`) of everything, modelled or not.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header::AUTHORIZATION;
use http::request::Parts;
use http::{HeaderMap, Method, Request, Response};
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::task::JoinSet;

use crate::answers;
use crate::faults::{self, Fate, Faults, Injector, Service};
use crate::ledger::{Ledger, Rates};
use crate::schema::{TableSchema, WriteKind};
use crate::{Model, Stats, STATS_PATH};

mod upstream;
mod writes;

use upstream::Upstream;

/// DynamoDB's own request limit is 16 MB; nothing larger is read into memory.
pub const MAX_BODY_BYTES: usize = 16 * 1024 * 1024;

const TARGET_PREFIX: &str = "DynamoDB_20120810.";

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
    injector: Injector,
}

pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // The guarded values stay consistent between statements, so a panic elsewhere leaves
    // nothing half-done to refuse.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Shared {
    pub fn new(
        upstream: &str,
        model: Model,
        faults: Faults,
        gate: Arc<tokio::sync::Mutex<()>>,
    ) -> anyhow::Result<Shared> {
        let upstream = Upstream::new(upstream)?;
        let rates = Rates {
            refill_per_sec: model.partition_wcu_per_sec / model.stretch,
            depth: model.partition_wcu_per_sec * model.burst_secs,
        };
        Ok(Shared {
            model,
            upstream,
            gate,
            ledger: Mutex::new(Ledger::new(rates)),
            schemas: Mutex::new(HashMap::new()),
            stats: Mutex::new(Stats::default()),
            injector: Injector::new(faults),
        })
    }

    pub fn stats(&self) -> Stats {
        let mut stats = lock(&self.stats).clone();
        stats.held_items = lock(&self.ledger).held_items() as u64;
        stats
    }

    pub fn set_faults(&self, faults: Faults) -> anyhow::Result<()> {
        faults.check()?;
        self.injector.set(faults);
        Ok(())
    }

    fn count(&self, update: impl FnOnce(&mut Stats)) {
        update(&mut lock(&self.stats));
    }
}

/// Accepts connections until the task is aborted; aborting drops the connection tasks
/// with it (and so ends their holds, see [`writes::Hold`]).
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
    let service = match operation {
        Some(_) => Some(Service::DynamoDb),
        None if credential_service(&parts.headers).as_deref() == Some("s3") => {
            shared.count(|s| s.s3_requests += 1);
            Some(Service::S3)
        }
        None => None,
    };
    let fate = service.map_or(Fate::Pass, |service| {
        let write = match service {
            Service::DynamoDb => operation.as_deref().is_some_and(|op| WRITES.contains(&op)),
            Service::S3 => [Method::PUT, Method::POST, Method::DELETE].contains(&parts.method),
        };
        shared.injector.fate(service, write)
    });
    if let Fate::Before(injected) = fate {
        shared.count(|s| match service {
            Some(Service::S3) => s.s3_faults_before += 1,
            _ => s.dynamodb_faults_before += 1,
        });
        return Ok(faults::answer(injected, &parts.method).map(Full::new));
    }
    let call = Call {
        shared: &shared,
        parts: &parts,
        body,
        start,
    };
    let response = call.answer(operation.as_deref()).await;
    let response = match service {
        Some(service) if fate == Fate::After && response.status().is_success() => {
            shared.count(|s| match service {
                Service::S3 => s.s3_faults_after += 1,
                Service::DynamoDb => s.dynamodb_faults_after += 1,
            });
            faults::after_answer(service, &parts.method)
        }
        _ => response,
    };
    Ok(response.map(Full::new))
}

/// The DynamoDB operations that may write.
const WRITES: [&str; 5] = [
    "PutItem",
    "UpdateItem",
    "DeleteItem",
    "TransactWriteItems",
    "BatchWriteItem",
];

impl Call<'_> {
    /// The call's answer, as the model has it.
    async fn answer(&self, operation: Option<&str>) -> Response<Bytes> {
        match operation {
            Some("TransactWriteItems") => self.transact_write_items().await,
            Some("PutItem") => self.single_write(WriteKind::Put).await,
            Some("UpdateItem") => self.single_write(WriteKind::Update).await,
            Some("DeleteItem") => self.single_write(WriteKind::Delete).await,
            Some("DeleteTable") => self.delete_table().await,
            _ => self.plain().await,
        }
    }
}

/// One request being answered.
struct Call<'a> {
    shared: &'a Shared,
    parts: &'a Parts,
    body: Bytes,
    start: Instant,
}

impl Call<'_> {
    fn json(&self) -> Option<Value> {
        serde_json::from_slice(&self.body).ok()
    }

    /// The account and region of the request (from its SigV4 credential scope): moto keeps
    /// tables per account and region, so held items and partitions are kept apart the
    /// same way.
    fn scope(&self) -> String {
        credential_scope(&self.parts.headers).unwrap_or_default()
    }

    async fn wait_call_latency(&self) {
        sleep_until(self.start + self.shared.model.stretched(self.shared.model.call_latency)).await;
    }
}

async fn sleep_until(deadline: Instant) {
    tokio::time::sleep_until(tokio::time::Instant::from_std(deadline)).await;
}

/// The service a SigV4-signed request is for: `Credential=AKID/20240101/us-east-1/s3/...`
/// → `s3`.
fn credential_service(headers: &HeaderMap) -> Option<String> {
    let authorization = headers.get(AUTHORIZATION)?.to_str().ok()?;
    let credential = authorization
        .split([' ', ','])
        .find_map(|part| part.strip_prefix("Credential="))?;
    credential.split('/').nth(3).map(str::to_owned)
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

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

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
}

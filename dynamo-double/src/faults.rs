//! Fault injection: failures AWS documents for DynamoDB and S3, injected at set rates from a
//! seeded generator, before a call reaches moto (nothing applied) or after moto applied a
//! write (applied, answered as failed), plus short outages in which nearly every call fails.
//!
//! What is modelled, and where AWS documents it:
//! - DynamoDB `InternalServerError` (HTTP 500) and `ThrottlingException` (400): "The
//!   request may or may not have succeeded" for a 500, and both are to be retried
//!   (<https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Programming.Errors.html>,
//!   "Error messages and codes": 5xx "An internal error occurred ... the request may or may
//!   not have succeeded"; `ThrottlingException`, "OK to retry? Yes"). A 500 after the write
//!   was applied is that first case.
//! - S3 `InternalError` (500) and `SlowDown` (503), before a call; `InternalError` after a
//!   write (`PUT`, `POST`, `DELETE`) was applied
//!   (<https://docs.aws.amazon.com/AmazonS3/latest/API/ErrorResponses.html>, "List of error
//!   codes"; <https://docs.aws.amazon.com/AmazonS3/latest/userguide/ErrorBestPractices.html>:
//!   retry 500 and 503).
//! - `ClientRequestToken` of `TransactWriteItems`: a repeat with the token of a transaction
//!   that succeeded in the last 10 minutes succeeds without writing again; with other
//!   parameters it is `IdempotentParameterMismatchException`
//!   (<https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_TransactWriteItems.html>,
//!   `ClientRequestToken`). This is what makes an SDK retry of a transaction that was applied
//!   harmless; moto ignores the token, so the double keeps them, with or without faults.
//!
//! Left out: latency spikes and timeouts (a fault is answered at once), partial S3 bodies,
//! a DynamoDB answer that breaks off mid-body, `ServiceUnavailable` (503, handled by the
//! same rule as a 500), and failed transactions' tokens (DynamoDB documents the token for
//! a transaction that succeeded; one that failed wrote nothing, and runs again).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderValue, Method, Response, StatusCode};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::answers;

/// How long DynamoDB remembers a `ClientRequestToken`.
pub const TOKEN_SECS: u64 = 600;

/// What to inject: per-service rates (each a share of calls, 0 to 1), a seed, and outages.
#[derive(Debug, Clone, Default)]
pub struct Faults {
    /// Seeds the generator that decides every call's fate.
    pub seed: u64,
    pub dynamodb: Rates,
    pub s3: Rates,
    /// Short outages: every `every`, for `length`, calls fail before applying at `rate`.
    pub outage: Option<Outage>,
}

/// The shares of one service's calls that fail.
#[derive(Debug, Clone, Copy, Default)]
pub struct Rates {
    /// Of all calls: answered with an error without reaching moto.
    pub before: f64,
    /// Of writes that moto applied: answered `InternalServerError`/`InternalError` anyway.
    pub after: f64,
}

/// A recurring outage, in real time from the double's start.
#[derive(Debug, Clone, Copy)]
pub struct Outage {
    pub every: Duration,
    pub length: Duration,
    /// The share of calls failing (before applying) during an outage.
    pub rate: f64,
}

impl Faults {
    /// No faults: the double as it was.
    pub fn none() -> Faults {
        Faults::default()
    }

    pub(crate) fn check(&self) -> anyhow::Result<()> {
        let shares = [
            self.dynamodb.before,
            self.dynamodb.after,
            self.s3.before,
            self.s3.after,
            self.outage.map_or(0.0, |o| o.rate),
        ];
        anyhow::ensure!(
            shares.iter().all(|r| (0.0..=1.0).contains(r)),
            "fault rates must be between 0 and 1, got {shares:?}"
        );
        if let Some(outage) = self.outage {
            anyhow::ensure!(
                !outage.every.is_zero() && outage.length < outage.every,
                "an outage must be shorter than its period"
            );
        }
        Ok(())
    }
}

/// Which service a request is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    DynamoDb,
    S3,
}

/// A call's fate, decided when it arrives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    Pass,
    /// Answered with this error, never applied.
    Before(Injected),
    /// Applied, then answered as an internal error (writes only).
    After,
}

/// The errors injected before a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Injected {
    DynamoInternal,
    DynamoThrottling,
    S3Internal,
    S3SlowDown,
}

/// Decides fates and remembers transaction tokens.
pub struct Injector {
    faults: Mutex<Faults>,
    started: Instant,
    rng: Mutex<StdRng>,
    tokens: Mutex<HashMap<String, Remembered>>,
}

/// A transaction that succeeded under a token: its request body's digest and its answer
/// (a few hundred bytes: the body itself may be up to 4 MB).
struct Remembered {
    body: u64,
    answer: Response<Bytes>,
    at: Instant,
}

impl Injector {
    pub fn new(faults: Faults) -> Injector {
        let rng = StdRng::seed_from_u64(faults.seed);
        Injector {
            faults: Mutex::new(faults),
            started: Instant::now(),
            rng: Mutex::new(rng),
            tokens: Mutex::new(HashMap::new()),
        }
    }

    /// Replaces the faults from now on (the generator and the tokens stay).
    pub fn set(&self, faults: Faults) {
        *crate::proxy::lock(&self.faults) = faults;
    }

    fn in_outage(&self, outage: Option<Outage>) -> Option<f64> {
        let outage = outage?;
        let since = self.started.elapsed().as_secs_f64();
        let phase = since % outage.every.as_secs_f64();
        (phase < outage.length.as_secs_f64()).then_some(outage.rate)
    }

    /// The fate of a call to `service`; `write`: whether it may change anything.
    pub fn fate(&self, service: Service, write: bool) -> Fate {
        let (rates, outage) = {
            let faults = crate::proxy::lock(&self.faults);
            let rates = match service {
                Service::DynamoDb => faults.dynamodb,
                Service::S3 => faults.s3,
            };
            (rates, faults.outage)
        };
        let before = self
            .in_outage(outage)
            .unwrap_or(rates.before)
            .max(rates.before);
        if before == 0.0 && (rates.after == 0.0 || !write) {
            return Fate::Pass;
        }
        let mut rng = crate::proxy::lock(&self.rng);
        if rng.random_bool(before) {
            let second = rng.random_bool(0.5);
            return Fate::Before(match (service, second) {
                (Service::DynamoDb, false) => Injected::DynamoInternal,
                (Service::DynamoDb, true) => Injected::DynamoThrottling,
                (Service::S3, false) => Injected::S3Internal,
                (Service::S3, true) => Injected::S3SlowDown,
            });
        }
        if write && rng.random_bool(rates.after) {
            return Fate::After;
        }
        Fate::Pass
    }

    /// The remembered answer to a transaction sent again with its token: the first
    /// answer when the body is the same, `IdempotentParameterMismatchException` when not,
    /// `None` for a token not remembered (or older than [`TOKEN_SECS`]).
    pub fn replay(&self, token: &str, body: &Bytes) -> Option<Response<Bytes>> {
        let mut tokens = crate::proxy::lock(&self.tokens);
        tokens.retain(|_, r| r.at.elapsed() < Duration::from_secs(TOKEN_SECS));
        let remembered = tokens.get(token)?;
        if remembered.body != digest(body) {
            return Some(answers::idempotent_parameter_mismatch());
        }
        Some(remembered.answer.clone())
    }

    /// Remembers a transaction that succeeded under `token`.
    pub fn remember(&self, token: &str, body: &Bytes, answer: &Response<Bytes>) {
        crate::proxy::lock(&self.tokens).insert(
            token.to_string(),
            Remembered {
                body: digest(body),
                answer: answer.clone(),
                at: Instant::now(),
            },
        );
    }
}

fn digest(body: &Bytes) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    body.hash(&mut hasher);
    hasher.finish()
}

/// The answer of an injected error. `method`: a `HEAD` is answered without a body, as S3
/// does.
pub fn answer(injected: Injected, method: &Method) -> Response<Bytes> {
    match injected {
        Injected::DynamoInternal => answers::internal_server_error("injected fault"),
        Injected::DynamoThrottling => answers::throttling(),
        Injected::S3Internal => s3_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "InternalError",
            "We encountered an internal error. Please try again.",
            method,
        ),
        Injected::S3SlowDown => s3_error(
            StatusCode::SERVICE_UNAVAILABLE,
            "SlowDown",
            "Please reduce your request rate.",
            method,
        ),
    }
}

/// What a write that was applied is answered with under [`Fate::After`].
pub fn after_answer(service: Service, method: &Method) -> Response<Bytes> {
    match service {
        Service::DynamoDb => answers::internal_server_error("injected fault after the write"),
        Service::S3 => answer(Injected::S3Internal, method),
    }
}

/// S3's XML error document.
/// <https://docs.aws.amazon.com/AmazonS3/latest/API/ErrorResponses.html#RESTErrorResponses>
fn s3_error(status: StatusCode, code: &str, message: &str, method: &Method) -> Response<Bytes> {
    let body = if method == Method::HEAD {
        Bytes::new()
    } else {
        Bytes::from(format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>{code}</Code>\
             <Message>{message}</Message><RequestId>dynamo-double</RequestId></Error>"
        ))
    };
    let mut response = Response::new(body);
    *response.status_mut() = status;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/xml"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn injector(before: f64, after: f64) -> Injector {
        Injector::new(Faults {
            seed: 7,
            dynamodb: Rates { before, after },
            s3: Rates { before, after },
            outage: None,
        })
    }

    #[test]
    fn the_same_seed_decides_the_same_fates() {
        let fates = |i: &Injector| -> Vec<Fate> {
            (0..200)
                .map(|n| i.fate(Service::DynamoDb, n % 2 == 0))
                .collect()
        };
        assert_eq!(fates(&injector(0.2, 0.1)), fates(&injector(0.2, 0.1)));
    }

    #[test]
    fn rates_are_kept_and_reads_never_fail_after() {
        let i = injector(0.1, 0.2);
        let reads: Vec<Fate> = (0..10_000).map(|_| i.fate(Service::S3, false)).collect();
        assert!(!reads.contains(&Fate::After));
        let before = reads
            .iter()
            .filter(|f| matches!(f, Fate::Before(_)))
            .count();
        assert!((800..1200).contains(&before), "{before}");
        let writes: Vec<Fate> = (0..10_000).map(|_| i.fate(Service::S3, true)).collect();
        let after = writes.iter().filter(|f| **f == Fate::After).count();
        // 20% of the 90% that pass the first draw.
        assert!((1500..2100).contains(&after), "{after}");
    }

    #[test]
    fn a_token_replays_its_answer_and_refuses_another_body() {
        let i = injector(0.0, 0.0);
        let body = Bytes::from_static(b"{\"a\":1}");
        assert!(i.replay("t", &body).is_none());
        i.remember("t", &body, &answers::json_ok(&json!({})));
        assert_eq!(
            i.replay("t", &body).map(|r| r.status()),
            Some(StatusCode::OK)
        );
        let other = i.replay("t", &Bytes::from_static(b"{\"a\":2}"));
        assert_eq!(other.map(|r| r.status()), Some(StatusCode::BAD_REQUEST));
    }
}

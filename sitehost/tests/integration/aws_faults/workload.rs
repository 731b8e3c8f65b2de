//! The partner workload: workers that each sign with their own key and mix keyed creates
//! (retried as docs/api.md advises: the same `Idempotency-Key`, after `Retry-After`),
//! creates tried once, updates, uploads and image deletes, recording what each answer told
//! the partner. Every answer is checked as it arrives (`Tally::note`); what was acknowledged
//! is checked against the store afterwards (`checks`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use sitehost::client::{ClientResponse, PartnerClient};

use crate::support::media::{b64, png};

pub const BUSINESSES: &str = "/api/v2/businesses/";
pub const IMAGES: &str = "/api/v2/images/";
/// Tries of one request that keeps being answered "retry" (503, 429, 409).
const MAX_TRIES: u32 = 10;
/// The services every create sends: a business found without them is half a create.
pub const SERVICES: [&str; 2] = ["Repairs", "Sales"];

/// How much work, by how many workers.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    pub workers: usize,
    /// Operations per worker, or run until `until`.
    pub ops_per_worker: usize,
    pub until: Option<Instant>,
    pub seed: u64,
}

/// A create retried with its `Idempotency-Key`: the key, the body, and the id its 201 gave
/// (`None`: never acknowledged).
#[derive(Debug, Clone)]
pub struct Keyed {
    /// The worker whose API key sent it: keys are per API key.
    pub worker: usize,
    pub key: String,
    pub body: Value,
    pub marker: String,
    pub acknowledged: Option<i64>,
}

/// What the partners were told, and the problems seen as answers came.
#[derive(Debug, Default)]
pub struct Tally {
    pub statuses: BTreeMap<u16, u64>,
    pub problems: Vec<String>,
    pub keyed_businesses: Vec<Keyed>,
    /// Creates tried once: the `partner_business_id` and the id of a 201.
    pub once_businesses: Vec<(String, Option<i64>)>,
    /// Per business, the names its updates sent in order, and whether each was answered 200.
    pub updates: BTreeMap<i64, Vec<(String, bool)>>,
    pub uploads: Vec<Keyed>,
    /// Images whose delete was answered 204 (or 404 on a retry after an unknown outcome).
    pub deleted_images: Vec<i64>,
    pub requests: u64,
}

impl Tally {
    /// Checks one answer as a partner meets it: never a 500, never a 401 or 403 to a
    /// correctly signed request, and every "retry" answer with `Retry-After` and a JSON
    /// error.
    fn note(&mut self, what: &str, reply: &ClientResponse) {
        self.requests += 1;
        *self.statuses.entry(reply.status).or_default() += 1;
        let problem = match reply.status {
            500..=502 | 504.. => Some("a 5xx other than 503"),
            401 | 403 => Some("an auth error to a correctly signed request"),
            429 | 503 if !reply.headers.contains_key("retry-after") => {
                Some("a retry answer without Retry-After")
            }
            429 | 503 if !reply.body["error"].is_string() => Some("a retry answer without JSON"),
            _ => None,
        };
        if let Some(problem) = problem {
            self.problems.push(format!(
                "{what}: {problem}: {} {}",
                reply.status, reply.body
            ));
        }
    }
}

pub type SharedTally = Arc<Mutex<Tally>>;

fn lock(tally: &SharedTally) -> std::sync::MutexGuard<'_, Tally> {
    tally.lock().unwrap_or_else(|p| p.into_inner())
}

/// One request, noted; a transport failure (the server did not answer) is a problem too.
async fn send(
    client: &PartnerClient,
    tally: &SharedTally,
    method: &str,
    path: &str,
    body: Option<&Value>,
    key: Option<&str>,
) -> Option<ClientResponse> {
    let headers: Vec<(&str, &str)> = key.map(|k| ("idempotency-key", k)).into_iter().collect();
    let bytes = body.map(|b| b.to_string().into_bytes());
    let what = format!("{method} {path}");
    match client
        .send_with_headers(method, path, bytes, &headers)
        .await
    {
        Ok(reply) => {
            lock(tally).note(&what, &reply);
            Some(reply)
        }
        Err(e) => {
            lock(tally).problems.push(format!("{what}: no answer: {e}"));
            None
        }
    }
}

/// Sends until the answer is not "retry" (503, 429, 409), waiting `Retry-After` (1 s when
/// absent) between tries, as docs/errors.md advises.
async fn until_settled(
    client: &PartnerClient,
    tally: &SharedTally,
    method: &str,
    path: &str,
    body: Option<&Value>,
    key: Option<&str>,
) -> (Option<ClientResponse>, u32) {
    let mut tries = 0;
    loop {
        tries += 1;
        let reply = send(client, tally, method, path, body, key).await;
        let Some(reply) = reply else {
            return (None, tries);
        };
        if !matches!(reply.status, 409 | 429 | 503) || tries >= MAX_TRIES {
            return (Some(reply), tries);
        }
        let wait = reply
            .headers
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(1);
        tokio::time::sleep(Duration::from_secs(wait.min(5))).await;
    }
}

/// One worker's part of the plan.
pub async fn worker(client: PartnerClient, tally: SharedTally, plan: Plan, worker: usize) {
    let mut rng = StdRng::seed_from_u64(plan.seed.wrapping_add(worker as u64));
    let mut businesses: Vec<i64> = Vec::new();
    let mut images: Vec<i64> = Vec::new();
    for n in 0.. {
        let done = match plan.until {
            Some(until) => Instant::now() >= until,
            None => n >= plan.ops_per_worker,
        };
        if done {
            break;
        }
        let marker = format!("w{worker}-n{n}");
        match rng.random_range(0..100) {
            0..30 => keyed_create(&client, &tally, (worker, &marker), &mut businesses).await,
            30..45 => once_create(&client, &tally, &marker, &mut businesses).await,
            45..65 if !businesses.is_empty() => {
                let id = businesses[rng.random_range(0..businesses.len())];
                update(&client, &tally, id, &marker).await;
            }
            65..85 => upload(&client, &tally, (worker, &marker), &mut images).await,
            85..100 if !images.is_empty() => {
                let id = images.swap_remove(rng.random_range(0..images.len()));
                delete_image(&client, &tally, id).await;
            }
            _ => upload(&client, &tally, (worker, &marker), &mut images).await,
        }
    }
}

fn business_body(marker: &str) -> Value {
    json!({
        "business_name": format!("Business {marker}"),
        "partner_business_id": marker,
        "services": SERVICES,
    })
}

fn created_id(reply: &ClientResponse) -> Option<i64> {
    (reply.status == 201).then(|| reply.body["id"].as_i64())?
}

async fn keyed_create(
    client: &PartnerClient,
    tally: &SharedTally,
    (worker, marker): (usize, &str),
    businesses: &mut Vec<i64>,
) {
    let key = format!("create-{marker}");
    let body = business_body(marker);
    let (reply, _) =
        until_settled(client, tally, "POST", BUSINESSES, Some(&body), Some(&key)).await;
    let acknowledged = reply.as_ref().and_then(created_id);
    businesses.extend(acknowledged);
    lock(tally).keyed_businesses.push(Keyed {
        worker,
        key,
        body,
        marker: marker.to_string(),
        acknowledged,
    });
}

async fn once_create(
    client: &PartnerClient,
    tally: &SharedTally,
    marker: &str,
    businesses: &mut Vec<i64>,
) {
    let body = business_body(marker);
    let reply = send(client, tally, "POST", BUSINESSES, Some(&body), None).await;
    let acknowledged = reply.as_ref().and_then(created_id);
    businesses.extend(acknowledged);
    lock(tally)
        .once_businesses
        .push((marker.to_string(), acknowledged));
}

async fn update(client: &PartnerClient, tally: &SharedTally, id: i64, marker: &str) {
    let name = format!("Renamed {marker}");
    let path = format!("{BUSINESSES}{id}/");
    let body = json!({ "business_name": name });
    let (reply, _) = until_settled(client, tally, "PUT", &path, Some(&body), None).await;
    let acknowledged = reply.is_some_and(|r| r.status == 200);
    lock(tally)
        .updates
        .entry(id)
        .or_default()
        .push((name, acknowledged));
}

async fn upload(
    client: &PartnerClient,
    tally: &SharedTally,
    (worker, marker): (usize, &str),
    images: &mut Vec<i64>,
) {
    let key = format!("upload-{marker}");
    let name = format!("{marker}.png");
    let body = json!({"upload": {"name": name, "file": b64(&png(40, 30))}});
    let (reply, _) = until_settled(client, tally, "POST", IMAGES, Some(&body), Some(&key)).await;
    let acknowledged = reply.as_ref().and_then(created_id);
    images.extend(acknowledged);
    lock(tally).uploads.push(Keyed {
        worker,
        key,
        body,
        marker: marker.to_string(),
        acknowledged,
    });
}

async fn delete_image(client: &PartnerClient, tally: &SharedTally, id: i64) {
    let path = format!("{IMAGES}{id}/");
    let (reply, tries) = until_settled(client, tally, "DELETE", &path, None, None).await;
    // A 404 after a 503 is the first try's delete, applied and answered as failed.
    let deleted = reply.is_some_and(|r| r.status == 204 || (r.status == 404 && tries > 1));
    if deleted {
        lock(tally).deleted_images.push(id);
    }
}

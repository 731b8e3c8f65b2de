//! After the workload, through an app on the same table and bucket with no faults: what the
//! partners were told holds in the store. Each finding is a line of `problems`.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;
use sitehost::client::PartnerClient;

use super::workload::{Keyed, Tally, BUSINESSES, IMAGES, SERVICES};

/// Every object of a list, paging 100 at a time, and whether `total_count` equalled what
/// paging walked.
async fn walk(client: &PartnerClient, list: &str, problems: &mut Vec<String>) -> Vec<Value> {
    let mut objects = Vec::new();
    let mut total = None;
    loop {
        let path = format!("{list}?limit=100&offset={}", objects.len());
        let page = client.get(&path).await.expect("list");
        assert_eq!(page.status, 200, "{path}: {}", page.body);
        total = total.or(page.body["meta"]["total_count"].as_u64());
        let found = page.body["objects"].as_array().cloned().unwrap_or_default();
        if found.is_empty() {
            break;
        }
        objects.extend(found);
    }
    if total != Some(objects.len() as u64) {
        problems.push(format!(
            "{list}: total_count {total:?}, paging walked {}",
            objects.len()
        ));
    }
    objects
}

/// The businesses each `partner_business_id` marker names.
fn by_marker(businesses: &[Value]) -> BTreeMap<String, Vec<&Value>> {
    let mut found: BTreeMap<String, Vec<&Value>> = BTreeMap::new();
    for business in businesses {
        if let Some(marker) = business["partner_business_id"].as_str() {
            found.entry(marker.to_string()).or_default().push(business);
        }
    }
    found
}

/// Businesses: each acknowledged create there exactly once with its id, each other create
/// at most once, each whole (its services), and each update's name the last acknowledged
/// or a later one sent.
pub async fn businesses(client: &PartnerClient, tally: &Tally, problems: &mut Vec<String>) {
    let listed = walk(client, BUSINESSES, problems).await;
    let found = by_marker(&listed);
    let creates = tally
        .keyed_businesses
        .iter()
        .map(|k| (k.marker.clone(), k.acknowledged))
        .chain(tally.once_businesses.iter().cloned());
    for (marker, acknowledged) in creates {
        let there: Vec<i64> = found
            .get(&marker)
            .map(|b| b.iter().filter_map(|b| b["id"].as_i64()).collect())
            .unwrap_or_default();
        match acknowledged {
            Some(id) if there != [id] => {
                problems.push(format!("create {marker} answered {id}, found {there:?}"))
            }
            None if there.len() > 1 => {
                problems.push(format!("create {marker} (not answered) made {there:?}"))
            }
            _ => {}
        }
    }
    for business in &listed {
        let id = business["id"].as_i64().unwrap_or_default();
        let detail = client
            .get(&format!("{BUSINESSES}{id}/"))
            .await
            .expect("get");
        if detail.body["services"] != serde_json::json!(SERVICES) {
            problems.push(format!("business {id} is half made: {}", detail.body));
        }
        if let Some(sent) = tally.updates.get(&id) {
            let name = detail.body["business_name"].as_str().unwrap_or_default();
            let last_acknowledged = sent.iter().rposition(|(_, ok)| *ok);
            let allowed = &sent[last_acknowledged.unwrap_or(0)..];
            let original = last_acknowledged.is_none() && name.starts_with("Business ");
            if !original && !allowed.iter().any(|(n, _)| n == name) {
                problems.push(format!(
                    "business {id} is named {name:?}; updates sent {sent:?}"
                ));
            }
        }
    }
}

/// Keyed creates replayed afterwards: each acknowledged one answers with its one object.
pub async fn replays(
    clients: &[PartnerClient],
    path: &str,
    keyed: &[Keyed],
    problems: &mut Vec<String>,
) {
    for create in keyed {
        let Some(id) = create.acknowledged else {
            continue;
        };
        let headers = [("idempotency-key", create.key.as_str())];
        let body = create.body.to_string().into_bytes();
        let replay = clients[create.worker]
            .send_with_headers("POST", path, Some(body), &headers)
            .await
            .expect("replay");
        let replayed = replay.headers.contains_key("idempotent-replayed");
        // An image deleted since replays as a 404, as documented.
        let gone = replay.status == 404 && path == IMAGES;
        if !gone && (replay.status != 201 || !replayed || replay.body["id"] != id) {
            problems.push(format!(
                "replay of {} (answered {id}): {} {}",
                create.key, replay.status, replay.body
            ));
        }
    }
}

/// Images: the acknowledged uploads not deleted are there, no deleted one is, there are no
/// more others than uploads that were not acknowledged, and every listed image's files are
/// in S3.
pub async fn images(
    client: &PartnerClient,
    tally: &Tally,
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    problems: &mut Vec<String>,
) {
    let listed = walk(client, IMAGES, problems).await;
    let ids: BTreeSet<i64> = listed.iter().filter_map(|i| i["id"].as_i64()).collect();
    let deleted: BTreeSet<i64> = tally.deleted_images.iter().copied().collect();
    let acknowledged: BTreeSet<i64> = tally
        .uploads
        .iter()
        .filter_map(|u| u.acknowledged)
        .collect();
    for id in acknowledged.difference(&deleted) {
        if !ids.contains(id) {
            problems.push(format!("acknowledged image {id} is missing"));
        }
    }
    for id in deleted.intersection(&ids) {
        problems.push(format!("deleted image {id} is still listed"));
    }
    let unacknowledged = tally.uploads.iter().filter(|u| u.acknowledged.is_none());
    let others = ids.difference(&acknowledged).count();
    if others > unacknowledged.count() {
        problems.push(format!("{others} images no upload was answered with"));
    }
    for image in &listed {
        let sizes = image["sizes"].as_object().cloned().unwrap_or_default();
        for path in sizes.values().filter_map(Value::as_str) {
            let head = s3.head_object().bucket(bucket).key(path).send().await;
            if head.is_err() {
                problems.push(format!("image {} has no file {path} in S3", image["id"]));
            }
        }
    }
}

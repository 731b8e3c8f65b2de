//! Images and sub ids, and the integrity of uploads:
//!
//! - a key restricted to a sub id lists, reads and references only images of its sub id
//!   (over HTTP, embedded store; the store side is in `store_contract/images.rs`);
//! - a record write with an unknown outcome (an internal error after, or before, the
//!   record was written) never leaves a record pointing at a missing file;
//! - `sweep` (the `sitehost files sweep` command) removes orphan file sets past the grace
//!   period and keeps fresh ones and recorded ones, on the embedded store and on DynamoDB
//!   + S3 (moto).
//!
//! Each file is one of these; this module holds what they share.

mod sub_ids;
mod sweeper;
mod unknown_outcomes;

use serde_json::{json, Value};
use sitehost::client::ClientResponse;
use sitehost::clock::{Clock, SystemClock};
use sitehost::domain::image_record::{ImageQuery, NewImage};
use sitehost::store::SharedStore;
use sitehost::upload::sweep::SweepOptions;

use crate::support::media::{b64, png};

fn upload_body(business_id: Option<i64>) -> Value {
    let mut body = json!({"upload": {"name": "shop.png", "file": b64(&png(40, 30))}});
    if let Some(id) = business_id {
        body["business_id"] = json!(id);
    }
    body
}

async fn status(
    reply: impl std::future::Future<Output = reqwest::Result<ClientResponse>>,
) -> (u16, Value) {
    let reply = reply.await.expect("request");
    (reply.status, reply.body)
}

fn all_images() -> ImageQuery {
    ImageQuery {
        filter: Default::default(),
        descending: false,
        limit: 100,
        offset: 0,
    }
}

const HOUR: i64 = 3_600;

fn options(now: i64, dry_run: bool) -> SweepOptions {
    SweepOptions {
        now,
        grace_secs: HOUR,
        dry_run,
    }
}

/// A sweep two hours from now: every file written by the test is past the grace period.
fn later() -> SweepOptions {
    options(SystemClock.now() + 2 * HOUR, false)
}

async fn record(store: &SharedStore, account: i64, id: i64, paths: &[String]) {
    let path = paths
        .iter()
        .find(|p| p.matches('.').count() == 1)
        .expect("original");
    let new = NewImage {
        id: Some(id),
        path: path.clone(),
        mimetype: "image/png".into(),
        width: 1,
        height: 1,
        site_id: None,
        business_id: None,
        partner_sub_id: None,
        user_id: 1,
    };
    store
        .create_image(account, new, SystemClock.now())
        .await
        .expect("create_image");
}

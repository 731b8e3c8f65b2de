//! `sweep` (the `sitehost files sweep` command) removes orphan file sets past the grace
//! period and keeps fresh ones and recorded ones, on the embedded store and on DynamoDB + S3
//! (moto).

use std::sync::Arc;

use sitehost::clock::{Clock, SystemClock};
use sitehost::domain::image_record::{variant_path, NewImage, VARIANTS};
use sitehost::error::ApiError;
use sitehost::store::dynamo::DynamoStore;
use sitehost::store::files::{FileStore, SharedFiles};
use sitehost::store::s3::S3Files;
use sitehost::store::{SharedStore, Stores};
use sitehost::upload::naming::original_path;
use sitehost::upload::sweep::{sweep, SweepReport};

use super::{all_images, later, options, record, HOUR};
use crate::support;
use crate::support::media::stored_files;

async fn all_paths(files: &dyn FileStore) -> Vec<String> {
    let mut paths = Vec::new();
    let mut next = None;
    loop {
        let page = files.list("", next).await.expect("list");
        paths.extend(page.files.into_iter().map(|f| f.path));
        next = page.next;
        if next.is_none() {
            return paths;
        }
    }
}

/// Writes an upload's six files for a freshly allocated id; returns the id and its paths.
async fn write_set(store: &SharedStore, files: &dyn FileStore, stem: &str) -> (i64, Vec<String>) {
    let id = store.allocate_image_id().await.expect("allocate");
    let path = original_path(stem, id, "png");
    let mut paths = vec![path.clone()];
    paths.extend(VARIANTS.iter().map(|(size, _)| variant_path(&path, size)));
    for p in &paths {
        files
            .put(p, bytes::Bytes::from_static(b"png"), "image/png")
            .await
            .expect("put");
    }
    paths.sort();
    (id, paths)
}

fn set_name(paths: &[String]) -> String {
    let original = paths
        .iter()
        .find(|p| p.matches('.').count() == 1)
        .expect("original");
    original[..original.rfind('.').expect("dot")].to_string()
}

/// The sweeper on any pair of stores: fresh sets and recorded sets stay, an orphan set past
/// the grace period goes (and its id can no longer be recorded), files without an id in
/// their names are never touched, and a dry run changes nothing.
// Reads better whole: one store's file sets written, swept and checked, for either store.
async fn sweeper_case(store: SharedStore, files: SharedFiles) {
    let account = store.ensure_account("sweep").await.expect("account").id;
    let (recorded_id, recorded) = write_set(&store, files.as_ref(), "kept").await;
    record(&store, account, recorded_id, &recorded).await;
    let (orphan_id, orphan) = write_set(&store, files.as_ref(), "orphan").await;
    let legacy = "img/upload/legacy-abcdefghijkl.jpg".to_string();
    files
        .put(&legacy, bytes::Bytes::from_static(b"jpg"), "image/jpeg")
        .await
        .expect("put");
    let mut everything: Vec<String> = recorded
        .iter()
        .chain(&orphan)
        .cloned()
        .chain([legacy.clone()])
        .collect();
    everything.sort();
    assert_eq!(all_paths(files.as_ref()).await, everything);

    // Now: everything is fresh, nothing is even looked up.
    let report = sweep(
        store.as_ref(),
        files.as_ref(),
        options(SystemClock.now(), false),
    )
    .await
    .expect("sweep");
    assert_eq!(
        report,
        SweepReport {
            fresh_sets: 2,
            other_files: 1,
            ..Default::default()
        }
    );
    // A dry run past the grace period names the orphan and changes nothing.
    let dry = sweep(
        store.as_ref(),
        files.as_ref(),
        options(SystemClock.now() + 2 * HOUR, true),
    )
    .await
    .expect("dry run");
    assert_eq!(
        dry,
        SweepReport {
            recorded_sets: 1,
            orphans: vec![set_name(&orphan)],
            other_files: 1,
            ..Default::default()
        }
    );
    assert_eq!(all_paths(files.as_ref()).await, everything);

    let report = sweep(store.as_ref(), files.as_ref(), later())
        .await
        .expect("sweep");
    assert_eq!(
        report,
        SweepReport {
            recorded_sets: 1,
            orphans: vec![set_name(&orphan)],
            files_removed: 6,
            other_files: 1,
            ..Default::default()
        }
    );
    let mut kept: Vec<String> = recorded.iter().cloned().chain([legacy]).collect();
    kept.sort();
    assert_eq!(all_paths(files.as_ref()).await, kept);
    // The orphan's id is barred: a late record write of it fails.
    let late = NewImage {
        id: Some(orphan_id),
        path: orphan[0].clone(),
        mimetype: "image/png".into(),
        width: 1,
        height: 1,
        site_id: None,
        business_id: None,
        partner_sub_id: None,
        user_id: 1,
    };
    let result = store.create_image(account, late, SystemClock.now()).await;
    assert!(matches!(result, Err(ApiError::Internal(_))), "{result:?}");
    let page = store
        .list_images(account, &all_images())
        .await
        .expect("list");
    assert_eq!(
        (
            page.items.iter().map(|i| i.id).collect::<Vec<_>>(),
            page.total_count
        ),
        (vec![recorded_id], 1)
    );
    // Running it again finds nothing more to do.
    let again = sweep(store.as_ref(), files.as_ref(), later())
        .await
        .expect("sweep");
    assert_eq!((again.orphans.len(), again.recorded_sets), (0, 1));
}

#[tokio::test]
async fn the_sweeper_removes_only_old_orphans_on_the_embedded_store() {
    let dir = tempfile::tempdir().expect("dir");
    let stores = Stores::embedded(dir.path()).expect("stores");
    sweeper_case(stores.records, stores.files.expect("files")).await;
}

#[tokio::test]
async fn the_sweeper_judges_each_set_by_its_newest_file() {
    let dir = tempfile::tempdir().expect("dir");
    let stores = Stores::embedded(dir.path()).expect("stores");
    let (store, files) = (stores.records, stores.files.expect("files"));
    let (_, old) = write_set(&store, files.as_ref(), "old").await;
    let (_, young) = write_set(&store, files.as_ref(), "young").await;
    let two_hours_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(7_200);
    let age = |path: &String, when| {
        std::fs::File::options()
            .write(true)
            .open(dir.path().join("files").join(path))
            .and_then(|f| f.set_modified(when))
            .expect("set mtime");
    };
    old.iter().for_each(|p| age(p, two_hours_ago));
    // One file of the young set is old, the rest fresh: the set is fresh.
    age(&young[0], two_hours_ago);
    let report = sweep(
        store.as_ref(),
        files.as_ref(),
        options(SystemClock.now(), false),
    )
    .await
    .expect("sweep");
    assert_eq!(report.orphans, vec![set_name(&old)]);
    assert_eq!(report.fresh_sets, 1);
    assert_eq!(stored_files(dir.path()), young);
}

#[tokio::test]
async fn the_sweeper_removes_only_old_orphans_on_dynamodb_and_s3() {
    let Some(endpoint) = support::aws_endpoint() else {
        return;
    };
    let Some(table) = support::TestTable::create().await else {
        return;
    };
    let s3 = support::s3::client(&endpoint);
    let bucket = support::s3::create_bucket(&s3, "sitehost-sweep", &table.name).await;
    let store: SharedStore =
        Arc::new(DynamoStore::new(table.client.clone(), table.name.clone()).with_id_block(3));
    sweeper_case(store, Arc::new(S3Files::new(s3, bucket))).await;
    table.delete().await;
}

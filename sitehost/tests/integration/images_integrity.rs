//! Images and sub ids, and the integrity of uploads:
//!
//! - a key restricted to a sub id lists, reads and references only images of its sub id
//!   (over HTTP, embedded store; the store side is in `store_contract/images.rs`);
//! - a record write with an unknown outcome (an internal error after, or before, the
//!   record was written) never leaves a record pointing at a missing file;
//! - `sweep` (the `sitehost files sweep` command) removes orphan file sets past the grace
//!   period and keeps fresh ones and recorded ones, on the embedded store and on DynamoDB
//!   + S3 (moto).

use crate::support;

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{json, Value};
use sitehost::client::{PartnerClient, Reply};
use sitehost::clock::{Clock, SystemClock};
use sitehost::domain::account::{Account, ApiKey, NewKey};
use sitehost::domain::business::{
    Business, BusinessDetail, BusinessPatch, BusinessQuery, NewBusiness,
};
use sitehost::domain::image_record::{
    sibling_path, variant_path, Image, ImageQuery, NewImage, SiblingFormat, VARIANTS,
};
use sitehost::domain::post::{NewPost, Post, PostPatch, PostQuery};
use sitehost::domain::site::{NewSite, Site, SitePatch, SiteQuery};
use sitehost::error::{ApiError, Result};
use sitehost::store::dynamo::DynamoStore;
use sitehost::store::files::{FileStore, SharedFiles};
use sitehost::store::s3::S3Files;
use sitehost::store::{
    BudgetDecision, BudgetKind, BudgetStore, BusinessStore, IdempotencyClaim, IdempotencyKey,
    IdempotencyStore, ImageStore, KeyStore, LocationStore, Page, PostStore, SharedStore, SiteStore,
    StoredAnswer, Stores, UploadSession, UploadSessionStore,
};
use sitehost::upload::naming::original_path;
use sitehost::upload::sweep::{sweep, SweepOptions, SweepReport};
use support::app::TestApp;
use support::media::{b64, png, stored_files};

fn upload_body(business_id: Option<i64>) -> Value {
    let mut body = json!({"upload": {"name": "shop.png", "file": b64(&png(40, 30))}});
    if let Some(id) = business_id {
        body["business_id"] = json!(id);
    }
    body
}

async fn upload(client: &PartnerClient, business_id: Option<i64>) -> i64 {
    let reply = client
        .post("/api/v2/images/", &upload_body(business_id))
        .await
        .expect("upload");
    assert_eq!(reply.status, 201, "{}", reply.body);
    reply.body["id"].as_i64().expect("id")
}

async fn list_ids(client: &PartnerClient, query: &str) -> (Vec<i64>, u64) {
    let reply = client
        .get(&format!("/api/v2/images/{query}"))
        .await
        .expect("list");
    assert_eq!(reply.status, 200, "{}", reply.body);
    let ids = reply.body["objects"]
        .as_array()
        .expect("objects")
        .iter()
        .filter_map(|o| o["id"].as_i64())
        .collect();
    (
        ids,
        reply.body["meta"]["total_count"].as_u64().expect("count"),
    )
}

async fn status(reply: impl std::future::Future<Output = reqwest::Result<Reply>>) -> (u16, Value) {
    let reply = reply.await.expect("request");
    (reply.status, reply.body)
}

#[tokio::test]
async fn sub_restricted_keys_neither_see_nor_reference_other_sub_ids_images() {
    let server = TestApp::spawn().await;
    let client = |k: &ApiKey| server.partner_client(k);
    let north = client(&server.key_for("agency", None, Some("north")).await);
    let south = client(&server.key_for("agency", None, Some("south")).await);
    let all = client(&server.key("agency").await);

    let north_shop = north
        .post(
            "/api/v2/businesses/",
            &json!({"business_name": "North Shop"}),
        )
        .await
        .expect("create")
        .body["id"]
        .as_i64()
        .expect("id");
    let south_shop = all
        .post(
            "/api/v2/businesses/",
            &json!({"business_name": "South Shop", "partner_sub_id": "south"}),
        )
        .await
        .expect("create")
        .body["id"]
        .as_i64()
        .expect("id");

    // How an image gets its sub id: the restricted key's own; an unrestricted key's
    // upload takes its business's, or none.
    let north_loose = upload(&north, None).await;
    let north_of_shop = upload(&north, Some(north_shop)).await;
    let south_loose = upload(&south, None).await;
    let south_by_all = upload(&all, Some(south_shop)).await;
    let no_sub = upload(&all, None).await;

    let everything = vec![
        north_loose,
        north_of_shop,
        south_loose,
        south_by_all,
        no_sub,
    ];
    assert_eq!(list_ids(&all, "").await, (everything.clone(), 5));
    assert_eq!(
        list_ids(&north, "").await,
        (vec![north_loose, north_of_shop], 2)
    );
    assert_eq!(
        list_ids(&south, "?order_by=-id").await,
        (vec![south_by_all, south_loose], 2)
    );
    assert_eq!(
        list_ids(&north, &format!("?business_id={north_shop}")).await,
        (vec![north_of_shop], 1)
    );
    assert_eq!(
        list_ids(&north, &format!("?business_id={south_shop}")).await,
        (vec![], 0)
    );
    assert_eq!(
        list_ids(&all, &format!("?business_id={south_shop}")).await,
        (vec![south_by_all], 1)
    );

    for id in &everything {
        let path = format!("/api/v2/images/{id}/");
        let expect = |visible: bool| if visible { 200 } else { 404 };
        assert_eq!(status(all.get(&path)).await.0, 200);
        assert_eq!(
            status(north.get(&path)).await.0,
            expect([north_loose, north_of_shop].contains(id)),
            "north GET {id}"
        );
        assert_eq!(
            status(south.get(&path)).await.0,
            expect([south_loose, south_by_all].contains(id)),
            "south GET {id}"
        );
    }

    // Neither an upload nor a logo can reference what the key cannot see.
    let (code, body) = status(north.post("/api/v2/images/", &upload_body(Some(south_shop)))).await;
    assert_eq!(
        (code, body.get("business_id").is_some()),
        (400, true),
        "{body}"
    );
    for (logo, expected) in [(south_loose, 400), (no_sub, 400), (north_loose, 201)] {
        let (code, body) = status(north.post(
            "/api/v2/businesses/",
            &json!({"business_name": "Logo Test", "logo_image_id": logo}),
        ))
        .await;
        assert_eq!(code, expected, "north logo {logo}: {body}");
        if code == 400 {
            assert!(body.get("logo_image_id").is_some(), "{body}");
        } else {
            assert_eq!(body["logo_image"]["id"], logo);
        }
    }
    let north_path = format!("/api/v2/businesses/{north_shop}/");
    let (code, body) =
        status(north.put(&north_path, &json!({"logo_image_id": south_by_all}))).await;
    assert_eq!(
        (code, body.get("logo_image_id").is_some()),
        (400, true),
        "{body}"
    );

    // Not even an unrestricted key may give a north business a south logo (a logo is of
    // the business's sub id or of none)...
    let (code, body) = status(all.put(&north_path, &json!({"logo_image_id": south_by_all}))).await;
    assert_eq!(
        (code, body.get("logo_image_id").is_some()),
        (400, true),
        "{body}"
    );
    // ...but it may give it one of no sub id: the north key then sees the id but not the
    // image, and may still write the object back unchanged.
    let (code, body) = status(all.put(&north_path, &json!({"logo_image_id": no_sub}))).await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["logo_image"]["id"], no_sub);
    let (code, seen) = status(north.get(&north_path)).await;
    assert_eq!(code, 200);
    assert_eq!(seen["logo_image_id"], no_sub);
    assert_eq!(seen["logo_image"], Value::Null);
    let image_ids = |v: &Value| -> Vec<i64> {
        v["images"]
            .as_array()
            .expect("images")
            .iter()
            .filter_map(|i| i["id"].as_i64())
            .collect()
    };
    assert_eq!(image_ids(&seen), vec![north_of_shop]);
    let mut written_back = seen.clone();
    written_back["business_name"] = json!("North Shop 2");
    let (code, body) = status(north.put(&north_path, &written_back)).await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["logo_image_id"], no_sub);

    // The south business's detail shows each key only its own sub id's images.
    let south_path = format!("/api/v2/businesses/{south_shop}/");
    assert_eq!(
        image_ids(&status(all.get(&south_path)).await.1),
        vec![south_by_all]
    );
    assert_eq!(
        image_ids(&status(south.get(&south_path)).await.1),
        vec![south_by_all]
    );
    assert_eq!(status(north.get(&south_path)).await.0, 404);
}

// ---------------------------------------------------------------------------------------
// Unknown outcomes of the record write.

#[derive(Clone, Copy, PartialEq)]
enum Fault {
    /// The record is written, then the call fails as a lost response would.
    AfterWriting,
    /// The call fails before anything is written.
    BeforeWriting,
    /// As `BeforeWriting`, and the store cannot be asked about the outcome either.
    Unreachable,
}

/// A store whose `create_image` fails with an internal error, the rest passing through.
struct FaultyImages {
    inner: SharedStore,
    fault: Fault,
}

fn timeout() -> ApiError {
    ApiError::internal("injected: the record write timed out")
}

#[async_trait]
impl KeyStore for FaultyImages {
    async fn ensure_account(&self, name: &str) -> Result<Account> {
        self.inner.ensure_account(name).await
    }
    async fn create_key(&self, new: NewKey) -> Result<ApiKey> {
        self.inner.create_key(new).await
    }
    async fn get_key(&self, key: &str) -> Result<Option<ApiKey>> {
        self.inner.get_key(key).await
    }
    async fn list_keys(&self) -> Result<Vec<ApiKey>> {
        self.inner.list_keys().await
    }
    async fn revoke_key(&self, key: &str) -> Result<bool> {
        self.inner.revoke_key(key).await
    }
    async fn remember_nonce(&self, key: &str, nonce: &str, now: i64, exp: i64) -> Result<bool> {
        self.inner.remember_nonce(key, nonce, now, exp).await
    }
    async fn prepare_nonce_memory(&self) -> Result<()> {
        self.inner.prepare_nonce_memory().await
    }
}

#[async_trait]
impl BudgetStore for FaultyImages {
    async fn consume_budget(
        &self,
        key: &str,
        kind: BudgetKind,
        limit: u64,
        tokens: u64,
        now: i64,
    ) -> Result<BudgetDecision> {
        self.inner
            .consume_budget(key, kind, limit, tokens, now)
            .await
    }
}

#[async_trait]
impl IdempotencyStore for FaultyImages {
    async fn claim_idempotency_key(
        &self,
        key: &IdempotencyKey<'_>,
        fingerprint: &str,
        now: i64,
    ) -> Result<IdempotencyClaim> {
        self.inner
            .claim_idempotency_key(key, fingerprint, now)
            .await
    }
    async fn answer_idempotency_key(
        &self,
        key: &IdempotencyKey<'_>,
        fingerprint: &str,
        answer: &StoredAnswer,
    ) -> Result<()> {
        self.inner
            .answer_idempotency_key(key, fingerprint, answer)
            .await
    }
    async fn release_idempotency_key(
        &self,
        key: &IdempotencyKey<'_>,
        fingerprint: &str,
    ) -> Result<()> {
        self.inner.release_idempotency_key(key, fingerprint).await
    }
}

#[async_trait]
impl BusinessStore for FaultyImages {
    async fn create_business(&self, a: i64, new: NewBusiness, now: i64) -> Result<BusinessDetail> {
        self.inner.create_business(a, new, now).await
    }
    async fn get_business(&self, a: i64, id: i64) -> Result<Option<Business>> {
        self.inner.get_business(a, id).await
    }
    async fn get_business_detail(&self, a: i64, id: i64) -> Result<Option<BusinessDetail>> {
        self.inner.get_business_detail(a, id).await
    }
    async fn update_business(
        &self,
        a: i64,
        id: i64,
        restrict: Option<&str>,
        patch: BusinessPatch,
        now: i64,
    ) -> Result<Option<BusinessDetail>> {
        self.inner
            .update_business(a, id, restrict, patch, now)
            .await
    }
    async fn list_businesses(&self, a: i64, query: &BusinessQuery) -> Result<Page<Business>> {
        self.inner.list_businesses(a, query).await
    }
}

#[async_trait]
impl LocationStore for FaultyImages {
    async fn location_business(&self, account_id: i64, id: i64) -> Result<Option<i64>> {
        self.inner.location_business(account_id, id).await
    }
    async fn backfill_location_pointers(&self) -> Result<(u64, u64)> {
        self.inner.backfill_location_pointers().await
    }
}

#[async_trait]
impl UploadSessionStore for FaultyImages {
    async fn create_upload_session(&self, session: &UploadSession, now: i64) -> Result<()> {
        self.inner.create_upload_session(session, now).await
    }
    async fn get_upload_session(&self, upload_id: &str, now: i64) -> Result<Option<UploadSession>> {
        self.inner.get_upload_session(upload_id, now).await
    }
    async fn use_upload_session(&self, upload_id: &str) -> Result<bool> {
        self.inner.use_upload_session(upload_id).await
    }
    async fn release_upload_session(&self, upload_id: &str) -> Result<()> {
        self.inner.release_upload_session(upload_id).await
    }
}

#[async_trait]
impl SiteStore for FaultyImages {
    async fn create_site(&self, a: i64, new: NewSite, now: i64) -> Result<Site> {
        self.inner.create_site(a, new, now).await
    }
    async fn get_site(&self, a: i64, id: i64) -> Result<Option<Site>> {
        self.inner.get_site(a, id).await
    }
    async fn update_site(
        &self,
        a: i64,
        id: i64,
        restrict_sub_id: Option<&str>,
        patch: SitePatch,
        now: i64,
    ) -> Result<Option<Site>> {
        self.inner
            .update_site(a, id, restrict_sub_id, patch, now)
            .await
    }
    async fn list_sites(&self, a: i64, query: &SiteQuery) -> Result<Page<Site>> {
        self.inner.list_sites(a, query).await
    }
}

#[async_trait]
impl PostStore for FaultyImages {
    async fn create_post(&self, a: i64, new: NewPost, now: i64) -> Result<Post> {
        self.inner.create_post(a, new, now).await
    }
    async fn get_post(&self, a: i64, id: i64) -> Result<Option<Post>> {
        self.inner.get_post(a, id).await
    }
    async fn update_post(
        &self,
        a: i64,
        id: i64,
        patch: PostPatch,
        now: i64,
    ) -> Result<Option<Post>> {
        self.inner.update_post(a, id, patch, now).await
    }
    async fn list_posts(&self, a: i64, query: &PostQuery) -> Result<Page<Post>> {
        self.inner.list_posts(a, query).await
    }
}

#[async_trait]
impl ImageStore for FaultyImages {
    async fn allocate_image_id(&self) -> Result<i64> {
        self.inner.allocate_image_id().await
    }
    async fn create_image(&self, a: i64, new: NewImage, now: i64) -> Result<Image> {
        if self.fault == Fault::AfterWriting {
            self.inner.create_image(a, new, now).await?;
        }
        Err(timeout())
    }
    async fn get_image(&self, a: i64, id: i64) -> Result<Option<Image>> {
        self.inner.get_image(a, id).await
    }
    async fn list_images(&self, a: i64, query: &ImageQuery) -> Result<Page<Image>> {
        self.inner.list_images(a, query).await
    }
    async fn find_image_any_account(&self, id: i64) -> Result<Option<Image>> {
        self.inner.find_image_any_account(id).await
    }
    async fn settle_image(&self, id: i64) -> Result<Option<Image>> {
        if self.fault == Fault::Unreachable {
            return Err(timeout());
        }
        self.inner.settle_image(id).await
    }
    async fn delete_image(&self, a: i64, id: i64, restrict: Option<&str>) -> Result<Option<Image>> {
        self.inner.delete_image(a, id, restrict).await
    }
}

/// An embedded store served with `fault` injected into its image record writes; its
/// `store` is the real one beneath, and a client with a key of `agency`.
async fn faulty_server(fault: Fault) -> (TestApp, PartnerClient) {
    let server = TestApp::builder()
        .wrap_stores(|stores| {
            let real = Arc::clone(&stores.records);
            stores.records = Arc::new(FaultyImages { inner: real, fault });
        })
        .spawn()
        .await;
    let client = server.partner_client(&server.key("agency").await);
    (server, client)
}

fn all_images() -> ImageQuery {
    ImageQuery {
        filter: Default::default(),
        descending: false,
        limit: 100,
        offset: 0,
    }
}

#[tokio::test]
async fn a_record_written_before_the_error_makes_the_upload_succeed_with_its_files() {
    let (server, client) = faulty_server(Fault::AfterWriting).await;
    let reply = client
        .post("/api/v2/images/", &upload_body(None))
        .await
        .expect("upload");
    assert_eq!(reply.status, 201, "{}", reply.body);
    let id = reply.body["id"].as_i64().expect("id");
    let path = reply.body["image"].as_str().expect("path").to_string();
    let record = server.store.find_image_any_account(id).await.expect("find");
    assert_eq!(record.map(|i| i.path), Some(path.clone()));
    let mut expected: Vec<String> = VARIANTS
        .iter()
        .map(|(size, _)| variant_path(&path, size))
        .chain([path.clone()])
        .collect();
    // The WebP siblings of the small and thumbnail variants.
    expected.extend(
        sitehost::domain::image_record::WEBP_SIBLINGS_AT_UPLOAD
            .iter()
            .map(|size| sibling_path(&variant_path(&path, size), SiblingFormat::Webp)),
    );
    expected.sort();
    assert_eq!(stored_files(server.dir()), expected);
}

#[tokio::test]
async fn a_record_not_written_before_the_error_leaves_no_record_and_no_files() {
    let (server, client) = faulty_server(Fault::BeforeWriting).await;
    let reply = client
        .post("/api/v2/images/", &upload_body(None))
        .await
        .expect("upload");
    assert_eq!(reply.status, 500, "{}", reply.body);
    assert!(
        stored_files(server.dir()).is_empty(),
        "{:?}",
        stored_files(server.dir())
    );
    let account = server
        .store
        .ensure_account("agency")
        .await
        .expect("account");
    let page = server
        .store
        .list_images(account.id, &all_images())
        .await
        .expect("list");
    assert_eq!((page.items.len(), page.total_count), (0, 0));
}

#[tokio::test]
async fn an_unanswerable_outcome_keeps_the_files_for_the_sweeper() {
    let (server, client) = faulty_server(Fault::Unreachable).await;
    let reply = client
        .post("/api/v2/images/", &upload_body(None))
        .await
        .expect("upload");
    assert_eq!(reply.status, 500, "{}", reply.body);
    // The original, five variants and two WebP siblings.
    assert_eq!(stored_files(server.dir()).len(), 8, "the files are kept");
    // Later, past the grace period, the sweeper finds no record and removes them.
    let files: SharedFiles =
        Arc::new(sitehost::store::disk_files::LocalFiles::open(server.dir()).expect("files"));
    let report = sweep(server.store.as_ref(), files.as_ref(), later())
        .await
        .expect("sweep");
    assert_eq!((report.orphans.len(), report.files_removed), (1, 8));
    assert!(stored_files(server.dir()).is_empty());
}

// ---------------------------------------------------------------------------------------
// The sweeper.

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

/// The sweeper on any pair of stores: fresh sets and recorded sets stay, an orphan set past
/// the grace period goes (and its id can no longer be recorded), files without an id in
/// their names are never touched, and a dry run changes nothing.
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

/// A data directory made before images had sub ids opens, and its images belong to none.
#[tokio::test]
async fn an_embedded_store_from_before_image_sub_ids_is_migrated() {
    let dir = tempfile::tempdir().expect("dir");
    let db = rusqlite::Connection::open(dir.path().join("sitehost.db")).expect("db");
    db.execute_batch(
        "CREATE TABLE images (
            id INTEGER PRIMARY KEY, account_id INTEGER NOT NULL, path TEXT NOT NULL UNIQUE,
            mimetype TEXT NOT NULL, width INTEGER NOT NULL, height INTEGER NOT NULL,
            site_id INTEGER, business_id INTEGER, user_id INTEGER NOT NULL,
            added INTEGER NOT NULL, modified INTEGER NOT NULL);
         INSERT INTO images VALUES (1, 1, 'img/upload/old-abcdefghijkl.png', 'image/png',
            2, 2, NULL, NULL, 1, 0, 0);",
    )
    .expect("old schema");
    drop(db);
    let store: SharedStore = Arc::new(
        sitehost::store::sqlite::SqliteStore::open(dir.path()).expect("opens and migrates"),
    );
    let old = store.get_image(1, 1).await.expect("get").expect("kept");
    assert_eq!(
        (old.path.as_str(), old.partner_sub_id),
        ("img/upload/old-abcdefghijkl.png", None)
    );
    let new = NewImage {
        id: Some(2),
        path: "img/upload/new-abcdefghijkl--2.png".into(),
        mimetype: "image/png".into(),
        width: 2,
        height: 2,
        site_id: None,
        business_id: None,
        partner_sub_id: Some("north".into()),
        user_id: 1,
    };
    store.create_image(1, new, 0).await.expect("create");
    let north = ImageQuery {
        filter: sitehost::domain::image_record::ImageFilter {
            partner_sub_id: Some("north".into()),
            ..Default::default()
        },
        ..all_images()
    };
    let page = store.list_images(1, &north).await.expect("list");
    assert_eq!(
        (
            page.items.iter().map(|i| i.id).collect::<Vec<_>>(),
            page.total_count
        ),
        (vec![2], 1)
    );
}

//! A record write with an unknown outcome (an internal error after, or before, the record was
//! written) never leaves a record pointing at a missing file.

use std::sync::Arc;

use async_trait::async_trait;
use sitehost::client::PartnerClient;
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
use sitehost::store::files::SharedFiles;
use sitehost::store::{
    BudgetDecision, BudgetKind, BudgetStore, BusinessStore, IdempotencyClaim, IdempotencyKey,
    IdempotencyStore, ImageStore, KeyStore, LocationStore, Page, PostStore, SharedStore, SiteStore,
    StoredAnswer, UploadSession, UploadSessionStore,
};
use sitehost::upload::sweep::sweep;

use super::{all_images, later, upload_body};
use crate::support::app::TestApp;
use crate::support::media::stored_files;

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
        claim: &str,
        now: i64,
    ) -> Result<IdempotencyClaim> {
        self.inner
            .claim_idempotency_key(key, fingerprint, claim, now)
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

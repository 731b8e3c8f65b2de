//! Storage behind traits, and every implementation of them. The records: `dynamo`
//! (DynamoDB, production) and `sqlite` (the embedded store `sitehost serve` uses by
//! default), one behaviour: the contract test suite in
//! `sitehost/tests/integration/store_contract/` runs against both. The files
//! (`files::FileStore`): `s3` (production), `disk_files` (the embedded store's directory)
//! and `memory_files` (for tests). The cargo features that add an implementation are named
//! here and nowhere else in the store.

use std::sync::Arc;

use async_trait::async_trait;

use crate::domain::account::{Account, ApiKey, NewKey};
use crate::domain::business::{
    Business, BusinessDetail, BusinessPatch, BusinessQuery, NewBusiness,
};
use crate::domain::image_record::{Image, ImageQuery, NewImage};
use crate::error::Result;
pub use location_store::LocationStore;

pub mod dynamo;
pub mod files;
pub mod held_key;
pub mod location_store;
pub mod memory_files;
pub mod rules;
pub mod scope;
pub mod sites;

#[cfg(feature = "local")]
pub mod disk_files;
#[cfg(feature = "files")]
pub mod s3;
#[cfg(feature = "local")]
pub mod sqlite;

pub use sites::{PostStore, SiteStore};

/// One page of a list plus the number of all matches.
#[derive(Debug, Clone, PartialEq)]
pub struct Page<T> {
    pub items: Vec<T>,
    pub total_count: u64,
}

impl<T> Page<T> {
    /// A page of nothing: what a list answers when the caller may see none of it.
    pub fn empty() -> Self {
        Self {
            items: Vec::new(),
            total_count: 0,
        }
    }
}

/// Accounts, API keys and the OAuth nonce memory.
#[async_trait]
pub trait KeyStore: Send + Sync {
    /// Returns the account with this name, creating it if needed.
    async fn ensure_account(&self, name: &str) -> Result<Account>;
    /// Creates a key (and allocates a `user_id` when the request has none); `Conflict` on
    /// `key` when that key exists.
    async fn create_key(&self, new: NewKey) -> Result<ApiKey>;
    /// A key by its public part, revoked or not.
    async fn get_key(&self, key: &str) -> Result<Option<ApiKey>>;
    async fn list_keys(&self) -> Result<Vec<ApiKey>>;
    /// Marks a key revoked; false if there is no such key.
    async fn revoke_key(&self, key: &str) -> Result<bool>;
    /// Records a nonce for a key until `expires_at` (unix seconds). Returns false when the
    /// same nonce was already recorded for this key and has not expired yet (a replay).
    async fn remember_nonce(
        &self,
        key: &str,
        nonce: &str,
        now: i64,
        expires_at: i64,
    ) -> Result<bool>;
    /// Readies the nonce memory ahead of the first request, so a server that cannot have
    /// it fails as it starts. Stores that need no preparing do nothing.
    async fn prepare_nonce_memory(&self) -> Result<()> {
        Ok(())
    }
}

#[async_trait]
pub trait BusinessStore: Send + Sync {
    /// Creates a business with its services and locations in one transaction; each
    /// location gets an id of the `location` sequence. Fails with `MissingReference` on
    /// `logo_image_id` when that image is not one of the account's.
    async fn create_business(
        &self,
        account_id: i64,
        new: NewBusiness,
        now: i64,
    ) -> Result<BusinessDetail>;
    /// The business record alone (what lists show).
    async fn get_business(&self, account_id: i64, id: i64) -> Result<Option<Business>>;
    /// The business with its services and locations (what the detail view shows).
    async fn get_business_detail(&self, account_id: i64, id: i64)
        -> Result<Option<BusinessDetail>>;
    /// Applies a patch atomically (no concurrent update loses a field). `None` when the
    /// business does not exist in this account. `restrict_sub_id` hides businesses of other
    /// sub ids, as for a sub-restricted key, and a new `logo_image_id` must then be an
    /// image of that sub id (`MissingReference` on `logo_image_id` otherwise). Services and
    /// locations in the patch replace the business's (`BusinessDetail::apply`), new
    /// locations taking ids of the `location` sequence.
    async fn update_business(
        &self,
        account_id: i64,
        id: i64,
        restrict_sub_id: Option<&str>,
        patch: BusinessPatch,
        now: i64,
    ) -> Result<Option<BusinessDetail>>;
    async fn list_businesses(
        &self,
        account_id: i64,
        query: &BusinessQuery,
    ) -> Result<Page<Business>>;
}

#[async_trait]
pub trait ImageStore: Send + Sync {
    /// Takes an id from the image sequence ahead of `create_image`, so an upload can name
    /// its files after its record (`NewImage::id`).
    async fn allocate_image_id(&self) -> Result<i64>;
    /// Writes the image record in one transaction. Fails with `MissingReference` on
    /// `business_id` when that business is not one of the account's or its
    /// `partner_sub_id` is not `new.partner_sub_id`. An internal error leaves the outcome
    /// unknown: `settle_image` says what happened.
    async fn create_image(&self, account_id: i64, new: NewImage, now: i64) -> Result<Image>;
    async fn get_image(&self, account_id: i64, id: i64) -> Result<Option<Image>>;
    async fn list_images(&self, account_id: i64, query: &ImageQuery) -> Result<Page<Image>>;
    /// The image with this id in any account, for operator tools (the file sweeper's dry
    /// run). Never use it to answer a partner.
    async fn find_image_any_account(&self, id: i64) -> Result<Option<Image>>;
    /// Settles an image id whose `create_image` had an unknown outcome, or whose files have
    /// no record: returns the record (any account) when one was written; otherwise bars the
    /// id, so a `create_image` of it still in flight fails and none is ever written, and
    /// returns `None`. After `None` the id's files may be removed.
    async fn settle_image(&self, id: i64) -> Result<Option<Image>>;
    /// Deletes the image record, its list entries and its counts in one transaction, and
    /// returns it, so the caller can remove its files after it (a record never points at a
    /// missing file; files left behind are orphans for `sitehost files sweep`). `None` when
    /// the account has no such image, or `restrict_sub_id` hides it. Refused with
    /// `StateConflict` (`rules::image_is_logo`) while any business has it as its logo,
    /// atomically with business writes that set a logo. The id stays barred, as after
    /// `settle_image`: it is never recorded again.
    async fn delete_image(
        &self,
        account_id: i64,
        id: i64,
        restrict_sub_id: Option<&str>,
    ) -> Result<Option<Image>>;
}

/// How long a request budget's window lasts: budgets count per fixed minute, aligned to
/// the clock (`now - now % 60`), the same for every key.
pub const BUDGET_WINDOW_SECS: i64 = 60;

/// What a per-key request budget counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BudgetKind {
    /// Every authenticated request.
    Requests,
    /// Image uploads (`POST /api/v2/images/`), which also count as requests.
    Uploads,
}

impl BudgetKind {
    pub fn name(self) -> &'static str {
        match self {
            BudgetKind::Requests => "requests",
            BudgetKind::Uploads => "uploads",
        }
    }
}

/// The answer to one request drawn on a budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BudgetDecision {
    Admitted,
    /// Over the budget: the window it counted in ends in `retry_after` seconds (at most
    /// 60, or 61 for a request that read the clock just before a window began).
    Refused {
        retry_after: u64,
    },
}

/// The window `now` falls in: its start (unix seconds) and the seconds left until it ends.
pub fn budget_window(now: i64) -> (i64, u64) {
    let start = now - now.rem_euclid(BUDGET_WINDOW_SECS);
    (start, (start + BUDGET_WINDOW_SECS - now) as u64)
}

/// Per-key request budgets: counters per key, kind and window.
#[async_trait]
pub trait BudgetStore: Send + Sync {
    /// Counts `tokens` (at least 1, at most `limit`) of `kind` against `key`'s budget of
    /// `limit` (at least 1) in the window `now` falls in: all of them, or none (refused).
    /// Atomic: however many calls run at once, at most `limit` tokens of a window are
    /// admitted. A refused call changes nothing that a later window sees.
    async fn consume_budget(
        &self,
        key: &str,
        kind: BudgetKind,
        limit: u64,
        tokens: u64,
        now: i64,
    ) -> Result<BudgetDecision>;
}

/// How long an `Idempotency-Key` is remembered after its first request.
pub const IDEMPOTENCY_KEY_SECS: i64 = 24 * 60 * 60;
/// How long a claim on a key holds without an answer: longer than any request may run
/// (API Gateway gives up after 29 s), so a claim outlives its request only if the request
/// died (a crashed or timed-out instance), and then the key serves again.
pub const IDEMPOTENCY_LEASE_SECS: i64 = 60;

/// An `Idempotency-Key` as one caller sent it: the same value from another API key (even
/// of the same account and sub id) names another record, so no caller ever meets another's
/// use of a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdempotencyKey<'a> {
    pub account_id: i64,
    /// The caller's API key (its public half).
    pub api_key: &'a str,
    /// The header's value.
    pub value: &'a str,
}

/// What is kept of the first answer to a request made with an `Idempotency-Key`: its
/// status and the created object's `Location`, not its body. A replay reads the object
/// again, as the caller's GET of that `Location` would.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredAnswer {
    pub status: u16,
    /// The created object's URI, its `Location`. Stored under the name `location` (the
    /// DynamoDB attribute, the SQLite column), which stays so that answers stored before
    /// the field had this name still read.
    pub created_uri: String,
}

/// What holds an `Idempotency-Key` when a request claims it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdempotencyClaim {
    /// The key is this request's until it finishes or releases it (or the lease ends).
    Claimed,
    /// A request with the same fingerprint holds it and has not answered yet.
    InProgress,
    /// A request with the same fingerprint answered this.
    Answered(StoredAnswer),
    /// The key was used with another request (another fingerprint).
    OtherRequest,
}

/// `Idempotency-Key`s of creates and uploads, per account and API key
/// ([`IdempotencyKey`]): each remembers the fingerprint of the request that first used it
/// and, once that request succeeded, its answer, for [`IDEMPOTENCY_KEY_SECS`].
#[async_trait]
pub trait IdempotencyStore: Send + Sync {
    /// Claims `key` for a request with `fingerprint`, atomically: of two requests that
    /// claim one key at once, one gets `Claimed` and the other sees it held. An expired key
    /// (or a claim past its lease) is claimed anew. The claim is written with `claim`, a
    /// token new for each request: a claim found written with it is this request's own (a
    /// write the store sent again after a fault), and a create answers the key only while
    /// the claim is still this one (`held_key`).
    async fn claim_idempotency_key(
        &self,
        key: &IdempotencyKey<'_>,
        fingerprint: &str,
        claim: &str,
        now: i64,
    ) -> Result<IdempotencyClaim>;
    /// Records the answer of the claiming request; replayed until the key expires.
    async fn answer_idempotency_key(
        &self,
        key: &IdempotencyKey<'_>,
        fingerprint: &str,
        answer: &StoredAnswer,
    ) -> Result<()>;
    /// Gives up a claim whose request failed, so that a retry runs again.
    async fn release_idempotency_key(
        &self,
        key: &IdempotencyKey<'_>,
        fingerprint: &str,
    ) -> Result<()>;
}

/// How long a staged upload's record is kept after its form expires, so that a late or
/// repeated create is told the upload_id expired or was used rather than that it is unknown.
pub const UPLOAD_SESSION_KEPT_SECS: i64 = 24 * 60 * 60;

/// A staged upload's session (`POST /api/v2/images/uploads/`): who may turn its file into
/// an image, the size declared, and until when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UploadSession {
    /// Random, and the name of the staged file (`staging/<upload_id>`).
    pub upload_id: String,
    pub account_id: i64,
    /// The sub id of the key that made it (`None` for an unrestricted key): only a key of
    /// the same sub id may use it.
    pub partner_sub_id: Option<String>,
    /// The client's file name, for the image's file name.
    pub name: String,
    /// The size declared: the form takes no more, and the create refuses a larger file.
    pub size: u64,
    /// When the form stops being accepted (unix seconds).
    pub expires_at: i64,
    /// Whether a create has used it.
    pub used: bool,
}

/// Staged uploads' sessions, kept until [`UPLOAD_SESSION_KEPT_SECS`] after their form
/// expires, one record each (named by its random `upload_id`, so no list and no hot key).
#[async_trait]
pub trait UploadSessionStore: Send + Sync {
    /// Records a new session (`used` false) at `now`.
    async fn create_upload_session(&self, session: &UploadSession, now: i64) -> Result<()>;
    /// The session, used or not; `None` when unknown or past its keeping.
    async fn get_upload_session(&self, upload_id: &str, now: i64) -> Result<Option<UploadSession>>;
    /// Marks it used, atomically: of two creates at once, one gets `true`, the other
    /// `false` (as for a session already used, or gone).
    async fn use_upload_session(&self, upload_id: &str) -> Result<bool>;
    /// Makes a used session usable again, after a create that failed on our side (or found
    /// no file yet), so that the client can retry.
    async fn release_upload_session(&self, upload_id: &str) -> Result<()>;
}

/// Everything the API needs from a record store.
pub trait Store:
    KeyStore
    + BusinessStore
    + ImageStore
    + BudgetStore
    + IdempotencyStore
    + LocationStore
    + UploadSessionStore
    + SiteStore
    + PostStore
{
}
impl<T> Store for T where
    T: KeyStore
        + BusinessStore
        + ImageStore
        + BudgetStore
        + IdempotencyStore
        + LocationStore
        + UploadSessionStore
        + SiteStore
        + PostStore
{
}

pub type SharedStore = Arc<dyn Store>;

/// The record store and the file store of one deployment.
#[derive(Clone)]
pub struct Stores {
    pub records: SharedStore,
    /// `None` when the deployment has no file store (no bucket, or a build without
    /// uploads): only uploads write files.
    pub files: Option<files::SharedFiles>,
}

#[cfg(feature = "local")]
impl Stores {
    /// SQLite and files under one data directory.
    pub fn embedded(data_dir: &std::path::Path) -> Result<Stores> {
        Ok(Stores {
            records: Arc::new(sqlite::SqliteStore::open(data_dir)?),
            files: Some(Arc::new(disk_files::LocalFiles::open(data_dir)?)),
        })
    }
}

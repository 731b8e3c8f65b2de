//! The embedded store: one SQLite file (`sitehost.db`) in the data directory, in WAL mode so
//! `sitehost keys` in another process can change keys while `sitehost serve` runs.
//!
//! Counts come from the same per-scope counters the DynamoDB store keeps (see
//! `store::scope`), updated in the write's transaction, so both stores report identical
//! `total_count`s without counting rows.
//!
//! Shaped like `store::dynamo`: the connections, transactions, sequences and counters here;
//! one module per record kind (`businesses`, `images`, `keys`, `budgets`, `idempotency`,
//! `nonces`, `upload_sessions`), and below the first two `rows`, the row layout and lookups both use.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

use anyhow::Context;
use rusqlite::{params, Connection, OptionalExtension, Row, Transaction};

use crate::error::{ApiError, Result};
use crate::store::Page;

const SCHEMA: &str = r#"
CREATE TABLE IF NOT EXISTS sequences (kind TEXT PRIMARY KEY, n INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS accounts (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS api_keys (
    key TEXT PRIMARY KEY, secret TEXT NOT NULL, account_id INTEGER NOT NULL,
    user_id INTEGER NOT NULL, partner_sub_id TEXT, revoked INTEGER NOT NULL DEFAULT 0,
    created INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS businesses (
    id INTEGER PRIMARY KEY, account_id INTEGER NOT NULL, business_name TEXT NOT NULL,
    name_key TEXT NOT NULL, slug TEXT NOT NULL, deleted INTEGER NOT NULL,
    partner_business_id TEXT, partner_sub_id TEXT, category_id INTEGER, logo_image_id INTEGER,
    user_id INTEGER NOT NULL, added INTEGER NOT NULL, added_date TEXT NOT NULL,
    modified INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS businesses_by_account ON businesses (account_id, id);
CREATE INDEX IF NOT EXISTS businesses_by_name ON businesses (account_id, name_key, id);
CREATE INDEX IF NOT EXISTS businesses_by_state ON businesses (account_id, deleted, id);
CREATE INDEX IF NOT EXISTS businesses_by_sub ON businesses (account_id, partner_sub_id, deleted, id);
CREATE INDEX IF NOT EXISTS businesses_by_day ON businesses (account_id, added_date, id);
CREATE INDEX IF NOT EXISTS businesses_by_partner_id ON businesses (account_id, partner_business_id, id);
-- `delete_image` finds the businesses that have the image as their logo.
CREATE INDEX IF NOT EXISTS businesses_by_logo ON businesses (logo_image_id);
CREATE TABLE IF NOT EXISTS images (
    id INTEGER PRIMARY KEY, account_id INTEGER NOT NULL, path TEXT NOT NULL UNIQUE,
    mimetype TEXT NOT NULL, width INTEGER NOT NULL, height INTEGER NOT NULL,
    site_id INTEGER, business_id INTEGER, user_id INTEGER NOT NULL,
    added INTEGER NOT NULL, modified INTEGER NOT NULL, partner_sub_id TEXT);
CREATE INDEX IF NOT EXISTS images_by_account ON images (account_id, id);
CREATE INDEX IF NOT EXISTS images_by_site ON images (account_id, site_id, id);
CREATE INDEX IF NOT EXISTS images_by_business ON images (account_id, business_id, id);
-- Image ids settled as never recorded (`settle_image`): `create_image` refuses them.
CREATE TABLE IF NOT EXISTS barred_image_ids (id INTEGER PRIMARY KEY);
CREATE TABLE IF NOT EXISTS counters (
    account_id INTEGER NOT NULL, kind TEXT NOT NULL, scope TEXT NOT NULL, n INTEGER NOT NULL,
    PRIMARY KEY (account_id, kind, scope)) WITHOUT ROWID;
-- A business's services (JSON list; no row: none) and locations (`fields`: the JSON of
-- `LocationFields`), kept apart from the business rows so lists never read them. Stores
-- made before locations were kept get both tables as they open.
CREATE TABLE IF NOT EXISTS business_services (
    business_id INTEGER PRIMARY KEY, services TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS locations (
    id INTEGER PRIMARY KEY, account_id INTEGER NOT NULL, business_id INTEGER NOT NULL,
    position INTEGER NOT NULL, fields TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS locations_by_business ON locations (business_id, position);
-- `Idempotency-Key`s of creates and uploads (`idempotency`), per account and API key:
-- answered once `status` (and the created object's `location`) is set. Stores made before
-- keys were per API key kept them, with the answer's body, in `idempotency_keys`: a day's
-- retries, dropped.
DROP TABLE IF EXISTS idempotency_keys;
CREATE TABLE IF NOT EXISTS idempotency_records (
    account_id INTEGER NOT NULL, api_key TEXT NOT NULL, key TEXT NOT NULL,
    fingerprint TEXT NOT NULL, lease_until INTEGER NOT NULL, expires_at INTEGER NOT NULL,
    status INTEGER, location TEXT,
    PRIMARY KEY (account_id, api_key, key)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS idempotency_records_by_expiry ON idempotency_records (expires_at);
-- Nonces moved to their own file (see `nonces`); stores made before that had them here.
DROP TABLE IF EXISTS nonces;
-- Staged uploads' sessions (`upload_sessions`), each kept until `kept_until`.
CREATE TABLE IF NOT EXISTS upload_sessions (
    upload_id TEXT PRIMARY KEY, account_id INTEGER NOT NULL, partner_sub_id TEXT,
    name TEXT NOT NULL, size INTEGER NOT NULL, expires_at INTEGER NOT NULL,
    used INTEGER NOT NULL, kept_until INTEGER NOT NULL) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS upload_sessions_by_keeping ON upload_sessions (kept_until);
"#;

mod budgets;
mod businesses;
mod idempotency;
mod images;
mod keys;
mod locations;
mod nonces;
mod rows;
mod sites;
mod upload_sessions;

const DB_FILE: &str = "sitehost.db";
const READERS: usize = 4;

/// Stores made before images had a sub id get the column (their images have none).
fn migrate(conn: &Connection) -> rusqlite::Result<()> {
    let has_sub: bool = conn
        .prepare("SELECT 1 FROM pragma_table_info('images') WHERE name = 'partner_sub_id'")?
        .exists([])?;
    if !has_sub {
        conn.execute_batch("ALTER TABLE images ADD COLUMN partner_sub_id TEXT")?;
    }
    conn.execute_batch(
        "CREATE INDEX IF NOT EXISTS images_by_sub ON images (account_id, partner_sub_id, id)",
    )
}

pub struct SqliteStore {
    data_dir: PathBuf,
    writer: Mutex<Connection>,
    readers: Vec<Mutex<Connection>>,
    /// Opened by the first request that records a nonce: one process at a time may hold
    /// the nonce memory, and `sitehost keys` must work beside a running `sitehost serve`.
    nonces: tokio::sync::OnceCell<nonces::NonceRecorder>,
    next_reader: AtomicUsize,
    /// Request budgets of the current minute, in memory like the live nonces.
    budgets: budgets::BudgetCounters,
}

fn db_error(err: rusqlite::Error) -> ApiError {
    ApiError::from(anyhow::Error::new(err).context("sqlite"))
}

fn lock(conn: &Mutex<Connection>) -> MutexGuard<'_, Connection> {
    // A panic while holding the lock leaves SQLite itself consistent (the transaction
    // rolls back on drop), so a poisoned lock is safe to keep using.
    conn.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn connect(path: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    // Detail and list reads land anywhere in a large account: keep the hot pages in memory
    // (64 MiB of page cache per connection, reads through a 256 MiB map).
    conn.pragma_update(None, "cache_size", -65_536)?;
    conn.pragma_update(None, "mmap_size", 268_435_456)?;
    conn.pragma_update(None, "temp_store", "MEMORY")?;
    Ok(conn)
}

impl SqliteStore {
    /// Opens (creating if needed) the store in `data_dir`.
    pub fn open(data_dir: &Path) -> Result<Self> {
        std::fs::create_dir_all(data_dir)
            .with_context(|| format!("cannot create data directory {}", data_dir.display()))?;
        let path = data_dir.join(DB_FILE);
        let writer = connect(&path).map_err(db_error)?;
        writer.execute_batch(SCHEMA).map_err(db_error)?;
        writer.execute_batch(sites::SCHEMA).map_err(db_error)?;
        migrate(&writer).map_err(db_error)?;
        let readers = (0..READERS)
            .map(|_| connect(&path).map(Mutex::new))
            .collect::<rusqlite::Result<Vec<_>>>()
            .map_err(db_error)?;
        Ok(SqliteStore {
            data_dir: data_dir.to_path_buf(),
            writer: Mutex::new(writer),
            readers,
            nonces: tokio::sync::OnceCell::new(),
            next_reader: AtomicUsize::new(0),
            budgets: budgets::BudgetCounters::default(),
        })
    }

    fn read<T>(&self, f: impl FnOnce(&Connection) -> rusqlite::Result<T>) -> Result<T> {
        self.read_checked(|conn| f(conn).map_err(db_error))
    }

    /// `read` of work that has errors of its own (stored JSON to parse).
    fn read_checked<T>(&self, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        off_the_runtime(|| {
            let start = self.next_reader.fetch_add(1, Ordering::Relaxed);
            // Take the first free reader, else wait for the one whose turn it is.
            for i in 0..self.readers.len() {
                if let Ok(conn) = self.readers[(start + i) % self.readers.len()].try_lock() {
                    return f(&conn);
                }
            }
            let conn = lock(&self.readers[start % self.readers.len()]);
            f(&conn)
        })
    }

    async fn nonce_recorder(&self) -> Result<&nonces::NonceRecorder> {
        self.nonces
            .get_or_try_init(|| async { nonces::NonceRecorder::open(&self.data_dir) })
            .await
    }

    fn write<T>(&self, f: impl FnOnce(&Transaction) -> Result<T>) -> Result<T> {
        off_the_runtime(|| {
            let mut conn = lock(&self.writer);
            let tx = conn
                .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
                .map_err(db_error)?;
            let value = f(&tx)?;
            tx.commit().map_err(db_error)?;
            Ok(value)
        })
    }
}

/// Runs SQLite work (every `read` and `write`) without holding up the async runtime.
///
/// SQLite calls block: a commit syncs the WAL, a write waits up to the busy timeout (5 s)
/// while `sitehost keys` in another process holds the write lock, a read may wait for a
/// free connection or for the disk. Run inline on a worker, that stalls every connection
/// scheduled there (on two cores, the whole server). On the multi-thread runtime of
/// `sitehost serve`, `block_in_place` first hands the worker's queue to another thread,
/// so other requests go on while this one waits.
///
/// Chosen over `spawn_blocking` or a dedicated pool: those need `'static` closures, so
/// every call site would copy its arguments and the connection pool would move behind an
/// `Arc`; this is one wrapper around the existing connection use, and a call that does not
/// block long gets its worker back at once. The current-thread runtimes (unit tests, the
/// one-shot `sitehost keys` commands) have no other worker to hand over to, and nothing
/// else to stall, so they run the work inline.
fn off_the_runtime<T>(work: impl FnOnce() -> T) -> T {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(work)
        }
        _ => work(),
    }
}

fn next_id(tx: &Transaction, kind: &str) -> Result<i64> {
    tx.query_row(
        "INSERT INTO sequences (kind, n) VALUES (?1, 1)
         ON CONFLICT (kind) DO UPDATE SET n = n + 1 RETURNING n",
        params![kind],
        |row| row.get(0),
    )
    .map_err(db_error)
}

fn add_to_counters<S: AsRef<str>>(
    tx: &Transaction,
    account_id: i64,
    kind: &str,
    scopes: impl IntoIterator<Item = S>,
    delta: i64,
) -> Result<()> {
    let mut stmt = tx
        .prepare_cached(
            "INSERT INTO counters (account_id, kind, scope, n) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (account_id, kind, scope) DO UPDATE SET n = n + excluded.n",
        )
        .map_err(db_error)?;
    for scope in scopes {
        stmt.execute(params![account_id, kind, scope.as_ref(), delta])
            .map_err(db_error)?;
    }
    Ok(())
}

fn counter(conn: &Connection, account_id: i64, kind: &str, scope: &str) -> rusqlite::Result<u64> {
    let n: Option<i64> = conn
        .prepare_cached(
            "SELECT n FROM counters WHERE account_id = ?1 AND kind = ?2 AND scope = ?3",
        )?
        .query_row(params![account_id, kind, scope], |row| row.get(0))
        .optional()?;
    Ok(n.unwrap_or(0).max(0) as u64)
}

/// One page of a list: `sql` (ending in `LIMIT ? OFFSET ?`, bound last from `limit` and
/// `offset`) with the total from the scope's counter.
struct ListQuery<'a> {
    kind: &'a str,
    account_id: i64,
    scope: &'a str,
    sql: String,
    args: Vec<rusqlite::types::Value>,
    limit: u64,
    offset: u64,
}

impl SqliteStore {
    fn list_page<T>(
        &self,
        mut list: ListQuery<'_>,
        from_row: fn(&Row) -> rusqlite::Result<T>,
    ) -> Result<Page<T>> {
        list.sql.push_str(" LIMIT ? OFFSET ?");
        list.args.push(clamp_i64(list.limit).into());
        list.args.push(clamp_i64(list.offset).into());
        self.read(|conn| {
            let total_count = counter(conn, list.account_id, list.kind, list.scope)?;
            // SQLite steps over every skipped row: a page past the end is answered from
            // the counter alone.
            if list.offset >= total_count {
                return Ok(Page {
                    items: Vec::new(),
                    total_count,
                });
            }
            let items = conn
                .prepare_cached(&list.sql)?
                .query_map(rusqlite::params_from_iter(list.args), from_row)?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            Ok(Page { items, total_count })
        })
    }
}

fn clamp_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Whether a write failed because a row with the same unique key exists.
fn is_unique_violation(err: &rusqlite::Error) -> bool {
    matches!(
        err.sqlite_error_code(),
        Some(rusqlite::ErrorCode::ConstraintViolation)
    )
}

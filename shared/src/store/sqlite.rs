//! The embedded store: one SQLite file (`sitehost.db`) in the data directory, in WAL mode so
//! `sitehost keys` in another process can change keys while `sitehost serve` runs.
//!
//! Counts come from the same per-scope counters the DynamoDB store keeps (see
//! `store::scope`), updated in the write's transaction, so both stores report identical
//! `total_count`s without counting rows.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

use async_trait::async_trait;
use rusqlite::{params, Connection, OptionalExtension, Row, Transaction};

use super::{BusinessStore, ImageStore, KeyStore, Page};
use crate::account::{Account, ApiKey, NewKey};
use crate::business::{Business, BusinessOrder, BusinessPatch, BusinessQuery, NewBusiness};
use crate::clock::utc_date;
use crate::error::{ApiError, Result};
use crate::image::{Image, ImageQuery, NewImage};

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
-- Nonces moved to their own file (see `nonces`); stores made before that had them here.
DROP TABLE IF EXISTS nonces;
"#;

mod budgets;
mod nonces;

const DB_FILE: &str = "sitehost.db";
const READERS: usize = 4;

const BUSINESS_COLUMNS: &str =
    "id, account_id, business_name, slug, deleted, partner_business_id, \
     partner_sub_id, category_id, logo_image_id, user_id, added, modified";
const IMAGE_COLUMNS: &str = "id, account_id, path, mimetype, width, height, site_id, business_id, \
     user_id, added, modified, partner_sub_id";

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
        std::fs::create_dir_all(data_dir).map_err(|e| {
            ApiError::internal(format!(
                "cannot create data directory {}: {e}",
                data_dir.display()
            ))
        })?;
        let path = data_dir.join(DB_FILE);
        let writer = connect(&path).map_err(db_error)?;
        writer.execute_batch(SCHEMA).map_err(db_error)?;
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
        off_the_runtime(|| {
            let start = self.next_reader.fetch_add(1, Ordering::Relaxed);
            // Take the first free reader, else wait for the one whose turn it is.
            for i in 0..self.readers.len() {
                if let Ok(conn) = self.readers[(start + i) % self.readers.len()].try_lock() {
                    return f(&conn).map_err(db_error);
                }
            }
            let conn = lock(&self.readers[start % self.readers.len()]);
            f(&conn).map_err(db_error)
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

fn add_to_counters(
    tx: &Transaction,
    account_id: i64,
    kind: &str,
    scopes: &[String],
    delta: i64,
) -> Result<()> {
    let mut stmt = tx
        .prepare_cached(
            "INSERT INTO counters (account_id, kind, scope, n) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (account_id, kind, scope) DO UPDATE SET n = n + excluded.n",
        )
        .map_err(db_error)?;
    for scope in scopes {
        stmt.execute(params![account_id, kind, scope, delta])
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

fn business_from_row(row: &Row) -> rusqlite::Result<Business> {
    Ok(Business {
        id: row.get(0)?,
        account_id: row.get(1)?,
        business_name: row.get(2)?,
        slug: row.get(3)?,
        deleted: row.get(4)?,
        partner_business_id: row.get(5)?,
        partner_sub_id: row.get(6)?,
        category_id: row.get(7)?,
        logo_image_id: row.get(8)?,
        user_id: row.get(9)?,
        added: row.get(10)?,
        modified: row.get(11)?,
    })
}

fn image_from_row(row: &Row) -> rusqlite::Result<Image> {
    Ok(Image {
        id: row.get(0)?,
        account_id: row.get(1)?,
        path: row.get(2)?,
        mimetype: row.get(3)?,
        width: row.get(4)?,
        height: row.get(5)?,
        site_id: row.get(6)?,
        business_id: row.get(7)?,
        user_id: row.get(8)?,
        added: row.get(9)?,
        modified: row.get(10)?,
        partner_sub_id: row.get(11)?,
    })
}

fn key_from_row(row: &Row) -> rusqlite::Result<ApiKey> {
    Ok(ApiKey {
        key: row.get(0)?,
        secret: row.get(1)?,
        account_id: row.get(2)?,
        user_id: row.get(3)?,
        partner_sub_id: row.get(4)?,
        revoked: row.get(5)?,
        created: row.get(6)?,
    })
}

const KEY_COLUMNS: &str = "key, secret, account_id, user_id, partner_sub_id, revoked, created";

/// Whether the image exists in the account and, with `restrict_sub_id`, has that sub id.
fn image_exists(
    tx: &Transaction,
    account_id: i64,
    image_id: i64,
    restrict_sub_id: Option<&str>,
) -> Result<bool> {
    tx.prepare_cached(
        "SELECT 1 FROM images WHERE id = ?1 AND account_id = ?2
         AND (?3 IS NULL OR partner_sub_id = ?3)",
    )
    .and_then(|mut s| s.exists(params![image_id, account_id, restrict_sub_id]))
    .map_err(db_error)
}

fn fetch_image(conn: &Connection, id: i64) -> rusqlite::Result<Option<Image>> {
    conn.prepare_cached(&format!("SELECT {IMAGE_COLUMNS} FROM images WHERE id = ?1"))?
        .query_row(params![id], image_from_row)
        .optional()
}

fn no_such_logo(id: i64) -> ApiError {
    ApiError::field(
        "logo_image_id",
        format!("There is no image {id} in this account."),
    )
}

fn write_business(tx: &Transaction, b: &Business) -> Result<()> {
    tx.prepare_cached(
        "INSERT OR REPLACE INTO businesses (id, account_id, business_name, name_key, slug, deleted,
             partner_business_id, partner_sub_id, category_id, logo_image_id, user_id, added,
             added_date, modified)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
    )
    .and_then(|mut s| {
        s.execute(params![
            b.id,
            b.account_id,
            b.business_name,
            b.name_key(),
            b.slug,
            b.deleted,
            b.partner_business_id,
            b.partner_sub_id,
            b.category_id,
            b.logo_image_id,
            b.user_id,
            b.added,
            utc_date(b.added).to_string(),
            b.modified
        ])
    })
    .map(|_| ())
    .map_err(db_error)
}

fn fetch_business(
    conn: &Connection,
    account_id: i64,
    id: i64,
) -> rusqlite::Result<Option<Business>> {
    conn.prepare_cached(&format!(
        "SELECT {BUSINESS_COLUMNS} FROM businesses WHERE id = ?1 AND account_id = ?2"
    ))?
    .query_row(params![id, account_id], business_from_row)
    .optional()
}

#[async_trait]
impl KeyStore for SqliteStore {
    async fn ensure_account(&self, name: &str) -> Result<Account> {
        self.write(|tx| {
            let existing: Option<i64> = tx
                .query_row(
                    "SELECT id FROM accounts WHERE name = ?1",
                    params![name],
                    |r| r.get(0),
                )
                .optional()
                .map_err(db_error)?;
            let id = match existing {
                Some(id) => id,
                None => {
                    let id = next_id(tx, "account")?;
                    tx.execute(
                        "INSERT INTO accounts (id, name) VALUES (?1, ?2)",
                        params![id, name],
                    )
                    .map_err(db_error)?;
                    id
                }
            };
            Ok(Account {
                id,
                name: name.to_string(),
            })
        })
    }

    async fn create_key(&self, new: NewKey) -> Result<ApiKey> {
        self.write(|tx| {
            let user_id = match new.user_id {
                Some(id) => id,
                None => next_id(tx, "user")?,
            };
            tx.execute(
                &format!("INSERT INTO api_keys ({KEY_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, 0, ?6)"),
                params![
                    new.key,
                    new.secret,
                    new.account_id,
                    user_id,
                    new.partner_sub_id,
                    new.created
                ],
            )
            .map_err(db_error)?;
            Ok(ApiKey {
                key: new.key,
                secret: new.secret,
                account_id: new.account_id,
                user_id,
                partner_sub_id: new.partner_sub_id,
                revoked: false,
                created: new.created,
            })
        })
    }

    async fn get_key(&self, key: &str) -> Result<Option<ApiKey>> {
        self.read(|conn| {
            conn.prepare_cached(&format!(
                "SELECT {KEY_COLUMNS} FROM api_keys WHERE key = ?1"
            ))?
            .query_row(params![key], key_from_row)
            .optional()
        })
    }

    async fn list_keys(&self) -> Result<Vec<ApiKey>> {
        self.read(|conn| {
            conn.prepare(&format!(
                "SELECT {KEY_COLUMNS} FROM api_keys ORDER BY created, key"
            ))?
            .query_map([], key_from_row)?
            .collect()
        })
    }

    async fn revoke_key(&self, key: &str) -> Result<bool> {
        self.write(|tx| {
            tx.execute(
                "UPDATE api_keys SET revoked = 1 WHERE key = ?1",
                params![key],
            )
            .map(|n| n > 0)
            .map_err(db_error)
        })
    }

    async fn remember_nonce(
        &self,
        key: &str,
        nonce: &str,
        now: i64,
        expires_at: i64,
    ) -> Result<bool> {
        self.nonce_recorder()
            .await?
            .remember(key, nonce, now, expires_at)
            .await
    }

    async fn prepare_nonce_memory(&self) -> Result<()> {
        self.nonce_recorder().await.map(|_| ())
    }
}

#[async_trait]
impl BusinessStore for SqliteStore {
    async fn create_business(
        &self,
        account_id: i64,
        new: NewBusiness,
        now: i64,
    ) -> Result<Business> {
        self.write(|tx| {
            if let Some(logo) = new.logo_image_id {
                if !image_exists(tx, account_id, logo, None)? {
                    return Err(no_such_logo(logo));
                }
            }
            let id = next_id(tx, "business")?;
            let business = new.into_business(id, account_id, now);
            write_business(tx, &business)?;
            add_to_counters(tx, account_id, "business", &business.scopes(), 1)?;
            Ok(business)
        })
    }

    async fn get_business(&self, account_id: i64, id: i64) -> Result<Option<Business>> {
        self.read(|conn| fetch_business(conn, account_id, id))
    }

    async fn update_business(
        &self,
        account_id: i64,
        id: i64,
        restrict_sub_id: Option<&str>,
        patch: BusinessPatch,
        now: i64,
    ) -> Result<Option<Business>> {
        self.write(|tx| {
            let Some(mut business) = fetch_business(tx, account_id, id).map_err(db_error)? else {
                return Ok(None);
            };
            if !business.visible_to(restrict_sub_id) {
                return Ok(None);
            }
            // Only a new logo is checked: a client writing back the object it read keeps a
            // logo it may not see (set by an unrestricted key).
            if let Some(Some(logo)) = patch.logo_image_id {
                if business.logo_image_id != Some(logo)
                    && !image_exists(tx, account_id, logo, restrict_sub_id)?
                {
                    return Err(no_such_logo(logo));
                }
            }
            let before = business.scopes();
            if business.apply(&patch, now) {
                write_business(tx, &business)?;
                let after = business.scopes();
                let left: Vec<String> = before
                    .iter()
                    .filter(|s| !after.contains(s))
                    .cloned()
                    .collect();
                let joined: Vec<String> = after
                    .iter()
                    .filter(|s| !before.contains(s))
                    .cloned()
                    .collect();
                add_to_counters(tx, account_id, "business", &left, -1)?;
                add_to_counters(tx, account_id, "business", &joined, 1)?;
            }
            Ok(Some(business))
        })
    }

    async fn list_businesses(
        &self,
        account_id: i64,
        query: &BusinessQuery,
    ) -> Result<Page<Business>> {
        let filter = &query.filter;
        let mut sql = format!("SELECT {BUSINESS_COLUMNS} FROM businesses WHERE account_id = ?");
        let mut args: Vec<rusqlite::types::Value> = vec![account_id.into()];
        if let Some(deleted) = filter.deleted {
            sql.push_str(" AND deleted = ?");
            args.push(i64::from(deleted).into());
        }
        if let Some(sub) = &filter.partner_sub_id {
            sql.push_str(" AND partner_sub_id = ?");
            args.push(sub.clone().into());
        }
        if let Some(day) = filter.added_date {
            sql.push_str(" AND added_date = ?");
            args.push(day.to_string().into());
        }
        if let Some(pbid) = &filter.partner_business_id {
            sql.push_str(" AND partner_business_id = ?");
            args.push(pbid.clone().into());
        }
        sql.push_str(match query.order {
            BusinessOrder::IdAsc => " ORDER BY id",
            BusinessOrder::IdDesc => " ORDER BY id DESC",
            BusinessOrder::NameAsc => " ORDER BY name_key, id",
            BusinessOrder::NameDesc => " ORDER BY name_key DESC, id DESC",
        });
        sql.push_str(" LIMIT ? OFFSET ?");
        args.push(clamp_i64(query.limit).into());
        args.push(clamp_i64(query.offset).into());
        let scope = filter.scope();
        let offset = query.offset;
        self.read(|conn| {
            let total_count = counter(conn, account_id, "business", &scope)?;
            // SQLite steps over every skipped row: a page past the end is answered from
            // the counter alone.
            if offset >= total_count {
                return Ok(Page {
                    items: Vec::new(),
                    total_count,
                });
            }
            let items = conn
                .prepare_cached(&sql)?
                .query_map(rusqlite::params_from_iter(args), business_from_row)?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            Ok(Page { items, total_count })
        })
    }
}

fn clamp_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[async_trait]
impl ImageStore for SqliteStore {
    async fn allocate_image_id(&self) -> Result<i64> {
        self.write(|tx| next_id(tx, "image"))
    }

    async fn create_image(&self, account_id: i64, new: NewImage, now: i64) -> Result<Image> {
        self.write(|tx| {
            if let Some(business_id) = new.business_id {
                let business = fetch_business(tx, account_id, business_id).map_err(db_error)?;
                if business.is_none_or(|b| b.partner_sub_id != new.partner_sub_id) {
                    return Err(ApiError::field(
                        "business_id",
                        format!("There is no business {business_id} in this account."),
                    ));
                }
            }
            let id = match new.id {
                Some(id) => {
                    let barred = tx
                        .prepare_cached("SELECT 1 FROM barred_image_ids WHERE id = ?1")
                        .and_then(|mut s| s.exists(params![id]))
                        .map_err(db_error)?;
                    if barred {
                        return Err(ApiError::internal(format!(
                            "image id {id} was settled as never recorded"
                        )));
                    }
                    id
                }
                None => next_id(tx, "image")?,
            };
            let image = new.into_image(id, account_id, now);
            tx.prepare_cached(&format!(
                "INSERT INTO images ({IMAGE_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)"
            ))
            .and_then(|mut s| {
                s.execute(params![
                    image.id,
                    image.account_id,
                    image.path,
                    image.mimetype,
                    image.width,
                    image.height,
                    image.site_id,
                    image.business_id,
                    image.user_id,
                    image.added,
                    image.modified,
                    image.partner_sub_id
                ])
            })
            .map_err(db_error)?;
            add_to_counters(tx, account_id, "image", &image.scopes(), 1)?;
            Ok(image)
        })
    }

    async fn get_image(&self, account_id: i64, id: i64) -> Result<Option<Image>> {
        self.read(|conn| {
            conn.prepare_cached(&format!(
                "SELECT {IMAGE_COLUMNS} FROM images WHERE id = ?1 AND account_id = ?2"
            ))?
            .query_row(params![id, account_id], image_from_row)
            .optional()
        })
    }

    async fn list_images(&self, account_id: i64, query: &ImageQuery) -> Result<Page<Image>> {
        let mut sql = format!("SELECT {IMAGE_COLUMNS} FROM images WHERE account_id = ?");
        let mut args: Vec<rusqlite::types::Value> = vec![account_id.into()];
        if let Some(site) = query.filter.site_id {
            sql.push_str(" AND site_id = ?");
            args.push(site.into());
        }
        if let Some(business) = query.filter.business_id {
            sql.push_str(" AND business_id = ?");
            args.push(business.into());
        }
        if let Some(sub) = &query.filter.partner_sub_id {
            sql.push_str(" AND partner_sub_id = ?");
            args.push(sub.clone().into());
        }
        sql.push_str(if query.descending {
            " ORDER BY id DESC"
        } else {
            " ORDER BY id"
        });
        sql.push_str(" LIMIT ? OFFSET ?");
        args.push(clamp_i64(query.limit).into());
        args.push(clamp_i64(query.offset).into());
        let scope = query.filter.scope();
        let offset = query.offset;
        self.read(|conn| {
            let total_count = counter(conn, account_id, "image", &scope)?;
            // SQLite steps over every skipped row: a page past the end is answered from
            // the counter alone.
            if offset >= total_count {
                return Ok(Page {
                    items: Vec::new(),
                    total_count,
                });
            }
            let items = conn
                .prepare_cached(&sql)?
                .query_map(rusqlite::params_from_iter(args), image_from_row)?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            Ok(Page { items, total_count })
        })
    }

    async fn find_image_any_account(&self, id: i64) -> Result<Option<Image>> {
        self.read(|conn| fetch_image(conn, id))
    }

    async fn settle_image(&self, id: i64) -> Result<Option<Image>> {
        self.write(|tx| {
            if let Some(image) = fetch_image(tx, id).map_err(db_error)? {
                return Ok(Some(image));
            }
            tx.execute(
                "INSERT OR IGNORE INTO barred_image_ids (id) VALUES (?1)",
                params![id],
            )
            .map_err(db_error)?;
            Ok(None)
        })
    }
}

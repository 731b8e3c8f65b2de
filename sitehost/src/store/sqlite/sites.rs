//! Sites and blog posts: a write is one transaction with its scope counters (every scope
//! of `store::sites`, counted or listed on DynamoDB, has a counter here). What an active
//! site holds (`store::sites::Holdings`) is rows of `site_hosts` (one host belongs to one
//! account's active sites) and `site_paths` (one bare host and directory to one active
//! site). Writes are serialised (one writer, immediate transactions), so the
//! check and the claim cannot be raced.

use async_trait::async_trait;
use rusqlite::types::Value as SqlValue;
use rusqlite::{params, Connection, OptionalExtension, Row, Transaction};

use super::{
    add_to_counters, clamp_i64, counter, db_error, is_unique_violation, next_id, ListQuery,
    SqliteStore,
};
use crate::clock::utc_date;
use crate::domain::post::{NewPost, PageBytes, Post, PostPatch, PostQuery};
use crate::domain::site::{
    title_key, Address, NewSite, Site, SiteKeyFilter, SiteOrder, SitePatch, SiteQuery,
};
use crate::error::{ApiError, Result};
use crate::store::held_key::Created;
use crate::store::rules::ScopeChange;
use crate::store::sites::{
    address_in_use, check_write_size, host_in_use, post_scope, site_filter_scope, site_scopes,
    Holdings,
};
use crate::store::{Page, PostStore, SiteStore};

/// The tables, made as the store opens.
pub(super) const SCHEMA: &str = r#"
CREATE TABLE IF NOT EXISTS sites (
    id INTEGER PRIMARY KEY, account_id INTEGER NOT NULL, business_id INTEGER NOT NULL,
    user_id INTEGER NOT NULL, domain TEXT NOT NULL, subdomain TEXT NOT NULL,
    base_directory TEXT NOT NULL, address_key TEXT NOT NULL, title TEXT NOT NULL,
    title_key TEXT NOT NULL, partner_site_id TEXT, partner_sub_id TEXT, partner_user_id TEXT,
    theme_id INTEGER, deleted INTEGER NOT NULL, published INTEGER NOT NULL,
    www_primary INTEGER NOT NULL, location_ids TEXT NOT NULL, added INTEGER NOT NULL,
    added_date TEXT NOT NULL, modified INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS sites_by_account ON sites (account_id, id);
CREATE INDEX IF NOT EXISTS sites_by_title ON sites (account_id, title_key, id);
CREATE INDEX IF NOT EXISTS sites_by_business ON sites (account_id, business_id, id);
CREATE INDEX IF NOT EXISTS sites_by_domain ON sites (account_id, domain, id);
CREATE INDEX IF NOT EXISTS sites_by_address ON sites (account_id, address_key, id);
CREATE UNIQUE INDEX IF NOT EXISTS sites_active_address ON sites (address_key) WHERE deleted = 0;
CREATE TABLE IF NOT EXISTS site_hosts (
    host TEXT NOT NULL, site_id INTEGER NOT NULL, account_id INTEGER NOT NULL,
    PRIMARY KEY (host, site_id)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS site_hosts_by_site ON site_hosts (site_id);
CREATE TABLE IF NOT EXISTS site_paths (path TEXT PRIMARY KEY, site_id INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS site_paths_by_site ON site_paths (site_id);
CREATE TABLE IF NOT EXISTS site_locations (
    site_id INTEGER NOT NULL, location_id INTEGER NOT NULL, account_id INTEGER NOT NULL,
    PRIMARY KEY (site_id, location_id)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS site_locations_by_location ON site_locations (account_id, location_id, site_id);
CREATE TABLE IF NOT EXISTS posts (
    id INTEGER PRIMARY KEY, account_id INTEGER NOT NULL, site_id INTEGER NOT NULL,
    title TEXT NOT NULL, content TEXT NOT NULL, date INTEGER NOT NULL, added INTEGER NOT NULL,
    modified INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS posts_by_site ON posts (account_id, site_id, date, id);
"#;

const SITE_KIND: &str = "site";
const POST_KIND: &str = "post";

const SITE_COLUMNS: &str = "id, account_id, business_id, user_id, domain, subdomain, \
     base_directory, title, partner_site_id, partner_sub_id, partner_user_id, theme_id, \
     deleted, published, www_primary, location_ids, added, modified";

fn site_from_row(row: &Row) -> rusqlite::Result<Site> {
    let ids: String = row.get(15)?;
    let location_ids = serde_json::from_str(&ids).map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(15, rusqlite::types::Type::Text, Box::new(e))
    })?;
    Ok(Site {
        id: row.get(0)?,
        account_id: row.get(1)?,
        business_id: row.get(2)?,
        user_id: row.get(3)?,
        address: Address {
            domain: row.get(4)?,
            subdomain: row.get(5)?,
            base_directory: row.get(6)?,
        },
        title: row.get(7)?,
        partner_site_id: row.get(8)?,
        partner_sub_id: row.get(9)?,
        partner_user_id: row.get(10)?,
        theme_id: row.get(11)?,
        deleted: row.get(12)?,
        published: row.get(13)?,
        www_primary: row.get(14)?,
        location_ids,
        added: row.get(16)?,
        modified: row.get(17)?,
    })
}

fn fetch_site(conn: &Connection, account_id: i64, id: i64) -> rusqlite::Result<Option<Site>> {
    conn.prepare_cached(&format!(
        "SELECT {SITE_COLUMNS} FROM sites WHERE id = ?1 AND account_id = ?2"
    ))?
    .query_row(params![id, account_id], site_from_row)
    .optional()
}

/// Gives up what the site held and takes what it holds now: refused when another account's
/// active site is at one of its hosts (`host_in_use`), or another site at its path
/// (`address_in_use`), in that order, as on DynamoDB.
fn claim_holdings(tx: &Transaction, site: &Site) -> Result<()> {
    for table in ["site_hosts", "site_paths"] {
        tx.execute(
            &format!("DELETE FROM {table} WHERE site_id = ?1"),
            params![site.id],
        )
        .map_err(db_error)?;
    }
    let holdings = Holdings::of(Some(site));
    for host in &holdings.hosts {
        let other: Option<i64> = tx
            .prepare_cached(
                "SELECT account_id FROM site_hosts WHERE host = ?1 AND account_id != ?2 LIMIT 1",
            )
            .and_then(|mut q| {
                q.query_row(params![host, site.account_id], |r| r.get(0))
                    .optional()
            })
            .map_err(db_error)?;
        if other.is_some() {
            return Err(host_in_use(host));
        }
        tx.prepare_cached("INSERT INTO site_hosts (host, site_id, account_id) VALUES (?1, ?2, ?3)")
            .and_then(|mut q| q.execute(params![host, site.id, site.account_id]))
            .map_err(db_error)?;
    }
    if let Some(path) = &holdings.path {
        let written = tx
            .prepare_cached("INSERT INTO site_paths (path, site_id) VALUES (?1, ?2)")
            .and_then(|mut q| q.execute(params![path, site.id]));
        match written {
            Ok(_) => {}
            Err(err) if is_unique_violation(&err) => return Err(address_in_use(&site.address)),
            Err(err) => return Err(db_error(err)),
        }
    }
    Ok(())
}

/// Writes the site row, what it holds ([`claim_holdings`]) and its location rows; an active
/// site at another active site's address is `address_in_use`.
fn write_site(tx: &Transaction, site: &Site) -> Result<()> {
    claim_holdings(tx, site)?;
    let ids = serde_json::to_string(&site.location_ids)
        .map_err(|e| ApiError::from(anyhow::Error::new(e).context("sqlite: location ids")))?;
    let a = &site.address;
    // Not `INSERT OR REPLACE`: that would resolve a clash on the address index by deleting
    // the other site. The row goes, then comes back; a clash fails the transaction.
    tx.execute("DELETE FROM sites WHERE id = ?1", params![site.id])
        .map_err(db_error)?;
    let written = tx
        .prepare_cached(
            "INSERT INTO sites (id, account_id, business_id, user_id, domain,
                 subdomain, base_directory, address_key, title, title_key, partner_site_id,
                 partner_sub_id, partner_user_id, theme_id, deleted, published, www_primary,
                 location_ids, added, added_date, modified)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16,
                 ?17, ?18, ?19, ?20, ?21)",
        )
        .and_then(|mut s| {
            s.execute(params![
                site.id,
                site.account_id,
                site.business_id,
                site.user_id,
                a.domain,
                a.subdomain,
                a.base_directory,
                a.key(),
                site.title,
                title_key(&site.title),
                site.partner_site_id,
                site.partner_sub_id,
                site.partner_user_id,
                site.theme_id,
                site.deleted,
                site.published,
                site.www_primary,
                ids,
                site.added,
                utc_date(site.added).to_string(),
                site.modified
            ])
        });
    match written {
        Ok(_) => {}
        Err(err) if is_unique_violation(&err) => return Err(address_in_use(a)),
        Err(err) => return Err(db_error(err)),
    }
    tx.execute(
        "DELETE FROM site_locations WHERE site_id = ?1",
        params![site.id],
    )
    .map_err(db_error)?;
    let mut insert = tx
        .prepare_cached(
            "INSERT INTO site_locations (site_id, location_id, account_id) VALUES (?1, ?2, ?3)",
        )
        .map_err(db_error)?;
    for location in &site.location_ids {
        insert
            .execute(params![site.id, location, site.account_id])
            .map_err(db_error)?;
    }
    Ok(())
}

fn all_scopes(site: &Site) -> Vec<String> {
    let scopes = site_scopes(site);
    scopes.counted.into_iter().chain(scopes.listed).collect()
}

#[async_trait]
impl SiteStore for SqliteStore {
    async fn create_site(&self, account_id: i64, new: NewSite, now: i64) -> Result<Site> {
        self.write_created(
            |site: &Site| Created::Site(site.id),
            |tx| {
                let site = new.into_site(next_id(tx, "site")?, account_id, now);
                check_write_size(None, &site)?;
                write_site(tx, &site)?;
                add_to_counters(tx, account_id, SITE_KIND, all_scopes(&site), 1)?;
                Ok(site)
            },
        )
    }

    async fn get_site(&self, account_id: i64, id: i64) -> Result<Option<Site>> {
        self.read(|conn| fetch_site(conn, account_id, id))
    }

    async fn update_site(
        &self,
        account_id: i64,
        id: i64,
        restrict_sub_id: Option<&str>,
        patch: SitePatch,
        now: i64,
    ) -> Result<Option<Site>> {
        self.write(|tx| {
            let Some(mut site) = fetch_site(tx, account_id, id).map_err(db_error)? else {
                return Ok(None);
            };
            if !site.visible_to(restrict_sub_id) {
                return Ok(None);
            }
            let before = site.clone();
            if !site.apply(&patch, now) {
                return Ok(Some(site));
            }
            check_write_size(Some(&before), &site)?;
            write_site(tx, &site)?;
            let (then, after) = (all_scopes(&before), all_scopes(&site));
            let change = ScopeChange::between(&then, &after);
            add_to_counters(tx, account_id, SITE_KIND, change.left, -1)?;
            add_to_counters(tx, account_id, SITE_KIND, change.joined, 1)?;
            Ok(Some(site))
        })
    }

    async fn list_sites(&self, account_id: i64, query: &SiteQuery) -> Result<Page<Site>> {
        let filter = &query.filter;
        let mut sql = format!("SELECT {SITE_COLUMNS} FROM sites WHERE account_id = ?");
        let mut args: Vec<SqlValue> = vec![account_id.into()];
        let mut and = |clause: &str, value: SqlValue| {
            sql.push_str(clause);
            args.push(value);
        };
        if let Some(deleted) = filter.deleted {
            and(" AND deleted = ?", i64::from(deleted).into());
        }
        if let Some(sub) = &filter.partner_sub_id {
            and(" AND partner_sub_id = ?", sub.clone().into());
        }
        match &filter.key {
            None => {}
            Some(SiteKeyFilter::AddedDate(day)) => {
                and(" AND added_date = ?", day.to_string().into())
            }
            Some(SiteKeyFilter::Domain(domain)) => and(" AND domain = ?", domain.clone().into()),
            Some(SiteKeyFilter::Address(address)) => {
                and(" AND address_key = ?", address.key().into())
            }
            Some(SiteKeyFilter::Business(id)) => and(" AND business_id = ?", (*id).into()),
            Some(SiteKeyFilter::PartnerSiteId(id)) => {
                and(" AND partner_site_id = ?", id.clone().into())
            }
            Some(SiteKeyFilter::Location(id)) => and(
                " AND id IN (SELECT site_id FROM site_locations WHERE location_id = ?)",
                (*id).into(),
            ),
        }
        sql.push_str(match query.order {
            SiteOrder::IdAsc => " ORDER BY id",
            SiteOrder::IdDesc => " ORDER BY id DESC",
            SiteOrder::TitleAsc => " ORDER BY title_key, id",
            SiteOrder::TitleDesc => " ORDER BY title_key DESC, id DESC",
        });
        self.list_page(
            ListQuery {
                kind: SITE_KIND,
                account_id,
                scope: &site_filter_scope(filter).0,
                sql,
                args,
                limit: query.limit,
                offset: query.offset,
            },
            site_from_row,
        )
    }
}

const POST_COLUMNS: &str = "id, account_id, site_id, title, content, date, added, modified";

fn post_from_row(row: &Row) -> rusqlite::Result<Post> {
    Ok(Post {
        id: row.get(0)?,
        account_id: row.get(1)?,
        site_id: row.get(2)?,
        title: row.get(3)?,
        content: row.get(4)?,
        date: row.get(5)?,
        added: row.get(6)?,
        modified: row.get(7)?,
    })
}

fn fetch_post(conn: &Connection, account_id: i64, id: i64) -> rusqlite::Result<Option<Post>> {
    conn.prepare_cached(&format!(
        "SELECT {POST_COLUMNS} FROM posts WHERE id = ?1 AND account_id = ?2"
    ))?
    .query_row(params![id, account_id], post_from_row)
    .optional()
}

fn write_post(tx: &Transaction, p: &Post) -> Result<()> {
    tx.prepare_cached(
        "INSERT OR REPLACE INTO posts (id, account_id, site_id, title, content, date, added,
             modified) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )
    .and_then(|mut s| {
        s.execute(params![
            p.id,
            p.account_id,
            p.site_id,
            p.title,
            p.content,
            p.date,
            p.added,
            p.modified
        ])
    })
    .map(|_| ())
    .map_err(db_error)
}

#[async_trait]
impl PostStore for SqliteStore {
    async fn create_post(&self, account_id: i64, new: NewPost, now: i64) -> Result<Post> {
        self.write_created(
            |post: &Post| Created::Post(post.id),
            |tx| {
                let post = new.into_post(next_id(tx, "post")?, account_id, now);
                write_post(tx, &post)?;
                add_to_counters(tx, account_id, POST_KIND, [post_scope(post.site_id)], 1)?;
                Ok(post)
            },
        )
    }

    async fn get_post(&self, account_id: i64, id: i64) -> Result<Option<Post>> {
        self.read(|conn| fetch_post(conn, account_id, id))
    }

    async fn update_post(
        &self,
        account_id: i64,
        id: i64,
        patch: PostPatch,
        now: i64,
    ) -> Result<Option<Post>> {
        self.write(|tx| {
            let Some(mut post) = fetch_post(tx, account_id, id).map_err(db_error)? else {
                return Ok(None);
            };
            if post.apply(&patch, now) {
                write_post(tx, &post)?;
            }
            Ok(Some(post))
        })
    }

    /// Reads rows one at a time and stops before the post that would pass the page's bytes
    /// (`PostQuery::max_bytes`), so a page of large posts never holds more in memory.
    async fn list_posts(&self, account_id: i64, query: &PostQuery) -> Result<Page<Post>> {
        let scope = post_scope(query.site_id);
        self.read(|conn| {
            let total_count = counter(conn, account_id, POST_KIND, &scope)?;
            if query.offset >= total_count {
                return Ok(Page {
                    items: Vec::new(),
                    total_count,
                });
            }
            let mut statement = conn.prepare_cached(&format!(
                "SELECT {POST_COLUMNS} FROM posts WHERE account_id = ?1 AND site_id = ?2 \
                 ORDER BY date DESC, id DESC LIMIT ?3 OFFSET ?4"
            ))?;
            let mut rows = statement.query(params![
                account_id,
                query.site_id,
                clamp_i64(query.limit),
                clamp_i64(query.offset)
            ])?;
            let mut bytes = PageBytes::new(query.max_bytes);
            let mut items = Vec::new();
            while let Some(row) = rows.next()? {
                let post = post_from_row(row)?;
                if !bytes.admit(&post) {
                    break;
                }
                items.push(post);
            }
            Ok(Page { items, total_count })
        })
    }
}

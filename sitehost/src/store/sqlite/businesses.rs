//! Businesses: a create or an update is one transaction with its scope counters.

use async_trait::async_trait;
use rusqlite::{params, Connection, OptionalExtension, Transaction};

use super::rows::{
    business_columns, business_from_row, fetch_business, image_exists, image_sub_id,
    BUSINESS_COLUMNS, BUSINESS_COLUMN_COUNT,
};
use super::{add_to_counters, db_error, next_id, ListQuery, SqliteStore};
use crate::clock::utc_date;
use crate::domain::business::{
    Business, BusinessDetail, BusinessOrder, BusinessPatch, BusinessQuery, NewBusiness,
};
use crate::domain::location::Location;
use crate::error::{ApiError, Result};
use crate::store::held_key::Created;
use crate::store::rules::{self, ScopeChange};
use crate::store::{scope, BusinessStore, Page};

/// The counters' kind for businesses.
const KIND: &str = "business";

/// A business (by id, in its account), its services and whether it has locations.
const DETAIL_SQL: &str = concat!(
    "SELECT ",
    business_columns!(),
    ", (SELECT services FROM business_services WHERE business_id = businesses.id), \
     EXISTS (SELECT 1 FROM locations WHERE business_id = businesses.id) \
     FROM businesses WHERE id = ?1 AND account_id = ?2"
);

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
            scope::name_key(b),
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

fn stored_json(what: &str, err: serde_json::Error) -> ApiError {
    ApiError::from(anyhow::Error::new(err).context(format!("sqlite: stored {what}")))
}

/// Takes `n` ids of the location sequence.
fn location_ids(tx: &Transaction, n: usize) -> Result<Vec<i64>> {
    (0..n).map(|_| next_id(tx, "location")).collect()
}

/// Writes a business's services and locations as they now are (replacing what it had).
fn write_details(tx: &Transaction, detail: &BusinessDetail) -> Result<()> {
    let b = &detail.business;
    if detail.services.is_empty() {
        tx.execute(
            "DELETE FROM business_services WHERE business_id = ?1",
            params![b.id],
        )
    } else {
        let services =
            serde_json::to_string(&detail.services).map_err(|e| stored_json("services", e))?;
        tx.execute(
            "INSERT OR REPLACE INTO business_services (business_id, services) VALUES (?1, ?2)",
            params![b.id, services],
        )
    }
    .map_err(db_error)?;
    tx.execute(
        "DELETE FROM locations WHERE business_id = ?1",
        params![b.id],
    )
    .map_err(db_error)?;
    let mut insert = tx
        .prepare_cached(
            "INSERT INTO locations (id, account_id, business_id, position, fields)
             VALUES (?1, ?2, ?3, ?4, ?5)",
        )
        .map_err(db_error)?;
    for (position, location) in detail.locations.iter().enumerate() {
        // The row's id column holds the id; `fields` the rest (fields and timestamps).
        let mut stored = serde_json::to_value(location).map_err(|e| stored_json("location", e))?;
        if let Some(map) = stored.as_object_mut() {
            map.remove("id");
        }
        let fields = stored.to_string();
        insert
            .execute(params![
                location.id,
                b.account_id,
                b.id,
                position as i64,
                fields
            ])
            .map_err(db_error)?;
    }
    Ok(())
}

/// The business with its services and locations (in the order they were given). One
/// statement reads the business, its services and whether it has locations; the locations
/// are a second one, only for a business that has some.
fn fetch_detail(conn: &Connection, account_id: i64, id: i64) -> Result<Option<BusinessDetail>> {
    let found = conn
        .prepare_cached(DETAIL_SQL)
        .and_then(|mut s| {
            s.query_row(params![id, account_id], |row| {
                let business = business_from_row(row)?;
                let services: Option<String> = row.get(BUSINESS_COLUMN_COUNT)?;
                let has_locations: bool = row.get(BUSINESS_COLUMN_COUNT + 1)?;
                Ok((business, services, has_locations))
            })
            .optional()
        })
        .map_err(db_error)?;
    let Some((business, services, has_locations)) = found else {
        return Ok(None);
    };
    let services = match services {
        Some(text) => serde_json::from_str(&text).map_err(|e| stored_json("services", e))?,
        None => Vec::new(),
    };
    let rows: Vec<(i64, String)> = if has_locations {
        conn.prepare_cached(
            "SELECT id, fields FROM locations WHERE business_id = ?1 ORDER BY position",
        )
        .and_then(|mut s| {
            s.query_map(params![id], |row| Ok((row.get(0)?, row.get(1)?)))?
                .collect()
        })
        .map_err(db_error)?
    } else {
        Vec::new()
    };
    let mut locations = Vec::with_capacity(rows.len());
    for (location_id, fields) in rows {
        let mut stored: serde_json::Value =
            serde_json::from_str(&fields).map_err(|e| stored_json("location", e))?;
        if let Some(map) = stored.as_object_mut() {
            map.insert("id".into(), location_id.into());
        }
        let location: Location =
            serde_json::from_value(stored).map_err(|e| stored_json("location", e))?;
        locations.push(location);
    }
    Ok(Some(BusinessDetail {
        business,
        services,
        locations,
    }))
}

/// A logo must be an image of the account that the key may see, of the business's sub id
/// or of none (`rules::logo_fits`).
fn check_logo(
    tx: &Transaction,
    account_id: i64,
    logo: i64,
    business_sub: Option<&str>,
    restrict_sub_id: Option<&str>,
) -> Result<()> {
    if !image_exists(tx, account_id, logo, restrict_sub_id)? {
        return Err(rules::no_such_logo(logo));
    }
    match image_sub_id(tx, account_id, logo)? {
        Some(image_sub) if rules::logo_fits(image_sub.as_deref(), business_sub) => Ok(()),
        Some(_) => Err(rules::logo_of_another_sub_id(logo)),
        None => Err(rules::no_such_logo(logo)),
    }
}

impl SqliteStore {
    /// Recomputes every business's `name_key` (stores written before names sorted
    /// accent-insensitively: `sitehost businesses rekey-names`). One transaction;
    /// idempotent. Returns the number of businesses whose key changed.
    pub fn rekey_business_names(&self) -> Result<u64> {
        self.write(|tx| {
            let rows: Vec<(i64, String, String)> = tx
                .prepare("SELECT id, business_name, name_key FROM businesses")
                .and_then(|mut s| {
                    s.query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))?
                        .collect()
                })
                .map_err(db_error)?;
            let mut changed = 0;
            for (id, name, old) in rows {
                let key = crate::domain::collation::sort_key(&name);
                if key != old {
                    tx.execute(
                        "UPDATE businesses SET name_key = ?1 WHERE id = ?2",
                        params![key, id],
                    )
                    .map_err(db_error)?;
                    changed += 1;
                }
            }
            Ok(changed)
        })
    }
}

#[async_trait]
impl BusinessStore for SqliteStore {
    async fn create_business(
        &self,
        account_id: i64,
        new: NewBusiness,
        now: i64,
    ) -> Result<BusinessDetail> {
        let created = |detail: &BusinessDetail| Created::Business(detail.business.id);
        self.write_created(created, |tx| {
            if let Some(logo) = new.logo_image_id {
                check_logo(tx, account_id, logo, new.partner_sub_id.as_deref(), None)?;
            }
            let id = next_id(tx, "business")?;
            let ids = location_ids(tx, new.locations.len())?;
            let detail = new.into_detail(id, account_id, now, &mut ids.into_iter())?;
            write_business(tx, &detail.business)?;
            write_details(tx, &detail)?;
            add_to_counters(
                tx,
                account_id,
                KIND,
                scope::business_scopes(&detail.business),
                1,
            )?;
            Ok(detail)
        })
    }

    async fn get_business(&self, account_id: i64, id: i64) -> Result<Option<Business>> {
        self.read(|conn| fetch_business(conn, account_id, id))
    }

    async fn get_business_detail(
        &self,
        account_id: i64,
        id: i64,
    ) -> Result<Option<BusinessDetail>> {
        self.read_checked(|conn| fetch_detail(conn, account_id, id))
    }

    async fn update_business(
        &self,
        account_id: i64,
        id: i64,
        restrict_sub_id: Option<&str>,
        patch: BusinessPatch,
        now: i64,
    ) -> Result<Option<BusinessDetail>> {
        self.write(|tx| {
            let Some(mut detail) = fetch_detail(tx, account_id, id)? else {
                return Ok(None);
            };
            if !detail.business.visible_to(restrict_sub_id) {
                return Ok(None);
            }
            let before = detail.clone();
            let ids = location_ids(tx, detail.ids_needed(&patch))?;
            if !detail.apply(&patch, now, &mut ids.into_iter())? {
                // The ids taken stay unused, as after a failed create.
                return Ok(Some(detail));
            }
            let business = &detail.business;
            if let Some(logo) = rules::new_logo(&before.business, business) {
                let business_sub = business.partner_sub_id.as_deref();
                check_logo(tx, account_id, logo, business_sub, restrict_sub_id)?;
            }
            write_business(tx, business)?;
            if (&before.services, &before.locations) != (&detail.services, &detail.locations) {
                write_details(tx, &detail)?;
            }
            let (before, after) = (
                scope::business_scopes(&before.business),
                scope::business_scopes(business),
            );
            let change = ScopeChange::between(&before, &after);
            add_to_counters(tx, account_id, KIND, change.left, -1)?;
            add_to_counters(tx, account_id, KIND, change.joined, 1)?;
            Ok(Some(detail))
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
        self.list_page(
            ListQuery {
                kind: KIND,
                account_id,
                scope: &scope::business_filter_scope(filter),
                sql,
                args,
                limit: query.limit,
                offset: query.offset,
            },
            business_from_row,
        )
    }
}

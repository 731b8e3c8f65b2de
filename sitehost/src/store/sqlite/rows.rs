//! Businesses and images as rows: the columns statements select, in the order the
//! `*_from_row` functions read them, and the lookups a write of one kind makes of the other
//! (an image's business, a business's logo image). Below both record modules, so neither
//! imports the other.

use rusqlite::{params, Connection, OptionalExtension, Row, Transaction};

use super::db_error;
use crate::domain::business::Business;
use crate::domain::image_record::Image;
use crate::error::Result;

/// The columns [`business_from_row`] reads, in its order (a macro, so that statements can
/// be put together with `concat!` at compile time).
macro_rules! business_columns {
    () => {
        "id, account_id, business_name, slug, deleted, partner_business_id, \
         partner_sub_id, category_id, logo_image_id, user_id, added, modified"
    };
}
pub(super) use business_columns;

pub(super) const BUSINESS_COLUMNS: &str = business_columns!();

/// How many columns [`BUSINESS_COLUMNS`] names: what a query selects after them starts here.
pub(super) const BUSINESS_COLUMN_COUNT: usize = 12;

pub(super) fn business_from_row(row: &Row) -> rusqlite::Result<Business> {
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

/// The business by id, in its account.
pub(super) fn fetch_business(
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

pub(super) const IMAGE_COLUMNS: &str =
    "id, account_id, path, mimetype, width, height, site_id, business_id, \
     user_id, added, modified, partner_sub_id";

pub(super) fn image_from_row(row: &Row) -> rusqlite::Result<Image> {
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

/// Whether the image exists in the account and, with `restrict_sub_id`, has that sub id.
pub(super) fn image_exists(
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

/// The sub id of an image of the account: `None` when there is no such image.
pub(super) fn image_sub_id(
    tx: &Transaction,
    account_id: i64,
    image_id: i64,
) -> Result<Option<Option<String>>> {
    tx.prepare_cached("SELECT partner_sub_id FROM images WHERE id = ?1 AND account_id = ?2")
        .and_then(|mut s| {
            s.query_row(params![image_id, account_id], |row| row.get(0))
                .optional()
        })
        .map_err(db_error)
}

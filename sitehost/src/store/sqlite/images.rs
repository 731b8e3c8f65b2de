//! Images: a create is one transaction with its scope counters; barred ids stay barred.

use async_trait::async_trait;
use rusqlite::{params, Connection, OptionalExtension};

use super::rows::{fetch_business, image_from_row, IMAGE_COLUMNS};
use super::{add_to_counters, db_error, next_id, ListQuery, SqliteStore};
use crate::domain::image_record::{Image, ImageQuery, NewImage};
use crate::error::{ApiError, Result};
use crate::store::held_key::Created;
use crate::store::{rules, scope, ImageStore, Page};

/// The counters' kind for images.
const KIND: &str = "image";

fn fetch_image(conn: &Connection, id: i64) -> rusqlite::Result<Option<Image>> {
    conn.prepare_cached(&format!("SELECT {IMAGE_COLUMNS} FROM images WHERE id = ?1"))?
        .query_row(params![id], image_from_row)
        .optional()
}

#[async_trait]
impl ImageStore for SqliteStore {
    async fn allocate_image_id(&self) -> Result<i64> {
        self.write(|tx| next_id(tx, "image"))
    }

    async fn create_image(&self, account_id: i64, new: NewImage, now: i64) -> Result<Image> {
        self.write_created(|image: &Image| Created::Image(image.id), |tx| {
            if let Some(business_id) = new.business_id {
                let business = fetch_business(tx, account_id, business_id).map_err(db_error)?;
                if business.is_none_or(|b| b.partner_sub_id != new.partner_sub_id) {
                    return Err(rules::no_such_business(business_id));
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
            add_to_counters(tx, account_id, KIND, scope::image_scopes(&image), 1)?;
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
        self.list_page(
            ListQuery {
                kind: KIND,
                account_id,
                scope: &scope::image_filter_scope(&query.filter),
                sql,
                args,
                limit: query.limit,
                offset: query.offset,
            },
            image_from_row,
        )
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

    /// One write transaction (writes are serialized, so no business can take the image as
    /// its logo between the check and the delete): the logo check, the row, its counters,
    /// and the id barred like a settled one.
    async fn delete_image(
        &self,
        account_id: i64,
        id: i64,
        restrict_sub_id: Option<&str>,
    ) -> Result<Option<Image>> {
        self.write(|tx| {
            let Some(image) = fetch_image(tx, id)
                .map_err(db_error)?
                .filter(|image| image.account_id == account_id)
                .filter(|image| image.visible_to(restrict_sub_id))
            else {
                return Ok(None);
            };
            let logo_of: Option<i64> = tx
                .prepare_cached(
                    "SELECT id FROM businesses WHERE logo_image_id = ?1 AND account_id = ?2
                     ORDER BY id LIMIT 1",
                )
                .and_then(|mut s| {
                    s.query_row(params![id, account_id], |row| row.get(0))
                        .optional()
                })
                .map_err(db_error)?;
            if let Some(business_id) = logo_of {
                let business = fetch_business(tx, account_id, business_id)
                    .map_err(db_error)?
                    .ok_or_else(|| ApiError::internal("the logo's business vanished"))?;
                return Err(rules::image_is_logo(id, &business, restrict_sub_id));
            }
            tx.execute("DELETE FROM images WHERE id = ?1", params![id])
                .map_err(db_error)?;
            tx.execute(
                "INSERT OR IGNORE INTO barred_image_ids (id) VALUES (?1)",
                params![id],
            )
            .map_err(db_error)?;
            add_to_counters(tx, account_id, KIND, scope::image_scopes(&image), -1)?;
            Ok(Some(image))
        })
    }
}

//! Staged uploads' sessions in the embedded store: one row each, kept until a day after
//! the form expires (`UPLOAD_SESSION_KEPT_SECS`), swept a few at a time as new ones come.

use async_trait::async_trait;
use rusqlite::{params, OptionalExtension};

use super::{db_error, SqliteStore};
use crate::error::Result;
use crate::store::{UploadSession, UploadSessionStore, UPLOAD_SESSION_KEPT_SECS};

/// Rows past their keeping removed by each new session: the table stays bounded by the
/// sessions of the last day, at no more than this much work per session.
const SWEEP_PER_SESSION: i64 = 16;

#[async_trait]
impl UploadSessionStore for SqliteStore {
    async fn create_upload_session(&self, session: &UploadSession, now: i64) -> Result<()> {
        self.write(|tx| {
            tx.execute(
                "DELETE FROM upload_sessions WHERE upload_id IN (SELECT upload_id FROM
                 upload_sessions WHERE kept_until <= ?1 ORDER BY kept_until LIMIT ?2)",
                params![now, SWEEP_PER_SESSION],
            )
            .map_err(db_error)?;
            tx.execute(
                "INSERT INTO upload_sessions (upload_id, account_id, partner_sub_id, name,
                 size, expires_at, used, kept_until) VALUES (?1, ?2, ?3, ?4, ?5, ?6, 0, ?7)",
                params![
                    session.upload_id,
                    session.account_id,
                    session.partner_sub_id,
                    session.name,
                    i64::try_from(session.size).unwrap_or(i64::MAX),
                    session.expires_at,
                    session.expires_at + UPLOAD_SESSION_KEPT_SECS
                ],
            )
            .map_err(db_error)?;
            Ok(())
        })
    }

    async fn get_upload_session(&self, upload_id: &str, now: i64) -> Result<Option<UploadSession>> {
        self.read(|conn| {
            conn.query_row(
                "SELECT account_id, partner_sub_id, name, size, expires_at, used
                 FROM upload_sessions WHERE upload_id = ?1 AND kept_until > ?2",
                params![upload_id, now],
                |row| {
                    Ok(UploadSession {
                        upload_id: upload_id.to_string(),
                        account_id: row.get(0)?,
                        partner_sub_id: row.get(1)?,
                        name: row.get(2)?,
                        size: u64::try_from(row.get::<_, i64>(3)?).unwrap_or_default(),
                        expires_at: row.get(4)?,
                        used: row.get(5)?,
                    })
                },
            )
            .optional()
        })
    }

    async fn use_upload_session(&self, upload_id: &str) -> Result<bool> {
        self.write(|tx| {
            let changed = tx
                .execute(
                    "UPDATE upload_sessions SET used = 1 WHERE upload_id = ?1 AND used = 0",
                    params![upload_id],
                )
                .map_err(db_error)?;
            Ok(changed == 1)
        })
    }

    async fn release_upload_session(&self, upload_id: &str) -> Result<()> {
        self.write(|tx| {
            tx.execute(
                "UPDATE upload_sessions SET used = 0 WHERE upload_id = ?1",
                params![upload_id],
            )
            .map_err(db_error)?;
            Ok(())
        })
    }
}

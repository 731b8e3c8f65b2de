//! Accounts and API keys; the nonce memory lives in `nonces`.

use async_trait::async_trait;
use rusqlite::{params, OptionalExtension, Row};

use super::{db_error, is_unique_violation, next_id, SqliteStore};
use crate::domain::account::{Account, ApiKey, NewKey};
use crate::error::{ApiError, Result};
use crate::store::KeyStore;

const KEY_COLUMNS: &str = "key, secret, account_id, user_id, partner_sub_id, revoked, created";

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
            .map_err(|e| {
                if is_unique_violation(&e) {
                    ApiError::Conflict { field: "key" }
                } else {
                    db_error(e)
                }
            })?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_repeated_key_is_a_conflict() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = SqliteStore::open(dir.path()).expect("open");
        let account = store.ensure_account("acme").await.expect("account");
        let new = NewKey {
            key: "key-one".into(),
            secret: "secret".into(),
            account_id: account.id,
            user_id: None,
            partner_sub_id: None,
            created: 1,
        };
        store.create_key(new.clone()).await.expect("first");
        match store.create_key(new).await {
            Err(ApiError::Conflict { field: "key" }) => {}
            other => panic!("expected a conflict on key, got {other:?}"),
        }
    }
}

//! `Idempotency-Key`s of the embedded store: one row per account, API key and key, claimed
//! and answered in write transactions (one writer, so a claim is atomic). A create answers
//! the key its request holds in its own transaction ([`SqliteStore::write_created`]).

use async_trait::async_trait;
use rusqlite::{params, OptionalExtension};

use super::{db_error, SqliteStore};
use crate::error::Result;
use crate::store::held_key::{self, Created, HeldKey};
use crate::store::{
    IdempotencyClaim, IdempotencyKey, IdempotencyStore, StoredAnswer, IDEMPOTENCY_KEY_SECS,
    IDEMPOTENCY_LEASE_SECS,
};

/// Expired rows removed by each claim: the table stays bounded by the keys of the last
/// day, at no more than this much work per request.
const SWEEP_PER_CLAIM: i64 = 16;

/// A stored key as a claim finds it.
struct Held {
    fingerprint: String,
    lease_until: i64,
    answer: Option<StoredAnswer>,
}

/// The unexpired row of `key`, if there is one.
fn held_key(
    tx: &rusqlite::Transaction,
    key: &IdempotencyKey<'_>,
    now: i64,
) -> Result<Option<Held>> {
    let held = tx
        .query_row(
            "SELECT fingerprint, lease_until, expires_at, status, location
             FROM idempotency_records
             WHERE account_id = ?1 AND api_key = ?2 AND key = ?3",
            params![key.account_id, key.api_key, key.value],
            |row| {
                let expires_at: i64 = row.get(2)?;
                let status: Option<u16> = row.get(3)?;
                // `location`: the column keeps the name it was first stored under.
                let created_uri: Option<String> = row.get(4)?;
                let held = Held {
                    fingerprint: row.get(0)?,
                    lease_until: row.get(1)?,
                    answer: status
                        .zip(created_uri)
                        .map(|(status, created_uri)| StoredAnswer {
                            status,
                            created_uri,
                        }),
                };
                Ok((expires_at > now).then_some(held))
            },
        )
        .optional()
        .map_err(db_error)?;
    Ok(held.flatten())
}

/// Writes a fresh claim of `key` for `fingerprint`, over an expired row.
fn insert_claim(
    tx: &rusqlite::Transaction,
    key: &IdempotencyKey<'_>,
    fingerprint: &str,
    now: i64,
) -> Result<()> {
    tx.execute(
        "INSERT INTO idempotency_records (account_id, api_key, key, fingerprint,
         lease_until, expires_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT (account_id, api_key, key) DO UPDATE SET
         fingerprint = excluded.fingerprint, lease_until = excluded.lease_until,
         expires_at = excluded.expires_at, status = NULL, location = NULL",
        params![
            key.account_id,
            key.api_key,
            key.value,
            fingerprint,
            now + IDEMPOTENCY_LEASE_SECS,
            now + IDEMPOTENCY_KEY_SECS
        ],
    )
    .map_err(db_error)?;
    Ok(())
}

impl SqliteStore {
    /// [`SqliteStore::write`] for a create: when the request holds an `Idempotency-Key`
    /// (`store::held_key`), the answer naming what `f` made (`created`) is written in the
    /// same transaction, so the key is answered exactly when the create commits.
    pub(super) fn write_created<T>(
        &self,
        created: impl FnOnce(&T) -> Created,
        f: impl FnOnce(&rusqlite::Transaction) -> Result<T>,
    ) -> Result<T> {
        let held = held_key::held();
        let mut answered = false;
        let value = self.write(|tx| {
            let value = f(tx)?;
            if let Some(held) = &held {
                answered = answer_in(tx, held, created(&value))?;
            }
            Ok(value)
        })?;
        if let Some(held) = held.filter(|_| answered) {
            held.mark_answered();
        }
        Ok(value)
    }
}

/// Answers `held`'s key with what was created, if the request's claim still holds it
/// unanswered: whether it did.
fn answer_in(tx: &rusqlite::Transaction, held: &HeldKey, created: Created) -> Result<bool> {
    let answer = (held.answer_of)(created);
    let key = held.key();
    let changed = tx
        .execute(
            "UPDATE idempotency_records SET status = ?5, location = ?6
             WHERE account_id = ?1 AND api_key = ?2 AND key = ?3 AND fingerprint = ?4
             AND status IS NULL",
            params![
                key.account_id,
                key.api_key,
                key.value,
                held.fingerprint,
                answer.status,
                answer.created_uri
            ],
        )
        .map_err(db_error)?;
    Ok(changed == 1)
}

#[async_trait]
impl IdempotencyStore for SqliteStore {
    async fn claim_idempotency_key(
        &self,
        key: &IdempotencyKey<'_>,
        fingerprint: &str,
        // One writer in one process: a claim's outcome is never unknown here, so the token
        // that tells a claim's own retry apart is not needed.
        _claim: &str,
        now: i64,
    ) -> Result<IdempotencyClaim> {
        let (account_id, api_key, value) = (key.account_id, key.api_key, key.value);
        self.write(|tx| {
            tx.execute(
                "DELETE FROM idempotency_records WHERE (account_id, api_key, key) IN (SELECT
                 account_id, api_key, key FROM idempotency_records WHERE expires_at <= ?1
                 ORDER BY expires_at LIMIT ?2)",
                params![now, SWEEP_PER_CLAIM],
            )
            .map_err(db_error)?;
            let held = held_key(tx, key, now)?;
            Ok(match held {
                None => {
                    insert_claim(tx, key, fingerprint, now)?;
                    IdempotencyClaim::Claimed
                }
                Some(held) if held.fingerprint != fingerprint => IdempotencyClaim::OtherRequest,
                Some(Held {
                    answer: Some(answer),
                    ..
                }) => IdempotencyClaim::Answered(answer),
                Some(held) if held.lease_until > now => IdempotencyClaim::InProgress,
                Some(_) => {
                    // The claiming request died without an answer: this one runs.
                    tx.execute(
                        "UPDATE idempotency_records SET lease_until = ?4
                         WHERE account_id = ?1 AND api_key = ?2 AND key = ?3",
                        params![account_id, api_key, value, now + IDEMPOTENCY_LEASE_SECS],
                    )
                    .map_err(db_error)?;
                    IdempotencyClaim::Claimed
                }
            })
        })
    }

    async fn answer_idempotency_key(
        &self,
        key: &IdempotencyKey<'_>,
        fingerprint: &str,
        answer: &StoredAnswer,
    ) -> Result<()> {
        self.write(|tx| {
            tx.execute(
                "UPDATE idempotency_records SET status = ?5, location = ?6
                 WHERE account_id = ?1 AND api_key = ?2 AND key = ?3 AND fingerprint = ?4
                 AND status IS NULL",
                params![
                    key.account_id,
                    key.api_key,
                    key.value,
                    fingerprint,
                    answer.status,
                    answer.created_uri
                ],
            )
            .map_err(db_error)?;
            Ok(())
        })
    }

    async fn release_idempotency_key(
        &self,
        key: &IdempotencyKey<'_>,
        fingerprint: &str,
    ) -> Result<()> {
        self.write(|tx| {
            tx.execute(
                "DELETE FROM idempotency_records
                 WHERE account_id = ?1 AND api_key = ?2 AND key = ?3 AND fingerprint = ?4
                 AND status IS NULL",
                params![key.account_id, key.api_key, key.value, fingerprint],
            )
            .map_err(db_error)?;
            Ok(())
        })
    }
}

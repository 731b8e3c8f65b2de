//! `Idempotency-Key`s of the embedded store: one row per account and key, claimed and
//! answered in write transactions (one writer, so a claim is atomic).

use async_trait::async_trait;
use rusqlite::{params, OptionalExtension};

use super::{db_error, SqliteStore};
use crate::error::Result;
use crate::store::{
    IdempotencyClaim, IdempotencyStore, StoredAnswer, IDEMPOTENCY_KEY_SECS, IDEMPOTENCY_LEASE_SECS,
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

#[async_trait]
impl IdempotencyStore for SqliteStore {
    async fn claim_idempotency_key(
        &self,
        account_id: i64,
        key: &str,
        fingerprint: &str,
        now: i64,
    ) -> Result<IdempotencyClaim> {
        self.write(|tx| {
            tx.execute(
                "DELETE FROM idempotency_keys WHERE (account_id, key) IN (SELECT account_id,
                 key FROM idempotency_keys WHERE expires_at <= ?1 ORDER BY expires_at LIMIT ?2)",
                params![now, SWEEP_PER_CLAIM],
            )
            .map_err(db_error)?;
            let held = tx
                .query_row(
                    "SELECT fingerprint, lease_until, expires_at, status, body, location
                     FROM idempotency_keys WHERE account_id = ?1 AND key = ?2",
                    params![account_id, key],
                    |row| {
                        let expires_at: i64 = row.get(2)?;
                        let status: Option<u16> = row.get(3)?;
                        let held = Held {
                            fingerprint: row.get(0)?,
                            lease_until: row.get(1)?,
                            answer: match status {
                                Some(status) => Some(StoredAnswer {
                                    status,
                                    body: row.get::<_, Option<String>>(4)?.unwrap_or_default(),
                                    location: row.get(5)?,
                                }),
                                None => None,
                            },
                        };
                        Ok((expires_at > now).then_some(held))
                    },
                )
                .optional()
                .map_err(db_error)?
                .flatten();
            let claim = |tx: &rusqlite::Transaction| {
                tx.execute(
                    "INSERT INTO idempotency_keys (account_id, key, fingerprint, lease_until,
                     expires_at) VALUES (?1, ?2, ?3, ?4, ?5)
                     ON CONFLICT (account_id, key) DO UPDATE SET fingerprint = excluded.fingerprint,
                     lease_until = excluded.lease_until, expires_at = excluded.expires_at,
                     status = NULL, body = NULL, location = NULL",
                    params![
                        account_id,
                        key,
                        fingerprint,
                        now + IDEMPOTENCY_LEASE_SECS,
                        now + IDEMPOTENCY_KEY_SECS
                    ],
                )
                .map_err(db_error)
            };
            Ok(match held {
                None => {
                    claim(tx)?;
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
                        "UPDATE idempotency_keys SET lease_until = ?3
                         WHERE account_id = ?1 AND key = ?2",
                        params![account_id, key, now + IDEMPOTENCY_LEASE_SECS],
                    )
                    .map_err(db_error)?;
                    IdempotencyClaim::Claimed
                }
            })
        })
    }

    async fn answer_idempotency_key(
        &self,
        account_id: i64,
        key: &str,
        fingerprint: &str,
        answer: &StoredAnswer,
    ) -> Result<()> {
        self.write(|tx| {
            tx.execute(
                "UPDATE idempotency_keys SET status = ?4, body = ?5, location = ?6
                 WHERE account_id = ?1 AND key = ?2 AND fingerprint = ?3 AND status IS NULL",
                params![
                    account_id,
                    key,
                    fingerprint,
                    answer.status,
                    answer.body,
                    answer.location
                ],
            )
            .map_err(db_error)?;
            Ok(())
        })
    }

    async fn release_idempotency_key(
        &self,
        account_id: i64,
        key: &str,
        fingerprint: &str,
    ) -> Result<()> {
        self.write(|tx| {
            tx.execute(
                "DELETE FROM idempotency_keys
                 WHERE account_id = ?1 AND key = ?2 AND fingerprint = ?3 AND status IS NULL",
                params![account_id, key, fingerprint],
            )
            .map_err(db_error)?;
            Ok(())
        })
    }
}

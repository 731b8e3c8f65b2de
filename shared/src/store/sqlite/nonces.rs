//! The OAuth nonce memory of the embedded store, with group commit.
//!
//! Every authenticated request records a nonce, so this is the busiest write path. The
//! nonces live in a file of their own (a commit to the records file would make every reader
//! connection drop its page cache), and one thread owns that file's connection: requests
//! queue their nonces, and the thread records everything queued in one transaction and
//! answers each request. Under load one commit serves many requests; alone, a request
//! waits for nothing but its own commit. Async workers never block on the file.

use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use rusqlite::{params, Connection};
use tokio::sync::oneshot;

use super::db_error;
use crate::error::{ApiError, Result};

const SCHEMA: &str = r#"
CREATE TABLE IF NOT EXISTS nonces (
    key TEXT NOT NULL, nonce TEXT NOT NULL, expires_at INTEGER NOT NULL,
    PRIMARY KEY (key, nonce)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS nonces_expiry ON nonces (expires_at);
"#;

pub(super) const FILE: &str = "nonces.db";
/// Most nonces recorded in one transaction.
const MAX_BATCH: usize = 512;
/// Expired nonces are swept at most this often.
const SWEEP_EVERY: Duration = Duration::from_secs(30);

struct Job {
    key: String,
    nonce: String,
    now: i64,
    expires_at: i64,
    recorded: oneshot::Sender<Result<bool>>,
}

/// The handle requests use; the thread ends when it is dropped.
pub(super) struct NonceRecorder {
    jobs: mpsc::Sender<Job>,
}

impl NonceRecorder {
    /// Opens (creating if needed) the nonce file in `data_dir` and starts its thread.
    pub(super) fn open(data_dir: &Path) -> Result<Self> {
        let conn = open_file(&data_dir.join(FILE)).map_err(db_error)?;
        conn.execute_batch(SCHEMA).map_err(db_error)?;
        let (jobs, queue) = mpsc::channel();
        std::thread::Builder::new()
            .name("sitehost-nonces".into())
            .spawn(move || run(conn, queue))
            .map_err(|e| ApiError::internal(format!("cannot start the nonce thread: {e}")))?;
        Ok(NonceRecorder { jobs })
    }

    /// Records a nonce until `expires_at`; false when it is already recorded and live.
    pub(super) async fn remember(
        &self,
        key: &str,
        nonce: &str,
        now: i64,
        expires_at: i64,
    ) -> Result<bool> {
        let (recorded, answer) = oneshot::channel();
        let job = Job {
            key: key.to_string(),
            nonce: nonce.to_string(),
            now,
            expires_at,
            recorded,
        };
        self.jobs
            .send(job)
            .map_err(|_| ApiError::internal("the nonce thread has stopped"))?;
        answer
            .await
            .map_err(|_| ApiError::internal("the nonce thread dropped a request"))?
    }
}

/// Random nonces land on random B-tree pages, and SQLite writes whole pages to the WAL and
/// back at each checkpoint, so the write volume is pages per nonce. Small pages make that
/// a quarter, and no fsync at checkpoints (`synchronous = OFF`) keeps the disk out of the
/// request path. A process crash loses nothing (the OS has the writes); an OS crash may
/// lose the last moments' nonces, re-opening their replay window for at most five minutes.
fn open_file(path: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(Duration::from_secs(5))?;
    // Takes effect only while the file is new (before WAL mode is on).
    conn.pragma_update(None, "page_size", 1024)?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "OFF")?;
    conn.pragma_update(None, "cache_size", -65_536)?;
    Ok(conn)
}

fn run(mut conn: Connection, queue: mpsc::Receiver<Job>) {
    let mut last_sweep: Option<Instant> = None;
    while let Ok(first) = queue.recv() {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match queue.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        let sweep = last_sweep.is_none_or(|at| at.elapsed() >= SWEEP_EVERY);
        if sweep {
            last_sweep = Some(Instant::now());
        }
        match record(&mut conn, &batch, sweep) {
            Ok(recorded) => {
                for (job, fresh) in batch.into_iter().zip(recorded) {
                    let _ = job.recorded.send(Ok(fresh));
                }
            }
            Err(err) => {
                tracing::error!(error = %err, nonces = batch.len(), "recording nonces failed");
                let message = err.to_string();
                for job in batch {
                    let _ = job.recorded.send(Err(ApiError::internal(message.clone())));
                }
            }
        }
    }
}

/// One transaction for the whole batch: for each nonce, true if it was new (or had
/// expired), false for a replay, including a repeat within the batch.
fn record(conn: &mut Connection, batch: &[Job], sweep: bool) -> Result<Vec<bool>> {
    let tx = conn
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .map_err(db_error)?;
    if sweep {
        let now = batch.iter().map(|job| job.now).min().unwrap_or_default();
        tx.execute("DELETE FROM nonces WHERE expires_at < ?1", params![now])
            .map_err(db_error)?;
    }
    let mut recorded = Vec::with_capacity(batch.len());
    {
        // Inserts a new nonce, or takes over an expired one; a live one is a replay.
        let mut insert = tx
            .prepare_cached(
                "INSERT INTO nonces (key, nonce, expires_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT (key, nonce) DO UPDATE SET expires_at = excluded.expires_at
                 WHERE nonces.expires_at < ?4",
            )
            .map_err(db_error)?;
        for job in batch {
            let changed = insert
                .execute(params![job.key, job.nonce, job.expires_at, job.now])
                .map_err(db_error)?;
            recorded.push(changed == 1);
        }
    }
    tx.commit().map_err(db_error)?;
    Ok(recorded)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::NonceRecorder;

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn a_nonce_sent_many_times_at_once_is_recorded_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        let recorder = Arc::new(NonceRecorder::open(dir.path()).expect("open"));
        let mut tasks = tokio::task::JoinSet::new();
        for i in 0..64 {
            let recorder = Arc::clone(&recorder);
            // Every fourth request repeats one nonce; the others are distinct.
            let nonce = if i % 4 == 0 {
                "same".to_string()
            } else {
                format!("n{i}")
            };
            tasks.spawn(async move {
                (
                    nonce.clone(),
                    recorder.remember("k", &nonce, 100, 400).await,
                )
            });
        }
        let mut fresh_same = 0;
        let mut fresh_distinct = 0;
        while let Some(joined) = tasks.join_next().await {
            let (nonce, recorded) = joined.expect("task");
            match (nonce.as_str(), recorded.expect("recorded")) {
                ("same", true) => fresh_same += 1,
                ("same", false) => {}
                (_, true) => fresh_distinct += 1,
                (other, false) => panic!("{other} was taken for a replay"),
            }
        }
        assert_eq!(fresh_same, 1);
        assert_eq!(fresh_distinct, 48);
    }

    #[tokio::test]
    async fn an_expired_nonce_may_be_used_again_and_survives_a_restart_while_live() {
        let dir = tempfile::tempdir().expect("tempdir");
        {
            let recorder = NonceRecorder::open(dir.path()).expect("open");
            assert!(recorder.remember("k", "n", 100, 400).await.expect("first"));
        }
        let recorder = NonceRecorder::open(dir.path()).expect("reopen");
        assert!(!recorder.remember("k", "n", 200, 500).await.expect("live"));
        assert!(recorder
            .remember("k", "n", 401, 700)
            .await
            .expect("expired"));
        assert!(recorder
            .remember("other", "n", 401, 700)
            .await
            .expect("other key"));
    }
}

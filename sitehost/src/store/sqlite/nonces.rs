//! The OAuth nonce memory of the embedded store: live nonces in memory, a journal on disk.
//!
//! Every authenticated request records a nonce, so this is the busiest write path, and a
//! B-tree insert per nonce (SQLite) cost a third of the server's CPU. Here one thread owns
//! a map of live nonces, keyed by a digest of (key, nonce): requests queue their nonces,
//! and the thread checks each against the map, appends the new ones to a journal file in
//! one write, and only then answers. Under load one write serves many requests; alone, a
//! request waits for nothing but its own write. Async workers never block on the file.
//!
//! The journal is fixed-size records, only appended to, and read back when the memory
//! opens, so a restart forgets no live nonce. Writes go to the OS without fsync: a process
//! crash loses nothing; an OS crash may lose the last moments' nonces, re-opening their
//! replay window for at most five minutes. Once the journal is mostly expired records it is
//! rewritten with the live ones. The memory belongs to one process at a time: it holds a
//! lock file, so a second server on the same data directory is refused rather than left
//! blind to the first one's nonces.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{BufReader, BufWriter, ErrorKind, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::Context;
use sha2::{Digest, Sha256};
use tokio::sync::oneshot;

use crate::error::{ApiError, Result};

const JOURNAL: &str = "nonces.journal";
const LOCK: &str = "nonces.lock";
/// Where nonces lived before the journal; removed when the memory opens.
const OLD_FILES: [&str; 3] = ["nonces.db", "nonces.db-wal", "nonces.db-shm"];
/// A record: 16 bytes of digest, then the expiry (unix seconds, little-endian).
const RECORD: usize = 24;
/// Most nonces answered with one write.
const MAX_BATCH: usize = 512;
/// Expired nonces are swept at most this often.
const SWEEP_EVERY: Duration = Duration::from_secs(30);
/// The journal is rewritten when it holds this many records more than twice the live ones.
const COMPACT_SLACK: usize = 1 << 16;

/// Identifies (key, nonce); the length prefix keeps ("k#", "1") and ("k", "#1") apart.
type NonceId = u128;

fn nonce_id(key: &str, nonce: &str) -> NonceId {
    let mut hasher = Sha256::new();
    hasher.update((key.len() as u64).to_le_bytes());
    hasher.update(key.as_bytes());
    hasher.update(nonce.as_bytes());
    let digest = hasher.finalize();
    let mut id = [0u8; 16];
    id.copy_from_slice(&digest[..16]);
    u128::from_le_bytes(id)
}

struct Job {
    id: NonceId,
    now: i64,
    expires_at: i64,
    recorded: oneshot::Sender<Result<bool>>,
}

/// The handle requests use; dropping it stops the thread and releases the memory's lock.
pub(super) struct NonceRecorder {
    jobs: Option<mpsc::Sender<Job>>,
    thread: Option<JoinHandle<()>>,
}

impl NonceRecorder {
    /// Opens the nonce memory in `data_dir` (creating it if needed) and starts its thread.
    pub(super) fn open(data_dir: &Path) -> Result<Self> {
        let memory = Memory::open(data_dir)?;
        let (jobs, queue) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("sitehost-nonces".into())
            .spawn(move || run(memory, queue))
            .context("cannot start the nonce thread")?;
        Ok(NonceRecorder {
            jobs: Some(jobs),
            thread: Some(thread),
        })
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
            id: nonce_id(key, nonce),
            now,
            expires_at,
            recorded,
        };
        self.jobs
            .as_ref()
            .and_then(|jobs| jobs.send(job).ok())
            .ok_or_else(|| ApiError::internal("the nonce thread has stopped"))?;
        answer.await.context("the nonce thread dropped a request")?
    }
}

impl Drop for NonceRecorder {
    fn drop(&mut self) {
        // Closing the queue ends the thread after its current batch; waiting for it means
        // the lock is free once the recorder is gone (a reopen in the same process works).
        drop(self.jobs.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The live nonces and their journal; owned by the nonce thread.
struct Memory {
    live: HashMap<NonceId, i64>,
    journal: File,
    journal_path: PathBuf,
    /// Whole records in the journal.
    journal_records: usize,
    /// Set after a failed write: the journal may end in a partial record.
    journal_dirty: bool,
    /// Held while the memory is open.
    _lock: File,
}

impl Memory {
    fn open(data_dir: &Path) -> Result<Self> {
        let lock_path = data_dir.join(LOCK);
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|e| io_error("open", &lock_path, e))?;
        lock.try_lock().map_err(|e| match e {
            std::fs::TryLockError::WouldBlock => ApiError::internal(format!(
                "the nonce memory in {} is in use by another process: run one `sitehost \
                 serve` per data directory",
                data_dir.display()
            )),
            std::fs::TryLockError::Error(e) => io_error("lock", &lock_path, e),
        })?;
        for old in OLD_FILES {
            let _ = std::fs::remove_file(data_dir.join(old));
        }

        let journal_path = data_dir.join(JOURNAL);
        let mut live = HashMap::new();
        let mut journal_records = 0;
        match File::open(&journal_path) {
            Ok(file) => {
                let mut reader = BufReader::with_capacity(1 << 16, file);
                let mut record = [0u8; RECORD];
                loop {
                    match reader.read_exact(&mut record) {
                        Ok(()) => {
                            let (id, expires_at) = decode(&record);
                            let kept = live.entry(id).or_insert(expires_at);
                            *kept = (*kept).max(expires_at);
                            journal_records += 1;
                        }
                        // The end, or a partial record a crash left; it is cut off below.
                        Err(e) if e.kind() == ErrorKind::UnexpectedEof => break,
                        Err(e) => return Err(io_error("read", &journal_path, e)),
                    }
                }
            }
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) => return Err(io_error("open", &journal_path, e)),
        }
        let journal = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&journal_path)
            .map_err(|e| io_error("open", &journal_path, e))?;
        journal
            .set_len((journal_records * RECORD) as u64)
            .map_err(|e| io_error("trim", &journal_path, e))?;
        Ok(Memory {
            live,
            journal,
            journal_path,
            journal_records,
            journal_dirty: false,
            _lock: lock,
        })
    }

    /// Answers a batch: for each nonce, true if it was new (or had expired), false for a
    /// replay, including a repeat within the batch. Nothing is answered true before its
    /// record is written; if the write fails, the batch is forgotten and fails.
    fn record(&mut self, batch: &[Job]) -> Result<Vec<bool>> {
        let mut fresh = Vec::with_capacity(batch.len());
        let mut records = Vec::with_capacity(batch.len() * RECORD);
        for job in batch {
            let is_fresh = match self.live.get(&job.id) {
                Some(&expires_at) => expires_at < job.now,
                None => true,
            };
            if is_fresh {
                self.live.insert(job.id, job.expires_at);
                records.extend_from_slice(&encode(job.id, job.expires_at));
            }
            fresh.push(is_fresh);
        }
        if let Err(err) = self.append(&records) {
            for (job, is_fresh) in batch.iter().zip(&fresh) {
                if *is_fresh {
                    self.live.remove(&job.id);
                }
            }
            return Err(err);
        }
        Ok(fresh)
    }

    fn append(&mut self, records: &[u8]) -> Result<()> {
        if records.is_empty() {
            return Ok(());
        }
        if self.journal_dirty {
            self.journal
                .set_len((self.journal_records * RECORD) as u64)
                .map_err(|e| io_error("trim", &self.journal_path, e))?;
            self.journal_dirty = false;
        }
        if let Err(e) = self.journal.write_all(records) {
            self.journal_dirty = true;
            return Err(io_error("write", &self.journal_path, e));
        }
        self.journal_records += records.len() / RECORD;
        Ok(())
    }

    /// Forgets expired nonces, and rewrites the journal once it is mostly dead records.
    fn sweep(&mut self, now: i64) -> Result<()> {
        self.live.retain(|_, expires_at| *expires_at >= now);
        if self.journal_records > 2 * self.live.len() + COMPACT_SLACK {
            self.compact()?;
        }
        Ok(())
    }

    /// Writes the live nonces to a new file and renames it over the journal, so a crash
    /// at any point leaves either the old journal or the new one.
    fn compact(&mut self) -> Result<()> {
        let new_path = self.journal_path.with_extension("journal.new");
        let file = File::create(&new_path).map_err(|e| io_error("create", &new_path, e))?;
        let mut writer = BufWriter::with_capacity(1 << 16, file);
        for (&id, &expires_at) in &self.live {
            writer
                .write_all(&encode(id, expires_at))
                .map_err(|e| io_error("write", &new_path, e))?;
        }
        writer
            .flush()
            .map_err(|e| io_error("write", &new_path, e))?;
        drop(writer);
        std::fs::rename(&new_path, &self.journal_path)
            .map_err(|e| io_error("rename", &new_path, e))?;
        self.journal = OpenOptions::new()
            .append(true)
            .open(&self.journal_path)
            .map_err(|e| io_error("reopen", &self.journal_path, e))?;
        self.journal_records = self.live.len();
        self.journal_dirty = false;
        Ok(())
    }
}

fn io_error(what: &str, path: &Path, e: std::io::Error) -> ApiError {
    ApiError::from(
        anyhow::Error::new(e).context(format!("nonce memory: cannot {what} {}", path.display())),
    )
}

fn encode(id: NonceId, expires_at: i64) -> [u8; RECORD] {
    let mut record = [0u8; RECORD];
    record[..16].copy_from_slice(&id.to_le_bytes());
    record[16..].copy_from_slice(&expires_at.to_le_bytes());
    record
}

fn decode(record: &[u8; RECORD]) -> (NonceId, i64) {
    let mut id = [0u8; 16];
    id.copy_from_slice(&record[..16]);
    let mut expires_at = [0u8; 8];
    expires_at.copy_from_slice(&record[16..]);
    (u128::from_le_bytes(id), i64::from_le_bytes(expires_at))
}

fn run(mut memory: Memory, queue: mpsc::Receiver<Job>) {
    let mut last_sweep: Option<Instant> = None;
    while let Ok(first) = queue.recv() {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match queue.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        if last_sweep.is_none_or(|at| at.elapsed() >= SWEEP_EVERY) {
            last_sweep = Some(Instant::now());
            let now = batch.iter().map(|job| job.now).min().unwrap_or_default();
            if let Err(err) = memory.sweep(now) {
                // The journal only stays longer; the memory itself is swept.
                tracing::warn!(
                    error = %crate::error::error_chain(&err),
                    "compacting the nonce journal failed"
                );
            }
        }
        match memory.record(&batch) {
            Ok(recorded) => {
                for (job, fresh) in batch.into_iter().zip(recorded) {
                    let _ = job.recorded.send(Ok(fresh));
                }
            }
            Err(err) => {
                // Each waiting request gets the whole cause chain as its own error.
                let message = crate::error::error_chain(&err);
                tracing::error!(error = %message, nonces = batch.len(), "recording nonces failed");
                for job in batch {
                    let _ = job.recorded.send(Err(ApiError::internal(message.clone())));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::{encode, Memory, NonceRecorder, JOURNAL, RECORD};

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

    #[tokio::test]
    async fn a_second_recorder_on_the_same_directory_is_refused_until_the_first_is_gone() {
        let dir = tempfile::tempdir().expect("tempdir");
        let first = NonceRecorder::open(dir.path()).expect("open");
        let refused = NonceRecorder::open(dir.path())
            .err()
            .expect("a second recorder must be refused");
        assert!(
            refused.to_string().contains("in use by another process"),
            "{refused}"
        );
        drop(first);
        NonceRecorder::open(dir.path()).expect("free again");
    }

    #[tokio::test]
    async fn a_partial_record_left_by_a_crash_is_cut_off_and_the_rest_kept() {
        let dir = tempfile::tempdir().expect("tempdir");
        {
            let recorder = NonceRecorder::open(dir.path()).expect("open");
            assert!(recorder.remember("k", "a", 100, 400).await.expect("a"));
            assert!(recorder.remember("k", "b", 100, 400).await.expect("b"));
        }
        let journal = dir.path().join(JOURNAL);
        let mut bytes = std::fs::read(&journal).expect("journal");
        assert_eq!(bytes.len(), 2 * RECORD);
        bytes.extend_from_slice(&[7; RECORD / 2]);
        std::fs::write(&journal, &bytes).expect("torn write");

        let recorder = NonceRecorder::open(dir.path()).expect("reopen");
        assert!(!recorder.remember("k", "a", 200, 500).await.expect("a live"));
        assert!(recorder.remember("k", "c", 200, 500).await.expect("c"));
        drop(recorder);
        assert_eq!(
            std::fs::metadata(&journal).expect("journal").len(),
            3 * RECORD as u64
        );
    }

    #[test]
    fn compaction_keeps_exactly_the_live_nonces() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut memory = Memory::open(dir.path()).expect("open");
        let mut records = Vec::new();
        for i in 0..10u128 {
            // Even ids expire at 150, odd ones at 500.
            let expires_at: i64 = if i % 2 == 0 { 150 } else { 500 };
            memory.live.insert(i, expires_at);
            records.extend_from_slice(&encode(i, expires_at));
        }
        memory.append(&records).expect("append");
        memory.live.retain(|_, expires_at| *expires_at >= 200);
        memory.compact().expect("compact");
        assert_eq!(memory.journal_records, 5);
        drop(memory);

        let reopened = Memory::open(dir.path()).expect("reopen");
        let mut ids: Vec<u128> = reopened.live.keys().copied().collect();
        ids.sort_unstable();
        assert_eq!(ids, vec![1, 3, 5, 7, 9]);
        assert!(reopened.live.values().all(|expires_at| *expires_at == 500));
    }
}

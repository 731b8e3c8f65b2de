//! Files in memory: the file store of unit tests, with the embedded store's behaviour (a
//! file is never replaced, reads are bounded, a listing is one page in path order) and no
//! directory to create or clean up.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use bytes::Bytes;

use crate::clock::{Clock, SystemClock};
use crate::error::{ApiError, Result};
use crate::store::files::{FilePage, FileStore, StoredFile};

/// A stored file: its bytes and when it was written (unix seconds).
type Entry = (Bytes, i64);

/// Files by path. Clones share the same files, so a test can keep one to look inside (or
/// to remove a file behind a caller's back) while another is in use.
#[derive(Clone, Default)]
pub struct MemoryFiles {
    files: Arc<Mutex<BTreeMap<String, Entry>>>,
}

impl MemoryFiles {
    pub fn new() -> Self {
        Self::default()
    }

    /// Every stored path, in path order.
    pub fn paths(&self) -> Vec<String> {
        self.lock().keys().cloned().collect()
    }

    /// Removes a file at once, outside any request (what a concurrent delete would do).
    pub fn remove(&self, path: &str) -> bool {
        self.lock().remove(path).is_some()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Entry>> {
        // A test that panicked while holding the lock left the map whole: each change is
        // one insert or remove.
        self.files.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[async_trait]
impl FileStore for MemoryFiles {
    async fn put(&self, path: &str, bytes: Bytes, _content_type: &str) -> Result<()> {
        let mut files = self.lock();
        if files.contains_key(path) {
            return Err(ApiError::internal(format!(
                "cannot store {path}: it exists"
            )));
        }
        files.insert(path.to_string(), (bytes, SystemClock.now()));
        Ok(())
    }

    async fn delete(&self, path: &str) -> Result<()> {
        self.lock().remove(path);
        Ok(())
    }

    async fn read(&self, path: &str, max_bytes: u64) -> Result<Option<Bytes>> {
        let Some((bytes, _)) = self.lock().get(path).cloned() else {
            return Ok(None);
        };
        let len = bytes.len() as u64;
        if len > max_bytes {
            return Err(ApiError::internal(format!(
                "{path}: {len} bytes, more than the {max_bytes} allowed"
            )));
        }
        Ok(Some(bytes))
    }

    async fn exists(&self, path: &str) -> Result<bool> {
        Ok(self.lock().contains_key(path))
    }

    /// Every matching file in one page, in path order.
    async fn list(&self, prefix: &str, _next: Option<String>) -> Result<FilePage> {
        let files = self
            .lock()
            .range(prefix.to_string()..)
            .take_while(|(path, _)| path.starts_with(prefix))
            .map(|(path, (_, modified))| StoredFile {
                path: path.clone(),
                modified: *modified,
            })
            .collect();
        Ok(FilePage { files, next: None })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn files_are_kept_once_read_within_a_limit_and_listed_by_prefix() {
        let files = MemoryFiles::new();
        for path in ["img/upload/b.jpg", "img/upload/a.jpg", "other/c.jpg"] {
            files
                .put(path, Bytes::from_static(b"abc"), "image/jpeg")
                .await
                .expect("put");
        }
        let again = files.put("img/upload/a.jpg", Bytes::from_static(b"x"), "image/jpeg");
        assert!(again.await.is_err(), "a file is never replaced");
        let read = files.read("img/upload/a.jpg", 3).await.expect("read");
        assert_eq!(read, Some(Bytes::from_static(b"abc")));
        assert!(files.read("img/upload/a.jpg", 2).await.is_err());
        assert_eq!(files.read("missing", 9).await.expect("read"), None);

        let page = files.list("img/upload/", None).await.expect("list");
        let paths: Vec<&str> = page.files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(paths, ["img/upload/a.jpg", "img/upload/b.jpg"]);
        assert_eq!(page.next, None);

        files.delete("img/upload/a.jpg").await.expect("delete");
        files
            .delete("img/upload/a.jpg")
            .await
            .expect("deleting twice is fine");
        assert!(!files.exists("img/upload/a.jpg").await.expect("exists"));
        assert_eq!(files.paths(), ["img/upload/b.jpg", "other/c.jpg"]);
    }
}

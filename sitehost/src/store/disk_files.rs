//! Upload files in a directory under the data directory: the file store of `sitehost serve`,
//! which also serves them as the local frontend host.

use std::path::{Component, Path, PathBuf};

use anyhow::Context;
use async_trait::async_trait;
use bytes::Bytes;

use crate::error::{ApiError, Result};
use crate::store::files::{
    content_type_of, FilePage, FileStore, StoredFile, UploadForm, STAGING_PREFIX,
};

/// Files in `<data dir>/files`; files being received in `<data dir>/incoming`, on the same
/// file system, so a whole one is linked into place.
#[derive(Clone)]
pub struct LocalFiles {
    root: PathBuf,
    incoming: PathBuf,
}

/// A file being received (a staged form's), in `<data dir>/incoming`: removed when dropped,
/// stored or not. One left by a crash is removed by the sweep ([`LocalFiles::sweep_staged`]).
pub struct IncomingFile {
    path: PathBuf,
    file: tokio::fs::File,
}

impl IncomingFile {
    pub async fn write(&mut self, bytes: &[u8]) -> Result<()> {
        tokio::io::AsyncWriteExt::write_all(&mut self.file, bytes)
            .await
            .with_context(|| format!("cannot write {}", self.path.display()))?;
        Ok(())
    }

    /// Flushes what was written to the file system.
    pub async fn finish(&mut self) -> Result<()> {
        tokio::io::AsyncWriteExt::flush(&mut self.file)
            .await
            .with_context(|| format!("cannot write {}", self.path.display()))?;
        Ok(())
    }
}

impl Drop for IncomingFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// How old a file in `<data dir>/incoming` is before the sweep removes it: older than any
/// form's body deadline, so only one a crash left.
pub const INCOMING_LEFT_AFTER_SECS: i64 = 3600;

impl LocalFiles {
    pub fn open(data_dir: &Path) -> Result<Self> {
        let root = data_dir.join("files");
        let incoming = data_dir.join("incoming");
        for dir in [&root, &incoming] {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
        }
        Ok(LocalFiles { root, incoming })
    }

    /// A new empty file to receive one into.
    pub async fn incoming(&self) -> Result<IncomingFile> {
        let path = self
            .incoming
            .join(format!("{:016x}", rand::random::<u64>()));
        let file = tokio::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .await
            .with_context(|| format!("cannot create {}", path.display()))?;
        Ok(IncomingFile { path, file })
    }

    /// Stores a received file at `path`, never replacing a stored one.
    pub async fn store_incoming(&self, path: &str, incoming: IncomingFile) -> Result<()> {
        let file = self.creatable(path).await?;
        let linked = tokio::fs::hard_link(&incoming.path, &file).await;
        drop(incoming);
        Ok(linked.with_context(|| format!("cannot store {path}"))?)
    }

    /// Removes the staged files (under `staging/`) modified at least `kept_secs` before
    /// `now`, as the staging bucket's lifecycle rule expires them, and the files a crash
    /// left in `<data dir>/incoming` ([`INCOMING_LEFT_AFTER_SECS`]); how many of each.
    /// Blocking: run it on the blocking pool.
    pub fn sweep_staged(&self, now: i64, kept_secs: i64) -> Result<(usize, usize)> {
        let staging = self.root.join(STAGING_PREFIX.trim_end_matches('/'));
        let staged = remove_older(&staging, now - kept_secs)?;
        let incoming = remove_older(&self.incoming, now - INCOMING_LEFT_AFTER_SECS)?;
        Ok((staged, incoming))
    }

    /// The file for `path`, its directory created.
    async fn creatable(&self, path: &str) -> Result<PathBuf> {
        let file = self.resolve(path).ok_or_else(|| {
            ApiError::internal(format!(
                "refusing to store outside the files directory: {path}"
            ))
        })?;
        if let Some(dir) = file.parent() {
            tokio::fs::create_dir_all(dir)
                .await
                .with_context(|| format!("cannot create {}", dir.display()))?;
        }
        Ok(file)
    }

    /// The file for a URL path, or `None` if the path could leave the files directory
    /// (`..`, absolute parts, backslashes, NUL) or is not a plain relative path.
    pub fn resolve(&self, path: &str) -> Option<PathBuf> {
        let relative = path.trim_start_matches('/');
        if relative.is_empty() || relative.contains(['\\', '\0']) {
            return None;
        }
        let candidate = Path::new(relative);
        if !candidate
            .components()
            .all(|c| matches!(c, Component::Normal(_)))
        {
            return None;
        }
        Some(self.root.join(candidate))
    }

    /// Opens a stored file for serving, to be streamed (never read whole): the open file,
    /// its length and its content type.
    pub async fn open_file(&self, path: &str) -> Option<(tokio::fs::File, u64, &'static str)> {
        let file = self.resolve(path)?;
        // Symlinks could point outside the root; only regular files under it are served.
        let meta = tokio::fs::symlink_metadata(&file).await.ok()?;
        if !meta.is_file() {
            return None;
        }
        let opened = tokio::fs::File::open(&file).await.ok()?;
        Some((opened, meta.len(), content_type_of(path)))
    }
}

#[async_trait]
impl FileStore for LocalFiles {
    async fn put(&self, path: &str, bytes: Bytes, _content_type: &str) -> Result<()> {
        let file = self.creatable(path).await?;
        // Write a temporary file and rename it, so a reader never sees half a file; link
        // instead of rename so an existing file is never replaced.
        let temp = file.with_extension(format!("tmp-{}", rand::random::<u64>()));
        tokio::fs::write(&temp, &bytes)
            .await
            .with_context(|| format!("cannot write {}", temp.display()))?;
        let linked = tokio::fs::hard_link(&temp, &file).await;
        let _ = tokio::fs::remove_file(&temp).await;
        Ok(linked.with_context(|| format!("cannot store {path}"))?)
    }

    async fn delete(&self, path: &str) -> Result<()> {
        let Some(file) = self.resolve(path) else {
            return Ok(());
        };
        match tokio::fs::remove_file(&file).await {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(anyhow::Error::new(e)
                .context(format!("cannot delete {path}"))
                .into()),
        }
    }

    async fn read(&self, path: &str, max_bytes: u64) -> Result<Option<Bytes>> {
        let Some((file, len, _)) = self.open_file(path).await else {
            return Ok(None);
        };
        if len > max_bytes {
            return Err(ApiError::internal(format!(
                "{path}: {len} bytes, more than the {max_bytes} allowed"
            )));
        }
        let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or_default());
        // Never more than the limit, even if the file grew since it was opened.
        tokio::io::AsyncReadExt::read_to_end(
            &mut tokio::io::AsyncReadExt::take(file, max_bytes),
            &mut bytes,
        )
        .await
        .with_context(|| format!("cannot read {path}"))?;
        Ok(Some(Bytes::from(bytes)))
    }

    async fn exists(&self, path: &str) -> Result<bool> {
        Ok(self.open_file(path).await.is_some())
    }

    /// A form posted to `sitehost serve` itself, at the staged file's own path
    /// (`/staging/<upload_id>`, `server::staged_form`); the `key` field is the path, as in an
    /// S3 form. The size and expiry are the session's, which the server checks.
    async fn staged_upload_form(
        &self,
        path: &str,
        _max_bytes: u64,
        _expires_at: i64,
        _now: i64,
    ) -> Result<UploadForm> {
        Ok(UploadForm {
            url: format!("/{path}"),
            fields: vec![("key".to_string(), path.to_string())],
        })
    }

    /// Every matching file in one page (a local store is small enough), with its mtime.
    async fn list(&self, prefix: &str, _next: Option<String>) -> Result<FilePage> {
        let root = self.root.clone();
        let prefix = prefix.to_string();
        let files = tokio::task::spawn_blocking(move || list_local(&root, &prefix))
            .await
            .context("listing files")??;
        Ok(FilePage { files, next: None })
    }
}

/// Removes the regular files directly in `dir` modified at or before `cutoff` (Unix
/// seconds); how many. A directory that does not exist has none.
fn remove_older(dir: &Path, cutoff: i64) -> Result<usize> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => {
            return Err(anyhow::Error::new(e)
                .context(format!("cannot list {}", dir.display()))
                .into())
        }
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let Ok(meta) = entry.metadata() else { continue };
        if meta.is_file()
            && modified_secs(&meta) <= cutoff
            && std::fs::remove_file(entry.path()).is_ok()
        {
            removed += 1;
        }
    }
    Ok(removed)
}

/// A file's modification time in Unix seconds (0 when the system has none).
fn modified_secs(meta: &std::fs::Metadata) -> i64 {
    meta.modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// The regular files under `root` whose relative paths start with `prefix`, sorted.
fn list_local(root: &Path, prefix: &str) -> Result<Vec<StoredFile>> {
    // Only the directory the prefix names (or its parent) needs walking.
    let start = match prefix.rfind('/') {
        Some(slash) => root.join(&prefix[..slash]),
        None => root.to_path_buf(),
    };
    let mut files = Vec::new();
    let mut dirs = vec![start];
    while let Some(dir) = dirs.pop() {
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => {
                return Err(anyhow::Error::new(e)
                    .context(format!("cannot list {}", dir.display()))
                    .into())
            }
        };
        for entry in entries {
            let entry = entry.with_context(|| format!("cannot list {}", dir.display()))?;
            // Symlinks are neither followed nor listed: only what `put` wrote counts.
            let meta = entry
                .metadata()
                .with_context(|| format!("cannot stat {}", entry.path().display()))?;
            let path = entry.path();
            if meta.is_dir() {
                dirs.push(path);
                continue;
            }
            if !meta.is_file() {
                continue;
            }
            let Some(relative) = path
                .strip_prefix(root)
                .ok()
                .and_then(Path::to_str)
                .map(|p| p.replace(std::path::MAIN_SEPARATOR, "/"))
            else {
                continue;
            };
            if !relative.starts_with(prefix) {
                continue;
            }
            let modified = modified_secs(&meta);
            files.push(StoredFile {
                path: relative,
                modified,
            });
        }
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Staged files past their keeping are removed, as the staging bucket's rule removes
    /// them, with what a crash left being received; nothing else is touched. Before: kept
    /// for good.
    #[tokio::test]
    async fn staged_files_past_their_keeping_are_swept() {
        let dir = tempfile::tempdir().expect("dir");
        let files = LocalFiles::open(dir.path()).expect("files");
        let now = 2_000_000_000;
        let aged = |path: &Path, secs: i64| {
            let at = std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs as u64);
            let file = std::fs::File::options()
                .write(true)
                .open(path)
                .expect("open");
            file.set_modified(at).expect("set mtime");
        };
        for (path, age) in [
            ("staging/old", 3600),
            ("staging/new", 3599),
            ("img/upload/a--1.jpg", 99_999),
        ] {
            files
                .put(path, Bytes::from_static(b"x"), "x")
                .await
                .expect("put");
            aged(&files.resolve(path).expect("path"), now - age);
        }
        // Flushed before its time is set: tokio writes on its blocking pool, and a write
        // landing after `aged` would give the file the real clock's time.
        let mut crashed = files.incoming().await.expect("incoming");
        crashed.write(b"half").await.expect("write");
        crashed.finish().await.expect("flush");
        aged(&crashed.path, now - INCOMING_LEFT_AFTER_SECS);
        std::mem::forget(crashed);
        let mut live = files.incoming().await.expect("incoming");
        live.write(b"half").await.expect("write");
        live.finish().await.expect("flush");
        aged(&live.path, now - INCOMING_LEFT_AFTER_SECS + 1);
        assert_eq!(files.sweep_staged(now, 3600).expect("swept"), (1, 1));
        assert!(!files.exists("staging/old").await.expect("exists"));
        assert!(files.exists("staging/new").await.expect("exists"));
        assert!(files.exists("img/upload/a--1.jpg").await.expect("exists"));
        assert!(live.path.exists());
        drop(live);
        assert_eq!(
            std::fs::read_dir(dir.path().join("incoming"))
                .expect("dir")
                .count(),
            0
        );
    }

    #[tokio::test]
    async fn paths_cannot_leave_the_files_directory() {
        let dir = tempfile::tempdir().expect("dir");
        let files = LocalFiles::open(dir.path()).expect("files");
        for bad in ["../secret", "img/../../x", "/", "", "img/a\\..\\b", "a\0b"] {
            assert!(files.resolve(bad).is_none(), "{bad}");
        }
        assert!(files.resolve("/img/upload/a.jpg").is_some());
        files
            .put("img/upload/a.jpg", Bytes::from_static(b"abc"), "image/jpeg")
            .await
            .expect("put");
        assert!(files
            .put("img/upload/a.jpg", Bytes::from_static(b"x"), "image/jpeg")
            .await
            .is_err());
        let (_, len, ct) = files.open_file("/img/upload/a.jpg").await.expect("open");
        assert_eq!((len, ct), (3, "image/jpeg"));
        files.delete("img/upload/a.jpg").await.expect("delete");
        assert!(files.open_file("img/upload/a.jpg").await.is_none());
        files
            .delete("img/upload/a.jpg")
            .await
            .expect("deleting twice is fine");
    }

    #[tokio::test]
    async fn listing_finds_files_under_a_prefix_in_path_order_with_their_times() {
        let dir = tempfile::tempdir().expect("dir");
        let files = LocalFiles::open(dir.path()).expect("files");
        for path in [
            "img/upload/b.jpg",
            "img/upload/a.big.jpg",
            "img/upload/a.jpg",
            "other/c.jpg",
        ] {
            files
                .put(path, Bytes::from_static(b"x"), "image/jpeg")
                .await
                .expect("put");
        }
        let page = files.list("img/upload/", None).await.expect("list");
        let paths: Vec<&str> = page.files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "img/upload/a.big.jpg",
                "img/upload/a.jpg",
                "img/upload/b.jpg"
            ]
        );
        assert_eq!(page.next, None);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock")
            .as_secs() as i64;
        assert!(page.files.iter().all(|f| (now - f.modified).abs() < 60));
        let none = files.list("nothing/here/", None).await.expect("list");
        assert!(none.files.is_empty());
    }
}

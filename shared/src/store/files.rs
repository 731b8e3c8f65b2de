//! File storage for uploads: S3 in production (`store::s3`), a directory under the data
//! directory for `sitehost serve`, which also serves these files as the local frontend
//! host.

use std::path::{Component, Path, PathBuf};

use async_trait::async_trait;
use bytes::Bytes;

use crate::error::{ApiError, Result};

/// Upload paths never change content, so caches may keep them for a year.
pub const CACHE_CONTROL: &str = "public, max-age=31536000, immutable";

#[async_trait]
pub trait FileStore: Send + Sync {
    /// Writes a new file. Paths are unique per upload; an existing file is never replaced.
    async fn put(&self, path: &str, bytes: Bytes, content_type: &str) -> Result<()>;
    /// Removes a file; removing a missing file is not an error.
    async fn delete(&self, path: &str) -> Result<()>;
}

pub type SharedFiles = std::sync::Arc<dyn FileStore>;

/// The content type of a stored path, from its extension (the pipeline names files by the
/// type it detected in the bytes).
pub fn content_type_of(path: &str) -> &'static str {
    match path
        .rsplit('.')
        .next()
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        Some("jpg" | "jpeg") => "image/jpeg",
        Some("png") => "image/png",
        Some("gif") => "image/gif",
        Some("webp") => "image/webp",
        _ => "application/octet-stream",
    }
}

/// Files in `<data dir>/files`.
pub struct LocalFiles {
    root: PathBuf,
}

impl LocalFiles {
    pub fn open(data_dir: &Path) -> Result<Self> {
        let root = data_dir.join("files");
        std::fs::create_dir_all(&root)
            .map_err(|e| ApiError::internal(format!("cannot create {}: {e}", root.display())))?;
        Ok(LocalFiles { root })
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

    /// Reads a stored file for serving: its bytes and content type.
    pub async fn read(&self, path: &str) -> Option<(Bytes, &'static str)> {
        let file = self.resolve(path)?;
        // Symlinks could point outside the root; only regular files under it are served.
        let meta = tokio::fs::symlink_metadata(&file).await.ok()?;
        if !meta.is_file() {
            return None;
        }
        let bytes = tokio::fs::read(&file).await.ok()?;
        Some((Bytes::from(bytes), content_type_of(path)))
    }
}

#[async_trait]
impl FileStore for LocalFiles {
    async fn put(&self, path: &str, bytes: Bytes, _content_type: &str) -> Result<()> {
        let file = self.resolve(path).ok_or_else(|| {
            ApiError::internal(format!(
                "refusing to store outside the files directory: {path}"
            ))
        })?;
        if let Some(dir) = file.parent() {
            tokio::fs::create_dir_all(dir)
                .await
                .map_err(ApiError::internal)?;
        }
        // Write a temporary file and rename it, so a reader never sees half a file; link
        // instead of rename so an existing file is never replaced.
        let temp = file.with_extension(format!("tmp-{}", rand::random::<u64>()));
        tokio::fs::write(&temp, &bytes)
            .await
            .map_err(ApiError::internal)?;
        let linked = tokio::fs::hard_link(&temp, &file).await;
        let _ = tokio::fs::remove_file(&temp).await;
        linked.map_err(|e| ApiError::internal(format!("cannot store {path}: {e}")))
    }

    async fn delete(&self, path: &str) -> Result<()> {
        let Some(file) = self.resolve(path) else {
            return Ok(());
        };
        match tokio::fs::remove_file(&file).await {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(ApiError::internal(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let (bytes, ct) = files.read("/img/upload/a.jpg").await.expect("read");
        assert_eq!((&bytes[..], ct), (&b"abc"[..], "image/jpeg"));
        files.delete("img/upload/a.jpg").await.expect("delete");
        assert!(files.read("img/upload/a.jpg").await.is_none());
        files
            .delete("img/upload/a.jpg")
            .await
            .expect("deleting twice is fine");
    }
}

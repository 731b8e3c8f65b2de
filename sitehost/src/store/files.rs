//! File storage for uploads: S3 in production (`s3`), a directory under the data
//! directory for `sitehost serve` (`store::disk_files`), which also serves these files as the
//! local frontend host.

use async_trait::async_trait;
use bytes::Bytes;

use crate::error::{ApiError, Result};

/// Where staged uploads' files wait for the create that uses them (`staging/<upload_id>`):
/// a bucket of their own when deployed, a folder never served by `sitehost serve`.
pub const STAGING_PREFIX: &str = "staging/";

/// An HTML form that uploads one file: the URL to post it to and the fields to send before
/// the file (sent last, as `file`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UploadForm {
    /// Absolute, or a path on the server that answered (`sitehost serve`), which the API
    /// makes absolute with the request's own origin.
    pub url: String,
    pub fields: Vec<(String, String)>,
}

/// Upload paths never change content, so caches may keep them for a year.
pub const CACHE_CONTROL: &str = "public, max-age=31536000, immutable";

#[async_trait]
pub trait FileStore: Send + Sync {
    /// Writes a new file. Paths are unique per upload; an existing file is never replaced.
    async fn put(&self, path: &str, bytes: Bytes, content_type: &str) -> Result<()>;
    /// Removes a file; removing a missing file is not an error.
    async fn delete(&self, path: &str) -> Result<()>;
    /// A stored file's bytes, `None` when there is no file at `path`; a file of more than
    /// `max_bytes` is an error, never read. For the siblings made on first request
    /// (`operations::siblings`); stores that cannot read refuse.
    async fn read(&self, path: &str, max_bytes: u64) -> Result<Option<Bytes>> {
        let _ = (path, max_bytes);
        Err(ApiError::internal("this file store cannot read its files"))
    }
    /// A form with which a client posts one file of 1 to `max_bytes` bytes to `path`
    /// (under [`STAGING_PREFIX`]) until `expires_at` (unix seconds); `read` and `delete`
    /// then reach it at `path`. Stores without staged uploads refuse.
    async fn staged_upload_form(
        &self,
        path: &str,
        max_bytes: u64,
        expires_at: i64,
        now: i64,
    ) -> Result<UploadForm> {
        let _ = (path, max_bytes, expires_at, now);
        Err(ApiError::internal(
            "this file store takes no staged uploads",
        ))
    }
    /// Whether a file exists at `path`.
    async fn exists(&self, path: &str) -> Result<bool> {
        let _ = path;
        Err(ApiError::internal(
            "this file store cannot look up its files",
        ))
    }
    /// One page of the files whose paths start with `prefix`, in byte order of their paths,
    /// continuing after the `next` of the previous page (`None`: from the start). For the
    /// orphan sweeper (`sitehost files sweep`); stores that cannot list refuse.
    async fn list(&self, prefix: &str, next: Option<String>) -> Result<FilePage> {
        let _ = (prefix, next);
        Err(ApiError::internal("this file store cannot list its files"))
    }
    /// Whether this store keeps earlier versions of its files, so a deleted file can be
    /// brought back (`sitehost files restore`): S3 does (in a versioned bucket); the
    /// embedded store's local files do not.
    async fn keeps_versions(&self) -> Result<bool> {
        Ok(false)
    }
    /// Every version and delete marker of the files whose paths start with `prefix`:
    /// per path, its versions of content newest first. Stores without versions refuse.
    async fn versions(&self, prefix: &str) -> Result<Vec<FileVersion>> {
        let _ = prefix;
        Err(ApiError::internal(NO_VERSIONS))
    }
    /// Makes an earlier version of `path` its current content again, as a new version: the
    /// history (the delete included) stays. Stores without versions refuse.
    async fn restore_version(&self, path: &str, version_id: &str) -> Result<()> {
        let _ = (path, version_id);
        Err(ApiError::internal(NO_VERSIONS))
    }
}

/// Why a store without versions restores nothing.
pub const NO_VERSIONS: &str = "this file store keeps no earlier versions of its files (the \
    embedded store's local files): a deleted file cannot be restored from it";

/// One entry of a versioned store's history of a path.
#[derive(Debug, Clone, PartialEq)]
pub struct FileVersion {
    pub path: String,
    pub version_id: String,
    /// What the path holds now (its newest entry).
    pub is_latest: bool,
    /// A delete marker: the path was deleted here; no content.
    pub deleted: bool,
}

/// A stored file and when it was last written (unix seconds).
#[derive(Debug, Clone, PartialEq)]
pub struct StoredFile {
    pub path: String,
    pub modified: i64,
}

/// One page of a file listing; `next` asks for the following page.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FilePage {
    pub files: Vec<StoredFile>,
    pub next: Option<String>,
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
        Some("avif") => "image/avif",
        _ => "application/octet-stream",
    }
}

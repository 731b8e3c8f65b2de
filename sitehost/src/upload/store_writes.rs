//! The store writes of an upload, files first: every file of the set is written, or none is
//! kept; then the record, whose write may end with an unknown outcome, settled before any
//! file is removed. So a failed upload leaves no record and a record never points at a
//! missing file.

use std::time::Instant;

use bytes::Bytes;

use crate::domain::account::Caller;
use crate::domain::image_record::{sibling_path, variant_path, Image, NewImage, SiblingFormat};
use crate::error::{ApiError, Result};
use crate::image_pipeline::Processed;
use crate::operations::upload_stats::record_upload;
use crate::operations::Services;
use crate::store::files::SharedFiles;

/// One file to write: its path, content and media type.
pub(super) type UploadFile = (String, Bytes, &'static str);

/// The files of an upload whose original is stored at `path`: the original as it came, each
/// variant, and the WebP siblings made with them.
pub(super) fn upload_files(path: &str, original: Bytes, processed: Processed) -> Vec<UploadFile> {
    let mut objects = vec![(path.to_string(), original, processed.mimetype)];
    for variant in processed.variants {
        // The encoded bytes move to the file store.
        let at = variant_path(path, variant.name);
        if let Some(webp) = variant.webp {
            let webp_format = SiblingFormat::Webp;
            let path = sibling_path(&at, webp_format);
            objects.push((path, Bytes::from(webp), webp_format.content_type()));
        }
        objects.push((at, Bytes::from(variant.bytes), processed.mimetype));
    }
    objects
}

/// Writes the files (timed for the request log) and returns their paths; on any failure
/// none is kept.
pub(super) async fn write_files(
    files: &SharedFiles,
    objects: Vec<UploadFile>,
) -> Result<Vec<String>> {
    let started = Instant::now();
    let written = store_files(files, objects).await;
    record_upload(|stats| stats.store = Some(started.elapsed()));
    written
}

/// Writes the record `new` of the files in `written` under its allocated `id` (timed for the
/// request log). A write that fails for sure removes the files; one whose outcome is unknown
/// is settled first.
pub(super) async fn write_record(
    services: &Services,
    files: &SharedFiles,
    caller: &Caller,
    id: i64,
    new: NewImage,
    written: &[String],
) -> Result<Image> {
    let path = new.path.clone();
    let started = Instant::now();
    let created = services
        .store
        .create_image(caller.account_id, new, services.clock.now())
        .await;
    record_upload(|stats| stats.record = Some(started.elapsed()));
    match created {
        Ok(image) => Ok(image),
        // An internal or temporary error (a timeout, a lost response, a 500 after the write)
        // does not prove that nothing was written, nor does a 503 whose last attempt was throttled after an earlier one went
        // unanswered: settle the id before touching the files.
        Err(
            err @ (ApiError::Internal(_)
            | ApiError::Unavailable { .. }
            | ApiError::Temporary { .. }),
        ) => match settle(services, files, caller, id, &path, written).await {
            Some(image) => Ok(image),
            None => Err(err),
        },
        Err(err) => {
            remove_files(files, written).await;
            Err(err)
        }
    }
}

/// Writes every file of an upload concurrently; on any failure removes the ones written.
async fn store_files(files: &SharedFiles, objects: Vec<UploadFile>) -> Result<Vec<String>> {
    let mut tasks = tokio::task::JoinSet::new();
    for (path, bytes, content_type) in objects.iter().cloned() {
        let files = std::sync::Arc::clone(files);
        tasks.spawn(async move { files.put(&path, bytes, content_type).await });
    }
    let mut failure = None;
    while let Some(joined) = tasks.join_next().await {
        let result = joined.map_err(ApiError::internal).and_then(|r| r);
        if let Err(err) = result {
            failure.get_or_insert(err);
        }
    }
    let paths: Vec<String> = objects.into_iter().map(|(p, _, _)| p).collect();
    match failure {
        None => Ok(paths),
        Some(err) => {
            remove_files(files, &paths).await;
            Err(err)
        }
    }
}

/// Best-effort removal of an upload's files (a missing file is fine).
async fn remove_files(files: &SharedFiles, paths: &[String]) {
    let mut tasks = tokio::task::JoinSet::new();
    for path in paths {
        let (files, path) = (std::sync::Arc::clone(files), path.clone());
        tasks.spawn(async move {
            if let Err(err) = files.delete(&path).await {
                tracing::error!(path = %path, error = %err, "could not remove a file of a failed upload");
            }
        });
    }
    while tasks.join_next().await.is_some() {}
}

/// After a record write with an unknown outcome: the record if it was written (the upload
/// succeeded). Otherwise the id is barred and the files removed; if even that cannot be
/// found out, the files stay for `sitehost files sweep` to judge later.
async fn settle(
    services: &Services,
    files: &SharedFiles,
    caller: &Caller,
    id: i64,
    path: &str,
    written: &[String],
) -> Option<Image> {
    match services.store.settle_image(id).await {
        Ok(Some(image)) if image.account_id == caller.account_id && image.path == path => {
            tracing::warn!(
                image_id = id,
                "the image record write reported an error but the record exists"
            );
            Some(image)
        }
        Ok(other) => {
            if other.is_some() {
                tracing::error!(image_id = id, "image id recorded for other files");
            }
            remove_files(files, written).await;
            None
        }
        Err(err) => {
            tracing::error!(
                image_id = id,
                error = %err,
                "cannot tell whether the image was recorded; its files are kept for the sweeper"
            );
            None
        }
    }
}

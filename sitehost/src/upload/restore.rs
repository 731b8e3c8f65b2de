//! `sitehost files restore`: after the table was restored to a point in time, brings back
//! the files of every image record whose files were deleted since (a delete through the
//! API, the sweeper), from the versioned bucket's earlier versions.
//!
//! Records are walked by account (the accounts of the keys; every image was uploaded with a
//! key of its account, and keys are never deleted, only revoked), each account's images by
//! its list (`Query`s of the image list, never a table scan). For each image, one
//! `ListObjectVersions` of its file set (the original, the variants and whatever siblings
//! it had, WebP or AVIF) says which files have no current version; each is copied back
//! from its newest earlier version. The original and the five variants must exist: one with no
//! earlier version is reported as lost. A sibling that never existed is made on request.

use std::collections::BTreeMap;

use crate::domain::image_record::{Image, ImageFilter, ImageQuery};
use crate::error::{ApiError, Result};
use crate::store::files::{FileStore, NO_VERSIONS};
use crate::store::{ImageStore, KeyStore};

/// Images read per list page.
const PAGE: u64 = 1_000;

/// What a restore found. Paths in the order met (accounts, then ids, then paths).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RestoreReport {
    /// Image records checked.
    pub images: u64,
    /// Of those, the images whose files were all there.
    pub complete: u64,
    /// Files restored (or, in a dry run, that would be).
    pub restored: Vec<String>,
    /// Files of a record with no earlier version to restore from.
    pub lost: Vec<String>,
}

/// Restores the missing files of every image record; with `dry_run`, only reads and
/// reports. Refused, before any record is read, by a file store that keeps no versions.
pub async fn restore_files<R, F>(records: &R, files: &F, dry_run: bool) -> Result<RestoreReport>
where
    R: KeyStore + ImageStore + ?Sized,
    F: FileStore + ?Sized,
{
    if !files.keeps_versions().await? {
        return Err(ApiError::internal(NO_VERSIONS));
    }
    let mut accounts: Vec<i64> = records
        .list_keys()
        .await?
        .iter()
        .map(|key| key.account_id)
        .collect();
    accounts.sort_unstable();
    accounts.dedup();
    let mut report = RestoreReport::default();
    for account_id in accounts {
        let mut offset = 0;
        loop {
            let query = ImageQuery {
                filter: ImageFilter::default(),
                descending: false,
                limit: PAGE,
                offset,
            };
            let page = records.list_images(account_id, &query).await?;
            for image in &page.items {
                restore_image(files, image, dry_run, &mut report).await?;
            }
            offset += page.items.len() as u64;
            if page.items.is_empty() || offset >= page.total_count {
                break;
            }
        }
    }
    Ok(report)
}

/// What one path of an image's file set holds.
#[derive(Default)]
struct PathState<'a> {
    current: bool,
    newest: Option<&'a str>,
}

async fn restore_image<F>(
    files: &F,
    image: &Image,
    dry_run: bool,
    report: &mut RestoreReport,
) -> Result<()>
where
    F: FileStore + ?Sized,
{
    report.images += 1;
    let history = files.versions(&file_set_prefix(&image.path)).await?;
    let mut paths: BTreeMap<&str, PathState> = BTreeMap::new();
    let variants: Vec<String> = image.variants().map(|(_, path, _)| path).collect();
    for path in std::iter::once(&image.path).chain(&variants) {
        paths.entry(path.as_str()).or_default();
    }
    for entry in &history {
        let state = paths.entry(entry.path.as_str()).or_default();
        if entry.deleted {
            continue;
        }
        state.current |= entry.is_latest;
        // Versions come newest first: the first one seen is the newest.
        state.newest = state.newest.or(Some(entry.version_id.as_str()));
    }
    let mut complete = true;
    for (path, state) in paths {
        if state.current {
            continue;
        }
        complete = false;
        match state.newest {
            Some(version) => {
                if !dry_run {
                    files.restore_version(path, version).await?;
                    tracing::info!(image_id = image.id, path, "file restored");
                }
                report.restored.push(path.to_string());
            }
            None => report.lost.push(path.to_string()),
        }
    }
    if complete {
        report.complete += 1;
    }
    Ok(())
}

/// The prefix every file of the image at `original` shares: its path up to the first dot
/// of the file name, and the dot (`img/upload/a-x--26.jpg` -> `img/upload/a-x--26.`; the
/// variants insert their size after it, the siblings add `.webp` or `.avif`). The dot keeps image 26's
/// prefix from matching image 260's files.
fn file_set_prefix(original: &str) -> String {
    let file_start = original.rfind('/').map_or(0, |i| i + 1);
    match original[file_start..].find('.') {
        Some(dot) => original[..=file_start + dot].to_string(),
        None => format!("{original}."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_set_prefix_ends_at_the_first_dot_of_the_name() {
        assert_eq!(
            file_set_prefix("img/upload/shop-k3v9--26.jpg"),
            "img/upload/shop-k3v9--26."
        );
        assert_eq!(file_set_prefix("img/up.load/a--2.png"), "img/up.load/a--2.");
        assert_eq!(file_set_prefix("img/upload/bare"), "img/upload/bare.");
    }
}

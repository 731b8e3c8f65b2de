//! `sitehost files sweep`: removes upload files that no image record references, left by
//! an upload that died between writing its files and its record (a killed function, a
//! crash). Safe to run at any time, beside live uploads:
//!
//! - only file sets whose newest file is older than the grace period are considered, and
//!   the grace period is at least `MIN_GRACE_SECS`, far longer than an upload may take (the
//!   upload function's timeout is 29 s);
//! - a set is removed only after `ImageStore::settle_image` of the id in its name found no
//!   record, which also bars that id, so no late write can record it afterwards (a
//!   consistent read comes first, so recorded sets cost a read only);
//! - files whose names carry no id (uploads from before ids were in names, anything else
//!   under the prefix) are never touched.

use crate::domain::image_record::UPLOAD_PREFIX;
use crate::error::Result;
use crate::store::files::{FileStore, StoredFile};
use crate::store::ImageStore;
use crate::upload::naming::upload_file_set;

/// The shortest grace period accepted: the upload timeout (29 s) with a wide margin for
/// clock skew between this machine and the file store.
pub const MIN_GRACE_SECS: i64 = 300;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SweepOptions {
    /// Unix seconds.
    pub now: i64,
    /// Sets with a file newer than `now - grace_secs` are left alone.
    pub grace_secs: i64,
    /// Reports what would be removed; reads records without barring ids, removes nothing.
    pub dry_run: bool,
}

/// What a sweep found. `orphans` are the sets (path without extension) removed, or that
/// would be removed in a dry run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SweepReport {
    pub recorded_sets: u64,
    pub fresh_sets: u64,
    pub orphans: Vec<String>,
    pub files_removed: u64,
    /// Files under the prefix whose names carry no image id: never touched.
    pub other_files: u64,
}

struct FileSet {
    name: String,
    id: i64,
    files: Vec<StoredFile>,
}

/// Walks every file under the upload prefix (page by page, in path order, so each set's
/// files come together) and removes the orphan sets.
pub async fn sweep<R, F>(records: &R, files: &F, options: SweepOptions) -> Result<SweepReport>
where
    R: ImageStore + ?Sized,
    F: FileStore + ?Sized,
{
    let grace = options.grace_secs.max(MIN_GRACE_SECS);
    let cutoff = options.now - grace;
    let mut report = SweepReport::default();
    let mut current: Option<FileSet> = None;
    let mut next = None;
    loop {
        let page = files.list(UPLOAD_PREFIX, next).await?;
        for file in page.files {
            let Some((name, id)) = upload_file_set(&file.path) else {
                report.other_files += 1;
                continue;
            };
            match &mut current {
                Some(set) if set.name == name => set.files.push(file),
                _ => {
                    let name = name.to_string();
                    if let Some(done) = current.replace(FileSet {
                        name,
                        id,
                        files: vec![file],
                    }) {
                        judge(records, files, done, cutoff, options.dry_run, &mut report).await?;
                    }
                }
            }
        }
        next = page.next;
        if next.is_none() {
            break;
        }
    }
    if let Some(done) = current {
        judge(records, files, done, cutoff, options.dry_run, &mut report).await?;
    }
    Ok(report)
}

async fn judge<R, F>(
    records: &R,
    files: &F,
    set: FileSet,
    cutoff: i64,
    dry_run: bool,
    report: &mut SweepReport,
) -> Result<()>
where
    R: ImageStore + ?Sized,
    F: FileStore + ?Sized,
{
    if set.files.iter().any(|f| f.modified > cutoff) {
        report.fresh_sets += 1;
        return Ok(());
    }
    // A read first: most old sets are recorded, and a read is cheaper than the barring
    // write, which is only needed to remove a set.
    let mut record = records.find_image_any_account(set.id).await?;
    if record.is_none() && !dry_run {
        record = records.settle_image(set.id).await?;
    }
    let referenced = record.is_some_and(|image| {
        upload_file_set(&image.path).is_some_and(|(name, _)| name == set.name)
    });
    if referenced {
        report.recorded_sets += 1;
        return Ok(());
    }
    if !dry_run {
        for file in &set.files {
            files.delete(&file.path).await?;
            report.files_removed += 1;
        }
        tracing::info!(set = %set.name, files = set.files.len(), "orphan upload files removed");
    }
    report.orphans.push(set.name);
    Ok(())
}

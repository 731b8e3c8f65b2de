//! `sitehost files sweep`: removes the upload files no image record references (and the
//! embedded store's expired staged files).
//! `sitehost files restore`: after a table restore, brings back the deleted files of the
//! image records, from the versioned bucket.

use anyhow::{bail, Context, Result};
use clap::Subcommand;
use sitehost::clock::{Clock, SystemClock};
use sitehost::config::StoreKind;
use sitehost::upload::restore::restore_files;
use sitehost::upload::sweep::{sweep, SweepOptions, MIN_GRACE_SECS};

use crate::StoreArgs;

#[derive(Subcommand)]
pub enum FilesCommand {
    /// Removes upload files no image record references (left by an upload that died
    /// between its files and its record), and on the embedded store the staged files past
    /// their use (as the staging bucket expires them). Safe to run at any time.
    Sweep {
        /// Only file sets older than this are considered: `90m`, `1h`, `2d`, seconds
        /// without a unit; at least 5m (far above the upload timeout of 29 s).
        #[arg(long, default_value = "1h", value_parser = parse_age)]
        older_than: i64,
        /// Lists what would be removed; changes nothing.
        #[arg(long)]
        dry_run: bool,
        /// S3 bucket of the upload files, with --store dynamodb. Default: SITEHOST_BUCKET.
        #[arg(long)]
        bucket: Option<String>,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// After a point-in-time restore of the table: for every image record whose files are
    /// missing, restores them (original, variants, WebP and AVIF siblings) from their
    /// newest earlier version in the versioned bucket, and lists what it restored and what
    /// it could not.
    Restore {
        /// Lists what would be restored; changes nothing.
        #[arg(long)]
        dry_run: bool,
        /// S3 bucket of the upload files, with --store dynamodb. Default: SITEHOST_BUCKET.
        #[arg(long)]
        bucket: Option<String>,
        #[command(flatten)]
        store: StoreArgs,
    },
}

pub async fn run(command: FilesCommand) -> Result<()> {
    match command {
        FilesCommand::Sweep {
            older_than,
            dry_run,
            bucket,
            store,
        } => run_sweep(older_than, dry_run, bucket, store).await,
        FilesCommand::Restore {
            dry_run,
            bucket,
            store,
        } => run_restore(dry_run, bucket, store).await,
    }
}

/// The record store and the file store, with `--bucket` over SITEHOST_BUCKET.
async fn open(bucket: Option<String>, store: StoreArgs) -> Result<sitehost::store::Stores> {
    let mut config = store.config()?;
    config.bucket = bucket.or(config.bucket);
    if matches!(config.store, StoreKind::DynamoDb { .. }) && config.bucket.is_none() {
        bail!("--store dynamodb needs --bucket or SITEHOST_BUCKET");
    }
    Ok(sitehost::deployment::open_stores(&config).await?)
}

async fn run_restore(dry_run: bool, bucket: Option<String>, store: StoreArgs) -> Result<()> {
    let stores = open(bucket, store).await?;
    let files = stores
        .files
        .context("this store has no file store to restore (SITEHOST_BUCKET)")?;
    let report = restore_files(stores.records.as_ref(), files.as_ref(), dry_run).await?;
    let verb = if dry_run { "would restore" } else { "restored" };
    for path in &report.restored {
        println!("{verb} {path}");
    }
    for path in &report.lost {
        println!("cannot restore {path}: no earlier version");
    }
    println!(
        "{} images checked, {} with every file in place; {} files {verb}, {} without an earlier version",
        report.images,
        report.complete,
        report.restored.len(),
        report.lost.len()
    );
    if !report.lost.is_empty() {
        bail!("{} files could not be restored", report.lost.len());
    }
    Ok(())
}

async fn run_sweep(
    older_than: i64,
    dry_run: bool,
    bucket: Option<String>,
    store: StoreArgs,
) -> Result<()> {
    let now = SystemClock.now();
    // The embedded store's staged files expire as the staging bucket's do (its lifecycle
    // rule when deployed); `sitehost serve` sweeps them too, every few minutes.
    if let (StoreKind::Embedded { data_dir }, false) = (store.config()?.store, dry_run) {
        let local = sitehost::store::disk_files::LocalFiles::open(&data_dir)?;
        let (staged, incoming) = sitehost::server::staged_form::sweep(&local, now).await?;
        println!("{staged} expired staged files and {incoming} partly received ones removed");
    }
    let stores = open(bucket, store).await?;
    let options = SweepOptions {
        now,
        grace_secs: older_than,
        dry_run,
    };
    let files = stores
        .files
        .context("this store has no file store to sweep (SITEHOST_BUCKET)")?;
    let report = sweep(stores.records.as_ref(), files.as_ref(), options).await?;
    let verb = if dry_run { "would remove" } else { "removed" };
    for set in &report.orphans {
        println!("{verb} {set}.*");
    }
    println!(
        "{} orphan file sets ({} files removed); {} recorded and {} newer than {older_than} s kept; {} files without an image id left alone",
        report.orphans.len(),
        report.files_removed,
        report.recorded_sets,
        report.fresh_sets,
        report.other_files
    );
    Ok(())
}

/// `90s`, `30m`, `1h`, `2d` or plain seconds, at least the sweeper's minimum grace.
fn parse_age(text: &str) -> std::result::Result<i64, String> {
    let text = text.trim();
    let (number, unit) = match text.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => text.split_at(i),
        None => (text, "s"),
    };
    let scale = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3_600,
        "d" => 86_400,
        _ => return Err(format!("'{text}': use a number with s, m, h or d")),
    };
    let seconds = number
        .parse::<i64>()
        .ok()
        .and_then(|n| n.checked_mul(scale))
        .ok_or_else(|| format!("'{text}' is not a duration"))?;
    if seconds < MIN_GRACE_SECS {
        return Err(format!(
            "'{text}' is shorter than the minimum of {MIN_GRACE_SECS} s"
        ));
    }
    Ok(seconds)
}

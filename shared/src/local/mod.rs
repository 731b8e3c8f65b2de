//! Everything only the `sitehost` command needs, built with the `local` feature: the
//! embedded store (SQLite and files under a data directory), the local HTTP server with its
//! reference page, and the signing partner client. No Lambda function links it; nothing else
//! in the crate depends on it.

use std::path::Path;
use std::sync::Arc;

use crate::config::{Config, StoreKind};
use crate::error::Result;
use crate::store::Stores;

pub mod client;
pub mod connections;
pub mod disk_files;
pub mod docs;
mod file_answer;
pub mod server;
pub mod sqlite;
pub mod staged_form;

/// The stores a configuration names, either kind (the `sitehost` command's choice).
pub async fn open_stores(config: &Config) -> Result<Stores> {
    match &config.store {
        StoreKind::Embedded { data_dir } => Stores::embedded(data_dir),
        StoreKind::DynamoDb { table } => crate::deployment::dynamodb_stores(config, table).await,
    }
}

impl Stores {
    /// SQLite and files under one data directory.
    pub fn embedded(data_dir: &Path) -> Result<Stores> {
        Ok(Stores {
            records: Arc::new(sqlite::SqliteStore::open(data_dir)?),
            files: Some(Arc::new(disk_files::LocalFiles::open(data_dir)?)),
        })
    }
}

//! `sitehost businesses rekey-names`: the name order's one-off migration.

use anyhow::Result;
use clap::Subcommand;
use sitehost::config::StoreKind;
use sitehost::store::dynamo::DynamoStore;
use sitehost::store::sqlite::SqliteStore;

use crate::StoreArgs;

#[derive(Subcommand)]
pub enum BusinessesCommand {
    /// Once after upgrading a store written before names sorted accent-insensitively
    /// ("Éclair" among the E's): recomputes every business's name sort key. Safe to run
    /// again and while the API serves (DynamoDB: one Scan of the table).
    RekeyNames {
        #[command(flatten)]
        store: StoreArgs,
    },
}

pub async fn run(command: BusinessesCommand) -> Result<()> {
    let BusinessesCommand::RekeyNames { store } = command;
    let config = store.config()?;
    let count = match &config.store {
        StoreKind::DynamoDb { table } => {
            let aws = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
            let dynamo = DynamoStore::new(aws_sdk_dynamodb::Client::new(&aws), table.clone());
            dynamo.rekey_business_names().await?
        }
        StoreKind::Embedded { data_dir } => SqliteStore::open(data_dir)?.rekey_business_names()?,
    };
    println!("{count} businesses have their name sort key rewritten");
    Ok(())
}

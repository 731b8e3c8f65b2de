//! `sitehost images mark-logos`: the DynamoDB store's one-off logo-mark pass.

use anyhow::{bail, Result};
use clap::Subcommand;
use sitehost::config::StoreKind;
use sitehost::store::dynamo::DynamoStore;

use crate::StoreArgs;

#[derive(Subcommand)]
pub enum ImagesCommand {
    /// DynamoDB only, once after upgrading a stack whose businesses were written before
    /// images carried logo marks: marks each business's logo image, so that deleting it is
    /// refused (409) while it is a logo. Reads the whole table once (a Scan); safe to run
    /// again and while the API serves.
    MarkLogos {
        #[command(flatten)]
        store: StoreArgs,
    },
}

pub async fn run(command: ImagesCommand) -> Result<()> {
    let ImagesCommand::MarkLogos { store } = command;
    let config = store.config()?;
    let StoreKind::DynamoDb { table } = &config.store else {
        bail!(
            "mark-logos is for --store dynamodb: the embedded store checks a deleted image \
             against the businesses themselves, so it has nothing to mark"
        );
    };
    let aws = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    let dynamo = DynamoStore::new(aws_sdk_dynamodb::Client::new(&aws), table.clone());
    let found = dynamo.mark_existing_logos().await?;
    println!(
        "{} businesses with a logo: {} logos marked, {} changed meanwhile (marked by that \
         write), {} missing",
        found.businesses,
        found.marked,
        found.changed,
        found.missing.len()
    );
    for (business, image) in &found.missing {
        println!("business {business}: its logo image {image} is gone or another account's");
    }
    Ok(())
}

//! `sitehost locations backfill`: makes every stored location findable by its id.

use anyhow::Result;
use clap::Subcommand;

use crate::StoreArgs;

#[derive(Subcommand)]
pub enum LocationsCommand {
    /// Once after upgrading a stack whose businesses got nested locations before
    /// `/api/v2/locations/` existed: writes each location's pointer to its business
    /// (DynamoDB: one Scan of the table; the embedded store has them already and only
    /// counts). Safe to run again and while the API serves.
    Backfill {
        #[command(flatten)]
        store: StoreArgs,
    },
}

pub async fn run(command: LocationsCommand) -> Result<()> {
    let LocationsCommand::Backfill { store } = command;
    let records = store.records().await?;
    let (businesses, locations) = records.backfill_location_pointers().await?;
    println!("{locations} locations of {businesses} businesses are findable by id");
    Ok(())
}

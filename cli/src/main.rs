//! `sitehost`: the local server, key administration and image tools. This file holds the
//! top-level command line, the store options every command shares, and the dispatch; each
//! subcommand lives in its own module under `commands/`.

mod commands;
mod local_lambda;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};
use sitehost::config::{Config, Defaults};
use sitehost::store::{SharedStore, Stores};

use commands::{businesses, events, files, images, keys, lambda, locations, serve, variants};

#[derive(Parser)]
#[command(
    name = "sitehost",
    version,
    about = "The sitehost partner API (v2): local server and administration"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serves the whole API (and the stored files) over HTTP.
    Serve(serve::ServeArgs),
    /// Runs the upload pipeline on a local file, writes its variants to OUTDIR and prints
    /// the time of each stage (the image benchmark).
    Variants(variants::VariantsArgs),
    /// Manages API keys.
    Keys {
        #[command(subcommand)]
        command: keys::KeysCommand,
    },
    /// Maintains the upload files.
    Files {
        #[command(subcommand)]
        command: files::FilesCommand,
    },
    /// Maintains the image records.
    Images {
        #[command(subcommand)]
        command: images::ImagesCommand,
    },
    /// Maintains the business records.
    Businesses {
        #[command(subcommand)]
        command: businesses::BusinessesCommand,
    },
    /// Maintains the locations.
    Locations {
        #[command(subcommand)]
        command: locations::LocationsCommand,
    },
    /// Runs the function binaries under a local Lambda Runtime API (scripts/invoke).
    #[command(hide = true)]
    Lambda {
        #[command(subcommand)]
        command: lambda::LambdaCommand,
    },
    /// API Gateway events for the Lambda functions.
    Events {
        #[command(subcommand)]
        command: events::EventsCommand,
    },
}

/// Which store to use: the same options for every command.
#[derive(Args, Clone)]
struct StoreArgs {
    /// `embedded` (SQLite and files under --data-dir) or `dynamodb` (through the normal AWS
    /// configuration; AWS_ENDPOINT_URL works). Default: SITEHOST_STORE, else embedded.
    #[arg(long)]
    store: Option<String>,
    /// Data directory of the embedded store. Default: SITEHOST_DATA_DIR, else .sitehost.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// DynamoDB table, with --store dynamodb. Default: SITEHOST_TABLE.
    #[arg(long)]
    table: Option<String>,
}

impl StoreArgs {
    /// The one reading of the configuration: the command's defaults and these options,
    /// which win over the environment.
    fn config(&self) -> Result<Config> {
        Config::from_env(Defaults {
            store_choice: self.store.clone(),
            data_dir_choice: self.data_dir.clone(),
            table_choice: self.table.clone(),
            ..Defaults::command()
        })
        .context("reading the configuration")
    }

    async fn open(&self) -> Result<(Config, Stores)> {
        let config = self.config()?;
        let stores = sitehost::deployment::open_stores(&config).await?;
        Ok((config, stores))
    }

    async fn records(&self) -> Result<SharedStore> {
        Ok(self.open().await?.1.records)
    }
}

async fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Serve(args) => serve::run(args).await,
        Command::Variants(args) => variants::run(args),
        Command::Keys { command } => keys::run(command).await,
        Command::Files { command } => files::run(command).await,
        Command::Images { command } => images::run(command).await,
        Command::Locations { command } => locations::run(command).await,
        Command::Businesses { command } => businesses::run(command).await,
        Command::Lambda { command } => lambda::run(command).await,
        Command::Events { command } => events::run(command),
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let log_settings = sitehost::config::LogSettings::from_env();
    sitehost::api::logging::init_cli(&log_settings.as_ref().cloned().unwrap_or_default());
    if let Err(error) = log_settings {
        eprintln!("sitehost: {error}");
        return ExitCode::FAILURE;
    }
    match run(Cli::parse()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            // `{:#}`: the error with its causes, `context: cause`.
            eprintln!("sitehost: {error:#}");
            ExitCode::FAILURE
        }
    }
}

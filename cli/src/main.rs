//! `sitehost`: the local server, key administration and image tools.

mod events;
mod lambda_runtime;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, Parser, Subcommand};
use serde_json::json;
use sitehost::account::{ApiKey, NewKey};
use sitehost::api::App;
use sitehost::clock::{format_timestamp, Clock, SystemClock};
use sitehost::config::{Config, Defaults, StoreKind};
use sitehost::store::{SharedStore, Stores};

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
    Serve {
        /// Address to listen on.
        #[arg(long, default_value = "127.0.0.1:3000", env = "SITEHOST_ADDR")]
        addr: SocketAddr,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Runs the upload pipeline on a local file, writes its variants to OUTDIR and prints
    /// the time of each stage (the image benchmark).
    Variants { file: PathBuf, outdir: PathBuf },
    /// Manages API keys.
    Keys {
        #[command(subcommand)]
        command: KeysCommand,
    },
    /// Maintains the upload files.
    Files {
        #[command(subcommand)]
        command: FilesCommand,
    },
    /// Maintains the image records.
    Images {
        #[command(subcommand)]
        command: ImagesCommand,
    },
    /// Runs the function binaries under a local Lambda Runtime API (scripts/invoke).
    #[command(hide = true)]
    Lambda {
        #[command(subcommand)]
        command: lambda_runtime::LambdaCommand,
    },
    /// API Gateway events for the Lambda functions.
    Events {
        #[command(subcommand)]
        command: EventsCommand,
    },
}

#[derive(Subcommand)]
enum EventsCommand {
    /// Re-signs API Gateway HTTP API (payload 2.0) event files for the current time: a
    /// fresh OAuth timestamp and nonce, signed as the functions verify it, for
    /// `sam local invoke -e` and `scripts/invoke`. One file (or standard input) is printed
    /// to standard output; several need --in-place or --out-dir. The signed host is the
    /// event's X-Forwarded-Host when it came through our CloudFront, else its Host; --host
    /// replaces that header. Came through CloudFront means: its X-Origin-Verify holds
    /// SITEHOST_ORIGIN_VERIFY, the function's origin secret, when that is set (another value
    /// is signed for Host, as such a function verifies it, with a warning); when it is not
    /// set, the header's value is not checked, any X-Origin-Verify counts, and a note says
    /// so (a function whose secret differs then answers 401).
    Sign {
        /// API key (from `sitehost keys create`).
        #[arg(long, env = "SITEHOST_KEY")]
        key: String,
        /// Its secret.
        #[arg(long, env = "SITEHOST_SECRET", hide_env_values = true)]
        secret: String,
        /// Sign for this host (and write it into the event) instead of the event's own.
        #[arg(long)]
        host: Option<String>,
        /// Scheme signed unless the event came through CloudFront (then its
        /// X-Forwarded-Proto): https, as the functions assume on Lambda.
        #[arg(long, default_value = "https")]
        scheme: String,
        /// Overwrites each file.
        #[arg(long, conflicts_with = "out_dir")]
        in_place: bool,
        /// Writes each signed file into DIR under its own name.
        #[arg(long, value_name = "DIR")]
        out_dir: Option<PathBuf>,
        /// Event files; standard input when none.
        files: Vec<PathBuf>,
    },
}

#[derive(Subcommand)]
enum FilesCommand {
    /// Removes upload files no image record references (left by an upload that died
    /// between its files and its record). Safe to run at any time.
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
}

#[derive(Subcommand)]
enum ImagesCommand {
    /// DynamoDB only, once after upgrading a stack whose businesses were written before
    /// images carried logo marks: marks each business's logo image, so that deleting it is
    /// refused (409) while it is a logo. Reads the whole table once (a Scan); safe to run
    /// again and while the API serves.
    MarkLogos {
        #[command(flatten)]
        store: StoreArgs,
    },
}

/// `90s`, `30m`, `1h`, `2d` or plain seconds, at least the sweeper's minimum grace.
fn parse_age(text: &str) -> std::result::Result<i64, String> {
    use sitehost::upload::sweep::MIN_GRACE_SECS;
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

async fn sweep_files(
    older_than: i64,
    dry_run: bool,
    bucket: Option<String>,
    store_args: StoreArgs,
) -> Result<()> {
    use sitehost::upload::sweep::{sweep, SweepOptions};
    let mut config = store_args.config()?;
    config.bucket = bucket.or(config.bucket);
    if matches!(config.store, StoreKind::DynamoDb { .. }) && config.bucket.is_none() {
        bail!("--store dynamodb needs --bucket or SITEHOST_BUCKET");
    }
    let stores = sitehost::local::open_stores(&config).await?;
    let options = SweepOptions {
        now: SystemClock.now(),
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

#[derive(Subcommand)]
enum KeysCommand {
    /// Creates a key (and its account, if needed).
    Create {
        /// Account (private label) name.
        #[arg(long)]
        account: String,
        /// Restricts the key to one partner_sub_id.
        #[arg(long)]
        sub_id: Option<String>,
        /// The user_id records created with the key carry (allocated when absent).
        #[arg(long)]
        user_id: Option<i64>,
        /// Prints one JSON object instead of text.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Lists keys (secrets are not shown).
    List {
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Revokes a key at once.
    Revoke {
        key: String,
        #[command(flatten)]
        store: StoreArgs,
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
        let stores = sitehost::local::open_stores(&config).await?;
        Ok((config, stores))
    }

    async fn records(&self) -> Result<SharedStore> {
        Ok(self.open().await?.1.records)
    }
}

fn key_json(key: &ApiKey, with_secret: bool) -> serde_json::Value {
    let mut value = json!({
        "key": key.key,
        "account_id": key.account_id,
        "user_id": key.user_id,
        "partner_sub_id": key.partner_sub_id,
        "revoked": key.revoked,
        "created": format_timestamp(key.created),
    });
    if with_secret {
        value["secret"] = json!(key.secret);
    }
    value
}

async fn create_key(
    store: &SharedStore,
    account: &str,
    sub_id: Option<String>,
    user_id: Option<i64>,
) -> Result<ApiKey> {
    let account = store.ensure_account(account).await?;
    let new = NewKey::generate(account.id, user_id, sub_id, SystemClock.now());
    Ok(store.create_key(new).await?)
}

async fn serve(addr: SocketAddr, store_args: StoreArgs) -> Result<()> {
    let (config, stores) = store_args.open().await?;
    let store = &stores.records;
    store.prepare_nonce_memory().await?;
    if store.list_keys().await?.is_empty() {
        let key = create_key(store, "default", None, None).await?;
        println!("No API key existed, so one was created (shown only this once):");
        println!("  key:    {}", key.key);
        println!("  secret: {}", key.secret);
    }
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    let local = listener.local_addr()?;
    println!("sitehost listening on http://{local}/api/v2/");
    bench_switches();
    let app = Arc::new(App::new(stores, config)?);
    let shutdown = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    sitehost::local::server::serve(app, listener, shutdown).await;
    Ok(())
}

/// SITEHOST_BENCH_NO_WEBP_SIBLINGS=1: uploads (`serve`) and `variants` make no WebP
/// siblings, for measuring their cost against the same build (docs/image-pipeline-bench.md).
fn bench_switches() {
    if std::env::var_os("SITEHOST_BENCH_NO_WEBP_SIBLINGS").is_some_and(|v| v == "1") {
        sitehost::upload::pipeline::bench_without_webp_siblings();
        eprintln!(
            "SITEHOST_BENCH_NO_WEBP_SIBLINGS=1: no WebP siblings are made (measurement only)"
        );
    }
}

fn variants(file: &std::path::Path, outdir: &std::path::Path) -> Result<()> {
    use sitehost::upload::pipeline::{process_file_timed, write_variants};
    bench_switches();
    let limits = Config::from_env(Defaults::command())?.image_limits;
    let processed = process_file_timed(file, &limits).map_err(|e| match e {
        sitehost::ApiError::Validation(fields) => anyhow!("{}: {fields:?}", file.display()),
        other => anyhow::Error::new(other).context(file.display().to_string()),
    })?;
    let paths = write_variants(&processed, outdir)?;
    println!(
        "{} {}x{} ({})",
        processed.format.name(),
        processed.width,
        processed.height,
        processed.mimetype
    );
    for (variant, path) in processed.variants.iter().zip(&paths) {
        println!(
            "  {:<9} {:>4}x{:<4} {:>9} bytes  {}",
            variant.name,
            variant.width,
            variant.height,
            variant.bytes.len(),
            path.display()
        );
        if let Some(webp) = &variant.webp {
            println!(
                "  {:<9} {:>9} {:>9} bytes  {}.webp (WebP sibling)",
                "",
                "",
                webp.len(),
                path.display()
            );
        } else if processed.extension != "webp" {
            // What the frontend's first request of this sibling costs (operations::siblings):
            // made from the stored variant, as image-sibling and `serve` make it.
            let started = std::time::Instant::now();
            let webp = sitehost::upload::pipeline::webp_sibling_of_variant(&variant.bytes, &limits)
                .map_err(|e| anyhow::Error::new(e).context(format!("{}.webp", path.display())))?;
            let took = started.elapsed();
            let sibling = format!("{}.webp", path.display());
            std::fs::write(&sibling, &webp).with_context(|| format!("writing {sibling}"))?;
            println!(
                "  {:<9} {:>9} {:>9} bytes  {sibling} (WebP sibling, made on first request in {:.1} ms)",
                "",
                "",
                webp.len(),
                took.as_secs_f64() * 1000.0
            );
        }
    }
    println!("{}", processed.timings);
    Ok(())
}

async fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Serve { addr, store } => serve(addr, store).await,
        Command::Variants { file, outdir } => variants(&file, &outdir),
        Command::Files {
            command:
                FilesCommand::Sweep {
                    older_than,
                    dry_run,
                    bucket,
                    store,
                },
        } => sweep_files(older_than, dry_run, bucket, store).await,
        Command::Images {
            command: ImagesCommand::MarkLogos { store },
        } => mark_logos(store).await,
        Command::Lambda { command } => lambda_runtime::command(command).await,
        Command::Events {
            command:
                EventsCommand::Sign {
                    key,
                    secret,
                    host,
                    scheme,
                    in_place,
                    out_dir,
                    files,
                },
        } => {
            // The function's origin secret, read as every setting is.
            let origin_secret = Config::from_env(Defaults::command())
                .context("reading the configuration (SITEHOST_ORIGIN_VERIFY)")?
                .origin_verify;
            let signer = events::Signer {
                key: &key,
                secret: &secret,
                host: host.as_deref(),
                scheme: &scheme,
                now: SystemClock.now(),
                origin_secret: origin_secret.as_ref(),
            };
            let output = match (in_place, out_dir) {
                (true, _) => events::Output::InPlace,
                (false, Some(dir)) => events::Output::Dir(dir),
                (false, None) => events::Output::Stdout,
            };
            events::sign_files(&files, &signer, &output)
        }
        Command::Keys { command } => match command {
            KeysCommand::Create {
                account,
                sub_id,
                user_id,
                json,
                store,
            } => {
                let store = store.records().await?;
                let key = create_key(&store, &account, sub_id, user_id).await?;
                if json {
                    println!("{}", key_json(&key, true));
                } else {
                    println!("key:        {}", key.key);
                    println!("secret:     {}", key.secret);
                    println!("account_id: {}", key.account_id);
                    println!("user_id:    {}", key.user_id);
                }
                Ok(())
            }
            KeysCommand::List { json, store } => {
                let store = store.records().await?;
                let keys = store.list_keys().await?;
                if json {
                    let list: Vec<_> = keys.iter().map(|k| key_json(k, false)).collect();
                    println!("{}", serde_json::Value::Array(list));
                } else {
                    for k in keys {
                        println!(
                            "{}  account {}  user {}  sub {}  {}",
                            k.key,
                            k.account_id,
                            k.user_id,
                            k.partner_sub_id.as_deref().unwrap_or("-"),
                            if k.revoked { "revoked" } else { "active" }
                        );
                    }
                }
                Ok(())
            }
            KeysCommand::Revoke { key, store } => {
                let store = store.records().await?;
                if store.revoke_key(&key).await? {
                    println!("revoked {key}");
                    Ok(())
                } else {
                    Err(anyhow!("no key {key}"))
                }
            }
        },
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

/// `sitehost images mark-logos`: the DynamoDB store's one-off logo-mark pass.
async fn mark_logos(store: StoreArgs) -> Result<()> {
    let config = store.config()?;
    let StoreKind::DynamoDb { table } = &config.store else {
        bail!(
            "mark-logos is for --store dynamodb: the embedded store checks a deleted image \
             against the businesses themselves, so it has nothing to mark"
        );
    };
    let aws = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    let dynamo = sitehost::store::dynamo::DynamoStore::new(
        aws_sdk_dynamodb::Client::new(&aws),
        table.clone(),
    );
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

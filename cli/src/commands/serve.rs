//! `sitehost serve`: the whole API (and the stored files) over HTTP, on the chosen store.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::Args;
use sitehost::api::App;

use super::keys::create_key;
use super::variants::bench_switches;
use crate::StoreArgs;

#[derive(Args)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:3000", env = "SITEHOST_ADDR")]
    addr: SocketAddr,
    #[command(flatten)]
    store: StoreArgs,
}

pub async fn run(args: ServeArgs) -> Result<()> {
    let ServeArgs { addr, store } = args;
    let (mut config, stores) = store.open().await?;
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
    // The first line's address is the API root, which answers unsigned with every resource
    // and its list endpoint; tests and scripts read it. One write for the three lines: a
    // reader that stops after the first (closing the pipe) must not fail a later print.
    println!(
        "sitehost listening on http://{local}/api/v2/\n  \
         API root (every resource and its list endpoint): http://{local}/api/v2/\n  \
         API reference: http://{local}/docs/"
    );
    bench_switches(&mut config.image_limits);
    let app = Arc::new(App::new(stores, config)?);
    let shutdown = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    sitehost::server::serve(app, listener, shutdown).await;
    Ok(())
}

//! `sitehost keys`: creates, lists and revokes API keys.

use anyhow::{anyhow, Result};
use clap::Subcommand;
use serde_json::json;
use sitehost::clock::{format_timestamp, Clock, SystemClock};
use sitehost::domain::account::{ApiKey, NewKey};
use sitehost::store::SharedStore;

use crate::StoreArgs;

#[derive(Subcommand)]
pub enum KeysCommand {
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

pub async fn run(command: KeysCommand) -> Result<()> {
    match command {
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
    }
}

/// A key (and its account, if needed); `serve` makes the first one this way too.
pub async fn create_key(
    store: &SharedStore,
    account: &str,
    sub_id: Option<String>,
    user_id: Option<i64>,
) -> Result<ApiKey> {
    let account = store.ensure_account(account).await?;
    let new = NewKey::generate(account.id, user_id, sub_id, SystemClock.now());
    Ok(store.create_key(new).await?)
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

//! Sites: a create or an update is one transaction with the address items, the list
//! entries and the counters (and a create's `Idempotency-Key` answer); lists are one scope
//! `Query` (docs/dynamodb-design.md, "Sites and posts").

use std::collections::HashMap;

use async_trait::async_trait;
use aws_sdk_dynamodb::types::{Delete, ReturnConsumedCapacity, Select, TransactWriteItem, Update};
use futures_util::future::try_join_all;

use super::items::{self, n, s, text_sort_key, Item, Kind, Seq, PK};
use super::reads::ScopeList;
use super::site_records::{site_from, site_item};
use super::transactions::TxOutcome;
use super::{aws_error, backoff, build_error, busy, log_capacity, spread, DynamoStore};
use super::{CONSISTENT_READS, MAX_ATTEMPTS};
use crate::domain::site::{title_key, NewSite, Site, SitePatch, SiteQuery};
use crate::error::{ApiError, Result};
use crate::store::held_key::Created;
use crate::store::rules::ScopeChange;
use crate::store::sites::{
    address_in_use, check_write_size, host_in_use, site_filter_scope, site_scopes,
    site_write_actions, HoldingChange, MAX_WRITE_ACTIONS,
};
use crate::store::{Page, SiteStore};

/// Attempts of one update transaction cancelled for conflicts before the update reads the
/// site again.
const UPDATE_TX_ATTEMPTS: u32 = 3;

fn cancelled(what: &str, codes: &[String]) -> ApiError {
    ApiError::internal(format!("dynamodb {what} cancelled: {codes:?}"))
}

/// The 409 of a cancelled write whose holding actions start at `first`: a host another
/// account holds, or a path another site holds. `None` when no take failed its condition.
fn holding_refusal(
    site: &Site,
    change: &HoldingChange,
    first: usize,
    codes: &[String],
) -> Option<ApiError> {
    let failed = |index: usize| TxOutcome::failed_condition(codes, first + index);
    let hosts = change.hosts_taken.len();
    if let Some(host) = (0..hosts).find(|&i| failed(i)) {
        return Some(host_in_use(&change.hosts_taken[host]));
    }
    (change.path_taken.is_some() && failed(hosts)).then(|| address_in_use(&site.address))
}

/// The `by_name` sort key of a site: its title's.
fn site_nk(site: &Site) -> String {
    text_sort_key(title_key(&site.title), site.id)
}

impl DynamoStore {
    async fn read_site(&self, account_id: i64, id: i64) -> Result<Option<(Site, i64)>> {
        let Some(item) = self.get_item(items::site_key(id)).await? else {
            return Ok(None);
        };
        let (site, version) = site_from(&item)?;
        Ok((site.account_id == account_id).then_some((site, version)))
    }

    /// A host's item (`items::site_host_key`) holds `acct`, the account whose active
    /// sites are at the host, and `n`, how many of them. Taken on the condition that no
    /// other account's site holds it (`acct` absent or this account, or `n` 0).
    fn take_host(&self, account_id: i64, host: &str) -> Result<TransactWriteItem> {
        let update = Update::builder()
            .table_name(&self.table)
            .set_key(Some(items::site_host_key(host)))
            .update_expression("SET #acct = :acct ADD #n :one")
            .condition_expression("attribute_not_exists(#acct) OR #acct = :acct OR #n <= :zero")
            .expression_attribute_names("#acct", "acct")
            .expression_attribute_names("#n", "n")
            .expression_attribute_values(":acct", n(account_id))
            .expression_attribute_values(":one", n(1))
            .expression_attribute_values(":zero", n(0))
            .build()
            .map_err(build_error)?;
        Ok(TransactWriteItem::builder().update(update).build())
    }

    /// Gives up one site's share of a host: the item stays, with `n` one less (at 0 any
    /// account may take it).
    fn release_host(&self, account_id: i64, host: &str) -> Result<TransactWriteItem> {
        let update = Update::builder()
            .table_name(&self.table)
            .set_key(Some(items::site_host_key(host)))
            .update_expression("ADD #n :minus")
            .condition_expression("#acct = :acct AND #n > :zero")
            .expression_attribute_names("#acct", "acct")
            .expression_attribute_names("#n", "n")
            .expression_attribute_values(":acct", n(account_id))
            .expression_attribute_values(":minus", n(-1))
            .expression_attribute_values(":zero", n(0))
            .build()
            .map_err(build_error)?;
        Ok(TransactWriteItem::builder().update(update).build())
    }

    /// Takes a path (bare host and directory) for a site: only when no site holds it.
    fn take_path(&self, path: &str, site_id: i64) -> Result<TransactWriteItem> {
        let mut item = items::site_path_key(path);
        item.insert("site_id".into(), n(site_id));
        self.put_new(item)
    }

    /// Gives up a site's path (it holds it: only the active site does).
    fn release_path(&self, path: &str, site_id: i64) -> Result<TransactWriteItem> {
        let delete = Delete::builder()
            .table_name(&self.table)
            .set_key(Some(items::site_path_key(path)))
            .condition_expression("#site = :site")
            .expression_attribute_names("#site", "site_id")
            .expression_attribute_values(":site", n(site_id))
            .build()
            .map_err(build_error)?;
        Ok(TransactWriteItem::builder().delete(delete).build())
    }

    /// The actions of a change of what a site holds: the hosts taken, then the path taken
    /// (so that a failed condition's index says which: [`holding_refusal`]), then what it
    /// gives up.
    fn holding_actions(
        &self,
        account_id: i64,
        site_id: i64,
        change: &HoldingChange,
    ) -> Result<Vec<TransactWriteItem>> {
        let mut actions = Vec::with_capacity(change.len());
        for host in &change.hosts_taken {
            actions.push(self.take_host(account_id, host)?);
        }
        if let Some(path) = &change.path_taken {
            actions.push(self.take_path(path, site_id)?);
        }
        for host in &change.hosts_released {
            actions.push(self.release_host(account_id, host)?);
        }
        if let Some(path) = &change.path_released {
            actions.push(self.release_path(path, site_id)?);
        }
        Ok(actions)
    }

    /// The entries of a listed scope, counted: one `Query` (`Select COUNT`, all pages) of
    /// each entry shard, all at once.
    async fn count_entries(&self, kind: Kind, account_id: i64, scope: &str) -> Result<u64> {
        let shards = (0..spread::ENTRY_SHARDS).map(|shard| async move {
            let pk = items::entries_pk(kind, account_id, scope, shard);
            let mut count: u64 = 0;
            let mut start: Option<Item> = None;
            loop {
                let out = self
                    .client
                    .query()
                    .table_name(&self.table)
                    .key_condition_expression("#pk = :pk")
                    .expression_attribute_names("#pk", PK)
                    .expression_attribute_values(":pk", s(pk.as_str()))
                    .select(Select::Count)
                    .consistent_read(CONSISTENT_READS)
                    .set_exclusive_start_key(start.take())
                    .return_consumed_capacity(ReturnConsumedCapacity::Total)
                    .send()
                    .await
                    .map_err(|e| aws_error("Query (count entries)", e))?;
                log_capacity("Query", out.consumed_capacity());
                count += u64::try_from(out.count).unwrap_or(0);
                match out.last_evaluated_key {
                    Some(key) if !key.is_empty() => start = Some(key),
                    _ => return Ok::<_, ApiError>(count),
                }
            }
        });
        Ok(try_join_all(shards).await?.into_iter().sum())
    }

    /// The records of `ids`, in their order (`BatchGetItem`).
    pub(super) async fn records_in_order(&self, kind: Kind, ids: Vec<i64>) -> Result<Vec<Item>> {
        let keys = ids.iter().map(|&id| items::record_key(kind, id)).collect();
        let mut found: HashMap<i64, Item> = HashMap::with_capacity(ids.len());
        for item in self.batch_get(keys).await? {
            found.insert(items::get_n(&item, "id")?, item);
        }
        Ok(ids.iter().filter_map(|id| found.remove(id)).collect())
    }

    /// One page of a listed scope, its total counted from the entries.
    async fn listed_page(&self, list: ScopeList<'_>) -> Result<(Vec<Item>, u64)> {
        let total = self
            .count_entries(list.kind, list.account_id, list.scope)
            .await?;
        if list.offset >= total {
            return Ok((Vec::new(), total));
        }
        let ids = self.scope_ids(&list).await?;
        Ok((self.records_in_order(list.kind, ids).await?, total))
    }
}

/// One attempt's update of a site: as read, as patched, and the version its write is
/// conditioned on.
struct SiteChange<'a> {
    account_id: i64,
    before: &'a Site,
    after: &'a Site,
    version: i64,
}

impl DynamoStore {
    /// The versioned put, what the site takes and gives up of hosts and paths (from index
    /// 1, so that a failed condition says which), then the list entries and counters the
    /// site leaves, joins or is retitled in.
    fn site_update_actions(
        &self,
        change: &SiteChange<'_>,
        holdings: &HoldingChange,
        lane: u32,
    ) -> Result<Vec<TransactWriteItem>> {
        let (account_id, id) = (change.account_id, change.after.id);
        let (before, site) = (change.before, change.after);
        let (then, after) = (site_scopes(before), site_scopes(site));
        let counted = ScopeChange::between(&then.counted, &after.counted);
        let listed = ScopeChange::between(&then.listed, &after.listed);
        let nk = site_nk(site);
        let retitled = nk != site_nk(before);
        let entry = |scope: &str| items::entry_key(Kind::Site, account_id, scope, id);
        let counter = |scope: &str| items::counter_key(Kind::Site, account_id, scope, lane);
        let version = change.version;
        let mut actions = vec![self.put_if_version(site_item(site, version + 1), version)?];
        actions.extend(self.holding_actions(account_id, id, holdings)?);
        for scope in &counted.left {
            actions.push(self.delete(entry(scope))?);
            actions.push(self.add(counter(scope), -1)?);
        }
        for scope in &listed.left {
            actions.push(self.delete(entry(scope))?);
        }
        for (scopes, change, is_counted) in [
            (&after.counted, &counted, true),
            (&after.listed, &listed, false),
        ] {
            for scope in scopes {
                let joined = change.joined.contains(&scope);
                if joined || retitled {
                    let item = items::entry_item(Kind::Site, account_id, scope, id, Some(&nk));
                    actions.push(self.put(item)?);
                }
                if joined && is_counted {
                    actions.push(self.add(counter(scope), 1)?);
                }
            }
        }
        Ok(actions)
    }
}

#[async_trait]
impl SiteStore for DynamoStore {
    async fn create_site(&self, account_id: i64, new: NewSite, now: i64) -> Result<Site> {
        let id = self.next_id(Seq::Site).await?;
        let site = new.into_site(id, account_id, now);
        check_write_size(None, &site)?;
        let scopes = site_scopes(&site);
        let nk = site_nk(&site);
        let holdings = HoldingChange::between(None, &site);
        // What the site holds goes first, so that a failed condition's index says which.
        let actions = || {
            let lane = spread::random_lane();
            let mut actions = self.holding_actions(account_id, id, &holdings)?;
            actions.push(self.put_new(site_item(&site, 1))?);
            // An entry in every scope; a counted scope's counter is raised too.
            let counted = scopes.counted.iter().map(|scope| (scope, true));
            for (scope, counts) in counted.chain(scopes.listed.iter().map(|scope| (scope, false))) {
                actions.push(self.put(items::entry_item(
                    Kind::Site,
                    account_id,
                    scope,
                    id,
                    Some(&nk),
                ))?);
                if counts {
                    actions.push(
                        self.add(items::counter_key(Kind::Site, account_id, scope, lane), 1)?,
                    );
                }
            }
            Ok(actions)
        };
        // The key's answer goes in the transaction as its last action when it fits; a site
        // at DynamoDB's limit without it names itself in the claim first instead, and a
        // takeover of the claim answers with the site if it was made.
        let outcome = if site_write_actions(None, &site) < MAX_WRITE_ACTIONS {
            let created = Some(Created::Site(id));
            self.transact_create("create site", MAX_ATTEMPTS, created, actions)
                .await?
        } else {
            self.name_held_site(id).await?;
            self.transact("create site", MAX_ATTEMPTS, actions).await?
        };
        match outcome {
            TxOutcome::Committed => Ok(site),
            TxOutcome::Busy(_) => Err(busy("create site")),
            TxOutcome::Cancelled(codes) => Err(holding_refusal(&site, &holdings, 0, &codes)
                .unwrap_or_else(|| cancelled("create site", &codes))),
        }
    }

    async fn get_site(&self, account_id: i64, id: i64) -> Result<Option<Site>> {
        Ok(self.read_site(account_id, id).await?.map(|(site, _)| site))
    }

    async fn update_site(
        &self,
        account_id: i64,
        id: i64,
        restrict_sub_id: Option<&str>,
        patch: SitePatch,
        now: i64,
    ) -> Result<Option<Site>> {
        for attempt in 1..=MAX_ATTEMPTS {
            let Some((mut site, version)) = self.read_site(account_id, id).await? else {
                return Ok(None);
            };
            if !site.visible_to(restrict_sub_id) {
                return Ok(None);
            }
            let before = site.clone();
            if !site.apply(&patch, now) {
                return Ok(Some(site));
            }
            check_write_size(Some(&before), &site)?;
            let holdings = HoldingChange::between(Some(&before), &site);
            let change = SiteChange {
                account_id,
                before: &before,
                after: &site,
                version,
            };
            let actions = || self.site_update_actions(&change, &holdings, spread::random_lane());
            let codes = match self
                .transact("update site", UPDATE_TX_ATTEMPTS, actions)
                .await?
            {
                TxOutcome::Committed => return Ok(Some(site)),
                TxOutcome::Busy(codes) => codes,
                TxOutcome::Cancelled(codes) if TxOutcome::failed_condition(&codes, 0) => codes,
                TxOutcome::Cancelled(codes) => {
                    return Err(holding_refusal(&site, &holdings, 1, &codes)
                        .unwrap_or_else(|| cancelled("update site", &codes)));
                }
            };
            tracing::debug!(id, attempt, ?codes, "site update lost a race; retrying");
            backoff(attempt, self.stretch).await;
        }
        tracing::warn!(id, "site update lost its race {MAX_ATTEMPTS} times");
        Err(busy("update site"))
    }

    async fn list_sites(&self, account_id: i64, query: &SiteQuery) -> Result<Page<Site>> {
        let (scope, counted) = site_filter_scope(&query.filter);
        let list = ScopeList {
            kind: Kind::Site,
            account_id,
            scope: &scope,
            by_name: query.order.by_title(),
            descending: query.order.descending(),
            offset: query.offset,
            limit: query.limit,
        };
        let (records, total_count) = if counted {
            self.list_page(list).await?
        } else {
            self.listed_page(list).await?
        };
        let items = records
            .iter()
            .map(|item| site_from(item).map(|(site, _)| site))
            .collect::<Result<_>>()?;
        Ok(Page { items, total_count })
    }
}

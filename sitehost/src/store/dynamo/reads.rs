//! Reads: `GetItem`, whole partitions, and one page of a scope's list (entry shards merged,
//! records by `BatchGetItem`, the total from the counter lanes), all consistent.

use std::collections::HashMap;

use anyhow::Context;
use aws_sdk_dynamodb::types::{KeysAndAttributes, ReturnConsumedCapacity};
use aws_sdk_dynamodb::Client;
use futures_util::future::try_join_all;
use tokio::task::JoinSet;

use super::items::{self, get_n, get_s, record_key, s, Item, Kind, BY_NAME, NK, PK, SK};
use super::{aws_error, backoff, build_error, log_capacity, spread, DynamoStore, CONSISTENT_READS};
use crate::error::{ApiError, Result};

/// Attempts of a `BatchGetItem` chunk that keeps returning unprocessed keys.
const MAX_BATCH_ATTEMPTS: u32 = 8;

/// One page of one scope partition to read.
#[derive(Debug, Clone, Copy)]
pub(super) struct ScopeList<'a> {
    pub(super) kind: Kind,
    pub(super) account_id: i64,
    pub(super) scope: &'a str,
    /// In `by_name` order (else id order).
    pub(super) by_name: bool,
    pub(super) descending: bool,
    pub(super) offset: u64,
    pub(super) limit: u64,
}

impl DynamoStore {
    /// A (consistent) `GetItem`.
    pub(super) async fn get_item(&self, key: Item) -> Result<Option<Item>> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(key))
            .consistent_read(CONSISTENT_READS)
            .return_consumed_capacity(ReturnConsumedCapacity::Total)
            .send()
            .await
            .map_err(|e| aws_error("GetItem", e))?;
        log_capacity("GetItem", out.consumed_capacity());
        Ok(out.item)
    }

    /// Whether the item at `key` was last written by the call whose [`super::write_token`]
    /// is `token` (a consistent read): a conditional write that found its condition failed
    /// asks it, to tell a retry of its own applied write from another's.
    pub(super) async fn written_by(&self, key: Item, token: &str) -> Result<bool> {
        let item = self.get_item(key).await?;
        Ok(item
            .as_ref()
            .and_then(|item| item.get(super::WRITTEN_BY))
            .and_then(|value| value.as_s().ok())
            .is_some_and(|written| written == token))
    }

    /// The number of records of a scope: the sum of its counter lanes, read with one
    /// (consistent) `Query` per lane partition, all at once. Absent lanes count 0; a lane
    /// may be negative (a record left the scope on another lane than it joined on).
    pub(super) async fn count(&self, kind: Kind, account_id: i64, scope: &str) -> Result<u64> {
        let partitions = (0..spread::COUNTER_PARTITIONS).map(|partition| async move {
            let pk = items::counter_pk(kind, account_id, scope, partition);
            let mut sum: i64 = 0;
            for lane in self.whole_partition(&pk, "n", "Query (count)").await? {
                sum += get_n::<i64>(&lane, "n")?;
            }
            Ok::<_, ApiError>(sum)
        });
        let sums = try_join_all(partitions).await?;
        Ok(u64::try_from(sums.into_iter().sum::<i64>()).unwrap_or(0))
    }

    /// Every item of one partition, whole (consistently, all pages).
    pub(super) async fn partition(&self, pk: &str) -> Result<Vec<Item>> {
        self.query_partition(pk, None, "Query").await
    }

    /// Every item of one partition (consistently, all pages), with only `attribute`.
    pub(super) async fn whole_partition(
        &self,
        pk: &str,
        attribute: &str,
        what: &str,
    ) -> Result<Vec<Item>> {
        self.query_partition(pk, Some(attribute), what).await
    }

    /// Every item of one partition (consistently, all pages): whole, or with only the
    /// `projected` attribute. `what` names the call in errors.
    async fn query_partition(
        &self,
        pk: &str,
        projected: Option<&str>,
        what: &str,
    ) -> Result<Vec<Item>> {
        let mut items = Vec::new();
        let mut start: Option<Item> = None;
        loop {
            let mut query = self
                .client
                .query()
                .table_name(&self.table)
                .key_condition_expression("#pk = :pk")
                .expression_attribute_names("#pk", PK)
                .expression_attribute_values(":pk", s(pk))
                .consistent_read(CONSISTENT_READS)
                .set_exclusive_start_key(start.take())
                .return_consumed_capacity(ReturnConsumedCapacity::Total);
            if let Some(attribute) = projected {
                query = query
                    .expression_attribute_names("#a", attribute)
                    .projection_expression("#a");
            }
            let out = query.send().await.map_err(|e| aws_error(what, e))?;
            log_capacity("Query", out.consumed_capacity());
            items.extend(out.items.unwrap_or_default());
            match out.last_evaluated_key {
                Some(key) if !key.is_empty() => start = Some(key),
                _ => return Ok(items),
            }
        }
    }

    /// One page of a scope: the records at `offset..offset+limit` in the order of the table
    /// (id) or of `by_name`, and the scope's total. For the first page the counter read runs
    /// concurrently with the `Query` and the `BatchGetItem` that follows it; a later page
    /// reads the counter first, and a page past the end is answered from it alone (a
    /// `Query` would read every entry up to the offset).
    pub(super) async fn list_page(&self, list: ScopeList<'_>) -> Result<(Vec<Item>, u64)> {
        let ScopeList {
            kind,
            account_id,
            scope,
            ..
        } = list;
        let page = async {
            let ids = self.scope_ids(&list).await?;
            let keys = ids.iter().map(|&id| record_key(kind, id)).collect();
            let mut found: HashMap<i64, Item> = HashMap::with_capacity(ids.len());
            for item in self.batch_get(keys).await? {
                found.insert(get_n(&item, "id")?, item);
            }
            let mut records = Vec::with_capacity(ids.len());
            for id in ids {
                match found.remove(&id) {
                    Some(item) => records.push(item),
                    // Entries and records are written in one transaction and never
                    // deleted, so this means a damaged table, not a race.
                    None => tracing::warn!(id, ?kind, "list entry without its record"),
                }
            }
            Ok::<_, ApiError>(records)
        };
        if list.offset == 0 {
            return tokio::try_join!(page, self.count(kind, account_id, scope));
        }
        let total = self.count(kind, account_id, scope).await?;
        if list.offset >= total {
            return Ok((Vec::new(), total));
        }
        Ok((page.await?, total))
    }

    /// The ids at `offset..offset+limit` of a scope: each entry shard is read up to
    /// `offset+limit` entries (all shards at once), and the shards are merged in order. A
    /// shard's first `offset+limit` entries hold every one of the scope's first
    /// `offset+limit` that lives there, so the merge is exact.
    pub(super) async fn scope_ids(&self, list: &ScopeList<'_>) -> Result<Vec<i64>> {
        let shards = (0..spread::ENTRY_SHARDS).map(|shard| self.shard_entries(list, shard));
        let mut entries: Vec<(String, i64)> =
            try_join_all(shards).await?.into_iter().flatten().collect();
        // Sort keys are unique (the padded id, or the name key ending in it).
        entries.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        if list.descending {
            entries.reverse();
        }
        let offset = usize::try_from(list.offset).unwrap_or(usize::MAX);
        let limit = usize::try_from(list.limit).unwrap_or(usize::MAX);
        Ok(entries
            .into_iter()
            .skip(offset)
            .take(limit)
            .map(|(_, id)| id)
            .collect())
    }

    /// The first `offset+limit` entries of one shard in list order, each with its sort key
    /// (`sk` in id order, `nk` in `by_name` order), following `LastEvaluatedKey` over 1 MB
    /// pages.
    async fn shard_entries(&self, list: &ScopeList<'_>, shard: u32) -> Result<Vec<(String, i64)>> {
        let ScopeList {
            by_name,
            descending,
            offset,
            limit,
            ..
        } = *list;
        let pk = items::entries_pk(list.kind, list.account_id, list.scope, shard);
        let sort_key = if by_name { NK } else { SK };
        let wanted = offset.saturating_add(limit);
        let mut entries = Vec::new();
        let mut seen: u64 = 0;
        let mut start: Option<Item> = None;
        while limit > 0 && seen < wanted {
            let page = i32::try_from(wanted - seen)
                .map_or(self.query_page, |left| left.min(self.query_page));
            let out = self
                .client
                .query()
                .table_name(&self.table)
                .set_index_name(by_name.then(|| BY_NAME.to_string()))
                .key_condition_expression("#pk = :pk")
                .expression_attribute_names("#pk", PK)
                .expression_attribute_names("#id", "id")
                .expression_attribute_names("#sort", sort_key)
                .expression_attribute_values(":pk", s(pk.as_str()))
                .projection_expression("#id, #sort")
                .scan_index_forward(!descending)
                .consistent_read(CONSISTENT_READS)
                .limit(page)
                .set_exclusive_start_key(start.take())
                .return_consumed_capacity(ReturnConsumedCapacity::Total)
                .send()
                .await
                .map_err(|e| aws_error("Query", e))?;
            log_capacity("Query", out.consumed_capacity());
            for item in out.items() {
                if seen < wanted {
                    entries.push((get_s(item, sort_key)?, get_n(item, "id")?));
                }
                seen += 1;
            }
            match out.last_evaluated_key {
                Some(key) if !key.is_empty() => start = Some(key),
                _ => break,
            }
        }
        Ok(entries)
    }

    /// (Consistent) `BatchGetItem` of any number of keys: chunks of at most 100 run
    /// concurrently; unprocessed keys are asked for again with backoff. Unordered.
    pub(super) async fn batch_get(&self, keys: Vec<Item>) -> Result<Vec<Item>> {
        if keys.len() <= self.batch_chunk {
            return batch_get_chunk(&self.client, &self.table, keys, self.stretch).await;
        }
        let mut tasks = JoinSet::new();
        for chunk in keys.chunks(self.batch_chunk) {
            let (client, table, chunk) = (self.client.clone(), self.table.clone(), chunk.to_vec());
            let stretch = self.stretch;
            tasks.spawn(async move { batch_get_chunk(&client, &table, chunk, stretch).await });
        }
        let mut items = Vec::with_capacity(keys.len());
        while let Some(joined) = tasks.join_next().await {
            items.extend(joined.context("a BatchGetItem task")??);
        }
        Ok(items)
    }
}

async fn batch_get_chunk(
    client: &Client,
    table: &str,
    keys: Vec<Item>,
    stretch: f64,
) -> Result<Vec<Item>> {
    let mut items = Vec::with_capacity(keys.len());
    let mut pending = keys;
    let mut attempt = 0;
    while !pending.is_empty() {
        let request = KeysAndAttributes::builder()
            .set_keys(Some(pending))
            .consistent_read(CONSISTENT_READS)
            .build()
            .map_err(build_error)?;
        let out = client
            .batch_get_item()
            .request_items(table, request)
            .return_consumed_capacity(ReturnConsumedCapacity::Total)
            .send()
            .await
            .map_err(|e| aws_error("BatchGetItem", e))?;
        for capacity in out.consumed_capacity() {
            log_capacity("BatchGetItem", Some(capacity));
        }
        if let Some(found) = out.responses.and_then(|mut r| r.remove(table)) {
            items.extend(found);
        }
        pending = out
            .unprocessed_keys
            .and_then(|mut u| u.remove(table))
            .map(|k| k.keys)
            .unwrap_or_default();
        if !pending.is_empty() {
            attempt += 1;
            if attempt >= MAX_BATCH_ATTEMPTS {
                // DynamoDB leaves keys unprocessed when it is throttling the table: busy.
                tracing::warn!(
                    unprocessed = pending.len(),
                    attempt,
                    "dynamodb BatchGetItem: keys still unprocessed"
                );
                return Err(super::busy("BatchGetItem"));
            }
            backoff(attempt, stretch).await;
        }
    }
    Ok(items)
}

//! Blog posts: one scope per site (`site=<id>`), newest first through `by_name`, whose
//! sort key is the padded publication date and id.

use async_trait::async_trait;

use super::items::{self, padded, text_sort_key, Kind, Seq};
use super::reads::ScopeList;
use super::site_records::{post_from, post_item};
use super::transactions::{NewEntries, TxOutcome};
use super::{backoff, busy, spread, DynamoStore, MAX_ATTEMPTS};
use crate::domain::post::{
    NewPost, PageBytes, Post, PostPatch, PostQuery, MAX_CONTENT_BYTES, MAX_TITLE_CHARS,
    PAGE_STORED_BYTES,
};
use crate::error::{ApiError, Result};
use crate::store::held_key::Created;
use crate::store::sites::post_scope;
use crate::store::{Page, PostStore};

/// The `by_name` sort key of a post: its date, then its id (newest first read backwards).
fn post_nk(post: &Post) -> String {
    text_sort_key(padded(post.date), post.id)
}

impl DynamoStore {
    async fn read_post(&self, account_id: i64, id: i64) -> Result<Option<(Post, i64)>> {
        let Some(item) = self.get_item(items::post_key(id)).await? else {
            return Ok(None);
        };
        let (post, version) = post_from(&item)?;
        Ok((post.account_id == account_id).then_some((post, version)))
    }
}

#[async_trait]
impl PostStore for DynamoStore {
    async fn create_post(&self, account_id: i64, new: NewPost, now: i64) -> Result<Post> {
        let id = self.next_id(Seq::Post).await?;
        let post = new.into_post(id, account_id, now);
        let scopes = [post_scope(post.site_id)];
        let nk = post_nk(&post);
        let entries = NewEntries {
            kind: Kind::Post,
            account_id,
            id,
            scopes: &scopes,
            nk: Some(&nk),
        };
        let actions = || {
            let mut actions = vec![self.put_new(post_item(&post, 1))?];
            actions.extend(self.entries_and_counts(entries, spread::random_lane())?);
            Ok(actions)
        };
        match self
            .transact_create(
                "create post",
                MAX_ATTEMPTS,
                Some(Created::Post(id)),
                actions,
            )
            .await?
        {
            TxOutcome::Committed => Ok(post),
            TxOutcome::Busy(_) => Err(busy("create post")),
            TxOutcome::Cancelled(codes) => Err(ApiError::internal(format!(
                "dynamodb create post cancelled: {codes:?}"
            ))),
        }
    }

    async fn get_post(&self, account_id: i64, id: i64) -> Result<Option<Post>> {
        Ok(self.read_post(account_id, id).await?.map(|(post, _)| post))
    }

    async fn update_post(
        &self,
        account_id: i64,
        id: i64,
        patch: PostPatch,
        now: i64,
    ) -> Result<Option<Post>> {
        for attempt in 1..=MAX_ATTEMPTS {
            let Some((mut post, version)) = self.read_post(account_id, id).await? else {
                return Ok(None);
            };
            let before_nk = post_nk(&post);
            if !post.apply(&patch, now) {
                return Ok(Some(post));
            }
            let nk = post_nk(&post);
            let scope = post_scope(post.site_id);
            let actions = || {
                let mut actions =
                    vec![self.put_if_version(post_item(&post, version + 1), version)?];
                if nk != before_nk {
                    actions.push(self.put(items::entry_item(
                        Kind::Post,
                        account_id,
                        &scope,
                        id,
                        Some(&nk),
                    ))?);
                }
                Ok(actions)
            };
            match self.transact("update post", 3, actions).await? {
                TxOutcome::Committed => return Ok(Some(post)),
                TxOutcome::Cancelled(codes) if !TxOutcome::failed_condition(&codes, 0) => {
                    return Err(ApiError::internal(format!(
                        "dynamodb update post cancelled: {codes:?}"
                    )));
                }
                // The post changed since it was read, or its writers kept conflicting.
                _ => backoff(attempt, self.stretch).await,
            }
        }
        Err(busy("update post"))
    }

    /// The page's ids from the entries, then their records in chunks, in order, until the
    /// page's bytes are reached (`PostQuery::max_bytes`): what a page reads is bounded by
    /// its bytes and one chunk, not by `limit` times the largest post.
    async fn list_posts(&self, account_id: i64, query: &PostQuery) -> Result<Page<Post>> {
        let scope = post_scope(query.site_id);
        let list = ScopeList {
            kind: Kind::Post,
            account_id,
            scope: &scope,
            by_name: true,
            descending: true,
            offset: query.offset,
            limit: query.limit,
        };
        let total_count = self.count(Kind::Post, account_id, &scope).await?;
        if query.offset >= total_count {
            return Ok(Page {
                items: Vec::new(),
                total_count,
            });
        }
        let ids = self.scope_ids(&list).await?;
        let mut bytes = PageBytes::new(query.max_bytes);
        let mut items = Vec::new();
        let mut rest = ids.as_slice();
        let mut chunk = FIRST_READ_CHUNK;
        'page: while !rest.is_empty() {
            let (now, later) = rest.split_at(chunk.min(rest.len()));
            for record in self.records_in_order(Kind::Post, now.to_vec()).await? {
                let (post, _) = post_from(&record)?;
                if !bytes.admit(&post) {
                    break 'page;
                }
                items.push(post);
            }
            rest = later;
            chunk = (chunk * 2).min(MAX_READ_CHUNK);
        }
        Ok(Page { items, total_count })
    }
}

/// Posts read by a page's first `BatchGetItem`: one more than a page of the largest posts
/// holds (`PAGE_STORED_BYTES` / the largest post), so such a page is one read.
const FIRST_READ_CHUNK: usize =
    (PAGE_STORED_BYTES / (MAX_CONTENT_BYTES as u64 + 4 * MAX_TITLE_CHARS as u64)) as usize + 1;
/// Each further chunk doubles, up to one `BatchGetItem`'s 100 keys: a page of small posts
/// takes a few reads, and a page reads at most one chunk past its bytes.
const MAX_READ_CHUNK: usize = 100;

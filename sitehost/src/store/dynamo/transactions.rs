//! Writes: transactions, run with retries while only conflicts or throttling cancel them,
//! and the actions they are made of (puts, deletes, counter `ADD`s, logo marks).

use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::builders::UpdateBuilder;
use aws_sdk_dynamodb::types::{Delete, Put, ReturnConsumedCapacity, TransactWriteItem, Update};

use super::items::{self, n, s, Item, Kind, PK};
use super::records::LOGO_OF;
use super::{aws_error, backoff, build_error, log_capacity, DynamoStore};
use crate::error::{ApiError, Result};
use crate::store::held_key::{self, Created};

/// Cancellation reasons that say nothing about the data: the same transaction may succeed
/// when sent again.
const TRANSIENT_CANCELLATIONS: [&str; 3] = [
    "TransactionConflict",
    "ThrottlingError",
    "ProvisionedThroughputExceeded",
];

/// A new record's list entries: one per scope, each with a counter increment.
#[derive(Debug, Clone, Copy)]
pub(super) struct NewEntries<'a> {
    pub(super) kind: Kind,
    pub(super) account_id: i64,
    pub(super) id: i64,
    pub(super) scopes: &'a [String],
    /// The `by_name` sort key (businesses only).
    pub(super) nk: Option<&'a str>,
}

/// How a transaction ended when DynamoDB did not fail outright.
pub(super) enum TxOutcome {
    Committed,
    /// The cancellation reason code of every action, in request order (`None` for those
    /// that did not fail).
    Cancelled(Vec<String>),
    /// Still cancelled only for transient reasons (conflicts, throttling) after every
    /// attempt: nothing was written.
    Busy(Vec<String>),
}

impl TxOutcome {
    pub(super) fn failed_condition(codes: &[String], index: usize) -> bool {
        codes.get(index).map(String::as_str) == Some("ConditionalCheckFailed")
    }

    /// Whether the last action's condition failed (DynamoDB gives one reason per action).
    pub(super) fn failed_last_condition(codes: &[String]) -> bool {
        codes.last().map(String::as_str) == Some("ConditionalCheckFailed")
    }
}

/// The number set `{business}` of a logo mark.
fn logo_set(business: i64) -> aws_sdk_dynamodb::types::AttributeValue {
    aws_sdk_dynamodb::types::AttributeValue::Ns(vec![business.to_string()])
}

/// Which images [`DynamoStore::mark_logo`] may mark.
pub(super) enum LogoOf<'a> {
    /// Any image of the account (re-marking the logos businesses already have).
    Any,
    /// Only an image of this sub id (what a sub-restricted key may reference).
    SubId(&'a str),
    /// An image fit for a business of this sub id or of none: one of the business's sub id,
    /// or one without a sub id (`rules::logo_fits`).
    Business(Option<&'a str>),
}

impl DynamoStore {
    /// Runs a transaction, retrying (with fresh idempotency tokens) while it is cancelled only
    /// for transient reasons: another transaction writing one of its items, or throttling.
    /// `actions` builds it for each attempt, so a retry can draw another counter lane.
    /// Still cancelled that way after `attempts`, it is `Busy`: nothing was written.
    pub(super) async fn transact(
        &self,
        what: &str,
        attempts: u32,
        mut actions: impl FnMut() -> Result<Vec<TransactWriteItem>>,
    ) -> Result<TxOutcome> {
        let mut attempt = 0;
        loop {
            let result = self
                .client
                .transact_write_items()
                .set_transact_items(Some(actions()?))
                .return_consumed_capacity(ReturnConsumedCapacity::Total)
                .send()
                .await;
            let err = match result {
                Ok(out) => {
                    for capacity in out.consumed_capacity() {
                        log_capacity("TransactWriteItems", Some(capacity));
                    }
                    return Ok(TxOutcome::Committed);
                }
                Err(err) => err,
            };
            let codes: Vec<String> = match err.as_service_error() {
                Some(TransactWriteItemsError::TransactionCanceledException(cancelled)) => cancelled
                    .cancellation_reasons()
                    .iter()
                    .map(|r| r.code().unwrap_or("None").to_string())
                    .collect(),
                _ => return Err(aws_error("TransactWriteItems", err)),
            };
            let transient = codes
                .iter()
                .any(|c| TRANSIENT_CANCELLATIONS.contains(&c.as_str()))
                && codes
                    .iter()
                    .all(|c| c == "None" || TRANSIENT_CANCELLATIONS.contains(&c.as_str()));
            if !transient {
                tracing::debug!(?codes, attempt, "dynamodb transaction cancelled");
                return Ok(TxOutcome::Cancelled(codes));
            }
            attempt += 1;
            if attempt >= attempts {
                tracing::warn!(
                    what,
                    ?codes,
                    attempt,
                    "dynamodb transaction still cancelled"
                );
                return Ok(TxOutcome::Busy(codes));
            }
            backoff(attempt, self.stretch).await;
        }
    }

    /// [`Self::transact`] for a write that creates `created` (none: a plain `transact`).
    /// When the request holds an `Idempotency-Key`
    /// ([`held_key::held`]) the key's answer is the transaction's last action, so the key is
    /// answered exactly when the create commits, whatever fails after. That action's
    /// condition failing means the claim is no longer the request's (it outlived its lease
    /// and a retry took the key over): the create is refused with a 409 and nothing is
    /// written, unless the answer found is the request's own (a commit DynamoDB applied but
    /// answered with an error, sent again). The outcome's codes leave that action out.
    pub(super) async fn transact_create(
        &self,
        what: &str,
        attempts: u32,
        created: Option<Created>,
        mut actions: impl FnMut() -> Result<Vec<TransactWriteItem>>,
    ) -> Result<TxOutcome> {
        let (Some(created), Some(held)) = (created, held_key::held()) else {
            return self.transact(what, attempts, actions).await;
        };
        let with_answer = || {
            let mut all = actions()?;
            all.push(self.answer_held_key(&held, created)?);
            Ok(all)
        };
        match self.transact(what, attempts, with_answer).await? {
            TxOutcome::Committed => {
                held.mark_answered();
                Ok(TxOutcome::Committed)
            }
            TxOutcome::Busy(mut codes) => {
                codes.pop();
                Ok(TxOutcome::Busy(codes))
            }
            TxOutcome::Cancelled(mut codes) => {
                let claim_lost = TxOutcome::failed_last_condition(&codes);
                codes.pop();
                if !claim_lost {
                    return Ok(TxOutcome::Cancelled(codes));
                }
                if self.answered_by(&held).await? {
                    held.mark_answered();
                    return Ok(TxOutcome::Committed);
                }
                tracing::warn!(what, "an idempotency key was taken over before its create");
                Err(ApiError::StateConflict(
                    "A request with this Idempotency-Key is still being processed; retry it \
                     in a moment to get its answer."
                        .into(),
                ))
            }
        }
    }

    pub(super) fn put(&self, item: Item) -> Result<TransactWriteItem> {
        let put = Put::builder()
            .table_name(&self.table)
            .set_item(Some(item))
            .build()
            .map_err(build_error)?;
        Ok(TransactWriteItem::builder().put(put).build())
    }

    /// A `Put` that only writes a new item.
    pub(super) fn put_new(&self, item: Item) -> Result<TransactWriteItem> {
        let put = Put::builder()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(#pk)")
            .expression_attribute_names("#pk", PK)
            .build()
            .map_err(build_error)?;
        Ok(TransactWriteItem::builder().put(put).build())
    }

    /// A `Put` that replaces the item only if it still has the `version` we read.
    pub(super) fn put_if_version(&self, item: Item, version: i64) -> Result<TransactWriteItem> {
        let put = Put::builder()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression("#v = :v")
            .expression_attribute_names("#v", "version")
            .expression_attribute_values(":v", n(version))
            .build()
            .map_err(build_error)?;
        Ok(TransactWriteItem::builder().put(put).build())
    }

    /// A conditional `Put`: `attribute_not_exists(pk)` when `version` is `None`, else
    /// `version = :v` (the version read).
    pub(super) fn put_if_read(
        &self,
        item: Item,
        version: Option<i64>,
    ) -> Result<TransactWriteItem> {
        match version {
            Some(version) => self.put_if_version(item, version),
            None => self.put_new(item),
        }
    }

    pub(super) fn delete(&self, key: Item) -> Result<TransactWriteItem> {
        let delete = Delete::builder()
            .table_name(&self.table)
            .set_key(Some(key))
            .build()
            .map_err(build_error)?;
        Ok(TransactWriteItem::builder().delete(delete).build())
    }

    /// `ADD n :delta` on a counter item (created at 0 when absent).
    pub(super) fn add(&self, key: Item, delta: i64) -> Result<TransactWriteItem> {
        let update = Update::builder()
            .table_name(&self.table)
            .set_key(Some(key))
            .update_expression("ADD #n :delta")
            .expression_attribute_names("#n", "n")
            .expression_attribute_values(":delta", n(delta))
            .build()
            .map_err(build_error)?;
        Ok(TransactWriteItem::builder().update(update).build())
    }

    /// Marks an image as the logo of `business` (`ADD logo_of :b`, a number set), on the
    /// condition that the image exists in the account and is one `of` allows. The mark is
    /// what `delete_image` refuses on, and both write the image item, so a delete and a
    /// business write that sets the logo never both succeed (DynamoDB serializes
    /// transactions on one item).
    pub(super) fn mark_logo(
        &self,
        image: i64,
        account_id: i64,
        of: LogoOf<'_>,
        business: i64,
    ) -> Result<TransactWriteItem> {
        let update = Update::builder()
            .table_name(&self.table)
            .set_key(Some(items::image_key(image)))
            .update_expression("ADD #l :b")
            .expression_attribute_names("#l", LOGO_OF)
            .expression_attribute_values(":b", logo_set(business))
            .expression_attribute_names("#a", "account_id")
            .expression_attribute_values(":a", n(account_id));
        let with_sub = |update: UpdateBuilder, condition: &str, sub: Option<&str>| {
            let update = update
                .expression_attribute_names("#s", "partner_sub_id")
                .condition_expression(condition);
            match sub {
                Some(sub) => update.expression_attribute_values(":s", s(sub)),
                None => update,
            }
        };
        let update = match of {
            LogoOf::Any => update.condition_expression("#a = :a"),
            LogoOf::SubId(sub) => with_sub(update, "#a = :a AND #s = :s", Some(sub)),
            LogoOf::Business(Some(sub)) => with_sub(
                update,
                "#a = :a AND (attribute_not_exists(#s) OR #s = :s)",
                Some(sub),
            ),
            LogoOf::Business(None) => {
                with_sub(update, "#a = :a AND attribute_not_exists(#s)", None)
            }
        };
        Ok(TransactWriteItem::builder()
            .update(update.build().map_err(build_error)?)
            .build())
    }

    /// Takes `business` off an image's logo marks (`DELETE logo_of :b`; the attribute goes
    /// with its last element). The image item exists: a marked image cannot be deleted, and
    /// a deleted one leaves its barred item; the condition keeps a stray update from ever
    /// creating an item.
    pub(super) fn unmark_logo(&self, image: i64, business: i64) -> Result<TransactWriteItem> {
        let update = Update::builder()
            .table_name(&self.table)
            .set_key(Some(items::image_key(image)))
            .update_expression("DELETE #l :b")
            .condition_expression("attribute_exists(#pk)")
            .expression_attribute_names("#l", LOGO_OF)
            .expression_attribute_names("#pk", PK)
            .expression_attribute_values(":b", logo_set(business))
            .build()
            .map_err(build_error)?;
        Ok(TransactWriteItem::builder().update(update).build())
    }

    /// The `Put` and counter `ADD`s of a new record's list entries, one per scope, on the
    /// counter lane `lane` of each.
    pub(super) fn entries_and_counts(
        &self,
        new: NewEntries<'_>,
        lane: u32,
    ) -> Result<Vec<TransactWriteItem>> {
        let NewEntries {
            kind,
            account_id,
            id,
            scopes,
            nk,
        } = new;
        let mut actions = Vec::with_capacity(scopes.len() * 2);
        for scope in scopes {
            actions.push(self.put(items::entry_item(kind, account_id, scope, id, nk))?);
            actions.push(self.add(items::counter_key(kind, account_id, scope, lane), 1)?);
        }
        Ok(actions)
    }
}

//! `Idempotency-Key`s: one item per account, API key and key (its own partition, so no key
//! is hot), written with conditions so that a claim is atomic, and removed by TTL a day
//! after (`expires_at`; TTL deletes late, so every condition checks the time itself). An
//! answer is its status and `location`, a few dozen bytes: the body is read again on
//! replay.
//!
//! A claim records its request's token (`claim`): a claim whose write DynamoDB applied but
//! answered with an error, found taken when the SDK sends it again, is recognised as the
//! request's own. A create writes the answer in its own transaction
//! ([`DynamoStore::answer_held_key`]), on the condition that the claim is still its
//! request's.
//!
//! A site create at DynamoDB's 100-action limit has no room for the answer: it names the
//! site in the claim before its transaction ([`DynamoStore::name_held_site`], with the
//! answer it will have), a failed request's release ends the lease of such a claim rather
//! than deleting it, and whoever takes the claim over answers with the named site if it
//! exists, or runs again if not (the site's address items keep a late commit from making
//! two).

use async_trait::async_trait;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnConsumedCapacity, TransactWriteItem, Update};

use super::items::{self, get_n, get_s, n, opt_n, s, Item, PK};
use super::{build_error, conditional, log_capacity, DynamoStore};
use crate::error::{ApiError, Result};
use crate::store::held_key::{self, Created, HeldKey};
use crate::store::{
    IdempotencyClaim, IdempotencyKey, IdempotencyStore, StoredAnswer, IDEMPOTENCY_KEY_SECS,
    IDEMPOTENCY_LEASE_SECS,
};

/// The attributes of an idempotency item besides its key.
const FINGERPRINT: &str = "fingerprint";
const LEASE_UNTIL: &str = "lease_until";
const EXPIRES_AT: &str = "expires_at";
const STATUS: &str = "status";
/// The token of the request that holds the claim.
const CLAIM: &str = "claim";
/// `StoredAnswer::created_uri`: its attribute keeps the name it was first stored under.
const CREATED_URI: &str = "location";
/// The site a create too large for the answer named before its transaction, and the
/// answer it would have.
const CREATES_SITE: &str = "creates_site";
const PENDING_STATUS: &str = "pending_status";
const PENDING_URI: &str = "pending_location";

/// A create whose claim another request took over (after its lease ended).
pub(super) fn claim_taken_over() -> ApiError {
    ApiError::StateConflict(
        "A request with this Idempotency-Key is still being processed; retry it in a moment \
         to get its answer."
            .into(),
    )
}

fn answer_of(item: &Item) -> Result<Option<StoredAnswer>> {
    let Some(status) = opt_n::<u16>(item, STATUS)? else {
        return Ok(None);
    };
    Ok(Some(StoredAnswer {
        status,
        created_uri: get_s(item, CREATED_URI)?,
    }))
}

impl DynamoStore {
    /// A `PutItem` of a fresh claim, written only if the key is unused or expired.
    async fn put_claim(&self, key: Item, fingerprint: &str, claim: &str, now: i64) -> Result<bool> {
        let mut item = key;
        item.insert(FINGERPRINT.into(), s(fingerprint));
        item.insert(CLAIM.into(), s(claim));
        item.insert(LEASE_UNTIL.into(), n(now + IDEMPOTENCY_LEASE_SECS));
        item.insert(EXPIRES_AT.into(), n(now + IDEMPOTENCY_KEY_SECS));
        let result = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(#pk) OR #e <= :now")
            .expression_attribute_names("#pk", PK)
            .expression_attribute_names("#e", EXPIRES_AT)
            .expression_attribute_values(":now", n(now))
            .return_consumed_capacity(ReturnConsumedCapacity::Total)
            .send()
            .await;
        let written = conditional("PutItem (idempotency claim)", result)?;
        if let Some(out) = &written {
            log_capacity("PutItem", out.consumed_capacity());
        }
        Ok(written.is_some())
    }

    /// Takes over a claim whose lease ended without an answer, if no one else did first.
    async fn renew_lease(
        &self,
        key: Item,
        claim: &str,
        lease_until: i64,
        now: i64,
    ) -> Result<bool> {
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(key))
            .update_expression("SET #l = :new, #c = :claim REMOVE #cr")
            .condition_expression("#l = :old AND attribute_not_exists(#st)")
            .expression_attribute_names("#l", LEASE_UNTIL)
            .expression_attribute_names("#st", STATUS)
            .expression_attribute_names("#c", CLAIM)
            .expression_attribute_names("#cr", CREATES_SITE)
            .expression_attribute_values(":claim", s(claim))
            .expression_attribute_values(":old", n(lease_until))
            .expression_attribute_values(":new", n(now + IDEMPOTENCY_LEASE_SECS))
            .return_consumed_capacity(ReturnConsumedCapacity::Total)
            .send()
            .await;
        let renewed = conditional("UpdateItem (idempotency lease)", result)?;
        if let Some(out) = &renewed {
            log_capacity("UpdateItem", out.consumed_capacity());
        }
        Ok(renewed.is_some())
    }
}

impl DynamoStore {
    /// Names the site `site_id` in the claim of the key the request holds (if any), with
    /// the answer it will have, while the claim is still the request's: for a site create
    /// whose transaction has no room for the answer. A 409 when the claim was taken over.
    pub(super) async fn name_held_site(&self, site_id: i64) -> Result<()> {
        let Some(held) = held_key::held() else {
            return Ok(());
        };
        let answer = (held.answer_of)(Created::Site(site_id));
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(items::idempotency_key(&held.key())))
            .update_expression("SET #cr = :site, #ps = :st, #pl = :loc")
            .condition_expression("#fp = :fp AND #c = :claim AND attribute_not_exists(#st)")
            .expression_attribute_names("#cr", CREATES_SITE)
            .expression_attribute_names("#ps", PENDING_STATUS)
            .expression_attribute_names("#pl", PENDING_URI)
            .expression_attribute_names("#fp", FINGERPRINT)
            .expression_attribute_names("#c", CLAIM)
            .expression_attribute_names("#st", STATUS)
            .expression_attribute_values(":site", n(site_id))
            .expression_attribute_values(":st", n(answer.status))
            .expression_attribute_values(":loc", s(&answer.created_uri))
            .expression_attribute_values(":fp", s(&held.fingerprint))
            .expression_attribute_values(":claim", s(&held.claim))
            .return_consumed_capacity(ReturnConsumedCapacity::Total)
            .send()
            .await;
        let Some(out) = conditional("UpdateItem (idempotency names a site)", result)? else {
            tracing::warn!("an idempotency key was taken over before its site create");
            return Err(claim_taken_over());
        };
        log_capacity("UpdateItem", out.consumed_capacity());
        Ok(())
    }

    /// The answer of the site a claim names, if that site was made (a consistent read):
    /// its create committed, and its answer was lost with the request.
    async fn named_site_answer(
        &self,
        held: &Item,
        account_id: i64,
    ) -> Result<Option<StoredAnswer>> {
        let Some(site_id) = opt_n::<i64>(held, CREATES_SITE)? else {
            return Ok(None);
        };
        let Some(site) = self.get_item(items::site_key(site_id)).await? else {
            return Ok(None);
        };
        if get_n::<i64>(&site, "account_id")? != account_id {
            return Ok(None);
        }
        Ok(Some(StoredAnswer {
            status: get_n(held, PENDING_STATUS)?,
            created_uri: get_s(held, PENDING_URI)?,
        }))
    }

    /// Answers a claim whose lease ended with the site it names (`false`: someone else
    /// changed the claim first).
    async fn answer_named(
        &self,
        key: Item,
        answer: &StoredAnswer,
        lease_until: i64,
    ) -> Result<bool> {
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(key))
            .update_expression("SET #st = :st, #loc = :loc")
            .condition_expression("#l = :old AND attribute_not_exists(#st)")
            .expression_attribute_names("#l", LEASE_UNTIL)
            .expression_attribute_names("#st", STATUS)
            .expression_attribute_names("#loc", CREATED_URI)
            .expression_attribute_values(":old", n(lease_until))
            .expression_attribute_values(":st", n(answer.status))
            .expression_attribute_values(":loc", s(&answer.created_uri))
            .return_consumed_capacity(ReturnConsumedCapacity::Total)
            .send()
            .await;
        let answered = conditional("UpdateItem (idempotency named answer)", result)?;
        if let Some(out) = &answered {
            log_capacity("UpdateItem", out.consumed_capacity());
        }
        Ok(answered.is_some())
    }

    /// Ends the lease of a claim that names a site, for a failed request: the next request
    /// with the key takes it over at once and finds out whether the site was made.
    async fn end_named_lease(&self, key: Item, fingerprint: &str) -> Result<()> {
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(key))
            .update_expression("SET #l = :zero")
            .condition_expression(
                "#fp = :fp AND attribute_not_exists(#st) AND attribute_exists(#cr)",
            )
            .expression_attribute_names("#l", LEASE_UNTIL)
            .expression_attribute_names("#fp", FINGERPRINT)
            .expression_attribute_names("#st", STATUS)
            .expression_attribute_names("#cr", CREATES_SITE)
            .expression_attribute_values(":zero", n(0))
            .expression_attribute_values(":fp", s(fingerprint))
            .return_consumed_capacity(ReturnConsumedCapacity::Total)
            .send()
            .await;
        if let Some(out) = conditional("UpdateItem (idempotency named lease)", result)? {
            log_capacity("UpdateItem", out.consumed_capacity());
        }
        Ok(())
    }

    /// Whether the key's claim is `claim`'s (a consistent read).
    async fn claimed_by(&self, key: Item, claim: &str) -> Result<bool> {
        let held = self.get_item(key).await?;
        Ok(held.as_ref().and_then(claim_of) == Some(claim))
    }

    /// The action a create adds to its transaction to answer the key its request holds:
    /// the answer of what it made, on the condition that the claim is still the request's
    /// and not answered (a claim taken over after its lease cancels the create).
    pub(super) fn answer_held_key(
        &self,
        held: &HeldKey,
        created: Created,
    ) -> Result<TransactWriteItem> {
        let answer = (held.answer_of)(created);
        let update = Update::builder()
            .table_name(&self.table)
            .set_key(Some(items::idempotency_key(&held.key())))
            .update_expression("SET #st = :st, #loc = :loc")
            .condition_expression("#fp = :fp AND #c = :claim AND attribute_not_exists(#st)")
            .expression_attribute_names("#fp", FINGERPRINT)
            .expression_attribute_names("#c", CLAIM)
            .expression_attribute_names("#st", STATUS)
            .expression_attribute_names("#loc", CREATED_URI)
            .expression_attribute_values(":fp", s(&held.fingerprint))
            .expression_attribute_values(":claim", s(&held.claim))
            .expression_attribute_values(":st", n(answer.status))
            .expression_attribute_values(":loc", AttributeValue::S(answer.created_uri))
            .build()
            .map_err(build_error)?;
        Ok(TransactWriteItem::builder().update(update).build())
    }

    /// Whether the key `held` names was answered under its claim: a create whose
    /// transaction found the answer's condition failed asks it, to tell its own commit
    /// (applied, answered with an error, sent again) from a claim taken over.
    pub(super) async fn answered_by(&self, held: &HeldKey) -> Result<bool> {
        let item = self.get_item(items::idempotency_key(&held.key())).await?;
        Ok(item.is_some_and(|item| {
            item.contains_key(STATUS) && claim_of(&item) == Some(held.claim.as_str())
        }))
    }
}

/// The token of the request whose claim the item holds.
fn claim_of(item: &Item) -> Option<&str> {
    item.get(CLAIM)
        .and_then(|value| value.as_s().ok())
        .map(String::as_str)
}

#[async_trait]
impl IdempotencyStore for DynamoStore {
    /// A conditional `PutItem`; when the key is held, a consistent `GetItem` tells by whom,
    /// and a claim past its lease is taken over with a conditional `UpdateItem`.
    async fn claim_idempotency_key(
        &self,
        key: &IdempotencyKey<'_>,
        fingerprint: &str,
        claim: &str,
        now: i64,
    ) -> Result<IdempotencyClaim> {
        let item_key = items::idempotency_key(key);
        // Twice at most: a held key may expire (or be released) between the put and the read.
        for _ in 0..2 {
            if self
                .put_claim(item_key.clone(), fingerprint, claim, now)
                .await?
            {
                return Ok(IdempotencyClaim::Claimed);
            }
            let Some(held) = self.get_item(item_key.clone()).await? else {
                continue;
            };
            if get_s(&held, FINGERPRINT)? != fingerprint {
                return Ok(IdempotencyClaim::OtherRequest);
            }
            if let Some(answer) = answer_of(&held)? {
                return Ok(IdempotencyClaim::Answered(answer));
            }
            // This request's own claim, written by a put that DynamoDB applied and answered
            // with an error, then found taken when the SDK sent it again.
            if claim_of(&held) == Some(claim) {
                return Ok(IdempotencyClaim::Claimed);
            }
            let lease_until: i64 = opt_n(&held, LEASE_UNTIL)?.unwrap_or(0);
            if lease_until > now {
                return Ok(IdempotencyClaim::InProgress);
            }
            if let Some(answer) = self.named_site_answer(&held, key.account_id).await? {
                if self
                    .answer_named(item_key.clone(), &answer, lease_until)
                    .await?
                {
                    return Ok(IdempotencyClaim::Answered(answer));
                }
                // Answered or taken over meanwhile (or this answer applied, then failed):
                // read the claim again.
                continue;
            }
            let renewed = self
                .renew_lease(item_key.clone(), claim, lease_until, now)
                .await?;
            if renewed || self.claimed_by(item_key.clone(), claim).await? {
                return Ok(IdempotencyClaim::Claimed);
            }
            return Ok(IdempotencyClaim::InProgress);
        }
        Ok(IdempotencyClaim::InProgress)
    }

    async fn answer_idempotency_key(
        &self,
        key: &IdempotencyKey<'_>,
        fingerprint: &str,
        answer: &StoredAnswer,
    ) -> Result<()> {
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(items::idempotency_key(key)))
            .update_expression("SET #st = :st, #loc = :loc")
            .condition_expression("#fp = :fp AND attribute_not_exists(#st)")
            .expression_attribute_names("#fp", FINGERPRINT)
            .expression_attribute_names("#st", STATUS)
            .expression_attribute_names("#loc", CREATED_URI)
            .expression_attribute_values(":fp", s(fingerprint))
            .expression_attribute_values(":st", n(answer.status))
            .expression_attribute_values(":loc", AttributeValue::S(answer.created_uri.clone()))
            .return_consumed_capacity(ReturnConsumedCapacity::Total)
            .send()
            .await;
        match conditional("UpdateItem (idempotency answer)", result)? {
            Some(out) => log_capacity("UpdateItem", out.consumed_capacity()),
            // Another request took the key over after this one's lease ended; its answer
            // stands.
            None => tracing::warn!(
                account_id = key.account_id,
                "an idempotency key was taken over before its answer"
            ),
        }
        Ok(())
    }

    async fn release_idempotency_key(
        &self,
        key: &IdempotencyKey<'_>,
        fingerprint: &str,
    ) -> Result<()> {
        let result = self
            .client
            .delete_item()
            .table_name(&self.table)
            .set_key(Some(items::idempotency_key(key)))
            .condition_expression(
                "#fp = :fp AND attribute_not_exists(#st) AND attribute_not_exists(#cr)",
            )
            .expression_attribute_names("#fp", FINGERPRINT)
            .expression_attribute_names("#st", STATUS)
            .expression_attribute_names("#cr", CREATES_SITE)
            .expression_attribute_values(":fp", s(fingerprint))
            .return_consumed_capacity(ReturnConsumedCapacity::Total)
            .send()
            .await;
        match conditional("DeleteItem (idempotency release)", result)? {
            Some(out) => log_capacity("DeleteItem", out.consumed_capacity()),
            // Answered (kept), or naming a site that may have been made: its lease ends
            // now, for the retry to find out.
            None => {
                self.end_named_lease(items::idempotency_key(key), fingerprint)
                    .await?
            }
        }
        Ok(())
    }
}

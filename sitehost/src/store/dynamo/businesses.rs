//! Businesses: create and update are one transaction each; lists are one scope `Query`.

use async_trait::async_trait;
use aws_sdk_dynamodb::types::TransactWriteItem;

use super::items::{self, name_sort_key, Kind, Seq};
use super::reads::ScopeList;
use super::records;
use super::transactions::{LogoOf, NewEntries, TxOutcome};
use super::{backoff, busy, spread, DynamoStore, MAX_ATTEMPTS};

/// Attempts of one update transaction cancelled for conflicts before the update reads the
/// business again (`MAX_ATTEMPTS` reads at most).
const UPDATE_TX_ATTEMPTS: u32 = 3;
use crate::domain::business::{
    Business, BusinessDetail, BusinessPatch, BusinessQuery, NewBusiness,
};
use crate::domain::location::LocationEdit;
use crate::error::{ApiError, Result};
use crate::store::held_key::Created;
use crate::store::rules::{logo_of_another_sub_id, new_logo, no_such_logo, ScopeChange};
use crate::store::scope;
use crate::store::{BusinessStore, ImageStore, Page};

fn cancelled(what: &str, codes: &[String]) -> ApiError {
    ApiError::internal(format!("dynamodb {what} cancelled: {codes:?}"))
}

impl DynamoStore {
    /// The business and its version, if it exists in this account.
    async fn read_business(&self, account_id: i64, id: i64) -> Result<Option<(Business, i64)>> {
        let Some(item) = self.get_item(items::business_key(id)).await? else {
            return Ok(None);
        };
        let (business, version) = records::business_from(&item)?;
        // Another account's record reads as absent.
        Ok((business.account_id == account_id).then_some((business, version)))
    }

    /// The business with its services and locations (one `Query` of its partition), its
    /// version, and the version of its DETAILS item (`None`: there is none).
    async fn read_detail(&self, account_id: i64, id: i64) -> Result<Option<ReadDetail>> {
        let mut record = None;
        let mut details = None;
        for item in self.partition(&items::business_pk(id)).await? {
            match items::get_s(&item, items::SK)?.as_str() {
                "BUSINESS" => record = Some(records::business_from(&item)?),
                items::DETAILS => details = Some(records::details_from(&item)?),
                _ => {}
            }
        }
        let Some((business, version)) = record else {
            return Ok(None);
        };
        if business.account_id != account_id {
            return Ok(None);
        }
        let (services, locations, details_version) = match details {
            Some((services, locations, v)) => (services, locations, Some(v)),
            None => (Vec::new(), Vec::new(), None),
        };
        Ok(Some(ReadDetail {
            detail: BusinessDetail {
                business,
                services,
                locations,
            },
            version,
            details_version,
        }))
    }
}

impl DynamoStore {
    /// Why a logo's mark failed its condition: no such image (that the key may see), or
    /// one of another sub id than the business's. Read only on that refusal.
    async fn logo_refusal(
        &self,
        account_id: i64,
        logo: i64,
        restrict_sub_id: Option<&str>,
    ) -> ApiError {
        match self.get_image(account_id, logo).await {
            Ok(Some(image)) if image.visible_to(restrict_sub_id) => logo_of_another_sub_id(logo),
            Ok(_) => no_such_logo(logo),
            Err(err) => err,
        }
    }
}

/// A business read for its detail or an update.
struct ReadDetail {
    detail: BusinessDetail,
    version: i64,
    details_version: Option<i64>,
}

#[async_trait]
impl BusinessStore for DynamoStore {
    async fn create_business(
        &self,
        account_id: i64,
        new: NewBusiness,
        now: i64,
    ) -> Result<BusinessDetail> {
        let logo = new.logo_image_id;
        let id = self.next_id(Seq::Business).await?;
        let location_ids = self.next_ids(Seq::Location, new.locations.len()).await?;
        self.put_location_pointers(account_id, id, &location_ids)
            .await?;
        let detail = new.into_detail(id, account_id, now, &mut location_ids.into_iter())?;
        let business = &detail.business;
        let with_details = !(detail.services.is_empty() && detail.locations.is_empty());
        let nk = name_sort_key(business);
        let scopes = scope::business_scopes(business);
        let entries = NewEntries {
            kind: Kind::Business,
            account_id,
            id,
            scopes: &scopes,
            nk: Some(&nk),
        };
        // Each attempt draws its counter lane afresh (spread.rs).
        let actions = || {
            let mut actions = Vec::with_capacity(2 + 2 * scopes.len());
            if let Some(logo) = logo {
                actions.push(self.mark_logo(
                    logo,
                    account_id,
                    LogoOf::Business(business.partner_sub_id.as_deref()),
                    id,
                )?);
            }
            actions.push(self.put_new(records::business_item(business, 1))?);
            if with_details {
                actions.push(self.put_new(records::details_item(&detail, 1)?)?);
            }
            actions.extend(self.entries_and_counts(entries, spread::random_lane())?);
            Ok(actions)
        };
        match self
            .transact_create(
                "create business",
                MAX_ATTEMPTS,
                Some(Created::Business(id)),
                actions,
            )
            .await?
        {
            TxOutcome::Committed => Ok(detail),
            TxOutcome::Busy(_) => Err(busy("create business")),
            TxOutcome::Cancelled(codes) => match logo {
                Some(logo) if TxOutcome::failed_condition(&codes, 0) => {
                    Err(self.logo_refusal(account_id, logo, None).await)
                }
                _ => Err(cancelled("create business", &codes)),
            },
        }
    }

    async fn get_business(&self, account_id: i64, id: i64) -> Result<Option<Business>> {
        Ok(self.read_business(account_id, id).await?.map(|(b, _)| b))
    }

    async fn get_business_detail(
        &self,
        account_id: i64,
        id: i64,
    ) -> Result<Option<BusinessDetail>> {
        Ok(self
            .read_detail(account_id, id)
            .await?
            .map(|read| read.detail))
    }

    /// Read, patch in memory, write back with `version = :read` in one transaction together
    /// with the entry and counter changes; a lost race re-reads and applies the patch again,
    /// so concurrent updates of different fields all survive.
    async fn update_business(
        &self,
        account_id: i64,
        id: i64,
        restrict_sub_id: Option<&str>,
        patch: BusinessPatch,
        now: i64,
    ) -> Result<Option<BusinessDetail>> {
        for attempt in 1..=MAX_ATTEMPTS {
            let Some(read) = self.read_detail(account_id, id).await? else {
                return Ok(None);
            };
            if !read.detail.business.visible_to(restrict_sub_id) {
                return Ok(None);
            }
            let change = match self
                .patch_business(read, &patch, now, restrict_sub_id)
                .await?
            {
                Patched::Unchanged(detail) => return Ok(Some(*detail)),
                Patched::Changed(change) => *change,
            };
            self.check_logo_follows(&change).await?;
            if self.write_business_update(&change).await? == Written::Committed {
                if let Some(LocationEdit::Remove(gone)) = &patch.location_edit {
                    self.delete_location_pointer(*gone).await;
                }
                return Ok(Some(change.after));
            }
            tracing::debug!(id, attempt, "business update lost a race; retrying");
            backoff(attempt, self.stretch).await;
        }
        // Ten writers raced on this one business: nothing of this update was written.
        tracing::warn!(id, "business update lost its race {MAX_ATTEMPTS} times");
        Err(busy("update business"))
    }

    async fn list_businesses(
        &self,
        account_id: i64,
        query: &BusinessQuery,
    ) -> Result<Page<Business>> {
        let scope = scope::business_filter_scope(&query.filter);
        let (records, total_count) = self
            .list_page(ScopeList {
                kind: Kind::Business,
                account_id,
                scope: &scope,
                by_name: query.order.by_name(),
                descending: query.order.descending(),
                offset: query.offset,
                limit: query.limit,
            })
            .await?;
        let mut items = Vec::with_capacity(records.len());
        for record in &records {
            let (business, _) = records::business_from(record)?;
            items.push(business);
        }
        Ok(Page { items, total_count })
    }
}

/// A business patched in memory: unchanged (nothing to write), or changed.
enum Patched<'a> {
    Unchanged(Box<BusinessDetail>),
    Changed(Box<BusinessChange<'a>>),
}

/// One attempt's update of a business: the detail as read and as patched, with the versions
/// its write is conditioned on.
struct BusinessChange<'a> {
    account_id: i64,
    id: i64,
    restrict_sub_id: Option<&'a str>,
    before: BusinessDetail,
    after: BusinessDetail,
    version: i64,
    details_version: Option<i64>,
}

impl BusinessChange<'_> {
    fn details_changed(&self) -> bool {
        (&self.before.services, &self.before.locations)
            != (&self.after.services, &self.after.locations)
    }

    /// The logo the business newly has (or keeps under another sub id): it gets a mark.
    fn new_logo(&self) -> Option<i64> {
        new_logo(&self.before.business, &self.after.business)
    }

    /// The logo it no longer has: it loses this business's mark (delete_image checks it).
    fn old_logo(&self) -> Option<i64> {
        let kept = self.after.business.logo_image_id;
        self.before
            .business
            .logo_image_id
            .filter(|&old| kept != Some(old))
    }

    fn business_sub_id(&self) -> Option<&str> {
        self.after.business.partner_sub_id.as_deref()
    }

    /// The id of the one location the update adds, if it adds exactly one.
    fn new_location(&self) -> Option<i64> {
        let known = |id| self.before.locations.iter().any(|b| b.id == id);
        let ids = self.after.locations.iter().map(|l| l.id);
        let added: Vec<i64> = ids.filter(|&id| !known(id)).collect();
        (added.len() == 1).then(|| added[0])
    }
}

/// How the write of one update attempt ended, when it did not fail.
#[derive(PartialEq)]
enum Written {
    Committed,
    /// A version check failed or conflicts outlasted the attempts: read again.
    LostRace,
}

impl DynamoStore {
    /// The business as read with the patch applied, after fresh ids for its new locations
    /// (and their pointers) are taken.
    async fn patch_business<'a>(
        &self,
        read: ReadDetail,
        patch: &BusinessPatch,
        now: i64,
        restrict_sub_id: Option<&'a str>,
    ) -> Result<Patched<'a>> {
        let (account_id, id) = (read.detail.business.account_id, read.detail.business.id);
        let mut after = read.detail.clone();
        let fresh = self
            .next_ids(Seq::Location, after.ids_needed(patch))
            .await?;
        self.put_location_pointers(account_id, id, &fresh).await?;
        if !after.apply(patch, now, &mut fresh.into_iter())? {
            return Ok(Patched::Unchanged(Box::new(after)));
        }
        Ok(Patched::Changed(Box::new(BusinessChange {
            account_id,
            id,
            restrict_sub_id,
            before: read.detail,
            after,
            version: read.version,
            details_version: read.details_version,
        })))
    }

    /// A restricted key may use only its sub id's images, which fit only a business of that
    /// sub id: moving the business elsewhere with its logo cannot pass.
    async fn check_logo_follows(&self, change: &BusinessChange<'_>) -> Result<()> {
        if let (Some(logo), Some(sub)) = (change.new_logo(), change.restrict_sub_id) {
            if change.business_sub_id() != Some(sub) {
                let refusal = self
                    .logo_refusal(change.account_id, logo, change.restrict_sub_id)
                    .await;
                return Err(refusal);
            }
        }
        Ok(())
    }

    /// The update's one transaction: a failed version check is a lost race; the logo mark's
    /// failed condition is a refusal.
    async fn write_business_update(&self, change: &BusinessChange<'_>) -> Result<Written> {
        // Each attempt draws its counter lane afresh (spread.rs); the entries stay in the
        // shard of the id. A few attempts only: conflicts here are mostly with other writers
        // of this very business, and once one of them commits this one must read again.
        let actions = || self.business_update_actions(change, spread::random_lane());
        // A location create is an update that adds one: it answers the request's
        // `Idempotency-Key` in its transaction, as a create does.
        let created = change.new_location().map(Created::Location);
        let outcome = self
            .transact_create("update business", UPDATE_TX_ATTEMPTS, created, actions)
            .await?;
        let codes = match outcome {
            TxOutcome::Committed => return Ok(Written::Committed),
            TxOutcome::Busy(_) => return Ok(Written::LostRace),
            TxOutcome::Cancelled(codes) => codes,
        };
        // A version check failed: the business changed since it was read.
        if TxOutcome::failed_condition(&codes, 0)
            || (change.details_changed() && TxOutcome::failed_condition(&codes, 1))
        {
            return Ok(Written::LostRace);
        }
        Err(match change.new_logo() {
            // The logo mark goes last.
            Some(logo) if TxOutcome::failed_last_condition(&codes) => {
                self.logo_refusal(change.account_id, logo, change.restrict_sub_id)
                    .await
            }
            _ => cancelled("update business", &codes),
        })
    }

    /// The versioned puts, then the list entries and counters, then the logo marks.
    fn business_update_actions(
        &self,
        change: &BusinessChange<'_>,
        lane: u32,
    ) -> Result<Vec<TransactWriteItem>> {
        let (account_id, id, version) = (change.account_id, change.id, change.version);
        let business = &change.after.business;
        let mut actions =
            vec![self.put_if_version(records::business_item(business, version + 1), version)?];
        // Second, so that its failed condition is a lost race like the first's.
        if change.details_changed() {
            actions.push(self.put_if_read(
                records::details_item(&change.after, version + 1)?,
                change.details_version,
            )?);
        }
        actions.extend(self.business_entry_actions(change, lane)?);
        if let Some(old) = change.old_logo() {
            actions.push(self.unmark_logo(old, id)?);
        }
        if let Some(logo) = change.new_logo() {
            let of = match change.restrict_sub_id {
                Some(sub) => LogoOf::SubId(sub),
                None => LogoOf::Business(change.business_sub_id()),
            };
            actions.push(self.mark_logo(logo, account_id, of, id)?);
        }
        Ok(actions)
    }

    /// The list entries the business leaves, joins or renames in, with their counters.
    fn business_entry_actions(
        &self,
        change: &BusinessChange<'_>,
        lane: u32,
    ) -> Result<Vec<TransactWriteItem>> {
        let (account_id, id) = (change.account_id, change.id);
        let (before, after) = (&change.before.business, &change.after.business);
        let (before_scopes, after_scopes) = (
            scope::business_scopes(before),
            scope::business_scopes(after),
        );
        let scopes = ScopeChange::between(&before_scopes, &after_scopes);
        let after_nk = name_sort_key(after);
        let renamed = after_nk != name_sort_key(before);
        let counter = |scope: &str| items::counter_key(Kind::Business, account_id, scope, lane);
        let mut actions = Vec::new();
        for scope in &scopes.left {
            let entry = items::entry_key(Kind::Business, account_id, scope, id);
            actions.push(self.delete(entry)?);
            actions.push(self.add(counter(scope), -1)?);
        }
        for scope in &after_scopes {
            let joined = scopes.joined.contains(&scope);
            if joined || renamed {
                let entry =
                    items::entry_item(Kind::Business, account_id, scope, id, Some(&after_nk));
                actions.push(self.put(entry)?);
            }
            if joined {
                actions.push(self.add(counter(scope), 1)?);
            }
        }
        Ok(actions)
    }
}

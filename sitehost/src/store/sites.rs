//! The site and post stores' traits, and what both implementations share: a site's list
//! scopes and the rules of its writes (docs/dynamodb-design.md, "Sites and posts").
//!
//! A site is in two kinds of list scope. *Counted* scopes (every subset of deleted, sub id
//! and day added; deleted and sub id with the domain) keep a counter, as businesses do: they
//! grow with the account. *Listed* scopes (deleted and sub id with the business, the
//! partner site id, the address or one location) are narrow, a few sites each, and are
//! counted from their entries; that keeps a site with many locations within one
//! transaction.

use async_trait::async_trait;

use super::scope::{scope_name, Term};
use super::Page;
use crate::clock::utc_date;
use crate::domain::post::{NewPost, Post, PostPatch, PostQuery};
use crate::domain::site::{
    title_key, Address, NewSite, Site, SiteFilter, SiteKeyFilter, SitePatch, SiteQuery,
};
use crate::error::{ApiError, Result};

#[async_trait]
pub trait SiteStore: Send + Sync {
    /// Creates an active site. `StateConflict` (`address_in_use`) when another active site
    /// of the service has its address; then nothing is written.
    async fn create_site(&self, account_id: i64, new: NewSite, now: i64) -> Result<Site>;
    async fn get_site(&self, account_id: i64, id: i64) -> Result<Option<Site>>;
    /// Applies a patch atomically; `None` when the account has no such site or
    /// `restrict_sub_id` hides it. `StateConflict` when the site would be active at an
    /// address another active site has; a validation error when the change is larger than
    /// one write may be (`too_many_changes`).
    async fn update_site(
        &self,
        account_id: i64,
        id: i64,
        restrict_sub_id: Option<&str>,
        patch: SitePatch,
        now: i64,
    ) -> Result<Option<Site>>;
    async fn list_sites(&self, account_id: i64, query: &SiteQuery) -> Result<Page<Site>>;
}

#[async_trait]
pub trait PostStore: Send + Sync {
    /// Creates a post on `new.site_id`, which the caller checked is a site it may see.
    async fn create_post(&self, account_id: i64, new: NewPost, now: i64) -> Result<Post>;
    async fn get_post(&self, account_id: i64, id: i64) -> Result<Option<Post>>;
    /// Applies a patch atomically; `None` when the account has no such post.
    async fn update_post(
        &self,
        account_id: i64,
        id: i64,
        patch: PostPatch,
        now: i64,
    ) -> Result<Option<Post>>;
    /// A site's posts, newest first.
    async fn list_posts(&self, account_id: i64, query: &PostQuery) -> Result<Page<Post>>;
}

/// A site's list scopes.
#[derive(Debug, Clone, PartialEq)]
pub struct SiteScopes {
    /// Scopes with a counter.
    pub counted: Vec<String>,
    /// Scopes counted from their entries.
    pub listed: Vec<String>,
}

/// Every subset of `terms`, in their order (the empty one first).
fn subsets(terms: &[Term]) -> Vec<Vec<Term>> {
    (0u32..(1 << terms.len()))
        .map(|mask| {
            terms
                .iter()
                .enumerate()
                .filter(|(i, _)| mask & (1 << i) != 0)
                .map(|(_, t)| t.clone())
                .collect()
        })
        .collect()
}

fn deleted_term(deleted: bool) -> Term {
    ("d", if deleted { "1" } else { "0" }.to_string())
}

fn key_term(key: &SiteKeyFilter) -> Term {
    match key {
        SiteKeyFilter::AddedDate(day) => ("t", day.to_string()),
        SiteKeyFilter::Domain(domain) => ("dom", domain.clone()),
        SiteKeyFilter::Business(id) => ("biz", id.to_string()),
        SiteKeyFilter::PartnerSiteId(id) => ("ps", id.clone()),
        SiteKeyFilter::Address(address) => ("addr", address.key()),
        SiteKeyFilter::Location(id) => ("loc", id.to_string()),
    }
}

fn with(base: &[Term], term: Term) -> String {
    let mut terms = base.to_vec();
    terms.push(term);
    scope_name(&terms)
}

/// Every scope a site is in.
pub fn site_scopes(site: &Site) -> SiteScopes {
    let mut base = vec![deleted_term(site.deleted)];
    if let Some(sub) = &site.partner_sub_id {
        base.push(("s", sub.clone()));
    }
    let bases = subsets(&base);
    let mut counted: Vec<String> = {
        let mut broad = base.clone();
        broad.push(key_term(&SiteKeyFilter::AddedDate(utc_date(site.added))));
        subsets(&broad)
            .iter()
            .map(|terms| scope_name(terms))
            .collect()
    };
    let domain = key_term(&SiteKeyFilter::Domain(site.address.domain.clone()));
    counted.extend(bases.iter().map(|b| with(b, domain.clone())));
    let mut narrow = vec![
        SiteKeyFilter::Business(site.business_id),
        SiteKeyFilter::Address(site.address.clone()),
    ];
    if let Some(id) = &site.partner_site_id {
        narrow.push(SiteKeyFilter::PartnerSiteId(id.clone()));
    }
    narrow.extend(
        site.location_ids
            .iter()
            .map(|&id| SiteKeyFilter::Location(id)),
    );
    let listed = narrow
        .iter()
        .flat_map(|key| bases.iter().map(move |b| with(b, key_term(key))))
        .collect();
    SiteScopes { counted, listed }
}

/// The scope that answers a list filter, and whether it is counted.
pub fn site_filter_scope(filter: &SiteFilter) -> (String, bool) {
    let mut terms = Vec::new();
    if let Some(deleted) = filter.deleted {
        terms.push(deleted_term(deleted));
    }
    if let Some(sub) = &filter.partner_sub_id {
        terms.push(("s", sub.clone()));
    }
    let counted = matches!(
        filter.key,
        None | Some(SiteKeyFilter::AddedDate(_)) | Some(SiteKeyFilter::Domain(_))
    );
    if let Some(key) = &filter.key {
        terms.push(key_term(key));
    }
    (scope_name(&terms), counted)
}

/// The one scope of a post: its site's.
pub fn post_scope(site_id: i64) -> String {
    scope_name(&[("site", site_id.to_string())])
}

/// The most actions one DynamoDB transaction may hold.
pub const MAX_WRITE_ACTIONS: usize = 100;

/// What an active site holds of the web: its hosts ([`Address::hosts`]), for its account
/// (another account's site may not be at them, whatever its directory), and its path
/// ([`Address::path`]: bare host and directory), for itself. A disabled site holds nothing.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Holdings {
    pub hosts: Vec<String>,
    pub path: Option<String>,
}

impl Holdings {
    pub fn of(site: Option<&Site>) -> Holdings {
        match site.filter(|s| !s.deleted) {
            Some(site) => Holdings {
                hosts: site.address.hosts(),
                path: Some(site.address.path()),
            },
            None => Holdings::default(),
        }
    }
}

/// What a write takes and gives up of what sites hold: each an item of its own on
/// DynamoDB, a row on SQLite.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HoldingChange {
    pub hosts_taken: Vec<String>,
    pub path_taken: Option<String>,
    pub hosts_released: Vec<String>,
    pub path_released: Option<String>,
}

impl HoldingChange {
    pub fn between(before: Option<&Site>, after: &Site) -> HoldingChange {
        let (then, now) = (Holdings::of(before), Holdings::of(Some(after)));
        let moved = then.path != now.path;
        HoldingChange {
            hosts_taken: difference(&now.hosts, &then.hosts),
            path_taken: now.path.filter(|_| moved),
            hosts_released: difference(&then.hosts, &now.hosts),
            path_released: then.path.filter(|_| moved),
        }
    }

    /// How many items the change writes.
    pub fn len(&self) -> usize {
        self.hosts_taken.len()
            + self.hosts_released.len()
            + usize::from(self.path_taken.is_some())
            + usize::from(self.path_released.is_some())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn difference(these: &[String], those: &[String]) -> Vec<String> {
    these
        .iter()
        .filter(|x| !those.contains(x))
        .cloned()
        .collect()
}

/// The writes (DynamoDB transaction actions) of a site's create (`before` is `None`) or
/// update: the record, each host and path it takes or gives up, and per scope the entry
/// and the counter it joins or leaves (every entry again when the title's sort key
/// changes).
pub fn site_write_actions(before: Option<&Site>, after: &Site) -> usize {
    let address = HoldingChange::between(before, after).len();
    let now = site_scopes(after);
    let then = before.map(site_scopes).unwrap_or(SiteScopes {
        counted: Vec::new(),
        listed: Vec::new(),
    });
    let retitled = before.is_some_and(|b| title_key(&b.title) != title_key(&after.title));
    let changes = |before: &[String], after: &[String], per_change: usize| {
        let left = before.iter().filter(|s| !after.contains(s)).count();
        let joined = after.iter().filter(|s| !before.contains(s)).count();
        let stayed = if retitled { after.len() - joined } else { 0 };
        (left + joined) * per_change + stayed
    };
    1 + address + changes(&then.counted, &now.counted, 2) + changes(&then.listed, &now.listed, 1)
}

/// DynamoDB's write units for an item of `bytes` written in a transaction: two per started
/// KB (docs/dynamodb-design.md, "Consumed capacity").
fn transactional_units(bytes: usize) -> u64 {
    2 * bytes.div_ceil(1024).max(1) as u64
}

/// The most bytes of a site's list entry or counter lane in `scope` with an `nk` of
/// `nk_bytes`: its partition key (the scope escaped, each byte at most three, and at most
/// 1,024 bytes), sort key, `id` and attribute names.
fn scope_item_bytes(scope: &str, nk_bytes: usize) -> usize {
    (40 + 3 * scope.len()).min(1024) + 64 + nk_bytes
}

/// The most bytes of a site's record: its strings as they are, its numbers, names and keys
/// within 512 bytes, and each location id within 22.
fn site_record_bytes(site: &Site) -> usize {
    let a = &site.address;
    let texts = [
        Some(&a.domain),
        Some(&a.subdomain),
        Some(&a.base_directory),
        Some(&site.title),
        site.partner_site_id.as_ref(),
        site.partner_sub_id.as_ref(),
        site.partner_user_id.as_ref(),
    ];
    512 + texts.iter().flatten().map(|t| t.len()).sum::<usize>() + 22 * site.location_ids.len()
}

/// The bytes of a site's `nk` attribute: its title's sort key (at most 960 bytes on
/// DynamoDB), a separator and the padded id, and the name.
fn nk_bytes(site: &Site) -> usize {
    title_key(&site.title).len().min(960) + 1 + 20 + 2
}

/// An upper bound of the DynamoDB write units of a site's create (`before` is `None`) or
/// update, as [`site_write_actions`] counts its actions: the record (the larger of the old
/// and new), each host and path taken or given up, and per scope left, joined or retitled
/// in its entry (with the entry of the `by_name` index: one more unit per started KB) and,
/// when counted, its counter lane. What a site write pays for
/// ([`crate::config::WRITE_UNITS_PER_REQUEST`]).
pub fn site_write_units(before: Option<&Site>, after: &Site) -> u64 {
    let nk = nk_bytes(after).max(before.map(nk_bytes).unwrap_or(0));
    let entry = |scope: &String| {
        let bytes = scope_item_bytes(scope, nk);
        transactional_units(bytes) + bytes.div_ceil(1024) as u64
    };
    let counter = |scope: &String| transactional_units(scope_item_bytes(scope, 0));
    let now = site_scopes(after);
    let then = before.map(site_scopes).unwrap_or(SiteScopes {
        counted: Vec::new(),
        listed: Vec::new(),
    });
    let retitled = before.is_some_and(|b| title_key(&b.title) != title_key(&after.title));
    let scope_units = |before: &[String], after: &[String], counted: bool| -> u64 {
        let moved = before
            .iter()
            .filter(|s| !after.contains(s))
            .chain(after.iter().filter(|s| !before.contains(s)));
        let moved: u64 = moved
            .map(|s| entry(s) + if counted { counter(s) } else { 0 })
            .sum();
        // A retitled entry is put again, and its old index entry deleted.
        let stayed: u64 = after
            .iter()
            .filter(|s| retitled && before.contains(s))
            .map(|s| entry(s) + scope_item_bytes(s, nk).div_ceil(1024) as u64)
            .sum();
        moved + stayed
    };
    let record = site_record_bytes(after).max(before.map(site_record_bytes).unwrap_or(0));
    transactional_units(record)
        + 2 * HoldingChange::between(before, after).len() as u64
        + scope_units(&then.counted, &now.counted, true)
        + scope_units(&then.listed, &now.listed, false)
}

/// Refuses a write larger than one transaction may be.
pub fn check_write_size(before: Option<&Site>, after: &Site) -> Result<()> {
    let actions = site_write_actions(before, after);
    if actions > MAX_WRITE_ACTIONS {
        return Err(ApiError::invalid(format!(
            "This update changes too much of the site at once ({actions} list entries and \
             counts; at most {MAX_WRITE_ACTIONS}): send it as two updates, for example the \
             locations or the title first and the rest after."
        )));
    }
    Ok(())
}

/// Another active site of the service is at this address: at its host (or, for a `www`
/// site, its bare domain) and base directory.
pub fn address_in_use(address: &Address) -> ApiError {
    ApiError::StateConflict(format!(
        "The address {} belongs to another active site; disable that site (DELETE) or \
         choose another domain, subdomain or base_directory.",
        address.display()
    ))
}

/// Another account's active site is at this host: no directory under it is this account's.
pub fn host_in_use(host: &str) -> ApiError {
    ApiError::StateConflict(format!(
        "The host {host} belongs to another account's active site: a site of this account \
         may not be at it, under any base_directory. Choose another domain or subdomain."
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::site::tests::site;
    use crate::domain::site::MAX_SITE_LOCATIONS;

    #[test]
    fn every_filter_has_the_scope_of_its_sites() {
        let mut s = site(7, "www", true);
        s.partner_sub_id = Some("north".into());
        s.partner_site_id = Some("p1".into());
        s.location_ids = vec![3];
        let scopes = site_scopes(&s);
        let mut all = scopes.counted.clone();
        all.extend(scopes.listed.clone());
        for key in [
            None,
            Some(SiteKeyFilter::AddedDate(utc_date(0))),
            Some(SiteKeyFilter::Domain("example.com".into())),
            Some(SiteKeyFilter::Address(s.address.clone())),
            Some(SiteKeyFilter::Business(1)),
            Some(SiteKeyFilter::Location(3)),
            Some(SiteKeyFilter::PartnerSiteId("p1".into())),
        ] {
            for deleted in [None, Some(false)] {
                for sub in [None, Some("north".to_string())] {
                    let filter = SiteFilter {
                        deleted,
                        partner_sub_id: sub,
                        key: key.clone(),
                    };
                    let (scope, counted) = site_filter_scope(&filter);
                    let home = if counted {
                        &scopes.counted
                    } else {
                        &scopes.listed
                    };
                    assert!(home.contains(&scope), "{filter:?} -> {scope}");
                }
            }
        }
        assert_eq!(all.len(), 12 + 16);
        let other = SiteFilter {
            deleted: Some(true),
            ..Default::default()
        };
        assert!(!all.contains(&site_filter_scope(&other).0));
    }

    #[test]
    fn a_write_takes_and_gives_up_hosts_and_paths() {
        let strings = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let www = site(7, "www", true);
        let created = HoldingChange::between(None, &www);
        assert_eq!(
            created.hosts_taken,
            strings(&["www.example.com", "example.com"])
        );
        assert_eq!(created.path_taken.as_deref(), Some("example.com/"));
        assert_eq!(created.len(), 3);
        let mut blog = www.clone();
        blog.address.base_directory = "/blog/".into();
        let moved = HoldingChange::between(Some(&www), &blog);
        assert!(moved.hosts_taken.is_empty() && moved.hosts_released.is_empty());
        assert_eq!(moved.len(), 2);
        let mut shop = www.clone();
        shop.address.subdomain = "shop".into();
        let elsewhere = HoldingChange::between(Some(&www), &shop);
        assert_eq!(elsewhere.hosts_taken, strings(&["shop.example.com"]));
        assert_eq!(
            elsewhere.hosts_released,
            strings(&["www.example.com", "example.com"])
        );
        let mut retitled = www.clone();
        retitled.title = "Other".into();
        assert!(HoldingChange::between(Some(&www), &retitled).is_empty());
    }

    #[test]
    fn a_typical_site_pays_one_request_and_the_largest_pays_for_its_entries() {
        let mut typical = site(7, "www", true);
        typical.location_ids = vec![3];
        let units = site_write_units(None, &typical);
        assert!(
            units <= crate::config::WRITE_UNITS_PER_REQUEST,
            "a site with one location: {units}"
        );
        let mut plain = typical.clone();
        plain.published = false;
        assert_eq!(
            site_write_units(Some(&typical), &plain),
            2,
            "the record alone"
        );
        let mut largest = typical.clone();
        largest.title = "\u{10348}".repeat(255);
        largest.partner_sub_id = Some("\u{10348}".repeat(255));
        largest.partner_site_id = Some("\u{10348}".repeat(255));
        largest.location_ids = (1..=MAX_SITE_LOCATIONS as i64).collect();
        // Entries of the scopes with the sub id are over 2 KB: 9 units each, 6 the others.
        let units = site_write_units(None, &largest);
        assert!(units > 6 * 84, "{units}");
        let mut disabled = largest.clone();
        disabled.deleted = true;
        assert!(site_write_units(Some(&largest), &disabled) > 6 * 84);
    }

    #[test]
    fn the_largest_site_fits_one_transaction() {
        let mut s = site(7, "www", true);
        s.partner_sub_id = Some("north".into());
        s.partner_site_id = Some("p1".into());
        s.location_ids = (1..=MAX_SITE_LOCATIONS as i64).collect();
        assert!(check_write_size(None, &s).is_ok());
        let mut disabled = s.clone();
        disabled.deleted = true;
        assert!(check_write_size(Some(&s), &disabled).is_ok());
        // A www site holds two hosts and a path: enabling it again takes all three.
        assert_eq!(
            site_write_actions(Some(&disabled), &s),
            site_write_actions(Some(&s), &disabled)
        );
        let mut everything = disabled.clone();
        everything.title = "Other".into();
        everything.location_ids = (100..115).collect();
        assert!(site_write_actions(Some(&s), &everything) > MAX_WRITE_ACTIONS);
        assert!(check_write_size(Some(&s), &everything).is_err());
    }
}

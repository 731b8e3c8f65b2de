//! Sites: a business's web sites, each at one address (domain, subdomain, base directory).
//! The record, the rules of a create or update body (`input`), the address (`address`),
//! and the filters and orders of a list. What a site looks like over HTTP is
//! `operations::sites`.

mod address;
mod input;

use chrono::NaiveDate;

pub use address::{base_directory_filter, host_filter, Address};

/// A site's title, like a business name.
pub const MAX_TITLE_CHARS: usize = 255;
pub const MAX_PARTNER_ID_CHARS: usize = 255;
/// The most locations one site may list. Each location puts a site in up to four list
/// scopes, written in the site's own transaction (docs/dynamodb-design.md, "Sites").
pub const MAX_SITE_LOCATIONS: usize = 15;

#[derive(Debug, Clone, PartialEq)]
pub struct Site {
    pub id: i64,
    pub account_id: i64,
    pub business_id: i64,
    pub user_id: i64,
    pub address: Address,
    pub title: String,
    pub partner_site_id: Option<String>,
    pub partner_sub_id: Option<String>,
    pub partner_user_id: Option<String>,
    pub theme_id: Option<i64>,
    pub deleted: bool,
    pub published: bool,
    pub www_primary: bool,
    /// In the order given.
    pub location_ids: Vec<i64>,
    /// Unix seconds.
    pub added: i64,
    pub modified: i64,
}

/// A validated create request; the store assigns `id` and the timestamps.
#[derive(Debug, Clone, PartialEq)]
pub struct NewSite {
    pub business_id: i64,
    pub user_id: i64,
    pub address: Address,
    pub title: String,
    pub partner_site_id: Option<String>,
    /// `None`: the business's (the operation resolves it before the store sees it).
    pub partner_sub_id: Option<String>,
    pub partner_user_id: Option<String>,
    pub theme_id: Option<i64>,
    pub published: bool,
    pub www_primary: bool,
    pub location_ids: Vec<i64>,
}

/// A validated update: `None` leaves a field as it is; `Some(None)` sets a nullable field
/// to null.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SitePatch {
    pub business_id: Option<i64>,
    pub user_id: Option<i64>,
    pub domain: Option<String>,
    pub subdomain: Option<String>,
    pub base_directory: Option<String>,
    pub title: Option<String>,
    pub partner_site_id: Option<Option<String>>,
    pub partner_sub_id: Option<Option<String>>,
    pub partner_user_id: Option<Option<String>>,
    pub theme_id: Option<Option<i64>>,
    pub deleted: Option<bool>,
    pub published: Option<bool>,
    pub www_primary: Option<bool>,
    pub location_ids: Option<Vec<i64>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SiteOrder {
    IdAsc,
    IdDesc,
    TitleAsc,
    TitleDesc,
}

impl SiteOrder {
    pub fn by_title(self) -> bool {
        matches!(self, Self::TitleAsc | Self::TitleDesc)
    }

    pub fn descending(self) -> bool {
        matches!(self, Self::IdDesc | Self::TitleDesc)
    }
}

/// The one narrow filter a site list may have beside `deleted` and `partner_sub_id`.
#[derive(Debug, Clone, PartialEq)]
pub enum SiteKeyFilter {
    AddedDate(NaiveDate),
    /// Every site under a domain, whatever its subdomain and directory.
    Domain(String),
    /// The site(s) at one address.
    Address(Address),
    Business(i64),
    Location(i64),
    PartnerSiteId(String),
}

/// The filters of a site list. `partner_sub_id` also carries a key's restriction.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SiteFilter {
    pub deleted: Option<bool>,
    pub partner_sub_id: Option<String>,
    pub key: Option<SiteKeyFilter>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SiteQuery {
    pub filter: SiteFilter,
    pub order: SiteOrder,
    pub limit: u64,
    pub offset: u64,
}

impl Site {
    /// Whether a key restricted to `restrict_sub_id` (if any) may see this site.
    pub fn visible_to(&self, restrict_sub_id: Option<&str>) -> bool {
        restrict_sub_id.is_none_or(|sub| self.partner_sub_id.as_deref() == Some(sub))
    }

    /// The host a visitor sees: `www.<domain>` or `<domain>` for a `www` site (by
    /// `www_primary`), else `<subdomain>.<domain>`.
    pub fn formatted_domain(&self) -> String {
        let a = &self.address;
        match (a.subdomain.as_str(), self.www_primary) {
            ("www", false) => a.domain.clone(),
            (sub, _) => format!("{sub}.{}", a.domain),
        }
    }

    /// The site's home page.
    pub fn formatted_url(&self) -> String {
        format!(
            "http://{}{}",
            self.formatted_domain(),
            self.address.base_directory
        )
    }

    /// Applies a validated patch; returns whether anything changed. The address parts are
    /// valid on their own; together they are the new address.
    pub fn apply(&mut self, patch: &SitePatch, now: i64) -> bool {
        let before = self.clone();
        if let Some(v) = patch.business_id {
            self.business_id = v;
        }
        if let Some(v) = patch.user_id {
            self.user_id = v;
        }
        if let Some(v) = &patch.domain {
            self.address.domain = v.clone();
        }
        if let Some(v) = &patch.subdomain {
            self.address.subdomain = v.clone();
        }
        if let Some(v) = &patch.base_directory {
            self.address.base_directory = v.clone();
        }
        if let Some(v) = &patch.title {
            self.title = v.clone();
        }
        if let Some(v) = &patch.partner_site_id {
            self.partner_site_id = v.clone();
        }
        if let Some(v) = &patch.partner_sub_id {
            self.partner_sub_id = v.clone();
        }
        if let Some(v) = &patch.partner_user_id {
            self.partner_user_id = v.clone();
        }
        if let Some(v) = patch.theme_id {
            self.theme_id = v;
        }
        if let Some(v) = patch.deleted {
            self.deleted = v;
        }
        if let Some(v) = patch.published {
            self.published = v;
        }
        if let Some(v) = patch.www_primary {
            self.www_primary = v;
        }
        if let Some(v) = &patch.location_ids {
            self.location_ids = v.clone();
        }
        let changed = *self != before;
        if changed {
            self.modified = now;
        }
        changed
    }
}

impl NewSite {
    /// The record this request becomes, once the store has picked an id.
    pub fn into_site(self, id: i64, account_id: i64, now: i64) -> Site {
        Site {
            id,
            account_id,
            business_id: self.business_id,
            user_id: self.user_id,
            address: self.address,
            title: self.title,
            partner_site_id: self.partner_site_id,
            partner_sub_id: self.partner_sub_id,
            partner_user_id: self.partner_user_id,
            theme_id: self.theme_id,
            deleted: false,
            published: self.published,
            www_primary: self.www_primary,
            location_ids: self.location_ids,
            added: now,
            modified: now,
        }
    }
}

/// The sort key of a site title: accent- and case-insensitive, as business and location
/// names (`collation`); the stores break ties by id.
pub fn title_key(title: &str) -> String {
    crate::domain::collation::sort_key(title)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn site(id: i64, subdomain: &str, www_primary: bool) -> Site {
        NewSite {
            business_id: 1,
            user_id: 1,
            address: Address {
                domain: "example.com".into(),
                subdomain: subdomain.into(),
                base_directory: "/".into(),
            },
            title: "Site".into(),
            partner_site_id: None,
            partner_sub_id: None,
            partner_user_id: None,
            theme_id: None,
            published: true,
            www_primary,
            location_ids: Vec::new(),
        }
        .into_site(id, 1, 0)
    }

    #[test]
    fn formatted_domain_follows_www_primary() {
        assert_eq!(site(1, "www", true).formatted_domain(), "www.example.com");
        assert_eq!(site(1, "www", false).formatted_domain(), "example.com");
        assert_eq!(
            site(1, "shop", false).formatted_domain(),
            "shop.example.com"
        );
        assert_eq!(
            site(1, "shop", false).formatted_url(),
            "http://shop.example.com/"
        );
    }

    #[test]
    fn a_patch_changes_only_what_it_names() {
        let mut s = site(1, "www", true);
        assert!(!s.apply(&SitePatch::default(), 5));
        assert_eq!(s.modified, 0);
        let patch = SitePatch {
            deleted: Some(true),
            ..Default::default()
        };
        assert!(s.apply(&patch, 5));
        assert!(s.deleted && s.modified == 5 && s.title == "Site");
    }
}

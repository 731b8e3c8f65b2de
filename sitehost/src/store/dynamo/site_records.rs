//! Sites and posts as DynamoDB items and back (docs/dynamodb-design.md, "Sites and posts").

use aws_sdk_dynamodb::types::AttributeValue;

use super::items::{
    get_bool, get_n, get_s, malformed, n, opt_n, opt_s, post_key, s, site_key, Item,
};
use crate::domain::post::Post;
use crate::domain::site::{Address, Site};
use crate::error::Result;

fn put_opt_s(item: &mut Item, name: &str, value: &Option<String>) {
    if let Some(v) = value {
        item.insert(name.into(), s(v.as_str()));
    }
}

/// The site item, with its optimistic-lock `version`. `location_ids` is a list of numbers
/// (in the order given), absent when empty.
pub fn site_item(site: &Site, version: i64) -> Item {
    let mut item = site_key(site.id);
    item.insert("id".into(), n(site.id));
    item.insert("account_id".into(), n(site.account_id));
    item.insert("business_id".into(), n(site.business_id));
    item.insert("user_id".into(), n(site.user_id));
    item.insert("domain".into(), s(site.address.domain.as_str()));
    item.insert("subdomain".into(), s(site.address.subdomain.as_str()));
    item.insert(
        "base_directory".into(),
        s(site.address.base_directory.as_str()),
    );
    item.insert("title".into(), s(site.title.as_str()));
    put_opt_s(&mut item, "partner_site_id", &site.partner_site_id);
    put_opt_s(&mut item, "partner_sub_id", &site.partner_sub_id);
    put_opt_s(&mut item, "partner_user_id", &site.partner_user_id);
    if let Some(theme) = site.theme_id {
        item.insert("theme_id".into(), n(theme));
    }
    item.insert("deleted".into(), AttributeValue::Bool(site.deleted));
    item.insert("published".into(), AttributeValue::Bool(site.published));
    item.insert("www_primary".into(), AttributeValue::Bool(site.www_primary));
    if !site.location_ids.is_empty() {
        let ids = site.location_ids.iter().map(|&id| n(id)).collect();
        item.insert("location_ids".into(), AttributeValue::L(ids));
    }
    item.insert("added".into(), n(site.added));
    item.insert("modified".into(), n(site.modified));
    item.insert("version".into(), n(version));
    item
}

/// A site and its `version`.
pub fn site_from(item: &Item) -> Result<(Site, i64)> {
    let location_ids = match item.get("location_ids") {
        None => Vec::new(),
        Some(AttributeValue::L(values)) => values
            .iter()
            .map(|v| {
                v.as_n()
                    .ok()
                    .and_then(|text| text.parse().ok())
                    .ok_or_else(|| malformed("location_ids"))
            })
            .collect::<Result<_>>()?,
        Some(_) => return Err(malformed("location_ids")),
    };
    let site = Site {
        id: get_n(item, "id")?,
        account_id: get_n(item, "account_id")?,
        business_id: get_n(item, "business_id")?,
        user_id: get_n(item, "user_id")?,
        address: Address {
            domain: get_s(item, "domain")?,
            subdomain: get_s(item, "subdomain")?,
            base_directory: get_s(item, "base_directory")?,
        },
        title: get_s(item, "title")?,
        partner_site_id: opt_s(item, "partner_site_id")?,
        partner_sub_id: opt_s(item, "partner_sub_id")?,
        partner_user_id: opt_s(item, "partner_user_id")?,
        theme_id: opt_n(item, "theme_id")?,
        deleted: get_bool(item, "deleted")?,
        published: get_bool(item, "published")?,
        www_primary: get_bool(item, "www_primary")?,
        location_ids,
        added: get_n(item, "added")?,
        modified: get_n(item, "modified")?,
    };
    Ok((site, get_n(item, "version")?))
}

pub fn post_item(post: &Post, version: i64) -> Item {
    let mut item = post_key(post.id);
    item.insert("id".into(), n(post.id));
    item.insert("account_id".into(), n(post.account_id));
    item.insert("site_id".into(), n(post.site_id));
    item.insert("title".into(), s(post.title.as_str()));
    item.insert("content".into(), s(post.content.as_str()));
    item.insert("date".into(), n(post.date));
    item.insert("added".into(), n(post.added));
    item.insert("modified".into(), n(post.modified));
    item.insert("version".into(), n(version));
    item
}

pub fn post_from(item: &Item) -> Result<(Post, i64)> {
    let post = Post {
        id: get_n(item, "id")?,
        account_id: get_n(item, "account_id")?,
        site_id: get_n(item, "site_id")?,
        title: get_s(item, "title")?,
        content: get_s(item, "content")?,
        date: get_n(item, "date")?,
        added: get_n(item, "added")?,
        modified: get_n(item, "modified")?,
    };
    Ok((post, get_n(item, "version")?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::site::tests::site;

    #[test]
    fn sites_and_posts_round_trip() {
        let mut original = site(4, "shop", false);
        original.location_ids = vec![9, 2];
        original.theme_id = Some(449);
        original.partner_sub_id = Some("north".into());
        assert_eq!(
            site_from(&site_item(&original, 3)).ok(),
            Some((original, 3))
        );
        let post = Post {
            id: 1,
            account_id: 2,
            site_id: 4,
            title: "T".into(),
            content: "<p>x</p>".into(),
            date: 5,
            added: 6,
            modified: 7,
        };
        assert_eq!(post_from(&post_item(&post, 1)).ok(), Some((post, 1)));
    }
}

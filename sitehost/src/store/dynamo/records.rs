//! Records as DynamoDB items and back (docs/dynamodb-design.md, "Items"): businesses with
//! their DETAILS item, images and barred image ids, accounts, API keys.

use aws_sdk_dynamodb::types::AttributeValue;

use super::items::{
    account_key, api_key_key, business_key, details_key, get_bool, get_n, get_s, image_key,
    malformed, n, opt_n, opt_s, s, Item,
};
use crate::domain::account::{Account, ApiKey};
use crate::domain::business::{Business, BusinessDetail};
use crate::domain::image_record::Image;
use crate::domain::location::Location;
use crate::error::{ApiError, Result};

fn put_opt_s(item: &mut Item, name: &str, value: &Option<String>) {
    if let Some(v) = value {
        item.insert(name.into(), s(v.as_str()));
    }
}

fn put_opt_n(item: &mut Item, name: &str, value: Option<i64>) {
    if let Some(v) = value {
        item.insert(name.into(), n(v));
    }
}

/// The business item, with its optimistic-lock `version`.
pub fn business_item(b: &Business, version: i64) -> Item {
    let mut item = business_key(b.id);
    item.insert("id".into(), n(b.id));
    item.insert("account_id".into(), n(b.account_id));
    item.insert("business_name".into(), s(b.business_name.as_str()));
    item.insert("slug".into(), s(b.slug.as_str()));
    item.insert("deleted".into(), AttributeValue::Bool(b.deleted));
    put_opt_s(&mut item, "partner_business_id", &b.partner_business_id);
    put_opt_s(&mut item, "partner_sub_id", &b.partner_sub_id);
    put_opt_n(&mut item, "category_id", b.category_id);
    put_opt_n(&mut item, "logo_image_id", b.logo_image_id);
    item.insert("user_id".into(), n(b.user_id));
    item.insert("added".into(), n(b.added));
    item.insert("modified".into(), n(b.modified));
    item.insert("version".into(), n(version));
    item
}

/// A business and its `version`.
pub fn business_from(item: &Item) -> Result<(Business, i64)> {
    let business = Business {
        id: get_n(item, "id")?,
        account_id: get_n(item, "account_id")?,
        business_name: get_s(item, "business_name")?,
        slug: get_s(item, "slug")?,
        deleted: get_bool(item, "deleted")?,
        partner_business_id: opt_s(item, "partner_business_id")?,
        partner_sub_id: opt_s(item, "partner_sub_id")?,
        category_id: opt_n(item, "category_id")?,
        logo_image_id: opt_n(item, "logo_image_id")?,
        user_id: get_n(item, "user_id")?,
        added: get_n(item, "added")?,
        modified: get_n(item, "modified")?,
    };
    Ok((business, get_n(item, "version")?))
}

fn stored_json(err: serde_json::Error) -> ApiError {
    ApiError::from(anyhow::Error::new(err).context("the locations of a DETAILS item"))
}

/// A business's services (`services`, L of S) and locations (`locations`, the compact
/// JSON of `[Location]`, at most `location::MAX_LOCATIONS_BYTES`), each absent when empty,
/// with the `version` of the business item written with them.
pub fn details_item(detail: &BusinessDetail, version: i64) -> Result<Item> {
    let mut item = details_key(detail.business.id);
    if !detail.services.is_empty() {
        let services = detail.services.iter().map(|x| s(x.as_str())).collect();
        item.insert("services".into(), AttributeValue::L(services));
    }
    if !detail.locations.is_empty() {
        let json = serde_json::to_string(&detail.locations).map_err(stored_json)?;
        item.insert("locations".into(), s(json));
    }
    item.insert("version".into(), n(version));
    Ok(item)
}

/// The services, locations and `version` of a DETAILS item.
pub fn details_from(item: &Item) -> Result<(Vec<String>, Vec<Location>, i64)> {
    let services = match item.get("services") {
        None => Vec::new(),
        Some(AttributeValue::L(values)) => values
            .iter()
            .map(|v| v.as_s().cloned().map_err(|_| malformed("services")))
            .collect::<Result<_>>()?,
        Some(_) => return Err(malformed("services")),
    };
    let locations = match opt_s(item, "locations")? {
        Some(json) => serde_json::from_str(&json).map_err(stored_json)?,
        None => Vec::new(),
    };
    Ok((services, locations, get_n(item, "version")?))
}

pub fn image_item(image: &Image) -> Item {
    let mut item = image_key(image.id);
    item.insert("id".into(), n(image.id));
    item.insert("account_id".into(), n(image.account_id));
    item.insert("path".into(), s(image.path.as_str()));
    item.insert("mimetype".into(), s(image.mimetype.as_str()));
    item.insert("width".into(), n(image.width));
    item.insert("height".into(), n(image.height));
    put_opt_n(&mut item, "site_id", image.site_id);
    put_opt_n(&mut item, "business_id", image.business_id);
    put_opt_s(&mut item, "partner_sub_id", &image.partner_sub_id);
    item.insert("user_id".into(), n(image.user_id));
    item.insert("added".into(), n(image.added));
    item.insert("modified".into(), n(image.modified));
    item
}

pub fn image_from(item: &Item) -> Result<Image> {
    Ok(Image {
        id: get_n(item, "id")?,
        account_id: get_n(item, "account_id")?,
        path: get_s(item, "path")?,
        mimetype: get_s(item, "mimetype")?,
        width: get_n(item, "width")?,
        height: get_n(item, "height")?,
        site_id: opt_n(item, "site_id")?,
        business_id: opt_n(item, "business_id")?,
        partner_sub_id: opt_s(item, "partner_sub_id")?,
        user_id: get_n(item, "user_id")?,
        added: get_n(item, "added")?,
        modified: get_n(item, "modified")?,
    })
}

/// On an image item: the ids of the businesses that have the image as their logo (a
/// number set, absent when none). Business writes keep it; `delete_image` refuses while
/// it is there. Never part of the `Image` itself.
pub const LOGO_OF: &str = "logo_of";

/// Marks an `IMAGE#` item that stands for an id settled as never recorded, or for a deleted
/// image.
pub const BARRED: &str = "barred";

/// The item that bars an image id (`settle_image`): it takes the record's key, so the
/// record's `attribute_not_exists` put can never succeed after it.
pub fn barred_image_item(id: i64) -> Item {
    let mut item = image_key(id);
    item.insert(BARRED.into(), AttributeValue::Bool(true));
    item
}

/// The image an `IMAGE#` item holds, `None` for a barred id.
pub fn image_record(item: &Item) -> Result<Option<Image>> {
    if item.contains_key(BARRED) {
        return Ok(None);
    }
    image_from(item).map(Some)
}

pub fn account_item(account: &Account) -> Item {
    let mut item = account_key(&account.name);
    item.insert("account_id".into(), n(account.id));
    item.insert("name".into(), s(account.name.as_str()));
    item
}

pub fn account_from(item: &Item) -> Result<Account> {
    Ok(Account {
        id: get_n(item, "account_id")?,
        name: get_s(item, "name")?,
    })
}

pub fn api_key_item(k: &ApiKey) -> Item {
    let mut item = api_key_key(&k.key);
    item.insert("key".into(), s(k.key.as_str()));
    item.insert("secret".into(), s(k.secret.as_str()));
    item.insert("account_id".into(), n(k.account_id));
    item.insert("user_id".into(), n(k.user_id));
    put_opt_s(&mut item, "partner_sub_id", &k.partner_sub_id);
    item.insert("revoked".into(), AttributeValue::Bool(k.revoked));
    item.insert("created".into(), n(k.created));
    item
}

pub fn api_key_from(item: &Item) -> Result<ApiKey> {
    Ok(ApiKey {
        key: get_s(item, "key")?,
        secret: get_s(item, "secret")?,
        account_id: get_n(item, "account_id")?,
        user_id: get_n(item, "user_id")?,
        partner_sub_id: opt_s(item, "partner_sub_id")?,
        revoked: get_bool(item, "revoked")?,
        created: get_n(item, "created")?,
    })
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::domain::business::NewBusiness;
    use crate::store::dynamo::items::PK;

    /// A business record as the store keeps it (the item-key tests use it too).
    pub(in crate::store::dynamo) fn business(id: i64, name: &str) -> Business {
        NewBusiness {
            business_name: name.into(),
            partner_business_id: Some("p#1".into()),
            partner_sub_id: None,
            category_id: Some(3),
            logo_image_id: None,
            user_id: 9,
            ..Default::default()
        }
        .into_business(id, 1, 1_369_395_621)
    }

    #[test]
    fn businesses_round_trip() {
        let b = business(7, "Joe's");
        let (back, version) = business_from(&business_item(&b, 4)).expect("parse");
        assert_eq!((back, version), (b, 4));
    }

    #[test]
    fn images_round_trip_with_their_sub_id_and_barred_ids_read_as_none() {
        let image = crate::domain::image_record::NewImage {
            id: Some(5),
            path: "img/upload/a-bcdefghijklm--5.png".into(),
            mimetype: "image/png".into(),
            width: 3,
            height: 2,
            site_id: Some(1),
            business_id: None,
            partner_sub_id: Some("north".into()),
            user_id: 9,
        }
        .into_image(5, 1, 1_369_395_621);
        assert_eq!(
            image_record(&image_item(&image)).expect("parse"),
            Some(image)
        );
        assert_eq!(image_record(&barred_image_item(5)).expect("parse"), None);
        assert_eq!(barred_image_item(5)[PK], image_key(5)[PK]);
    }
}

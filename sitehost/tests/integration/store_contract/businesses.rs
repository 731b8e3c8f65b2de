//! Businesses: what is stored comes back, accounts never see each other's records, logo
//! references and validation, and update semantics.

use sitehost::domain::business::{Business, BusinessOrder, BusinessPatch, NewBusiness};
use sitehost::domain::image_record::{Image, ImageFilter, NewImage};
use sitehost::store::SharedStore;

use super::fixtures::{
    account, all, assert_field_error, create, deleted, ids, image, list, list_images, new_business,
    new_image, patch, pbid, sub, total, DAY1, DAY2,
};

pub async fn a_created_business_is_read_back_as_stored(store: SharedStore) {
    let a = account(&store, "acme").await;
    let new = NewBusiness {
        business_name: "Joe's Pizza".into(),
        partner_business_id: Some("p-1".into()),
        partner_sub_id: Some("sub-1".into()),
        category_id: Some(12),
        logo_image_id: None,
        user_id: 7,
        ..Default::default()
    };
    let b = create(&store, a, new, DAY1).await;
    assert!(b.id > 0);
    assert_eq!(b.account_id, a);
    assert_eq!(b.business_name, "Joe's Pizza");
    assert_eq!(b.slug, "joes-pizza");
    assert!(!b.deleted);
    assert_eq!(b.partner_business_id.as_deref(), Some("p-1"));
    assert_eq!(b.partner_sub_id.as_deref(), Some("sub-1"));
    assert_eq!(b.category_id, Some(12));
    assert_eq!(b.logo_image_id, None);
    assert_eq!(b.user_id, 7);
    assert_eq!((b.added, b.modified), (DAY1, DAY1));
    assert_eq!(
        store.get_business(a, b.id).await.expect("get"),
        Some(b.clone())
    );
    assert_eq!(store.get_business(a, b.id + 1000).await.expect("get"), None);

    let second = create(&store, a, new_business("Second"), DAY2).await;
    assert!(second.id > b.id, "ids grow: {} then {}", b.id, second.id);
    assert_eq!(second.partner_sub_id, None);
    assert_eq!(
        store.get_business(a, second.id).await.expect("get"),
        Some(second)
    );
    assert_eq!(total(&store, a, all()).await, 2);
}

/// Two accounts; the first has a business of sub id `s` with an image.
async fn two_accounts(store: &SharedStore) -> (i64, i64, Business, Image) {
    let a = account(store, "acme").await;
    let b = account(store, "globex").await;
    assert_ne!(a, b);
    let theirs = create(
        store,
        a,
        NewBusiness {
            partner_sub_id: Some("s".into()),
            ..new_business("Acme Shop")
        },
        DAY1,
    )
    .await;
    let their_image = image(
        store,
        a,
        NewImage {
            partner_sub_id: Some("s".into()),
            ..new_image("img/upload/acme.jpg", Some(1), Some(theirs.id))
        },
        DAY1,
    )
    .await;
    (a, b, theirs, their_image)
}

pub async fn another_accounts_business_is_not_found_nor_changed(store: SharedStore) {
    let (a, b, theirs, _) = two_accounts(&store).await;
    assert_eq!(store.get_business(b, theirs.id).await.expect("get"), None);
    let hijack = BusinessPatch {
        business_name: Some("Hacked".into()),
        ..Default::default()
    };
    assert_eq!(
        store
            .update_business(b, theirs.id, None, hijack, DAY2)
            .await
            .expect("update"),
        None
    );
    assert_eq!(
        store.get_business(a, theirs.id).await.expect("get"),
        Some(theirs.clone())
    );
}

pub async fn another_accounts_records_are_not_listed(store: SharedStore) {
    let (_, b, theirs, their_image) = two_accounts(&store).await;
    for filter in [all(), sub("s"), deleted(false)] {
        let page = list(&store, b, filter, BusinessOrder::IdAsc, 0, 20).await;
        assert_eq!((page.items.len(), page.total_count), (0, 0));
    }
    assert_eq!(
        store.get_image(b, their_image.id).await.expect("get image"),
        None
    );
    let images = list_images(&store, b, ImageFilter::default(), false, 0, 20).await;
    assert_eq!((images.items.len(), images.total_count), (0, 0));
    let by_business = list_images(
        &store,
        b,
        ImageFilter {
            business_id: Some(theirs.id),
            ..Default::default()
        },
        false,
        0,
        20,
    )
    .await;
    assert_eq!((by_business.items.len(), by_business.total_count), (0, 0));
}

pub async fn another_accounts_image_or_business_cannot_be_referenced(store: SharedStore) {
    let (a, b, theirs, their_image) = two_accounts(&store).await;
    let with_their_logo = NewBusiness {
        logo_image_id: Some(their_image.id),
        ..new_business("Globex")
    };
    assert_field_error(
        store.create_business(b, with_their_logo, DAY1).await,
        "logo_image_id",
    );
    assert_field_error(
        store
            .create_image(
                b,
                new_image("img/upload/globex.jpg", None, Some(theirs.id)),
                DAY1,
            )
            .await,
        "business_id",
    );
    let own = create(&store, b, new_business("Globex"), DAY1).await;
    let steal_logo = BusinessPatch {
        logo_image_id: Some(Some(their_image.id)),
        ..Default::default()
    };
    assert_field_error(
        store
            .update_business(b, own.id, None, steal_logo, DAY2)
            .await,
        "logo_image_id",
    );
    assert_eq!(
        store.get_business(b, own.id).await.expect("get"),
        Some(own.clone())
    );

    assert_eq!(
        ids(&store, a, all(), BusinessOrder::IdAsc).await,
        (vec![theirs.id], 1)
    );
    assert_eq!(
        ids(&store, b, all(), BusinessOrder::IdAsc).await,
        (vec![own.id], 1)
    );
    assert_eq!(
        ids(&store, b, all(), BusinessOrder::NameAsc).await,
        (vec![own.id], 1)
    );
}

// Reads better whole: one business's logo refused, set, changed and cleared, step by step.
pub async fn a_missing_logo_or_business_is_refused_and_writes_nothing(store: SharedStore) {
    let a = account(&store, "acme").await;
    let missing_logo = NewBusiness {
        logo_image_id: Some(999_999),
        ..new_business("No Logo")
    };
    assert_field_error(
        store.create_business(a, missing_logo, DAY1).await,
        "logo_image_id",
    );
    assert_eq!(
        total(&store, a, all()).await,
        0,
        "a failed create writes nothing"
    );

    let logo = image(
        &store,
        a,
        new_image("img/upload/logo.png", None, None),
        DAY1,
    )
    .await;
    let b = create(
        &store,
        a,
        NewBusiness {
            logo_image_id: Some(logo.id),
            ..new_business("With Logo")
        },
        DAY1,
    )
    .await;
    assert_eq!(b.logo_image_id, Some(logo.id));

    let bad = BusinessPatch {
        logo_image_id: Some(Some(999_999)),
        category_id: Some(Some(3)),
        ..Default::default()
    };
    assert_field_error(
        store.update_business(a, b.id, None, bad, DAY2).await,
        "logo_image_id",
    );
    assert_eq!(
        store.get_business(a, b.id).await.expect("get"),
        Some(b.clone()),
        "a failed update writes nothing"
    );

    let other_logo = image(
        &store,
        a,
        new_image("img/upload/logo2.png", None, None),
        DAY1,
    )
    .await;
    let changed = patch(
        &store,
        a,
        b.id,
        BusinessPatch {
            logo_image_id: Some(Some(other_logo.id)),
            ..Default::default()
        },
        DAY2,
    )
    .await;
    assert_eq!(changed.logo_image_id, Some(other_logo.id));
    let cleared = patch(
        &store,
        a,
        b.id,
        BusinessPatch {
            logo_image_id: Some(None),
            ..Default::default()
        },
        DAY2,
    )
    .await;
    assert_eq!(cleared.logo_image_id, None);

    assert_field_error(
        store
            .create_image(
                a,
                new_image("img/upload/orphan.png", None, Some(999_999)),
                DAY1,
            )
            .await,
        "business_id",
    );
    assert_eq!(
        list_images(&store, a, ImageFilter::default(), false, 0, 10)
            .await
            .total_count,
        2
    );
    let attached = image(
        &store,
        a,
        new_image("img/upload/attached.png", None, Some(b.id)),
        DAY1,
    )
    .await;
    assert_eq!(attached.business_id, Some(b.id));
    assert_eq!(
        store.get_image(a, attached.id).await.expect("get image"),
        Some(attached)
    );
}

// Reads better whole: one business through its patches, each from the state the last left.
pub async fn a_patch_changes_what_it_names_within_its_sub_id(store: SharedStore) {
    let a = account(&store, "acme").await;
    let b = create(
        &store,
        a,
        NewBusiness {
            partner_business_id: Some("p1".into()),
            partner_sub_id: Some("s1".into()),
            category_id: Some(5),
            ..new_business("Old Name")
        },
        DAY1,
    )
    .await;
    let renamed = patch(
        &store,
        a,
        b.id,
        BusinessPatch {
            business_name: Some("New Name!".into()),
            ..Default::default()
        },
        DAY1 + 60,
    )
    .await;
    assert_eq!(
        renamed,
        Business {
            business_name: "New Name!".into(),
            slug: "new-name".into(),
            modified: DAY1 + 60,
            ..b.clone()
        }
    );
    assert_eq!(
        store.get_business(a, b.id).await.expect("get"),
        Some(renamed.clone())
    );

    let cleared = patch(
        &store,
        a,
        b.id,
        BusinessPatch {
            partner_business_id: Some(None),
            category_id: Some(None),
            ..Default::default()
        },
        DAY1 + 70,
    )
    .await;
    assert_eq!(
        cleared,
        Business {
            partner_business_id: None,
            category_id: None,
            modified: DAY1 + 70,
            ..renamed.clone()
        }
    );
    assert_eq!(
        store.get_business(a, b.id).await.expect("get"),
        Some(cleared.clone())
    );
    assert_eq!(total(&store, a, pbid("p1")).await, 0);

    // A sub-restricted key only reaches its own sub id.
    let set_category = || BusinessPatch {
        category_id: Some(Some(9)),
        ..Default::default()
    };
    assert_eq!(
        store
            .update_business(a, b.id, Some("s2"), set_category(), DAY2)
            .await
            .expect("update"),
        None
    );
    assert_eq!(
        store.get_business(a, b.id).await.expect("get"),
        Some(cleared.clone())
    );
    let allowed = store
        .update_business(a, b.id, Some("s1"), set_category(), DAY2)
        .await
        .expect("update");
    assert_eq!(allowed.map(|b| b.business.category_id), Some(Some(9)));

    assert_eq!(
        store
            .update_business(a, b.id + 1000, None, set_category(), DAY2)
            .await
            .expect("update"),
        None
    );
    // A patch that changes nothing leaves `modified`.
    let same = patch(
        &store,
        a,
        b.id,
        BusinessPatch {
            business_name: Some("New Name!".into()),
            ..Default::default()
        },
        DAY2 + 5,
    )
    .await;
    assert_eq!(same.modified, DAY2);
}

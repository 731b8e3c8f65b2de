//! Image deletes: the record, its list entries and counts go; a logo stays (409 naming its
//! business); another account's or sub id's image is not found; a deleted id is never
//! recorded again; and a delete racing a business write that sets the image as its logo
//! never leaves a business whose logo is gone.

use sitehost::domain::business::{BusinessPatch, NewBusiness};
use sitehost::domain::image_record::{Image, ImageFilter, NewImage};
use sitehost::store::SharedStore;
use sitehost::ApiError;

use super::fixtures::{
    account, assert_field_error, create, image, list_images, new_business, new_image, patch, DAY1,
};

/// Every filter an image can be listed by, with its count and ids.
async fn lists(store: &SharedStore, account: i64, image: &Image) -> Vec<(u64, Vec<i64>)> {
    let filters = [
        ImageFilter::default(),
        ImageFilter {
            site_id: image.site_id,
            ..Default::default()
        },
        ImageFilter {
            business_id: image.business_id,
            ..Default::default()
        },
        ImageFilter {
            site_id: image.site_id,
            business_id: image.business_id,
            partner_sub_id: image.partner_sub_id.clone(),
        },
    ];
    let mut out = Vec::new();
    for filter in filters {
        for descending in [false, true] {
            let page = list_images(store, account, filter.clone(), descending, 0, 100).await;
            out.push((page.total_count, page.items.iter().map(|i| i.id).collect()));
        }
    }
    out
}

fn without(lists: &[(u64, Vec<i64>)], id: i64) -> Vec<(u64, Vec<i64>)> {
    lists
        .iter()
        .map(|(count, ids)| {
            let kept: Vec<i64> = ids.iter().copied().filter(|&i| i != id).collect();
            (count - (ids.len() - kept.len()) as u64, kept)
        })
        .collect()
}

fn set_logo(logo: Option<i64>) -> BusinessPatch {
    BusinessPatch {
        logo_image_id: Some(logo),
        ..Default::default()
    }
}

/// An image of sub id north on a business of north, and one beside it, in the account
/// acme; and another account.
struct Deletable {
    account: i64,
    other: i64,
    business: i64,
    keep: Image,
    gone: Image,
    /// Every list `gone` is in, before it is deleted.
    before: Vec<(u64, Vec<i64>)>,
}

async fn deletable(store: &SharedStore) -> Deletable {
    let a = account(store, "acme").await;
    let other = account(store, "other").await;
    let b = create(
        store,
        a,
        NewBusiness {
            partner_sub_id: Some("north".into()),
            ..new_business("North")
        },
        DAY1,
    )
    .await;
    let keep = image(
        store,
        a,
        new_image("img/upload/k.jpg", Some(10), None),
        DAY1,
    )
    .await;
    let gone = image(
        store,
        a,
        NewImage {
            partner_sub_id: Some("north".into()),
            ..new_image("img/upload/g.jpg", Some(10), Some(b.id))
        },
        DAY1,
    )
    .await;
    let before = lists(store, a, &gone).await;
    assert!(before.iter().all(|(_, ids)| ids.contains(&gone.id)));

    Deletable {
        account: a,
        other,
        business: b.id,
        keep,
        gone,
        before,
    }
}

/// Another account, another sub id: not found, and nothing changes.
pub async fn another_accounts_or_sub_ids_delete_finds_no_image(store: SharedStore) {
    let Deletable {
        account: a,
        other,
        gone,
        before,
        ..
    } = deletable(&store).await;
    // Not found for another account or another sub id; nothing changes.
    assert_eq!(
        store
            .delete_image(other, gone.id, None)
            .await
            .expect("delete"),
        None
    );
    assert_eq!(
        store
            .delete_image(a, gone.id, Some("south"))
            .await
            .expect("delete"),
        None
    );
    assert_eq!(lists(&store, a, &gone).await, before);
}

/// The record, its entries in every scope and its counts go; a second delete: not found.
pub async fn a_deleted_image_leaves_every_list_and_is_deleted_once(store: SharedStore) {
    let Deletable {
        account: a,
        keep,
        gone,
        before,
        ..
    } = deletable(&store).await;
    // The sub id's own key deletes it.
    let deleted = store
        .delete_image(a, gone.id, Some("north"))
        .await
        .expect("delete");
    assert_eq!(deleted.as_ref(), Some(&gone));
    assert_eq!(store.get_image(a, gone.id).await.expect("get"), None);
    assert_eq!(lists(&store, a, &gone).await, without(&before, gone.id));
    assert_eq!(
        store.get_image(a, keep.id).await.expect("get").as_ref(),
        Some(&keep)
    );
    // Twice: not found.
    assert_eq!(
        store.delete_image(a, gone.id, None).await.expect("again"),
        None
    );
    assert_eq!(lists(&store, a, &gone).await, without(&before, gone.id));
}

/// A deleted image's id is never recorded again, nor taken as a logo.
pub async fn a_deleted_images_id_stays_barred(store: SharedStore) {
    let Deletable {
        account: a,
        business,
        gone,
        ..
    } = deletable(&store).await;
    store
        .delete_image(a, gone.id, Some("north"))
        .await
        .expect("delete");
    // The id is settled as never recorded again: the sweeper may remove its files, and no
    // late write can bring the record back.
    assert_eq!(
        store.find_image_any_account(gone.id).await.expect("find"),
        None
    );
    assert_eq!(store.settle_image(gone.id).await.expect("settle"), None);
    let late = store
        .create_image(
            a,
            NewImage {
                id: Some(gone.id),
                ..new_image("img/upload/late.jpg", None, None)
            },
            DAY1,
        )
        .await;
    assert!(matches!(late, Err(ApiError::Internal(_))), "{late:?}");
    // Nor can a business take it as its logo.
    assert_field_error(
        store
            .create_business(
                a,
                NewBusiness {
                    logo_image_id: Some(gone.id),
                    ..new_business("Late")
                },
                DAY1,
            )
            .await,
        "logo_image_id",
    );
    assert_field_error(
        store
            .update_business(a, business, None, set_logo(Some(gone.id)), DAY1)
            .await,
        "logo_image_id",
    );
}

fn assert_logo_conflict(result: Result<Option<Image>, ApiError>, (id, name): (i64, &str)) {
    match result {
        Err(ApiError::StateConflict(message)) => assert!(
            message.contains(&format!("business {id} ")) && message.contains(name),
            "{message}"
        ),
        other => panic!("expected a 409 naming the business, got {other:?}"),
    }
}

/// A logo is refused, naming its business, and stays;
/// once no business has it as its logo (changed, removed), it can go. A soft-deleted
/// business's logo counts: it can be restored.
// Reads better whole: one logo through its businesses' changes, each step from the last.
pub async fn a_logo_is_deleted_only_once_no_business_has_it(store: SharedStore) {
    let a = account(&store, "acme").await;
    let logo = image(&store, a, new_image("img/upload/l.jpg", None, None), DAY1).await;
    let next = image(&store, a, new_image("img/upload/n.jpg", None, None), DAY1).await;
    let shop = create(
        &store,
        a,
        NewBusiness {
            logo_image_id: Some(logo.id),
            ..new_business("Shop")
        },
        DAY1,
    )
    .await;
    let before = lists(&store, a, &logo).await;
    assert_logo_conflict(
        store.delete_image(a, logo.id, None).await,
        (shop.id, "Shop"),
    );
    assert_eq!(
        store.get_image(a, logo.id).await.expect("get").as_ref(),
        Some(&logo)
    );
    assert_eq!(lists(&store, a, &logo).await, before);

    // Soft-deleted, still its logo.
    patch(
        &store,
        a,
        shop.id,
        BusinessPatch {
            deleted: Some(true),
            ..Default::default()
        },
        DAY1,
    )
    .await;
    assert_logo_conflict(
        store.delete_image(a, logo.id, None).await,
        (shop.id, "Shop"),
    );

    // Another logo: the old one can go, the new one cannot.
    patch(&store, a, shop.id, set_logo(Some(next.id)), DAY1).await;
    assert_logo_conflict(
        store.delete_image(a, next.id, None).await,
        (shop.id, "Shop"),
    );
    assert_eq!(
        store.delete_image(a, logo.id, None).await.expect("delete"),
        Some(logo.clone())
    );
    // A second business with the same logo: removing it from one still leaves the other.
    let cafe = create(
        &store,
        a,
        NewBusiness {
            logo_image_id: Some(next.id),
            ..new_business("Cafe")
        },
        DAY1,
    )
    .await;
    patch(&store, a, shop.id, set_logo(None), DAY1).await;
    assert_logo_conflict(
        store.delete_image(a, next.id, None).await,
        (cafe.id, "Cafe"),
    );
    // A rename that keeps the logo keeps the mark.
    patch(
        &store,
        a,
        cafe.id,
        BusinessPatch {
            business_name: Some("Cafe Two".into()),
            ..Default::default()
        },
        DAY1,
    )
    .await;
    assert_logo_conflict(
        store.delete_image(a, next.id, None).await,
        (cafe.id, "Cafe Two"),
    );
    patch(&store, a, cafe.id, set_logo(None), DAY1).await;
    assert_eq!(
        store.delete_image(a, next.id, None).await.expect("delete"),
        Some(next.clone())
    );
}

/// A business of sub id south cannot take north's image as its logo (not even from an
/// unrestricted key), so north's own key can always delete it.
pub async fn another_sub_ids_image_never_becomes_a_logo_and_stays_deletable(store: SharedStore) {
    let a = account(&store, "acme").await;
    let north_logo = image(
        &store,
        a,
        NewImage {
            partner_sub_id: Some("north".into()),
            ..new_image("img/upload/nl.jpg", None, None)
        },
        DAY1,
    )
    .await;
    let south = create(
        &store,
        a,
        NewBusiness {
            partner_sub_id: Some("south".into()),
            ..new_business("South")
        },
        DAY1,
    )
    .await;
    let refused = store
        .update_business(a, south.id, None, set_logo(Some(north_logo.id)), DAY1)
        .await;
    assert!(
        matches!(&refused, Err(err) if err.status() == 400),
        "{refused:?}"
    );
    assert!(store
        .delete_image(a, north_logo.id, Some("north"))
        .await
        .expect("delete")
        .is_some());
}

/// A delete and a business write that sets the image as its logo, at once, many times
/// over: exactly one wins, and a business's logo always exists.
pub async fn a_delete_racing_a_logo_write_never_leaves_a_missing_logo(store: SharedStore) {
    let a = account(&store, "acme").await;
    let mut outcomes = [0; 2];
    for round in 0..8 {
        let img = image(
            &store,
            a,
            new_image(&format!("img/upload/r{round}.jpg"), Some(1), None),
            DAY1,
        )
        .await;
        let racer = create(&store, a, new_business("Racer"), DAY1).await;
        // Half the rounds set it by update, half by create.
        let set = async {
            if round % 2 == 0 {
                store
                    .update_business(a, racer.id, None, set_logo(Some(img.id)), DAY1)
                    .await
                    .map(|d| d.map(|d| d.business))
            } else {
                let new = NewBusiness {
                    logo_image_id: Some(img.id),
                    ..new_business("Racer")
                };
                store
                    .create_business(a, new, DAY1)
                    .await
                    .map(|d| Some(d.business))
            }
        };
        let (deleted, business) = tokio::join!(store.delete_image(a, img.id, None), set);
        match (&deleted, &business) {
            // The delete first: the business write found no image.
            (Ok(Some(_)), Err(err)) => {
                assert_eq!(err.status(), 400, "{err:?}");
                assert_eq!(store.get_image(a, img.id).await.expect("get"), None);
                outcomes[0] += 1;
            }
            // The logo first: the delete was refused, the image stays.
            (Err(ApiError::StateConflict(_)), Ok(Some(b))) => {
                assert_eq!(b.logo_image_id, Some(img.id));
                assert!(store.get_image(a, img.id).await.expect("get").is_some());
                outcomes[1] += 1;
            }
            other => panic!("round {round}: {other:?}"),
        }
        let stored = store
            .get_business(a, racer.id)
            .await
            .expect("get")
            .expect("exists");
        if let Some(logo) = stored.logo_image_id {
            assert!(store.get_image(a, logo).await.expect("get").is_some());
        }
    }
    eprintln!("delete first {}, logo first {}", outcomes[0], outcomes[1]);
}

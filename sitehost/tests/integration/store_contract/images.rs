//! Images: records, lists and filters, sub ids, logos of sub-restricted keys, and ids
//! allocated ahead of the record and settled after an unknown outcome.

use std::collections::BTreeSet;

use sitehost::domain::business::{BusinessPatch, NewBusiness};
use sitehost::domain::image_record::{Image, ImageFilter, NewImage};
use sitehost::store::{Page, SharedStore};
use sitehost::ApiError;

use super::fixtures::{
    account, all, assert_field_error, create, image, list_images, new_business, new_image, patch,
    total, DAY1, DAY2,
};

fn image_ids(page: &Page<Image>) -> Vec<i64> {
    page.items.iter().map(|i| i.id).collect()
}

/// Five images of acme over two sites and two businesses: (account, its businesses, the
/// images in id order).
async fn five_images(store: &SharedStore) -> (i64, [i64; 2], Vec<Image>) {
    let a = account(store, "acme").await;
    let b1 = create(store, a, new_business("One"), DAY1).await;
    let b2 = create(store, a, new_business("Two"), DAY1).await;
    let specs = [
        (Some(10), Some(b1.id)),
        (Some(10), None),
        (Some(20), Some(b1.id)),
        (None, Some(b2.id)),
        (Some(20), Some(b2.id)),
    ];
    let mut made = Vec::new();
    for (i, (site, business)) in specs.into_iter().enumerate() {
        made.push(
            image(
                store,
                a,
                new_image(&format!("img/upload/c{i}.jpg"), site, business),
                DAY1 + i as i64,
            )
            .await,
        );
    }
    (a, [b1.id, b2.id], made)
}

pub async fn an_image_is_stored_and_found_by_id(store: SharedStore) {
    let (a, [b1, _], made) = five_images(&store).await;
    assert_eq!(
        made[0],
        Image {
            id: made[0].id,
            account_id: a,
            path: "img/upload/c0.jpg".into(),
            mimetype: "image/jpeg".into(),
            width: 640,
            height: 480,
            site_id: Some(10),
            business_id: Some(b1),
            partner_sub_id: None,
            user_id: 7,
            added: DAY1,
            modified: DAY1,
        }
    );
    for img in &made {
        assert_eq!(
            store
                .get_image(a, img.id)
                .await
                .expect("get_image")
                .as_ref(),
            Some(img)
        );
    }
    assert_eq!(
        store
            .get_image(a, made[4].id + 1000)
            .await
            .expect("get_image"),
        None
    );
}

pub async fn images_are_listed_by_id_both_ways(store: SharedStore) {
    let (a, _, made) = five_images(&store).await;
    let id = |i: usize| made[i].id;

    let all_images = list_images(&store, a, ImageFilter::default(), false, 0, 100).await;
    assert_eq!(all_images.items, made);
    assert_eq!(all_images.total_count, 5);
    let desc = list_images(&store, a, ImageFilter::default(), true, 0, 100).await;
    assert_eq!(image_ids(&desc), vec![id(4), id(3), id(2), id(1), id(0)]);
}

pub async fn image_filters_by_site_and_business_select_their_images(store: SharedStore) {
    let (a, [b1, b2], made) = five_images(&store).await;
    let id = |i: usize| made[i].id;

    let cases = [
        (Some(10), None, vec![id(0), id(1)]),
        (Some(20), None, vec![id(2), id(4)]),
        (None, Some(b1), vec![id(0), id(2)]),
        (None, Some(b2), vec![id(3), id(4)]),
        (Some(20), Some(b2), vec![id(4)]),
        (Some(10), Some(b2), vec![]),
        (Some(99), None, vec![]),
    ];
    for (site_id, business_id, expected) in cases {
        let filter = ImageFilter {
            site_id,
            business_id,
            partner_sub_id: None,
        };
        let page = list_images(&store, a, filter.clone(), false, 0, 100).await;
        assert_eq!(
            (image_ids(&page), page.total_count),
            (expected.clone(), expected.len() as u64),
            "{filter:?}"
        );
        let page = list_images(&store, a, filter.clone(), true, 0, 100).await;
        assert_eq!(
            image_ids(&page),
            expected.iter().rev().copied().collect::<Vec<_>>(),
            "{filter:?} -id"
        );
    }
}

pub async fn image_pages_keep_the_total_count(store: SharedStore) {
    let (a, _, made) = five_images(&store).await;
    let id = |i: usize| made[i].id;
    let mut pages = Vec::new();
    for offset in [0, 2, 4, 6] {
        let page = list_images(&store, a, ImageFilter::default(), true, offset, 2).await;
        assert_eq!(page.total_count, 5);
        pages.push(image_ids(&page));
    }
    assert_eq!(
        pages,
        vec![vec![id(4), id(3)], vec![id(2), id(1)], vec![id(0)], vec![]]
    );
    let none = list_images(&store, a, ImageFilter::default(), false, 0, 0).await;
    assert_eq!((none.items.len(), none.total_count), (0, 5));
}

fn image_of_sub(path: &str, business_id: Option<i64>, sub: Option<&str>) -> NewImage {
    NewImage {
        partner_sub_id: sub.map(str::to_string),
        ..new_image(path, Some(10), business_id)
    }
}

/// An image of `sub` (or of none) stored in account `account` on `DAY1`.
async fn sub_image(
    store: &SharedStore,
    account: i64,
    path: &str,
    business_id: Option<i64>,
    sub: Option<&str>,
) -> Image {
    image(store, account, image_of_sub(path, business_id, sub), DAY1).await
}

fn sub_filter(sub: Option<&str>, business_id: Option<i64>) -> ImageFilter {
    ImageFilter {
        business_id,
        partner_sub_id: sub.map(str::to_string),
        ..Default::default()
    }
}

/// Businesses of sub id north and of none, and images of north (one of them attached to
/// the north business), of south and of none (attached to the plain business).
struct SubIdImages {
    account: i64,
    north: i64,
    plain: i64,
    images: [Image; 4],
}

async fn sub_id_images(store: &SharedStore) -> SubIdImages {
    let a = account(store, "acme").await;
    let north = create(
        store,
        a,
        NewBusiness {
            partner_sub_id: Some("north".into()),
            ..new_business("North")
        },
        DAY1,
    )
    .await;
    let plain = create(store, a, new_business("Plain"), DAY1).await;
    let n1 = sub_image(store, a, "img/upload/n1.jpg", None, Some("north")).await;
    let n2 = sub_image(store, a, "img/upload/n2.jpg", Some(north.id), Some("north")).await;
    let s1 = sub_image(store, a, "img/upload/s1.jpg", None, Some("south")).await;
    let none = sub_image(store, a, "img/upload/p1.jpg", Some(plain.id), None).await;
    SubIdImages {
        account: a,
        north: north.id,
        plain: plain.id,
        images: [n1, n2, s1, none],
    }
}

/// An image's sub id is stored.
pub async fn an_images_sub_id_is_stored(store: SharedStore) {
    let SubIdImages {
        account: a,
        images: [_, n2, _, none],
        ..
    } = sub_id_images(&store).await;
    assert_eq!(n2.partner_sub_id.as_deref(), Some("north"));
    assert_eq!(
        store.get_image(a, n2.id).await.expect("get").as_ref(),
        Some(&n2)
    );
    assert_eq!(
        store
            .get_image(a, none.id)
            .await
            .expect("get")
            .and_then(|i| i.partner_sub_id),
        None
    );
}

/// An image's sub id must match its business's.
pub async fn an_image_of_another_sub_id_than_its_business_is_refused(store: SharedStore) {
    let SubIdImages {
        account: a,
        north,
        plain,
        ..
    } = sub_id_images(&store).await;
    // The business must have the image's sub id (or none for an image without one).
    for (business, sub) in [
        (north, Some("south")),
        (north, None),
        (plain, Some("north")),
    ] {
        assert_field_error(
            store
                .create_image(
                    a,
                    image_of_sub("img/upload/x.jpg", Some(business), sub),
                    DAY1,
                )
                .await,
            "business_id",
        );
    }
}

/// A sub id is a list scope: a restricted list is one scope with its own count.
pub async fn image_lists_of_a_sub_id_are_a_scope_with_its_own_count(store: SharedStore) {
    let SubIdImages {
        account: a,
        north,
        plain,
        images: [n1, n2, s1, none],
    } = sub_id_images(&store).await;
    let cases = [
        (sub_filter(None, None), vec![n1.id, n2.id, s1.id, none.id]),
        (sub_filter(Some("north"), None), vec![n1.id, n2.id]),
        (sub_filter(Some("south"), None), vec![s1.id]),
        (sub_filter(Some("east"), None), vec![]),
        (sub_filter(Some("north"), Some(north)), vec![n2.id]),
        (sub_filter(Some("south"), Some(north)), vec![]),
        (sub_filter(Some("north"), Some(plain)), vec![]),
        (sub_filter(None, Some(plain)), vec![none.id]),
        (
            ImageFilter {
                site_id: Some(10),
                ..sub_filter(Some("north"), Some(north))
            },
            vec![n2.id],
        ),
    ];
    for (filter, expected) in cases {
        let page = list_images(&store, a, filter.clone(), false, 0, 100).await;
        assert_eq!(
            (image_ids(&page), page.total_count),
            (expected.clone(), expected.len() as u64),
            "{filter:?}"
        );
        let desc = list_images(&store, a, filter.clone(), true, 0, 1).await;
        assert_eq!(
            (image_ids(&desc), desc.total_count),
            (
                expected.last().copied().into_iter().collect::<Vec<_>>(),
                expected.len() as u64
            ),
            "{filter:?} -id"
        );
    }
}

/// With `restrict_sub_id`, a new logo must be an image of that sub id; a logo the
/// business already has is kept whatever its sub id.
pub async fn a_sub_restricted_key_sets_only_logos_of_its_sub_id(store: SharedStore) {
    let a = account(&store, "acme").await;
    let north_image = sub_image(&store, a, "img/upload/n.jpg", None, Some("north")).await;
    let south_image = sub_image(&store, a, "img/upload/s.jpg", None, Some("south")).await;
    let plain_image = sub_image(&store, a, "img/upload/p.jpg", None, None).await;
    let b = create(
        &store,
        a,
        NewBusiness {
            partner_sub_id: Some("north".into()),
            ..new_business("North")
        },
        DAY1,
    )
    .await;
    let set_logo = |logo: i64| BusinessPatch {
        logo_image_id: Some(Some(logo)),
        ..Default::default()
    };
    for refused in [south_image.id, plain_image.id, 999_999] {
        assert_field_error(
            store
                .update_business(a, b.id, Some("north"), set_logo(refused), DAY2)
                .await,
            "logo_image_id",
        );
    }
    assert_eq!(
        store.get_business(a, b.id).await.expect("get"),
        Some(b.clone())
    );
    let with_north = store
        .update_business(a, b.id, Some("north"), set_logo(north_image.id), DAY2)
        .await
        .expect("update")
        .expect("visible");
    assert_eq!(with_north.business.logo_image_id, Some(north_image.id));
    // An unrestricted update may use an image of the business's sub id or of none, never
    // one of another sub id (which that sub could then never delete).
    assert_field_error(
        store
            .update_business(a, b.id, None, set_logo(south_image.id), DAY2)
            .await,
        "logo_image_id",
    );
    let with_plain = patch(&store, a, b.id, set_logo(plain_image.id), DAY2).await;
    assert_eq!(with_plain.logo_image_id, Some(plain_image.id));
    // Writing back the logo the business has (plus a change) is no new reference, though
    // a key of sub id north cannot see an image without a sub id.
    let written_back = BusinessPatch {
        business_name: Some("North Two".into()),
        ..set_logo(plain_image.id)
    };
    let renamed = store
        .update_business(a, b.id, Some("north"), written_back, DAY2)
        .await
        .expect("update")
        .expect("visible");
    assert_eq!(
        (
            renamed.business.business_name.as_str(),
            renamed.business.logo_image_id
        ),
        ("North Two", Some(plain_image.id))
    );
}

/// A logo is an image of its business's sub id, or of none: a create or an update (a new
/// logo, or a new sub id keeping its logo) with one of another sub id is a 400 on
/// `logo_image_id`, whatever the key, and writes nothing.
pub async fn logos_of_another_sub_id_are_refused(store: SharedStore) {
    let a = account(&store, "acme").await;
    let south_image = sub_image(&store, a, "img/upload/s.jpg", None, Some("south")).await;
    let plain_image = sub_image(&store, a, "img/upload/p.jpg", None, None).await;
    let with_logo = |name: &str, sub: Option<&str>, logo: i64| NewBusiness {
        partner_sub_id: sub.map(str::to_string),
        logo_image_id: Some(logo),
        ..new_business(name)
    };
    for sub in [Some("north"), None] {
        assert_field_error(
            store
                .create_business(a, with_logo("Refused", sub, south_image.id), DAY1)
                .await,
            "logo_image_id",
        );
    }
    assert_eq!(total(&store, a, all()).await, 0, "nothing was created");
    let south = create(
        &store,
        a,
        with_logo("South", Some("south"), south_image.id),
        DAY1,
    )
    .await;
    create(
        &store,
        a,
        with_logo("Plain", Some("north"), plain_image.id),
        DAY1,
    )
    .await;
    // Moving the south business to north keeps its logo of south: refused, for any key.
    let to_north = BusinessPatch {
        partner_sub_id: Some(Some("north".into())),
        ..Default::default()
    };
    for key_sub in [None, Some("south")] {
        assert_field_error(
            store
                .update_business(a, south.id, key_sub, to_north.clone(), DAY2)
                .await,
            "logo_image_id",
        );
    }
    assert_eq!(
        store.get_business(a, south.id).await.expect("get"),
        Some(south.clone())
    );
    // With a logo of no sub id (or none) it may move.
    let moved = patch(
        &store,
        a,
        south.id,
        BusinessPatch {
            logo_image_id: Some(Some(plain_image.id)),
            ..to_north
        },
        DAY2,
    )
    .await;
    assert_eq!(moved.partner_sub_id.as_deref(), Some("north"));
    // South's image has no business left: south's own key deletes it.
    assert!(store
        .delete_image(a, south_image.id, Some("south"))
        .await
        .expect("delete")
        .is_some());
}

/// Ids taken ahead of the record, and settling an id whose record write had an unknown
/// outcome: a written record is returned; an unwritten id is barred for good.
// Reads better whole: ids of one allocation, one recorded and one barred, seen side by side.
pub async fn an_allocated_id_settles_to_its_record_or_is_barred(store: SharedStore) {
    let a = account(&store, "acme").await;
    let first = store.allocate_image_id().await.expect("allocate");
    let second = store.allocate_image_id().await.expect("allocate");
    let implicit = image(&store, a, new_image("img/upload/i.jpg", None, None), DAY1).await;
    assert_eq!(
        BTreeSet::from([first, second, implicit.id]).len(),
        3,
        "{first} {second} {}",
        implicit.id
    );
    let recorded = image(
        &store,
        a,
        NewImage {
            id: Some(second),
            ..new_image("img/upload/second.jpg", None, None)
        },
        DAY1,
    )
    .await;
    assert_eq!(recorded.id, second);
    assert_eq!(
        store.get_image(a, second).await.expect("get").as_ref(),
        Some(&recorded)
    );

    // Settling a recorded id returns it, in any account's name; nothing changes.
    assert_eq!(
        store.settle_image(second).await.expect("settle").as_ref(),
        Some(&recorded)
    );
    assert_eq!(
        store
            .find_image_any_account(second)
            .await
            .expect("find")
            .as_ref(),
        Some(&recorded)
    );
    // Settling an unwritten id bars it: no record of it can ever be written.
    assert_eq!(
        store.find_image_any_account(first).await.expect("find"),
        None
    );
    assert_eq!(store.settle_image(first).await.expect("settle"), None);
    assert_eq!(store.settle_image(first).await.expect("settle again"), None);
    let late = store
        .create_image(
            a,
            NewImage {
                id: Some(first),
                ..new_image("img/upload/late.jpg", None, None)
            },
            DAY1,
        )
        .await;
    assert!(matches!(late, Err(ApiError::Internal(_))), "{late:?}");
    assert_eq!(store.get_image(a, first).await.expect("get"), None);
    assert_eq!(
        store.find_image_any_account(first).await.expect("find"),
        None
    );
    assert_field_error(
        store
            .create_business(
                a,
                NewBusiness {
                    logo_image_id: Some(first),
                    ..new_business("Barred Logo")
                },
                DAY1,
            )
            .await,
        "logo_image_id",
    );
    let page = list_images(&store, a, ImageFilter::default(), false, 0, 10).await;
    let mut expected = vec![implicit.id, second];
    expected.sort();
    assert_eq!((image_ids(&page), page.total_count), (expected, 2));
}

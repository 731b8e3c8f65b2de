//! Concurrent writes: creates get distinct ids and counts stay right; racing patches of
//! one business all land.

use std::collections::{BTreeMap, BTreeSet};

use sitehost::domain::business::{Business, BusinessOrder, BusinessPatch, NewBusiness};
use sitehost::store::SharedStore;

use super::fixtures::{
    account, all, create, deleted, ids, image, new_business, new_image, pbid, sub, total, DAY1,
    DAY2,
};

pub async fn concurrent_creates_get_distinct_ids_and_exact_counts(store: SharedStore) {
    let a = account(&store, "acme").await;
    let mut before = BTreeSet::new();
    for i in 0..3 {
        before.insert(
            create(&store, a, new_business(&format!("Before {i}")), DAY1)
                .await
                .id,
        );
    }
    let tasks: Vec<_> = (0..50)
        .map(|i| {
            let store = store.clone();
            let sub = if i % 2 == 0 { "even" } else { "odd" };
            let new = NewBusiness {
                partner_sub_id: Some(sub.into()),
                ..new_business(&format!("Concurrent {i:02}"))
            };
            tokio::spawn(async move { store.create_business(a, new, DAY1).await })
        })
        .collect();
    let mut created = BTreeMap::new();
    for task in tasks {
        let b = task.await.expect("task").expect("create_business").business;
        assert!(created.insert(b.id, b).is_none(), "ids are distinct");
    }
    assert_eq!(created.len(), 50);
    assert!(created.keys().all(|id| !before.contains(id)));
    let (listed, count) = ids(&store, a, all(), BusinessOrder::IdAsc).await;
    assert_eq!(count, 53);
    let expected: Vec<i64> = before
        .iter()
        .chain(created.keys())
        .copied()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    assert_eq!(listed, expected);
    assert_eq!(total(&store, a, sub("even")).await, 25);
    assert_eq!(total(&store, a, sub("odd")).await, 25);
    let (by_name, name_count) = ids(&store, a, sub("odd"), BusinessOrder::NameAsc).await;
    assert_eq!(name_count, 25);
    let mut odd: Vec<&Business> = created
        .values()
        .filter(|b| b.partner_sub_id.as_deref() == Some("odd"))
        .collect();
    odd.sort_by(|x, y| x.business_name.cmp(&y.business_name));
    assert_eq!(by_name, odd.iter().map(|b| b.id).collect::<Vec<_>>());
}

// Reads better whole: rounds of racing patches, each checked against the record the last left.
pub async fn concurrent_patches_of_one_business_all_land(store: SharedStore) {
    let a = account(&store, "acme").await;
    let b = create(&store, a, new_business("Shared"), DAY1).await;
    let logos = [
        image(&store, a, new_image("img/upload/l0.png", None, None), DAY1)
            .await
            .id,
        image(&store, a, new_image("img/upload/l1.png", None, None), DAY1)
            .await
            .id,
        image(&store, a, new_image("img/upload/l2.png", None, None), DAY1)
            .await
            .id,
    ];
    for round in 0..3i64 {
        let patches = [
            BusinessPatch {
                category_id: Some(Some(round + 100)),
                ..Default::default()
            },
            BusinessPatch {
                partner_business_id: Some(Some(format!("p{round}"))),
                ..Default::default()
            },
            BusinessPatch {
                partner_sub_id: Some(Some(format!("s{round}"))),
                ..Default::default()
            },
            BusinessPatch {
                logo_image_id: Some(Some(logos[round as usize])),
                ..Default::default()
            },
            BusinessPatch {
                business_name: Some(format!("Shared {round}")),
                ..Default::default()
            },
            BusinessPatch {
                deleted: Some(round % 2 == 0),
                ..Default::default()
            },
        ];
        let id = b.id;
        let tasks: Vec<_> = patches
            .into_iter()
            .map(|p| {
                let store = store.clone();
                tokio::spawn(
                    async move { store.update_business(a, id, None, p, DAY2 + round).await },
                )
            })
            .collect();
        for task in tasks {
            assert!(task
                .await
                .expect("task")
                .expect("update_business")
                .is_some());
        }
        let now = store
            .get_business(a, b.id)
            .await
            .expect("get")
            .expect("exists");
        assert_eq!(
            now,
            Business {
                business_name: format!("Shared {round}"),
                slug: format!("shared-{round}"),
                deleted: round % 2 == 0,
                partner_business_id: Some(format!("p{round}")),
                partner_sub_id: Some(format!("s{round}")),
                category_id: Some(round + 100),
                logo_image_id: Some(logos[round as usize]),
                modified: DAY2 + round,
                ..b.clone()
            },
            "round {round}"
        );
        // The list entries and counters moved with the record.
        assert_eq!(
            ids(&store, a, sub(&format!("s{round}")), BusinessOrder::NameAsc).await,
            (vec![b.id], 1)
        );
        assert_eq!(
            ids(&store, a, pbid(&format!("p{round}")), BusinessOrder::IdAsc).await,
            (vec![b.id], 1)
        );
        assert_eq!(
            ids(&store, a, deleted(round % 2 == 0), BusinessOrder::NameDesc).await,
            (vec![b.id], 1)
        );
        assert_eq!(total(&store, a, deleted(round % 2 != 0)).await, 0);
        if round > 0 {
            assert_eq!(
                ids(
                    &store,
                    a,
                    sub(&format!("s{}", round - 1)),
                    BusinessOrder::IdAsc
                )
                .await,
                (vec![], 0)
            );
        }
        assert_eq!(total(&store, a, all()).await, 1);
    }
}

/// Creates, soft deletes, restores and renames of one account all at once: every count and
/// every list stays exact, whichever counter lanes the writes landed on.
pub async fn concurrent_deletes_restores_and_renames_keep_counts_exact(store: SharedStore) {
    let a = account(&store, "acme").await;
    let mut ids_made = Vec::new();
    for i in 0..30 {
        ids_made.push(
            create(&store, a, new_business(&format!("B{i:02}")), DAY1)
                .await
                .id,
        );
    }
    let patch_all = |ids: Vec<i64>, patch: fn(i64) -> BusinessPatch| {
        ids.into_iter()
            .map(|id| {
                let store = store.clone();
                tokio::spawn(
                    async move { store.update_business(a, id, None, patch(id), DAY2).await },
                )
            })
            .collect::<Vec<_>>()
    };
    // Round 1: 10 created, 12 deleted, 8 renamed, all at once.
    let mut tasks = patch_all(ids_made[..12].to_vec(), |_| BusinessPatch {
        deleted: Some(true),
        ..Default::default()
    });
    tasks.extend(patch_all(ids_made[12..20].to_vec(), |id| BusinessPatch {
        business_name: Some(format!("A renamed {id:05}")),
        ..Default::default()
    }));
    let creates: Vec<_> = (0..10)
        .map(|i| {
            let store = store.clone();
            tokio::spawn(async move {
                store
                    .create_business(a, new_business(&format!("C{i:02}")), DAY2)
                    .await
            })
        })
        .collect();
    for task in tasks {
        assert!(task.await.expect("task").expect("update").is_some());
    }
    for task in creates {
        task.await.expect("task").expect("create");
    }
    assert_eq!(total(&store, a, all()).await, 40);
    assert_eq!(total(&store, a, deleted(true)).await, 12);
    assert_eq!(total(&store, a, deleted(false)).await, 28);
    // Round 2: 6 of the deleted restored while 4 more are deleted.
    let mut tasks = patch_all(ids_made[..6].to_vec(), |_| BusinessPatch {
        deleted: Some(false),
        ..Default::default()
    });
    tasks.extend(patch_all(ids_made[20..24].to_vec(), |_| BusinessPatch {
        deleted: Some(true),
        ..Default::default()
    }));
    for task in tasks {
        assert!(task.await.expect("task").expect("update").is_some());
    }
    let (live, live_count) = ids(&store, a, deleted(false), BusinessOrder::IdAsc).await;
    let (gone, gone_count) = ids(&store, a, deleted(true), BusinessOrder::IdDesc).await;
    assert_eq!((live_count, gone_count), (30, 10));
    assert_eq!((live.len(), gone.len()), (30, 10));
    let expected_gone: BTreeSet<i64> = ids_made[6..12]
        .iter()
        .chain(&ids_made[20..24])
        .copied()
        .collect();
    assert_eq!(gone.iter().copied().collect::<BTreeSet<_>>(), expected_gone);
    assert!(gone.windows(2).all(|w| w[0] > w[1]), "descending ids");
    // The renamed ones lead the name order ("A renamed ..." before "B..", "C..").
    let (by_name, count) = ids(&store, a, all(), BusinessOrder::NameAsc).await;
    assert_eq!(count, 40);
    assert_eq!(by_name[..8], ids_made[12..20]);
}

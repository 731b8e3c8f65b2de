//! Business lists: every filter, combination and order, paging, the counts behind
//! `total_count`, and offsets past the end answered from the counter alone.

use futures_util::StreamExt;
use sitehost::clock::utc_date;
use sitehost::domain::business::{
    Business, BusinessFilter, BusinessOrder, BusinessPatch, BusinessQuery, NewBusiness,
};
use sitehost::domain::image_record::ImageFilter;
use sitehost::store::{Page, SharedStore};

use super::fixtures::{
    account, all, create, deleted, ids, image, list, list_images, new_business, new_image, patch,
    pbid, sub, total, DAY1, DAY2,
};

/// One record of the filter data set.
struct Spec {
    name: &'static str,
    sub: Option<&'static str>,
    pbid: Option<&'static str>,
    added: i64,
    deleted: bool,
}

const SPECS: [Spec; 8] = [
    Spec {
        name: "Alpha",
        sub: Some("s1"),
        pbid: Some("p1"),
        added: DAY1,
        deleted: false,
    },
    Spec {
        name: "Bravo",
        sub: Some("s1"),
        pbid: None,
        added: DAY1,
        deleted: true,
    },
    Spec {
        name: "Charlie",
        sub: Some("s2"),
        pbid: Some("p1"),
        added: DAY2,
        deleted: false,
    },
    Spec {
        name: "Delta",
        sub: None,
        pbid: Some("p2"),
        added: DAY2,
        deleted: true,
    },
    Spec {
        name: "Echo",
        sub: Some("s2"),
        pbid: Some("p2"),
        added: DAY1,
        deleted: false,
    },
    Spec {
        name: "Foxtrot",
        sub: None,
        pbid: None,
        added: DAY2,
        deleted: false,
    },
    Spec {
        name: "Golf",
        sub: Some("s1"),
        pbid: Some("p2"),
        added: DAY2,
        deleted: true,
    },
    // Values holding the scope separators must not leak into other scopes.
    Spec {
        name: "Hotel",
        sub: Some("s|d=1"),
        pbid: Some("p#1%"),
        added: DAY1,
        deleted: false,
    },
];

// Reads better whole: most of it is the data set and the reference the lists are held to.
pub async fn lists_match_a_reference_for_every_filter_and_combination(store: SharedStore) {
    let a = account(&store, "acme").await;
    let noise = account(&store, "noise").await;
    let mut created = Vec::new();
    for spec in &SPECS {
        for acc in [a, noise] {
            let new = NewBusiness {
                partner_sub_id: spec.sub.map(Into::into),
                partner_business_id: spec.pbid.map(Into::into),
                ..new_business(spec.name)
            };
            let b = create(&store, acc, new, spec.added).await;
            if spec.deleted {
                patch(
                    &store,
                    acc,
                    b.id,
                    BusinessPatch {
                        deleted: Some(true),
                        ..Default::default()
                    },
                    DAY2 + 100,
                )
                .await;
            }
            if acc == a {
                created.push(b.id);
            }
        }
    }
    let names = |page: &Page<Business>| {
        page.items
            .iter()
            .map(|b| b.business_name.clone())
            .collect::<Vec<_>>()
    };
    let check = |filter: BusinessFilter, expected: &'static [&'static str]| {
        let store = store.clone();
        async move {
            let page = list(&store, a, filter.clone(), BusinessOrder::IdAsc, 0, 100).await;
            assert_eq!(names(&page), expected, "{filter:?}");
            assert_eq!(page.total_count, expected.len() as u64, "{filter:?}");
        }
    };
    let day1 = Some(utc_date(DAY1));
    let day2 = Some(utc_date(DAY2));
    check(
        all(),
        &[
            "Alpha", "Bravo", "Charlie", "Delta", "Echo", "Foxtrot", "Golf", "Hotel",
        ],
    )
    .await;
    check(
        deleted(false),
        &["Alpha", "Charlie", "Echo", "Foxtrot", "Hotel"],
    )
    .await;
    check(deleted(true), &["Bravo", "Delta", "Golf"]).await;
    check(sub("s1"), &["Alpha", "Bravo", "Golf"]).await;
    check(sub("s|d=1"), &["Hotel"]).await;
    check(sub("s"), &[]).await;
    check(
        BusinessFilter {
            added_date: day1,
            ..all()
        },
        &["Alpha", "Bravo", "Echo", "Hotel"],
    )
    .await;
    check(pbid("p2"), &["Delta", "Echo", "Golf"]).await;
    check(pbid("p#1%"), &["Hotel"]).await;
    check(
        BusinessFilter {
            deleted: Some(false),
            ..sub("s1")
        },
        &["Alpha"],
    )
    .await;
    check(
        BusinessFilter {
            deleted: Some(true),
            added_date: day2,
            ..pbid("p2")
        },
        &["Delta", "Golf"],
    )
    .await;
    check(
        BusinessFilter {
            deleted: Some(false),
            partner_sub_id: Some("s2".into()),
            added_date: day1,
            partner_business_id: Some("p2".into()),
        },
        &["Echo"],
    )
    .await;
    check(
        BusinessFilter {
            added_date: utc_date(DAY2 + 86_400).into(),
            ..all()
        },
        &[],
    )
    .await;

    // Every combination against a reference written here, in both id orders. The lists
    // only read, so they run eight at a time: on moto this test was the longest of the
    // suite when each waited for the one before.
    let deleted_values = [None, Some(false), Some(true)];
    let sub_values = [None, Some("s1"), Some("s2"), Some("s|d=1"), Some("none")];
    let day_values = [None, Some(DAY1), Some(DAY2)];
    let pbid_values = [None, Some("p1"), Some("p2"), Some("p#1%")];
    let mut combinations = Vec::new();
    for d in deleted_values {
        for s in sub_values {
            for t in day_values {
                for p in pbid_values {
                    combinations.push((d, s, t, p));
                }
            }
        }
    }
    let check_combination = |(d, s, t, p): (
        Option<bool>,
        Option<&'static str>,
        Option<i64>,
        Option<&'static str>,
    )| {
        let store = store.clone();
        let created = &created;
        async move {
            let filter = BusinessFilter {
                deleted: d,
                partner_sub_id: s.map(Into::into),
                added_date: t.map(utc_date),
                partner_business_id: p.map(Into::into),
            };
            let expected: Vec<i64> = SPECS
                .iter()
                .zip(created)
                .filter(|(spec, _)| {
                    d.is_none_or(|d| spec.deleted == d)
                        && s.is_none_or(|s| spec.sub == Some(s))
                        && t.is_none_or(|t| utc_date(spec.added) == utc_date(t))
                        && p.is_none_or(|p| spec.pbid == Some(p))
                })
                .map(|(_, id)| *id)
                .collect();
            let (got, count) = ids(&store, a, filter.clone(), BusinessOrder::IdAsc).await;
            assert_eq!(
                (&got, count),
                (&expected, expected.len() as u64),
                "{filter:?}"
            );
            let (got_desc, _) = ids(&store, a, filter.clone(), BusinessOrder::IdDesc).await;
            assert_eq!(
                got_desc,
                expected.iter().rev().copied().collect::<Vec<_>>(),
                "{filter:?}"
            );
        }
    };
    futures_util::stream::iter(combinations.into_iter().map(check_combination))
        .buffer_unordered(8)
        .collect::<Vec<()>>()
        .await;
}

// Reads better whole: one set of names sorted every way, then renamed and sorted again.
pub async fn every_order_sorts_by_name_with_accents_or_by_id(store: SharedStore) {
    let a = account(&store, "acme").await;
    let names = [
        "banana",
        "Apple",
        "apple",
        "Cherry",
        "apple",
        "Äpfel",
        "zeta",
        "Banana split",
    ];
    let mut made = Vec::new();
    for name in names {
        made.push(create(&store, a, new_business(name), DAY1).await);
    }
    let id_of = |i: usize| made[i].id;
    let in_order = |order| {
        let store = store.clone();
        async move {
            list(&store, a, all(), order, 0, 100)
                .await
                .items
                .into_iter()
                .map(|b| (b.business_name, b.id))
                .collect::<Vec<_>>()
        }
    };
    let expected_by_name = vec![
        ("Äpfel".to_string(), id_of(5)),
        ("Apple".to_string(), id_of(1)),
        ("apple".to_string(), id_of(2)),
        ("apple".to_string(), id_of(4)),
        ("banana".to_string(), id_of(0)),
        ("Banana split".to_string(), id_of(7)),
        ("Cherry".to_string(), id_of(3)),
        // Accents sort with their base letter ("apfel" < "apple"), in both stores.
        ("zeta".to_string(), id_of(6)),
    ];
    assert_eq!(in_order(BusinessOrder::NameAsc).await, expected_by_name);
    let mut reversed = expected_by_name.clone();
    reversed.reverse();
    assert_eq!(in_order(BusinessOrder::NameDesc).await, reversed);
    let by_id: Vec<_> = made
        .iter()
        .map(|b| (b.business_name.clone(), b.id))
        .collect();
    assert_eq!(in_order(BusinessOrder::IdAsc).await, by_id);
    assert_eq!(
        in_order(BusinessOrder::IdDesc).await,
        by_id.iter().rev().cloned().collect::<Vec<_>>()
    );

    // Renaming moves a business in name order (and only there).
    patch(
        &store,
        a,
        id_of(6),
        BusinessPatch {
            business_name: Some("Aardvark".into()),
            ..Default::default()
        },
        DAY2,
    )
    .await;
    let renamed = in_order(BusinessOrder::NameAsc).await;
    assert_eq!(renamed[0], ("Aardvark".to_string(), id_of(6)));
    assert_eq!(renamed.len(), 8);
    assert_eq!(
        in_order(BusinessOrder::IdAsc)
            .await
            .iter()
            .map(|(_, id)| *id)
            .collect::<Vec<_>>(),
        made.iter().map(|b| b.id).collect::<Vec<_>>()
    );

    // Name order within a filter, across pages of 3.
    patch(
        &store,
        a,
        id_of(2),
        BusinessPatch {
            deleted: Some(true),
            ..Default::default()
        },
        DAY2,
    )
    .await;
    let mut paged = Vec::new();
    for offset in (0..9).step_by(3) {
        let page = list(&store, a, deleted(false), BusinessOrder::NameAsc, offset, 3).await;
        assert_eq!(page.total_count, 7);
        paged.extend(page.items.into_iter().map(|b| b.id));
    }
    assert_eq!(
        paged,
        // Aardvark, Äpfel, Apple, apple, banana, Banana split, Cherry.
        vec![
            id_of(6),
            id_of(5),
            id_of(1),
            id_of(4),
            id_of(0),
            id_of(7),
            id_of(3)
        ]
    );
    let desc = list(&store, a, deleted(false), BusinessOrder::NameDesc, 1, 2).await;
    assert_eq!(
        desc.items.iter().map(|b| b.id).collect::<Vec<_>>(),
        vec![id_of(7), id_of(0)]
    );
    assert_eq!(
        ids(&store, a, deleted(true), BusinessOrder::NameDesc).await,
        (vec![id_of(2)], 1)
    );
}

// Reads better whole: one set of records paged whole, then within a filter.
pub async fn pages_cover_a_list_once_with_and_without_a_filter(store: SharedStore) {
    let a = account(&store, "acme").await;
    let mut made = Vec::new();
    for i in 0..23 {
        // Names out of id order, so name order differs from id order.
        let name = format!("Shop {:02}", (i * 7) % 23);
        made.push(create(&store, a, new_business(&name), DAY1).await);
    }
    for order in [
        BusinessOrder::IdAsc,
        BusinessOrder::IdDesc,
        BusinessOrder::NameAsc,
        BusinessOrder::NameDesc,
    ] {
        let (full, count) = ids(&store, a, all(), order).await;
        assert_eq!((full.len(), count), (23, 23), "{order:?}");
        for limit in [1u64, 5, 7, 10, 23, 50] {
            let mut joined = Vec::new();
            let mut offset = 0;
            while offset < 23 + limit {
                let page = list(&store, a, all(), order, offset, limit).await;
                assert_eq!(page.total_count, 23);
                let expected_len = limit.min(23u64.saturating_sub(offset)) as usize;
                assert_eq!(
                    page.items.len(),
                    expected_len,
                    "{order:?} offset {offset} limit {limit}"
                );
                joined.extend(page.items.iter().map(|b| b.id));
                offset += limit;
            }
            assert_eq!(joined, full, "{order:?} limit {limit}");
        }
        let empty = list(&store, a, all(), order, 0, 0).await;
        assert_eq!((empty.items.len(), empty.total_count), (0, 23));
        let beyond = list(&store, a, all(), order, 1_000_000, 20).await;
        assert_eq!((beyond.items.len(), beyond.total_count), (0, 23));
    }
    let mut sorted: Vec<i64> = made.iter().map(|b| b.id).collect();
    sorted.sort_unstable();
    assert_eq!(ids(&store, a, all(), BusinessOrder::IdAsc).await.0, sorted);
    let by_name = ids(&store, a, all(), BusinessOrder::NameAsc).await.0;
    let mut expected_by_name: Vec<&Business> = made.iter().collect();
    expected_by_name.sort_by(|x, y| {
        let key = |b: &Business| {
            (
                sitehost::domain::collation::sort_key(&b.business_name),
                b.id,
            )
        };
        key(x).cmp(&key(y))
    });
    assert_eq!(
        by_name,
        expected_by_name.iter().map(|b| b.id).collect::<Vec<_>>()
    );

    // Paging within a filter: every third business deleted.
    for b in made.iter().step_by(3) {
        patch(
            &store,
            a,
            b.id,
            BusinessPatch {
                deleted: Some(true),
                ..Default::default()
            },
            DAY2,
        )
        .await;
    }
    let (active, active_count) = ids(&store, a, deleted(false), BusinessOrder::IdAsc).await;
    let expected_active: Vec<i64> = made
        .iter()
        .enumerate()
        .filter(|(i, _)| i % 3 != 0)
        .map(|(_, b)| b.id)
        .collect();
    assert_eq!((active.clone(), active_count), (expected_active, 15));
    let page = list(&store, a, deleted(false), BusinessOrder::IdDesc, 4, 6).await;
    let expected_page: Vec<i64> = active.iter().rev().skip(4).take(6).copied().collect();
    assert_eq!(
        page.items.iter().map(|b| b.id).collect::<Vec<_>>(),
        expected_page
    );
    assert_eq!(page.total_count, 15);
}

// Reads better whole: every count checked after each write, each from the state the last left.
pub async fn counts_follow_creates_deletes_and_moves(store: SharedStore) {
    let a = account(&store, "acme").await;
    let day1 = BusinessFilter {
        added_date: Some(utc_date(DAY1)),
        ..all()
    };
    let mut s1 = Vec::new();
    for i in 0..3 {
        let pb = (i == 0).then(|| "p1".to_string());
        s1.push(
            create(
                &store,
                a,
                NewBusiness {
                    partner_sub_id: Some("s1".into()),
                    partner_business_id: pb,
                    ..new_business("One")
                },
                DAY1,
            )
            .await,
        );
    }
    for _ in 0..2 {
        create(
            &store,
            a,
            NewBusiness {
                partner_sub_id: Some("s2".into()),
                ..new_business("Two")
            },
            DAY2,
        )
        .await;
    }
    let counts = |expected: [u64; 9]| {
        let store = store.clone();
        let day1 = day1.clone();
        async move {
            let got = [
                total(&store, a, all()).await,
                total(&store, a, deleted(false)).await,
                total(&store, a, deleted(true)).await,
                total(&store, a, sub("s1")).await,
                total(&store, a, sub("s2")).await,
                total(
                    &store,
                    a,
                    BusinessFilter {
                        deleted: Some(true),
                        ..sub("s1")
                    },
                )
                .await,
                total(&store, a, day1.clone()).await,
                total(&store, a, pbid("p1")).await,
                total(&store, a, pbid("p9")).await,
            ];
            assert_eq!(
                got, expected,
                "all, active, deleted, s1, s2, s1+deleted, day1, p1, p9"
            );
        }
    };
    counts([5, 5, 0, 3, 2, 0, 3, 1, 0]).await;

    let gone = patch(
        &store,
        a,
        s1[1].id,
        BusinessPatch {
            deleted: Some(true),
            ..Default::default()
        },
        DAY2,
    )
    .await;
    assert!(gone.deleted);
    assert_eq!(gone.modified, DAY2);
    counts([5, 4, 1, 3, 2, 1, 3, 1, 0]).await;
    // Deleting again changes nothing, not even `modified`.
    let again = patch(
        &store,
        a,
        s1[1].id,
        BusinessPatch {
            deleted: Some(true),
            ..Default::default()
        },
        DAY2 + 50,
    )
    .await;
    assert_eq!(again, gone);
    counts([5, 4, 1, 3, 2, 1, 3, 1, 0]).await;
    let restored = patch(
        &store,
        a,
        s1[1].id,
        BusinessPatch {
            deleted: Some(false),
            ..Default::default()
        },
        DAY2 + 60,
    )
    .await;
    assert!(!restored.deleted);
    counts([5, 5, 0, 3, 2, 0, 3, 1, 0]).await;

    // Moving between sub ids and partner ids moves the counts.
    patch(
        &store,
        a,
        s1[0].id,
        BusinessPatch {
            partner_sub_id: Some(Some("s2".into())),
            partner_business_id: Some(Some("p9".into())),
            ..Default::default()
        },
        DAY2,
    )
    .await;
    counts([5, 5, 0, 2, 3, 0, 3, 0, 1]).await;
    patch(
        &store,
        a,
        s1[2].id,
        BusinessPatch {
            partner_sub_id: Some(None),
            deleted: Some(true),
            ..Default::default()
        },
        DAY2,
    )
    .await;
    counts([5, 4, 1, 1, 3, 0, 3, 0, 1]).await;
    assert_eq!(
        ids(&store, a, sub("s1"), BusinessOrder::IdAsc).await,
        (vec![s1[1].id], 1)
    );
    // A name change keeps every count.
    patch(
        &store,
        a,
        s1[1].id,
        BusinessPatch {
            business_name: Some("Renamed".into()),
            ..Default::default()
        },
        DAY2,
    )
    .await;
    counts([5, 4, 1, 1, 3, 0, 3, 0, 1]).await;
}

/// An offset at or past `total_count` is answered from the counter alone: no `Query`,
/// no `BatchGetItem`, no row read, whatever the offset.
pub async fn offsets_past_the_end_read_only_the_counter(
    store: SharedStore,
    probe: &super::RowProbe,
) {
    let a = account(&store, "acme").await;
    for name in ["One", "Two", "Three"] {
        create(&store, a, new_business(name), DAY1).await;
    }
    for path in ["img/upload/a.png", "img/upload/b.png"] {
        image(&store, a, new_image(path, Some(12), None), DAY1).await;
    }
    let huge = 1_000_000_000_000_000_000;
    probe.arm();
    for order in [BusinessOrder::IdAsc, BusinessOrder::NameDesc] {
        for offset in [3, huge, u64::MAX] {
            let page = list(&store, a, all(), order, offset, 1000).await;
            assert_eq!((page.items, page.total_count), (vec![], 3), "{offset}");
        }
    }
    let page = list(&store, a, deleted(false), BusinessOrder::IdAsc, huge, 20).await;
    assert_eq!((page.items, page.total_count), (vec![], 3));
    let page = list(&store, a, sub("nobody"), BusinessOrder::IdAsc, 1, 20).await;
    assert_eq!((page.items, page.total_count), (vec![], 0));
    for offset in [2, huge, u64::MAX] {
        let page = list_images(&store, a, ImageFilter::default(), true, offset, 20).await;
        assert_eq!((page.items, page.total_count), (vec![], 2), "{offset}");
        let page = list_images(
            &store,
            a,
            ImageFilter {
                site_id: Some(12),
                ..ImageFilter::default()
            },
            false,
            offset,
            20,
        )
        .await;
        assert_eq!((page.items, page.total_count), (vec![], 2), "{offset}");
    }
    if let Some(calls) = probe.calls() {
        // Each count reads its counter's lane partitions, nothing else.
        let per_count = sitehost::store::dynamo::COUNTER_PARTITIONS as usize;
        assert_eq!(
            calls,
            vec!["Query (count)".to_string(); 14 * per_count],
            "counter reads only"
        );
    }
    // The probe does see row reads: a page inside the list needs them.
    let inside = store
        .list_businesses(
            a,
            &BusinessQuery {
                filter: all(),
                order: BusinessOrder::IdAsc,
                limit: 20,
                offset: 2,
            },
        )
        .await;
    match probe.calls() {
        Some(calls) => {
            assert_eq!(inside.expect("list").items.len(), 1);
            assert!(calls.iter().any(|c| c == "Query"), "{calls:?}");
        }
        None => assert!(inside.is_err(), "the record tables are hidden"),
    }
}

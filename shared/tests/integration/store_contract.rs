//! The store contract: one suite, written once against `Arc<dyn Store>`, instantiated for
//! every store (`contract!` at the bottom). Both stores must give the same answers.
//!
//! The DynamoDB instantiation runs on the moto_server at `SITEHOST_TEST_AWS_ENDPOINT` (see
//! `support`), with a table made from template.yaml per test, a small read page so that
//! every list crosses `Query` and `BatchGetItem` page boundaries, and block id allocation.

use crate::support;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use aws_sdk_dynamodb::config::interceptors::BeforeTransmitInterceptorContextRef;
use aws_sdk_dynamodb::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_sdk_dynamodb::error::BoxError;
use sitehost::store::dynamo::DynamoStore;
use sitehost::store::SharedStore;

/// A store under test and what to clean up after it.
struct Fixture {
    store: SharedStore,
    probe: RowProbe,
    table: Option<support::TestTable>,
    _dir: Option<tempfile::TempDir>,
}

/// Shows a case whether a store read list rows, or only counters.
pub enum RowProbe {
    /// The DynamoDB operations the store's client sent since `arm` (`None` before).
    Dynamo(Arc<Mutex<Option<Vec<String>>>>),
    /// The SQLite data directory: `arm` renames the record tables away, so from then on
    /// every read of business or image rows fails and only counter reads succeed.
    Sqlite(PathBuf),
}

impl RowProbe {
    pub fn arm(&self) {
        match self {
            RowProbe::Dynamo(calls) => {
                *calls.lock().unwrap_or_else(|p| p.into_inner()) = Some(Vec::new());
            }
            RowProbe::Sqlite(dir) => {
                let db = rusqlite::Connection::open(dir.join("sitehost.db")).expect("open db");
                db.execute_batch(
                    "ALTER TABLE businesses RENAME TO businesses_hidden;
                     ALTER TABLE images RENAME TO images_hidden;",
                )
                .expect("hide the record tables");
            }
        }
    }

    /// The DynamoDB operations since `arm`, by name (`GetItem`, `Query`, ...); `None` on
    /// SQLite, where a row read fails instead.
    pub fn calls(&self) -> Option<Vec<String>> {
        match self {
            RowProbe::Dynamo(calls) => calls.lock().unwrap_or_else(|p| p.into_inner()).clone(),
            RowProbe::Sqlite(_) => None,
        }
    }
}

/// Records the operation (`X-Amz-Target`) of every request once armed.
#[derive(Debug)]
struct RecordCalls(Arc<Mutex<Option<Vec<String>>>>);

impl Intercept for RecordCalls {
    fn name(&self) -> &'static str {
        "RecordCalls"
    }

    fn read_before_transmit(
        &self,
        context: &BeforeTransmitInterceptorContextRef<'_>,
        _components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let target = context.request().headers().get("x-amz-target");
        if let (Some(calls), Some(target)) = (
            self.0.lock().unwrap_or_else(|p| p.into_inner()).as_mut(),
            target,
        ) {
            calls.push(target.rsplit('.').next().unwrap_or(target).to_string());
        }
        Ok(())
    }
}

impl Fixture {
    async fn finish(self) {
        if let Some(table) = self.table {
            table.delete().await;
        }
    }
}

async fn dynamo_fixture() -> Option<Fixture> {
    let table = support::TestTable::create().await?;
    let calls = Arc::new(Mutex::new(None));
    let client = aws_sdk_dynamodb::Client::from_conf(
        table
            .client
            .config()
            .to_builder()
            .interceptor(RecordCalls(calls.clone()))
            .build(),
    );
    let store = DynamoStore::new(client, table.name.clone())
        .with_id_block(3)
        .with_read_page_size(7);
    Some(Fixture {
        store: Arc::new(store),
        probe: RowProbe::Dynamo(calls),
        table: Some(table),
        _dir: None,
    })
}

// ---------------------------------------------------------------------------------------
// SQLITE: enable after merging main, where `SqliteStore` exists. Replace the body of
// `sqlite_store` with the commented line (and delete the two lines under it).
// ---------------------------------------------------------------------------------------
async fn sqlite_fixture() -> Option<Fixture> {
    let dir = tempfile::tempdir().expect("temporary data directory");
    let store: SharedStore = Arc::new(
        sitehost::store::sqlite::SqliteStore::open(dir.path()).expect("open SQLite store"),
    );
    Some(Fixture {
        store,
        probe: RowProbe::Sqlite(dir.path().to_path_buf()),
        table: None,
        _dir: Some(dir),
    })
}

/// Generates one `#[tokio::test]` per case for a store factory.
macro_rules! contract {
    ($store:ident, $factory:path) => {
        mod $store {
            contract!(@cases $factory;
                business_round_trip,
                tenancy,
                logo_and_business_validation,
                every_filter_and_combination,
                every_order,
                paging,
                counts_follow_writes,
                update_semantics,
                keys,
                nonces,
                images,
                image_sub_ids,
                image_logos_and_sub_ids,
                image_ids_allocated_and_settled,
                concurrent_creates,
                concurrent_patches,
                budgets,
                concurrent_budget_draws,
            );
            contract!(@probed $factory; offsets_past_the_end_read_only_the_counter);
        }
    };
    (@probed $factory:path; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                let Some(fixture) = $factory().await else { return };
                super::cases::$case(fixture.store.clone(), &fixture.probe).await;
                fixture.finish().await;
            }
        )*
    };
    (@cases $factory:path; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                let Some(fixture) = $factory().await else { return };
                super::cases::$case(fixture.store.clone()).await;
                fixture.finish().await;
            }
        )*
    };
}

contract!(dynamo, super::dynamo_fixture);
contract!(sqlite, super::sqlite_fixture);

mod cases {
    use std::collections::{BTreeMap, BTreeSet};

    use sitehost::auth::{ApiKey, NewKey};
    use sitehost::business::{
        Business, BusinessFilter, BusinessOrder, BusinessPatch, BusinessQuery, NewBusiness,
    };
    use sitehost::clock::utc_date;
    use sitehost::image::{Image, ImageFilter, ImageQuery, NewImage};
    use sitehost::store::{BudgetDecision, BudgetKind, Page, SharedStore};
    use sitehost::ApiError;

    /// 2013-05-24T11:40:21 and the same time the next day.
    const DAY1: i64 = 1_369_395_621;
    const DAY2: i64 = DAY1 + 86_400;

    async fn account(store: &SharedStore, name: &str) -> i64 {
        store.ensure_account(name).await.expect("ensure_account").id
    }

    fn new_business(name: &str) -> NewBusiness {
        NewBusiness {
            business_name: name.to_string(),
            partner_business_id: None,
            partner_sub_id: None,
            category_id: None,
            logo_image_id: None,
            user_id: 7,
        }
    }

    async fn create(store: &SharedStore, account: i64, new: NewBusiness, now: i64) -> Business {
        store
            .create_business(account, new, now)
            .await
            .expect("create_business")
    }

    async fn patch(
        store: &SharedStore,
        account: i64,
        id: i64,
        patch: BusinessPatch,
        now: i64,
    ) -> Business {
        store
            .update_business(account, id, None, patch, now)
            .await
            .expect("update_business")
            .expect("the business exists")
    }

    async fn list(
        store: &SharedStore,
        account: i64,
        filter: BusinessFilter,
        order: BusinessOrder,
        offset: u64,
        limit: u64,
    ) -> Page<Business> {
        store
            .list_businesses(
                account,
                &BusinessQuery {
                    filter,
                    order,
                    limit,
                    offset,
                },
            )
            .await
            .expect("list_businesses")
    }

    /// Ids of the whole list in one order, and the total.
    async fn ids(
        store: &SharedStore,
        account: i64,
        filter: BusinessFilter,
        order: BusinessOrder,
    ) -> (Vec<i64>, u64) {
        let page = list(store, account, filter, order, 0, 1000).await;
        (page.items.iter().map(|b| b.id).collect(), page.total_count)
    }

    async fn total(store: &SharedStore, account: i64, filter: BusinessFilter) -> u64 {
        list(store, account, filter, BusinessOrder::IdAsc, 0, 1)
            .await
            .total_count
    }

    fn all() -> BusinessFilter {
        BusinessFilter::default()
    }

    fn deleted(d: bool) -> BusinessFilter {
        BusinessFilter {
            deleted: Some(d),
            ..all()
        }
    }

    fn sub(s: &str) -> BusinessFilter {
        BusinessFilter {
            partner_sub_id: Some(s.into()),
            ..all()
        }
    }

    fn pbid(p: &str) -> BusinessFilter {
        BusinessFilter {
            partner_business_id: Some(p.into()),
            ..all()
        }
    }

    fn new_image(path: &str, site_id: Option<i64>, business_id: Option<i64>) -> NewImage {
        NewImage {
            id: None,
            path: path.to_string(),
            mimetype: "image/jpeg".into(),
            width: 640,
            height: 480,
            site_id,
            business_id,
            partner_sub_id: None,
            user_id: 7,
        }
    }

    async fn image(store: &SharedStore, account: i64, new: NewImage, now: i64) -> Image {
        store
            .create_image(account, new, now)
            .await
            .expect("create_image")
    }

    async fn list_images(
        store: &SharedStore,
        account: i64,
        filter: ImageFilter,
        descending: bool,
        offset: u64,
        limit: u64,
    ) -> Page<Image> {
        store
            .list_images(
                account,
                &ImageQuery {
                    filter,
                    descending,
                    limit,
                    offset,
                },
            )
            .await
            .expect("list_images")
    }

    fn image_ids(page: &Page<Image>) -> Vec<i64> {
        page.items.iter().map(|i| i.id).collect()
    }

    /// Asserts a validation failure on exactly this field.
    fn assert_field_error<T: std::fmt::Debug>(result: Result<T, ApiError>, field: &str) {
        match result {
            Err(ApiError::Validation(fields)) => {
                assert_eq!(fields.keys().collect::<Vec<_>>(), vec![field], "{fields:?}");
            }
            other => panic!("expected a validation error on {field}, got {other:?}"),
        }
    }

    pub async fn business_round_trip(store: SharedStore) {
        let a = account(&store, "acme").await;
        let new = NewBusiness {
            business_name: "Joe's Pizza".into(),
            partner_business_id: Some("p-1".into()),
            partner_sub_id: Some("sub-1".into()),
            category_id: Some(12),
            logo_image_id: None,
            user_id: 7,
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

    pub async fn tenancy(store: SharedStore) {
        let a = account(&store, "acme").await;
        let b = account(&store, "globex").await;
        assert_ne!(a, b);
        let theirs = create(
            &store,
            a,
            NewBusiness {
                partner_sub_id: Some("s".into()),
                ..new_business("Acme Shop")
            },
            DAY1,
        )
        .await;
        let their_image = image(
            &store,
            a,
            NewImage {
                partner_sub_id: Some("s".into()),
                ..new_image("img/upload/acme.jpg", Some(1), Some(theirs.id))
            },
            DAY1,
        )
        .await;

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

        // Another account's image or business cannot be referenced.
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

    pub async fn logo_and_business_validation(store: SharedStore) {
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

    pub async fn every_filter_and_combination(store: SharedStore) {
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

        // Every combination against a reference written here, in both id orders.
        let deleted_values = [None, Some(false), Some(true)];
        let sub_values = [None, Some("s1"), Some("s2"), Some("s|d=1"), Some("none")];
        let day_values = [None, Some(DAY1), Some(DAY2)];
        let pbid_values = [None, Some("p1"), Some("p2"), Some("p#1%")];
        for d in deleted_values {
            for s in sub_values {
                for t in day_values {
                    for p in pbid_values {
                        let filter = BusinessFilter {
                            deleted: d,
                            partner_sub_id: s.map(Into::into),
                            added_date: t.map(utc_date),
                            partner_business_id: p.map(Into::into),
                        };
                        let expected: Vec<i64> = SPECS
                            .iter()
                            .zip(&created)
                            .filter(|(spec, _)| {
                                d.is_none_or(|d| spec.deleted == d)
                                    && s.is_none_or(|s| spec.sub == Some(s))
                                    && t.is_none_or(|t| utc_date(spec.added) == utc_date(t))
                                    && p.is_none_or(|p| spec.pbid == Some(p))
                            })
                            .map(|(_, id)| *id)
                            .collect();
                        let (got, count) =
                            ids(&store, a, filter.clone(), BusinessOrder::IdAsc).await;
                        assert_eq!(
                            (&got, count),
                            (&expected, expected.len() as u64),
                            "{filter:?}"
                        );
                        let (got_desc, _) =
                            ids(&store, a, filter.clone(), BusinessOrder::IdDesc).await;
                        assert_eq!(
                            got_desc,
                            expected.iter().rev().copied().collect::<Vec<_>>(),
                            "{filter:?}"
                        );
                    }
                }
            }
        }
    }

    pub async fn every_order(store: SharedStore) {
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
            ("Apple".to_string(), id_of(1)),
            ("apple".to_string(), id_of(2)),
            ("apple".to_string(), id_of(4)),
            ("banana".to_string(), id_of(0)),
            ("Banana split".to_string(), id_of(7)),
            ("Cherry".to_string(), id_of(3)),
            ("zeta".to_string(), id_of(6)),
            // Byte order of the lower-cased UTF-8, in both stores.
            ("Äpfel".to_string(), id_of(5)),
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
            vec![
                id_of(6),
                id_of(1),
                id_of(4),
                id_of(0),
                id_of(7),
                id_of(3),
                id_of(5)
            ]
        );
        let desc = list(&store, a, deleted(false), BusinessOrder::NameDesc, 1, 2).await;
        assert_eq!(
            desc.items.iter().map(|b| b.id).collect::<Vec<_>>(),
            vec![id_of(3), id_of(7)]
        );
        assert_eq!(
            ids(&store, a, deleted(true), BusinessOrder::NameDesc).await,
            (vec![id_of(2)], 1)
        );
    }

    pub async fn paging(store: SharedStore) {
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
            (x.business_name.to_lowercase(), x.id).cmp(&(y.business_name.to_lowercase(), y.id))
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

    pub async fn counts_follow_writes(store: SharedStore) {
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

    pub async fn update_semantics(store: SharedStore) {
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
        assert_eq!(allowed.map(|b| b.category_id), Some(Some(9)));

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

    pub async fn keys(store: SharedStore) {
        let acme = store.ensure_account("acme").await.expect("ensure");
        assert_eq!(acme.name, "acme");
        assert_eq!(
            store.ensure_account("acme").await.expect("ensure again"),
            acme
        );
        let globex = store.ensure_account("globex").await.expect("ensure");
        assert_ne!(globex.id, acme.id);
        assert_eq!(
            store.ensure_account("globex").await.expect("ensure again"),
            globex
        );

        let new_key = |key: &str, user_id: Option<i64>, sub: Option<&str>, created: i64| NewKey {
            key: key.into(),
            secret: format!("secret-of-{key}"),
            account_id: acme.id,
            user_id,
            partner_sub_id: sub.map(Into::into),
            created,
        };
        let mut made: Vec<ApiKey> = Vec::new();
        for (i, key) in ["key-one", "key-two", "key-three", "key-four"]
            .into_iter()
            .enumerate()
        {
            let sub = (i == 1).then_some("s1");
            made.push(
                store
                    .create_key(new_key(key, None, sub, 100 + i as i64))
                    .await
                    .expect("create_key"),
            );
        }
        let fixed = store
            .create_key(NewKey {
                account_id: globex.id,
                ..new_key("key-fixed", Some(42), None, 200)
            })
            .await
            .expect("create_key");
        assert_eq!(fixed.user_id, 42);
        assert_eq!(fixed.account_id, globex.id);
        let user_ids: BTreeSet<i64> = made.iter().map(|k| k.user_id).collect();
        assert_eq!(
            user_ids.len(),
            4,
            "allocated user ids are distinct: {user_ids:?}"
        );
        assert_eq!(
            made[1],
            ApiKey {
                key: "key-two".into(),
                secret: "secret-of-key-two".into(),
                account_id: acme.id,
                user_id: made[1].user_id,
                partner_sub_id: Some("s1".into()),
                revoked: false,
                created: 101,
            }
        );
        for key in &made {
            assert_eq!(
                store.get_key(&key.key).await.expect("get_key").as_ref(),
                Some(key)
            );
        }
        assert_eq!(store.get_key("no-such-key").await.expect("get_key"), None);
        assert!(
            store
                .create_key(new_key("key-one", None, None, 300))
                .await
                .is_err(),
            "keys are unique"
        );

        let sorted = |mut keys: Vec<ApiKey>| {
            keys.sort_by(|x, y| x.key.cmp(&y.key));
            keys
        };
        let mut everything = made.clone();
        everything.push(fixed.clone());
        assert_eq!(
            sorted(store.list_keys().await.expect("list_keys")),
            sorted(everything.clone())
        );

        assert!(store.revoke_key("key-two").await.expect("revoke"));
        assert!(!store.revoke_key("no-such-key").await.expect("revoke"));
        assert!(
            store.revoke_key("key-two").await.expect("revoke again"),
            "revoking twice still finds the key"
        );
        let revoked = store
            .get_key("key-two")
            .await
            .expect("get_key")
            .expect("still there");
        assert_eq!(
            revoked,
            ApiKey {
                revoked: true,
                ..made[1].clone()
            }
        );
        assert!(
            !store
                .get_key("key-one")
                .await
                .expect("get_key")
                .expect("there")
                .revoked
        );
        let listed = store.list_keys().await.expect("list_keys");
        let revoked_keys: Vec<&str> = listed
            .iter()
            .filter(|k| k.revoked)
            .map(|k| k.key.as_str())
            .collect();
        assert_eq!(revoked_keys, vec!["key-two"]);
        assert_eq!(listed.len(), 5);
    }

    pub async fn nonces(store: SharedStore) {
        let remember = |key: &'static str, nonce: &'static str, now: i64, expires_at: i64| {
            let store = store.clone();
            async move {
                store
                    .remember_nonce(key, nonce, now, expires_at)
                    .await
                    .expect("remember_nonce")
            }
        };
        assert!(remember("k1", "n1", 1000, 1300).await, "first use");
        assert!(!remember("k1", "n1", 1100, 1400).await, "replay");
        assert!(
            !remember("k1", "n1", 1300, 1600).await,
            "still remembered at expires_at"
        );
        assert!(
            remember("k1", "n1", 1301, 1601).await,
            "accepted again once expired"
        );
        assert!(
            !remember("k1", "n1", 1400, 1700).await,
            "and remembered anew"
        );
        assert!(
            remember("k2", "n1", 1400, 1700).await,
            "another key may use the same nonce"
        );
        assert!(remember("k1", "n2", 1400, 1700).await, "another nonce");
        // Separators in values cannot make two pairs collide.
        assert!(remember("k#1", "n", 1400, 1700).await);
        assert!(remember("k", "1#n", 1400, 1700).await);
        assert!(!remember("k#1", "n", 1500, 1800).await);
        let long_nonce: &'static str = Box::leak("n".repeat(3000).into_boxed_str());
        assert!(remember("k1", long_nonce, 1400, 1700).await);
        assert!(!remember("k1", long_nonce, 1500, 1800).await);
    }

    pub async fn images(store: SharedStore) {
        let a = account(&store, "acme").await;
        let b1 = create(&store, a, new_business("One"), DAY1).await;
        let b2 = create(&store, a, new_business("Two"), DAY1).await;
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
                    &store,
                    a,
                    new_image(&format!("img/upload/c{i}.jpg"), site, business),
                    DAY1 + i as i64,
                )
                .await,
            );
        }
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
                business_id: Some(b1.id),
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
        let id = |i: usize| made[i].id;

        let all_images = list_images(&store, a, ImageFilter::default(), false, 0, 100).await;
        assert_eq!(all_images.items, made);
        assert_eq!(all_images.total_count, 5);
        let desc = list_images(&store, a, ImageFilter::default(), true, 0, 100).await;
        assert_eq!(image_ids(&desc), vec![id(4), id(3), id(2), id(1), id(0)]);

        let cases = [
            (Some(10), None, vec![id(0), id(1)]),
            (Some(20), None, vec![id(2), id(4)]),
            (None, Some(b1.id), vec![id(0), id(2)]),
            (None, Some(b2.id), vec![id(3), id(4)]),
            (Some(20), Some(b2.id), vec![id(4)]),
            (Some(10), Some(b2.id), vec![]),
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

    fn sub_filter(sub: Option<&str>, business_id: Option<i64>) -> ImageFilter {
        ImageFilter {
            business_id,
            partner_sub_id: sub.map(str::to_string),
            ..Default::default()
        }
    }

    /// An image's sub id is stored, must match its business's, and is a list scope: a
    /// restricted list is one scope with its own count.
    pub async fn image_sub_ids(store: SharedStore) {
        let a = account(&store, "acme").await;
        let north = create(
            &store,
            a,
            NewBusiness {
                partner_sub_id: Some("north".into()),
                ..new_business("North")
            },
            DAY1,
        )
        .await;
        let plain = create(&store, a, new_business("Plain"), DAY1).await;
        let n1 = image(
            &store,
            a,
            image_of_sub("img/upload/n1.jpg", None, Some("north")),
            DAY1,
        )
        .await;
        let n2 = image(
            &store,
            a,
            image_of_sub("img/upload/n2.jpg", Some(north.id), Some("north")),
            DAY1,
        )
        .await;
        let s1 = image(
            &store,
            a,
            image_of_sub("img/upload/s1.jpg", None, Some("south")),
            DAY1,
        )
        .await;
        let none = image(
            &store,
            a,
            image_of_sub("img/upload/p1.jpg", Some(plain.id), None),
            DAY1,
        )
        .await;
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

        // The business must have the image's sub id (or none for an image without one).
        for (business, sub) in [
            (north.id, Some("south")),
            (north.id, None),
            (plain.id, Some("north")),
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

        let cases = [
            (sub_filter(None, None), vec![n1.id, n2.id, s1.id, none.id]),
            (sub_filter(Some("north"), None), vec![n1.id, n2.id]),
            (sub_filter(Some("south"), None), vec![s1.id]),
            (sub_filter(Some("east"), None), vec![]),
            (sub_filter(Some("north"), Some(north.id)), vec![n2.id]),
            (sub_filter(Some("south"), Some(north.id)), vec![]),
            (sub_filter(Some("north"), Some(plain.id)), vec![]),
            (sub_filter(None, Some(plain.id)), vec![none.id]),
            (
                ImageFilter {
                    site_id: Some(10),
                    ..sub_filter(Some("north"), Some(north.id))
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
    pub async fn image_logos_and_sub_ids(store: SharedStore) {
        let a = account(&store, "acme").await;
        let north_image = image(
            &store,
            a,
            image_of_sub("img/upload/n.jpg", None, Some("north")),
            DAY1,
        )
        .await;
        let south_image = image(
            &store,
            a,
            image_of_sub("img/upload/s.jpg", None, Some("south")),
            DAY1,
        )
        .await;
        let plain_image = image(
            &store,
            a,
            image_of_sub("img/upload/p.jpg", None, None),
            DAY1,
        )
        .await;
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
        assert_eq!(with_north.logo_image_id, Some(north_image.id));
        // An unrestricted update may use any image of the account.
        let with_south = patch(&store, a, b.id, set_logo(south_image.id), DAY2).await;
        assert_eq!(with_south.logo_image_id, Some(south_image.id));
        // Writing back the logo the business has (plus a change) is no new reference.
        let written_back = BusinessPatch {
            business_name: Some("North Two".into()),
            ..set_logo(south_image.id)
        };
        let renamed = store
            .update_business(a, b.id, Some("north"), written_back, DAY2)
            .await
            .expect("update")
            .expect("visible");
        assert_eq!(
            (renamed.business_name.as_str(), renamed.logo_image_id),
            ("North Two", Some(south_image.id))
        );
    }

    /// Ids taken ahead of the record, and settling an id whose record write had an unknown
    /// outcome: a written record is returned; an unwritten id is barred for good.
    pub async fn image_ids_allocated_and_settled(store: SharedStore) {
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

    pub async fn concurrent_creates(store: SharedStore) {
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
            let b = task.await.expect("task").expect("create_business");
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

    pub async fn concurrent_patches(store: SharedStore) {
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
                    tokio::spawn(async move {
                        store.update_business(a, id, None, p, DAY2 + round).await
                    })
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

    /// The start of a budget window (a multiple of 60).
    const WINDOW: i64 = 1_700_000_040;

    async fn draw(
        store: &SharedStore,
        key: &str,
        kind: BudgetKind,
        limit: u64,
        now: i64,
    ) -> BudgetDecision {
        store
            .consume_budget(key, kind, limit, now)
            .await
            .expect("consume_budget")
    }

    pub async fn budgets(store: SharedStore) {
        use BudgetDecision::{Admitted, Refused};
        use BudgetKind::{Requests, Uploads};
        for second in [0, 10, 20] {
            assert_eq!(
                draw(&store, "k1", Requests, 3, WINDOW + second).await,
                Admitted
            );
        }
        assert_eq!(
            draw(&store, "k1", Requests, 3, WINDOW + 15).await,
            Refused { retry_after: 45 },
            "over budget: wait for the window to end"
        );
        assert_eq!(
            draw(&store, "k1", Requests, 3, WINDOW + 59).await,
            Refused { retry_after: 1 }
        );
        assert_eq!(
            draw(&store, "k1", Uploads, 1, WINDOW + 30).await,
            Admitted,
            "each kind has its own budget"
        );
        assert_eq!(
            draw(&store, "k1", Uploads, 1, WINDOW + 31).await,
            Refused { retry_after: 29 }
        );
        assert_eq!(
            draw(&store, "k2", Requests, 3, WINDOW + 30).await,
            Admitted,
            "each key has its own budget"
        );
        // Separators in a key cannot make it share another key's counter.
        assert_eq!(
            draw(&store, "k1#requests", Requests, 1, WINDOW).await,
            Admitted
        );
        assert_eq!(
            draw(&store, "k1%23requests", Requests, 1, WINDOW).await,
            Admitted
        );
        let long_key: String = "k".repeat(3000);
        assert_eq!(draw(&store, &long_key, Requests, 1, WINDOW).await, Admitted);
        assert_eq!(
            draw(&store, &long_key, Requests, 1, WINDOW + 1).await,
            Refused { retry_after: 59 }
        );
        // The next window starts afresh, and so does its own count.
        for second in [60, 61, 62] {
            assert_eq!(
                draw(&store, "k1", Requests, 3, WINDOW + second).await,
                Admitted
            );
        }
        assert_eq!(
            draw(&store, "k1", Requests, 3, WINDOW + 100).await,
            Refused { retry_after: 20 }
        );
        assert_eq!(draw(&store, "k1", Uploads, 1, WINDOW + 100).await, Admitted);
        // A raised limit admits more in the same window.
        assert_eq!(
            draw(&store, "k1", Requests, 100, WINDOW + 101).await,
            Admitted
        );
    }

    pub async fn concurrent_budget_draws(store: SharedStore) {
        let tasks: Vec<_> = (0..20)
            .map(|i| {
                let store = store.clone();
                tokio::spawn(async move {
                    store
                        .consume_budget("busy", BudgetKind::Requests, 10, WINDOW + 5 + i % 3)
                        .await
                })
            })
            .collect();
        let mut admitted = 0;
        let mut refused = Vec::new();
        for task in tasks {
            match task.await.expect("task").expect("consume_budget") {
                BudgetDecision::Admitted => admitted += 1,
                BudgetDecision::Refused { retry_after } => refused.push(retry_after),
            }
        }
        assert_eq!(admitted, 10, "exactly the budget is admitted");
        assert_eq!(refused.len(), 10);
        assert!(refused.iter().all(|r| (53..=55).contains(r)), "{refused:?}");
        assert_eq!(
            draw(&store, "busy", BudgetKind::Uploads, 10, WINDOW + 9).await,
            BudgetDecision::Admitted
        );
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
            assert_eq!(calls, vec!["GetItem".to_string(); 14], "counter reads only");
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
}

/// `template.yaml` parses, tags and all, and its table converts to a `CreateTable` call.
#[test]
fn template_table_definition_converts() {
    let props = support::records_table_properties();
    let client = support::client("http://127.0.0.1:9");
    let request = support::create_table_request(&client, "t", &props);
    let keys: BTreeSet<String> = request
        .get_key_schema()
        .iter()
        .flatten()
        .map(|k| format!("{}:{}", k.attribute_name(), k.key_type().as_str()))
        .collect();
    assert_eq!(
        keys,
        BTreeSet::from(["pk:HASH".to_string(), "sk:RANGE".to_string()])
    );
    let lsi = request
        .get_local_secondary_indexes()
        .as_deref()
        .unwrap_or_default();
    assert_eq!(lsi.len(), 1);
    assert_eq!(lsi[0].index_name(), "by_name");
    assert_eq!(
        request.get_billing_mode().as_ref().map(|b| b.as_str()),
        Some("PAY_PER_REQUEST")
    );
}

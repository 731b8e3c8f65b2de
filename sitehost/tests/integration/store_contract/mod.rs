//! The store contract: one suite, written once against `Arc<dyn Store>` (a module per
//! concern, `fixtures` for what they share), instantiated for every store by `contract!`
//! below, which lists every case. Both stores must give the same answers.
//!
//! The DynamoDB instantiation runs on the moto_server at `SITEHOST_TEST_AWS_ENDPOINT` (see
//! `support`), with a table made from template.yaml per test, a small read page so that
//! every list crosses `Query` and `BatchGetItem` page boundaries, and block id allocation.

mod budgets;
mod businesses;
mod concurrency;
mod fixtures;
mod idempotency;
mod idempotent_creates;
mod image_deletes;
mod images;
mod keys_and_nonces;
mod listing;
mod location_resource;
mod locations;
mod logo_marks;
mod name_order;
mod site_addresses;
mod sites;
mod upload_sessions;
mod write_budgets;

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
    /// The DynamoDB double the store talks to, if any: its counts are printed at the end.
    double: Option<dynamo_double::DoubleHandle>,
}

/// Shows a case whether a store read list rows, or only counters.
pub enum RowProbe {
    /// The DynamoDB operations the store's client sent since `arm` (`None` before); a
    /// `Query` of a counter partition is `Query (count)`.
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
            let operation = target.rsplit('.').next().unwrap_or(target);
            // A count is a `Query` of a counter partition (`A#<account>#BC#...`, `#IC#`).
            let body = context.request().body().bytes().unwrap_or_default();
            let counter = [b"#BC#", b"#IC#"]
                .iter()
                .any(|tag| body.windows(tag.len()).any(|w| w == *tag));
            calls.push(if operation == "Query" && counter {
                "Query (count)".to_string()
            } else {
                operation.to_string()
            });
        }
        Ok(())
    }
}

impl Fixture {
    /// The DynamoDB store as every case runs it: a small read page, so that every list
    /// crosses `Query` and `BatchGetItem` page boundaries, and ids in blocks.
    fn dynamo(
        client: aws_sdk_dynamodb::Client,
        table: support::TestTable,
        probe: RowProbe,
        double: Option<dynamo_double::DoubleHandle>,
    ) -> Fixture {
        let store = DynamoStore::new(client, table.name.clone())
            .with_id_block(3)
            .with_read_page_size(7);
        Fixture {
            store: Arc::new(store),
            probe,
            table: Some(table),
            _dir: None,
            double,
        }
    }

    async fn finish(self) {
        if let Some(double) = &self.double {
            // What the double did to the store: conflicts it cancelled, and retried.
            eprintln!("dynamo-double: {:?}", double.stats());
        }
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
    Some(Fixture::dynamo(
        client,
        table,
        RowProbe::Dynamo(calls),
        None,
    ))
}

/// The DynamoDB store behind the DynamoDB double (`dynamo-double`), which cancels
/// transactions that meet another one in flight on an item, as DynamoDB does and moto does
/// not. Transactions hold their items for 30 ms, three times DynamoDB's typical latency, so
/// that the tests' concurrent writes meet often. The client retries as production's does
/// (the SDK's standard mode).
async fn double_fixture() -> Option<Fixture> {
    let model = dynamo_double::Model {
        transaction: std::time::Duration::from_millis(30),
        ..Default::default()
    };
    let (table, client, double) = support::double::table_behind_double(model).await?;
    let client = aws_sdk_dynamodb::Client::from_conf(
        client
            .config()
            .to_builder()
            .retry_config(aws_sdk_dynamodb::config::retry::RetryConfig::standard())
            .build(),
    );
    let probe = RowProbe::Dynamo(Arc::new(Mutex::new(None)));
    Some(Fixture::dynamo(client, table, probe, Some(double)))
}

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
        double: None,
    })
}

/// Generates one `#[tokio::test]` per case for a store factory.
macro_rules! contract {
    ($store:ident, $factory:path) => {
        mod $store {
            contract!(@cases $factory;
                businesses::a_created_business_is_read_back_as_stored,
                businesses::another_accounts_business_is_not_found_nor_changed,
                businesses::another_accounts_records_are_not_listed,
                businesses::another_accounts_image_or_business_cannot_be_referenced,
                businesses::a_missing_logo_or_business_is_refused_and_writes_nothing,
                listing::lists_match_a_reference_for_every_filter_and_combination,
                listing::every_order_sorts_by_name_with_accents_or_by_id,
                name_order::names_sort_with_their_base_letter,
                listing::pages_cover_a_list_once_with_and_without_a_filter,
                listing::counts_follow_creates_deletes_and_moves,
                businesses::a_patch_changes_what_it_names_within_its_sub_id,
                locations::services_and_locations_are_stored_with_their_own_ids,
                locations::updates_replace_services_and_locations,
                locations::the_largest_locations_are_kept,
                location_resource::a_location_is_found_edited_and_removed_by_its_id,
                location_resource::concurrent_location_creates_are_all_kept,
                keys_and_nonces::an_account_is_ensured_once_per_name,
                keys_and_nonces::created_keys_are_found_with_distinct_user_ids,
                keys_and_nonces::every_key_of_every_account_is_listed,
                keys_and_nonces::a_revoked_key_is_still_found_and_listed_as_revoked,
                keys_and_nonces::a_nonce_is_accepted_once_until_it_expires,
                images::an_image_is_stored_and_found_by_id,
                images::images_are_listed_by_id_both_ways,
                images::image_filters_by_site_and_business_select_their_images,
                images::image_pages_keep_the_total_count,
                images::an_images_sub_id_is_stored,
                images::an_image_of_another_sub_id_than_its_business_is_refused,
                images::image_lists_of_a_sub_id_are_a_scope_with_its_own_count,
                images::a_sub_restricted_key_sets_only_logos_of_its_sub_id,
                images::logos_of_another_sub_id_are_refused,
                images::an_allocated_id_settles_to_its_record_or_is_barred,
                image_deletes::another_accounts_or_sub_ids_delete_finds_no_image,
                image_deletes::a_deleted_image_leaves_every_list_and_is_deleted_once,
                image_deletes::a_deleted_images_id_stays_barred,
                image_deletes::a_logo_is_deleted_only_once_no_business_has_it,
                image_deletes::another_sub_ids_image_never_becomes_a_logo_and_stays_deletable,
                image_deletes::a_delete_racing_a_logo_write_never_leaves_a_missing_logo,
                concurrency::concurrent_creates_get_distinct_ids_and_exact_counts,
                concurrency::concurrent_patches_of_one_business_all_land,
                concurrency::concurrent_deletes_restores_and_renames_keep_counts_exact,
                budgets::a_budget_admits_its_limit_per_key_kind_and_window,
                budgets::a_draw_of_many_tokens_is_all_or_nothing,
                budgets::concurrent_draws_admit_exactly_the_budget,
                budgets::large_budgets_admit_exactly_their_limit,
                write_budgets::maximal_creates_pay_for_their_bytes,
                write_budgets::updates_of_details_pay_for_what_they_rewrite,
                idempotency::a_key_answers_its_own_request_for_a_day,
                idempotency::another_api_keys_claim_is_its_own_record,
                idempotency::no_api_key_and_value_pair_runs_into_another,
                idempotency::a_released_key_is_claimed_anew,
                idempotency::a_dead_requests_claim_holds_until_its_lease_ends,
                idempotency::a_key_may_be_any_visible_ascii_up_to_255_characters,
                idempotency::of_concurrent_claims_of_one_key_exactly_one_runs,
                idempotent_creates::another_subs_key_and_body_create_anew,
                idempotent_creates::a_sub_sending_first_does_not_swallow_anothers_create,
                idempotent_creates::another_callers_key_is_not_disclosed,
                idempotent_creates::simultaneous_creates_with_one_key,
                sites::an_active_site_holds_its_address_alone,
                sites::site_lists_follow_filters_orders_and_sub_ids,
                sites::of_concurrent_creates_at_one_address_exactly_one_is_made,
                sites::posts_are_stored_and_listed_newest_first,
                site_addresses::a_host_belongs_to_one_accounts_active_sites,
                site_addresses::of_concurrent_creates_at_one_host_one_account_wins,
                site_addresses::a_page_of_the_largest_posts_stops_at_its_bytes,
                upload_sessions::an_upload_session_is_used_once_and_kept_a_day_past_its_expiry,
            );
            contract!(@probed $factory;
                listing::offsets_past_the_end_read_only_the_counter,
                budgets::refusals_and_replays_through_the_app,
            );
        }
    };
    (@probed $factory:path; $($module:ident::$case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                let Some(fixture) = $factory().await else { return };
                super::$module::$case(fixture.store.clone(), &fixture.probe).await;
                fixture.finish().await;
            }
        )*
    };
    (@cases $factory:path; $($module:ident::$case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                let Some(fixture) = $factory().await else { return };
                super::$module::$case(fixture.store.clone()).await;
                fixture.finish().await;
            }
        )*
    };
}

contract!(dynamo, super::dynamo_fixture);
contract!(sqlite, super::sqlite_fixture);

/// The concurrency cases once more on the DynamoDB double: counts and lists stay exact when
/// transactions are cancelled for conflicts and retried on other counter lanes. With them,
/// each resource beside businesses once: a location, a site and a post written through it.
mod on_double {
    contract!(@cases super::double_fixture;
        concurrency::concurrent_creates_get_distinct_ids_and_exact_counts,
        concurrency::concurrent_patches_of_one_business_all_land,
        concurrency::concurrent_deletes_restores_and_renames_keep_counts_exact,
        image_deletes::a_delete_racing_a_logo_write_never_leaves_a_missing_logo,
        budgets::concurrent_draws_admit_exactly_the_budget,
        idempotency::of_concurrent_claims_of_one_key_exactly_one_runs,
        idempotent_creates::simultaneous_creates_with_one_key,
        budgets::large_budgets_admit_exactly_their_limit,
        sites::of_concurrent_creates_at_one_address_exactly_one_is_made,
        location_resource::concurrent_location_creates_are_all_kept,
        location_resource::a_location_is_found_edited_and_removed_by_its_id,
        sites::an_active_site_holds_its_address_alone,
        sites::posts_are_stored_and_listed_newest_first,
        site_addresses::of_concurrent_creates_at_one_host_one_account_wins,
    );
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

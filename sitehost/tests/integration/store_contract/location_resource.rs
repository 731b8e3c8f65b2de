//! Locations by id (`/api/v2/locations/`): found from their id alone, in their account
//! only; one location added, changed or removed by an edit applied in the business's own
//! write, so edits that run at once all survive; the business's nested locations are the
//! same records.

use std::collections::BTreeSet;

use sitehost::domain::business::{BusinessPatch, NewBusiness};
use sitehost::domain::location::edit::parse_update;
use sitehost::domain::location::{LocationEdit, LocationFields, NewLocation};
use sitehost::store::SharedStore;
use sitehost::ApiError;

use super::fixtures::{account, new_business, DAY1, DAY2};

fn named(name: &str) -> LocationFields {
    LocationFields {
        location_name: Some(name.into()),
        city: Some("San Diego".into()),
        ..Default::default()
    }
}

fn edit(edit: LocationEdit) -> BusinessPatch {
    BusinessPatch {
        location_edit: Some(edit),
        ..Default::default()
    }
}

// Reads better whole: one location from its create to its removal, each step from the last.
pub async fn a_location_is_found_edited_and_removed_by_its_id(store: SharedStore) {
    let a = account(&store, "acme").await;
    let other = account(&store, "other").await;
    let created = store
        .create_business(
            a,
            NewBusiness {
                locations: vec![NewLocation {
                    id: None,
                    fields: named("Harbour"),
                    hours_given: false,
                }],
                ..new_business("Joe's Bikes")
            },
            DAY1,
        )
        .await
        .expect("create_business");
    let business = created.business.id;
    let nested = created.locations[0].id;
    assert_eq!(created.locations[0].added, Some(DAY1));
    // A nested location is found by its id, in its account only.
    assert_eq!(
        store.location_business(a, nested).await.expect("find"),
        Some(business)
    );
    assert_eq!(
        store.location_business(other, nested).await.expect("find"),
        None
    );
    assert_eq!(
        store
            .location_business(a, nested + 10_000)
            .await
            .expect("find"),
        None
    );

    // Added through the resource: a new id, last of the business's, found by id, and
    // shown by the business's detail.
    let added = store
        .update_business(
            a,
            business,
            None,
            edit(LocationEdit::Add(named("Bay"))),
            DAY2,
        )
        .await
        .expect("add")
        .expect("the business exists");
    let new_id = added.locations.last().map(|l| l.id).unwrap_or_default();
    assert!(new_id > 0 && new_id != nested);
    assert_eq!(added.locations.len(), 2);
    assert_eq!(added.locations[1].added, Some(DAY2));
    assert_eq!(
        store.location_business(a, new_id).await.expect("find"),
        Some(business)
    );
    let detail = store
        .get_business_detail(a, business)
        .await
        .expect("detail");
    assert_eq!(detail.as_ref().map(|d| d.locations.len()), Some(2));

    // An update changes what it names; the hours types it gives replace those types.
    let body = serde_json::json!({"location_name": "Harbour Front", "hours": [
        {"type": "primary", "hours": [[["09:00", "17:00"]], [], [], [], [], [], ["24_HOURS"]]}
    ]});
    let patch = parse_update(body.as_object().expect("object"), nested, business).expect("patch");
    let updated = store
        .update_business(
            a,
            business,
            None,
            edit(LocationEdit::Update(nested, patch)),
            DAY2,
        )
        .await
        .expect("update")
        .expect("the business exists");
    let harbour = &updated.locations[0];
    assert_eq!(
        harbour.fields.location_name.as_deref(),
        Some("Harbour Front")
    );
    assert_eq!(harbour.fields.city.as_deref(), Some("San Diego"));
    assert_eq!(
        harbour.fields.hours_by_type["primary"][0],
        serde_json::json!([["09:00:00", "17:00:00"]])
    );
    assert_eq!((harbour.added, harbour.modified), (Some(DAY1), Some(DAY2)));
    // A nested replace that gives no hours keeps them (older partner code).
    let replaced = store
        .update_business(
            a,
            business,
            None,
            BusinessPatch {
                locations: Some(vec![NewLocation {
                    id: Some(nested),
                    fields: named("Harbour Again"),
                    hours_given: false,
                }]),
                ..Default::default()
            },
            DAY2,
        )
        .await
        .expect("replace")
        .expect("the business exists");
    assert_eq!(replaced.locations.len(), 1);
    assert_eq!(
        replaced.locations[0].fields.hours_by_type,
        harbour.fields.hours_by_type
    );

    // Removed: gone from the business, and an edit of it is a 404 that writes nothing.
    let removed = store
        .update_business(a, business, None, edit(LocationEdit::Remove(nested)), DAY2)
        .await
        .expect("remove")
        .expect("the business exists");
    assert!(removed.locations.is_empty());
    let again = store
        .update_business(a, business, None, edit(LocationEdit::Remove(nested)), DAY2)
        .await;
    assert!(matches!(again, Err(ApiError::NotFound(_))), "{again:?}");
    // Another account cannot edit it: its business is not there.
    let foreign = store
        .update_business(
            other,
            business,
            None,
            edit(LocationEdit::Add(named("X"))),
            DAY2,
        )
        .await
        .expect("update");
    assert_eq!(foreign, None);
    // A restricted key of another sub id sees no business.
    let hidden = store
        .update_business(
            a,
            business,
            Some("north"),
            edit(LocationEdit::Add(named("X"))),
            DAY2,
        )
        .await
        .expect("update");
    assert_eq!(hidden, None);
    let (businesses, locations) = store.backfill_location_pointers().await.expect("backfill");
    assert_eq!((businesses, locations), (0, 0));
}

/// Twelve locations added to one business at once: every one is kept, each with its own
/// id, as one business's writes race (the DynamoDB store re-reads and re-applies).
pub async fn concurrent_location_creates_are_all_kept(store: SharedStore) {
    let a = account(&store, "acme").await;
    let business = store
        .create_business(a, new_business("Busy"), DAY1)
        .await
        .expect("create_business")
        .business
        .id;
    let writes = (0..12).map(|i| {
        let store = store.clone();
        tokio::spawn(async move {
            store
                .update_business(
                    a,
                    business,
                    None,
                    edit(LocationEdit::Add(named(&format!("Shop {i}")))),
                    DAY2,
                )
                .await
        })
    });
    let mut added = BTreeSet::new();
    for write in writes {
        let detail = write
            .await
            .expect("join")
            .expect("add")
            .expect("the business exists");
        added.insert(detail.locations.last().map(|l| l.id).unwrap_or_default());
    }
    assert_eq!(added.len(), 12);
    let detail = store
        .get_business_detail(a, business)
        .await
        .expect("detail")
        .expect("the business exists");
    let ids: BTreeSet<i64> = detail.locations.iter().map(|l| l.id).collect();
    assert_eq!(ids, added);
    for id in ids {
        assert_eq!(
            store.location_business(a, id).await.expect("find"),
            Some(business)
        );
    }
}

/// DynamoDB only: a table whose businesses got locations before locations had pointers.
/// Their ids find nothing until `backfill_location_pointers`, which a second run repeats
/// harmlessly.
#[tokio::test]
async fn backfill_points_to_locations_written_before_pointers() {
    use aws_sdk_dynamodb::types::AttributeValue;
    use sitehost::store::dynamo::DynamoStore;
    let Some(table) = crate::support::TestTable::create().await else {
        return;
    };
    let store: SharedStore =
        std::sync::Arc::new(DynamoStore::new(table.client.clone(), table.name.clone()));
    let a = account(&store, "acme").await;
    let locations = ["One", "Two"].map(|name| NewLocation {
        id: None,
        fields: named(name),
        hours_given: false,
    });
    let created = store
        .create_business(
            a,
            NewBusiness {
                locations: locations.to_vec(),
                ..new_business("Older")
            },
            DAY1,
        )
        .await
        .expect("create_business");
    for location in &created.locations {
        table
            .client
            .delete_item()
            .table_name(&table.name)
            .key("pk", AttributeValue::S(format!("LOCATION#{}", location.id)))
            .key("sk", AttributeValue::S("LOCATION".into()))
            .send()
            .await
            .expect("delete the pointer");
        assert_eq!(
            store.location_business(a, location.id).await.expect("find"),
            None
        );
    }
    for _ in 0..2 {
        let counted = store.backfill_location_pointers().await.expect("backfill");
        assert_eq!(counted, (1, 2));
    }
    for location in &created.locations {
        assert_eq!(
            store.location_business(a, location.id).await.expect("find"),
            Some(created.business.id)
        );
    }
    table.delete().await;
}

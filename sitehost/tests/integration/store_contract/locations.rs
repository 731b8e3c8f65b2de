//! A business's services and locations: kept with it, read back on its detail, replaced
//! by updates (ids kept where the update names them), never seen by another account.

use sitehost::domain::business::{BusinessPatch, NewBusiness};
use sitehost::domain::location::{
    LocationFields, NewLocation, Phone, MAX_LOCATIONS, MAX_LOCATIONS_BYTES, MAX_TEXT_CHARS,
};
use sitehost::store::SharedStore;

use super::fixtures::{account, all, list, new_business, total, DAY1, DAY2};
use sitehost::domain::business::BusinessOrder;

fn at(city: &str) -> LocationFields {
    LocationFields {
        location_name: Some(format!("{city} shop")),
        city: Some(city.into()),
        ..Default::default()
    }
}

fn given(id: Option<i64>, fields: LocationFields) -> NewLocation {
    NewLocation {
        id,
        fields,
        hours_given: false,
    }
}

// Reads better whole: most of it is one business's services and locations written out.
pub async fn services_and_locations_are_stored_with_their_own_ids(store: SharedStore) {
    let a = account(&store, "acme").await;
    let other = account(&store, "other").await;
    let harbour = LocationFields {
        partner_location_id: Some("loc-1".into()),
        location_name: Some("Harbour".into()),
        street: Some("1 Quay St".into()),
        street2: Some("Unit 4".into()),
        city: Some("San Diego".into()),
        state: Some("CA".into()),
        postal_code: Some("92101".into()),
        country: Some("US".into()),
        lat: Some(32.7157),
        lon: Some(-117.1611),
        phones: vec![
            Phone {
                kind: Some("main".into()),
                number: "(619) 555-0100".into(),
            },
            Phone {
                kind: None,
                number: "+1 619 555 0101".into(),
            },
        ],
        description: Some("By the water.\nOpen late.".into()),
        contact_email: Some("harbour@example.com".into()),
        ..Default::default()
    };
    let new = NewBusiness {
        services: vec!["Repairs".into(), "Rentals".into()],
        locations: vec![
            // A create ignores the ids it is given.
            given(Some(424_242), harbour.clone()),
            given(None, at("Oceanside")),
        ],
        ..new_business("Joe's Bikes")
    };
    let created = store
        .create_business(a, new, DAY1)
        .await
        .expect("create_business");
    let ids: Vec<i64> = created.locations.iter().map(|l| l.id).collect();
    assert_eq!(ids.len(), 2);
    assert!(ids[0] > 0 && ids[1] > 0 && ids[0] != ids[1], "{ids:?}");
    assert!(!ids.contains(&424_242));
    assert_eq!(created.locations[0].fields, harbour);
    assert_eq!(created.services, ["Repairs", "Rentals"]);
    let id = created.business.id;
    let read = store.get_business_detail(a, id).await.expect("detail");
    assert_eq!(read.as_ref(), Some(&created));
    assert_eq!(
        store.get_business(a, id).await.expect("get"),
        Some(created.business.clone())
    );
    assert_eq!(
        store.get_business_detail(other, id).await.expect("detail"),
        None
    );
    assert_eq!(
        store
            .get_business_detail(a, id + 1000)
            .await
            .expect("detail"),
        None
    );

    // Ids are unique across businesses; a business without any reads as empty lists.
    let second = store
        .create_business(
            a,
            NewBusiness {
                locations: vec![given(None, at("Escondido"))],
                ..new_business("Second")
            },
            DAY1,
        )
        .await
        .expect("create_business");
    assert!(!ids.contains(&second.locations[0].id));
    let bare = store
        .create_business(a, new_business("Bare"), DAY1)
        .await
        .expect("create_business");
    let bare_read = store
        .get_business_detail(a, bare.business.id)
        .await
        .expect("detail");
    assert_eq!(
        bare_read
            .as_ref()
            .map(|d| (d.services.len(), d.locations.len())),
        Some((0, 0))
    );
    // Lists are unchanged by what only the detail holds.
    assert_eq!(total(&store, a, all()).await, 3);
    let page = list(&store, a, all(), BusinessOrder::IdAsc, 0, 10).await;
    assert_eq!(page.items[0], created.business);
}

// Reads better whole: one business's lists through its updates, each from the state the last left.
pub async fn updates_replace_services_and_locations(store: SharedStore) {
    let a = account(&store, "acme").await;
    let created = store
        .create_business(
            a,
            NewBusiness {
                services: vec!["Repairs".into()],
                locations: vec![given(None, at("Alpha")), given(None, at("Beta"))],
                ..new_business("Shop")
            },
            DAY1,
        )
        .await
        .expect("create_business");
    let id = created.business.id;
    let (alpha, beta) = (created.locations[0].id, created.locations[1].id);
    let other = store
        .create_business(
            a,
            NewBusiness {
                locations: vec![given(None, at("Elsewhere"))],
                ..new_business("Other")
            },
            DAY1,
        )
        .await
        .expect("create_business");
    let theirs = other.locations[0].id;
    let update = |patch: BusinessPatch, now: i64| {
        let store = store.clone();
        async move {
            store
                .update_business(a, id, None, patch, now)
                .await
                .expect("update_business")
                .expect("the business exists")
        }
    };

    // A patch without them leaves them as they are.
    let renamed = update(
        BusinessPatch {
            business_name: Some("Shop 2".into()),
            ..Default::default()
        },
        DAY1 + 10,
    )
    .await;
    assert_eq!(
        (renamed.services, renamed.locations),
        (created.services.clone(), created.locations.clone())
    );

    // Replace: Beta keeps its id with new fields, Alpha goes, another business's location
    // id and no id both get new ids.
    let replaced = update(
        BusinessPatch {
            services: Some(vec!["Rentals".into(), "Tours".into()]),
            locations: Some(vec![
                given(Some(beta), at("Beta moved")),
                given(Some(theirs), at("Gamma")),
                given(None, at("Delta")),
            ]),
            ..Default::default()
        },
        DAY2,
    )
    .await;
    let ids: Vec<i64> = replaced.locations.iter().map(|l| l.id).collect();
    assert_eq!(ids[0], beta);
    assert!(![alpha, beta, theirs].contains(&ids[1]), "{ids:?}");
    assert!(![alpha, beta, theirs, ids[1]].contains(&ids[2]), "{ids:?}");
    assert_eq!(replaced.locations[0].fields, at("Beta moved"));
    assert_eq!(replaced.services, ["Rentals", "Tours"]);
    assert_eq!(replaced.business.modified, DAY2);
    assert_eq!(
        store.get_business_detail(a, id).await.expect("detail"),
        Some(replaced.clone())
    );
    // The other business keeps its location.
    assert_eq!(
        store
            .get_business_detail(a, other.business.id)
            .await
            .expect("detail"),
        Some(other)
    );

    // Sending back what was read changes nothing, not even `modified`.
    let same: Vec<NewLocation> = replaced
        .locations
        .iter()
        .map(|l| given(Some(l.id), l.fields.clone()))
        .collect();
    let unchanged = update(
        BusinessPatch {
            services: Some(replaced.services.clone()),
            locations: Some(same),
            ..Default::default()
        },
        DAY2 + 50,
    )
    .await;
    assert_eq!(unchanged, replaced);

    // Empty lists clear them.
    let cleared = update(
        BusinessPatch {
            services: Some(Vec::new()),
            locations: Some(Vec::new()),
            ..Default::default()
        },
        DAY2 + 60,
    )
    .await;
    assert!(cleared.services.is_empty() && cleared.locations.is_empty());
    assert_eq!(cleared.business.modified, DAY2 + 60);
    assert_eq!(
        store.get_business_detail(a, id).await.expect("detail"),
        Some(cleared)
    );
}

/// The most a business may hold (50 locations, just under the stored-size bound) is kept
/// whole by both stores: on DynamoDB it is one item far under 400 KB.
pub async fn the_largest_locations_are_kept(store: SharedStore) {
    let a = account(&store, "acme").await;
    let per_location = MAX_LOCATIONS_BYTES / MAX_LOCATIONS - 200;
    let text = |c: char| c.to_string().repeat(MAX_TEXT_CHARS);
    let locations: Vec<NewLocation> = (0..MAX_LOCATIONS)
        .map(|i| {
            let mut fields = LocationFields {
                street: Some(text('é')),
                street2: Some(text('ß')),
                city: Some(text('ü')),
                phones: vec![
                    Phone {
                        kind: Some("main".into()),
                        number: format!("{i}"),
                    };
                    10
                ],
                ..Default::default()
            };
            let used = serde_json::to_vec(&fields).map(|v| v.len()).unwrap_or(0);
            fields.description = Some("d".repeat(per_location.saturating_sub(used + 20)));
            given(None, fields)
        })
        .collect();
    let created = store
        .create_business(
            a,
            NewBusiness {
                services: (0..50)
                    .map(|i| format!("{i:03}{}", "s".repeat(252)))
                    .collect(),
                locations,
                ..new_business("Large")
            },
            DAY1,
        )
        .await
        .expect("create_business");
    assert_eq!(created.locations.len(), MAX_LOCATIONS);
    let read = store
        .get_business_detail(a, created.business.id)
        .await
        .expect("detail");
    assert_eq!(read, Some(created));
}

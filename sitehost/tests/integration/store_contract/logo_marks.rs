//! DynamoDB only: `mark_existing_logos`, the one-off pass for businesses written before
//! images carried logo marks. An unmarked logo (as such a business left it) can be deleted
//! from under its business; after the pass the delete is a 409 naming the business, a
//! business whose logo is gone is reported, and a second pass changes nothing.

use std::sync::Arc;

use aws_sdk_dynamodb::types::AttributeValue;
use sitehost::domain::business::NewBusiness;
use sitehost::store::dynamo::{DynamoStore, LogoMarks};
use sitehost::store::SharedStore;
use sitehost::ApiError;

use super::fixtures::{account, create, image, new_business, new_image, DAY1};
use crate::support;

/// Takes an image's logo marks away, as they were before marks existed.
async fn unmark(table: &support::TestTable, image: i64) {
    table
        .client
        .update_item()
        .table_name(&table.name)
        .key("pk", AttributeValue::S(format!("IMAGE#{image}")))
        .key("sk", AttributeValue::S("IMAGE".into()))
        .update_expression("REMOVE logo_of")
        .send()
        .await
        .expect("REMOVE logo_of");
}

#[tokio::test]
async fn existing_logos_are_marked_so_their_images_cannot_be_deleted() {
    let Some(table) = support::TestTable::create().await else {
        return;
    };
    let dynamo = Arc::new(DynamoStore::new(table.client.clone(), table.name.clone()));
    let store: SharedStore = dynamo.clone();
    let a = account(&store, "acme").await;
    let logo = image(&store, a, new_image("img/upload/l.jpg", None, None), DAY1).await;
    let lost = image(&store, a, new_image("img/upload/g.jpg", None, None), DAY1).await;
    let with_logo = |name: &str, logo: i64| NewBusiness {
        logo_image_id: Some(logo),
        ..new_business(name)
    };
    let old = create(&store, a, with_logo("Old", logo.id), DAY1).await;
    let orphaned = create(&store, a, with_logo("Orphaned", lost.id), DAY1).await;
    create(&store, a, new_business("No logo"), DAY1).await;
    unmark(&table, logo.id).await;
    unmark(&table, lost.id).await;
    // Without its mark, the image of an old business's logo could be deleted: this one is,
    // leaving "Orphaned" pointing at an image that is gone.
    store
        .delete_image(a, lost.id, None)
        .await
        .expect("an unmarked logo is deleted");

    let found = dynamo.mark_existing_logos().await.expect("marks");
    assert_eq!(
        found,
        LogoMarks {
            businesses: 2,
            marked: 1,
            changed: 0,
            missing: vec![(orphaned.id, lost.id)],
        }
    );
    match store.delete_image(a, logo.id, None).await {
        Err(ApiError::StateConflict(message)) => {
            assert!(message.contains(&old.id.to_string()), "{message}")
        }
        other => panic!("expected a 409 for the marked logo, got {other:?}"),
    }
    // Idempotent: the same findings, nothing else written.
    assert_eq!(dynamo.mark_existing_logos().await.expect("again"), found);
    table.delete().await;
}

//! Past DynamoDB's capacity the API answers 503 with `Retry-After`, never 500, and writes
//! nothing: shown on the DynamoDB double with a partition throughput far below what one
//! create needs, so every transaction is cancelled for throttling however often it is sent.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use sitehost::clock::{Clock, SystemClock};
use sitehost::config::RequestBudgets;
use sitehost::domain::account::NewKey;
use sitehost::domain::business::{BusinessFilter, BusinessOrder, BusinessQuery, NewBusiness};
use sitehost::error::ApiError;
use sitehost::store::dynamo::DynamoStore;
use sitehost::store::{SharedStore, Stores};

use crate::support;
use crate::support::app::TestApp;

// Reads better whole: one throttled table on moto; a split costs a table each.
#[tokio::test]
async fn a_throttled_partition_answers_503_with_retry_after_and_writes_nothing() {
    // One write unit a second, and a bucket of one: every transactional write (2 units at
    // least) is over it, single writes of one unit pass now and then.
    let model = dynamo_double::Model {
        partition_wcu_per_sec: 1.0,
        burst_secs: 1.0,
        ..Default::default()
    };
    let Some((table, double_client, double)) = support::double::table_behind_double(model).await
    else {
        return;
    };
    let busy: SharedStore = Arc::new(DynamoStore::new(double_client, table.name.clone()));
    // Keys and the checks afterwards go to moto directly.
    let direct: SharedStore = Arc::new(DynamoStore::new(table.client.clone(), table.name.clone()));
    let account = direct.ensure_account("busy").await.expect("account");

    let new = NewBusiness {
        business_name: "Refused".into(),
        partner_business_id: None,
        partner_sub_id: None,
        category_id: None,
        logo_image_id: None,
        user_id: 1,
        ..Default::default()
    };
    let refused = busy
        .create_business(account.id, new, SystemClock.now())
        .await;
    match refused {
        Err(ApiError::Unavailable {
            retry_after_secs, ..
        }) => assert_eq!(retry_after_secs, 1),
        other => panic!("expected 503, got {other:?}"),
    }

    let key = direct
        .create_key(NewKey::generate(account.id, None, None, SystemClock.now()))
        .await
        .expect("key");
    let server = TestApp::builder()
        .stores(Stores {
            records: busy,
            files: None,
        })
        .config(|config| {
            config.budgets = RequestBudgets {
                requests_per_minute: 0,
                uploads_per_minute: 0,
            }
        })
        .spawn()
        .await;
    let client = server.partner_client(&key);
    let reply = tokio::time::timeout(
        Duration::from_secs(60),
        client.post(
            "/api/v2/businesses/",
            &json!({"business_name": "Also refused"}),
        ),
    )
    .await
    .expect("answered in time")
    .expect("reply");
    assert_eq!(reply.status, 503, "{}", reply.body);
    assert_eq!(
        reply
            .headers
            .get("retry-after")
            .and_then(|v| v.to_str().ok()),
        Some("1")
    );
    let message = reply.body["error"].as_str().expect("an error message");
    assert!(message.contains("nothing was changed"), "{message}");

    let stats = double.stats();
    assert!(stats.throttled_transactions >= 10, "{stats:?}");
    let listed = direct
        .list_businesses(
            account.id,
            &BusinessQuery {
                filter: BusinessFilter::default(),
                order: BusinessOrder::IdAsc,
                limit: 20,
                offset: 0,
            },
        )
        .await
        .expect("list");
    assert_eq!((listed.items.len(), listed.total_count), (0, 0));
    table.delete().await;
}

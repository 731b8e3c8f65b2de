//! Request budgets: draws per key, kind and minute window, alone and at once.

use sitehost::store::{BudgetDecision, BudgetKind, SharedStore};

/// The start of a budget window (a multiple of 60).
const WINDOW: i64 = 1_700_000_040;

async fn draw(
    store: &SharedStore,
    key: &str,
    kind: BudgetKind,
    limit: u64,
    now: i64,
) -> BudgetDecision {
    draw_many(store, key, kind, limit, 1, now).await
}

async fn draw_many(
    store: &SharedStore,
    key: &str,
    kind: BudgetKind,
    limit: u64,
    tokens: u64,
    now: i64,
) -> BudgetDecision {
    store
        .consume_budget(key, kind, limit, tokens, now)
        .await
        .expect("consume_budget")
}

/// A draw of several tokens (a write paying for its bytes) is all or nothing: refused, it
/// leaves what is left to smaller draws, also when a large budget is drawn in chunks.
pub async fn a_draw_of_many_tokens_is_all_or_nothing(store: SharedStore) {
    use BudgetDecision::{Admitted, Refused};
    use BudgetKind::Requests;
    let many = |key: &'static str, limit: u64, tokens: u64, second: i64| {
        let store = store.clone();
        async move { draw_many(&store, key, Requests, limit, tokens, WINDOW + second).await }
    };
    assert_eq!(many("m", 10, 6, 0).await, Admitted);
    assert_eq!(many("m", 10, 6, 1).await, Refused { retry_after: 59 });
    assert_eq!(many("m", 10, 4, 2).await, Admitted);
    assert_eq!(many("m", 10, 1, 3).await, Refused { retry_after: 57 });
    // 4,000 a minute: single draws take chunks of 1, 2, 4, 8 tokens.
    assert_eq!(many("big", 4_000, 1, 0).await, Admitted);
    assert_eq!(many("big", 4_000, 3_990, 1).await, Admitted);
    assert_eq!(many("big", 4_000, 20, 2).await, Refused { retry_after: 58 });
    let mut singles = 0;
    while many("big", 4_000, 1, 3).await == Admitted {
        singles += 1;
        assert!(singles <= 9, "more than the limit admitted");
    }
    assert_eq!(singles, 9, "exactly the limit is admitted in all");
}

pub async fn a_budget_admits_its_limit_per_key_kind_and_window(store: SharedStore) {
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

pub async fn concurrent_draws_admit_exactly_the_budget(store: SharedStore) {
    let tasks: Vec<_> = (0..20)
        .map(|i| {
            let store = store.clone();
            tokio::spawn(async move {
                store
                    .consume_budget("busy", BudgetKind::Requests, 10, 1, WINDOW + 5 + i % 3)
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

/// A large budget is drawn in chunks (on DynamoDB): still exactly the limit is admitted, and
/// a smaller limit in the next window is not overrun by tokens left from this one.
pub async fn large_budgets_admit_exactly_their_limit(store: SharedStore) {
    // Over 2,000 a minute: chunks of 2 tokens (sitehost/src/store/dynamo/budgets.rs).
    let limit: u64 = 2_000;
    let mut admitted = 0;
    // Waves of 100 at once: enough to race, few enough that none waits past the SDK's
    // timeouts behind the tests' one-request-at-a-time moto client.
    for wave in 0..(limit as i64 + 40) / 100 + 1 {
        let tasks: Vec<_> = (0..100)
            .map(|i| {
                let store = store.clone();
                tokio::spawn(async move {
                    store
                        .consume_budget(
                            "large",
                            BudgetKind::Requests,
                            limit,
                            1,
                            WINDOW + (wave + i) % 50,
                        )
                        .await
                })
            })
            .collect();
        for task in tasks {
            if task.await.expect("task").expect("consume_budget") == BudgetDecision::Admitted {
                admitted += 1;
            }
        }
    }
    assert_eq!(admitted, limit, "exactly the budget is admitted");
    let mut next_window = 0;
    for second in 0..5 {
        if draw(
            &store,
            "large",
            BudgetKind::Requests,
            2,
            WINDOW + 60 + second,
        )
        .await
            == BudgetDecision::Admitted
        {
            next_window += 1;
        }
    }
    assert_eq!(next_window, 2);
}

/// Through the app, on either store: a replay is refused before it spends the key's budget,
/// and once a key is over its budget, a refusal calls the store for the key alone (on
/// DynamoDB one `GetItem`): only the first refusal of the window recorded its nonce and
/// drew on the budget.
pub async fn refusals_and_replays_through_the_app(store: SharedStore, probe: &super::RowProbe) {
    use crate::support::app::TestApp;
    use sitehost::auth::oauth1;
    use sitehost::config::RequestBudgets;
    use sitehost::domain::account::NewKey;
    use sitehost::store::Stores;

    let now = WINDOW + 15;
    let account = store.ensure_account("replayed").await.expect("account");
    let key = store
        .create_key(NewKey::generate(account.id, None, None, now))
        .await
        .expect("key");
    let app = TestApp::builder()
        .stores(Stores {
            records: store,
            files: None,
        })
        .config(|config| {
            config.budgets = RequestBudgets {
                requests_per_minute: 3,
                uploads_per_minute: 1,
            }
        })
        .clock(now)
        .build()
        .await;
    let uri = "http://127.0.0.1:3000/api/v2/businesses/";
    let signed = |nonce: &str| {
        oauth1::authorization_header("GET", uri, &[], &key.key, &key.secret, now, nonce)
    };
    let send = |authorization: String| {
        let request = http::Request::get(uri)
            .header("host", "127.0.0.1:3000")
            .header("authorization", authorization)
            .body(bytes::Bytes::new())
            .expect("request");
        let app = &app;
        async move { app.handle(request).await.status().as_u16() }
    };
    assert_eq!(send(signed("first")).await, 200);
    for _ in 0..20 {
        assert_eq!(send(signed("first")).await, 401, "a replay");
    }
    for nonce in ["second", "third"] {
        assert_eq!(send(signed(nonce)).await, 200, "the replays spent nothing");
    }
    probe.arm();
    for i in 0..20 {
        assert_eq!(send(signed(&format!("over-{i}"))).await, 429);
    }
    if let Some(calls) = probe.calls() {
        let beyond_the_key: Vec<_> = calls.iter().filter(|c| *c != "GetItem").collect();
        assert_eq!(
            beyond_the_key,
            ["PutItem", "UpdateItem"],
            "the first refusal's nonce and budget draw, nothing after: {calls:?}"
        );
        assert_eq!(calls.len(), 22, "{calls:?}");
    }
}

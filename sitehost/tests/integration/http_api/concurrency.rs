//! Requests at the same time: distinct ids, fetch slots shared between accounts, and a write
//! waiting on SQLite that stalls no one else.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use sitehost::config::ServerLimits;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::create;
use crate::support;
use crate::support::app::TestApp;

#[tokio::test]
async fn concurrent_creates_get_distinct_ids() {
    let server = TestApp::spawn().await;
    let client = server.client("agency", None).await;
    let tasks: Vec<_> = (0..50)
        .map(|i| {
            let client = client.clone();
            tokio::spawn(async move {
                create(&client, json!({"business_name": format!("b{i}")})).await["id"].as_i64()
            })
        })
        .collect();
    let mut ids = Vec::new();
    for task in tasks {
        ids.push(task.await.expect("task").expect("id"));
    }
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 50);
    assert_eq!(
        client.get("/api/v2/businesses/").await.expect("list").body["meta"]["total_count"],
        50
    );
}

/// A URL server that takes each request and answers 404 only when told to, so an upload
/// fetching from it holds its fetch slot for as long as the test wants.
async fn held_url_server() -> (
    String,
    tokio::sync::mpsc::Receiver<()>,
    Arc<tokio::sync::Notify>,
) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (arrived, arrivals) = tokio::sync::mpsc::channel(8);
    let release = Arc::new(tokio::sync::Notify::new());
    let released = Arc::clone(&release);
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let arrived = arrived.clone();
            let released = Arc::clone(&released);
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = stream.read(&mut buf).await;
                let _ = arrived.send(()).await;
                released.notified().await;
                let _ = stream
                    .write_all(
                        b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                    )
                    .await;
            });
        }
    });
    (addr.to_string(), arrivals, release)
}

/// A server with one pipeline slot and `max_fetches` fetch slots, and a `held_url_server`
/// its partners may fetch from.
struct HeldFetches {
    server: TestApp,
    /// An upload body whose fetch reaches the URL server and waits there until released.
    held_upload: Value,
    arrivals: tokio::sync::mpsc::Receiver<()>,
    release: Arc<tokio::sync::Notify>,
}

async fn held_fetches(max_fetches: usize) -> HeldFetches {
    let (url_host, arrivals, release) = held_url_server().await;
    let limits = ServerLimits {
        max_uploads: 1,
        max_fetches,
        upload_wait: Duration::from_millis(300),
        ..ServerLimits::default()
    };
    let server = TestApp::builder()
        .config(|config| {
            config.server = limits;
            config.fetch.allow_hosts = vec![url_host.clone()];
        })
        .spawn()
        .await;
    HeldFetches {
        server,
        held_upload: json!({"external_url": format!("http://{url_host}/held.png"), "site_id": 1}),
        arrivals,
        release,
    }
}

/// Slow fetches hold fetch slots only: with one pipeline slot, another account's upload
/// still runs at once while one key's two uploads wait on a slow host; that key's third
/// fetch is a 429 (an account holds a quarter of the fetch slots).
#[tokio::test]
async fn a_slow_fetch_holds_no_upload_slot_and_one_account_a_share_of_the_fetches() {
    let HeldFetches {
        server,
        held_upload: body,
        mut arrivals,
        release,
    } = held_fetches(8).await;
    let slow = server.client("slow", None).await;
    let mut holders = Vec::new();
    for _ in 0..2 {
        let (client, body) = (slow.clone(), body.clone());
        holders.push(tokio::spawn(async move {
            client.post("/api/v2/images/", &body).await
        }));
        tokio::time::timeout(Duration::from_secs(5), arrivals.recv())
            .await
            .expect("the upload reached the URL server");
    }
    let third = slow.post("/api/v2/images/", &body).await.expect("third");
    assert_eq!(third.status, 429, "{}", third.body);
    assert_eq!(third.headers["retry-after"], "15");
    assert_eq!(
        third.body,
        json!({"error": "This account has 2 image fetches in progress, as many as it may; retry when one has ended."})
    );

    let other = server.client("other", None).await;
    let started = Instant::now();
    let png = support::media::b64(&support::media::png(10, 10));
    let uploaded = other
        .post(
            "/api/v2/images/",
            &json!({"upload": {"name": "dot.png", "file": png}, "site_id": 1}),
        )
        .await
        .expect("other account's upload");
    assert_eq!(uploaded.status, 201, "{}", uploaded.body);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "it did not wait on the slow fetches: {:?}",
        started.elapsed()
    );

    release.notify_waiters();
    for holder in holders {
        let answer = holder.await.expect("task").expect("held upload");
        assert_eq!(answer.status, 400, "{}", answer.body);
        assert!(answer.body["external_url"][0]
            .as_str()
            .is_some_and(|m| m.contains("404")));
    }
}

/// Past every fetch slot, the answer is a 503 at once, not a wait.
#[tokio::test]
async fn uploads_past_every_fetch_slot_get_503_at_once() {
    let HeldFetches {
        server,
        held_upload: body,
        mut arrivals,
        release,
    } = held_fetches(2).await;
    let mut holders = Vec::new();
    for account in ["a", "b"] {
        let client = server.client(account, None).await;
        let body = body.clone();
        holders.push(tokio::spawn(async move {
            client.post("/api/v2/images/", &body).await
        }));
        tokio::time::timeout(Duration::from_secs(5), arrivals.recv())
            .await
            .expect("the upload reached the URL server");
    }
    let client = server.client("c", None).await;
    let started = Instant::now();
    let refused = client.post("/api/v2/images/", &body).await.expect("third");
    assert_eq!(refused.status, 503, "{}", refused.body);
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(refused.headers["retry-after"], "2");
    assert_eq!(
        refused.body,
        json!({"error": "The server is fetching as many images as it allows (2); retry in a moment."})
    );
    // Uploads of content fetch nothing and are not bounded by fetch slots.
    let png = support::media::b64(&support::media::png(4, 4));
    let uploaded = client
        .post(
            "/api/v2/images/",
            &json!({"upload": {"name": "dot.png", "file": png}, "site_id": 1}),
        )
        .await
        .expect("content upload");
    assert_eq!(uploaded.status, 201, "{}", uploaded.body);
    release.notify_waiters();
    for holder in holders {
        assert_eq!(holder.await.expect("task").expect("held").status, 400);
    }
}

/// On a runtime with one worker, a write stuck behind another process's SQLite write lock
/// (as `sitehost keys` may hold it) must not stop other requests from being served.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_write_waiting_on_sqlite_does_not_stall_other_requests() {
    let server = TestApp::spawn().await;
    let client = server.client("agency", None).await;
    create(&client, json!({"business_name": "First"})).await;

    let blocker = rusqlite::Connection::open(server.dir().join("sitehost.db")).expect("open db");
    blocker
        .execute_batch("BEGIN IMMEDIATE")
        .expect("take the write lock");
    let writing = {
        let client = client.clone();
        tokio::spawn(async move {
            client
                .post("/api/v2/businesses/", &json!({"business_name": "Second"}))
                .await
        })
    };
    // This test's body runs outside the runtime's worker, so blocking it here is fine and
    // does not depend on the worker being free.
    std::thread::sleep(Duration::from_millis(500));
    let reading = {
        let client = client.clone();
        tokio::spawn(async move { client.get("/api/v2/businesses/").await })
    };
    let started = Instant::now();
    while !reading.is_finished() && started.elapsed() < Duration::from_secs(3) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let read_while_write_waited = reading.is_finished() && !writing.is_finished();
    blocker
        .execute_batch("COMMIT")
        .expect("release the write lock");

    let read = reading.await.expect("task").expect("list");
    let written = writing.await.expect("task").expect("create");
    assert!(
        read_while_write_waited,
        "the list waited for the blocked write (it took {:?})",
        started.elapsed()
    );
    assert_eq!(read.status, 200);
    assert_eq!(read.body["meta"]["total_count"], 1);
    assert_eq!(written.status, 201, "{}", written.body);
}

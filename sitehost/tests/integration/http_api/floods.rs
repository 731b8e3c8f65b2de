//! Floods no key stands behind (issue 45): unsigned form bodies and staged forms trickling
//! in, and slow signed bodies. Small and short (a shared machine): `scripts/bench-serve-hostile`
//! runs them at full size and measures memory.

use std::time::Duration;

use serde_json::{json, Value};
use sitehost::config::ServerLimits;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use super::slow_clients::{read_until_closed, signed_business_post, trickle};
use crate::support::app::TestApp;

const CAP: usize = 32;

fn capped() -> ServerLimits {
    ServerLimits {
        max_connections: CAP,
        ..ServerLimits::default()
    }
}

/// Signed GETs from `server`'s "agency" client, 100 ms apart: how many of `requests` were
/// answered 200.
async fn signed_answers(server: &TestApp, requests: usize) -> usize {
    let client = server.client("agency", None).await;
    let mut answered = 0;
    for _ in 0..requests {
        match client.get("/api/v2/businesses/").await {
            Ok(reply) if reply.status == 200 => answered += 1,
            Ok(reply) => eprintln!("{} {}", reply.status, reply.body),
            Err(err) => eprintln!("{err}"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    answered
}

/// `count` sockets, each sending `head` then a byte every `every`, and opening again when
/// the server closes it; abort the tasks to stop.
fn trickling_flood(
    addr: &str,
    count: usize,
    head: impl Fn() -> String + Send + Sync + Clone + 'static,
    every: Duration,
) -> Vec<tokio::task::JoinHandle<()>> {
    (0..count)
        .map(|_| {
            let (addr, head) = (addr.to_string(), head.clone());
            tokio::spawn(async move {
                loop {
                    let Ok(mut stream) = TcpStream::connect(&addr).await else {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        continue;
                    };
                    if stream.write_all(head().as_bytes()).await.is_ok() {
                        let (reader, writer) = stream.into_split();
                        let writing = trickle(writer, vec![b'a'; 4096], every);
                        let _ = read_until_closed(reader, Duration::from_secs(120)).await;
                        writing.abort();
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            })
        })
        .collect()
}

/// 48 sockets against a cap of 32, each sending an unsigned form-encoded body a byte a
/// second (read before the signature is checked, as a form's parameters are signed): a
/// signed client still gets its answers, because a request not yet admitted is evicted
/// when no connection waits for a head. Before: every slot held, the client got 503s.
#[tokio::test]
async fn unsigned_form_bodies_trickling_at_the_cap_do_not_lock_out_a_signed_client() {
    let server = TestApp::builder()
        .config(|config| config.server = capped())
        .spawn()
        .await;
    let host = server.addr().to_string();
    let head = move || {
        format!(
            "POST /api/v2/businesses/ HTTP/1.1\r\nHost: {host}\r\n\
             Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 4000\r\n\r\n"
        )
    };
    let flood = trickling_flood(server.addr(), CAP + CAP / 2, head, Duration::from_secs(1));
    tokio::time::sleep(Duration::from_millis(500)).await;
    let requests = 40;
    let answered = signed_answers(&server, requests).await;
    flood.iter().for_each(|task| task.abort());
    eprintln!("signed client: {answered} of {requests} answered 200");
    assert!(answered * 100 >= requests * 95, "{answered} of {requests}");
}

/// A key holder's JSON body trickling in is cut once it falls behind the minimum pace
/// (after the grace), not at the whole body deadline (60 s).
#[tokio::test]
async fn a_signed_body_below_the_minimum_pace_is_cut_after_the_grace() {
    let server = TestApp::spawn().await;
    let (reader, writer) = signed_business_post(&server, 2000).await;
    let writing = trickle(writer, vec![b' '; 1900], Duration::from_millis(200));
    let (answer, closed_after) = read_until_closed(reader, Duration::from_secs(20)).await;
    writing.abort();
    let closed_after = closed_after.expect("the server never closed the slow connection");
    let grace = sitehost::server::paced_body::GRACE;
    assert!(
        closed_after < grace + Duration::from_secs(3),
        "{closed_after:?}"
    );
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("slower than 16 KiB a second"), "{answer}");
}

/// A staged upload session of `size` bytes from the "agency" key: its answer.
async fn session(server: &TestApp, size: usize) -> Value {
    let started = server
        .post(
            "/api/v2/images/uploads/",
            &json!({"name": "a.jpg", "size": size}),
        )
        .await
        .expect("session");
    assert_eq!(started.status, 201, "{}", started.body);
    started.body
}

const BOUNDARY: &str = "----sitehost-flood-boundary";

/// The head of a form post of `session` announcing `len` more bytes, and the form's start
/// (its `key` field when `with_key`, then the file's part header).
fn form_start(host: &str, session: &Value, len: usize, with_key: bool) -> (String, String) {
    let url = session["url"].as_str().expect("url");
    let path = &url[url.find("/staging/").expect("a form on the server")..];
    let key = session["fields"]["key"].as_str().expect("key");
    let key_part = if with_key {
        format!("--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"key\"\r\n\r\n{key}\r\n")
    } else {
        String::new()
    };
    let start = format!(
        "{key_part}--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; \
         filename=\"a.jpg\"\r\n\r\n"
    );
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {host}\r\n\
         Content-Type: multipart/form-data; boundary={BOUNDARY}\r\n\
         Content-Length: {}\r\n\r\n",
        start.len() + len
    );
    (head, start)
}

/// Sends a whole form of `session` with `file` on a new connection: the answer's text.
async fn post_whole(server: &TestApp, session: &Value, file: &[u8], with_key: bool) -> String {
    let end = format!("\r\n--{BOUNDARY}--\r\n");
    let (head, start) = form_start(server.addr(), session, file.len() + end.len(), with_key);
    let mut stream = TcpStream::connect(server.addr()).await.expect("connect");
    let mut request = [head.as_bytes(), start.as_bytes(), file, end.as_bytes()].concat();
    request.splice(head.len() - 2..head.len() - 2, *b"Connection: close\r\n");
    stream.write_all(&request).await.expect("post");
    let (reader, _writer) = stream.into_split();
    read_until_closed(reader, Duration::from_secs(10)).await.0
}

/// A form post started and left hanging after `sent` bytes of its file: its connection.
async fn poststalled(server: &TestApp, session: &Value, sent: usize) -> TcpStream {
    let size = session["max_bytes"].as_u64().expect("size") as usize;
    let (head, start) = form_start(server.addr(), session, size + 64, true);
    let mut stream = TcpStream::connect(server.addr()).await.expect("connect");
    let request = [head.as_bytes(), start.as_bytes(), &vec![b'x'; sent]].concat();
    stream.write_all(&request).await.expect("post");
    stream
}

/// One post per session at a time, claimed before its body is read: a second post while
/// the first is arriving is a 409 at once; the file goes to a temporary file on disk as it
/// arrives (never whole to memory); at most `max_forms` forms are received at once (503).
#[tokio::test]
async fn staged_forms_are_claimed_streamed_to_disk_and_capped() {
    let server = TestApp::builder()
        .config(|config| config.server = capped())
        .caller("agency", Some(5))
        .spawn()
        .await;
    let size = 200_000;
    let first = session(&server, size).await;
    let stalled = poststalled(&server, &first, 100_000).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let second = post_whole(&server, &first, &vec![b'y'; 1000], true).await;
    assert!(second.starts_with("HTTP/1.1 409"), "{second}");
    assert!(second.contains("being posted"), "{second}");
    // What arrived of the first is on disk already.
    let incoming: Vec<_> = std::fs::read_dir(server.dir().join("incoming"))
        .expect("the incoming directory")
        .flatten()
        .map(|entry| entry.metadata().expect("meta").len())
        .collect();
    assert_eq!(incoming.len(), 1, "{incoming:?}");
    assert!(incoming[0] >= 50_000, "{incoming:?}");

    // The cap: max_forms(32) forms at once, then 503 with Retry-After.
    let cap = sitehost::server::staged_form::max_forms(CAP);
    let mut held = Vec::new();
    for _ in 1..cap {
        let other = session(&server, size).await;
        held.push(poststalled(&server, &other, 10).await);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let over = session(&server, 10).await;
    let refused = post_whole(&server, &over, b"0123456789", true).await;
    assert!(refused.starts_with("HTTP/1.1 503"), "{refused}");
    assert!(refused.contains("retry-after: 5"), "{refused}");
    // A post given up on gives its claim back, and its temporary file goes.
    drop(held);
    drop(stalled);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let again = post_whole(&server, &first, &vec![b'z'; size], true).await;
    assert!(again.starts_with("HTTP/1.1 204"), "{again}");
    let left = std::fs::read_dir(server.dir().join("incoming"))
        .expect("dir")
        .count();
    assert_eq!(left, 0);
}

/// The form's `key` field is required, as S3's policy requires it: a form without it is a
/// 400 naming `key`, and partner code that forgets it fails locally as it would deployed.
#[tokio::test]
async fn a_staged_form_without_its_key_is_refused() {
    let server = TestApp::builder().caller("agency", Some(5)).spawn().await;
    let started = session(&server, 10).await;
    let refused = post_whole(&server, &started, b"0123456789", false).await;
    assert!(refused.starts_with("HTTP/1.1 400"), "{refused}");
    assert!(refused.contains("\"key\""), "{refused}");
    let accepted = post_whole(&server, &started, b"0123456789", true).await;
    assert!(accepted.starts_with("HTTP/1.1 204"), "{accepted}");
}

/// Behind `SITEHOST_ORIGIN_VERIFY`, the staged form is refused without the secret, as
/// every API request is.
#[tokio::test]
async fn the_staged_form_is_behind_the_origin_check() {
    let secret = "s3cr3t-origin-value-for-tests-0123456789";
    let server = TestApp::builder()
        .config(|config| config.origin_verify = sitehost::config::OriginSecret::new(secret))
        .caller("agency", Some(5))
        .spawn()
        .await;
    let upload_id = "0123456789abcdef0123456789abcdef";
    let fake = json!({
        "url": format!("{}/staging/{upload_id}", server.base()),
        "fields": {"key": format!("staging/{upload_id}")},
    });
    let refused = post_whole(&server, &fake, b"0123456789", true).await;
    assert!(refused.starts_with("HTTP/1.1 403"), "{refused}");
}

/// 48 slow posts of one session's form against a cap of 32: one is claimed, the others are
/// answered 409 at once, and a signed client gets its answers. Before: every post was read
/// (and buffered) at once, and the signed client got 503s.
#[tokio::test]
async fn slow_staged_forms_of_one_session_do_not_lock_out_a_signed_client() {
    let server = TestApp::builder()
        .config(|config| config.server = capped())
        .caller("agency", Some(5))
        .spawn()
        .await;
    let started = session(&server, 1_000_000).await;
    let host = server.addr().to_string();
    let head = move || {
        let (head, start) = form_start(&host, &started, 1_000_000, true);
        head + &start
    };
    let flood = trickling_flood(server.addr(), CAP + CAP / 2, head, Duration::from_secs(1));
    tokio::time::sleep(Duration::from_millis(500)).await;
    let requests = 40;
    let answered = signed_answers(&server, requests).await;
    flood.iter().for_each(|task| task.abort());
    eprintln!("signed client: {answered} of {requests} answered 200");
    assert!(answered * 100 >= requests * 95, "{answered} of {requests}");
}

/// A form body is read before the signature is checked only when it may carry the
/// signature, or the head's own signature parameters are whole and fresh: a stale
/// `Authorization` header is a 401 at once, the body announced never read.
#[tokio::test]
async fn a_form_body_under_a_stale_signature_is_refused_from_its_head() {
    let server = TestApp::spawn().await;
    let stream = TcpStream::connect(server.addr()).await.expect("connect");
    let (reader, mut writer) = stream.into_split();
    let head = format!(
        "POST /api/v2/businesses/ HTTP/1.1\r\nHost: {}\r\n\
         Authorization: OAuth oauth_consumer_key=\"k\", oauth_nonce=\"n\", \
         oauth_signature=\"s\", oauth_signature_method=\"HMAC-SHA1\", \
         oauth_timestamp=\"1\", oauth_version=\"1.0\"\r\n\
         Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 4000\r\n\r\n",
        server.addr()
    );
    writer.write_all(head.as_bytes()).await.expect("head");
    let (answer, closed_after) = read_until_closed(reader, Duration::from_secs(8)).await;
    assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
    assert!(answer.contains("oauth_timestamp"), "{answer}");
    assert!(
        closed_after.is_some_and(|t| t < Duration::from_secs(2)),
        "{closed_after:?}"
    );
    drop(writer);
}

/// docs/security.md states the guards' figures as the code has them.
#[test]
fn the_security_doc_states_the_guards_figures() {
    use sitehost::server::paced_body::{GRACE, MIN_BYTES_PER_SEC, UNSIGNED_BODY_TIMEOUT};
    use sitehost::server::staged_form::{MAX_FORMS, STAGED_FILE_KEPT_SECS, SWEEP_EVERY};
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/security.md");
    let doc = std::fs::read_to_string(path).expect("docs/security.md");
    let doc = doc.split_whitespace().collect::<Vec<_>>().join(" ");
    for fact in [
        format!("after a grace of {} s", GRACE.as_secs()),
        format!("at {} KiB a second on average", MIN_BYTES_PER_SEC / 1024),
        format!("has {} s in all", UNSIGNED_BODY_TIMEOUT.as_secs()),
        format!("At most {MAX_FORMS} forms"),
        format!(
            "({} minutes; no create can use one then), every {} minutes",
            STAGED_FILE_KEPT_SECS / 60,
            SWEEP_EVERY.as_secs() / 60
        ),
    ] {
        assert!(doc.contains(&fact), "docs/security.md does not say: {fact}");
    }
}

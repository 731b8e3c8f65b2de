//! Slow and idle clients: header, body and write timeouts, and the connection cap.

use std::time::{Duration, Instant};

use sitehost::config::ServerLimits;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::app::TestApp;

/// Limits small enough for a test to see them act within a few seconds.
fn short_limits() -> ServerLimits {
    ServerLimits {
        header_timeout: Duration::from_secs(1),
        body_timeout: Duration::from_secs(1),
        ..ServerLimits::default()
    }
}

/// Opens a signed `POST /api/v2/businesses/` declaring a JSON body of `content_length`
/// bytes and sends its head and the body's first 18 bytes: the connection's halves, for the
/// test to trickle the rest and read the answer.
pub(super) async fn signed_business_post(
    server: &TestApp,
    content_length: usize,
) -> (
    tokio::net::tcp::OwnedReadHalf,
    tokio::net::tcp::OwnedWriteHalf,
) {
    let key = server.key("agency").await;
    // Signed: an unsigned request is refused from its head, before any body is read.
    let authorization = sitehost::client::PartnerClient::new(server.base(), &key.key, &key.secret)
        .authorization("POST", "/api/v2/businesses/");
    let stream = TcpStream::connect(server.addr()).await.expect("connect");
    let (reader, mut writer) = stream.into_split();
    let head = format!(
        "POST /api/v2/businesses/ HTTP/1.1\r\nHost: {}\r\nAuthorization: {authorization}\r\n\
         Content-Type: application/json\r\nContent-Length: {content_length}\r\n\r\n\
         {{\"business_name\": ",
        server.addr()
    );
    writer.write_all(head.as_bytes()).await.expect("head");
    (reader, writer)
}

/// Writes `bytes` one at a time, `every` apart, ignoring errors once the server has hung up.
pub(super) fn trickle(
    mut writer: tokio::net::tcp::OwnedWriteHalf,
    bytes: Vec<u8>,
    every: Duration,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        for byte in bytes {
            if writer.write_all(&[byte]).await.is_err() {
                return;
            }
            tokio::time::sleep(every).await;
        }
    })
}

/// Reads until the server closes the connection (or `limit` passes): what it sent, and
/// when it hung up (`None` if it did not within `limit`).
pub(super) async fn read_until_closed(
    mut reader: tokio::net::tcp::OwnedReadHalf,
    limit: Duration,
) -> (String, Option<Duration>) {
    let started = Instant::now();
    let mut received = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let left = limit.saturating_sub(started.elapsed());
        match tokio::time::timeout(left, reader.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => {
                return (
                    String::from_utf8_lossy(&received).into_owned(),
                    Some(started.elapsed()),
                )
            }
            Ok(Ok(n)) => received.extend_from_slice(&buf[..n]),
            Err(_) => return (String::from_utf8_lossy(&received).into_owned(), None),
        }
    }
}

#[tokio::test]
async fn a_client_trickling_its_headers_is_cut_off_at_the_header_timeout() {
    let server = TestApp::builder()
        .config(|config| config.server = short_limits())
        .spawn()
        .await;
    let stream = TcpStream::connect(server.addr()).await.expect("connect");
    let (reader, writer) = stream.into_split();
    // One byte every 300 ms: always "making progress", never finishing the head.
    let head = format!(
        "GET /api/v2/businesses/ HTTP/1.1\r\nHost: {}\r\nX-Padding: {}\r\n\r\n",
        server.addr(),
        "x".repeat(64)
    );
    let writing = trickle(writer, head.into_bytes(), Duration::from_millis(300));
    let (answer, closed_after) = read_until_closed(reader, Duration::from_secs(8)).await;
    writing.abort();
    let closed_after = closed_after.expect("the server never closed the slow connection");
    // 1 s timeout; the rest is scheduling slack on a busy machine.
    assert!(
        closed_after < Duration::from_secs(4),
        "closed only after {closed_after:?}"
    );
    assert!(
        answer.is_empty() || answer.starts_with("HTTP/1.1 408"),
        "{answer}"
    );
}

#[tokio::test]
async fn a_client_trickling_its_body_gets_408_at_the_body_timeout() {
    let server = TestApp::builder()
        .config(|config| config.server = short_limits())
        .spawn()
        .await;
    let (reader, writer) = signed_business_post(&server, 200).await;
    let writing = trickle(writer, vec![b' '; 180], Duration::from_millis(300));
    let (answer, closed_after) = read_until_closed(reader, Duration::from_secs(8)).await;
    writing.abort();
    let closed_after = closed_after.expect("the server never closed the slow connection");
    assert!(
        closed_after < Duration::from_secs(4),
        "closed only after {closed_after:?}"
    );
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(
        answer.to_ascii_lowercase().contains("connection: close"),
        "{answer}"
    );
    assert!(
        answer.ends_with("{\"error\":\"The request body was not received within 1 s.\"}"),
        "{answer}"
    );
    // Nothing was created, and the server still serves others.
    let client = server.client("agency", None).await;
    let list = client.get("/api/v2/businesses/").await.expect("list");
    assert_eq!(list.status, 200);
    assert_eq!(list.body["meta"]["total_count"], 0);
}

/// An unsigned request's body is never read: it is refused from its head at once, even
/// while the body it announces (7 MiB) has not been sent.
#[tokio::test]
async fn an_unsigned_request_is_refused_before_its_body_is_read() {
    let server = TestApp::spawn().await;
    let stream = TcpStream::connect(server.addr()).await.expect("connect");
    let (reader, mut writer) = stream.into_split();
    let head = format!(
        "POST /api/v2/images/ HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{{\"upload\": ",
        server.addr(),
        7 * 1024 * 1024 - 1
    );
    writer.write_all(head.as_bytes()).await.expect("head");
    let (answer, closed_after) = read_until_closed(reader, Duration::from_secs(5)).await;
    assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
    let closed_after = closed_after.expect("the server closed the connection");
    assert!(closed_after < Duration::from_secs(2), "{closed_after:?}");
    assert!(answer.contains("connection: close"), "{answer}");
    drop(writer);
}

/// At `max_connections`, a new connection evicts the open one that has waited longest for a
/// request head; only when every open connection is mid-request is it answered 503 at once
/// and closed, so a flood cannot leave the server out of descriptors.
#[tokio::test]
async fn connections_past_the_cap_evict_the_longest_idle_or_are_answered_503() {
    let limits = ServerLimits {
        max_connections: 4,
        ..ServerLimits::default()
    };
    let server = TestApp::builder()
        .config(|config| config.server = limits)
        .spawn()
        .await;
    let key = server.key("agency").await;
    let partner = sitehost::client::PartnerClient::new(server.base(), &key.key, &key.secret);
    // Idle: the first of four is closed when a fifth arrives, and the fifth is served.
    let mut idle = Vec::new();
    for _ in 0..4 {
        idle.push(TcpStream::connect(server.addr()).await.expect("connect"));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let fifth = TcpStream::connect(server.addr()).await.expect("connect");
    let (oldest, _oldest_writer) = idle.remove(0).into_split();
    let (answer, closed_after) = read_until_closed(oldest, Duration::from_secs(5)).await;
    assert_eq!(
        answer, "",
        "an evicted connection is closed without an answer"
    );
    assert!(closed_after.is_some_and(|t| t < Duration::from_secs(2)));
    let (reader, mut writer) = fifth.into_split();
    let get = format!(
        "GET /api/v2/images/ HTTP/1.1\r\nHost: {}\r\nAuthorization: {}\r\nConnection: close\r\n\r\n",
        server.addr(),
        partner.authorization("GET", "/api/v2/images/")
    );
    writer.write_all(get.as_bytes()).await.expect("request");
    let (answer, _) = read_until_closed(reader, Duration::from_secs(5)).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    drop(idle);
    tokio::time::sleep(Duration::from_millis(200)).await;

    // Mid-request (signed heads whose bodies never come): a new connection gets 503.
    let mut busy = Vec::new();
    for _ in 0..4 {
        let mut stream = TcpStream::connect(server.addr()).await.expect("connect");
        let head = format!(
            "POST /api/v2/businesses/ HTTP/1.1\r\nHost: {}\r\nAuthorization: {}\r\n\
             Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{{",
            server.addr(),
            partner.authorization("POST", "/api/v2/businesses/")
        );
        stream.write_all(head.as_bytes()).await.expect("head");
        busy.push(stream);
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let probe = TcpStream::connect(server.addr()).await.expect("connect");
    let (reader, _writer) = probe.into_split();
    let (answer, closed_after) = read_until_closed(reader, Duration::from_secs(5)).await;
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(answer.contains("retry-after: 1"), "{answer}");
    assert!(closed_after.is_some_and(|t| t < Duration::from_secs(2)));
    // A connection given back serves again.
    drop(busy.pop());
    tokio::time::sleep(Duration::from_millis(200)).await;
    let client = server.client("agency", None).await;
    assert_eq!(
        client.get("/api/v2/images/").await.expect("list").status,
        200
    );
}

/// One client holding every connection slot with idle sockets (and re-opening each one the
/// server closes) cannot lock a signed client out: a new connection at the cap evicts the
/// connection that has waited longest for a request head.
#[tokio::test]
async fn idle_sockets_at_the_cap_do_not_lock_out_a_signed_client() {
    const CAP: usize = 32;
    let limits = ServerLimits {
        max_connections: CAP,
        ..short_limits()
    };
    let server = TestApp::builder()
        .config(|config| config.server = limits)
        .spawn()
        .await;
    let client = server.client("agency", None).await;
    let addr = server.addr().to_string();
    // More idle sockets than the cap, each opened again as soon as the server closes it.
    let flood: Vec<_> = (0..CAP + CAP / 2)
        .map(|_| {
            let addr = addr.clone();
            tokio::spawn(async move {
                loop {
                    let Ok(mut stream) = TcpStream::connect(&addr).await else {
                        tokio::time::sleep(Duration::from_millis(5)).await;
                        continue;
                    };
                    let mut buf = [0u8; 512];
                    while matches!(stream.read(&mut buf).await, Ok(n) if n > 0) {}
                    // A moment before re-opening, so the flood does not spin a core.
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut answered = 0;
    let requests = 50;
    for _ in 0..requests {
        match client.get("/api/v2/businesses/").await {
            Ok(reply) if reply.status == 200 => answered += 1,
            Ok(reply) => eprintln!("{} {}", reply.status, reply.body),
            Err(err) => eprintln!("{err}"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for task in flood {
        task.abort();
    }
    eprintln!("signed client: {answered} of {requests} answered 200");
    assert!(
        answered * 100 >= requests * 95,
        "only {answered} of {requests} answered 200"
    );
}

/// Stored files are streamed, and a client that stops reading is dropped after the write
/// timeout: it holds neither the file nor the connection.
#[tokio::test]
async fn a_client_that_stops_reading_a_file_is_dropped_at_the_write_timeout() {
    let limits = ServerLimits {
        write_timeout: Duration::from_secs(1),
        ..ServerLimits::default()
    };
    let server = TestApp::builder()
        .config(|config| config.server = limits)
        .spawn()
        .await;
    let size = 16 * 1024 * 1024;
    let dir = server.dir().join("files/img/upload");
    std::fs::create_dir_all(&dir).expect("dir");
    std::fs::write(dir.join("big--1.jpg"), vec![0u8; size]).expect("file");

    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    socket
        .set_recv_buffer_size(4096)
        .expect("small receive buffer");
    let addr = server.addr().parse().expect("addr");
    let stream = socket.connect(addr).await.expect("connect");
    let (reader, mut writer) = stream.into_split();
    let request = format!(
        "GET /img/upload/big--1.jpg HTTP/1.1\r\nHost: {}\r\n\r\n",
        server.addr()
    );
    writer.write_all(request.as_bytes()).await.expect("request");
    // Read nothing for three write timeouts.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (answer, closed_after) = read_until_closed(reader, Duration::from_secs(10)).await;
    assert!(
        answer.starts_with("HTTP/1.1 200"),
        "{}",
        &answer[..answer.len().min(300)]
    );
    let head = &answer[..answer.find("\r\n\r\n").unwrap_or(answer.len())];
    assert!(head.contains(&format!("content-length: {size}")), "{head}");
    assert!(head.contains("x-content-type-options: nosniff"), "{head}");
    assert!(
        closed_after.is_some(),
        "the server still held the connection"
    );
    assert!(
        answer.len() < size,
        "the stalled client was dropped before the end"
    );
}

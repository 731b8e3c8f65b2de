//! Fetcher tests against tiny HTTP servers on 127.0.0.1. Allowlisting goes through the
//! config (never the environment) so tests running in parallel cannot race.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::*;

/// Starts a server that reads one request per connection and hands its path to
/// `handler` together with the stream. Ends with the test's runtime.
async fn serve<F, Fut>(handler: F) -> SocketAddr
where
    F: Fn(String, TcpStream) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("local addr");
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let handler = handler.clone();
            tokio::spawn(async move {
                if let Some(path) = read_request(&mut stream).await {
                    handler(path, stream).await;
                }
            });
        }
    });
    addr
}

/// Reads the request head (bounded) and returns the path of its request line.
async fn read_request(stream: &mut TcpStream) -> Option<String> {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut buf).await.ok()?;
        if n == 0 || head.len() > 16 * 1024 {
            return None;
        }
        head.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&head);
    text.split_whitespace().nth(1).map(str::to_owned)
}

async fn respond(mut stream: TcpStream, status: &str, headers: &[(&str, &str)], body: &[u8]) {
    let mut head = format!(
        "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    let _ = stream.write_all(head.as_bytes()).await;
    let _ = stream.write_all(body).await;
    let _ = stream.shutdown().await;
}

/// A server answering 200 with a PNG-ish body, counting the requests it saw.
async fn counting_ok_server() -> (SocketAddr, Arc<AtomicU64>) {
    let hits = Arc::new(AtomicU64::new(0));
    let counter = hits.clone();
    let addr = serve(move |_path, stream| {
        let counter = counter.clone();
        async move {
            counter.fetch_add(1, Ordering::SeqCst);
            respond(stream, "200 OK", &[("Content-Type", "image/png")], b"png").await;
        }
    })
    .await;
    (addr, hits)
}

/// Short limits so the suite stays fast; `allow` entries are exempt from the check.
fn config(allow: &[String]) -> FetchConfig {
    FetchConfig {
        allow_hosts: allow.to_vec(),
        max_bytes: 256 * 1024,
        connect_timeout: Duration::from_secs(1),
        total_timeout: Duration::from_secs(2),
        max_redirects: 3,
    }
}

fn allow(addr: SocketAddr) -> Vec<String> {
    vec![format!("127.0.0.1:{}", addr.port())]
}

fn fetcher_for(addr: SocketAddr) -> Fetcher {
    Fetcher::new(config(&allow(addr))).expect("fetcher")
}

/// The single `external_url` message of a 400, or a panic naming what came instead.
fn message_400(result: Result<Fetched>) -> String {
    match result {
        Err(ApiError::Validation(fields)) => {
            let messages = fields.get(FIELD).expect("error on external_url");
            messages.join(" ")
        }
        Err(other) => panic!("expected a 400, got {other:?}"),
        Ok(fetched) => panic!("expected a 400, fetched {}", fetched.final_url),
    }
}

#[tokio::test]
async fn plain_200_returns_body_content_type_and_final_url() {
    let addr = serve(|path, stream| async move {
        assert_eq!(path, "/img.png?sig=abc");
        respond(
            stream,
            "200 OK",
            &[("Content-Type", "image/png")],
            b"\x89PNG body",
        )
        .await;
    })
    .await;
    let url = format!("http://127.0.0.1:{}/img.png?sig=abc", addr.port());
    let fetched = fetcher_for(addr).fetch(&url).await.expect("fetched");
    assert_eq!(&fetched.bytes[..], b"\x89PNG body");
    assert_eq!(fetched.content_type.as_deref(), Some("image/png"));
    assert_eq!(fetched.final_url, url);
}

/// `/r/N` redirects to `/r/N-1` (relative and absolute Locations alternate); `/r/0` is 200.
async fn redirect_chain_server() -> SocketAddr {
    serve(|path, stream| async move {
        let n: u32 = path
            .strip_prefix("/r/")
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        if n == 0 {
            respond(stream, "200 OK", &[], b"done").await;
            return;
        }
        let port = stream.local_addr().map(|a| a.port()).unwrap_or(0);
        let location = if n.is_multiple_of(2) {
            format!("/r/{}", n - 1)
        } else {
            format!("http://127.0.0.1:{port}/r/{}", n - 1)
        };
        let status = [
            "301 Moved Permanently",
            "302 Found",
            "307 Temporary Redirect",
        ][(n % 3) as usize];
        respond(stream, status, &[("Location", &location)], b"").await;
    })
    .await
}

#[tokio::test]
async fn one_to_three_redirects_are_followed() {
    let addr = redirect_chain_server().await;
    let fetcher = fetcher_for(addr);
    for n in 1..=3 {
        let url = format!("http://127.0.0.1:{}/r/{n}", addr.port());
        let fetched = fetcher.fetch(&url).await.expect("fetched after redirects");
        assert_eq!(&fetched.bytes[..], b"done");
        assert_eq!(
            fetched.final_url,
            format!("http://127.0.0.1:{}/r/0", addr.port())
        );
    }
}

#[tokio::test]
async fn a_fourth_redirect_is_refused() {
    let addr = redirect_chain_server().await;
    let url = format!("http://127.0.0.1:{}/r/4", addr.port());
    let msg = message_400(fetcher_for(addr).fetch(&url).await);
    assert!(msg.contains("redirected more than 3 times"), "{msg}");
}

#[tokio::test]
async fn redirect_without_location_is_400() {
    let addr = serve(|_path, stream| async move {
        respond(stream, "302 Found", &[], b"").await;
    })
    .await;
    let url = format!("http://127.0.0.1:{}/", addr.port());
    let msg = message_400(fetcher_for(addr).fetch(&url).await);
    assert!(msg.contains("without a valid Location"), "{msg}");
}

#[tokio::test]
async fn slow_server_times_out_with_a_message() {
    let addr = serve(|_path, stream| async move {
        tokio::time::sleep(Duration::from_secs(30)).await;
        respond(stream, "200 OK", &[], b"late").await;
    })
    .await;
    assert_times_out(addr, Duration::from_secs(1), "timed out after 1 s").await;
}

/// A fetch from `addr` with a `total_timeout` fails with a 400 saying `expected`, in time.
async fn assert_times_out(addr: SocketAddr, total_timeout: Duration, expected: &str) {
    let fetcher = Fetcher::new(FetchConfig {
        total_timeout,
        ..config(&allow(addr))
    })
    .expect("fetcher");
    let started = Instant::now();
    let msg = message_400(
        fetcher
            .fetch(&format!("http://127.0.0.1:{}/", addr.port()))
            .await,
    );
    assert!(msg.contains(expected), "{msg}");
    assert!(started.elapsed() < Duration::from_secs(3));
}

#[tokio::test]
async fn trickling_body_counts_against_the_total_timeout() {
    let addr = serve(|_path, mut stream| async move {
        let head = "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n";
        if stream.write_all(head.as_bytes()).await.is_err() {
            return;
        }
        // One byte every 100 ms: each read is fast, the whole is not.
        for _ in 0..1000 {
            if stream.write_all(b"x").await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    assert_times_out(addr, Duration::from_millis(800), "timed out after 800 ms").await;
}

#[tokio::test]
async fn endless_body_is_cut_at_the_cap_with_413() {
    let written = Arc::new(AtomicU64::new(0));
    let counter = written.clone();
    let addr = serve(move |_path, mut stream| {
        let counter = counter.clone();
        async move {
            // No Content-Length: the body ends when the connection does, i.e. never.
            let head = "HTTP/1.1 200 OK\r\nContent-Type: image/png\r\nConnection: close\r\n\r\n";
            if stream.write_all(head.as_bytes()).await.is_err() {
                return;
            }
            let chunk = vec![b'x'; 16 * 1024];
            // Bounded only as a safety net for a broken fetcher (1 GiB).
            for _ in 0..65_536 {
                if stream.write_all(&chunk).await.is_err() {
                    return;
                }
                counter.fetch_add(chunk.len() as u64, Ordering::SeqCst);
            }
        }
    })
    .await;
    let started = Instant::now();
    let result = fetcher_for(addr)
        .fetch(&format!("http://127.0.0.1:{}/", addr.port()))
        .await;
    let elapsed = started.elapsed();
    match result {
        Err(ApiError::TooLarge(msg)) => assert_eq!(
            msg,
            "The file at external_url is over the limit of 262,144 bytes (262.1 KB)."
        ),
        other => panic!("expected 413, got {other:?}"),
    }
    assert!(elapsed < Duration::from_secs(1), "took {elapsed:?}");
    // Give the server a moment to notice the closed connection, then check it was cut
    // off near the cap (plus socket buffers), not allowed to stream on.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let sent = written.load(Ordering::SeqCst);
    assert!(sent < 32 * 1024 * 1024, "server wrote {sent} bytes");
}

#[tokio::test]
async fn announced_content_length_over_the_cap_is_refused_before_reading() {
    let addr = serve(|_path, mut stream| async move {
        let head = "HTTP/1.1 200 OK\r\nContent-Length: 10000000000\r\n\r\n";
        let _ = stream.write_all(head.as_bytes()).await;
        // Send nothing more: only the header can have caused the refusal.
        tokio::time::sleep(Duration::from_secs(30)).await;
    })
    .await;
    let fetcher = Fetcher::new(FetchConfig {
        total_timeout: Duration::from_secs(5),
        ..config(&allow(addr))
    })
    .expect("fetcher");
    let started = Instant::now();
    let result = fetcher
        .fetch(&format!("http://127.0.0.1:{}/", addr.port()))
        .await;
    assert!(matches!(result, Err(ApiError::TooLarge(_))), "{result:?}");
    assert!(started.elapsed() < Duration::from_secs(1));
}

#[tokio::test]
async fn streamed_body_at_the_cap_passes_and_one_byte_more_is_413() {
    let addr = serve(|path, mut stream| async move {
        let len: usize = path.trim_start_matches('/').parse().unwrap_or(0);
        // Close-delimited body, so only the streaming check can catch it.
        let head = "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n";
        let _ = stream.write_all(head.as_bytes()).await;
        let _ = stream.write_all(&vec![b'y'; len]).await;
        let _ = stream.shutdown().await;
    })
    .await;
    let fetcher = fetcher_for(addr);
    let cap = fetcher.config().max_bytes;
    let at_cap = fetcher
        .fetch(&format!("http://127.0.0.1:{}/{cap}", addr.port()))
        .await
        .expect("a body of exactly the cap");
    assert_eq!(at_cap.bytes.len() as u64, cap);
    let over = fetcher
        .fetch(&format!("http://127.0.0.1:{}/{}", addr.port(), cap + 1))
        .await;
    assert!(matches!(over, Err(ApiError::TooLarge(_))), "{over:?}");
}

#[tokio::test]
async fn non_2xx_answers_are_400_with_the_status() {
    let addr = serve(|path, stream| async move {
        let status = if path == "/missing" {
            "404 Not Found"
        } else {
            "500 Internal Server Error"
        };
        respond(stream, status, &[], b"secret body text").await;
    })
    .await;
    let fetcher = fetcher_for(addr);
    for (path, want) in [("missing", "404 Not Found"), ("boom", "500")] {
        let url = format!("http://127.0.0.1:{}/{path}", addr.port());
        let msg = message_400(fetcher.fetch(&url).await);
        assert!(msg.contains(want), "{msg}");
        assert!(!msg.contains("secret"), "body leaked into {msg}");
    }
}

#[tokio::test]
async fn connection_refused_is_400_could_not_be_fetched() {
    // Bind then drop to get a port nobody listens on.
    let addr = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind")
        .local_addr()
        .expect("addr");
    let msg = message_400(
        fetcher_for(addr)
            .fetch(&format!("http://127.0.0.1:{}/", addr.port()))
            .await,
    );
    assert!(msg.contains("could not be fetched"), "{msg}");
}

#[tokio::test]
async fn loopback_literals_are_refused_without_the_allowlist() {
    let (addr, hits) = counting_ok_server().await;
    let port = addr.port();
    let fetcher = Fetcher::new(config(&[])).expect("fetcher");
    // All of these are 127.0.0.1 (or ::1) once the URL parser has normalised them.
    for host in [
        "127.0.0.1",
        "127.1",
        "2130706433",
        "0x7f000001",
        "0x7f.0.0.1",
        "0177.0.0.1",
        "[::1]",
        "[::ffff:127.0.0.1]",
        "[::ffff:7f00:1]",
    ] {
        let msg = message_400(fetcher.fetch(&format!("http://{host}:{port}/")).await);
        assert!(msg.contains("not allowed"), "{host}: {msg}");
        assert!(msg.contains("only public addresses"), "{host}: {msg}");
    }
    assert_eq!(
        hits.load(Ordering::SeqCst),
        0,
        "a refused URL reached the server"
    );
}

#[tokio::test]
async fn a_name_resolving_to_loopback_is_refused() {
    // Port 80 (a name is vetted at resolution, after the port check): were the check
    // missing, the fetch would fail to connect instead, with another message.
    let fetcher = Fetcher::new(config(&[])).expect("fetcher");
    let msg = message_400(fetcher.fetch("http://localhost/").await);
    assert!(
        msg.contains("host localhost is not allowed (loopback)"),
        "{msg}"
    );
}

#[tokio::test]
async fn the_allowlist_exempts_only_the_listed_host_and_port() {
    let (listed, _) = counting_ok_server().await;
    let (other, other_hits) = counting_ok_server().await;
    let fetcher = fetcher_for(listed);
    fetcher
        .fetch(&format!("http://127.0.0.1:{}/", listed.port()))
        .await
        .expect("listed host:port is fetched");
    let msg = message_400(
        fetcher
            .fetch(&format!("http://127.0.0.1:{}/", other.port()))
            .await,
    );
    assert!(msg.contains("not allowed"), "{msg}");
    assert_eq!(other_hits.load(Ordering::SeqCst), 0);

    // A bare host entry covers every port; names are matched case-insensitively.
    let config = FetchConfig::from_values(Some(" LOCALHOST , [::1]:8080"), None).expect("config");
    assert!(config.allows("localhost", 1234));
    assert!(config.allows("[::1]", 8080));
    assert!(!config.allows("[::1]", 8081));
    assert!(!config.allows("127.0.0.1", 80));
}

#[tokio::test]
async fn redirects_from_an_allowlisted_server_to_private_targets_are_refused() {
    let (other, other_hits) = counting_ok_server().await;
    let addr = serve(move |path, stream| async move {
        let location = match path.as_str() {
            "/to-other-port" => format!("http://127.0.0.1:{}/", other.port()),
            // Port 80: a name is vetted at resolution, after the port check.
            "/to-localhost" => "http://localhost/".to_string(),
            "/to-mapped" => format!("http://[::ffff:127.0.0.1]:{}/", other.port()),
            "/to-file" => "file:///etc/passwd".to_string(),
            _ => "/".to_string(),
        };
        respond(stream, "302 Found", &[("Location", &location)], b"").await;
    })
    .await;
    let fetcher = fetcher_for(addr);
    for (path, want) in [
        ("to-other-port", "(loopback)"),
        ("to-localhost", "host localhost is not allowed (loopback)"),
        ("to-mapped", "IPv4-mapped"),
        ("to-file", "scheme \"file\""),
    ] {
        let url = format!("http://127.0.0.1:{}/{path}", addr.port());
        let msg = message_400(fetcher.fetch(&url).await);
        assert!(msg.contains(want), "{path}: {msg}");
    }
    assert_eq!(other_hits.load(Ordering::SeqCst), 0);
}

/// Private and metadata literals are refused before any connection is attempted, so
/// this sends no traffic (the machine must never send any to these ranges).
#[tokio::test]
async fn private_literal_targets_are_refused_before_connecting() {
    let fetcher = Fetcher::new(config(&[])).expect("fetcher");
    for url in [
        "http://10.0.0.1/",
        "http://169.254.169.254/latest/meta-data/",
        "http://[fd00::1]/",
        "http://[fe80::1]/",
        "http://[::ffff:10.0.0.1]/",
        "http://[64:ff9b::a9fe:a9fe]/",
        "http://[2002:c0a8:101::1]/",
        "http://0/",
        "http://100.64.0.1/",
        "https://192.168.0.1/",
    ] {
        let target = parse_url(url).expect("valid URL");
        match fetcher.client_for(&target) {
            Err(err) => {
                let msg = message_400(Err(err));
                assert!(msg.contains("only public addresses"), "{url}: {msg}");
            }
            Ok(_) => panic!("{url} was not refused before connecting"),
        }
    }
}

#[tokio::test]
async fn other_schemes_and_malformed_urls_are_400() {
    let fetcher = Fetcher::new(config(&[])).expect("fetcher");
    for (url, want) in [
        ("file:///etc/passwd", "scheme \"file\" is not allowed"),
        ("gopher://example.com/", "scheme \"gopher\" is not allowed"),
        ("ftp://example.com/a.png", "scheme \"ftp\" is not allowed"),
        (
            "data:image/png;base64,AAAA",
            "scheme \"data\" is not allowed",
        ),
        (
            "javascript:alert(1)",
            "scheme \"javascript\" is not allowed",
        ),
        ("not a url", "Enter a valid URL"),
        ("http://", "Enter a valid URL"),
        ("http://exa mple.com/", "Enter a valid URL"),
        ("http://example.com:99999/", "Enter a valid URL"),
        ("", "Enter a valid URL"),
    ] {
        let msg = message_400(fetcher.fetch(url).await);
        assert!(msg.contains(want), "{url}: {msg}");
    }
}

#[test]
fn config_from_values_reads_the_allowlist_and_cap() {
    let defaults = FetchConfig::from_values(None, None).expect("defaults");
    assert!(defaults.allow_hosts.is_empty());
    assert_eq!(defaults.max_bytes, 25 * 1024 * 1024);
    assert_eq!(defaults.connect_timeout, Duration::from_secs(3));
    assert_eq!(defaults.total_timeout, Duration::from_secs(15));
    assert_eq!(defaults.max_redirects, 3);

    let set =
        FetchConfig::from_values(Some("localhost:9000,,minio"), Some("1048576")).expect("config");
    assert_eq!(set.allow_hosts, vec!["localhost:9000", "minio"]);
    assert_eq!(set.max_bytes, 1_048_576);

    assert!(FetchConfig::from_values(Some(""), Some(" ")).is_ok());
    for bad_cap in ["0", "-1", "25MB"] {
        let err = FetchConfig::from_values(None, Some(bad_cap)).expect_err(bad_cap);
        assert!(
            err.to_string().contains("SITEHOST_FETCH_MAX_BYTES"),
            "{err}"
        );
    }
    let err = FetchConfig::from_values(Some("http://localhost:9000"), None).expect_err("url");
    assert!(err.to_string().contains("host or host:port"), "{err}");
}

/// Ports other than 80 and 443 are refused before any lookup or connection, for the first
/// URL and for every redirect; an allowlisted `host:port` (local tests) is exempt.
#[tokio::test]
async fn only_ports_80_and_443_are_fetched() {
    let fetcher = Fetcher::new(config(&[])).expect("fetcher");
    for url in [
        "http://example.com:8080/a.png",
        "https://example.com:8443/a.png",
        "http://93.184.216.34:22/",
        "https://[2606:2800:220:1:248:1893:25c8:1946]:6379/",
        "http://example.com:1/",
    ] {
        let target = parse_url(url).expect("valid URL");
        let port = target.port().expect("explicit port");
        match fetcher.client_for(&target) {
            Err(err) => {
                let msg = message_400(Err(err));
                assert_eq!(
                    msg,
                    format!("The URL's port {port} is not allowed; only ports 80 and 443 can be fetched."),
                    "{url}"
                );
            }
            Ok(_) => panic!("{url} was not refused before connecting"),
        }
    }
    for url in [
        "http://example.com/",
        "https://example.com/",
        "http://example.com:80/",
        "https://example.com:443/",
        "http://example.com:443/",
    ] {
        let target = parse_url(url).expect("valid URL");
        assert!(fetcher.client_for(&target).is_ok(), "{url}");
    }

    // A redirect to another port of a public host is refused the same way.
    let addr = serve(|_path, stream| async move {
        respond(
            stream,
            "302 Found",
            &[("Location", "http://93.184.216.34:8080/x.png")],
            b"",
        )
        .await;
    })
    .await;
    let msg = message_400(
        fetcher_for(addr)
            .fetch(&format!("http://127.0.0.1:{}/", addr.port()))
            .await,
    );
    assert_eq!(
        msg,
        "The URL's port 8080 is not allowed; only ports 80 and 443 can be fetched."
    );
}

#[test]
fn the_allowlist_fails_the_cold_start_on_lambda() {
    let allowlisted =
        FetchConfig::from_values(Some("localhost:9000"), None).expect("allowlisted config");
    let err = allowlisted
        .refuse_allowlist_on_lambda(Some("sitehost-ImageUploadFunction"))
        .expect_err("refused on Lambda");
    let message = err.to_string();
    assert!(
        message.contains("SITEHOST_FETCH_ALLOW_HOSTS is for local testing only")
            && message.contains("sitehost-ImageUploadFunction"),
        "{message}"
    );
    // Off Lambda the allowlist works; on Lambda an empty allowlist is fine.
    assert!(allowlisted.refuse_allowlist_on_lambda(None).is_ok());
    assert!(allowlisted.refuse_allowlist_on_lambda(Some("")).is_ok());
    let empty = FetchConfig::from_values(Some(" , "), None).expect("empty allowlist");
    assert!(empty
        .refuse_allowlist_on_lambda(Some("sitehost-ImageUploadFunction"))
        .is_ok());
}

#[test]
fn fetcher_is_shareable_and_its_future_is_send() {
    // Built once per cold start and shared by concurrent handlers on a multi-thread runtime.
    fn assert_send_sync<T: Send + Sync>(_: &T) {}
    fn assert_send<T: Send>(_: &T) {}
    let fetcher = Fetcher::new(config(&[])).expect("fetcher");
    assert_send_sync(&fetcher);
    // Never polled: nothing is sent.
    let future = fetcher.fetch("http://example.com/");
    assert_send(&future);
}

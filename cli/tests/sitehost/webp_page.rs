//! Siblings as a browser receives them: a page with
//! `<img src="/img/upload/….small.jpg">` of a JPEG uploaded to `sitehost serve`, loaded by
//! headless Chromium (whose image Accept names `image/avif` and `image/webp`), gets the
//! variant's AVIF sibling, made on that first request (the upload makes no AVIF, and only
//! the small and thumbnail WebPs) and stored.
//! Chromium's own network log says what it sent and received for the `<img>`; the page says
//! the image decoded at its size.

use std::path::Path;

use serde_json::Value;

use crate::docs_page::{chromium, headless};
use crate::support::serve;

/// An 800x600 JPEG with some detail (a gradient and a grid), made here.
fn jpeg() -> Vec<u8> {
    let pixels = image::RgbImage::from_fn(800, 600, |x, y| {
        let line = x % 50 < 3 || y % 50 < 3;
        match line {
            true => image::Rgb([20, 20, 20]),
            false => image::Rgb([(x / 4) as u8, (y * 2 / 5) as u8, 160]),
        }
    });
    let mut out = Vec::new();
    image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, 90)
        .encode_image(&pixels)
        .expect("JPEG");
    out
}

/// From Chromium's network log (`--log-net-log`): the request headers and response headers
/// of the request whose request line is `line`.
fn exchange(net_log: &Path, line: &str) -> (Vec<String>, Vec<String>) {
    let log: Value =
        serde_json::from_slice(&std::fs::read(net_log).expect("the network log")).expect("JSON");
    let kind = |name: &str| {
        log["constants"]["logEventTypes"][name]
            .as_u64()
            .expect(name)
    };
    let (sent, received) = (
        kind("HTTP_TRANSACTION_SEND_REQUEST_HEADERS"),
        kind("HTTP_TRANSACTION_READ_RESPONSE_HEADERS"),
    );
    let events = log["events"].as_array().expect("events");
    let headers = |event: &Value| -> Vec<String> {
        event["params"]["headers"]
            .as_array()
            .expect("headers")
            .iter()
            .map(|h| h.as_str().expect("header").to_string())
            .collect()
    };
    let mut requests = events
        .iter()
        .filter(|e| e["type"].as_u64() == Some(sent))
        // The request line as sent, CRLF included.
        .filter(|e| e["params"]["line"].as_str().map(str::trim_end) == Some(line));
    let request = requests
        .next()
        .unwrap_or_else(|| panic!("Chromium did not send {line:?}"));
    assert!(requests.next().is_none(), "Chromium sent {line:?} once");
    let source = &request["source"]["id"];
    let response = events
        .iter()
        .find(|e| e["type"].as_u64() == Some(received) && &e["source"]["id"] == source)
        .unwrap_or_else(|| panic!("no response to {line:?} in the network log"));
    (headers(request), headers(response))
}

/// The value of header `name` among `headers` (`Name: value` lines).
fn header<'a>(headers: &'a [String], name: &str) -> Option<&'a str> {
    headers.iter().find_map(|h| {
        let (n, v) = h.split_once(':')?;
        n.eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

#[tokio::test]
async fn an_img_of_a_small_jpeg_variant_gets_its_avif_sibling_in_chromium() {
    let Some(chromium) = chromium() else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    let server = serve(&data);
    let made = server.upload("shop.jpg", &jpeg()).await;
    // The small variant: its AVIF, the cheapest to make on the first request but the
    // thumbnail's, is made by the test build's serve in well under a second.
    let small = made["variants"]["small"]["path"]
        .as_str()
        .expect("the small variant's path");
    assert!(small.ends_with(".small.jpg"), "{small}");
    let stored_sibling = data.join("files").join(format!("{small}.avif"));
    assert!(!stored_sibling.exists(), "the upload makes no AVIF");

    // The page is a local file; its <img> is the variant's path on the server, as on a
    // hosted site. Its title says whether and at what size the image decoded.
    let page = dir.path().join("page.html");
    std::fs::write(
        &page,
        format!(
            "<!doctype html><title>pending</title>\
             <img src=\"{base}/{small}\" \
              onload=\"document.title = 'loaded ' + this.naturalWidth + 'x' + this.naturalHeight\" \
              onerror=\"document.title = 'failed'\">",
            base = server.base
        ),
    )
    .expect("page");
    let net_log = dir.path().join("net-log.json");
    let out = headless(
        &chromium,
        &dir.path().join("chromium-profile"),
        &format!("file://{}", page.display()),
        &[
            &format!("--log-net-log={}", net_log.display()),
            "--net-log-capture-mode=Default",
            "--dump-dom",
        ],
    );
    assert!(out.status.success(), "chromium failed on the page");
    let dom = String::from_utf8_lossy(&out.stdout);
    assert!(
        dom.contains("<title>loaded 320x240</title>"),
        "the image did not decode at the small size: {dom}"
    );

    let (sent, received) = exchange(&net_log, &format!("GET /{small} HTTP/1.1"));
    let accept = header(&sent, "accept").expect("Chromium sends an Accept for images");
    assert!(
        accept.contains("image/avif") && accept.contains("image/webp"),
        "Chromium's image Accept: {accept}"
    );
    assert_eq!(
        received.first().map(String::as_str),
        Some("HTTP/1.1 200 OK")
    );
    assert_eq!(
        header(&received, "content-type"),
        Some("image/avif"),
        "what Chromium received for the <img> of {small} (it sent Accept: {accept}): {received:?}"
    );
    assert_eq!(header(&received, "vary"), Some("Accept"));
    let sibling = std::fs::read(&stored_sibling).expect("the sibling made was stored");
    // An ISO BMFF file whose brand is AVIF.
    assert_eq!(sibling.get(4..12), Some(&b"ftypavif"[..]), "an AVIF file");
    assert_eq!(
        header(&received, "content-length"),
        Some(sibling.len().to_string().as_str()),
        "the sibling's bytes"
    );
}

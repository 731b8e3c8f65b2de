//! Animation as a browser receives it: an animated GIF uploaded to `sitehost serve`, its
//! medium variant in an `<img>` of a page loaded by headless Chromium. Once the `<img>` has
//! loaded, the page reads what the server answers for that path with Chromium's own image
//! decoder (WebCodecs' `ImageDecoder`): with the `Accept` Chromium sends for images, the
//! animated WebP sibling (made on that first request), and with `Accept: image/gif`, the
//! GIF variant. Both must be animations of the upload's three frames, with its delays,
//! forever, at the medium size. The page reports what it found to a listener of the test:
//! screenshots cannot show it (headless Chromium does not advance an image's animation
//! between them), and `--dump-dom` would not wait for the decoder.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::time::Duration;

use image::codecs::gif::{GifEncoder, Repeat};
use image::{Delay, Frame, Rgba, RgbaImage};

use crate::docs_page::chromium;
use crate::support::serve;

/// Three 800x600 frames (a colour each, with a grid that moves), shown 200, 300 and
/// 500 ms, looping forever.
fn animated_gif() -> Vec<u8> {
    let frames = [
        ([200, 40, 40], 200),
        ([40, 160, 60], 300),
        ([40, 60, 200], 500),
    ];
    let mut out = Vec::new();
    {
        let mut encoder = GifEncoder::new_with_speed(&mut out, 30);
        encoder.set_repeat(Repeat::Infinite).expect("loop");
        for (i, (rgb, ms)) in frames.into_iter().enumerate() {
            let pixels = RgbaImage::from_fn(800, 600, |x, y| {
                if (x + 20 * i as u32) % 50 < 3 || y % 50 < 3 {
                    Rgba([20, 20, 20, 255])
                } else {
                    Rgba([rgb[0], rgb[1], rgb[2], 255])
                }
            });
            let delay = Delay::from_numer_denom_ms(ms, 1);
            encoder
                .encode_frame(Frame::from_parts(pixels, 0, 0, delay))
                .expect("GIF frame");
        }
    }
    out
}

/// What Chromium asks for when it loads an `<img>`.
const IMAGE_ACCEPT: &str = "image/avif,image/webp,image/apng,image/svg+xml,image/*,*/*;q=0.8";

/// The page: once the `<img>` of `variant` has loaded, each answer's type, its size, whether
/// it is animated, its frames, their durations (ms) and its repetitions, sent as the path
/// of a request to `report` (spaces as `_`).
fn page(variant: &str, report: &str) -> String {
    format!(
        r#"<!doctype html><img id="variant" src="{variant}">
<script>
async function look(accept) {{
  const answer = await fetch("{variant}", {{headers: {{Accept: accept}}}});
  const type = answer.headers.get("content-type");
  const decoder = new ImageDecoder({{data: await answer.arrayBuffer(), type}});
  await decoder.tracks.ready;
  await decoder.completed;
  const track = decoder.tracks.selectedTrack;
  const durations = [];
  let size = "";
  for (let i = 0; i < track.frameCount; i++) {{
    const {{image}} = await decoder.decode({{frameIndex: i}});
    durations.push(image.duration / 1000);
    size = image.displayWidth + "x" + image.displayHeight;
    image.close();
  }}
  return [type, size, "animated=" + track.animated, "frames=" + track.frameCount,
    "durations=" + durations.join(","), "repetitions=" + track.repetitionCount].join("_");
}}
function report(result) {{
  fetch("{report}" + result, {{mode: "no-cors"}});
}}
const img = document.getElementById("variant");
img.onerror = () => report("failed");
img.onload = async () => {{
  try {{
    const seen = "loaded_" + img.naturalWidth + "x" + img.naturalHeight;
    report([seen, await look("{IMAGE_ACCEPT}"), await look("image/gif")].join("__"));
  }} catch (e) {{
    report("error_" + e);
  }}
}};
</script>"#
    )
}

#[tokio::test]
async fn an_img_of_an_animated_gif_variant_is_an_animation_in_chromium() {
    let Some(chromium) = chromium() else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    let server = serve(&data);
    let made = server.upload("banner.gif", &animated_gif()).await;
    let medium = made["variants"]["medium"]["path"]
        .as_str()
        .expect("the medium variant's path");
    assert!(medium.ends_with(".medium.gif"), "{medium}");

    let listener = TcpListener::bind("127.0.0.1:0").expect("a report listener");
    let report = format!("http://{}/", listener.local_addr().expect("address"));
    let page_path = dir.path().join("page.html");
    std::fs::write(
        &page_path,
        page(&format!("{}/{medium}", server.base), &report),
    )
    .expect("page");
    // A file page's fetches reach the server only with web security off (the server
    // sends no CORS headers). No virtual time: the decoder runs in real time.
    let mut browser = Command::new(&chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-web-security",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ])
        .arg(format!(
            "--user-data-dir={}",
            dir.path().join("chromium-profile").display()
        ))
        .arg(format!("file://{}", page_path.display()))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromium starts");
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().expect("the page reports");
        let mut line = String::new();
        BufReader::new(&stream)
            .read_line(&mut line)
            .expect("a request line");
        let _ = stream.write_all(b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n");
        let _ = sender.send(line);
    });
    let line = receiver.recv_timeout(Duration::from_secs(60));
    let _ = browser.kill();
    let _ = browser.wait();
    let line = line.expect("the page reported within a minute");
    let animation = "animated=true_frames=3_durations=200,300,500_repetitions=Infinity";
    let expected = format!(
        "GET /loaded_640x480__image/webp_640x480_{animation}__image/gif_640x480_{animation} "
    );
    assert!(
        line.starts_with(&expected),
        "expected {expected}, got {line}"
    );
    let sibling = std::fs::read(data.join("files").join(format!("{medium}.webp")))
        .expect("the sibling made on first request was stored");
    assert!(
        sibling.starts_with(b"RIFF") && sibling.windows(4).any(|w| w == b"ANIM"),
        "an animated WebP"
    );
}

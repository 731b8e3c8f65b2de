//! Animation as a browser receives it: an animated GIF uploaded to `sitehost serve`, its
//! medium variant in an `<img>` of a page loaded by headless Chromium. Chromium's own
//! image decoders (WebCodecs' `ImageDecoder`) read what the server answers for that path:
//! with the `Accept` Chromium sends for images, the animated WebP sibling (made on that
//! first request), and with `Accept: image/gif`, the GIF variant. Both must be animations
//! of the upload's three frames, with its delays, forever, at the medium size.

use base64::Engine;
use image::codecs::gif::{GifEncoder, Repeat};
use image::{Delay, Frame, Rgba, RgbaImage};
use serde_json::json;
use sitehost::local::client::PartnerClient;

use crate::docs_page::{chromium, headless};
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

#[tokio::test]
#[ignore = "since AVIF siblings merged, Chromium's <img> of the variant stays unloaded (title \"pending\") in 4 s; to be found (#34)"]
async fn an_img_of_an_animated_gif_variant_is_an_animation_in_chromium() {
    let Some(chromium) = chromium() else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    let server = serve(&data);
    let client = PartnerClient::new(&server.base, &server.key, &server.secret);
    let file = base64::engine::general_purpose::STANDARD.encode(animated_gif());
    let made = client
        .post(
            "/api/v2/images/",
            &json!({"upload": {"name": "banner.gif", "file": file}, "site_id": 7}),
        )
        .await
        .expect("upload");
    assert_eq!(made.status, 201, "{}", made.body);
    let medium = made.body["variants"]["medium"]["path"]
        .as_str()
        .expect("the medium variant's path");
    assert!(medium.ends_with(".medium.gif"), "{medium}");

    // The page is a local file (its fetches reach the server only with web security off:
    // the server sends no CORS headers). Once the <img> has loaded, its title says what
    // Chromium decoded: each answer's type, whether it is animated, its frames, their
    // durations (ms) and its repetitions.
    let page = dir.path().join("page.html");
    std::fs::write(
        &page,
        format!(
            r#"<!doctype html><title>pending</title>
<img id="variant" src="{base}/{medium}">
<script>
async function look(accept) {{
  const answer = await fetch("{base}/{medium}", {{headers: {{Accept: accept}}}});
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
  return type + " " + size + " animated=" + track.animated + " frames=" + track.frameCount +
    " durations=" + durations.join(",") + " repetitions=" + track.repetitionCount;
}}
const img = document.getElementById("variant");
img.onerror = () => {{ document.title = "failed"; }};
img.onload = async () => {{
  try {{
    const seen = "loaded " + img.naturalWidth + "x" + img.naturalHeight;
    document.title = [seen, await look("{IMAGE_ACCEPT}"), await look("image/gif")].join(" | ");
  }} catch (e) {{
    document.title = "error " + e;
  }}
}};
</script>"#,
            base = server.base
        ),
    )
    .expect("page");
    let out = headless(
        &chromium,
        &dir.path().join("chromium-profile"),
        &format!("file://{}", page.display()),
        &["--disable-web-security", "--dump-dom"],
    );
    assert!(out.status.success(), "chromium failed on the page");
    let dom = String::from_utf8_lossy(&out.stdout);
    let animation = "animated=true frames=3 durations=200,300,500 repetitions=Infinity";
    let expected = format!(
        "<title>loaded 640x480 | image/webp 640x480 {animation} | image/gif 640x480 {animation}</title>"
    );
    assert!(dom.contains(&expected), "expected {expected} in {dom}");
    let sibling = std::fs::read(data.join("files").join(format!("{medium}.webp")))
        .expect("the sibling made on first request was stored");
    assert!(
        sibling.starts_with(b"RIFF") && sibling.windows(4).any(|w| w == b"ANIM"),
        "an animated WebP"
    );
}

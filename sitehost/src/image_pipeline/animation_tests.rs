//! Animated GIFs and WebPs (animation.rs), on files made here: the variants are
//! animations with the frames, delays, loop count and size they should have, composited as
//! browsers show them; the siblings are animated WebPs; a single frame stays on the still
//! path; the frame limits refuse with a 413, and a GIF bomb is refused before any frame is
//! decoded.

use std::io::Cursor;
use std::time::{Duration, Instant};

use ::image::codecs::gif::GifDecoder;
use ::image::codecs::webp::WebPDecoder;
use ::image::{AnimationDecoder, RgbaImage};

use super::hostile_gif::{self as hostile, GifFrame};
use super::*;

const RED: [u8; 3] = [255, 0, 0];
const GREEN: [u8; 3] = [0, 255, 0];
const BLUE: [u8; 3] = [0, 0, 255];
const WHITE: [u8; 3] = [255, 255, 255];

/// Each frame of a GIF as `image` composites it (a decoder other than ours), with its delay
/// in milliseconds.
fn gif_frames_of(bytes: &[u8]) -> Vec<(RgbaImage, u32)> {
    let decoder = GifDecoder::new(Cursor::new(bytes)).expect("a GIF");
    collect(decoder.into_frames())
}

/// Each frame of an animated WebP as `image` composites it, with its delay.
fn webp_frames_of(bytes: &[u8]) -> Vec<(RgbaImage, u32)> {
    let mut decoder = WebPDecoder::new(Cursor::new(bytes)).expect("a WebP");
    assert!(decoder.has_animation(), "an animated WebP");
    decoder
        .set_background_color(::image::Rgba([0, 0, 0, 0]))
        .expect("background");
    collect(decoder.into_frames())
}

fn collect(frames: ::image::Frames<'_>) -> Vec<(RgbaImage, u32)> {
    frames
        .map(|frame| {
            let frame = frame.expect("a frame decodes");
            let (numer, denom) = frame.delay().numer_denom_ms();
            (frame.into_buffer(), numer / denom)
        })
        .collect()
}

/// The GIF's loop count as the gif crate reads it (after its frames).
fn gif_repeat(bytes: &[u8]) -> gif::Repeat {
    let mut decoder = gif::DecodeOptions::new().read_info(bytes).expect("a GIF");
    while decoder.read_next_frame().expect("frames").is_some() {}
    decoder.repeat()
}

/// How many times the WebP plays (None: forever).
fn webp_plays(bytes: &[u8]) -> Option<u32> {
    match WebPDecoder::new(Cursor::new(bytes))
        .expect("a WebP")
        .loop_count()
    {
        ::image::metadata::LoopCount::Infinite => None,
        ::image::metadata::LoopCount::Finite(n) => Some(n.get()),
    }
}

fn rgba_at(image: &RgbaImage, x: u32, y: u32) -> [u8; 4] {
    image.get_pixel(x, y).0
}

fn near(actual: [u8; 4], rgb: [u8; 3], tolerance: i32) -> bool {
    actual[3] == 255
        && actual[..3]
            .iter()
            .zip(rgb)
            .all(|(&a, e)| (i32::from(a) - i32::from(e)).abs() <= tolerance)
}

/// Three full frames, red, green and blue, shown 100, 200 and 500 ms, played three times.
fn three_colours(width: u16, height: u16) -> Vec<u8> {
    let frames: Vec<GifFrame> = [(RED, 10), (GREEN, 20), (BLUE, 50)]
        .into_iter()
        .map(|(rgb, delay_cs)| GifFrame {
            delay_cs,
            ..GifFrame::filled(0, 0, width, height, rgb)
        })
        .collect();
    hostile::gif_animation(width, height, gif::Repeat::Finite(2), &frames)
}

#[test]
fn animated_gif_variants_are_animated_gifs_with_their_frames_delays_and_loop_count() {
    let bytes = three_colours(800, 500);
    let processed = process(&bytes, &ImageLimits::default()).expect("processes");
    assert_eq!(processed.format, ImageFormat::Gif);
    assert_eq!((processed.width, processed.height), (800, 500));
    let expected = [(800, 500), (800, 500), (640, 400), (320, 200), (150, 94)];
    for (variant, size) in processed.variants.iter().zip(expected) {
        assert_eq!((variant.width, variant.height), size, "{}", variant.name);
        let frames = gif_frames_of(&variant.bytes);
        assert_eq!(frames.len(), 3, "{}", variant.name);
        for ((image, delay), (rgb, ms)) in
            frames.iter().zip([(RED, 100), (GREEN, 200), (BLUE, 500)])
        {
            assert_eq!(image.dimensions(), size, "{}", variant.name);
            assert_eq!(*delay, ms, "{}", variant.name);
            let (x, y) = (size.0 / 2, size.1 / 2);
            assert!(
                near(rgba_at(image, x, y), rgb, 4),
                "{}: {:?}",
                variant.name,
                rgba_at(image, x, y)
            );
        }
        assert_eq!(
            gif_repeat(&variant.bytes),
            gif::Repeat::Finite(2),
            "{}",
            variant.name
        );
        // Small and thumbnail have their WebP siblings from the upload: animated too.
        match &variant.webp {
            Some(webp) => {
                assert!(WEBP_SIBLINGS_AT_UPLOAD.contains(&variant.name));
                let frames = webp_frames_of(webp);
                let delays: Vec<u32> = frames.iter().map(|(_, d)| *d).collect();
                assert_eq!(delays, [100, 200, 500], "{}", variant.name);
                for ((image, _), rgb) in frames.iter().zip([RED, GREEN, BLUE]) {
                    assert_eq!(image.dimensions(), size);
                    assert!(near(rgba_at(image, size.0 / 2, size.1 / 2), rgb, 24));
                }
                // GIF's 2 repeats are 3 plays, WebP's loop count.
                assert_eq!(webp_plays(webp), Some(3));
            }
            None => assert!(!WEBP_SIBLINGS_AT_UPLOAD.contains(&variant.name)),
        }
    }
}

#[test]
fn no_sibling_is_made_on_first_request_for_a_variant_of_too_many_pixels() {
    // 1000x1000 with 26 frames: 26 megapixels in all, refused from the header.
    let variant = hostile::gif_bomb(1000, 1000, 26);
    let start = Instant::now();
    let err = webp_sibling_of_variant(&variant, &ImageLimits::default()).expect_err("too large");
    assert!(start.elapsed() < Duration::from_millis(50));
    assert_eq!(err.status(), 413);
    assert!(
        err.to_string()
            .contains("at most 25 megapixels in all frames"),
        "{err}"
    );
    let made = webp_sibling_of_variant(&hostile::gif_bomb(1000, 1000, 25), &ImageLimits::default());
    assert!(made.is_ok(), "25 megapixels: made");
}

#[test]
fn the_sibling_made_on_first_request_is_an_animated_webp() {
    let bytes = hostile::gif_animation(
        300,
        200,
        gif::Repeat::Infinite,
        &[
            GifFrame {
                delay_cs: 7,
                ..GifFrame::filled(0, 0, 300, 200, RED)
            },
            GifFrame {
                delay_cs: 0,
                ..GifFrame::filled(100, 50, 100, 100, BLUE)
            },
        ],
    );
    let processed = process(&bytes, &ImageLimits::default()).expect("processes");
    let medium = &processed.variants[2];
    assert!(
        medium.webp.is_none(),
        "made on first request, not at upload"
    );
    let webp = webp_sibling_of_variant(&medium.bytes, &ImageLimits::default()).expect("a sibling");
    let frames = webp_frames_of(&webp);
    assert_eq!(frames.len(), 2);
    assert_eq!(frames.iter().map(|(_, d)| *d).collect::<Vec<_>>(), [70, 0]);
    assert!(near(rgba_at(&frames[0].0, 150, 100), RED, 24));
    assert!(near(rgba_at(&frames[1].0, 150, 100), BLUE, 24));
    assert!(near(rgba_at(&frames[1].0, 20, 20), RED, 24));
    assert_eq!(webp_plays(&webp), None);
}

/// Disposal, frame offsets and transparency on a 40x40 screen, every length times `unit`:
/// 1. red, the whole screen (kept);
/// 2. 20x20 at 10,10, its left half transparent, its right half blue (then cleared to
///    background, which browsers show transparent);
/// 3. green, 10x10 at 0,0 (then restored to what was under it);
/// 4. white, 6x6 at 34,34.
fn disposal_gif(unit: u16) -> Vec<u8> {
    let side = 20 * unit;
    let half_transparent: Vec<u8> = (0..usize::from(side) * usize::from(side))
        .map(|i| u8::from(i % usize::from(side) >= usize::from(side / 2)))
        .collect();
    hostile::gif_animation(
        40 * unit,
        40 * unit,
        gif::Repeat::Infinite,
        &[
            GifFrame::filled(0, 0, 40 * unit, 40 * unit, RED),
            GifFrame {
                palette: [[9, 9, 9], BLUE].concat(),
                indices: half_transparent,
                transparent: Some(0),
                dispose: gif::DisposalMethod::Background,
                ..GifFrame::filled(10 * unit, 10 * unit, side, side, BLUE)
            },
            GifFrame {
                dispose: gif::DisposalMethod::Previous,
                ..GifFrame::filled(0, 0, 10 * unit, 10 * unit, GREEN)
            },
            GifFrame::filled(34 * unit, 34 * unit, 6 * unit, 6 * unit, WHITE),
        ],
    )
}

/// What each frame of [`disposal_gif`] shows at a few points (None: transparent).
type Point = (u32, u32, Option<[u8; 3]>);

const DISPOSAL_EXPECTED: [[Point; 5]; 4] = [
    [
        (5, 5, Some(RED)),
        (15, 15, Some(RED)),
        (25, 25, Some(RED)),
        (35, 5, Some(RED)),
        (37, 37, Some(RED)),
    ],
    [
        (5, 5, Some(RED)),
        (15, 15, Some(RED)),
        (25, 25, Some(BLUE)),
        (35, 5, Some(RED)),
        (37, 37, Some(RED)),
    ],
    [
        (5, 5, Some(GREEN)),
        (15, 15, None),
        (25, 25, None),
        (35, 5, Some(RED)),
        (37, 37, Some(RED)),
    ],
    [
        (5, 5, Some(RED)),
        (15, 15, None),
        (25, 25, None),
        (35, 5, Some(RED)),
        (37, 37, Some(WHITE)),
    ],
];

/// Asserts that `frames` show what [`DISPOSAL_EXPECTED`] says, on a screen of 40 units of
/// `unit` pixels.
fn assert_shows(frames: &[(RgbaImage, u32)], unit: f64, tolerance: i32, what: &str) {
    assert_eq!(frames.len(), 4, "{what}");
    for (number, ((image, _), points)) in frames.iter().zip(DISPOSAL_EXPECTED).enumerate() {
        for (x, y, expected) in points {
            let at = |v: u32| ((f64::from(v) + 0.5) * unit) as u32;
            let pixel = rgba_at(image, at(x), at(y));
            let ok = match expected {
                Some(rgb) => near(pixel, rgb, tolerance),
                None => pixel[3] == 0,
            };
            assert!(
                ok,
                "{what}, frame {}: {x},{y} is {pixel:?}, not {expected:?}",
                number + 1
            );
        }
    }
}

#[test]
fn frames_are_composited_as_browsers_show_them() {
    let bytes = disposal_gif(1);
    // Our decoder.
    let header = sniff::read_header(&bytes, &ImageLimits::default()).expect("header");
    assert_eq!(header.frames, 4);
    let ours: Vec<(RgbaImage, u32)> = gif_codec::frames(&bytes, &header, &ImageLimits::default())
        .expect("opens")
        .map(|frame| {
            let frame = frame.expect("a frame");
            let p = frame.pixels;
            (
                RgbaImage::from_raw(p.width, p.height, p.data).expect("RGBA"),
                frame.delay_ms,
            )
        })
        .collect();
    assert_shows(&ours, 1.0, 0, "the source as composited");
    // Smaller than every box: each variant is the original's frames, copied; the WebP
    // siblings are lossy, transparency kept.
    let processed = process(&bytes, &ImageLimits::default()).expect("processes");
    for variant in &processed.variants {
        assert_shows(&gif_frames_of(&variant.bytes), 1.0, 0, variant.name);
    }
    let thumbnail = processed.variants[4].webp.as_deref().expect("a sibling");
    assert_shows(&webp_frames_of(thumbnail), 1.0, 24, "the thumbnail's WebP");
}

#[test]
fn resized_variants_show_each_frame_as_the_original_does() {
    // 400x400: big, large and medium are the original's frames, copied; small (320) and
    // thumbnail (150) are resized, each frame cut to what changed and disposed of as the
    // next one needs. Read back by `image`'s decoder, they show what the original does.
    let bytes = disposal_gif(10);
    let processed = process(&bytes, &ImageLimits::default()).expect("processes");
    for variant in &processed.variants {
        let unit = f64::from(variant.width) / 40.0;
        assert_shows(&gif_frames_of(&variant.bytes), unit, 8, variant.name);
        if let Some(webp) = &variant.webp {
            let what = format!("{}'s WebP", variant.name);
            assert_shows(&webp_frames_of(webp), unit, 24, &what);
        }
    }
    // What a frame that changes nothing, and a frame that turns pixels transparent, cost:
    // the thumbnail's frames after the first are small.
    assert!(
        processed.variants[4].bytes.len() < 2_000,
        "{}",
        processed.variants[4].bytes.len()
    );
}

#[test]
fn copied_variants_leave_out_the_metadata() {
    let mut bytes = disposal_gif(1);
    let first_frame = bytes
        .windows(2)
        .position(|w| w == [0x21, 0xF9])
        .expect("a graphic control extension");
    // A comment and an XMP packet before the first frame.
    let mut metadata = vec![0x21, 0xFE, 7];
    metadata.extend(b"secret!");
    metadata.extend([0, 0x21, 0xFF, 11]);
    metadata.extend(b"XMP DataXMP");
    metadata.extend([5]);
    metadata.extend(b"<x:x>");
    metadata.push(0);
    bytes.splice(first_frame..first_frame, metadata);
    let processed = process(&bytes, &ImageLimits::default()).expect("processes");
    let big = &processed.variants[0].bytes;
    assert!(!big.windows(7).any(|w| w == b"secret!"), "no comment");
    assert!(!big.windows(8).any(|w| w == b"XMP Data"), "no XMP");
    assert_shows(&gif_frames_of(big), 1.0, 0, "the copy");
    assert_eq!(gif_repeat(big), gif::Repeat::Infinite);
}

#[test]
fn resized_frames_keep_transparency_at_one_bit() {
    // Left half transparent, right half opaque blue, over two frames that differ.
    let canvas = |rgb: [u8; 3]| {
        let indices: Vec<u8> = (0..600 * 400).map(|i| u8::from(i % 600 >= 300)).collect();
        GifFrame {
            palette: [[0, 0, 0], rgb].concat(),
            indices,
            transparent: Some(0),
            dispose: gif::DisposalMethod::Background,
            ..GifFrame::filled(0, 0, 600, 400, rgb)
        }
    };
    let bytes = hostile::gif_animation(
        600,
        400,
        gif::Repeat::Infinite,
        &[canvas(BLUE), canvas(GREEN)],
    );
    let processed = process(&bytes, &ImageLimits::default()).expect("processes");
    for variant in &processed.variants {
        let frames = gif_frames_of(&variant.bytes);
        let (w, h) = (variant.width, variant.height);
        for ((image, _), rgb) in frames.iter().zip([BLUE, GREEN]) {
            assert_eq!(rgba_at(image, w / 8, h / 2)[3], 0, "{}", variant.name);
            assert!(
                near(rgba_at(image, w * 7 / 8, h / 2), rgb, 4),
                "{}",
                variant.name
            );
        }
    }
}

#[test]
fn a_single_frame_gif_stays_on_the_still_path() {
    let bytes = hostile::gif_animation(
        100,
        80,
        gif::Repeat::Finite(0),
        &[GifFrame::filled(0, 0, 100, 80, GREEN)],
    );
    let header = sniff::read_header(&bytes, &ImageLimits::default()).expect("header");
    assert_eq!(header.frames, 1);
    let processed = process(&bytes, &ImageLimits::default()).expect("processes");
    // Smaller than every box: each variant is the decoded frame, encoded as today.
    let decoded =
        codec::decode(&bytes, &header, &ImageLimits::default(), (100, 80)).expect("decodes");
    let still = codec::encode(&decoded, ImageFormat::Gif).expect("encodes");
    for variant in &processed.variants {
        assert_eq!(variant.bytes, still, "{}", variant.name);
        assert_eq!(gif_frames_of(&variant.bytes).len(), 1);
    }
}

#[test]
fn animated_webp_uploads_keep_their_animation_as_webp() {
    let frame = |rgb: [u8; 3]| {
        RgbaImage::from_pixel(300, 200, ::image::Rgba([rgb[0], rgb[1], rgb[2], 255]))
    };
    let (red, green) = (frame(RED), frame(GREEN));
    let config = webp::WebPConfig::new().expect("config");
    let mut encoder = webp::AnimEncoder::new(300, 200, &config);
    encoder.set_loop_count(2);
    encoder.add_frame(webp::AnimFrame::from_rgba(red.as_raw(), 300, 200, 0));
    encoder.add_frame(webp::AnimFrame::from_rgba(green.as_raw(), 300, 200, 120));
    encoder.add_frame(webp::AnimFrame::from_rgba(red.as_raw(), 300, 200, 400));
    let bytes = encoder.try_encode().expect("an animated WebP").to_vec();
    let source: Vec<u32> = webp_frames_of(&bytes).iter().map(|(_, d)| *d).collect();
    assert_eq!(source.len(), 3);

    let processed = process(&bytes, &ImageLimits::default()).expect("processes");
    assert_eq!(processed.format, ImageFormat::WebP);
    for variant in &processed.variants {
        assert!(
            variant.webp.is_none(),
            "a WebP's variants are WebPs: no siblings"
        );
        let frames = webp_frames_of(&variant.bytes);
        assert_eq!(
            frames.iter().map(|(_, d)| *d).collect::<Vec<_>>(),
            source,
            "{}",
            variant.name
        );
        for ((image, _), rgb) in frames.iter().zip([RED, GREEN, RED]) {
            assert_eq!(image.dimensions(), (variant.width, variant.height));
            assert!(near(
                rgba_at(image, variant.width / 2, variant.height / 2),
                rgb,
                24
            ));
        }
        assert_eq!(webp_plays(&variant.bytes), Some(2));
    }
    assert_eq!(
        (processed.variants[4].width, processed.variants[4].height),
        (150, 100)
    );
}

#[test]
fn animations_over_the_frame_limits_are_refused_with_a_413() {
    let limits = ImageLimits::default();
    // More frames than the limit, each one pixel.
    let err = process(&hostile::gif_bomb(2, 2, 1_001), &limits).expect_err("too many frames");
    assert_eq!(err.status(), 413);
    assert!(
        err.to_string().contains("the animation has more than 1000 frames; at most 1000 frames are accepted: give it fewer frames"),
        "{err}"
    );
    // 1000x1000 with 51 frames: 51 megapixels in all.
    let err = process(&hostile::gif_bomb(1000, 1000, 51), &limits).expect_err("too many pixels");
    assert_eq!(err.status(), 413);
    assert!(
        err.to_string().contains(
            "the animation is 1000x1000 pixels with 51 frames (51.0 megapixels in all its \
             frames); at most 50 megapixels in all frames are accepted: make it smaller or \
             give it fewer frames"
        ),
        "{err}"
    );
    // docs/api.md quotes both refusals as they are.
    let api = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/api.md"))
        .expect("docs/api.md");
    let api = api.split_whitespace().collect::<Vec<_>>().join(" ");
    let frames = process(&hostile::gif_bomb(2, 2, 1_001), &limits).expect_err("frames");
    for err in [&err, &frames] {
        let ApiError::TooLarge(message) = err else {
            panic!("a 413: {err:?}");
        };
        assert!(
            api.contains(&format!("`{message}`")),
            "docs/api.md quotes {message}"
        );
    }
    // At the limit: accepted by the checks.
    let info = inspect(&hostile::gif_bomb(1000, 1000, 50), &limits).expect("at the limit");
    assert_eq!((info.width, info.height), (1000, 1000));
    // A WebP's frames are counted the same way.
    let config = webp::WebPConfig::new().expect("config");
    let mut encoder = webp::AnimEncoder::new(2, 2, &config);
    let colours: Vec<Vec<u8>> = [RED, BLUE]
        .iter()
        .map(|rgb| rgb.iter().copied().chain([255]).cycle().take(16).collect())
        .collect();
    for i in 0..1_001 {
        encoder.add_frame(webp::AnimFrame::from_rgba(
            &colours[i % 2],
            2,
            2,
            10 * i as i32,
        ));
    }
    let many = encoder.try_encode().expect("an animated WebP").to_vec();
    let err = process(&many, &limits).expect_err("too many frames");
    assert_eq!(err.status(), 413);
    assert!(err.to_string().contains("more than 1000 frames"), "{err}");
}

#[test]
fn a_gif_bomb_is_refused_before_any_frame_is_decoded() {
    // A 8000x6000 screen (48 MP, within the pixel limit) and 5,000 one-pixel frames: 145 KB
    // that a decoder drawing every frame on the screen would spend 240 billion pixels on.
    let bomb = hostile::gif_bomb(8000, 6000, 5_000);
    assert!(bomb.len() < 150_000, "{}", bomb.len());
    let start = Instant::now();
    let (result, peak) = super::tests::memory::peak(|| process(&bomb, &ImageLimits::default()));
    let took = start.elapsed();
    let err = result.expect_err("a bomb");
    assert_eq!(err.status(), 413, "{err}");
    assert!(err.to_string().contains("more than 1000 frames"), "{err}");
    assert!(took < Duration::from_millis(50), "{took:?}");
    assert!(peak < 1 << 20, "{peak} bytes");
    // Under the frame limit, the screen makes the pixels too many: refused alike.
    let bomb = hostile::gif_bomb(8000, 6000, 1_000);
    let start = Instant::now();
    let err = process(&bomb, &ImageLimits::default()).expect_err("a bomb");
    assert!(start.elapsed() < Duration::from_millis(50));
    assert!(
        err.to_string()
            .contains("8000x6000 pixels with 1000 frames"),
        "{err}"
    );
    // 25 MiB of one-pixel frames (the fetch limit): the walk stops at the limit.
    let bomb = hostile::gif_bomb(1, 1, 900_000);
    assert!(bomb.len() > 25_000_000);
    let start = Instant::now();
    let err = process(&bomb, &ImageLimits::default()).expect_err("a bomb");
    assert!(start.elapsed() < Duration::from_millis(50));
    assert_eq!(err.status(), 413);
}

#[test]
fn a_frame_outside_the_screen_or_cut_short_is_refused() {
    let mut frames = vec![
        GifFrame::filled(0, 0, 40, 40, RED),
        GifFrame::filled(30, 30, 20, 20, BLUE),
    ];
    let err = process(
        &hostile::gif_animation(40, 40, gif::Repeat::Infinite, &frames),
        &ImageLimits::default(),
    )
    .expect_err("outside");
    assert_eq!(err.status(), 400);
    assert!(
        format!("{err:?}").contains("its frame 2 (20x20 at 30,30) does not fit its 40x40 screen"),
        "{err:?}"
    );
    frames[1] = GifFrame::filled(10, 10, 20, 20, BLUE);
    let whole = hostile::gif_animation(40, 40, gif::Repeat::Infinite, &frames);
    process(&whole, &ImageLimits::default()).expect("whole");
    // Cut inside the second frame's image data.
    let cut = &whole[..whole.len() - 6];
    let err = process(cut, &ImageLimits::default()).expect_err("truncated");
    assert_eq!(err.status(), 400);
    assert!(
        format!("{err:?}").contains("the GIF is truncated"),
        "{err:?}"
    );
}

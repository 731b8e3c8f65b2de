//! Pipeline tests on images generated here (no files from disk).

use std::io::Cursor;
use std::time::{Duration, Instant};

use ::image::codecs::gif::GifEncoder;
use ::image::{DynamicImage, Frame, GenericImageView, Rgb, RgbImage, Rgba, RgbaImage};

use super::*;
use crate::domain::image_record::fit;

const RED: [u8; 3] = [255, 0, 0];
const GREEN: [u8; 3] = [0, 255, 0];
const BLUE: [u8; 3] = [0, 0, 255];
const WHITE: [u8; 3] = [255, 255, 255];

/// A smooth colour gradient (compresses like a photo, not like noise).
fn gradient(width: u32, height: u32) -> RgbImage {
    RgbImage::from_fn(width, height, |x, y| {
        Rgb([
            (x * 255 / width.max(1)) as u8,
            (y * 255 / height.max(1)) as u8,
            ((x + y) % 256) as u8,
        ])
    })
}

fn encode_with_image(image: &DynamicImage, format: ::image::ImageFormat) -> Vec<u8> {
    let mut out = Cursor::new(Vec::new());
    image
        .write_to(&mut out, format)
        .expect("test image encodes");
    out.into_inner()
}

fn png(image: &DynamicImage) -> Vec<u8> {
    encode_with_image(image, ::image::ImageFormat::Png)
}

/// 4:4:4 at high quality so colours survive at sharp edges.
fn jpeg(image: &RgbImage) -> Vec<u8> {
    let mut out = Vec::new();
    let mut encoder = jpeg_encoder::Encoder::new(&mut out, 95);
    encoder.set_sampling_factor(jpeg_encoder::SamplingFactor::F_1_1);
    encoder
        .encode(
            image.as_raw(),
            image.width() as u16,
            image.height() as u16,
            jpeg_encoder::ColorType::Rgb,
        )
        .expect("test jpeg encodes");
    out
}

fn webp_lossy(image: &RgbImage) -> Vec<u8> {
    webp::Encoder::from_rgb(image.as_raw(), image.width(), image.height())
        .encode_simple(false, 90.0)
        .expect("test webp encodes")
        .to_vec()
}

fn gif_frames(frames: Vec<RgbaImage>) -> Vec<u8> {
    let mut out = Vec::new();
    {
        let mut encoder = GifEncoder::new(&mut out);
        encoder
            .encode_frames(frames.into_iter().map(Frame::new))
            .expect("test gif encodes");
    }
    out
}

fn message(err: &ApiError) -> String {
    match err {
        ApiError::Validation(fields) => fields
            .get("upload")
            .and_then(|m| m.first())
            .cloned()
            .unwrap_or_else(|| panic!("no upload message in {fields:?}")),
        ApiError::TooLarge(m) => m.clone(),
        other => panic!("unexpected error {other:?}"),
    }
}

fn decode(bytes: &[u8]) -> DynamicImage {
    ::image::load_from_memory(bytes).expect("variant decodes")
}

fn close(actual: [u8; 3], expected: [u8; 3], tolerance: i32) -> bool {
    actual
        .iter()
        .zip(expected)
        .all(|(&a, e)| (i32::from(a) - i32::from(e)).abs() <= tolerance)
}

fn rgb_at(image: &DynamicImage, x: u32, y: u32) -> [u8; 3] {
    let p = image.get_pixel(x, y).0;
    [p[0], p[1], p[2]]
}

fn sizes(processed: &Processed) -> Vec<(u32, u32)> {
    processed
        .variants
        .iter()
        .map(|v| (v.width, v.height))
        .collect()
}

#[test]
fn fit_follows_the_rule() {
    assert_eq!(fit(4000, 3000, 2048), (2048, 1536));
    assert_eq!(fit(4000, 3000, 150), (150, 113)); // 112.5 rounds up
    assert_eq!(fit(3000, 4000, 150), (113, 150));
    assert_eq!(fit(3000, 2000, 1024), (1024, 683)); // 682.67
    assert_eq!(fit(3000, 2000, 640), (640, 427)); // 426.67
    assert_eq!(fit(3000, 2000, 320), (320, 213)); // 213.33
    assert_eq!(fit(10000, 10, 320), (320, 1)); // 0.32 -> at least 1
    assert_eq!(fit(500, 500, 320), (320, 320));
    assert_eq!(fit(100, 80, 150), (100, 80)); // never upscaled
    assert_eq!(fit(150, 40, 150), (150, 40));
}

#[test]
fn every_format_round_trips_in_its_own_format() {
    let rgb = gradient(300, 200);
    let dynamic = DynamicImage::ImageRgb8(rgb.clone());
    let rgba = DynamicImage::ImageRgba8(dynamic.to_rgba8());
    let cases = [
        ("jpeg", jpeg(&rgb), ImageFormat::Jpeg),
        ("png", png(&dynamic), ImageFormat::Png),
        ("gif", gif_frames(vec![rgba.to_rgba8()]), ImageFormat::Gif),
        ("webp lossy", webp_lossy(&rgb), ImageFormat::WebP),
        (
            "webp lossless",
            encode_with_image(&dynamic, ::image::ImageFormat::WebP),
            ImageFormat::WebP,
        ),
    ];
    for (case, bytes, format) in cases {
        let info = inspect(&bytes, &ImageLimits::default()).expect(case);
        assert_eq!(
            (info.format, info.width, info.height),
            (format, 300, 200),
            "{case}"
        );
        let processed = process(&bytes, &ImageLimits::default()).expect(case);
        assert_eq!(processed.format, format, "{case}");
        assert_eq!(processed.mimetype, format.mimetype(), "{case}");
        assert_eq!(processed.extension, format.extension(), "{case}");
        assert_eq!((processed.width, processed.height), (300, 200), "{case}");
        let names: Vec<_> = processed.variants.iter().map(|v| v.name).collect();
        assert_eq!(
            names,
            ["big", "large", "medium", "small", "thumbnail"],
            "{case}"
        );
        assert_eq!(
            sizes(&processed),
            [(300, 200), (300, 200), (300, 200), (300, 200), (150, 100)],
            "{case}"
        );
        for variant in &processed.variants {
            let guessed = ::image::guess_format(&variant.bytes).expect(case);
            assert_eq!(guessed.to_mime_type(), format.mimetype(), "{case}");
            let image = decode(&variant.bytes);
            assert_eq!(
                (image.width(), image.height()),
                (variant.width, variant.height)
            );
            // The gradient survives: top-left dark red channel, bottom-right bright.
            let (w, h) = (image.width(), image.height());
            let corner = rgb_at(&image, w - 1, h - 1);
            assert!(corner[0] > 200 && corner[1] > 200, "{case}: {corner:?}");
        }
    }
}

#[test]
fn variants_carry_no_metadata() {
    let mut bytes = jpeg(&gradient(64, 48));
    bytes.splice(2..2, exif_app1(1, true));
    let processed = process(&bytes, &ImageLimits::default()).expect("processes");
    for variant in &processed.variants {
        assert!(
            !variant.bytes.windows(6).any(|w| w == b"Exif\0\0"),
            "{} has EXIF",
            variant.name
        );
    }
}

/// 400x300, the left half fully transparent (red under it), the right half opaque green.
pub(super) fn half_transparent() -> RgbaImage {
    RgbaImage::from_fn(400, 300, |x, _| {
        if x < 200 {
            Rgba([255, 0, 0, 0])
        } else {
            Rgba([0, 255, 0, 255])
        }
    })
}

#[test]
fn png_variants_keep_alpha() {
    let image = half_transparent();
    let bytes = png(&DynamicImage::ImageRgba8(image));
    let processed = process(&bytes, &ImageLimits::default()).expect("processes");
    let thumbnail = decode(&processed.variants[4].bytes);
    assert_eq!((thumbnail.width(), thumbnail.height()), (150, 113));
    assert!(thumbnail.color().has_alpha());
    assert_eq!(thumbnail.get_pixel(10, 50).0[3], 0);
    let right = thumbnail.get_pixel(140, 50).0;
    assert_eq!(right[3], 255);
    assert!(close([right[0], right[1], right[2]], GREEN, 2), "{right:?}");
    // Premultiplied resizing: no red bleeding into the opaque edge.
    let edge = thumbnail.get_pixel(76, 50).0;
    assert!(edge[0] < 10, "red bled into the edge: {edge:?}");
}

/// An APP1 segment with an EXIF IFD0 holding only the Orientation tag.
fn exif_app1(orientation: u16, little_endian: bool) -> Vec<u8> {
    let u16b = |v: u16| {
        if little_endian {
            v.to_le_bytes()
        } else {
            v.to_be_bytes()
        }
    };
    let u32b = |v: u32| {
        if little_endian {
            v.to_le_bytes()
        } else {
            v.to_be_bytes()
        }
    };
    let mut tiff = if little_endian {
        b"II*\0".to_vec()
    } else {
        b"MM\0*".to_vec()
    };
    tiff.extend(u32b(8)); // IFD0 offset
    tiff.extend(u16b(1)); // one entry
    tiff.extend(u16b(0x0112)); // Orientation
    tiff.extend(u16b(3)); // SHORT
    tiff.extend(u32b(1)); // count
    tiff.extend(u16b(orientation));
    tiff.extend([0, 0]);
    tiff.extend(u32b(0)); // no next IFD
    let mut segment = vec![0xFF, 0xE1];
    segment.extend(((2 + 6 + tiff.len()) as u16).to_be_bytes());
    segment.extend(b"Exif\0\0");
    segment.extend(tiff);
    segment
}

/// Upright test picture: red, green / blue, white quadrants.
fn quadrant(width: u32, height: u32, u: u32, v: u32) -> [u8; 3] {
    match (u < width / 2, v < height / 2) {
        (true, true) => RED,
        (false, true) => GREEN,
        (true, false) => BLUE,
        (false, false) => WHITE,
    }
}

/// The stored image that a viewer applying `orientation` shows as the upright quadrants.
/// From the EXIF definitions of where stored row 0 and column 0 are shown.
fn stored_for(orientation: u8, width: u32, height: u32) -> RgbImage {
    let (sw, sh) = if orientation >= 5 {
        (height, width)
    } else {
        (width, height)
    };
    RgbImage::from_fn(sw, sh, |x, y| {
        let (u, v) = match orientation {
            1 => (x, y),
            2 => (width - 1 - x, y),
            3 => (width - 1 - x, height - 1 - y),
            4 => (x, height - 1 - y),
            5 => (y, x),
            6 => (width - 1 - y, x),
            7 => (width - 1 - y, height - 1 - x),
            8 => (y, height - 1 - x),
            _ => unreachable!(),
        };
        Rgb(quadrant(width, height, u, v))
    })
}

fn assert_upright(image: &DynamicImage, context: &str) {
    let (w, h) = (image.width(), image.height());
    for (u, v) in [
        (w / 4, h / 4),
        (3 * w / 4, h / 4),
        (w / 4, 3 * h / 4),
        (3 * w / 4, 3 * h / 4),
    ] {
        let got = rgb_at(image, u, v);
        let want = quadrant(w, h, u, v);
        assert!(
            close(got, want, 48),
            "{context}: at {u},{v} got {got:?}, want {want:?}"
        );
    }
}

#[test]
fn all_eight_exif_orientations_come_out_upright() {
    for orientation in 1..=8u8 {
        let mut bytes = jpeg(&stored_for(orientation, 300, 200));
        // EXIF goes right after SOI, as cameras write it.
        bytes.splice(
            2..2,
            exif_app1(u16::from(orientation), orientation % 2 == 0),
        );
        let context = format!("orientation {orientation}");
        let info = inspect(&bytes, &ImageLimits::default()).expect(&context);
        assert_eq!(
            (info.width, info.height, info.orientation),
            (300, 200, orientation)
        );
        let processed = process(&bytes, &ImageLimits::default()).expect(&context);
        assert_eq!((processed.width, processed.height), (300, 200), "{context}");
        assert_eq!(
            sizes(&processed),
            [(300, 200), (300, 200), (300, 200), (300, 200), (150, 100)],
            "{context}"
        );
        for variant in &processed.variants {
            assert_upright(
                &decode(&variant.bytes),
                &format!("{context} {}", variant.name),
            );
        }
    }
}

/// A PNG chunk with its CRC (png checks CRCs).
fn png_chunk(kind: &[u8; 4], data: &[u8]) -> Vec<u8> {
    let mut crc = 0xFFFF_FFFFu32;
    for &byte in kind.iter().chain(data) {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    let mut chunk = (data.len() as u32).to_be_bytes().to_vec();
    chunk.extend(kind);
    chunk.extend(data);
    chunk.extend((!crc).to_be_bytes());
    chunk
}

#[test]
fn png_exif_orientation_is_applied() {
    let stored = DynamicImage::ImageRgb8(stored_for(6, 300, 200));
    let mut bytes = png(&stored);
    // eXIf right after IHDR (8 signature + 25 IHDR bytes).
    let tiff = exif_app1(6, false)[10..].to_vec();
    bytes.splice(33..33, png_chunk(b"eXIf", &tiff));
    let processed = process(&bytes, &ImageLimits::default()).expect("processes");
    assert_eq!((processed.width, processed.height), (300, 200));
    assert_upright(&decode(&processed.variants[4].bytes), "png thumbnail");
}

#[test]
fn one_pixel_image() {
    let bytes = png(&DynamicImage::ImageRgb8(RgbImage::from_pixel(
        1,
        1,
        Rgb(BLUE),
    )));
    let processed = process(&bytes, &ImageLimits::default()).expect("processes");
    assert_eq!((processed.width, processed.height), (1, 1));
    assert_eq!(sizes(&processed), vec![(1, 1); 5]);
    assert!(close(
        rgb_at(&decode(&processed.variants[4].bytes), 0, 0),
        BLUE,
        0
    ));
    let bytes = jpeg(&RgbImage::from_pixel(1, 1, Rgb(RED)));
    let processed = process(&bytes, &ImageLimits::default()).expect("processes");
    assert_eq!(sizes(&processed), vec![(1, 1); 5]);
}

#[test]
fn very_wide_image() {
    let bytes = png(&DynamicImage::ImageRgb8(gradient(10000, 10)));
    let processed = process(&bytes, &ImageLimits::default()).expect("processes");
    assert_eq!(
        sizes(&processed),
        [(2048, 2), (1024, 1), (640, 1), (320, 1), (150, 1)]
    );
    for variant in &processed.variants {
        let image = decode(&variant.bytes);
        assert_eq!(
            (image.width(), image.height()),
            (variant.width, variant.height)
        );
    }
}

#[test]
fn smaller_than_every_box_keeps_its_size_and_is_encoded_once() {
    let bytes = jpeg(&gradient(120, 90));
    let processed = process(&bytes, &ImageLimits::default()).expect("processes");
    assert_eq!(sizes(&processed), vec![(120, 90); 5]);
    let first = &processed.variants[0].bytes;
    assert!(processed.variants.iter().all(|v| &v.bytes == first));
    // Re-encoded without metadata, so not the original bytes.
    assert_ne!(first, &bytes);
}

#[test]
fn exact_variant_dimensions() {
    let bytes = jpeg(&gradient(3000, 2000));
    let processed = process(&bytes, &ImageLimits::default()).expect("processes");
    assert_eq!(
        sizes(&processed),
        [
            (2048, 1365),
            (1024, 683),
            (640, 427),
            (320, 213),
            (150, 100)
        ]
    );
    let bytes = png(&DynamicImage::ImageRgb8(gradient(1500, 2000)));
    let processed = process(&bytes, &ImageLimits::default()).expect("processes");
    assert_eq!(
        sizes(&processed),
        [
            (1500, 2000),
            (768, 1024),
            (480, 640),
            (240, 320),
            (113, 150)
        ]
    );
    for variant in &processed.variants {
        let image = decode(&variant.bytes);
        assert_eq!(
            (image.width(), image.height()),
            (variant.width, variant.height)
        );
    }
}

#[test]
fn grey_jpeg_stays_grey() {
    let grey = ::image::GrayImage::from_fn(200, 100, |x, _| ::image::Luma([(x % 256) as u8]));
    let bytes = encode_with_image(&DynamicImage::ImageLuma8(grey), ::image::ImageFormat::Jpeg);
    let processed = process(&bytes, &ImageLimits::default()).expect("processes");
    assert_eq!(
        decode(&processed.variants[4].bytes).color(),
        ::image::ColorType::L8
    );
}

#[test]
fn truncated_png_is_rejected() {
    let bytes = png(&DynamicImage::ImageRgb8(gradient(300, 200)));
    let cut = &bytes[..bytes.len() / 2];
    let err = process(cut, &ImageLimits::default()).expect_err("truncated");
    assert_eq!(err.status(), 400);
    assert!(message(&err).contains("PNG"), "{}", message(&err));
    // The header alone is fine for inspect.
    assert!(inspect(cut, &ImageLimits::default()).is_ok());
    // Cut inside the header.
    let err = process(&bytes[..20], &ImageLimits::default()).expect_err("truncated header");
    assert_eq!(err.status(), 400);
    assert!(message(&err).contains("PNG but its header is truncated"));
}

#[test]
fn truncated_files_of_every_format_are_rejected() {
    let rgb = gradient(300, 200);
    let cases = [
        ("JPEG", jpeg(&rgb)),
        ("PNG", png(&DynamicImage::ImageRgb8(rgb.clone()))),
        (
            "GIF",
            gif_frames(vec![DynamicImage::ImageRgb8(rgb.clone()).to_rgba8()]),
        ),
        ("WebP", webp_lossy(&rgb)),
    ];
    for (name, bytes) in cases {
        // Cut well into the image data, and just before the end of it.
        for keep in [bytes.len() * 6 / 10, bytes.len() - 20] {
            let err = process(&bytes[..keep], &ImageLimits::default()).expect_err(name);
            assert_eq!(err.status(), 400, "{name} cut at {keep}");
            assert!(message(&err).contains(name), "{}", message(&err));
        }
    }
}

#[test]
fn jpeg_with_data_after_the_end_is_accepted() {
    // Motion photos and MPF files append more data after the JPEG's end marker.
    let mut bytes = jpeg(&gradient(64, 48));
    bytes.extend(b"\0\0\0\x18ftypmp42 and then a video");
    let processed = process(&bytes, &ImageLimits::default()).expect("processes");
    assert_eq!((processed.width, processed.height), (64, 48));
}

#[test]
fn truncated_jpeg_header_is_rejected() {
    let bytes = jpeg(&gradient(64, 64));
    let err = process(&bytes[..12], &ImageLimits::default()).expect_err("truncated");
    assert_eq!(err.status(), 400);
    assert!(message(&err).contains("JPEG"), "{}", message(&err));
}

#[test]
fn other_types_are_named_in_the_refusal() {
    let cases: [(&[u8], &str); 9] = [
        (
            b"<?xml version=\"1.0\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\"/>",
            "the file is SVG; accepted: JPEG, PNG, GIF, WebP",
        ),
        (
            b"  <svg width=\"10\" height=\"10\"></svg>",
            "the file is SVG;",
        ),
        (
            b"<!DOCTYPE html><html><body>hi</body></html>",
            "the file is HTML;",
        ),
        (b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n", "the file is PDF;"),
        (b"hello, this is plain text\n", "the file is text;"),
        (
            b"\0\0\0\x18ftypheic\0\0\0\0mif1heic",
            "the file is HEIC/HEIF;",
        ),
        (b"", "the file is empty;"),
        (b"\0\x01\x02\x03\xfe\xff", "the file is of an unknown type;"),
        (b"RIFF\x10\0\0\0WAVEfmt ", "not WebP"),
    ];
    for (bytes, expected) in cases {
        for err in [
            inspect(bytes, &ImageLimits::default()).expect_err(expected),
            process(bytes, &ImageLimits::default()).expect_err(expected),
        ] {
            assert_eq!(err.status(), 400, "{expected}");
            assert!(
                message(&err).contains(expected),
                "{} !~ {expected}",
                message(&err)
            );
            assert!(message(&err).contains("accepted: JPEG, PNG, GIF, WebP"));
        }
    }
}

/// A PNG that is only a signature and an IHDR: nothing to decode behind it.
fn png_header_only(width: u32, height: u32) -> Vec<u8> {
    let mut ihdr = width.to_be_bytes().to_vec();
    ihdr.extend(height.to_be_bytes());
    ihdr.extend([8, 2, 0, 0, 0]); // 8-bit RGB
    let mut bytes = b"\x89PNG\r\n\x1a\n".to_vec();
    bytes.extend(png_chunk(b"IHDR", &ihdr));
    bytes
}

#[test]
fn huge_declared_png_is_refused_before_decoding() {
    let bytes = png_header_only(100_000, 100_000);
    let start = Instant::now();
    let err = process(&bytes, &ImageLimits::default()).expect_err("too large");
    assert!(start.elapsed() < Duration::from_millis(50));
    assert_eq!(err.status(), 413);
    assert!(message(&err).contains("100000x100000"), "{}", message(&err));
    assert!(message(&err).contains("16384 pixels a side"));
    // Within the side limit but over the pixel count.
    let err = inspect(&png_header_only(10_000, 5_001), &ImageLimits::default()).expect_err("50 MP");
    assert_eq!(err.status(), 413);
    assert!(
        message(&err).contains("at most 50 megapixels"),
        "{}",
        message(&err)
    );
    // Configurable.
    let small = ImageLimits {
        max_frames: 10,
        max_animation_pixels: 100_000,
        max_pixels: 1_000,
        max_side: 100,
    };
    let bytes = png(&DynamicImage::ImageRgb8(gradient(50, 50)));
    assert_eq!(process(&bytes, &small).expect_err("limit").status(), 413);
}

#[test]
fn jpeg_bomb_is_refused_cheaply() {
    // A tiny real JPEG whose frame header claims 60000x60000.
    let mut bytes = jpeg(&gradient(16, 16));
    let sof = bytes
        .windows(2)
        .position(|w| w == [0xFF, 0xC0])
        .expect("baseline SOF0");
    bytes[sof + 5..sof + 9].copy_from_slice(&[0xEA, 0x60, 0xEA, 0x60]);
    let start = Instant::now();
    let err = process(&bytes, &ImageLimits::default()).expect_err("bomb");
    assert!(start.elapsed() < Duration::from_millis(50));
    assert_eq!(err.status(), 413);
    assert!(message(&err).contains("60000x60000"));
}

#[test]
fn webp_with_alpha_keeps_alpha() {
    let image = RgbaImage::from_fn(300, 200, |x, _| {
        Rgba([0, 0, 255, if x < 150 { 0 } else { 255 }])
    });
    let bytes = webp::Encoder::from_rgba(image.as_raw(), 300, 200)
        .encode_simple(false, 90.0)
        .expect("webp")
        .to_vec();
    let info = inspect(&bytes, &ImageLimits::default()).expect("inspect");
    assert_eq!((info.width, info.height), (300, 200));
    let processed = process(&bytes, &ImageLimits::default()).expect("processes");
    let thumbnail = decode(&processed.variants[4].bytes);
    assert!(thumbnail.color().has_alpha());
    assert!(thumbnail.get_pixel(10, 50).0[3] < 10);
    assert!(thumbnail.get_pixel(140, 50).0[3] > 245);
}

/// Wraps a simple lossy WebP into an extended (VP8X) one with an EXIF chunk after the
/// image data, where writers put it.
fn webp_with_exif(simple: &[u8], width: u32, height: u32, orientation: u16) -> Vec<u8> {
    let mut body = b"WEBP".to_vec();
    body.extend(b"VP8X");
    body.extend(10u32.to_le_bytes());
    body.extend([0x08, 0, 0, 0]); // EXIF present
    body.extend(&(width - 1).to_le_bytes()[..3]);
    body.extend(&(height - 1).to_le_bytes()[..3]);
    body.extend(&simple[12..]);
    let tiff = exif_app1(orientation, true)[10..].to_vec();
    body.extend(b"EXIF");
    body.extend((tiff.len() as u32).to_le_bytes());
    body.extend(&tiff);
    if tiff.len() % 2 == 1 {
        body.push(0);
    }
    let mut file = b"RIFF".to_vec();
    file.extend((body.len() as u32).to_le_bytes());
    file.extend(body);
    file
}

#[test]
fn webp_exif_orientation_is_applied() {
    let stored = stored_for(8, 300, 200);
    let bytes = webp_with_exif(&webp_lossy(&stored), 200, 300, 8);
    let info = inspect(&bytes, &ImageLimits::default()).expect("inspect");
    assert_eq!((info.width, info.height, info.orientation), (300, 200, 8));
    let processed = process(&bytes, &ImageLimits::default()).expect("processes");
    assert_eq!(processed.format, ImageFormat::WebP);
    assert_upright(&decode(&processed.variants[4].bytes), "webp thumbnail");
}

// The size checked is the size decoded. Each hostile file below was
// accepted by the header check (and decoded at a size it never checked) before.

fn assert_refused(bytes: &[u8], expected: &str) -> ApiError {
    let err = process(bytes, &ImageLimits::default()).expect_err(expected);
    assert!(
        matches!(err, ApiError::Validation(_) | ApiError::TooLarge(_)),
        "{expected}: {err:?}"
    );
    assert!(
        message(&err).contains(expected),
        "{} !~ {expected}",
        message(&err)
    );
    err
}

#[test]
fn jpeg_sof3_1x1_before_sof0_16384_is_refused_as_unsupported() {
    // The decoder skips SOF3 and would decode the SOF0's 16384x16384.
    let bytes = hostile::jpeg_sof3_then_large_frame(16384, 16384, false);
    assert!(bytes.len() < 1000, "{} bytes", bytes.len());
    let err = assert_refused(&bytes, "SOF3 (lossless), which is not supported");
    assert_eq!(err.status(), 400);
    // The header check alone (what `inspect` reports) says so too, not "1x1".
    let err = inspect(&bytes, &ImageLimits::default()).expect_err("inspect");
    assert!(message(&err).contains("SOF3"), "{}", message(&err));
    // Progressive, and with a frame within the limits: still refused, never decoded.
    assert_refused(
        &hostile::jpeg_sof3_then_large_frame(16384, 16384, true),
        "SOF3 (lossless)",
    );
    assert_refused(
        &hostile::jpeg_sof3_then_large_frame(64, 48, false),
        "SOF3 (lossless)",
    );
}

#[test]
fn jpeg_frame_types_the_decoder_cannot_decode_are_refused() {
    for (marker, kind) in [
        (0xC3, "SOF3 (lossless)"),
        (0xC5, "SOF5"),
        (0xC9, "SOF9 (arithmetic-coded sequential)"),
        (0xCA, "SOF10"),
        (0xCF, "SOF15"),
    ] {
        // The only frame header, rewritten: the decoder would have refused or skipped it.
        let mut bytes = hostile::jpeg(32, 32, false);
        let sof = hostile::jpeg_marker_at(&bytes, 0xC0).expect("SOF0");
        bytes[sof + 1] = marker;
        assert_refused(&bytes, kind);
    }
    // Two frame headers the decoder does take: it refuses the second, and so do we first.
    let mut bytes = hostile::jpeg(32, 32, false);
    let sof = hostile::jpeg_marker_at(&bytes, 0xC0).expect("SOF0");
    bytes.splice(
        sof..sof,
        hostile::jpeg_segment(0xC1, &hostile::jpeg_frame_payload(16, 16)),
    );
    assert_refused(&bytes, "two frame headers");
}

#[test]
fn jpeg_extended_xmp_flood_is_refused() {
    // 40,000 empty extended-XMP segments before a 32x32 image: 3.2 MB, and quadratic in
    // zune-jpeg's header parse.
    let bytes = hostile::jpeg_extended_xmp_flood(40_000);
    assert!(bytes.len() > 3_000_000);
    let err = assert_refused(&bytes, "more than 1000 marker segments");
    assert_eq!(err.status(), 400);
    // At the limit the file is decoded (the cost is bounded by 1000^2 cheap steps).
    let bytes = hostile::jpeg_extended_xmp_flood(MAX_JPEG_SEGMENTS_FOR_TESTS - 100);
    let processed = process(&bytes, &ImageLimits::default()).expect("a few hundred segments");
    assert_eq!((processed.width, processed.height), (32, 32));
}

const MAX_JPEG_SEGMENTS_FOR_TESTS: usize = sniff::jpeg_markers::MAX_JPEG_SEGMENTS;

#[test]
fn jpeg_segment_flood_between_progressive_scans_is_refused() {
    // Comment segments after the first scan: the decoder parses each between scans.
    let mut bytes = hostile::jpeg(32, 32, true);
    let eoi = bytes.len() - 2;
    let flood: Vec<u8> = (0..2000)
        .flat_map(|_| hostile::jpeg_segment(0xFE, b"x"))
        .collect();
    bytes.splice(eoi..eoi, flood);
    assert_refused(&bytes, "more than 1000 marker segments");
}

#[test]
fn jpeg_scan_flood_is_refused() {
    // Each scan is a pass over every block: 101 scans are refused before any decoding, a
    // file of 100 passes the walk (what the decoder then makes of a repeated scan is its
    // own business: here, any answer but a hang or a panic).
    let bytes = hostile::jpeg_scan_flood(sniff::jpeg_markers::MAX_JPEG_SCANS + 1);
    let err = assert_refused(&bytes, "more than 100 scans");
    assert_eq!(err.status(), 400);
    let bytes = hostile::jpeg_scan_flood(sniff::jpeg_markers::MAX_JPEG_SCANS);
    let header = sniff::read_header(&bytes, &ImageLimits::default()).expect("a header");
    sniff::jpeg_markers::jpeg_check_body(&bytes, &header).expect("100 scans pass the walk");
    let _ = process(&bytes, &ImageLimits::default());
}

#[test]
fn gif_frame_larger_than_its_screen_is_refused() {
    let bytes = hostile::gif_frame_larger_than_screen(64, 48);
    let err = assert_refused(
        &bytes,
        "first frame (64x48 at 0,0) does not fit its 1x1 screen",
    );
    assert_eq!(err.status(), 400);
}

#[test]
fn webp_canvas_and_image_data_must_agree() {
    // Still image: canvas 1x1, bitstream 64x48 (real) or declaring 16383x16383.
    assert_refused(
        &hostile::webp_canvas_smaller_than_image(64, 48),
        "its canvas is 1x1 but its image data is 64x48",
    );
    assert_refused(
        &hostile::webp_canvas_smaller_than_image(16383, 16383),
        "its canvas is 1x1 but its image data is 16383x16383",
    );
    // Animation: a 1x1 frame whose bitstream is larger than the frame.
    assert_refused(
        &hostile::webp_animation((1, 1), (1, 1), 16383, 16383),
        "its first frame is 1x1 and that frame's image data 16383x16383",
    );
    assert_refused(
        &hostile::webp_animation((100, 100), (1, 1), 64, 48),
        "its first frame is 1x1 and that frame's image data 64x48",
    );
    // A frame outside the canvas.
    assert_refused(
        &hostile::webp_animation((32, 32), (64, 48), 64, 48),
        "its canvas is 32x32 but its first frame is 64x48 at 0,0",
    );
    // The same file with canvas, frame and bitstream in agreement decodes.
    let bytes = hostile::webp_animation((64, 48), (64, 48), 64, 48);
    let processed = process(&bytes, &ImageLimits::default()).expect("animated webp");
    assert_eq!((processed.width, processed.height), (64, 48));
}

#[test]
fn ordinary_progressive_jpeg_with_metadata_still_decodes() {
    let mut bytes = hostile::jpeg(300, 200, true);
    bytes.splice(2..2, exif_app1(6, true));
    bytes.splice(2..2, hostile::jpeg_segment(0xFE, b"a comment"));
    let processed = process(&bytes, &ImageLimits::default()).expect("processes");
    assert_eq!((processed.width, processed.height), (200, 300));
}

// Memory bounded by the image. Each test below failed before: the
// header check accepted the bombs and floods, the PNG decoder inflated the ICC profile up
// to the 400 MB allocation limit, and a 16-bit image was decoded at 16 bits, then copied
// to 8.

/// Peak bytes allocated by the current thread while a closure runs: a counting global
/// allocator for this test binary, which counts only on threads that are measuring (the
/// decoders run on the calling thread).
pub(super) mod memory {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;

    struct Counting;

    thread_local! {
        static MEASURING: Cell<bool> = const { Cell::new(false) };
        static NOW: Cell<isize> = const { Cell::new(0) };
        static PEAK: Cell<isize> = const { Cell::new(0) };
    }

    fn count(delta: isize) {
        // `try_with`: never panic inside the allocator (thread teardown).
        let _ = MEASURING.try_with(|measuring| {
            if measuring.get() {
                let now = NOW.with(|n| {
                    n.set(n.get() + delta);
                    n.get()
                });
                PEAK.with(|p| p.set(p.get().max(now)));
            }
        });
    }

    // SAFETY: every call is passed on to `System` unchanged; only sizes are counted.
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            let ptr = unsafe { System.alloc(layout) };
            if !ptr.is_null() {
                count(layout.size() as isize);
            }
            ptr
        }

        unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
            let ptr = unsafe { System.alloc_zeroed(layout) };
            if !ptr.is_null() {
                count(layout.size() as isize);
            }
            ptr
        }

        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            unsafe { System.dealloc(ptr, layout) };
            count(-(layout.size() as isize));
        }

        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            let new = unsafe { System.realloc(ptr, layout, new_size) };
            if !new.is_null() {
                count(new_size as isize - layout.size() as isize);
            }
            new
        }
    }

    #[global_allocator]
    static COUNTING: Counting = Counting;

    /// Runs `f` and returns its result with the most bytes this thread had allocated (and
    /// not freed) at any point during it.
    pub fn peak<T>(f: impl FnOnce() -> T) -> (T, usize) {
        NOW.with(|n| n.set(0));
        PEAK.with(|p| p.set(0));
        MEASURING.with(|m| m.set(true));
        let result = f();
        MEASURING.with(|m| m.set(false));
        (result, PEAK.with(|p| p.get()).max(0) as usize)
    }
}

/// Decodes with the header as the check reads it, or as given, bypassing the check.
fn decode_peak(bytes: &[u8], header: sniff::Header) -> (Result<pixels::Pixels>, usize) {
    memory::peak(|| {
        codec::decode(
            bytes,
            &header,
            &ImageLimits::default(),
            (header.width, header.height),
        )
    })
}

fn png_header_of(width: u32, height: u32) -> sniff::Header {
    sniff::Header {
        format: ImageFormat::Png,
        width,
        height,
        orientation: 1,
        frames: 1,
        jpeg_scan: None,
    }
}

/// `chunks` inserted right after the IHDR of `png` (8 signature + 25 IHDR bytes).
fn with_chunks(mut png: Vec<u8>, chunks: &[Vec<u8>]) -> Vec<u8> {
    let extra: Vec<u8> = chunks.iter().flatten().copied().collect();
    png.splice(33..33, extra);
    png
}

const MIB: usize = 1 << 20;

#[test]
fn png_iccp_bomb_is_refused_while_scanning_the_header() {
    // 1x1 with a profile inflating to 16 MiB (16 KB of file), and to just over 1 MiB.
    for inflated in [16 * MIB, MIB + 1] {
        let bytes = hostile::png_iccp_bomb(inflated);
        let start = Instant::now();
        let err = inspect(&bytes, &ImageLimits::default()).expect_err("iCCP bomb");
        assert!(start.elapsed() < Duration::from_millis(500));
        assert_eq!(err.status(), 400);
        assert!(
            message(&err).contains("iCCP chunk inflates to more than 1 MiB"),
            "{}",
            message(&err)
        );
        assert_refused(&bytes, "iCCP chunk inflates to more than");
    }
}

#[test]
fn png_compressed_text_bombs_are_refused() {
    for (chunk, name) in [
        (hostile::png_ztxt(16 * MIB), "zTXt"),
        (hostile::png_itxt(16 * MIB), "iTXt"),
    ] {
        let bytes = hostile::png_zeros(1, 1, 8, 2, &[chunk]);
        assert_refused(&bytes, &format!("{name} chunk inflates to more than"));
    }
    // Each under the bound, but too much together.
    let chunks: Vec<Vec<u8>> = (0..5).map(|_| hostile::png_ztxt(MIB)).collect();
    assert_refused(
        &hostile::png_zeros(1, 1, 8, 2, &chunks),
        "inflate to more than 4 MiB together",
    );
}

#[test]
fn png_chunk_flood_is_refused() {
    let bytes = hostile::png_chunk_flood(b"tEXt", b"k\0", 1001);
    assert_refused(&bytes, "more than 1000 chunks before its image data");
    // Up to the limit, a 1x1 image still decodes.
    let bytes = hostile::png_chunk_flood(b"tEXt", b"k\0", 999);
    let processed = process(&bytes, &ImageLimits::default()).expect("999 text chunks");
    assert_eq!((processed.width, processed.height), (1, 1));
}

#[test]
fn png_with_real_sized_profile_and_text_still_decodes() {
    // A 3 KB profile (sRGB's size), a 1 MiB one (the bound), a comment and an XMP packet.
    let bytes = with_chunks(
        png(&DynamicImage::ImageRgb8(gradient(300, 200))),
        &[
            hostile::png_iccp(3144),
            hostile::png_ztxt(10_000),
            hostile::png_itxt(40_000),
        ],
    );
    let processed = process(&bytes, &ImageLimits::default()).expect("processes");
    assert_eq!((processed.width, processed.height), (300, 200));
    let bytes = with_chunks(
        png(&DynamicImage::ImageRgb8(gradient(30, 20))),
        &[hostile::png_iccp(MIB)],
    );
    process(&bytes, &ImageLimits::default()).expect("a 1 MiB profile");
}

#[test]
fn png_decoder_allocates_by_the_image_not_by_a_global_cap() {
    // Past the header check (given the header directly): the decoder itself no longer
    // inflates a profile, and what it allocates beyond the pixels is bounded.
    let bytes = hostile::png_iccp_bomb(16 * MIB);
    let (pixels, peak) = decode_peak(&bytes, png_header_of(1, 1));
    let pixels = pixels.expect("decodes without the profile");
    assert_eq!((pixels.width, pixels.height), (1, 1));
    assert!(peak < MIB, "a 1x1 PNG took {peak} bytes to decode");
    // A chunk it must keep (eXIf) larger than the allowance: 413, not 400 MB of room.
    let exif = hostile::png_chunk(b"eXIf", &vec![0; 2 * MIB]);
    let bytes = hostile::png_zeros(1, 1, 8, 2, &[exif]);
    let (result, _) = decode_peak(&bytes, png_header_of(1, 1));
    let err = result.expect_err("over the allowance");
    assert_eq!(err.status(), 413, "{err:?}");
    assert!(message(&err).contains("more memory to decode than its size allows"));
}

#[test]
fn png_16_bit_is_decoded_straight_to_8_bits() {
    // 1000x1000 RGBA: 4 MB at 8 bits, 8 MB at 16 (it was 12 MB: 16 bits, then a copy).
    let bytes = hostile::png_zeros(1000, 1000, 16, 6, &[]);
    let header = sniff::read_header(&bytes, &ImageLimits::default()).expect("header");
    let (pixels, peak) = decode_peak(&bytes, header);
    let pixels = pixels.expect("decodes");
    assert_eq!(pixels.layout, pixels::Layout::Rgba8);
    assert_eq!(pixels.data.len(), 4_000_000);
    assert!(peak < 4_000_000 + MIB, "{peak} bytes");
}

#[test]
fn png_16_bit_variants_are_8_bit_with_the_same_colours() {
    let rgba = ::image::ImageBuffer::<Rgba<u16>, Vec<u16>>::from_fn(300, 200, |x, _| {
        if x < 150 {
            Rgba([0xFFFF, 0x8000, 0x00FF, 0xFFFF])
        } else {
            Rgba([0x0000, 0x4000, 0xFFFF, 0x0000])
        }
    });
    let grey = ::image::ImageBuffer::<::image::Luma<u16>, Vec<u16>>::from_fn(300, 200, |_, _| {
        ::image::Luma([0x8080])
    });
    let processed = process(
        &png(&DynamicImage::ImageRgba16(rgba)),
        &ImageLimits::default(),
    )
    .expect("rgba16");
    let thumbnail = decode(&processed.variants[4].bytes);
    assert_eq!(thumbnail.color(), ::image::ColorType::Rgba8);
    assert!(close(rgb_at(&thumbnail, 10, 50), [255, 128, 0], 2));
    assert_eq!(thumbnail.get_pixel(10, 50).0[3], 255);
    assert_eq!(thumbnail.get_pixel(140, 50).0[3], 0);
    let processed = process(
        &png(&DynamicImage::ImageLuma16(grey)),
        &ImageLimits::default(),
    )
    .expect("luma16");
    let thumbnail = decode(&processed.variants[4].bytes);
    assert_eq!(thumbnail.color(), ::image::ColorType::L8);
    assert_eq!(thumbnail.get_pixel(10, 10).0[0], 0x80);
}

#[test]
fn rgba_resize_does_not_copy_the_source() {
    // 2000x1500 RGBA (12 MB, moved in, the big variant as is): the other variants and the
    // resizer's buffer between its two passes (1024x1500) take about 9 MB; fast_image_resize's
    // own alpha handling premultiplied into a full-size copy of the source, 12 MB more.
    let source = pixels::Pixels {
        width: 2000,
        height: 1500,
        layout: pixels::Layout::Rgba8,
        data: vec![128; 2000 * 1500 * 4],
    };
    let targets: Vec<(u32, u32)> = VARIANTS
        .iter()
        .map(|&(_, side)| fit(2000, 1500, side))
        .collect();
    let mut made = Vec::new();
    let (resized, peak) =
        memory::peak(|| resize::cascade(source, &targets, |_, image| made.push(image)));
    resized.expect("resizes");
    assert_eq!(made.len(), VARIANTS.len());
    assert!(peak < 12 * MIB, "resizing took {peak} bytes");
}

// Colour. Files with an embedded ICC profile, made here: the Display P3
// profile is moxcms's own (serialised by it), the expected sRGB values come from the
// published P3-to-sRGB matrix below, not from the library.

/// sRGB's pure red, a warm orange and a green, written as Display P3 values: untagged (or
/// read as sRGB) they look duller than they are.
const P3_BANDS: [[u8; 3]; 3] = [[234, 51, 35], [200, 120, 60], [60, 200, 80]];

fn display_p3_profile() -> Vec<u8> {
    moxcms::ColorProfile::new_display_p3()
        .encode()
        .expect("the P3 profile serialises")
}

fn srgb_profile() -> Vec<u8> {
    moxcms::ColorProfile::new_srgb()
        .encode()
        .expect("the sRGB profile serialises")
}

/// Display P3 (D65, sRGB's tone curve) to sRGB: linearise, the linear P3-to-sRGB matrix
/// (from the two sets of primaries), clip, encode.
fn p3_to_srgb(p3: [u8; 3]) -> [u8; 3] {
    const M: [[f64; 3]; 3] = [
        [1.224_940_1, -0.224_940_4, 0.0],
        [-0.042_056_9, 1.042_057_1, 0.0],
        [-0.019_637_6, -0.078_636_1, 1.098_273_5],
    ];
    let linear = p3.map(|v| {
        let v = f64::from(v) / 255.0;
        if v <= 0.040_45 {
            v / 12.92
        } else {
            ((v + 0.055) / 1.055).powf(2.4)
        }
    });
    let mut out = [0; 3];
    for (o, row) in out.iter_mut().zip(M) {
        let v = (row[0] * linear[0] + row[1] * linear[1] + row[2] * linear[2]).clamp(0.0, 1.0);
        let encoded = if v <= 0.003_130_8 {
            12.92 * v
        } else {
            1.055 * v.powf(1.0 / 2.4) - 0.055
        };
        *o = (encoded * 255.0).round() as u8;
    }
    out
}

/// Three vertical bands of [`P3_BANDS`], 450x150: each variant has the three colours at a
/// sixth, a half and five sixths of its width.
fn p3_bands() -> RgbImage {
    RgbImage::from_fn(450, 150, |x, _| Rgb(P3_BANDS[(x / 150) as usize]))
}

/// The profile in APP2 `ICC_PROFILE` segments right after SOI, split into `parts`, written
/// in the order `order` gives (sequence numbers from 1).
fn jpeg_with_icc(jpeg: &[u8], icc: &[u8], parts: usize, order: &[usize]) -> Vec<u8> {
    let size = icc.len().div_ceil(parts).max(1);
    let mut chunks: Vec<&[u8]> = icc.chunks(size).collect();
    if icc.is_empty() {
        chunks.push(icc);
    }
    assert_eq!(chunks.len(), parts);
    let mut out = jpeg[..2].to_vec();
    for &i in order {
        let mut segment = b"ICC_PROFILE\0".to_vec();
        segment.extend([i as u8 + 1, parts as u8]);
        segment.extend(chunks[i]);
        out.extend([0xFF, 0xE2]);
        out.extend(((segment.len() + 2) as u16).to_be_bytes());
        out.extend(segment);
    }
    out.extend(&jpeg[2..]);
    out
}

fn iccp_chunk(icc: &[u8]) -> Vec<u8> {
    let mut data = b"Display P3\0\0".to_vec();
    data.extend(fdeflate::compress_to_vec(icc));
    png_chunk(b"iCCP", &data)
}

/// A simple lossy WebP wrapped into an extended one with an ICCP chunk (which comes right
/// after VP8X).
fn webp_with_icc(simple: &[u8], width: u32, height: u32, icc: &[u8]) -> Vec<u8> {
    let mut body = b"WEBP".to_vec();
    body.extend(b"VP8X");
    body.extend(10u32.to_le_bytes());
    body.extend([0x20, 0, 0, 0]); // ICC profile present
    body.extend(&(width - 1).to_le_bytes()[..3]);
    body.extend(&(height - 1).to_le_bytes()[..3]);
    body.extend(b"ICCP");
    body.extend((icc.len() as u32).to_le_bytes());
    body.extend(icc);
    if icc.len() % 2 == 1 {
        body.push(0);
    }
    body.extend(&simple[12..]);
    let mut file = b"RIFF".to_vec();
    file.extend((body.len() as u32).to_le_bytes());
    file.extend(body);
    file
}

/// The three bands' colours in every variant (at a third of the band's height, a sixth,
/// a half and five sixths of its width).
fn band_colours(processed: &Processed) -> Vec<(&'static str, [[u8; 3]; 3])> {
    processed
        .variants
        .iter()
        .map(|v| {
            let image = decode(&v.bytes);
            let y = image.height() / 2;
            let at = |sixth: u32| rgb_at(&image, image.width() * sixth / 6, y);
            (v.name, [at(1), at(3), at(5)])
        })
        .collect()
}

fn assert_bands(processed: &Processed, expected: [[u8; 3]; 3], tolerance: i32, what: &str) {
    for (name, colours) in band_colours(processed) {
        for (actual, expected) in colours.into_iter().zip(expected) {
            assert!(
                close(actual, expected, tolerance),
                "{what}, {name}: {actual:?}, expected {expected:?} (bands {colours:?})"
            );
        }
    }
}

#[test]
fn p3_to_srgb_reference_values() {
    // The reference itself: P3's rendering of sRGB red is sRGB red again, and greys stay.
    assert!(close(p3_to_srgb([234, 51, 35]), RED, 1));
    assert_eq!(p3_to_srgb([128, 128, 128]), [128, 128, 128]);
    assert_eq!(p3_to_srgb([200, 120, 60]), [213, 115, 42]);
}

#[test]
fn display_p3_jpeg_variants_are_converted_to_srgb() {
    let srgb = P3_BANDS.map(p3_to_srgb);
    let untagged = jpeg(&p3_bands());
    let icc = display_p3_profile();
    let tagged = jpeg_with_icc(&untagged, &icc, 1, &[0]);
    let processed = process(&tagged, &ImageLimits::default()).expect("processes");
    assert_bands(&processed, srgb, 4, "P3 JPEG");
    // Untagged, the same numbers are taken as sRGB and kept.
    let plain = process(&untagged, &ImageLimits::default()).expect("processes");
    assert_bands(&plain, P3_BANDS, 4, "untagged JPEG");
    // A profile split over three segments, written out of order, is the same profile.
    let split = jpeg_with_icc(&untagged, &icc, 3, &[2, 0, 1]);
    let again = process(&split, &ImageLimits::default()).expect("processes");
    for (a, b) in processed.variants.iter().zip(&again.variants) {
        assert_eq!(a.bytes, b.bytes, "{}", a.name);
    }
    // The variants carry no profile: they are sRGB.
    for v in &processed.variants {
        assert!(
            !v.bytes.windows(11).any(|w| w == b"ICC_PROFILE"),
            "{}",
            v.name
        );
    }
}

#[test]
fn display_p3_png_with_alpha_is_converted_and_keeps_alpha() {
    let bands = p3_bands();
    let rgba = RgbaImage::from_fn(450, 150, |x, y| {
        let [r, g, b] = bands.get_pixel(x, y).0;
        Rgba([r, g, b, 200])
    });
    let untagged = png(&DynamicImage::ImageRgba8(rgba));
    let tagged = with_chunks(untagged.clone(), &[iccp_chunk(&display_p3_profile())]);
    let processed = process(&tagged, &ImageLimits::default()).expect("processes");
    assert_bands(&processed, P3_BANDS.map(p3_to_srgb), 2, "P3 PNG");
    for v in &processed.variants {
        let image = decode(&v.bytes);
        assert!(image.color().has_alpha(), "{}", v.name);
        assert_eq!(
            image.get_pixel(image.width() / 2, 1).0[3],
            200,
            "{}",
            v.name
        );
    }
    let plain = process(&untagged, &ImageLimits::default()).expect("processes");
    assert_bands(&plain, P3_BANDS, 1, "untagged PNG");
}

#[test]
fn display_p3_webp_variants_are_converted_to_srgb() {
    let simple = webp_lossy(&p3_bands());
    let tagged = webp_with_icc(&simple, 450, 150, &display_p3_profile());
    let processed = process(&tagged, &ImageLimits::default()).expect("processes");
    assert_eq!(processed.format, ImageFormat::WebP);
    assert_bands(&processed, P3_BANDS.map(p3_to_srgb), 5, "P3 WebP");
    let plain = process(&simple, &ImageLimits::default()).expect("processes");
    assert_bands(&plain, P3_BANDS, 5, "untagged WebP");
}

#[test]
fn grey_image_with_a_grey_profile_is_converted() {
    // A linear (gamma 1.0) grey profile: 128 is half the light, which sRGB writes as 188.
    let icc = moxcms::ColorProfile::new_gray_with_gamma(1.0)
        .encode()
        .expect("grey profile serialises");
    let grey = DynamicImage::ImageLuma8(::image::GrayImage::from_pixel(
        300,
        200,
        ::image::Luma([128]),
    ));
    let tagged = with_chunks(png(&grey), &[iccp_chunk(&icc)]);
    let processed = process(&tagged, &ImageLimits::default()).expect("processes");
    for v in &processed.variants {
        let image = decode(&v.bytes);
        assert_eq!(image.color(), ::image::ColorType::L8, "{}", v.name);
        let value = image.get_pixel(10, 10).0[0];
        assert!(value.abs_diff(188) <= 1, "{}: {value}", v.name);
    }
}

/// The variants of `bytes` equal those of `reference`, byte for byte.
fn assert_same_variants(bytes: &[u8], reference: &[u8], what: &str) {
    let processed =
        process(bytes, &ImageLimits::default()).unwrap_or_else(|e| panic!("{what}: {e:?}"));
    let expected = process(reference, &ImageLimits::default()).expect("reference processes");
    for (a, b) in processed.variants.iter().zip(&expected.variants) {
        assert_eq!(a.bytes, b.bytes, "{what}: {}", a.name);
    }
}

#[test]
fn srgb_tagged_images_are_unchanged() {
    let untagged_jpeg = jpeg(&p3_bands());
    let untagged_png = png(&DynamicImage::ImageRgb8(p3_bands()));
    let icc = srgb_profile();
    assert_same_variants(
        &jpeg_with_icc(&untagged_jpeg, &icc, 1, &[0]),
        &untagged_jpeg,
        "sRGB-tagged JPEG",
    );
    assert_same_variants(
        &with_chunks(untagged_png.clone(), &[iccp_chunk(&icc)]),
        &untagged_png,
        "sRGB-tagged PNG",
    );
    // An sRGB chunk before an iCCP one: the image is sRGB, the profile is not read.
    let srgb_chunk = png_chunk(b"sRGB", &[0]);
    assert_same_variants(
        &with_chunks(
            untagged_png.clone(),
            &[srgb_chunk, iccp_chunk(&display_p3_profile())],
        ),
        &untagged_png,
        "sRGB chunk first",
    );
}

#[test]
fn broken_profiles_do_not_fail_the_upload() {
    let untagged_jpeg = jpeg(&p3_bands());
    let untagged_png = png(&DynamicImage::ImageRgb8(p3_bands()));
    let p3 = display_p3_profile();
    let cmyk_header = {
        // A well-formed header of a CMYK output profile, on an RGB image.
        let mut icc = p3.clone();
        icc[16..20].copy_from_slice(b"CMYK");
        icc
    };
    let profiles: Vec<(&str, Vec<u8>)> = vec![
        ("truncated", p3[..p3.len() / 2].to_vec()),
        ("header only", p3[..128].to_vec()),
        ("empty", Vec::new()),
        ("zeros", vec![0; 3144]),
        ("text", b"not a profile at all".repeat(20)),
        ("CMYK", cmyk_header),
    ];
    for (what, icc) in &profiles {
        assert_same_variants(
            &jpeg_with_icc(&untagged_jpeg, icc, 1, &[0]),
            &untagged_jpeg,
            &format!("JPEG, {what} profile"),
        );
        assert_same_variants(
            &with_chunks(untagged_png.clone(), &[iccp_chunk(icc)]),
            &untagged_png,
            &format!("PNG, {what} profile"),
        );
    }
    // Segments that do not make a profile: one of two missing, a number given twice.
    let halves: Vec<&[u8]> = p3.chunks(p3.len().div_ceil(2)).collect();
    let mut missing = jpeg_with_icc(&untagged_jpeg, halves[0], 1, &[0]);
    missing[2 + 4 + 12 + 1] = 2; // "1 of 1" becomes "1 of 2"
    assert_same_variants(&missing, &untagged_jpeg, "JPEG, one segment of two");
    let twice = jpeg_with_icc(&untagged_jpeg, &p3, 2, &[0, 0]);
    assert_same_variants(&twice, &untagged_jpeg, "JPEG, segment 1 twice");
    // An iCCP chunk whose stream does not inflate.
    let mut bad = b"P3\0\0".to_vec();
    bad.extend([0x78, 0x9C, 0xFF, 0xFF, 0xFF]);
    assert_same_variants(
        &with_chunks(untagged_png.clone(), &[png_chunk(b"iCCP", &bad)]),
        &untagged_png,
        "PNG, iCCP that does not inflate",
    );
}

#[test]
fn embedded_profiles_are_read_whole_and_bounded() {
    let p3 = display_p3_profile();
    let jpeg = jpeg(&gradient(16, 16));
    let read = |bytes: &[u8], format| {
        colour::embedded_profile(bytes, format).map(|p| p.map(|p| p.into_owned()))
    };
    for parts in 1..=4 {
        let order: Vec<usize> = (0..parts).rev().collect();
        let bytes = jpeg_with_icc(&jpeg, &p3, parts, &order);
        assert_eq!(
            read(&bytes, ImageFormat::Jpeg),
            Ok(Some(p3.clone())),
            "{parts} parts"
        );
    }
    assert_eq!(read(&jpeg, ImageFormat::Jpeg), Ok(None));
    // Over 1 MiB in 17 segments: not assembled.
    let large = vec![7; colour::MAX_PROFILE + 1];
    let bytes = jpeg_with_icc(&jpeg, &large, 17, &(0..17).collect::<Vec<_>>());
    assert!(read(&bytes, ImageFormat::Jpeg).is_err());
    let png_bytes = with_chunks(
        png(&DynamicImage::ImageRgb8(gradient(16, 16))),
        &[iccp_chunk(&p3)],
    );
    assert_eq!(read(&png_bytes, ImageFormat::Png), Ok(Some(p3.clone())));
    let webp_bytes = webp_with_icc(&webp_lossy(&gradient(16, 16)), 16, 16, &p3);
    assert_eq!(read(&webp_bytes, ImageFormat::WebP), Ok(Some(p3.clone())));
}

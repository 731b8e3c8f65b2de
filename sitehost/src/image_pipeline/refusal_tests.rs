//! Truncated, foreign and hostile files are refused with a message that names what was
//! wrong, before they cost more than their size; ordinary ones still decode. The size checked is the
//! size decoded: each hostile file here was accepted by the header check (and decoded at a
//! size it never checked) before.

use std::time::{Duration, Instant};

use ::image::DynamicImage;

use super::tests::{
    assert_refused, exif_app1, gif_frames, gradient, jpeg, message, png, png_chunk, webp_lossy,
};
use super::*;

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
        webp_siblings_at_upload: true,
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

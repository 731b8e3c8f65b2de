//! Memory bounded by the image. Each test here failed before: the header check accepted the
//! bombs and floods, the PNG decoder inflated the ICC profile up to the 400 MB allocation
//! limit, and a 16-bit image was decoded at 16 bits, then copied to 8.

use std::time::{Duration, Instant};

use ::image::{DynamicImage, GenericImageView, Rgba};

use super::tests::{
    assert_refused, close, decode, gradient, memory, message, png, rgb_at, with_chunks,
};
use super::*;
use crate::domain::image_record::fit;

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

#[test]
fn a_lossy_webp_decode_is_bounded_by_its_pixels_and_its_file() {
    // A 64x48 lossy WebP whose VP8 chunk carries 2 MiB of bytes past its partitions (the
    // last partition runs to the chunk's end). image-webp reads that partition with
    // `read_to_end`, whose buffer grows by doubling, then copies it into words: outside
    // `max_alloc`, up to three times the file. The proptest's bound
    // (`checked_size_is_decoded_size_or_refused`) counts it; the upload limits bound it.
    let bytes = hostile::webp_lossy_padded(64, 48, 2 * MIB);

    let header = sniff::read_header(&bytes, &ImageLimits::default()).expect("a WebP header");
    let (pixels, peak) = decode_peak(&bytes, header);
    let pixels = pixels.expect("the padded WebP decodes");
    assert_eq!((pixels.width, pixels.height), (64, 48));
    let by_pixels = 64 * 48 * 8 + MIB;
    // Measured: 6,310,347 bytes for the 2,097,408-byte file.
    assert!(peak > by_pixels + 2 * bytes.len(), "{peak} bytes");
    assert!(
        peak <= by_pixels + 3 * bytes.len(),
        "{peak} bytes for a {}-byte file",
        bytes.len()
    );
}

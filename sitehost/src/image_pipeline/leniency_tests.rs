//! What browsers show is taken (the leniency of libjpeg, libpng and the GIF spec), what they
//! cannot show is refused in a partner's words. Every file is made here.

use ::image::{DynamicImage, GenericImageView, Rgb, RgbImage};

use super::hostile::png_chunk;
use super::*;

fn gradient(width: u32, height: u32) -> RgbImage {
    RgbImage::from_fn(width, height, |x, y| {
        Rgb([
            (x * 255 / width.max(1)) as u8,
            (y * 255 / height.max(1)) as u8,
            ((x + y) % 256) as u8,
        ])
    })
}

fn jpeg(image: &RgbImage, progressive: bool) -> Vec<u8> {
    let mut out = Vec::new();
    let mut encoder = jpeg_encoder::Encoder::new(&mut out, 90);
    encoder.set_progressive(progressive);
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

fn png(image: &DynamicImage) -> Vec<u8> {
    let mut out = std::io::Cursor::new(Vec::new());
    image
        .write_to(&mut out, ::image::ImageFormat::Png)
        .expect("test png encodes");
    out.into_inner()
}

/// The partner-facing message of a refusal.
fn message(err: &ApiError) -> String {
    match err {
        ApiError::Validation(fields) => fields["upload"].join(" "),
        ApiError::TooLarge(m) => m.clone(),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// No decoder's internals reach the partner: no Rust debug output, no codec jargon.
fn assert_in_partner_words(message: &str) {
    for internal in [
        "{",
        "ChunkType",
        "LZW",
        "Huffman",
        "libjpeg",
        "zune",
        "DecodingError",
    ] {
        assert!(!message.contains(internal), "{internal} in: {message}");
    }
}

fn variants_of(bytes: &[u8]) -> Processed {
    process(bytes, &ImageLimits::default()).expect("processes")
}

fn assert_same_pixels(a: &Processed, b: &Processed) {
    for (a, b) in a.variants.iter().zip(&b.variants) {
        let (a, b) = (
            ::image::load_from_memory(&a.bytes).expect("decodes"),
            ::image::load_from_memory(&b.bytes).expect("decodes"),
        );
        assert_eq!(a.dimensions(), b.dimensions());
        assert_eq!(a.to_rgba8().as_raw(), b.to_rgba8().as_raw());
    }
}

/// `junk` inserted before the second marker segment after SOI (the one after APP0/DQT).
fn with_stray_bytes(jpeg: &[u8], junk: &[u8]) -> Vec<u8> {
    let second = 2 + 2 + usize::from(u16::from_be_bytes([jpeg[4], jpeg[5]]));
    let mut bytes = jpeg.to_vec();
    bytes.splice(second..second, junk.iter().copied());
    bytes
}

#[test]
fn stray_bytes_before_a_jpeg_marker_are_skipped_as_libjpeg_does() {
    // Full-size (decoded whole), reduced-scale (2400 wide: 7/8) and progressive files.
    for (image, progressive) in [
        (gradient(64, 48), false),
        (gradient(2400, 100), false),
        (gradient(300, 200), true),
    ] {
        let clean = jpeg(&image, progressive);
        // Photoshop's stray bytes are zeros; any bytes but 0xFF are skipped up to the next
        // marker, and so is a stuffed FF 00 where a marker should be.
        for junk in [&b"\0\0"[..], b"junk\xFF\0more"] {
            let bytes = with_stray_bytes(&clean, junk);
            let processed = variants_of(&bytes);
            assert_eq!((processed.width, processed.height), image.dimensions());
            assert_same_pixels(&processed, &variants_of(&clean));
        }
    }
}

#[test]
fn a_png_whose_data_is_complete_without_its_end_chunk_is_taken() {
    let image = DynamicImage::ImageRgb8(gradient(120, 80));
    let whole = png(&image);
    assert_eq!(&whole[whole.len() - 8..whole.len() - 4], b"IEND");
    let without_end = &whole[..whole.len() - 12];
    assert_same_pixels(&variants_of(without_end), &variants_of(&whole));
}

#[test]
fn a_png_cut_inside_its_image_data_is_refused_in_a_partners_words() {
    let whole = png(&DynamicImage::ImageRgb8(gradient(300, 200)));
    for keep in [whole.len() / 2, whole.len() - 30] {
        let err = process(&whole[..keep], &ImageLimits::default()).expect_err("truncated");
        assert_eq!(err.status(), 400);
        let message = message(&err);
        assert!(
            message.contains("PNG") && message.contains("truncated"),
            "{message}"
        );
        assert!(message.contains("upload"), "says what to do: {message}");
        assert_in_partner_words(&message);
    }
}

/// A 2x2 GIF: indices 0, 1 / 1, 0, with `palette` as its global colour table (none if
/// empty), `extensions` before the image.
fn gif_2x2(palette: &[u8], extensions: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    {
        // The encoder wants a palette: a stand-in, taken out below if none is asked for.
        let stand_in = [9, 9, 9, 9, 9, 9];
        let table = if palette.is_empty() {
            &stand_in[..]
        } else {
            palette
        };
        let mut encoder = gif::Encoder::new(&mut out, 2, 2, table).expect("gif header");
        let mut frame = gif::Frame::from_indexed_pixels(2, 2, vec![0, 1, 1, 0], None);
        frame.palette = None;
        encoder.write_frame(&frame).expect("gif frame");
    }
    if palette.is_empty() {
        // Logical screen flags: no global table; its 2 entries (6 bytes) after byte 13 go.
        out[10] &= !0x87;
        out.drain(13..19);
    }
    let image = out
        .iter()
        .position(|&b| b == 0x2C)
        .expect("an image descriptor");
    out.splice(image..image, extensions.iter().copied());
    out
}

fn rgba_of_big_variant(bytes: &[u8]) -> ::image::RgbaImage {
    let processed = variants_of(bytes);
    ::image::load_from_memory(&processed.variants[0].bytes)
        .expect("decodes")
        .to_rgba8()
}

#[test]
fn unknown_gif_extensions_are_skipped() {
    let palette = [255, 0, 0, 0, 0, 255];
    let plain = rgba_of_big_variant(&gif_2x2(&palette, &[]));
    // Label 0x99 is no extension the GIF spec defines: two sub-blocks, then the terminator.
    let unknown = b"\x21\x99\x03abc\x02de\x00";
    assert_eq!(
        rgba_of_big_variant(&gif_2x2(&palette, unknown)).as_raw(),
        plain.as_raw()
    );
}

#[test]
fn a_gif_without_a_colour_table_gets_the_default_palette() {
    let bytes = gif_2x2(&[], &[]);
    assert_eq!(bytes[10] & 0x80, 0, "no global colour table");
    let image = rgba_of_big_variant(&bytes);
    // Index 0 black, index 1 white, as the GIF spec recommends.
    assert_eq!(image.get_pixel(0, 0).0, [0, 0, 0, 255]);
    assert_eq!(image.get_pixel(1, 0).0, [255, 255, 255, 255]);
}

/// An 8x1 PNG of `depth`-bit grey pixels (`samples`, one per pixel) with a tRNS chunk of
/// `transparent` (16 bits, as the chunk stores it).
fn grey_png(depth: u8, samples: [u8; 8], transparent: u16) -> Vec<u8> {
    let mut ihdr = Vec::new();
    ihdr.extend(8u32.to_be_bytes());
    ihdr.extend(1u32.to_be_bytes());
    ihdr.extend([depth, 0, 0, 0, 0]);
    let mut row = vec![0u8]; // filter: none
    let per_byte = 8 / usize::from(depth);
    for chunk in samples.chunks(per_byte) {
        let mut byte = 0u8;
        for (i, &sample) in chunk.iter().enumerate() {
            byte |= sample << (8 - usize::from(depth) * (i + 1));
        }
        row.push(byte);
    }
    let mut bytes = b"\x89PNG\r\n\x1a\n".to_vec();
    bytes.extend(png_chunk(b"IHDR", &ihdr));
    bytes.extend(png_chunk(b"tRNS", &transparent.to_be_bytes()));
    bytes.extend(png_chunk(b"IDAT", &fdeflate::compress_to_vec(&row)));
    bytes.extend(png_chunk(b"IEND", &[]));
    bytes
}

#[test]
fn png_transparency_values_are_masked_to_the_bit_depth() {
    // 1-bit grey: white (1) is the transparent value; the chunk's unused high bits are set.
    let samples = [0, 1, 0, 1, 1, 0, 0, 1];
    for (depth, transparent) in [(1, 0x0101), (1, 0xFFFF), (2, 0x0107), (4, 0x00FF)] {
        let max = (1u8 << depth) - 1;
        let samples = samples.map(|s| s * max);
        let image = rgba_of_big_variant(&grey_png(depth, samples, transparent));
        for (x, &sample) in samples.iter().enumerate() {
            let alpha = image.get_pixel(x as u32, 0).0[3];
            assert_eq!(
                alpha,
                if sample == max { 0 } else { 255 },
                "{depth}-bit, tRNS {transparent:#06x}, pixel {x}"
            );
        }
    }
    // A value that masks to none of the pixels leaves them opaque.
    let image = rgba_of_big_variant(&grey_png(1, [0; 8], 0x0100 | 1));
    assert!(image.pixels().all(|p| p.0[3] == 255));
}

/// A JPEG whose entropy-coded data is damaged in the middle: bytes that are no valid
/// Huffman code (0xFF 0x00 is a stuffed run of ones), as a bad disk or transfer leaves.
fn jpeg_with_corrupt_scan(image: &RgbImage, progressive: bool) -> Vec<u8> {
    let mut bytes = jpeg(image, progressive);
    let sos = bytes
        .windows(2)
        .position(|w| w == [0xFF, 0xDA])
        .expect("a scan");
    let at = sos + (bytes.len() - sos) / 3;
    let damage: Vec<u8> = [0xFF, 0x00].repeat(200);
    bytes.splice(at..at + damage.len(), damage);
    bytes
}

#[test]
fn a_jpeg_with_corrupt_image_data_is_a_400_that_says_so() {
    for (image, progressive) in [
        (gradient(64, 480), false),
        (gradient(2400, 300), false),
        (gradient(300, 400), true),
        (gradient(2400, 300), true),
    ] {
        let bytes = jpeg_with_corrupt_scan(&image, progressive);
        let err = process(&bytes, &ImageLimits::default()).expect_err("corrupt");
        assert_eq!(
            err.status(),
            400,
            "{image:?} progressive {progressive}",
            image = image.dimensions()
        );
        let message = message(&err);
        assert!(
            message.contains("JPEG") && message.contains("corrupt"),
            "{message}"
        );
        assert_in_partner_words(&message);
    }
}

#[test]
fn corrupt_png_and_gif_image_data_are_refused_in_a_partners_words() {
    // A PNG whose IDAT holds bytes that are no zlib stream, with a valid CRC.
    let mut bytes = b"\x89PNG\r\n\x1a\n".to_vec();
    bytes.extend(png_chunk(b"IHDR", &[0, 0, 0, 8, 0, 0, 0, 8, 8, 2, 0, 0, 0]));
    bytes.extend(png_chunk(b"IDAT", b"this is not zlib data at all"));
    bytes.extend(png_chunk(b"IEND", &[]));
    let err = process(&bytes, &ImageLimits::default()).expect_err("corrupt png");
    assert_eq!(err.status(), 400);
    let text = message(&err);
    assert!(text.contains("PNG") && text.contains("corrupt"), "{text}");
    assert_in_partner_words(&text);

    // A GIF whose LZW data starts with a code past the table (invalid).
    let mut gif = gif_2x2(&[0, 0, 0, 255, 255, 255], &[]);
    let image = gif.iter().position(|&b| b == 0x2C).expect("an image");
    // Descriptor (10 bytes), LZW code size, sub-block length, then the codes: all ones is
    // code 7 of 3 bits, past the 6 the table holds.
    let len = usize::from(gif[image + 11]);
    gif[image + 12..image + 12 + len].fill(0xFF);
    let err = process(&gif, &ImageLimits::default()).expect_err("corrupt gif");
    assert_eq!(err.status(), 400);
    let text = message(&err);
    assert!(text.contains("GIF") && text.contains("corrupt"), "{text}");
    assert_in_partner_words(&text);
}

#[test]
fn leniency_reopens_no_hardening_case() {
    // A segment flood with stray bytes in it is refused as a flood, and cheaply.
    let flood = with_stray_bytes(&super::hostile::jpeg_extended_xmp_flood(1200), b"\0\0\0");
    let start = std::time::Instant::now();
    let err = process(&flood, &ImageLimits::default()).expect_err("flood");
    assert!(start.elapsed() < std::time::Duration::from_millis(200));
    assert!(
        message(&err).contains("more than 1000 marker segments"),
        "{}",
        message(&err)
    );
    // A GIF given the default palette still has its first frame checked against its screen.
    let mut big_frame = super::hostile::gif_frame_larger_than_screen(64, 64);
    let flags = big_frame[10];
    if flags & 0x80 != 0 {
        big_frame.drain(13..13 + (3 << ((flags & 0x07) + 1)));
        big_frame[10] &= !0x87;
    }
    let err = process(&big_frame, &ImageLimits::default()).expect_err("frame past the screen");
    assert!(message(&err).contains("does not fit"), "{}", message(&err));
}

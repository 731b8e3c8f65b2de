//! Colour. Files with an embedded ICC profile, made here: the Display P3 profile is moxcms's
//! own (serialised by it), the expected sRGB values come from the published P3-to-sRGB
//! matrix, not from the library.

use ::image::{DynamicImage, GenericImageView, Rgb, RgbImage, Rgba, RgbaImage};

use super::tests::{
    close, decode, gradient, jpeg, png, png_chunk, rgb_at, webp_lossy, with_chunks, RED,
};
use super::*;

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

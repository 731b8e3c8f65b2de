//! The AVIF siblings made on first request (`sibling_of_variant` with
//! `SiblingFormat::Avif`): their size, alpha, grey, the bound and animated GIFs. No AVIF
//! decoder is linked here: the files' boxes say what they hold, and the page test
//! (cli/tests/sitehost/webp_page.rs) has Chromium decode one.

use ::image::codecs::gif::GifEncoder;
use ::image::{DynamicImage, Frame, GrayImage, Luma, Rgb, RgbImage, Rgba, RgbaImage};

use super::sibling_tests::encoded;
use super::*;

/// A variant's sibling in `format` as made on first request when its original is not
/// stored.
fn of_variant(variant: &[u8], format: SiblingFormat) -> Result<Option<Vec<u8>>> {
    let source = SiblingSource {
        variant,
        original: None,
        size: "medium",
    };
    sibling_of_variant(source, format, &ImageLimits::default())
}

fn avif_of(variant: &[u8]) -> Option<Vec<u8>> {
    of_variant(variant, SiblingFormat::Avif).expect("answered")
}

/// The image size of an AVIF's first `ispe` box (the colour image's): width, height.
fn avif_size(avif: &[u8]) -> (u32, u32) {
    let at = avif
        .windows(4)
        .position(|w| w == b"ispe")
        .expect("an ispe box");
    let be = |i: usize| u32::from_be_bytes(avif[i..i + 4].try_into().expect("4 bytes"));
    // Box type, then version and flags (4 bytes), then width and height.
    (be(at + 8), be(at + 12))
}

fn is_avif(bytes: &[u8]) -> bool {
    bytes.get(4..12) == Some(&b"ftypavif"[..])
}

/// Whether an AVIF carries an alpha plane (an auxiliary image of the alpha URN).
fn has_alpha(avif: &[u8]) -> bool {
    let urn = b"urn:mpeg:mpegB:cicp:systems:auxiliary:alpha";
    avif.windows(urn.len()).any(|w| w == urn)
}

#[test]
fn a_variant_gets_an_avif_of_its_size() {
    let photo = RgbImage::from_fn(320, 200, |x, y| {
        Rgb([(x % 256) as u8, (y % 256) as u8, ((x * y) % 256) as u8])
    });
    let jpeg = encoded(&DynamicImage::ImageRgb8(photo), ::image::ImageFormat::Jpeg);
    let avif = avif_of(&jpeg).expect("an AVIF");
    assert!(is_avif(&avif));
    assert_eq!(avif_size(&avif), (320, 200));
    assert!(!has_alpha(&avif), "an opaque image has no alpha plane");
}

#[test]
fn transparency_is_kept_and_grey_is_expanded() {
    let png = encoded(
        &DynamicImage::ImageRgba8(super::tests::half_transparent()),
        ::image::ImageFormat::Png,
    );
    let avif = avif_of(&png).expect("an AVIF");
    assert_eq!(avif_size(&avif), (400, 300));
    assert!(has_alpha(&avif));
    // Grey, with and without alpha, and a 1x1 image.
    let grey = GrayImage::from_fn(64, 48, |x, _| Luma([(x * 4) as u8]));
    let grey_alpha = DynamicImage::ImageLumaA8(::image::ImageBuffer::from_fn(64, 48, |x, _| {
        ::image::LumaA([(x * 4) as u8, if x < 32 { 0 } else { 255 }])
    }));
    for (image, alpha) in [
        (DynamicImage::ImageLuma8(grey), false),
        (grey_alpha, true),
        (DynamicImage::ImageRgb8(RgbImage::new(1, 1)), false),
    ] {
        let png = encoded(&image, ::image::ImageFormat::Png);
        let avif = avif_of(&png).expect("an AVIF");
        assert_eq!(avif_size(&avif), (image.width(), image.height()));
        assert_eq!(has_alpha(&avif), alpha);
    }
}

#[test]
fn a_variant_past_the_bound_gets_none_and_is_not_encoded() {
    // One row more than the bound allows, flat so that the JPEG is small.
    let side = 1024;
    let rows = u32::try_from(AVIF_MAX_PIXELS / u64::from(side)).expect("fits") + 1;
    let flat = RgbImage::from_pixel(side, rows, Rgb([40, 120, 200]));
    let jpeg = encoded(&DynamicImage::ImageRgb8(flat), ::image::ImageFormat::Jpeg);
    assert_eq!(avif_of(&jpeg), None);
    // Its WebP is made as ever.
    let webp = of_variant(&jpeg, SiblingFormat::Webp);
    assert!(webp.expect("a WebP").is_some());
}

#[test]
fn an_animated_gif_variant_gets_no_avif_and_a_still_one_does() {
    let frame = |colour: [u8; 4]| Frame::new(RgbaImage::from_pixel(40, 30, Rgba(colour)));
    let mut animated = Vec::new();
    GifEncoder::new(&mut animated)
        .encode_frames([frame([255, 0, 0, 255]), frame([0, 0, 255, 255])])
        .expect("an animated GIF");
    assert_eq!(avif_of(&animated), None);
    let mut still = Vec::new();
    GifEncoder::new(&mut still)
        .encode_frames([frame([0, 255, 0, 255])])
        .expect("a GIF");
    let avif = avif_of(&still).expect("an AVIF");
    assert_eq!(avif_size(&avif), (40, 30));
}

#[test]
fn bad_input_is_an_error_never_a_panic() {
    assert!(of_variant(b"not an image", SiblingFormat::Avif).is_err());
    let pixels = [0u8; 12];
    let settings = AvifSettings::sibling(80.0);
    // Four RGB pixels, as 2x2: fine; as anything else, or out of range: refused.
    assert!(encode_avif(&pixels, 2, 2, 3, settings).is_ok());
    assert!(encode_avif(&pixels, 3, 2, 3, settings).is_err());
    assert!(encode_avif(&pixels, 2, 2, 2, settings).is_err());
    for bad in [
        AvifSettings {
            quality: 0.0,
            ..settings
        },
        AvifSettings {
            quality: 101.0,
            ..settings
        },
        AvifSettings {
            alpha_quality: f32::NAN,
            ..settings
        },
        AvifSettings {
            speed: 0,
            ..settings
        },
        AvifSettings {
            speed: 11,
            ..settings
        },
    ] {
        assert!(encode_avif(&pixels, 2, 2, 3, bad).is_err(), "{bad:?}");
    }
}

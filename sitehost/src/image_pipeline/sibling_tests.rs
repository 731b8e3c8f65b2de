//! The WebP siblings of the small and thumbnail variants (`image::WEBP_SIBLINGS_AT_UPLOAD`).

use std::io::Cursor;

use ::image::{DynamicImage, GenericImageView, ImageReader, Rgb, RgbImage};

use super::*;

pub(super) fn encoded(image: &DynamicImage, format: ::image::ImageFormat) -> Vec<u8> {
    let mut out = Cursor::new(Vec::new());
    image
        .write_to(&mut out, format)
        .expect("test image encodes");
    out.into_inner()
}

fn webp_of(bytes: &[u8]) -> DynamicImage {
    let reader = ImageReader::new(Cursor::new(bytes))
        .with_guessed_format()
        .expect("reads");
    assert_eq!(reader.format(), Some(::image::ImageFormat::WebP));
    reader.decode().expect("a WebP sibling decodes")
}

#[test]
fn small_and_thumbnail_get_webp_siblings_of_their_size() {
    let photo = RgbImage::from_fn(1200, 900, |x, y| {
        Rgb([(x % 256) as u8, (y % 256) as u8, ((x * y) % 256) as u8])
    });
    let bytes = encoded(&DynamicImage::ImageRgb8(photo), ::image::ImageFormat::Jpeg);
    let processed = process(&bytes, &ImageLimits::default()).expect("processes");
    for variant in &processed.variants {
        match (
            &variant.webp,
            WEBP_SIBLINGS_AT_UPLOAD.contains(&variant.name),
        ) {
            (Some(webp), true) => {
                let sibling = webp_of(webp);
                assert_eq!(
                    sibling.dimensions(),
                    (variant.width, variant.height),
                    "{}",
                    variant.name
                );
            }
            (None, false) => {}
            (webp, _) => panic!(
                "{}: sibling {:?}",
                variant.name,
                webp.as_ref().map(Vec::len)
            ),
        }
    }
}

#[test]
fn webp_siblings_keep_alpha() {
    let image = super::tests::half_transparent();
    let bytes = encoded(&DynamicImage::ImageRgba8(image), ::image::ImageFormat::Png);
    let processed = process(&bytes, &ImageLimits::default()).expect("processes");
    let thumbnail = &processed.variants[4];
    let sibling = webp_of(thumbnail.webp.as_deref().expect("a sibling"));
    assert!(sibling.color().has_alpha());
    assert_eq!(sibling.get_pixel(10, 50).0[3], 0);
    assert_eq!(sibling.get_pixel(140, 50).0[3], 255);
}

#[test]
fn webp_originals_and_images_smaller_than_the_boxes() {
    // A WebP's variants are WebPs already: no siblings.
    let small = DynamicImage::ImageRgb8(RgbImage::from_pixel(100, 80, Rgb([9, 99, 199])));
    let webp = webp::Encoder::from_rgb(small.as_bytes(), 100, 80)
        .encode_simple(false, 90.0)
        .expect("test webp")
        .to_vec();
    let processed = process(&webp, &ImageLimits::default()).expect("processes");
    assert!(processed.variants.iter().all(|v| v.webp.is_none()));
    // Every variant of a 100x80 PNG is the same size: encoded once, and the sibling once,
    // given to the sizes that have one.
    let png = encoded(&small, ::image::ImageFormat::Png);
    let processed = process(&png, &ImageLimits::default()).expect("processes");
    let names: Vec<&str> = processed
        .variants
        .iter()
        .filter(|v| v.webp.is_some())
        .map(|v| v.name)
        .collect();
    assert_eq!(names, WEBP_SIBLINGS_AT_UPLOAD);
    assert_eq!(
        webp_of(processed.variants[3].webp.as_deref().expect("webp")).dimensions(),
        (100, 80)
    );
}

#[test]
fn a_stored_variant_gets_the_sibling_the_upload_would_have_made() {
    // The siblings made on first request come from the stored variant: same size, same
    // look, alpha kept.
    let photo = RgbImage::from_fn(1200, 900, |x, y| {
        Rgb([(x % 256) as u8, (y % 256) as u8, ((x * y) % 256) as u8])
    });
    let bytes = encoded(&DynamicImage::ImageRgb8(photo), ::image::ImageFormat::Jpeg);
    let processed = process(&bytes, &ImageLimits::default()).expect("processes");
    for variant in &processed.variants {
        let made =
            webp_sibling_of_variant(&variant.bytes, &ImageLimits::default()).expect("a sibling");
        let sibling = webp_of(&made);
        assert_eq!(sibling.dimensions(), (variant.width, variant.height));
        if let Some(at_upload) = &variant.webp {
            // From the JPEG's decoded pixels rather than the resized ones: close, not equal.
            let ratio = made.len() as f64 / at_upload.len() as f64;
            assert!((0.8..1.25).contains(&ratio), "{}: {ratio}", variant.name);
        }
    }
    let png = encoded(
        &DynamicImage::ImageRgba8(super::tests::half_transparent()),
        ::image::ImageFormat::Png,
    );
    let processed = process(&png, &ImageLimits::default()).expect("processes");
    let made = webp_sibling_of_variant(&processed.variants[2].bytes, &ImageLimits::default())
        .expect("a sibling");
    let sibling = webp_of(&made);
    assert!(sibling.color().has_alpha());
    assert_eq!(sibling.get_pixel(10, 50).0[3], 0);

    // What is not an image is refused as a bad upload would be, never a panic.
    let refused = webp_sibling_of_variant(b"not an image", &ImageLimits::default());
    assert!(refused.is_err());
}

//! The WebP siblings: of the small and thumbnail variants at upload
//! (`image::WEBP_SIBLINGS_AT_UPLOAD`), and of every variant on first request, from the
//! original at each size's quality.

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

/// A variant's WebP sibling as made on first request when its original is not stored.
pub(super) fn webp_sibling_of_variant(variant: &[u8], limits: &ImageLimits) -> Result<Vec<u8>> {
    let source = SiblingSource {
        variant,
        original: None,
        size: "medium",
    };
    let made = sibling_of_variant(source, SiblingFormat::Webp, limits)?;
    Ok(made.expect("every still or animated variant gets a WebP sibling"))
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
    // The siblings made on first request come from the stored variant and its original: same
    // size, same look, alpha kept.
    let photo = RgbImage::from_fn(1200, 900, |x, y| {
        Rgb([(x % 256) as u8, (y % 256) as u8, ((x * y) % 256) as u8])
    });
    let bytes = encoded(&DynamicImage::ImageRgb8(photo), ::image::ImageFormat::Jpeg);
    let processed = process(&bytes, &ImageLimits::default()).expect("processes");
    for variant in &processed.variants {
        let source = SiblingSource {
            variant: &variant.bytes,
            original: Some(&bytes),
            size: variant.name,
        };
        let made = sibling_of_variant(source, SiblingFormat::Webp, &ImageLimits::default())
            .expect("a sibling")
            .expect("a WebP");
        let sibling = webp_of(&made);
        assert_eq!(sibling.dimensions(), (variant.width, variant.height));
        if let Some(at_upload) = &variant.webp {
            // Resized from the original alone rather than down the upload's cascade: close,
            // not equal.
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

/// A textured photo-like image: gradients under fine stripes, which JPEG blurs.
fn textured(width: u32, height: u32) -> RgbImage {
    RgbImage::from_fn(width, height, |x, y| {
        let stripe = if (x / 2 + y / 3) % 2 == 0 { 40 } else { 0 };
        Rgb([
            (x * 255 / width) as u8 / 2 + stripe,
            (y * 255 / height) as u8 / 2 + stripe,
            ((x + y) % 128) as u8 + stripe,
        ])
    })
}

/// Mean absolute difference per channel between a decoded sibling and the reference.
fn mean_error(sibling: &DynamicImage, reference: &Pixels) -> f64 {
    let sibling = sibling.to_rgb8();
    assert_eq!(sibling.dimensions(), (reference.width, reference.height));
    let total: u64 = sibling
        .as_raw()
        .iter()
        .zip(&reference.data)
        .map(|(&a, &b)| u64::from(a.abs_diff(b)))
        .sum();
    total as f64 / reference.data.len() as f64
}

#[test]
fn a_still_variants_sibling_is_made_from_its_original_not_the_jpegs_artefacts() {
    let original = encoded(
        &DynamicImage::ImageRgb8(textured(900, 600)),
        ::image::ImageFormat::Png,
    );
    let limits = ImageLimits::default();
    let processed = process(&original, &limits).expect("processes");
    // A PNG's variants are lossless; as a JPEG's would be, the variant here is the JPEG the
    // pipeline makes of the same pixels.
    let reference = one_variant::variant_pixels(&original, &limits, 640).expect("reference");
    let jpeg_variant = codec::encode(&reference, ImageFormat::Jpeg).expect("a JPEG");
    let made = |original: Option<&[u8]>| {
        let source = SiblingSource {
            variant: &jpeg_variant,
            original,
            size: "medium",
        };
        let made = sibling_of_variant(source, SiblingFormat::Webp, &limits).expect("made");
        webp_of(&made.expect("a WebP"))
    };
    let from_original = mean_error(&made(Some(&original)), &reference);
    let from_variant = mean_error(&made(None), &reference);
    assert!(
        from_original < from_variant * 0.9,
        "from the original {from_original:.2}, from the variant {from_variant:.2}"
    );
    assert_eq!(processed.variants[2].width, reference.width);
}

#[test]
fn an_original_that_does_not_fit_its_variant_is_passed_over() {
    // Another image's bytes in the original's place (or one that no longer decodes): the
    // sibling is made from the variant, at the variant's size.
    let limits = ImageLimits::default();
    let variant = encoded(
        &DynamicImage::ImageRgb8(textured(320, 200)),
        ::image::ImageFormat::Jpeg,
    );
    let other = encoded(
        &DynamicImage::ImageRgb8(textured(500, 500)),
        ::image::ImageFormat::Png,
    );
    for original in [&other[..], b"not an image"] {
        let source = SiblingSource {
            variant: &variant,
            original: Some(original),
            size: "small",
        };
        let made = sibling_of_variant(source, SiblingFormat::Webp, &limits).expect("made");
        assert_eq!(webp_of(&made.expect("a WebP")).dimensions(), (320, 200));
    }
}

#[test]
fn each_size_has_its_quality_and_the_docs_state_them() {
    let docs = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/image-fidelity.md"
    ))
    .expect("docs/image-fidelity.md");
    for (format, table, name) in [
        (SiblingFormat::Webp, &WEBP_QUALITY, "WebP"),
        (SiblingFormat::Avif, &AVIF_QUALITY, "AVIF"),
    ] {
        let sizes: Vec<&str> = table.iter().map(|&(size, _)| size).collect();
        let names: Vec<&str> = VARIANTS.iter().map(|&(size, _)| size).collect();
        assert_eq!(
            sizes, names,
            "{name}: one quality per variant size, in order"
        );
        for &(size, quality) in table {
            assert_eq!(sibling_quality(format, size), quality);
            let row = format!("| {name} | {size} | {quality} |");
            assert!(
                docs.contains(&row),
                "docs/image-fidelity.md lacks the row {row}"
            );
        }
    }
    assert_eq!(sibling_quality(SiblingFormat::Webp, "huge"), 91.0);
}

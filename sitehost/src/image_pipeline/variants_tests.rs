//! The variants: their sizes, formats, alpha and metadata, on images generated here.

use ::image::{DynamicImage, GenericImageView, Rgb, RgbImage, Rgba, RgbaImage};

use super::tests::{
    close, decode, encode_with_image, exif_app1, gif_frames, gradient, half_transparent, jpeg, png,
    rgb_at, sizes, webp_lossy, BLUE, GREEN, RED,
};
use super::*;
use crate::domain::image_record::fit;

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

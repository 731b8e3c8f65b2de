//! EXIF orientation, in JPEG, PNG and WebP: every variant comes out upright.

use ::image::{DynamicImage, Rgb, RgbImage};

use super::tests::{
    close, decode, exif_app1, jpeg, png, png_chunk, rgb_at, sizes, webp_lossy, BLUE, GREEN, RED,
};
use super::*;

const WHITE: [u8; 3] = [255, 255, 255];

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

//! The typed entry points, called as the pipeline calls them. They live here, not in a
//! `#[cfg(test)]` module, because a unit-test build would compile all of this crate's
//! optimised pixel loops a second time.

use fast_image_resize::images::{Image, ImageRef};
use fast_image_resize::{FilterType, ResizeAlg};
use fast_image_resize::{ImageError, MulDiv, PixelType, ResizeOptions, Resizer};
use resize_kernels::{divide_alpha, multiply_alpha, resize};

fn lanczos() -> ResizeOptions {
    ResizeOptions::new()
        .resize_alg(ResizeAlg::Convolution(FilterType::Lanczos3))
        .use_alpha(false)
}

#[test]
fn every_layout_resizes() {
    // A uniform image stays uniform through Lanczos3; the untyped call is not compared
    // here because it would compile every pixel type's loops into this test.
    for pixel_type in [
        PixelType::U8,
        PixelType::U8x2,
        PixelType::U8x3,
        PixelType::U8x4,
    ] {
        let (width, height) = (37, 23);
        let data = vec![77; width as usize * height as usize * pixel_type.size()];
        let src = ImageRef::new(width, height, &data, pixel_type).unwrap();
        let mut dst = Image::new(11, 7, pixel_type);
        resize(&mut Resizer::new(), &src, &mut dst, &lanczos()).unwrap();
        assert!(dst.buffer().iter().all(|&b| b == 77), "{pixel_type:?}");
    }
}

#[test]
fn alpha_round_trips_and_other_types_are_refused() {
    let mut data = vec![200, 100, 50, 128, 10, 20, 30, 255];
    let mut image = Image::from_slice_u8(2, 1, &mut data, PixelType::U8x4).unwrap();
    let mul_div = MulDiv::default();
    multiply_alpha(&mul_div, &mut image).unwrap();
    assert_eq!(&image.buffer()[4..], &[10, 20, 30, 255]);
    assert!(image.buffer()[0] < 200);
    divide_alpha(&mul_div, &mut image).unwrap();
    assert!(image.buffer()[0].abs_diff(200) <= 2);

    let mut wide = Image::new(2, 2, PixelType::U16x3);
    assert!(matches!(
        multiply_alpha(&mul_div, &mut wide),
        Err(ImageError::UnsupportedPixelType)
    ));
    let src = Image::new(4, 4, PixelType::F32);
    let mut dst = Image::new(2, 2, PixelType::F32);
    let src = ImageRef::new(4, 4, src.buffer(), PixelType::F32).unwrap();
    assert!(resize(&mut Resizer::new(), &src, &mut dst, &lanczos()).is_err());
}

//! Monomorphic entry points into `fast_image_resize` for the image pipeline.
//!
//! Its convolution and alpha loops are generic over the image view types, so they are
//! compiled (monomorphised) in the crate that calls them. Called from `sitehost`, they
//! would take `sitehost`'s optimisation level: none in the dev profile, which the tests and
//! `cargo run -p sitehost-cli -- serve` build, making a 12 MP upload about ten times slower
//! than in release. Called through these functions, they are compiled here, and the dev
//! profile optimises this small crate (the workspace's Cargo.toml). In release, with LTO,
//! this changes nothing.
//!
//! Only the four 8-bit layouts the pipeline decodes to (grey, grey + alpha, RGB, RGBA) are
//! instantiated, through `fast_image_resize`'s typed calls. Its untyped calls dispatch over
//! all of its pixel types (16-bit, float, ...), and compiling their loops at opt-level 2
//! took this crate 3 minutes 12 seconds of every fresh test build; another pixel type is
//! refused with `ImageError::UnsupportedPixelType`.

use fast_image_resize::images::{Image, ImageRef};
use fast_image_resize::pixels::{U8x2, U8x3, U8x4, U8};
use fast_image_resize::{
    ImageError, IntoImageView, IntoImageViewMut, MulDiv, PixelType, ResizeError, ResizeOptions,
    Resizer,
};

/// `resizer.resize(src, dst, options)`, for 8-bit grey, grey + alpha, RGB and RGBA images.
pub fn resize(
    resizer: &mut Resizer,
    src: &ImageRef<'_>,
    dst: &mut Image<'_>,
    options: &ResizeOptions,
) -> Result<(), ResizeError> {
    if src.pixel_type() != dst.pixel_type() {
        return Err(ResizeError::PixelTypesAreDifferent);
    }
    match dst.pixel_type() {
        PixelType::U8 => resize_typed::<U8>(resizer, src, dst, options),
        PixelType::U8x2 => resize_typed::<U8x2>(resizer, src, dst, options),
        PixelType::U8x3 => resize_typed::<U8x3>(resizer, src, dst, options),
        PixelType::U8x4 => resize_typed::<U8x4>(resizer, src, dst, options),
        _ => Err(ImageError::UnsupportedPixelType.into()),
    }
}

fn resize_typed<P: fast_image_resize::PixelTrait>(
    resizer: &mut Resizer,
    src: &ImageRef<'_>,
    dst: &mut Image<'_>,
    options: &ResizeOptions,
) -> Result<(), ResizeError> {
    let src_view = src
        .image_view::<P>()
        .ok_or(ImageError::UnsupportedPixelType)?;
    let mut dst_view = dst
        .image_view_mut::<P>()
        .ok_or(ImageError::UnsupportedPixelType)?;
    resizer.resize_typed(&src_view, &mut dst_view, options)
}

/// Multiplies colour by alpha in place (`MulDiv::multiply_alpha_inplace`), for 8-bit grey +
/// alpha and RGBA images.
pub fn multiply_alpha(mul_div: &MulDiv, image: &mut Image<'_>) -> Result<(), ImageError> {
    match image.pixel_type() {
        PixelType::U8x2 => mul_div.multiply_alpha_inplace_typed(
            &mut image
                .image_view_mut::<U8x2>()
                .ok_or(ImageError::UnsupportedPixelType)?,
        ),
        PixelType::U8x4 => mul_div.multiply_alpha_inplace_typed(
            &mut image
                .image_view_mut::<U8x4>()
                .ok_or(ImageError::UnsupportedPixelType)?,
        ),
        _ => Err(ImageError::UnsupportedPixelType),
    }
}

/// Divides colour by alpha in place (`MulDiv::divide_alpha_inplace`), for 8-bit grey +
/// alpha and RGBA images.
pub fn divide_alpha(mul_div: &MulDiv, image: &mut Image<'_>) -> Result<(), ImageError> {
    match image.pixel_type() {
        PixelType::U8x2 => mul_div.divide_alpha_inplace_typed(
            &mut image
                .image_view_mut::<U8x2>()
                .ok_or(ImageError::UnsupportedPixelType)?,
        ),
        PixelType::U8x4 => mul_div.divide_alpha_inplace_typed(
            &mut image
                .image_view_mut::<U8x4>()
                .ok_or(ImageError::UnsupportedPixelType)?,
        ),
        _ => Err(ImageError::UnsupportedPixelType),
    }
}

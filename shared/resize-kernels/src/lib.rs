//! Monomorphic entry points into `fast_image_resize` for the image pipeline.
//!
//! Its convolution and alpha loops are generic over the image view types, so they are
//! compiled (monomorphised) in the crate that calls them. Called from `sitehost`, they
//! would take `sitehost`'s optimisation level: none in the dev profile, which the tests and
//! `cargo run -p sitehost-cli -- serve` build, making a 12 MP upload about ten times slower
//! than in release. Called through these functions, they are compiled here, and the dev
//! profile optimises this small crate (the workspace's Cargo.toml). In release, with LTO,
//! this changes nothing.

use fast_image_resize::images::{Image, ImageRef};
use fast_image_resize::{ImageError, MulDiv, ResizeError, ResizeOptions, Resizer};

/// `resizer.resize(src, dst, options)`.
pub fn resize(
    resizer: &mut Resizer,
    src: &ImageRef<'_>,
    dst: &mut Image<'_>,
    options: &ResizeOptions,
) -> Result<(), ResizeError> {
    resizer.resize(src, dst, options)
}

/// Multiplies colour by alpha in place (`MulDiv::multiply_alpha_inplace`).
pub fn multiply_alpha(mul_div: &MulDiv, image: &mut Image<'_>) -> Result<(), ImageError> {
    mul_div.multiply_alpha_inplace(image)
}

/// Divides colour by alpha in place (`MulDiv::divide_alpha_inplace`).
pub fn divide_alpha(mul_div: &MulDiv, image: &mut Image<'_>) -> Result<(), ImageError> {
    mul_div.divide_alpha_inplace(image)
}

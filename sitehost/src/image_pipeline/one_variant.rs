//! One variant's pixels made straight from the original, before any encoding: the
//! reference a variant's encodings are scored against (`measure`), made as `process`
//! makes it (a decode at the scale this size needs, Lanczos3, upright, sRGB) but for this
//! size alone.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use super::pixels::Pixels;
use super::{codec, colour, inspect_header, repair, resize, upright_in_srgb};
use crate::config::ImageLimits;
use crate::domain::image_record::fit;
use crate::error::{ApiError, Result};

/// The pixels of the variant whose box is `side` (`image_record::VARIANTS`), upright and
/// in sRGB, as the pipeline hands them to its encoders.
pub(super) fn variant_pixels(original: &[u8], limits: &ImageLimits, side: u32) -> Result<Pixels> {
    let repaired = repair::repaired(original);
    let bytes = &*repaired;
    let (header, info) = inspect_header(bytes, limits)?;
    let (width, height) = fit(info.width, info.height, side);
    let stored = if resize::swaps_sides(info.orientation) {
        (height, width)
    } else {
        (width, height)
    };
    let pixels = codec::decode(bytes, &header, limits, stored)?;
    let to_srgb = colour::to_srgb(bytes, info.format, pixels.layout);
    let mut made = None;
    resize::cascade(pixels, &[stored], |_, image| made = Some(image))?;
    let made = made.ok_or_else(|| ApiError::internal("the variant was not made"))?;
    let upright = upright_in_srgb(made, info.orientation, to_srgb.as_ref(), &AtomicU64::new(0))?;
    Ok(Arc::unwrap_or_clone(upright))
}

//! Siblings of stored variants, made on their first request (`operations::siblings`): a
//! still variant's from its original's pixels, an animated one's from its own frames, each
//! size at the quality that matches the JPEG variant's fidelity (docs/image-fidelity.md).

use super::format::ImageFormat;
use super::one_variant::variant_pixels;
use super::pixels::Pixels;
use super::sniff::Header;
use super::{animation, avif, codec, gif_codec, inspect_header, ImageInfo, AVIF_MAX_PIXELS};
use crate::config::ImageLimits;
use crate::domain::image_record::{SiblingFormat, SiblingSource, VARIANTS};
use crate::error::Result;

/// Each variant size's WebP quality (libwebp, method [`super::format::SIBLING_METHOD`]): the lowest
/// at which at least half the measured photos' siblings score at or above their JPEG
/// variant in SSIMULACRA2 (`scripts/fidelity`, docs/image-fidelity.md). From medium up
/// libwebp needs as many bytes as libjpeg for that fidelity; small and thumbnail save a
/// third.
pub const WEBP_QUALITY: [(&str, f32); 5] = [
    ("big", 90.0),
    ("large", 91.0),
    ("medium", 89.0),
    ("small", 79.0),
    ("thumbnail", 75.0),
];

/// Each variant size's AVIF quality (ravif's, at `avif::AVIF_SPEED`), chosen as
/// [`WEBP_QUALITY`] is. A big variant gets an AVIF only when it is under
/// [`AVIF_MAX_PIXELS`], which no measured photo's was: it takes large's quality.
pub const AVIF_QUALITY: [(&str, f32); 5] = [
    ("big", 87.0),
    ("large", 87.0),
    ("medium", 85.0),
    ("small", 76.0),
    ("thumbnail", 60.0),
];

/// The quality of a `size` variant's sibling in `format`; an unknown size gets the highest.
pub fn sibling_quality(format: SiblingFormat, size: &str) -> f32 {
    let table = match format {
        SiblingFormat::Webp => &WEBP_QUALITY,
        SiblingFormat::Avif => &AVIF_QUALITY,
    };
    table
        .iter()
        .find(|&&(name, _)| name == size)
        .or_else(|| table.iter().max_by(|a, b| a.1.total_cmp(&b.1)))
        .map_or(90.0, |&(_, quality)| quality)
}

/// The sibling of a stored variant in `format`, or `None` when the variant gets none in
/// that format: an AVIF of a variant over [`AVIF_MAX_PIXELS`] or of an animated GIF (its
/// frames are kept by the WebP sibling; AVIF's animation is left out). The variant's header
/// is read first (the same checks as an upload's), so a variant that gets none is neither
/// decoded nor encoded, and its original is decoded only for a still variant.
pub fn sibling_of_variant(
    source: SiblingSource<'_>,
    format: SiblingFormat,
    limits: &ImageLimits,
) -> Result<Option<Vec<u8>>> {
    let (header, info) = inspect_header(source.variant, limits)?;
    let animated = header.frames > 1
        || (info.format == ImageFormat::Gif && gif_codec::is_animated(source.variant)?);
    let quality = sibling_quality(format, source.size);
    match format {
        // An animated GIF variant: an animated WebP of its frames.
        SiblingFormat::Webp if animated => {
            animation::webp_sibling(source.variant, &header, limits).map(Some)
        }
        SiblingFormat::Webp => {
            let pixels = still_pixels(source, &header, &info, limits)?;
            codec::encode_webp_sibling(&pixels, quality).map(Some)
        }
        SiblingFormat::Avif => {
            let pixels = u64::from(info.width) * u64::from(info.height);
            if animated || pixels > AVIF_MAX_PIXELS {
                return Ok(None);
            }
            let pixels = still_pixels(source, &header, &info, limits)?;
            avif::encode_avif_sibling(&pixels, quality).map(Some)
        }
    }
}

/// A still variant's pixels before encoding: made again from the original as the upload
/// made them, when it is stored and comes out at the variant's size; else the variant's own,
/// decoded (an original that cannot be read again is logged, and the sibling still made).
fn still_pixels(
    source: SiblingSource<'_>,
    header: &Header,
    info: &ImageInfo,
    limits: &ImageLimits,
) -> Result<Pixels> {
    let variant_size = (info.width, info.height);
    let side = VARIANTS
        .iter()
        .find(|&&(name, _)| name == source.size)
        .map(|&(_, side)| side);
    if let (Some(original), Some(side)) = (source.original, side) {
        match variant_pixels(original, limits, side) {
            Ok(pixels) if (pixels.width, pixels.height) == variant_size => return Ok(pixels),
            Ok(pixels) => tracing::warn!(
                size = source.size,
                made = ?(pixels.width, pixels.height),
                variant = ?variant_size,
                "the original made pixels of another size than its variant; the sibling is made from the variant"
            ),
            Err(err) => tracing::warn!(
                size = source.size,
                error = %crate::error::error_chain(&err),
                "the original could not be decoded again; the sibling is made from the variant"
            ),
        }
    }
    codec::decode(source.variant, header, limits, variant_size)
}

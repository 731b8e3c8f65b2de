//! Siblings of stored variants, made on their first request (`operations::siblings`) from
//! the variant's own bytes.

use super::format::ImageFormat;
use super::{animation, avif, codec, gif_codec, inspect_header, AVIF_MAX_PIXELS};
use crate::config::ImageLimits;
use crate::domain::image_record::SiblingFormat;
use crate::error::Result;

/// The sibling of a stored variant in `format`, from the variant's own bytes (made on first
/// request, `operations::siblings`), or `None` when the variant gets no sibling in that
/// format: an AVIF of a variant over [`AVIF_MAX_PIXELS`] or of an animated GIF (its
/// frames are kept by the WebP sibling; AVIF's animation is left out). A variant is already
/// upright and sRGB, written without metadata, so nothing else applies; it passes the same
/// header checks as an upload.
pub fn sibling_of_variant(
    bytes: &[u8],
    format: SiblingFormat,
    limits: &ImageLimits,
) -> Result<Option<Vec<u8>>> {
    match format {
        SiblingFormat::Webp => webp_sibling_of_variant(bytes, limits).map(Some),
        SiblingFormat::Avif => avif_sibling_of_variant(bytes, limits),
    }
}

/// The WebP sibling of a stored variant: decoded at its size and encoded as the upload
/// encodes the siblings it makes.
pub(super) fn webp_sibling_of_variant(bytes: &[u8], limits: &ImageLimits) -> Result<Vec<u8>> {
    let (header, info) = inspect_header(bytes, limits)?;
    if header.frames > 1 {
        // An animated GIF variant: an animated WebP.
        return animation::webp_sibling(bytes, &header, limits);
    }
    let pixels = codec::decode(bytes, &header, limits, (info.width, info.height))?;
    codec::encode_webp_sibling(&pixels)
}

/// The AVIF sibling of a stored variant, when it is within the bound and not animated: the
/// header and the GIF's frame headers are read first, so a variant that gets none is
/// neither decoded nor encoded.
fn avif_sibling_of_variant(bytes: &[u8], limits: &ImageLimits) -> Result<Option<Vec<u8>>> {
    let (header, info) = inspect_header(bytes, limits)?;
    let pixels = u64::from(info.width) * u64::from(info.height);
    if pixels > AVIF_MAX_PIXELS
        || (info.format == ImageFormat::Gif && gif_codec::is_animated(bytes)?)
    {
        return Ok(None);
    }
    let pixels = codec::decode(bytes, &header, limits, (info.width, info.height))?;
    avif::encode_avif_sibling(&pixels).map(Some)
}

//! Colour: the ICC profile an upload embeds, and the conversion of its variants to sRGB.
//!
//! A photo from a phone is often Display P3, one from a camera or an editor sometimes Adobe
//! RGB: its numbers mean more saturated colours than the same numbers in sRGB. The variants
//! carry no metadata, so a browser shows them as sRGB, washed out, unless their pixels are
//! converted. They are, after resizing (the variants of a 12 MP photo have a third of its
//! pixels; resizing in the original's space is what every resizer does with untagged
//! images anyway), with moxcms, and then need no profile.
//!
//! A profile that is missing, sRGB (or so close to it that no 8-bit value moves by more
//! than 1), broken, of another colour space than the decoded pixels (a CMYK profile on a
//! JPEG the decoder turned into RGB) or that moxcms cannot use, leaves the pixels as they
//! are: it is logged, and never fails the upload.

use std::borrow::Cow;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use moxcms::{
    ColorProfile, DataColorSpace, Layout as CmsLayout, ParsingOptions, Transform8BitExecutor,
    TransformOptions,
};
use rayon::prelude::*;

use super::format::ImageFormat;
use super::pixels::{Layout, Pixels};
use super::sniff::png_header::png_compressed_part;
use super::sniff::{be16, be32, bytes_at, le32};

/// The largest profile read (the header check refuses PNG iCCP chunks inflating past it).
/// Display profiles are a few KB, those with lookup tables a few hundred KB.
pub(super) const MAX_PROFILE: usize = 1 << 20;

/// Pixels converted in one piece of work: the big variant is split over the cores.
const CHUNK_PIXELS: usize = 1 << 16;

/// A conversion from an embedded profile to sRGB, for one pixel layout.
pub(super) struct ToSrgb {
    transform: Arc<Transform8BitExecutor>,
    layout: Layout,
    /// The profile's description, for logs.
    pub name: String,
}

impl std::fmt::Debug for ToSrgb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToSrgb")
            .field("layout", &self.layout)
            .field("name", &self.name)
            .finish()
    }
}

/// Why a profile is not used (logged, never an error of the upload).
type Skip = String;

/// The conversion the upload needs: None when it has no profile, an sRGB one, or one that
/// cannot be used (logged at warn level, with the reason).
pub(super) fn to_srgb(bytes: &[u8], format: ImageFormat, layout: Layout) -> Option<ToSrgb> {
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        let profile = embedded_profile(bytes, format)?;
        match profile {
            Some(profile) => conversion(&profile, layout),
            None => Ok(None),
        }
    }));
    match outcome {
        Ok(Ok(conversion)) => conversion,
        Ok(Err(why)) => {
            tracing::warn!(
                format = format.name(),
                "ICC profile ignored (treated as sRGB): {why}"
            );
            None
        }
        Err(_) => {
            tracing::warn!(
                format = format.name(),
                "ICC profile ignored (treated as sRGB): the colour library panicked on it"
            );
            None
        }
    }
}

impl ToSrgb {
    /// Converts the pixels in place (alpha is kept as it is). A failure leaves them as they
    /// were, and is logged.
    pub fn apply(&self, pixels: &mut Pixels) {
        if pixels.layout != self.layout {
            tracing::warn!(
                "colour conversion for {:?} pixels skipped on {:?} ones",
                self.layout,
                pixels.layout
            );
            return;
        }
        let chunk = CHUNK_PIXELS * self.layout.channels();
        let mut out = vec![0; pixels.data.len()];
        let done = catch_unwind(AssertUnwindSafe(|| {
            pixels
                .data
                .par_chunks(chunk)
                .zip(out.par_chunks_mut(chunk))
                .try_for_each(|(src, dst)| self.transform.transform(src, dst))
        }));
        match done {
            Ok(Ok(())) => pixels.data = out,
            Ok(Err(e)) => tracing::warn!("colour conversion from {} failed: {e}", self.name),
            Err(_) => tracing::warn!("colour conversion from {} panicked", self.name),
        }
    }
}

/// The moxcms layout of ours.
fn cms_layout(layout: Layout) -> CmsLayout {
    match layout {
        Layout::L8 => CmsLayout::Gray,
        Layout::La8 => CmsLayout::GrayAlpha,
        Layout::Rgb8 => CmsLayout::Rgb,
        Layout::Rgba8 => CmsLayout::Rgba,
    }
}

/// The sRGB profile of the variants, or for grey pixels a grey profile with sRGB's tone
/// curve (what browsers assume for untagged grey images).
fn srgb(grey: bool) -> ColorProfile {
    let mut profile = ColorProfile::new_srgb();
    if grey {
        profile.color_space = DataColorSpace::Gray;
        profile.gray_trc = profile.green_trc.clone();
    }
    profile
}

/// Parses the profile and builds the transform to sRGB for pixels of `layout`; None if it
/// changes no 8-bit value by more than 1 (an sRGB profile, by whatever name).
fn conversion(icc: &[u8], layout: Layout) -> Result<Option<ToSrgb>, Skip> {
    let options = ParsingOptions {
        max_profile_size: MAX_PROFILE,
        ..ParsingOptions::default()
    };
    let profile = ColorProfile::new_from_slice_with_options(icc, options)
        .map_err(|e| format!("{} bytes that do not parse: {e}", icc.len()))?;
    let name = describe(&profile);
    let grey = matches!(layout, Layout::L8 | Layout::La8);
    let expected = if grey {
        DataColorSpace::Gray
    } else {
        DataColorSpace::Rgb
    };
    if profile.color_space != expected {
        return Err(format!(
            "{name}: a {:?} profile on {} pixels",
            profile.color_space,
            if grey { "grey" } else { "RGB" }
        ));
    }
    let cms = cms_layout(layout);
    let transform = profile
        .create_transform_8bit(cms, &srgb(grey), cms, TransformOptions::default())
        .map_err(|e| format!("{name}: no transform to sRGB: {e}"))?;
    let conversion = ToSrgb {
        transform,
        layout,
        name,
    };
    if conversion.is_identity()? {
        return Ok(None);
    }
    Ok(Some(conversion))
}

impl ToSrgb {
    /// True if no value of a 16-level grid (and no grey level) moves by more than 1.
    fn is_identity(&self) -> Result<bool, Skip> {
        let channels = self.layout.channels();
        let colour = channels >= 3;
        let mut probe = Vec::new();
        let levels: Vec<u8> = (0..16u8).map(|v| v * 17).collect();
        let mut push = |r: u8, g: u8, b: u8| {
            if colour {
                probe.extend([r, g, b]);
            } else {
                probe.push(g);
            }
            if channels.is_multiple_of(2) {
                probe.push(255);
            }
        };
        if colour {
            for &r in &levels {
                for &g in &levels {
                    for &b in &levels {
                        push(r, g, b);
                    }
                }
            }
        }
        for v in 0..=255u8 {
            push(v, v, v);
        }
        let mut out = vec![0; probe.len()];
        self.transform
            .transform(&probe, &mut out)
            .map_err(|e| format!("{}: transform failed: {e}", self.name))?;
        Ok(probe.iter().zip(&out).all(|(&a, &b)| a.abs_diff(b) <= 1))
    }
}

/// The profile's English description, or its colour space.
fn describe(profile: &ColorProfile) -> String {
    use moxcms::ProfileText;
    let text = match &profile.description {
        Some(ProfileText::PlainString(s)) => Some(s.clone()),
        Some(ProfileText::Description(d)) => Some(d.ascii_string.clone()),
        Some(ProfileText::Localizable(strings)) => strings.first().map(|s| s.value.clone()),
        None => None,
    };
    let text: String = text
        .unwrap_or_default()
        .chars()
        .filter(|c| !c.is_control())
        .take(80)
        .collect();
    if text.trim().is_empty() {
        format!("an {:?} profile", profile.color_space)
    } else {
        format!("profile \"{}\"", text.trim())
    }
}

/// The ICC profile the file embeds, if any: JPEG APP2 `ICC_PROFILE` segments (in sequence
/// order), a PNG iCCP chunk (None if an sRGB chunk says the image is sRGB), a WebP ICCP
/// chunk. GIF has none. Err for one that is broken or larger than [`MAX_PROFILE`]. The
/// header check has already walked the same structure, so these walks meet a file laid out
/// as it expects.
pub(super) fn embedded_profile(
    bytes: &[u8],
    format: ImageFormat,
) -> Result<Option<Cow<'_, [u8]>>, Skip> {
    match format {
        ImageFormat::Jpeg => jpeg_profile(bytes),
        ImageFormat::Png => png_profile(bytes),
        ImageFormat::WebP => webp_profile(bytes).map(|p| p.map(Cow::Borrowed)),
        ImageFormat::Gif => Ok(None),
    }
}

const JPEG_ICC: &[u8] = b"ICC_PROFILE\0";

fn too_large(size: usize) -> Skip {
    format!("{size} bytes, more than the {} MiB read", MAX_PROFILE >> 20)
}

/// APP2 segments up to the first scan, each `ICC_PROFILE\0`, its sequence number (from 1),
/// the number of segments, and a part of the profile.
fn jpeg_profile(b: &[u8]) -> Result<Option<Cow<'_, [u8]>>, Skip> {
    let mut parts: Vec<(u8, u8, &[u8])> = Vec::new();
    let mut total = 0usize;
    let mut pos = 2;
    while b.get(pos) == Some(&0xFF) {
        while b.get(pos) == Some(&0xFF) {
            pos += 1;
        }
        let Some(&marker) = b.get(pos) else { break };
        pos += 1;
        if marker == 0xDA || marker == 0xD9 || (0xD0..=0xD8).contains(&marker) {
            break;
        }
        let Some(len) = be16(b, pos) else { break };
        let len = (len as usize).max(2);
        let Some(segment) = bytes_at(b, pos + 2, len - 2) else {
            break;
        };
        if marker == 0xE2 {
            if let Some(rest) = segment.strip_prefix(JPEG_ICC) {
                let [seq, count, data @ ..] = rest else {
                    return Err("an APP2 ICC_PROFILE segment without its sequence".into());
                };
                total += data.len();
                if total > MAX_PROFILE {
                    return Err(too_large(total));
                }
                parts.push((*seq, *count, data));
            }
        }
        pos += len;
    }
    if parts.is_empty() {
        return Ok(None);
    }
    let count = parts[0].1;
    parts.sort_by_key(|&(seq, _, _)| seq);
    let in_order = parts
        .iter()
        .enumerate()
        .all(|(i, &(seq, n, _))| n == count && usize::from(seq) == i + 1);
    if !in_order || parts.len() != usize::from(count) {
        return Err(format!(
            "APP2 ICC_PROFILE segments numbered {:?} of {count}",
            parts.iter().map(|p| p.0).collect::<Vec<_>>()
        ));
    }
    if let [(_, _, data)] = parts[..] {
        return Ok(Some(Cow::Borrowed(data)));
    }
    Ok(Some(Cow::Owned(
        parts.iter().flat_map(|p| p.2).copied().collect(),
    )))
}

/// The first iCCP chunk before the image data, inflated (at most [`MAX_PROFILE`]); None if
/// there is none or an sRGB chunk comes first.
fn png_profile(b: &[u8]) -> Result<Option<Cow<'_, [u8]>>, Skip> {
    let mut pos = 8usize;
    while let (Some(len), Some(kind)) = (be32(b, pos), bytes_at(b, pos.saturating_add(4), 4)) {
        let len = len as usize;
        match kind {
            b"IDAT" | b"sRGB" => break,
            b"iCCP" => {
                let stream = bytes_at(b, pos + 8, len)
                    .and_then(|data| png_compressed_part(kind, data))
                    .ok_or("a truncated iCCP chunk")?;
                return match fdeflate::decompress_to_vec_bounded(stream, MAX_PROFILE) {
                    Ok(profile) => Ok(Some(Cow::Owned(profile))),
                    Err(fdeflate::BoundedDecompressionError::OutputTooLarge { .. }) => {
                        Err(too_large(MAX_PROFILE + 1))
                    }
                    Err(fdeflate::BoundedDecompressionError::DecompressionError { inner }) => {
                        Err(format!("an iCCP chunk that does not inflate: {inner:?}"))
                    }
                };
            }
            _ => {}
        }
        pos = pos.saturating_add(12).saturating_add(len);
    }
    Ok(None)
}

/// The ICCP chunk of an extended (VP8X) WebP whose flags say it has one.
fn webp_profile(b: &[u8]) -> Result<Option<&[u8]>, Skip> {
    if b.get(12..16) != Some(b"VP8X".as_slice()) || b.get(20).is_none_or(|f| f & 0x20 == 0) {
        return Ok(None);
    }
    let mut pos = 12usize;
    while let (Some(kind), Some(len)) = (bytes_at(b, pos, 4), le32(b, pos.saturating_add(4))) {
        let len = len as usize;
        if kind == b"ICCP" {
            if len > MAX_PROFILE {
                return Err(too_large(len));
            }
            return bytes_at(b, pos + 8, len)
                .map(Some)
                .ok_or_else(|| "a truncated ICCP chunk".into());
        }
        pos = pos
            .saturating_add(8)
            .saturating_add(len)
            .saturating_add(len & 1);
    }
    Ok(None)
}

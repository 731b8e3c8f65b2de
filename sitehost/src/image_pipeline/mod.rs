//! The upload image pipeline: detect the type from the bytes, check the header dimensions
//! against the limits before decoding (the size the decoder itself will use, checked again
//! after its header parse and before it allocates), decode once (a baseline JPEG at the
//! smallest N/8 scale that still covers the biggest variant: libjpeg.rs), make the five
//! variants ([`VARIANTS`]) by cascaded Lanczos3 downsampling, and turn each upright (EXIF
//! orientation) and encode it in the original's format, without metadata, on the other
//! cores while the cascade makes the next one. Variants of an image with an embedded ICC
//! profile other than sRGB (Display P3, Adobe RGB) are converted to sRGB after resizing
//! (colour.rs), so that they need no profile.
//!
//! Memory follows the image, not a global cap: the header check refuses PNG metadata that
//! inflates past 1 MiB and chunk floods, a decode may allocate its pixels at 8 bits a
//! channel plus 1 MiB (16-bit PNGs are reduced row by row as they are decoded), and the
//! resize premultiplies alpha in place.
//!
//! All of it is synchronous CPU work: call it from `tokio::task::spawn_blocking`. The
//! original upload is never modified; the caller stores its own bytes as they came.

mod anim_gif;
mod anim_webp;
mod animation;
#[cfg(test)]
mod animation_tests;
mod avif;
#[cfg(test)]
mod avif_tests;
mod codec;
mod colour;
#[cfg(test)]
mod colour_tests;
mod decode_check;
pub mod format;
mod frames;
mod gif_codec;
mod gif_copy;
#[cfg(test)]
mod hostile;
#[cfg(test)]
mod hostile_gif;
#[cfg(test)]
mod leniency_tests;
mod libjpeg;
#[doc(hidden)]
pub mod measure;
#[cfg(test)]
mod memory_tests;
mod one_variant;
#[cfg(test)]
mod orientation_tests;
mod pixels;
#[cfg(test)]
mod proptests;
mod quantise;
mod refusal;
#[cfg(test)]
mod refusal_tests;
mod repair;
mod resize;
mod sibling;
#[cfg(test)]
mod sibling_tests;
mod sniff;
mod still;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod variants_tests;

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;

use crate::config::ImageLimits;
use crate::domain::image_record::{fit, SiblingFormat, VARIANTS, WEBP_SIBLINGS_AT_UPLOAD};
use crate::error::{ApiError, Result};
use format::ImageFormat;
use pixels::Pixels;
use still::{make_and_encode, SizeJobs, SizeResults, SizeSlots};

/// What the header says, without decoding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageInfo {
    pub format: ImageFormat,
    pub mimetype: &'static str,
    pub extension: &'static str,
    /// Upright size (after the EXIF orientation).
    pub width: u32,
    pub height: u32,
    /// EXIF orientation, 1 (none) to 8.
    pub orientation: u8,
}

/// One encoded variant.
#[derive(Clone, PartialEq, Eq)]
pub struct Variant {
    pub name: &'static str,
    pub width: u32,
    pub height: u32,
    pub bytes: Vec<u8>,
    /// Its lossy WebP sibling (`image_record::sibling_path`): for the sizes in
    /// [`WEBP_SIBLINGS_AT_UPLOAD`] of an original that is not a WebP.
    pub webp: Option<Vec<u8>>,
}

impl fmt::Debug for Variant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Variant")
            .field("name", &self.name)
            .field("width", &self.width)
            .field("height", &self.height)
            .field("bytes", &self.bytes.len())
            .field("webp", &self.webp.as_ref().map(Vec::len))
            .finish()
    }
}

/// Wall time of each stage.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Timings {
    /// Reading the file (only `process_file_timed`).
    pub read: Duration,
    /// Header checks and decoding.
    pub decode: Duration,
    /// Downsampling: from the decoded image to the last variant made. Orienting, converting
    /// and encoding the variants already made runs beside it, on the other cores.
    pub resize: Duration,
    /// Time spent on the ICC profile: reading it, building the transform to sRGB and
    /// converting the variants, summed over the threads that did it (zero for an image
    /// without a profile).
    pub colour: Duration,
    /// What is left after the last resize: finishing the variants' orientation, colour
    /// and encoding.
    pub encode: Duration,
    pub total: Duration,
}

impl fmt::Display for Timings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        write!(
            f,
            "read {:.1} ms, decode {:.1} ms, resize {:.1} ms (colour {:.1} ms), encode {:.1} ms, \
             total {:.1} ms",
            ms(self.read),
            ms(self.decode),
            ms(self.resize),
            ms(self.colour),
            ms(self.encode),
            ms(self.total)
        )
    }
}

/// The result of processing an upload.
#[derive(Debug, Clone)]
pub struct Processed {
    pub format: ImageFormat,
    pub mimetype: &'static str,
    pub extension: &'static str,
    /// Upright size of the original.
    pub width: u32,
    pub height: u32,
    /// In the order of [`VARIANTS`]: big, large, medium, small, thumbnail.
    pub variants: Vec<Variant>,
    pub timings: Timings,
}

/// Detects the type and reads the size from the header, checking the limits. Cheap: no
/// pixel is decoded.
pub fn inspect(bytes: &[u8], limits: &ImageLimits) -> Result<ImageInfo> {
    inspect_header(&repair::repaired(bytes), limits).map(|(_, info)| info)
}

fn inspect_header(bytes: &[u8], limits: &ImageLimits) -> Result<(sniff::Header, ImageInfo)> {
    let header = sniff::read_header(bytes, limits)?;
    limits.check(header.width, header.height)?;
    limits.check_animation(header.width, header.height, header.frames)?;
    let (width, height) = if resize::swaps_sides(header.orientation) {
        (header.height, header.width)
    } else {
        (header.width, header.height)
    };
    let info = ImageInfo {
        format: header.format,
        mimetype: header.format.mimetype(),
        extension: header.format.extension(),
        width,
        height,
        orientation: header.orientation,
    };
    Ok((header, info))
}

pub use avif::{encode_avif, AvifSettings, AVIF_MAX_PIXELS, AVIF_SPEED};
pub use sibling::{sibling_of_variant, sibling_quality, AVIF_QUALITY, WEBP_QUALITY};
#[cfg(test)]
use {crate::domain::image_record::SiblingSource, sibling_tests::webp_sibling_of_variant};

/// The whole pipeline on an upload held in memory.
pub fn process(bytes: &[u8], limits: &ImageLimits) -> Result<Processed> {
    let start = Instant::now();
    // What browsers show and a strict reading refuses, put right (repair.rs): every check
    // and decoder below reads the repaired file.
    let repaired = repair::repaired(bytes);
    let bytes = &*repaired;
    let (header, info) = inspect_header(bytes, limits)?;
    if header.frames > 1 {
        return animation::process(bytes, &header, &info, limits, start);
    }
    let (distinct, which) = variant_sizes(&info);
    // The biggest variant, in stored terms, is all the decode has to cover.
    let pixels = codec::decode(bytes, &header, limits, distinct[0])?;
    let decoded = Instant::now();
    // The profile is read before the decoded image is handed over (its layout says which
    // transform), and applied to the variants.
    let colour_start = Instant::now();
    let to_srgb = colour::to_srgb(bytes, info.format, pixels.layout);
    let colour_nanos = AtomicU64::new(elapsed_nanos(colour_start));
    let jobs = SizeJobs {
        orientation: info.orientation,
        format: info.format,
        to_srgb: to_srgb.as_ref(),
        colour_nanos: &colour_nanos,
        webp_sibling_quality: wants_siblings(info.format, &which, distinct.len(), limits),
    };
    let slots: Vec<SizeSlots> = distinct.iter().map(|_| SizeSlots::default()).collect();
    let resized = make_and_encode(pixels, &distinct, &jobs, &slots)?;
    let done = Instant::now();
    let SizeResults { made, encoded } = SizeSlots::results(slots)?;
    let timings = Timings {
        read: Duration::ZERO,
        decode: decoded - start,
        resize: resized - decoded,
        colour: Duration::from_nanos(colour_nanos.load(Ordering::Relaxed)),
        encode: done - resized,
        total: done - start,
    };
    assemble(&info, &which, &made, encoded, timings)
}

/// One distinct size's encodings, in memory.
#[derive(Debug, Clone, Default)]
struct Encoded {
    variant: Option<Vec<u8>>,
    /// Its lossy WebP sibling, when the upload makes one.
    webp_sibling: Option<Vec<u8>>,
}

/// The variants' distinct sizes, largest first, in stored terms (before the EXIF
/// orientation turns them upright: rotating the small variants is much cheaper than
/// rotating the full image), and which of them each variant of [`VARIANTS`] is. Images
/// smaller than some boxes give equal consecutive sizes: made and encoded once.
fn variant_sizes(info: &ImageInfo) -> (Vec<(u32, u32)>, Vec<usize>) {
    let swap = resize::swaps_sides(info.orientation);
    let mut distinct: Vec<(u32, u32)> = Vec::with_capacity(VARIANTS.len());
    let mut which = Vec::with_capacity(VARIANTS.len());
    for &(_, side) in &VARIANTS {
        let (w, h) = fit(info.width, info.height, side);
        let stored = if swap { (h, w) } else { (w, h) };
        if distinct.last() != Some(&stored) {
            distinct.push(stored);
        }
        which.push(distinct.len() - 1);
    }
    (distinct, which)
}

/// For each of the `count` distinct sizes, the quality of the WebP sibling the upload makes
/// of it, if any: for the sizes of [`WEBP_SIBLINGS_AT_UPLOAD`], unless the original is a
/// WebP or `limits` turn them off (a measurement). A distinct size that stands for several
/// of them (a small original) takes the highest of their qualities.
fn wants_siblings(
    format: ImageFormat,
    which: &[usize],
    count: usize,
    limits: &ImageLimits,
) -> Vec<Option<f32>> {
    let siblings = format != ImageFormat::WebP && limits.webp_siblings_at_upload;
    (0..count)
        .map(|index| {
            VARIANTS
                .iter()
                .zip(which)
                .filter(|(&(name, _), &at)| {
                    siblings && at == index && WEBP_SIBLINGS_AT_UPLOAD.contains(&name)
                })
                .map(|(&(name, _), _)| sibling_quality(SiblingFormat::Webp, name))
                .reduce(f32::max)
        })
        .collect()
}

/// The result: each variant of [`VARIANTS`] from the distinct size `which` names (`made`:
/// their upright sizes; `encoded`: the variant's bytes and its WebP sibling's), checked to
/// be the size the image record states.
fn assemble(
    info: &ImageInfo,
    which: &[usize],
    made: &[(u32, u32)],
    encoded: Vec<Encoded>,
    timings: Timings,
) -> Result<Processed> {
    let mut variants = Vec::with_capacity(VARIANTS.len());
    for (&(name, side), &index) in VARIANTS.iter().zip(which) {
        let (width, height) = made[index];
        if (width, height) != fit(info.width, info.height, side) {
            return Err(ApiError::internal(format!(
                "variant {name} came out at the wrong size"
            )));
        }
        variants.push(Variant {
            name,
            width,
            height,
            bytes: encoded[index]
                .variant
                .clone()
                .ok_or_else(|| ApiError::internal(format!("variant {name} was not encoded")))?,
            webp: encoded[index]
                .webp_sibling
                .clone()
                .filter(|_| WEBP_SIBLINGS_AT_UPLOAD.contains(&name)),
        });
    }
    Ok(Processed {
        format: info.format,
        mimetype: info.mimetype,
        extension: info.extension,
        width: info.width,
        height: info.height,
        variants,
        timings,
    })
}

/// A made image turned upright and converted to sRGB: the same image when neither applies,
/// else a copy (or the image itself, once the cascade has let go of it). Time spent on the
/// colour conversion is added to `colour_nanos`.
fn upright_in_srgb(
    image: Arc<Pixels>,
    orientation: u8,
    to_srgb: Option<&colour::ToSrgb>,
    colour_nanos: &AtomicU64,
) -> Result<Arc<Pixels>> {
    if !resize::needs_orienting(orientation) && to_srgb.is_none() {
        return Ok(image);
    }
    let mut upright = resize::orient(Arc::unwrap_or_clone(image), orientation)?;
    if let Some(to_srgb) = to_srgb {
        let start = Instant::now();
        to_srgb.apply(&mut upright);
        colour_nanos.fetch_add(elapsed_nanos(start), Ordering::Relaxed);
    }
    Ok(Arc::new(upright))
}

fn elapsed_nanos(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// Benchmark entry (the `variants FILE OUTDIR` command): reads the file and processes it,
/// with the read time in the timings.
pub fn process_file_timed(path: &Path, limits: &ImageLimits) -> Result<Processed> {
    let start = Instant::now();
    let bytes = std::fs::read(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => ApiError::NotFound(path.display().to_string()),
        _ => anyhow::Error::new(e)
            .context(format!("reading {}", path.display()))
            .into(),
    })?;
    let read = start.elapsed();
    let mut processed = process(&bytes, limits)?;
    processed.timings.read = read;
    processed.timings.total = start.elapsed();
    Ok(processed)
}

/// Writes each variant as `DIR/NAME.EXT` (creating DIR), and its WebP sibling as
/// `DIR/NAME.EXT.webp`, and returns the variants' paths.
pub fn write_variants(processed: &Processed, dir: &Path) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    processed
        .variants
        .iter()
        .map(|v| {
            let path = dir.join(format!("{}.{}", v.name, processed.extension));
            std::fs::write(&path, &v.bytes)
                .with_context(|| format!("writing {}", path.display()))?;
            if let Some(webp) = &v.webp {
                let sibling = dir.join(format!("{}.{}.webp", v.name, processed.extension));
                std::fs::write(&sibling, webp)
                    .with_context(|| format!("writing {}", sibling.display()))?;
            }
            Ok(path)
        })
        .collect()
}

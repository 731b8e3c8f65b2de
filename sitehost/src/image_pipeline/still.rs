//! A still image's sizes, once the cascade has made each: turned upright, converted to
//! sRGB and encoded (its WebP sibling in a job of its own) on rayon's threads while the
//! cascade goes on making the smaller ones.

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use super::format::ImageFormat;
use super::pixels::Pixels;
use super::{codec, colour, resize, upright_in_srgb, Encoded};
use crate::error::{ApiError, Result};

/// What each distinct size goes through once the cascade has made it.
pub(super) struct SizeJobs<'a> {
    pub orientation: u8,
    /// The variants' format: the original's.
    pub format: ImageFormat,
    pub to_srgb: Option<&'a colour::ToSrgb>,
    pub colour_nanos: &'a AtomicU64,
    /// For each distinct size, the quality of its WebP sibling, if the upload makes one.
    pub webp_sibling_quality: Vec<Option<f32>>,
}

/// Where the jobs of one distinct size leave their results, each set once.
#[derive(Default)]
pub(super) struct SizeSlots {
    upright: OnceLock<Result<Arc<Pixels>>>,
    variant: OnceLock<Result<Vec<u8>>>,
    webp_sibling: OnceLock<Result<Vec<u8>>>,
}

/// What the jobs of the distinct sizes made.
pub(super) struct SizeResults {
    /// Each size's upright width and height.
    pub made: Vec<(u32, u32)>,
    pub encoded: Vec<Encoded>,
}

impl SizeSlots {
    /// The sizes' results, or the first error of turning them upright, else of encoding
    /// them.
    pub fn results(slots: Vec<SizeSlots>) -> Result<SizeResults> {
        let mut made = Vec::with_capacity(slots.len());
        let mut encodings = Vec::with_capacity(slots.len());
        for slot in slots {
            made.push(slot.upright.into_inner());
            encodings.push((slot.variant.into_inner(), slot.webp_sibling.into_inner()));
        }
        let made = made
            .into_iter()
            .map(|upright| {
                let upright =
                    upright.unwrap_or_else(|| Err(ApiError::internal("a variant was not made")))?;
                Ok((upright.width, upright.height))
            })
            .collect::<Result<_>>()?;
        let encoded = encodings
            .into_iter()
            .map(|(variant, webp_sibling)| {
                Ok(Encoded {
                    variant: variant.transpose()?,
                    webp_sibling: webp_sibling.transpose()?,
                })
            })
            .collect::<Result<_>>()?;
        Ok(SizeResults { made, encoded })
    }
}

/// Makes the distinct sizes by the cascade; each size, as it comes out, is turned upright,
/// converted to sRGB and encoded (its WebP sibling in a job of its own) while the cascade
/// goes on making the smaller ones: the big variant's encoding, the longest job, overlaps
/// the rest of the resizing. Returns when every job is done, with the time the cascade
/// ended.
pub(super) fn make_and_encode(
    pixels: Pixels,
    distinct: &[(u32, u32)],
    jobs: &SizeJobs<'_>,
    slots: &[SizeSlots],
) -> Result<Instant> {
    let mut resized = Instant::now();
    rayon::scope(|scope| -> Result<()> {
        resize::cascade(pixels, distinct, |index, image| {
            let slots = &slots[index];
            let sibling = jobs.webp_sibling_quality[index];
            scope.spawn(move |scope| {
                let upright =
                    upright_in_srgb(image, jobs.orientation, jobs.to_srgb, jobs.colour_nanos);
                if let Ok(upright) = &upright {
                    if let Some(quality) = sibling {
                        let upright = Arc::clone(upright);
                        scope.spawn(move |_| {
                            let sibling = codec::encode_webp_sibling(&upright, quality);
                            let _ = slots.webp_sibling.set(sibling);
                        });
                    }
                    let _ = slots.variant.set(codec::encode(upright, jobs.format));
                }
                let _ = slots.upright.set(upright);
            });
        })?;
        resized = Instant::now();
        Ok(())
    })?;
    Ok(resized)
}

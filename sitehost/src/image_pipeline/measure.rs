//! What the fidelity measurement needs of the pipeline (`scripts/fidelity`,
//! docs/image-fidelity.md) and nothing serves: a variant's pixels as the pipeline makes
//! them, before any encoding (the reference every encoding is scored against), and each
//! format's encoder at a setting of the caller's.

use super::avif::{encode_avif_pixels, AvifSettings};
use super::codec;
use super::format::ImageFormat;
use super::one_variant::variant_pixels;
use super::pixels::Pixels;
use crate::config::ImageLimits;
use crate::error::{ApiError, Result};

/// A variant's pixels before encoding.
pub struct Reference(Pixels);

impl Reference {
    /// The pixels of the variant whose box is `side` (`image_record::VARIANTS`), made from
    /// the original's bytes under the default limits.
    pub fn of(original: &[u8], side: u32) -> Result<Reference> {
        variant_pixels(original, &ImageLimits::default(), side).map(Reference)
    }

    pub fn width(&self) -> u32 {
        self.0.width
    }

    pub fn height(&self) -> u32 {
        self.0.height
    }

    /// Lossless: the reference itself, for a scorer.
    pub fn png(&self) -> Result<Vec<u8>> {
        codec::encode(&self.0, ImageFormat::Png)
    }

    /// The JPEG variant, encoded as an upload of a JPEG encodes it.
    pub fn jpeg(&self) -> Result<Vec<u8>> {
        codec::encode(&self.0, ImageFormat::Jpeg)
    }

    /// Lossy WebP as the siblings' encoder makes it, at `quality` and `method`.
    pub fn webp(&self, quality: f32, method: i32) -> Result<Vec<u8>> {
        if !(0.0..=100.0).contains(&quality) || !(0..=6).contains(&method) {
            return Err(ApiError::internal(format!(
                "WebP quality {quality} or method {method} out of range (0-100, 0-6)"
            )));
        }
        codec::encode_lossy_webp(&self.0, quality, method)
    }

    /// AVIF as the siblings' encoder makes it (alpha at the siblings' alpha quality, one
    /// thread), at `quality` and `speed`.
    pub fn avif(&self, quality: f32, speed: u8) -> Result<Vec<u8>> {
        let settings = AvifSettings {
            speed,
            ..AvifSettings::sibling(quality)
        };
        encode_avif_pixels(&self.0, settings)
    }
}

//! The AVIF encoder behind two entry points that are neither generic nor inline.
//!
//! `ravif::Encoder::encode_rgb` is `#[inline]` and rav1e's encoder is generic over the
//! pixel type, so a crate calling ravif directly gets the whole encoder compiled into
//! itself, at its own opt-level: in the dev profile `sitehost` is at opt-level 0, and a
//! large variant's AVIF took 13.1 s there against 1.43 s in release. Called through this
//! crate, which the dev profile optimises (the workspace Cargo.toml), the encoder is
//! compiled here, once, optimised. `scripts/check_codec_opt.py` fails the build when encoder
//! code is compiled into `sitehost` again.

use ravif::{AlphaColorMode, Encoder, Img};
use rgb::FromSlice;

pub use ravif::Error;

/// What an encode is asked for. The caller checks the ranges (ravif clamps or panics).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Settings {
    /// 1-100.
    pub quality: f32,
    /// 1-100.
    pub alpha_quality: f32,
    /// 1-10.
    pub speed: u8,
    /// rav1e's threads: `None` for the process's rayon pool.
    pub threads: Option<usize>,
}

fn encoder(settings: Settings) -> Encoder<'static> {
    Encoder::new()
        .with_quality(settings.quality)
        .with_alpha_quality(settings.alpha_quality)
        .with_speed(settings.speed)
        .with_num_threads(settings.threads.filter(|&n| n > 0))
        // Colour under fully transparent pixels is smoothed, not kept: it is never seen,
        // and kept it costs bytes.
        .with_alpha_color_mode(AlphaColorMode::UnassociatedClean)
}

/// Interleaved 8-bit RGB, `width * height * 3` bytes (the caller checks), as an AVIF file.
#[inline(never)]
pub fn encode_rgb(
    data: &[u8],
    width: usize,
    height: usize,
    settings: Settings,
) -> Result<Vec<u8>, Error> {
    let encoded = encoder(settings).encode_rgb(Img::new(data.as_rgb(), width, height))?;
    Ok(encoded.avif_file)
}

/// Interleaved 8-bit RGBA with unassociated alpha, `width * height * 4` bytes (the caller
/// checks), as an AVIF file.
#[inline(never)]
pub fn encode_rgba(
    data: &[u8],
    width: usize,
    height: usize,
    settings: Settings,
) -> Result<Vec<u8>, Error> {
    let encoded = encoder(settings).encode_rgba(Img::new(data.as_rgba(), width, height))?;
    Ok(encoded.avif_file)
}

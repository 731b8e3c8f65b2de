//! The AVIF siblings of JPEG, PNG and GIF variants (`image_record::SiblingFormat::Avif`),
//! encoded by rav1e through `ravif`. Its settings are here, in one place.

use super::pixels::{Layout, Pixels};
use crate::error::{ApiError, Result};

/// ravif's quality of the alpha plane. Edges of a transparent logo show errors in alpha
/// more than colour noise shows, so it is kept above the colour quality.
pub const AVIF_ALPHA_QUALITY: f32 = 90.0;

/// rav1e's speed preset (1 slowest and smallest .. 10 fastest), through ravif's tweaks of
/// it. Measured on the bench photos' variants, one thread (docs/image-pipeline-bench.md,
/// "AVIF siblings"): 9 took 40-50% of speed 8's time (6 was no faster than 8) for files at
/// most 3.4% larger; 10 took a third less again but made a smooth photo's files up to 32%
/// larger.
pub const AVIF_SPEED: u8 = 9;

/// The most pixels a variant may have to be given an AVIF sibling: more, and the request
/// gets the WebP sibling instead. 1024x1024: every large variant (1024 px box) and smaller
/// is under it, a big one (2048 px box) only when its original was that small. At speed 9 a
/// megapixel took 1.8-2.5 s of one core (x86_64, rav1e without assembly: the hosts'
/// build), and a big variant's 3.1 MP 7.6 s, close to `image-sibling`'s 10 s timeout on its
/// one vCPU; a viewer waits for the first request too. rav1e's memory grows with the frame
/// (docs/budgets.md, "AVIF siblings").
pub const AVIF_MAX_PIXELS: u64 = 1_048_576;

/// The AVIF sibling of a variant, alpha kept (grey is expanded to RGB), at its size's
/// `quality` (`sibling::AVIF_QUALITY`) and the siblings' other settings.
pub(super) fn encode_avif_sibling(pixels: &Pixels, quality: f32) -> Result<Vec<u8>> {
    encode_avif_pixels(pixels, AvifSettings::sibling(quality))
}

/// The pixels as AVIF at `settings`, alpha kept, grey expanded to RGB.
pub(super) fn encode_avif_pixels(pixels: &Pixels, settings: AvifSettings) -> Result<Vec<u8>> {
    let (data, channels) = match pixels.layout {
        Layout::Rgb8 => (pixels.data.as_slice().into(), 3),
        Layout::Rgba8 => (pixels.data.as_slice().into(), 4),
        Layout::L8 => (super::codec::expand_grey(pixels).into(), 3),
        Layout::La8 => (super::codec::to_rgba(pixels).into(), 4),
    };
    let data: std::borrow::Cow<'_, [u8]> = data;
    encode_avif(&data, pixels.width, pixels.height, channels, settings)
}

/// What an AVIF encode is asked for: [`AvifSettings::sibling`] is what the siblings use.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AvifSettings {
    /// 1-100.
    pub quality: f32,
    /// 1-100.
    pub alpha_quality: f32,
    /// 1-10.
    pub speed: u8,
    /// rav1e's threads: `None` for the process's rayon pool, `Some(1)` for one core (what
    /// one `image-sibling` instance has).
    pub threads: Option<usize>,
}

impl AvifSettings {
    /// A sibling's settings at its size's `quality` (`sibling::AVIF_QUALITY`). One thread
    /// per encode: `operations::siblings` runs one encode per core, and on the function's
    /// one vCPU rav1e's threads cost twice the CPU time (3.8 s against 1.8 s for a 1024x768
    /// variant, measured) for nothing.
    pub const fn sibling(quality: f32) -> AvifSettings {
        AvifSettings {
            quality,
            alpha_quality: AVIF_ALPHA_QUALITY,
            speed: AVIF_SPEED,
            threads: Some(1),
        }
    }
}

/// Encodes interleaved 8-bit RGB (`channels` 3) or RGBA (4, unassociated alpha) pixels as
/// AVIF. For measuring tools (the fidelity and timing measurements of issue 34); the
/// siblings go through [`encode_avif_sibling`]. Settings out of range are refused, never a
/// panic.
#[doc(hidden)]
pub fn encode_avif(
    data: &[u8],
    width: u32,
    height: u32,
    channels: u8,
    settings: AvifSettings,
) -> Result<Vec<u8>> {
    let AvifSettings {
        quality,
        alpha_quality,
        speed,
        threads,
    } = settings;
    let in_range = |q: f32| (1.0..=100.0).contains(&q);
    if !in_range(quality) || !in_range(alpha_quality) || !(1..=10).contains(&speed) {
        return Err(ApiError::internal(format!(
            "AVIF settings out of range: {settings:?}"
        )));
    }
    let (w, h) = (width as usize, height as usize);
    if data.len() != w * h * usize::from(channels) {
        return Err(ApiError::internal(format!(
            "{} bytes are not {width}x{height} pixels of {channels} channels",
            data.len()
        )));
    }
    // Through `avif-kernel`, never ravif directly: ravif's entry point is `#[inline]`, so
    // called from here the whole encoder would be compiled into this crate, unoptimised in
    // the dev profile (avif-kernel's documentation).
    let settings = avif_kernel::Settings {
        quality,
        alpha_quality,
        speed,
        threads,
    };
    let encoded = match channels {
        3 => avif_kernel::encode_rgb(data, w, h, settings),
        4 => avif_kernel::encode_rgba(data, w, h, settings),
        _ => {
            return Err(ApiError::internal(format!(
                "AVIF input must be RGB or RGBA, not {channels} channels"
            )))
        }
    };
    encoded.map_err(|e| ApiError::from(anyhow::Error::new(e).context("encoding an AVIF")))
}

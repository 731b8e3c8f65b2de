//! How the pipeline refuses an upload: a 400 on the `upload` field for a file it will not
//! take (wrong type, corrupt, unsupported), a 413 for an image over the size limits.

use crate::config::ImageLimits;
use crate::error::{ApiError, Result};

/// The form field that validation errors are reported under.
const FIELD: &str = "upload";

/// 400 on the `upload` field.
pub(super) fn bad_upload(message: impl Into<String>) -> ApiError {
    ApiError::field(FIELD, message)
}

/// Size limits, checked against the header before any pixel is decoded.
impl ImageLimits {
    /// 413 if the declared size is over the limits.
    pub(super) fn check(&self, width: u32, height: u32) -> Result<()> {
        if width > self.max_side || height > self.max_side {
            return Err(ApiError::TooLarge(format!(
                "the image is {width}x{height} pixels; at most {} pixels a side are accepted: \
                 scale it down and upload it again",
                self.max_side
            )));
        }
        let pixels = u64::from(width) * u64::from(height);
        if pixels > self.max_pixels {
            return Err(ApiError::TooLarge(format!(
                "the image is {width}x{height} pixels ({:.1} megapixels); at most {} megapixels are \
                 accepted: scale it down and upload it again",
                pixels as f64 / 1e6,
                self.max_pixels as f64 / 1e6
            )));
        }
        Ok(())
    }

    /// 413 if an animation of `frames` frames on a `width`x`height` canvas is over the
    /// frame limits: its frame count, or its pixels in all frames (canvas x frames). The
    /// header walks count at most `max_frames + 1` frames, so a larger count reads as
    /// "more than". A still image (one frame) is never refused here.
    pub(super) fn check_animation(&self, width: u32, height: u32, frames: u32) -> Result<()> {
        if frames <= 1 {
            return Ok(());
        }
        if frames > self.max_frames {
            return Err(ApiError::TooLarge(format!(
                "the animation has more than {max} frames; at most {max} frames are accepted: \
                 give it fewer frames and upload it again",
                max = self.max_frames
            )));
        }
        let pixels = u64::from(width) * u64::from(height) * u64::from(frames);
        if pixels > self.max_animation_pixels {
            return Err(ApiError::TooLarge(format!(
                "the animation is {width}x{height} pixels with {frames} frames ({:.1} megapixels \
                 in all its frames); at most {} megapixels in all frames are accepted: make it \
                 smaller or give it fewer frames, and upload it again",
                pixels as f64 / 1e6,
                self.max_animation_pixels as f64 / 1e6
            )));
        }
        Ok(())
    }
}

/// What was wrong with image data a decoder could not read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Unreadable {
    /// The data ends before the image is complete.
    Truncated,
    /// The data is damaged (or uses a feature no decoder here reads).
    Corrupt,
}

/// 400 for image data a decoder could not read, in a partner's words: what is wrong and
/// what to do. The decoder's own error (its internals mean nothing to a partner) is logged.
pub(super) fn unreadable_image_data(
    format: super::format::ImageFormat,
    what: Unreadable,
    cause: &dyn std::fmt::Display,
) -> ApiError {
    let name = format.name();
    tracing::info!(format = name, kind = ?what, cause = %cause, "upload refused: image data unreadable");
    bad_upload(match what {
        Unreadable::Truncated => format!(
            "the {name} is truncated: its image data ends before the image is complete; \
             upload the whole file"
        ),
        Unreadable::Corrupt => format!(
            "the {name} is corrupt: its image data is damaged and cannot be decoded; open it \
             in an image editor, save or export it again, and upload the new file"
        ),
    })
}

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
}

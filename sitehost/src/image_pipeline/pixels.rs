//! [`Pixels`]: the 8-bit interleaved image every stage hands on, from the decoders through
//! the resize cascade and the colour conversion to the encoders.

use ::image::{DynamicImage, ExtendedColorType};

use crate::error::{ApiError, Result};

/// Interleaved 8-bit channel layouts the pipeline works in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Layout {
    L8,
    La8,
    Rgb8,
    Rgba8,
}

impl Layout {
    pub fn channels(self) -> usize {
        match self {
            Layout::L8 => 1,
            Layout::La8 => 2,
            Layout::Rgb8 => 3,
            Layout::Rgba8 => 4,
        }
    }

    pub fn color_type(self) -> ExtendedColorType {
        match self {
            Layout::L8 => ExtendedColorType::L8,
            Layout::La8 => ExtendedColorType::La8,
            Layout::Rgb8 => ExtendedColorType::Rgb8,
            Layout::Rgba8 => ExtendedColorType::Rgba8,
        }
    }
}

/// A decoded or resized image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Pixels {
    pub width: u32,
    pub height: u32,
    pub layout: Layout,
    pub data: Vec<u8>,
}

impl Pixels {
    pub fn from_dynamic(image: DynamicImage) -> Pixels {
        let (width, height) = (image.width(), image.height());
        let (layout, data) = match image {
            DynamicImage::ImageLuma8(b) => (Layout::L8, b.into_raw()),
            DynamicImage::ImageLumaA8(b) => (Layout::La8, b.into_raw()),
            DynamicImage::ImageRgb8(b) => (Layout::Rgb8, b.into_raw()),
            DynamicImage::ImageRgba8(b) => (Layout::Rgba8, b.into_raw()),
            // 16-bit and float images are reduced to 8 bits, keeping alpha and grey.
            other => match (other.color().has_alpha(), other.color().has_color()) {
                (false, false) => (Layout::L8, other.into_luma8().into_raw()),
                (true, false) => (Layout::La8, other.into_luma_alpha8().into_raw()),
                (false, true) => (Layout::Rgb8, other.into_rgb8().into_raw()),
                (true, true) => (Layout::Rgba8, other.into_rgba8().into_raw()),
            },
        };
        Pixels {
            width,
            height,
            layout,
            data,
        }
    }

    pub fn into_dynamic(self) -> Result<DynamicImage> {
        let (w, h) = (self.width, self.height);
        let bad = || ApiError::internal("pixel buffer does not match its dimensions");
        Ok(match self.layout {
            Layout::L8 => DynamicImage::ImageLuma8(
                ::image::ImageBuffer::from_raw(w, h, self.data).ok_or_else(bad)?,
            ),
            Layout::La8 => DynamicImage::ImageLumaA8(
                ::image::ImageBuffer::from_raw(w, h, self.data).ok_or_else(bad)?,
            ),
            Layout::Rgb8 => DynamicImage::ImageRgb8(
                ::image::ImageBuffer::from_raw(w, h, self.data).ok_or_else(bad)?,
            ),
            Layout::Rgba8 => DynamicImage::ImageRgba8(
                ::image::ImageBuffer::from_raw(w, h, self.data).ok_or_else(bad)?,
            ),
        })
    }
}

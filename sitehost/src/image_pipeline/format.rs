//! The four accepted image formats: their names, media types and file extensions, and how
//! they map to the `image` crate's formats (whose signature detection and decoders the
//! pipeline uses for some of them).

use std::fmt;

/// JPEG and lossy WebP quality of the variants (the same knob as `vips ...[Q=85]`): the
/// encoders of each format read it here.
pub(super) const QUALITY: u8 = 85;

/// Listed in every "wrong type" message.
pub(super) const ACCEPTED: &str = "JPEG, PNG, GIF, WebP";

/// The accepted formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ImageFormat {
    Jpeg,
    Png,
    Gif,
    WebP,
}

impl ImageFormat {
    pub fn name(self) -> &'static str {
        match self {
            ImageFormat::Jpeg => "JPEG",
            ImageFormat::Png => "PNG",
            ImageFormat::Gif => "GIF",
            ImageFormat::WebP => "WebP",
        }
    }

    pub fn mimetype(self) -> &'static str {
        match self {
            ImageFormat::Jpeg => "image/jpeg",
            ImageFormat::Png => "image/png",
            ImageFormat::Gif => "image/gif",
            ImageFormat::WebP => "image/webp",
        }
    }

    /// File extension without the dot.
    pub fn extension(self) -> &'static str {
        match self {
            ImageFormat::Jpeg => "jpg",
            ImageFormat::Png => "png",
            ImageFormat::Gif => "gif",
            ImageFormat::WebP => "webp",
        }
    }

    /// The accepted format the bytes' signature shows (`image`'s own detection), if any.
    pub(super) fn guess(bytes: &[u8]) -> Option<ImageFormat> {
        match ::image::guess_format(bytes) {
            Ok(::image::ImageFormat::Jpeg) => Some(ImageFormat::Jpeg),
            Ok(::image::ImageFormat::Png) => Some(ImageFormat::Png),
            Ok(::image::ImageFormat::Gif) => Some(ImageFormat::Gif),
            Ok(::image::ImageFormat::WebP) => Some(ImageFormat::WebP),
            _ => None,
        }
    }

    /// The same format as the `image` crate names it, for its decoders.
    pub(super) fn in_image_crate(self) -> ::image::ImageFormat {
        match self {
            ImageFormat::Png => ::image::ImageFormat::Png,
            ImageFormat::Gif => ::image::ImageFormat::Gif,
            ImageFormat::WebP => ::image::ImageFormat::WebP,
            ImageFormat::Jpeg => ::image::ImageFormat::Jpeg,
        }
    }
}

impl fmt::Display for ImageFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// libwebp's method (0 fastest .. 6 smallest) of the WebP siblings of JPEG, PNG and GIF
/// variants: on a 12 MP photo's medium variant method 2 took half of method 4's time for
/// files 1% larger, and method 0 made files larger than the JPEGs.
pub(super) const SIBLING_METHOD: i32 = 2;

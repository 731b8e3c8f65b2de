//! Animated WebP: read through image-webp (via `image`), frame by frame, and written with
//! libwebp's WebPAnimEncoder, which stores each frame as the rectangle that changed (lossy,
//! at the variants' quality). The `webp` crate's own `AnimEncoder` is not used: it gives
//! the last frame the average of the others' durations (its closing call passes timestamp
//! 0, which libwebp refuses), and keeps every frame's pixels until the end.

use std::io::Cursor;
use std::ptr::NonNull;

use ::image::codecs::webp::WebPDecoder;
use ::image::{AnimationDecoder, ImageDecoder, ImageError};
use libwebp_sys as sys;

use super::decode_check::agree;
use super::format::{ImageFormat, QUALITY, SIBLING_METHOD};
use super::frames::{Animation, CanvasFrame, Plays};
use super::pixels::{Layout, Pixels};
use super::refusal::{unreadable_image_data, Unreadable};
use super::sniff::Header;
use crate::config::ImageLimits;
use crate::error::{ApiError, Result};

/// An animated WebP's frames as browsers show them: composited by image-webp on a canvas
/// that starts transparent, a frame disposed of to background clearing its area to
/// transparent (as browsers do, whatever background colour the file names). Reads the
/// `header.frames` frames the header walk counted and checked.
pub(super) fn frames<'a>(
    bytes: &'a [u8],
    header: &Header,
    limits: &ImageLimits,
) -> Result<Animation<'a>> {
    let mut decoder = WebPDecoder::new(Cursor::new(bytes)).map_err(refused)?;
    let (width, height) = decoder.dimensions();
    agree(header, width, height)?;
    limits.check(width, height)?;
    // Without a background colour image-webp does not clear a disposed frame at all.
    decoder
        .set_background_color(::image::Rgba([0, 0, 0, 0]))
        .map_err(refused)?;
    let plays = match decoder.loop_count() {
        ::image::metadata::LoopCount::Infinite => Plays::Forever,
        ::image::metadata::LoopCount::Finite(n) => Plays::Times(n),
    };
    let frames = decoder
        .into_frames()
        .take(header.frames as usize)
        .map(|frame| {
            let frame = frame.map_err(refused)?;
            let (numer, denom) = frame.delay().numer_denom_ms();
            let image = frame.into_buffer();
            Ok(CanvasFrame {
                pixels: Pixels {
                    width: image.width(),
                    height: image.height(),
                    layout: Layout::Rgba8,
                    data: image.into_raw(),
                },
                delay_ms: numer / denom.max(1),
                colours: None,
            })
        });
    Ok(Animation::new(width, height, plays, Box::new(frames)))
}

/// An image-webp error as the partner sees it.
fn refused(e: ImageError) -> ApiError {
    let format = ImageFormat::WebP;
    match e {
        ImageError::Limits(e) => ApiError::TooLarge(format!(
            "the image needs more memory to decode than its size allows: {e}"
        )),
        ImageError::IoError(ref io) if io.kind() == std::io::ErrorKind::UnexpectedEof => {
            unreadable_image_data(format, Unreadable::Truncated, &e)
        }
        other => unreadable_image_data(format, Unreadable::Corrupt, &other),
    }
}

/// libwebp's animation encoder, fed a frame at a time. Frames are lossy at the variants'
/// quality, alpha kept, with the WebP siblings' method; only what changed from one frame to
/// the next is encoded (libwebp's own choice of rectangle and disposal), and no key frames
/// are inserted, which would cost a whole frame each.
pub(super) struct AnimWebp {
    encoder: NonNull<sys::WebPAnimEncoder>,
    config: sys::WebPConfig,
    width: u32,
    height: u32,
    /// When the next frame starts, in milliseconds (libwebp takes wrapping timestamps).
    timestamp: i32,
}

fn libwebp_failed(what: &str) -> ApiError {
    ApiError::internal(format!("encoding an animated WebP: {what}"))
}

impl AnimWebp {
    pub fn new(width: u32, height: u32, plays: Plays) -> Result<Self> {
        let mut config =
            sys::WebPConfig::new().map_err(|()| libwebp_failed("no default configuration"))?;
        config.quality = f32::from(QUALITY);
        config.method = SIBLING_METHOD;
        config.alpha_compression = 1;
        config.lossless = 0;
        // SAFETY: the options are written by libwebp's own initialiser before being read,
        // and the encoder is checked for null.
        let encoder = unsafe {
            let mut options = std::mem::MaybeUninit::<sys::WebPAnimEncoderOptions>::uninit();
            if sys::WebPAnimEncoderOptionsInitInternal(
                options.as_mut_ptr(),
                sys::WebPGetMuxABIVersion(),
            ) == 0
            {
                return Err(libwebp_failed("no default options"));
            }
            let mut options = options.assume_init();
            options.anim_params.loop_count = match plays {
                Plays::Forever => 0,
                Plays::Times(n) => i32::try_from(n.get().min(65_535)).unwrap_or(65_535),
            };
            let (w, h) = (dimension(width)?, dimension(height)?);
            sys::WebPAnimEncoderNewInternal(w, h, &options, sys::WebPGetMuxABIVersion())
        };
        Ok(AnimWebp {
            encoder: NonNull::new(encoder).ok_or_else(|| libwebp_failed("no encoder"))?,
            config,
            width,
            height,
            timestamp: 0,
        })
    }

    /// Adds a frame (the whole canvas) shown for `delay_ms`.
    pub fn add(&mut self, frame: &Pixels, delay_ms: u32) -> Result<()> {
        if (frame.width, frame.height) != (self.width, self.height) {
            return Err(libwebp_failed("a frame of another size"));
        }
        let (import, channels): (
            unsafe extern "C" fn(*mut sys::WebPPicture, *const u8, i32) -> i32,
            usize,
        ) = match frame.layout {
            Layout::Rgba8 => (sys::WebPPictureImportRGBA, 4),
            Layout::Rgb8 => (sys::WebPPictureImportRGB, 3),
            Layout::L8 | Layout::La8 => return Err(libwebp_failed("a grey frame")),
        };
        let mut picture = sys::WebPPicture::new().map_err(|()| libwebp_failed("no picture"))?;
        picture.use_argb = 1;
        picture.width = dimension(self.width)?;
        picture.height = dimension(self.height)?;
        let stride = dimension(self.width)? * channels as i32;
        // SAFETY: `frame.data` holds width x height pixels of `channels` bytes (a `Pixels`
        // invariant, checked here); the picture copies them, and is freed on every path.
        let added = unsafe {
            if frame.data.len() != self.width as usize * self.height as usize * channels {
                return Err(libwebp_failed("a frame buffer of the wrong size"));
            }
            let imported = import(&mut picture, frame.data.as_ptr(), stride) != 0;
            let added = imported
                && sys::WebPAnimEncoderAdd(
                    self.encoder.as_ptr(),
                    &mut picture,
                    self.timestamp,
                    &self.config,
                ) != 0;
            sys::WebPPictureFree(&mut picture);
            added
        };
        if !added {
            return Err(self.error("adding a frame"));
        }
        self.timestamp = self.timestamp.wrapping_add(delay_ms as i32);
        Ok(())
    }

    /// The file, the last frame lasting until the end time of what was added.
    pub fn finish(self) -> Result<Vec<u8>> {
        let mut data = sys::WebPData::default();
        // SAFETY: the encoder is live until `self` drops; a null frame marks the end (its
        // timestamp is the last frame's end); the assembled data is copied, then freed.
        let assembled = unsafe {
            sys::WebPAnimEncoderAdd(
                self.encoder.as_ptr(),
                std::ptr::null_mut(),
                self.timestamp,
                std::ptr::null(),
            ) != 0
                && sys::WebPAnimEncoderAssemble(self.encoder.as_ptr(), &mut data) != 0
        };
        if !assembled {
            return Err(self.error("assembling"));
        }
        // SAFETY: libwebp allocated `size` bytes at `bytes`, freed right after the copy.
        let bytes = unsafe {
            let bytes = std::slice::from_raw_parts(data.bytes, data.size).to_vec();
            sys::WebPDataClear(&mut data);
            bytes
        };
        Ok(bytes)
    }

    fn error(&self, what: &str) -> ApiError {
        // SAFETY: libwebp returns a NUL-terminated string it owns, or null.
        let message = unsafe {
            let message = sys::WebPAnimEncoderGetError(self.encoder.as_ptr());
            if message.is_null() {
                String::new()
            } else {
                std::ffi::CStr::from_ptr(message)
                    .to_string_lossy()
                    .into_owned()
            }
        };
        libwebp_failed(&format!("{what}: {message}"))
    }
}

impl Drop for AnimWebp {
    fn drop(&mut self) {
        // SAFETY: the encoder was made by WebPAnimEncoderNew and is deleted once.
        unsafe { sys::WebPAnimEncoderDelete(self.encoder.as_ptr()) }
    }
}

fn dimension(side: u32) -> Result<i32> {
    i32::try_from(side).map_err(|_| libwebp_failed("a side too large"))
}

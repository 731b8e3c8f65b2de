//! What the pipeline asks of libjpeg-turbo (by way of mozjpeg, in its libjpeg-turbo mode):
//!
//! - **Decoding at a reduced scale.** Its scaled IDCT turns each 8x8 block straight into an
//!   NxN one, N from 1 to 7, where the biggest variant needs fewer pixels than the original
//!   has. A 4000x3000 photo for the 2048-pixel variant decodes at 5/8, 2500x1875: 39% of the
//!   pixels to colour-convert, store and resize. The inverse DCT at N/8 keeps the NxN lowest
//!   frequencies, a low-pass filter, so the Lanczos resize that follows has no aliasing to
//!   undo. Used for baseline and progressive files alike (a progressive file's coefficients
//!   are all held until its last scan, at 2 bytes each whatever the scale, but the
//!   inverse DCT, colour conversion and the output are at the reduced size), in a colour
//!   space it converts to RGB or grey (YCbCr, RGB, greyscale), at full size too where no
//!   reduction covers the biggest variant. CMYK and YCCK files go to zune-jpeg.
//! - **Encoding the JPEG variants**: baseline, 4:2:0 with box-filtered chroma and the
//!   standard Huffman tables at quality 85, libjpeg's own defaults (the same bytes as
//!   `cjpeg -quality 85`), with its SIMD: a quarter of the pure-Rust encoder's time here.
//!
//! libjpeg reports a fatal error by unwinding (mozjpeg's error manager); it is caught here
//! and answered as a corrupt file (decoding) or an internal error (encoding). Decoding uses
//! an error manager of its own ([`strict_error_mgr`]): libjpeg goes on past damaged image
//! data with a warning and fills the rest with grey, and those warnings refuse the file
//! instead, as docs/api.md promises for corrupt files.

use std::panic::{catch_unwind, AssertUnwindSafe};

use anyhow::Context;
use mozjpeg::{ColorSpace, Compress, Decompress};
use mozjpeg_sys::{jpeg_common_struct, jpeg_error_mgr, jpeg_std_error};

use super::format::{ImageFormat, QUALITY};
use super::pixels::{Layout, Pixels};
use super::refusal::{unreadable_image_data, Unreadable};
use super::sniff::Header;
use crate::error::{ApiError, Result};

/// The scale numerator (over 8) for a decode at least `need` (width, height) in size: the
/// smallest N whose output, `ceil(side * N / 8)` as libjpeg rounds it, covers both sides.
pub(super) fn scale_for(width: u32, height: u32, need: (u32, u32)) -> u8 {
    #[cfg(test)]
    if FULL_SIZE_ONLY.get() {
        return 8;
    }
    let covers = |side: u32, n: u32, need: u32| {
        (u64::from(side) * u64::from(n)).div_ceil(8) >= u64::from(need)
    };
    (1..8u8)
        .find(|&n| covers(width, n.into(), need.0) && covers(height, n.into(), need.1))
        .unwrap_or(8)
}

#[cfg(test)]
thread_local! {
    /// Tests only: decode at full size on this thread, for a reference to compare with.
    pub(super) static FULL_SIZE_ONLY: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Decodes a JPEG at `scale`/8, or `None` if libjpeg would not convert this file's
/// colour space.
pub(super) fn decode(bytes: &[u8], header: &Header, scale: u8) -> Result<Option<Pixels>> {
    let outcome = catch_unwind(AssertUnwindSafe(|| decode_unguarded(bytes, header, scale)));
    match outcome {
        Ok(result) => result,
        Err(stopped) => Err(match stopped.downcast_ref::<Stopped>() {
            Some(Stopped::Warning(code)) if *code == mozjpeg_sys::JWRN_JPEG_EOF => {
                unreadable_image_data(
                    ImageFormat::Jpeg,
                    Unreadable::Truncated,
                    &Stopped::Warning(*code),
                )
            }
            Some(stopped) => unreadable_image_data(ImageFormat::Jpeg, Unreadable::Corrupt, stopped),
            None => unreadable_image_data(
                ImageFormat::Jpeg,
                Unreadable::Corrupt,
                &fatal_message(&*stopped),
            ),
        }),
    }
}

/// Why libjpeg stopped a decode, carried by the unwind out of [`strict_error_mgr`]'s
/// handlers: libjpeg's message code (its `jerror.h` table).
#[derive(Debug, Clone, Copy)]
enum Stopped {
    Fatal(i32),
    /// A warning that means the pixels are not all in the file.
    Warning(i32),
}

impl std::fmt::Display for Stopped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Stopped::Fatal(code) => write!(f, "libjpeg error {code}"),
            Stopped::Warning(code) => write!(f, "libjpeg warning {code}"),
        }
    }
}

/// The warnings that mean the image data is damaged or cut short (libjpeg decodes on,
/// filling what it cannot read with grey): a bad Huffman code, data ending at a marker, a
/// lost restart marker, the file ending early (arithmetic-coded files are refused by the
/// header walk). Stray bytes before a marker (JWRN_EXTRANEOUS_DATA) and the warnings about
/// odd but readable files are not among them.
const CORRUPT_DATA_WARNINGS: [mozjpeg_sys::J_MESSAGE_CODE; 4] = [
    mozjpeg_sys::JWRN_HUFF_BAD_CODE,
    mozjpeg_sys::JWRN_HIT_MARKER,
    mozjpeg_sys::JWRN_MUST_RESYNC,
    mozjpeg_sys::JWRN_JPEG_EOF,
];

/// libjpeg's standard error manager, with an unwind for fatal errors (as mozjpeg's own) and
/// for the warnings in [`CORRUPT_DATA_WARNINGS`].
fn strict_error_mgr() -> jpeg_error_mgr {
    // SAFETY: jpeg_error_mgr is a C struct of integers, pointers and optional function
    // pointers, for which all-zero is valid; jpeg_std_error fills it in.
    let mut err: jpeg_error_mgr = unsafe { std::mem::zeroed() };
    unsafe { jpeg_std_error(&mut err) };
    err.error_exit = Some(stop_on_error);
    err.emit_message = Some(stop_on_corrupt_data);
    err
}

extern "C-unwind" fn stop_on_error(cinfo: &mut jpeg_common_struct) {
    // SAFETY: libjpeg calls this with its error manager set.
    let code = unsafe { cinfo.err.as_ref() }.map_or(-1, |err| err.msg_code);
    std::panic::resume_unwind(Box::new(Stopped::Fatal(code)));
}

extern "C-unwind" fn stop_on_corrupt_data(
    cinfo: &mut jpeg_common_struct,
    level: std::os::raw::c_int,
) {
    // Level -1 is a warning; 0 and up are trace messages.
    if level != -1 {
        return;
    }
    // SAFETY: libjpeg calls this with its error manager set.
    let code = unsafe { cinfo.err.as_ref() }.map_or(-1, |err| err.msg_code);
    if CORRUPT_DATA_WARNINGS.contains(&code) {
        std::panic::resume_unwind(Box::new(Stopped::Warning(code)));
    }
}

/// The message a libjpeg unwind carries.
fn fatal_message(fatal: &(dyn std::any::Any + Send)) -> &str {
    fatal
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| fatal.downcast_ref::<&str>().copied())
        .unwrap_or("libjpeg stopped")
}

/// Encodes 8-bit RGB or grey pixels as a baseline JPEG at [`QUALITY`].
pub(super) fn encode(pixels: &Pixels) -> Result<Vec<u8>> {
    let colour_space = match pixels.layout {
        Layout::L8 => ColorSpace::JCS_GRAYSCALE,
        Layout::Rgb8 => ColorSpace::JCS_RGB,
        other => {
            return Err(ApiError::internal(format!(
                "libjpeg was given {other:?} pixels to encode"
            )))
        }
    };
    let outcome = catch_unwind(AssertUnwindSafe(|| -> anyhow::Result<Vec<u8>> {
        let mut compress = Compress::new(colour_space);
        compress.set_fastest_defaults();
        compress.set_size(pixels.width as usize, pixels.height as usize);
        compress.set_quality(f32::from(QUALITY));
        // Room for the typical 1-2 bits per pixel without regrowing.
        let out = Vec::with_capacity(pixels.data.len() / 6 + 1024);
        let mut started = compress.start_compress(out).context("starting")?;
        started
            .write_scanlines(&pixels.data)
            .context("writing rows")?;
        started.finish().context("finishing")
    }));
    match outcome {
        Ok(encoded) => Ok(encoded.context("libjpeg encoding a variant")?),
        Err(fatal) => Err(ApiError::internal(format!(
            "libjpeg encoding a variant: {}",
            fatal_message(&*fatal)
        ))),
    }
}

/// libjpeg's own reading of the size must be the header's, which was checked against the
/// limits before: then the scaled output is smaller still.
fn decode_unguarded(bytes: &[u8], header: &Header, scale: u8) -> Result<Option<Pixels>> {
    let corrupt = |e: std::io::Error| {
        let what = if e.kind() == std::io::ErrorKind::UnexpectedEof {
            Unreadable::Truncated
        } else {
            Unreadable::Corrupt
        };
        unreadable_image_data(ImageFormat::Jpeg, what, &e)
    };
    let mut decoder = Decompress::builder()
        .with_err(strict_error_mgr())
        .from_mem(bytes)
        .map_err(corrupt)?;
    let (width, height) = (decoder.width() as u64, decoder.height() as u64);
    if (width, height) != (u64::from(header.width), u64::from(header.height)) {
        return Err(super::refusal::bad_upload(format!(
            "the JPEG is corrupt: its header says {}x{} but its frame is {width}x{height}; \
             save or export it again and upload the new file",
            header.width, header.height
        )));
    }
    decoder.scale(scale);
    let (layout, started) = match decoder.color_space() {
        ColorSpace::JCS_GRAYSCALE => (Layout::L8, decoder.grayscale()),
        ColorSpace::JCS_YCbCr | ColorSpace::JCS_RGB => (Layout::Rgb8, decoder.rgb()),
        _ => return Ok(None),
    };
    let mut started = started.map_err(corrupt)?;
    let expected = |side: u32| (u64::from(side) * u64::from(scale)).div_ceil(8);
    let (out_width, out_height) = (started.width(), started.height());
    if (out_width as u64, out_height as u64) != (expected(header.width), expected(header.height)) {
        return Err(ApiError::internal(format!(
            "libjpeg scaled {}x{} by {scale}/8 to {out_width}x{out_height}",
            header.width, header.height
        )));
    }
    let data: Vec<u8> = started.read_scanlines().map_err(corrupt)?;
    // Every pixel is read. Dropped without `finish`: what follows the image data is not
    // needed (the header walk already found its end marker).
    drop(started);
    let pixels = Pixels {
        width: out_width as u32,
        height: out_height as u32,
        layout,
        data,
    };
    if pixels.data.len() != out_width * out_height * layout.channels() {
        return Err(ApiError::internal(
            "libjpeg returned a buffer of unexpected size",
        ));
    }
    Ok(Some(pixels))
}

#[cfg(test)]
mod tests {
    use ::image::{DynamicImage, RgbImage};
    use image_compare::Algorithm;

    use super::super::{process, ImageLimits};
    use super::*;
    use crate::domain::image_record::VARIANTS;

    #[test]
    fn the_scale_is_the_smallest_that_covers_the_biggest_variant() {
        // A 12 MP phone photo: 4000 x 5/8 = 2500 >= 2048 (4/8 would be 2000).
        assert_eq!(scale_for(4000, 3000, (2048, 1536)), 5);
        assert_eq!(scale_for(3000, 4000, (1536, 2048)), 5);
        // Exactly twice the box: 4/8 gives the variant's own size.
        assert_eq!(scale_for(4096, 3072, (2048, 1536)), 4);
        // libjpeg rounds up: ceil(2341 * 7 / 8) = 2049.
        assert_eq!(scale_for(2341, 1756, (2048, 1536)), 7);
        // Not bigger than the box by 8/7: no reduction.
        assert_eq!(scale_for(2300, 1725, (2048, 1536)), 8);
        assert_eq!(scale_for(2048, 1536, (2048, 1536)), 8);
        // A narrow panorama: the short side decides.
        assert_eq!(scale_for(16000, 1000, (2048, 128)), 2);
    }

    /// A photo-like test image: smooth gradients, texture at several frequencies, hard edges
    /// and fine lines (what a resize's filter shows, unlike flat colour).
    fn photo_like(width: u32, height: u32) -> RgbImage {
        RgbImage::from_fn(width, height, |x, y| {
            let (fx, fy) = (x as f32, y as f32);
            let texture =
                (fx / 7.0).sin() * (fy / 11.0).cos() * 40.0 + (fx / 53.0 + fy / 37.0).sin() * 30.0;
            let edge = if (x / 160 + y / 160) % 2 == 0 {
                40.0
            } else {
                -40.0
            };
            let line = if x % 97 < 2 || y % 89 < 2 { -60.0 } else { 0.0 };
            let base = 128.0 + texture + edge + line;
            let channel =
                |offset: f32, gradient: f32| (base + offset + gradient).clamp(0.0, 255.0) as u8;
            ::image::Rgb([
                channel(10.0, fx / width as f32 * 50.0 - 25.0),
                channel(0.0, fy / height as f32 * 50.0 - 25.0),
                channel(-10.0, 0.0),
            ])
        })
    }

    fn jpeg(image: &RgbImage, progressive: bool) -> Vec<u8> {
        let mut out = Vec::new();
        let mut encoder = jpeg_encoder::Encoder::new(&mut out, 92);
        encoder.set_progressive(progressive);
        encoder
            .encode(
                image,
                image.width() as u16,
                image.height() as u16,
                jpeg_encoder::ColorType::Rgb,
            )
            .expect("the test JPEG encodes");
        out
    }

    /// The reference of each variant: the original decoded at full size by the `image`
    /// crate and resized in one Lanczos3 step to the variant's size, as luma. The resize runs
    /// through `resize_kernels` (optimised in every profile): `image`'s generic resize would
    /// be compiled here, unoptimised in the tests, and took most of a minute.
    fn references(upload: &[u8], sizes: &[(u32, u32)]) -> Vec<::image::GrayImage> {
        use fast_image_resize::images::{Image, ImageRef};
        use fast_image_resize::{FilterType, PixelType, ResizeAlg, ResizeOptions, Resizer};
        let original = ::image::load_from_memory(upload)
            .expect("decodes")
            .to_rgb8();
        let src = ImageRef::new(
            original.width(),
            original.height(),
            original.as_raw(),
            PixelType::U8x3,
        )
        .expect("a whole RGB buffer");
        let options = ResizeOptions::new().resize_alg(ResizeAlg::Convolution(FilterType::Lanczos3));
        sizes
            .iter()
            .map(|&(width, height)| {
                let mut dst = Image::new(width, height, PixelType::U8x3);
                resize_kernels::resize(&mut Resizer::new(), &src, &mut dst, &options)
                    .expect("resizes");
                let rgb = RgbImage::from_raw(width, height, dst.into_vec()).expect("whole");
                DynamicImage::ImageRgb8(rgb).to_luma8()
            })
            .collect()
    }

    /// Mean SSIM (8x8 windows, on luma) of each variant of `upload` against its reference.
    fn ssim_per_variant(upload: &[u8], references: &[::image::GrayImage]) -> Vec<f64> {
        let processed = process(upload, &ImageLimits::default()).expect("processes");
        processed
            .variants
            .iter()
            .zip(references)
            .map(|(variant, expected)| {
                let ours = ::image::load_from_memory(&variant.bytes)
                    .expect("variant decodes")
                    .to_luma8();
                image_compare::gray_similarity_structure(&Algorithm::MSSIMSimple, &ours, expected)
                    .expect("same size")
                    .score
            })
            .collect()
    }

    /// Each variant made from a scaled decode has a mean SSIM of at least 0.97 against a
    /// one-step Lanczos3 resize of the full-size original (the pipeline's JPEG encoding
    /// accounts for most of the gap to 1), and is within 0.005 of the same variant made from
    /// a full-size decode of the same file; baseline and progressive alike.
    #[test]
    fn variants_from_a_scaled_decode_look_like_a_full_size_resize() {
        let image = photo_like(2800, 2100);
        assert_eq!(scale_for(2800, 2100, (2048, 1536)), 6);
        for progressive in [false, true] {
            let file = jpeg(&image, progressive);
            let sizes: Vec<(u32, u32)> = process(&file, &ImageLimits::default())
                .expect("processes")
                .variants
                .iter()
                .map(|v| (v.width, v.height))
                .collect();
            let references = references(&file, &sizes);
            let scaled = ssim_per_variant(&file, &references);
            FULL_SIZE_ONLY.set(true);
            let full = ssim_per_variant(&file, &references);
            FULL_SIZE_ONLY.set(false);
            for ((&(name, _), scaled), full) in VARIANTS.iter().zip(&scaled).zip(&full) {
                assert!(
                    *scaled >= 0.97,
                    "{name}: SSIM {scaled:.4} from the scaled decode"
                );
                assert!(
                    scaled + 0.005 >= *full,
                    "{name}: SSIM {scaled:.4} scaled, {full:.4} full size"
                );
            }
            eprintln!("progressive {progressive}: SSIM scaled {scaled:.4?}, full size {full:.4?}");
        }
    }

    #[test]
    fn a_fatal_libjpeg_error_is_a_400_not_a_panic() {
        // Big enough for a scaled decode, with the first component pointing at quantisation
        // table 3, which the file never defines: libjpeg stops (unwinds) in its start.
        let mut bytes = jpeg(&photo_like(2400, 1800), false);
        let sof = bytes
            .windows(2)
            .position(|w| w == [0xFF, 0xC0])
            .expect("a baseline frame header");
        bytes[sof + 12] = 3;
        match process(&bytes, &ImageLimits::default()) {
            Err(ApiError::Validation(fields)) => {
                let message = fields["upload"].join(" ");
                assert!(
                    message.contains("corrupt") && !message.contains("libjpeg"),
                    "{message}"
                );
            }
            other => panic!("expected a 400, got {other:?}"),
        }
    }
}

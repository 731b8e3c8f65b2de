//! Decoding to 8-bit interleaved [`Pixels`] and encoding variants in the original's format.

use std::io::Cursor;

use ::image::codecs::gif::GifEncoder;
use ::image::codecs::png::{CompressionType, FilterType, PngEncoder};
use ::image::{DynamicImage, ExtendedColorType, ImageEncoder, ImageError, ImageReader};
use anyhow::Context;
use zune_jpeg::zune_core::bytestream::ZCursor;
use zune_jpeg::zune_core::colorspace::ColorSpace;
use zune_jpeg::zune_core::options::DecoderOptions;

use super::decode_check::{agree, decode_alloc_limit, DECODER_ALLOWANCE};
use super::format::{ImageFormat, QUALITY, SIBLING_METHOD};
use super::gif_codec;
use super::libjpeg;
use super::pixels::{Layout, Pixels};
use super::refusal::{unreadable_image_data, Unreadable};
use super::sniff::jpeg_markers::jpeg_check_body;
use super::sniff::Header;
use crate::config::ImageLimits;
use crate::error::{ApiError, Result};

/// GIF palette quantisation speed (1 best .. 30 fastest); 10 is gif's recommended trade-off.
const GIF_SPEED: i32 = 10;

/// 413 for a decode that would allocate more than its limit.
fn over_alloc_limit(what: impl std::fmt::Display) -> ApiError {
    ApiError::TooLarge(format!(
        "the image needs more memory to decode than its size allows: {what}"
    ))
}

/// Decodes the whole image once (the first frame of an animation), in stored orientation,
/// at least `need` (width, height) in size. A JPEG in a colour space libjpeg converts
/// (YCbCr, RGB, grey), baseline or progressive, is decoded by libjpeg-turbo, at the
/// smallest N/8 scale that covers `need` (libjpeg.rs); CMYK and YCCK JPEGs by zune-jpeg at
/// full size; every other image at its full size. The header has already been checked
/// against the limits; each decoder's own idea of the size, read after its header parse, is
/// checked again before it allocates a pixel buffer.
pub(super) fn decode(
    bytes: &[u8],
    header: &Header,
    limits: &ImageLimits,
    need: (u32, u32),
) -> Result<Pixels> {
    if header.format == ImageFormat::Jpeg {
        // Before either JPEG decoder sees the image data, once.
        jpeg_check_body(bytes, header)?;
    }
    if header.format == ImageFormat::Jpeg {
        let scale = libjpeg::scale_for(header.width, header.height, need);
        if let Some(pixels) = libjpeg::decode(bytes, header, scale)? {
            return Ok(pixels);
        }
    }
    let pixels = match header.format {
        ImageFormat::Jpeg => decode_jpeg(bytes, header, limits)?,
        ImageFormat::Png => decode_png(bytes, header, limits)?,
        ImageFormat::Gif => gif_codec::decode_first_frame(bytes, header, limits)?,
        ImageFormat::WebP => decode_webp(bytes, header, limits)?,
    };
    // The decoded buffer is the size both checks saw.
    agree(header, pixels.width, pixels.height)?;
    Ok(pixels)
}

/// zune-jpeg directly (the same decoder `image` uses) to borrow the input without a copy and
/// to keep greyscale JPEGs single-channel.
fn decode_jpeg(bytes: &[u8], header: &Header, limits: &ImageLimits) -> Result<Pixels> {
    let side = limits.max_side as usize;
    let options = DecoderOptions::default()
        .set_max_width(side)
        .set_max_height(side);
    let mut decoder = zune_jpeg::JpegDecoder::new_with_options(ZCursor::new(bytes), options);
    let corrupt = |e: &dyn std::fmt::Display| {
        unreadable_image_data(ImageFormat::Jpeg, Unreadable::Corrupt, e)
    };
    decoder.decode_headers().map_err(|e| corrupt(&e))?;
    let (width, height) = decoder
        .dimensions()
        .ok_or_else(|| ApiError::internal("zune-jpeg parsed headers without dimensions"))?;
    let (width, height) = (width as u32, height as u32);
    agree(header, width, height)?;
    limits.check(width, height)?;
    let layout = match decoder.input_colorspace() {
        Some(ColorSpace::Luma) => Layout::L8,
        _ => Layout::Rgb8,
    };
    let out = if layout == Layout::L8 {
        ColorSpace::Luma
    } else {
        ColorSpace::RGB
    };
    decoder.set_options(options.jpeg_set_out_colorspace(out));
    let data = decoder.decode().map_err(|e| corrupt(&e))?;
    let info = decoder
        .info()
        .ok_or_else(|| ApiError::internal("zune-jpeg decoded without image info"))?;
    let pixels = Pixels {
        width: u32::from(info.width),
        height: u32::from(info.height),
        layout,
        data,
    };
    if pixels.data.len() != pixels.width as usize * pixels.height as usize * layout.channels() {
        return Err(ApiError::internal(
            "zune-jpeg returned a buffer of unexpected size",
        ));
    }
    Ok(pixels)
}

/// The png crate directly (the decoder `image` uses), for three things `image` does not
/// offer: it decodes straight to 8 bits a channel (`STRIP_16`: each 16-bit row is reduced
/// as it is unfiltered, so a 16-bit image never exists at 16 bits in memory, and palettes
/// and low bit depths are expanded, `EXPAND`), it skips the iCCP and text chunks the
/// variants never carry (`image` inflates the ICC profile), and it stops at the end of
/// the first image's data. Its own allocations (kept chunks, row buffers) are limited to
/// the allocation limit left after the output buffer, which is allocated here at 8 bits a channel.
fn decode_png(bytes: &[u8], header: &Header, limits: &ImageLimits) -> Result<Pixels> {
    let refused = |e: png::DecodingError| match e {
        png::DecodingError::LimitsExceeded => over_alloc_limit("the PNG decoder's limit"),
        png::DecodingError::IoError(ref io) if io.kind() == std::io::ErrorKind::UnexpectedEof => {
            unreadable_image_data(ImageFormat::Png, Unreadable::Truncated, &e)
        }
        png::DecodingError::IoError(_) | png::DecodingError::Format(_) => {
            unreadable_image_data(ImageFormat::Png, Unreadable::Corrupt, &e)
        }
        png::DecodingError::Parameter(_) => {
            ApiError::from(anyhow::Error::new(e).context("decoding a PNG"))
        }
    };
    let mut decoder = png::Decoder::new(Cursor::new(bytes));
    decoder.set_ignore_iccp_chunk(true);
    decoder.set_ignore_text_chunk(true);
    decoder.set_transformations(png::Transformations::normalize_to_color8());
    decoder.set_limits(png::Limits {
        bytes: usize::try_from(DECODER_ALLOWANCE).unwrap_or(usize::MAX),
    });
    let info = decoder.read_header_info().map_err(refused)?;
    let (width, height) = (info.width, info.height);
    agree(header, width, height)?;
    limits.check(width, height)?;
    let mut reader = decoder.read_info().map_err(refused)?;
    let layout = match reader.output_color_type() {
        (png::ColorType::Grayscale, png::BitDepth::Eight) => Layout::L8,
        (png::ColorType::GrayscaleAlpha, png::BitDepth::Eight) => Layout::La8,
        (png::ColorType::Rgb, png::BitDepth::Eight) => Layout::Rgb8,
        (png::ColorType::Rgba, png::BitDepth::Eight) => Layout::Rgba8,
        other => {
            return Err(ApiError::internal(format!(
                "png decodes to {other:?} despite normalize_to_color8"
            )))
        }
    };
    let size = width as usize * height as usize * layout.channels();
    if reader.output_buffer_size() != Some(size) {
        return Err(ApiError::internal(format!(
            "png wants {:?} bytes for {width}x{height} {layout:?}",
            reader.output_buffer_size()
        )));
    }
    let mut data = vec![0; size];
    reader.next_frame(&mut data).map_err(refused)?;
    Ok(Pixels {
        width,
        height,
        layout,
        data,
    })
}

/// WebP (the first frame of an animation) through `image`, with an allocation limit
/// derived from the image's size: the decoded RGBA image and the allowance.
fn decode_webp(bytes: &[u8], header: &Header, limits: &ImageLimits) -> Result<Pixels> {
    let format = ImageFormat::WebP;
    let refused = |e: ImageError| match e {
        ImageError::Limits(e) => over_alloc_limit(e),
        ImageError::IoError(ref io) if io.kind() == std::io::ErrorKind::UnexpectedEof => {
            unreadable_image_data(format, Unreadable::Truncated, &e)
        }
        ImageError::Decoding(_)
        | ImageError::Unsupported(_)
        | ImageError::IoError(_)
        | ImageError::Parameter(_) => unreadable_image_data(format, Unreadable::Corrupt, &e),
        other => ApiError::from(
            anyhow::Error::new(other).context(format!("decoding a {}", format.name())),
        ),
    };
    let bytes_per_pixel = 4;
    let mut alloc_limit = ::image::Limits::default();
    alloc_limit.max_image_width = Some(header.width);
    alloc_limit.max_image_height = Some(header.height);
    alloc_limit.max_alloc = Some(decode_alloc_limit(
        header.width,
        header.height,
        bytes_per_pixel,
    ));
    let mut reader = ImageReader::with_format(Cursor::new(bytes), format.in_image_crate());
    reader.limits(alloc_limit.clone());
    // The header parse only: the size the decoder will allocate for, checked first.
    let mut decoder = reader.into_decoder().map_err(refused)?;
    let (width, height) = ::image::ImageDecoder::dimensions(&decoder);
    agree(header, width, height)?;
    limits.check(width, height)?;
    // The output buffer counts against the limit too (`ImageReader::decode` does the same).
    alloc_limit
        .reserve(::image::ImageDecoder::total_bytes(&decoder))
        .map_err(refused)?;
    ::image::ImageDecoder::set_limits(&mut decoder, alloc_limit).map_err(refused)?;
    let image = DynamicImage::from_decoder(decoder).map_err(refused)?;
    Ok(Pixels::from_dynamic(image))
}

/// Encodes one variant in the given format, without any metadata.
pub(super) fn encode(pixels: &Pixels, format: ImageFormat) -> Result<Vec<u8>> {
    match format {
        ImageFormat::Jpeg => encode_jpeg(pixels),
        ImageFormat::Png => encode_png(pixels),
        ImageFormat::Gif => encode_gif(pixels),
        ImageFormat::WebP => encode_webp(pixels),
    }
}

fn encode_jpeg(pixels: &Pixels) -> Result<Vec<u8>> {
    match pixels.layout {
        Layout::L8 | Layout::Rgb8 => libjpeg::encode(pixels),
        // JPEG sources never have alpha; be safe if one does.
        Layout::La8 | Layout::Rgba8 => libjpeg::encode(&flatten(pixels)),
    }
}

fn encode_png(pixels: &Pixels) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    // zlib level 3: on the bench images 3-7% larger than level 6 ("Default") for a third
    // of the time. fdeflate ("Fast") is faster still but made flat artwork 2.3x larger.
    PngEncoder::new_with_quality(&mut out, CompressionType::Level(3), FilterType::Adaptive)
        .write_image(
            &pixels.data,
            pixels.width,
            pixels.height,
            pixels.layout.color_type(),
        )
        .context("encoding a PNG variant")?;
    Ok(out)
}

fn encode_gif(pixels: &Pixels) -> Result<Vec<u8>> {
    let rgba = to_rgba(pixels);
    let mut out = Vec::new();
    GifEncoder::new_with_speed(&mut out, GIF_SPEED)
        .encode(&rgba, pixels.width, pixels.height, ExtendedColorType::Rgba8)
        .context("encoding a GIF variant")?;
    Ok(out)
}

/// The pixels as libwebp takes them: RGB or RGBA (grey is expanded, its alpha kept).
fn webp_input(pixels: &Pixels) -> (std::borrow::Cow<'_, [u8]>, webp::PixelLayout) {
    match pixels.layout {
        Layout::Rgb8 => (pixels.data.as_slice().into(), webp::PixelLayout::Rgb),
        Layout::Rgba8 => (pixels.data.as_slice().into(), webp::PixelLayout::Rgba),
        Layout::L8 => (expand_grey(pixels).into(), webp::PixelLayout::Rgb),
        Layout::La8 => (to_rgba(pixels).into(), webp::PixelLayout::Rgba),
    }
}

/// Lossy WebP through libwebp (the `image` crate can only write lossless WebP).
fn encode_webp(pixels: &Pixels) -> Result<Vec<u8>> {
    let (data, layout) = webp_input(pixels);
    let memory = webp::Encoder::new(&data, layout, pixels.width, pixels.height)
        .encode_simple(false, f32::from(QUALITY))
        // libwebp's error is a plain enum (no `std::error::Error`): its name is the cause.
        .map_err(|e| ApiError::internal(format!("encoding a WebP variant: libwebp {e:?}")))?;
    Ok(memory.to_vec())
}

/// The lossy WebP sibling of a variant (`image_record::sibling_path`), alpha kept, at its
/// size's quality (`sibling::WEBP_QUALITY`).
pub(super) fn encode_webp_sibling(pixels: &Pixels, quality: f32) -> Result<Vec<u8>> {
    encode_lossy_webp(pixels, quality, SIBLING_METHOD)
}

/// Lossy WebP at `quality` (0-100) and `method` (0-6), alpha kept.
pub(super) fn encode_lossy_webp(pixels: &Pixels, quality: f32, method: i32) -> Result<Vec<u8>> {
    let (data, layout) = webp_input(pixels);
    let mut config = webp::WebPConfig::new()
        .map_err(|()| ApiError::internal("libwebp: no default encoder configuration"))?;
    config.quality = quality;
    config.method = method;
    config.alpha_compression = 1;
    let memory = webp::Encoder::new(&data, layout, pixels.width, pixels.height)
        .encode_advanced(&config)
        .map_err(|e| ApiError::internal(format!("encoding a WebP sibling: libwebp {e:?}")))?;
    Ok(memory.to_vec())
}

/// Grey to RGB.
pub(super) fn expand_grey(pixels: &Pixels) -> Vec<u8> {
    pixels.data.iter().flat_map(|&v| [v, v, v]).collect()
}

/// Any layout to RGBA.
pub(super) fn to_rgba(pixels: &Pixels) -> Vec<u8> {
    match pixels.layout {
        Layout::Rgba8 => pixels.data.clone(),
        Layout::Rgb8 => pixels
            .data
            .chunks_exact(3)
            .flat_map(|p| [p[0], p[1], p[2], 255])
            .collect(),
        Layout::L8 => pixels.data.iter().flat_map(|&v| [v, v, v, 255]).collect(),
        Layout::La8 => pixels
            .data
            .chunks_exact(2)
            .flat_map(|p| [p[0], p[0], p[0], p[1]])
            .collect(),
    }
}

/// Drops alpha by compositing on white (only reached for formats without alpha).
fn flatten(pixels: &Pixels) -> Pixels {
    let blend =
        |v: u8, a: u8| ((u16::from(v) * u16::from(a) + 255 * (255 - u16::from(a))) / 255) as u8;
    let (layout, data) = match pixels.layout {
        Layout::La8 => (
            Layout::L8,
            pixels
                .data
                .chunks_exact(2)
                .map(|p| blend(p[0], p[1]))
                .collect(),
        ),
        Layout::Rgba8 => (
            Layout::Rgb8,
            pixels
                .data
                .chunks_exact(4)
                .flat_map(|p| [blend(p[0], p[3]), blend(p[1], p[3]), blend(p[2], p[3])])
                .collect(),
        ),
        _ => (pixels.layout, pixels.data.clone()),
    };
    Pixels {
        width: pixels.width,
        height: pixels.height,
        layout,
        data,
    }
}

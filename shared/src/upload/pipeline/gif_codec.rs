//! GIF decoding with the gif crate directly (the decoder `image` uses), for what `image`
//! does not let it do: skip extension blocks the GIF spec does not define (the spec says
//! to skip them; browsers do), with an allocation limit derived from the image's size.

use std::num::NonZeroU64;

use super::codec::decode_budget;
use super::format::ImageFormat;
use super::pixels::{Layout, Pixels};
use super::refusal::{bad_upload, unreadable_image_data, Unreadable};
use super::sniff::Header;
use crate::config::ImageLimits;
use crate::error::{ApiError, Result};

/// The decoder's options: RGBA output, unknown blocks skipped, every frame inside the
/// logical screen (the header walk checked the first; the decoder checks them all), and at
/// most one frame's RGBA pixels plus the allowance allocated at a time.
fn options(header: &Header) -> gif::DecodeOptions {
    let mut options = gif::DecodeOptions::new();
    options.set_color_output(gif::ColorOutput::RGBA);
    options.allow_unknown_blocks(true);
    options.check_frame_consistency(true);
    let budget = decode_budget(header.width, header.height, 4);
    options.set_memory_limit(
        NonZeroU64::new(budget).map_or(gif::MemoryLimit::Unlimited, gif::MemoryLimit::Bytes),
    );
    options
}

/// A gif crate error as the partner sees it: truncated, corrupt, or (past the memory
/// limit) a 413.
fn refused(e: gif::DecodingError) -> ApiError {
    match e {
        gif::DecodingError::MemoryLimit | gif::DecodingError::OutOfMemory => ApiError::TooLarge(
            "the GIF needs more memory to decode than its size allows: a frame is larger than \
             its screen"
                .into(),
        ),
        gif::DecodingError::UnexpectedEof => {
            unreadable_image_data(ImageFormat::Gif, Unreadable::Truncated, &e)
        }
        gif::DecodingError::Io(ref io) if io.kind() == std::io::ErrorKind::UnexpectedEof => {
            unreadable_image_data(ImageFormat::Gif, Unreadable::Truncated, &e)
        }
        other => unreadable_image_data(ImageFormat::Gif, Unreadable::Corrupt, &other),
    }
}

/// The first frame, drawn on a transparent canvas of the logical screen's size (what a
/// browser shows before the animation runs). The header has been checked against the limits.
pub(super) fn decode_first_frame(
    bytes: &[u8],
    header: &Header,
    limits: &ImageLimits,
) -> Result<Pixels> {
    let mut decoder = options(header).read_info(bytes).map_err(refused)?;
    let (width, height) = (u32::from(decoder.width()), u32::from(decoder.height()));
    super::codec::agree(header, width, height)?;
    limits.check(width, height)?;
    let frame = decoder.read_next_frame().map_err(refused)?.ok_or_else(|| {
        bad_upload("the GIF has no image in it; upload a GIF with at least one frame")
    })?;
    let mut canvas = vec![0u8; width as usize * height as usize * 4];
    draw(&mut canvas, width, frame)?;
    Ok(Pixels {
        width,
        height,
        layout: Layout::Rgba8,
        data: canvas,
    })
}

/// Whether the GIF has more than one frame. Reads the frame headers only: no frame's data
/// is decompressed.
pub(super) fn is_animated(bytes: &[u8]) -> Result<bool> {
    let mut options = gif::DecodeOptions::new();
    options.allow_unknown_blocks(true);
    options.skip_frame_decoding(true);
    let mut decoder = options.read_info(bytes).map_err(refused)?;
    Ok(decoder.next_frame_info().map_err(refused)?.is_some()
        && decoder.next_frame_info().map_err(refused)?.is_some())
}

/// Copies a frame's RGBA rows onto the canvas at its position (the decoder checked that it
/// fits).
fn draw(canvas: &mut [u8], width: u32, frame: &gif::Frame<'_>) -> Result<()> {
    let (left, top) = (usize::from(frame.left), usize::from(frame.top));
    let frame_row = usize::from(frame.width) * 4;
    let canvas_row = width as usize * 4;
    if frame_row == 0 {
        return Ok(());
    }
    for (y, row) in frame.buffer.chunks_exact(frame_row).enumerate() {
        let start = (top + y) * canvas_row + left * 4;
        canvas
            .get_mut(start..start + frame_row)
            .ok_or_else(|| ApiError::internal("a GIF frame outside its screen"))?
            .copy_from_slice(row);
    }
    Ok(())
}

//! GIF decoding with the gif crate directly (the decoder `image` uses), for what `image`
//! does not let it do: skip extension blocks the GIF spec does not define (the spec says
//! to skip them; browsers do), with an allocation limit derived from the image's size. A
//! still GIF is its first frame; an animated one's frames are composited as browsers show
//! them ([`frames`]).

use std::num::{NonZeroU32, NonZeroU64};
use std::sync::Arc;

use super::decode_check::{agree, decode_alloc_limit};
use super::format::ImageFormat;
use super::frames::{Animation, CanvasFrame, Plays};
use super::pixels::{Layout, Pixels};
use super::quantise::colours_of;
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
    let alloc_limit = decode_alloc_limit(header.width, header.height, 4);
    options.set_memory_limit(
        NonZeroU64::new(alloc_limit).map_or(gif::MemoryLimit::Unlimited, gif::MemoryLimit::Bytes),
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
    agree(header, width, height)?;
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

/// An animated GIF's frames as browsers show them: each drawn over the canvas left by the
/// one before (its transparent pixels keep what is there), after that one's disposal (keep,
/// clear its area to transparent, or restore its area as it was). The canvas is the logical
/// screen, transparent at first (browsers ignore the background colour). Reads the
/// `header.frames` frames the header walk counted and no further; the first is read here,
/// so that a loop count written after it is known.
pub(super) fn frames<'a>(
    bytes: &'a [u8],
    header: &Header,
    limits: &ImageLimits,
) -> Result<Animation<'a>> {
    let decoder = options(header).read_info(bytes).map_err(refused)?;
    let (width, height) = (u32::from(decoder.width()), u32::from(decoder.height()));
    agree(header, width, height)?;
    limits.check(width, height)?;
    let mut frames = GifFrames {
        decoder,
        width,
        height,
        canvas: vec![0; width as usize * height as usize * 4],
        disposal: None,
        left: header.frames,
    };
    let first = frames.next().unwrap_or_else(|| {
        Err(bad_upload(
            "the GIF has no image in it; upload a GIF with at least one frame",
        ))
    })?;
    // GIF's loop count is how many times the animation repeats after it first plays (0:
    // forever); without it, the animation plays once.
    let plays = match frames.decoder.repeat() {
        gif::Repeat::Infinite => Plays::Forever,
        gif::Repeat::Finite(repeats) => {
            Plays::Times(NonZeroU32::new(u32::from(repeats) + 1).unwrap_or(NonZeroU32::MIN))
        }
    };
    Ok(Animation::new(
        width,
        height,
        plays,
        Box::new(std::iter::once(Ok(first)).chain(frames)),
    ))
}

/// A frame's area on the canvas: left, top, width, height.
#[derive(Debug, Clone, Copy)]
struct Area(usize, usize, usize, usize);

struct GifFrames<'a> {
    decoder: gif::Decoder<&'a [u8]>,
    width: u32,
    height: u32,
    canvas: Vec<u8>,
    /// How the frame last drawn leaves its area before the next is drawn, with the area's
    /// pixels from before it was drawn when they are to be restored.
    disposal: Option<(gif::DisposalMethod, Area, Vec<u8>)>,
    /// Frames still to read.
    left: u32,
}

impl GifFrames<'_> {
    /// The rows of `area` in the canvas, as byte ranges.
    fn rows(
        &self,
        Area(left, top, width, height): Area,
    ) -> impl Iterator<Item = std::ops::Range<usize>> {
        let stride = self.width as usize * 4;
        (top..top + height).map(move |y| y * stride + left * 4..y * stride + (left + width) * 4)
    }

    fn dispose(&mut self) {
        let Some((method, area, saved)) = self.disposal.take() else {
            return;
        };
        let rows: Vec<_> = self.rows(area).collect();
        match method {
            gif::DisposalMethod::Background => {
                for row in rows {
                    self.canvas[row].fill(0);
                }
            }
            gif::DisposalMethod::Previous => {
                let row_bytes = area.2 * 4;
                for (row, from) in rows.into_iter().zip(saved.chunks_exact(row_bytes.max(1))) {
                    self.canvas[row].copy_from_slice(from);
                }
            }
            gif::DisposalMethod::Any | gif::DisposalMethod::Keep => {}
        }
    }

    fn read(&mut self) -> Result<Option<CanvasFrame>> {
        self.dispose();
        let Some(frame) = self.decoder.read_next_frame().map_err(refused)? else {
            return Ok(None);
        };
        let area = Area(
            usize::from(frame.left),
            usize::from(frame.top),
            usize::from(frame.width),
            usize::from(frame.height),
        );
        let (dispose, delay) = (frame.dispose, frame.delay);
        if area.0 + area.2 > self.width as usize || area.1 + area.3 > self.height as usize {
            return Err(ApiError::internal("a GIF frame outside its screen"));
        }
        let stride = self.width as usize * 4;
        let saved = match dispose {
            gif::DisposalMethod::Previous => {
                let (left, top, width, height) = (area.0, area.1, area.2, area.3);
                let mut saved = Vec::with_capacity(width * height * 4);
                for y in top..top + height {
                    saved.extend_from_slice(&self.canvas[y * stride + left * 4..][..width * 4]);
                }
                saved
            }
            _ => Vec::new(),
        };
        let frame_row = area.2 * 4;
        if frame_row > 0 {
            for (y, row) in frame.buffer.chunks_exact(frame_row).enumerate() {
                let start = (area.1 + y) * stride + area.0 * 4;
                let out = &mut self.canvas[start..start + frame_row];
                for (to, from) in out.chunks_exact_mut(4).zip(row.chunks_exact(4)) {
                    // The transparent colour index decodes to alpha 0: what is under it stays.
                    if from[3] != 0 {
                        to.copy_from_slice(from);
                    }
                }
            }
        }
        self.disposal = Some((dispose, area, saved));
        Ok(Some(CanvasFrame {
            pixels: Pixels {
                width: self.width,
                height: self.height,
                layout: Layout::Rgba8,
                data: self.canvas.clone(),
            },
            delay_ms: u32::from(delay) * 10,
            colours: colours_of(&self.canvas, 256).map(Arc::from),
        }))
    }
}

impl Iterator for GifFrames<'_> {
    type Item = Result<CanvasFrame>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let read = self.read();
        if read.is_err() {
            self.left = 0;
        }
        read.transpose()
    }
}

//! Animated GIF variants, written a frame at a time: each frame is the rectangle that
//! changed since the frame before, its unchanged pixels transparent (so they show what is
//! already there), quantised to a palette of its own. GIF has one bit of alpha: a pixel at
//! least half opaque is opaque, any other transparent. A pixel that turns transparent is
//! cleared by the previous frame's disposal (to background), whose rectangle then covers
//! it: each frame is held until the next one is known, to choose its disposal.

use std::borrow::Cow;
use std::sync::Arc;

use super::frames::Plays;
use super::pixels::{Layout, Pixels};
use super::quantise::quantise;
use crate::error::{ApiError, Result};

/// A rectangle of the canvas: left, top, right and bottom (exclusive), in pixels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Rect {
    left: usize,
    top: usize,
    right: usize,
    bottom: usize,
}

impl Rect {
    fn union(self, other: Rect) -> Rect {
        Rect {
            left: self.left.min(other.left),
            top: self.top.min(other.top),
            right: self.right.max(other.right),
            bottom: self.bottom.max(other.bottom),
        }
    }
}

/// The frame held back until the next one says how it is disposed of.
struct Pending {
    /// The canvas as this frame leaves it, a pixel a word (see [`one_bit_alpha`]).
    canvas: Vec<u32>,
    rect: Rect,
    delay_cs: u16,
    /// The colours of the source frame it was resized from, if at most 256.
    source_colours: Option<Arc<[u8]>>,
}

pub(super) struct GifWriter {
    encoder: gif::Encoder<Vec<u8>>,
    width: usize,
    height: usize,
    /// The canvas under the pending frame: the frame before it, after its disposal.
    before: Vec<u32>,
    pending: Option<Pending>,
}

fn encoding_failed(e: gif::EncodingError) -> ApiError {
    ApiError::internal(format!("encoding an animated GIF variant: {e}"))
}

impl GifWriter {
    pub fn new(width: u32, height: u32, plays: Plays) -> Result<Self> {
        let side = |v: u32| u16::try_from(v).map_err(|_| ApiError::internal("a GIF over 65535"));
        let mut encoder = gif::Encoder::new(Vec::new(), side(width)?, side(height)?, &[])
            .map_err(encoding_failed)?;
        // The loop count is the repeats after the first play; none written, the animation
        // plays once.
        let repeat = match plays {
            Plays::Forever => gif::Repeat::Infinite,
            Plays::Times(n) => gif::Repeat::Finite(u16::try_from(n.get() - 1).unwrap_or(u16::MAX)),
        };
        encoder.set_repeat(repeat).map_err(encoding_failed)?;
        let (width, height) = (width as usize, height as usize);
        Ok(GifWriter {
            encoder,
            width,
            height,
            before: vec![TRANSPARENT; width * height],
            pending: None,
        })
    }

    /// Adds a frame (the whole canvas) shown for `delay_ms`, resized from a source frame
    /// of `source_colours` (at most 256, if known).
    pub fn add(
        &mut self,
        frame: &Pixels,
        delay_ms: u32,
        source_colours: Option<Arc<[u8]>>,
    ) -> Result<()> {
        if (frame.width as usize, frame.height as usize) != (self.width, self.height) {
            return Err(ApiError::internal("a frame of another size"));
        }
        let canvas = one_bit_alpha(frame);
        if let Some(mut pending) = self.pending.take() {
            // Where this frame is transparent and the pending one is not, the pending one's
            // disposal clears its rectangle, grown to cover those pixels.
            let clears =
                self.bounds(|i| pending.canvas[i] != TRANSPARENT && canvas[i] == TRANSPARENT);
            let dispose = match clears {
                Some(clears) => {
                    pending.rect = pending.rect.union(clears);
                    gif::DisposalMethod::Background
                }
                None => gif::DisposalMethod::Keep,
            };
            self.write(&pending, dispose)?;
            self.before = pending.canvas;
            if dispose == gif::DisposalMethod::Background {
                self.clear(pending.rect);
            }
        }
        let before = &self.before;
        let rect = self
            .bounds(|i| canvas[i] != before[i])
            // Nothing changed: one pixel, transparent, so the frame still has its delay.
            .unwrap_or(Rect {
                left: 0,
                top: 0,
                right: 1,
                bottom: 1,
            });
        self.pending = Some(Pending {
            canvas,
            rect,
            delay_cs: u16::try_from((delay_ms + 5) / 10).unwrap_or(u16::MAX),
            source_colours,
        });
        Ok(())
    }

    pub fn finish(mut self) -> Result<Vec<u8>> {
        if let Some(pending) = self.pending.take() {
            self.write(&pending, gif::DisposalMethod::Keep)?;
        }
        self.encoder
            .into_inner()
            .map_err(|e| ApiError::internal(format!("finishing an animated GIF variant: {e}")))
    }

    /// The smallest rectangle holding every pixel (by its index) for which `differs`
    /// holds, if any.
    fn bounds(&self, differs: impl Fn(usize) -> bool) -> Option<Rect> {
        let mut found: Option<Rect> = None;
        for y in 0..self.height {
            let row = y * self.width;
            let Some(first) = (0..self.width).find(|&x| differs(row + x)) else {
                continue;
            };
            let last = (first..self.width)
                .rev()
                .find(|&x| differs(row + x))
                .unwrap_or(first);
            let here = Rect {
                left: first,
                top: y,
                right: last + 1,
                bottom: y + 1,
            };
            found = Some(found.map_or(here, |r| r.union(here)));
        }
        found
    }

    fn clear(&mut self, rect: Rect) {
        for y in rect.top..rect.bottom {
            let row = y * self.width;
            self.before[row + rect.left..row + rect.right].fill(TRANSPARENT);
        }
    }

    /// Writes the pending frame: its rectangle, every pixel unchanged from `before` (or
    /// transparent) as the transparent index, the others quantised.
    fn write(&mut self, pending: &Pending, dispose: gif::DisposalMethod) -> Result<()> {
        let Rect {
            left,
            top,
            right,
            bottom,
        } = pending.rect;
        let (width, height) = (right - left, bottom - top);
        // The colours drawn, and for each pixel of the rectangle whether it is drawn.
        let mut drawn = Vec::with_capacity(width * height);
        let mut colours = Vec::new();
        for y in top..bottom {
            let row = y * self.width;
            let canvas = &pending.canvas[row + left..row + right];
            let before = &self.before[row + left..row + right];
            for (&pixel, &under) in canvas.iter().zip(before) {
                let draws = pixel != TRANSPARENT && pixel != under;
                drawn.push(draws);
                if draws {
                    colours.extend_from_slice(&pixel.to_le_bytes());
                }
            }
        }
        let transparent = drawn.iter().any(|&d| !d);
        let (mut palette, indices) = quantise(&colours, pending.source_colours.as_deref());
        let mut indices = indices.into_iter();
        let transparent_index = palette.len() / 3;
        let buffer: Vec<u8> = drawn
            .iter()
            .map(|&d| {
                if d {
                    indices.next().unwrap_or(0)
                } else {
                    transparent_index as u8
                }
            })
            .collect();
        if transparent || palette.is_empty() {
            palette.extend([0, 0, 0]);
        }
        let side = |v: usize| u16::try_from(v).map_err(|_| ApiError::internal("a GIF over 65535"));
        let frame = gif::Frame {
            delay: pending.delay_cs,
            dispose,
            transparent: transparent.then_some(transparent_index as u8),
            left: side(left)?,
            top: side(top)?,
            width: side(width)?,
            height: side(height)?,
            palette: Some(palette),
            buffer: Cow::Owned(buffer),
            ..gif::Frame::default()
        };
        self.encoder.write_frame(&frame).map_err(encoding_failed)
    }
}

/// A transparent pixel of a canvas.
const TRANSPARENT: u32 = 0;

/// The frame with one bit of alpha, a pixel a word (RGBA, little-endian): a pixel at least
/// half opaque is opaque (alpha 255), any other is [`TRANSPARENT`] (so that transparent
/// pixels compare equal).
fn one_bit_alpha(frame: &Pixels) -> Vec<u32> {
    let opaque = |r: u8, g: u8, b: u8| u32::from_le_bytes([r, g, b, 255]);
    let either = |r: u8, g: u8, b: u8, a: u8| {
        if a < 128 {
            TRANSPARENT
        } else {
            opaque(r, g, b)
        }
    };
    let data = &frame.data;
    match frame.layout {
        Layout::Rgba8 => data
            .chunks_exact(4)
            .map(|p| either(p[0], p[1], p[2], p[3]))
            .collect(),
        Layout::Rgb8 => data
            .chunks_exact(3)
            .map(|p| opaque(p[0], p[1], p[2]))
            .collect(),
        Layout::La8 => data
            .chunks_exact(2)
            .map(|p| either(p[0], p[0], p[0], p[1]))
            .collect(),
        Layout::L8 => data.iter().map(|&v| opaque(v, v, v)).collect(),
    }
}

//! An animation as its decoders hand it over (gif_codec.rs, anim_webp.rs) and its encoders
//! and the animated pipeline (animation.rs) take it: composited frames, one at a time, and
//! how many times it plays. Below all of them, so none uses another for these.

use std::num::NonZeroU32;
use std::sync::Arc;

use super::pixels::Pixels;
use crate::error::Result;

/// How many times an animation plays, as browsers read each format: a GIF's loop count is
/// the repeats after the first play (none written: once), a WebP's the plays (0: forever).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Plays {
    Forever,
    Times(NonZeroU32),
}

/// One frame as shown: the whole canvas, 8-bit RGBA, and how long it stays.
pub(super) struct CanvasFrame {
    pub pixels: Pixels,
    pub delay_ms: u32,
    /// The canvas's colours (RGB triples), if a GIF's and at most 256: the palette its
    /// resized frames are mapped to (quantise.rs).
    pub colours: Option<Arc<[u8]>>,
}

/// An animation being read, one composited frame at a time.
pub(super) struct Animation<'a> {
    pub width: u32,
    pub height: u32,
    pub plays: Plays,
    frames: Box<dyn Iterator<Item = Result<CanvasFrame>> + 'a>,
}

impl<'a> Animation<'a> {
    pub fn new(
        width: u32,
        height: u32,
        plays: Plays,
        frames: Box<dyn Iterator<Item = Result<CanvasFrame>> + 'a>,
    ) -> Self {
        Animation {
            width,
            height,
            plays,
            frames,
        }
    }
}

impl Iterator for Animation<'_> {
    type Item = Result<CanvasFrame>;

    fn next(&mut self) -> Option<Self::Item> {
        self.frames.next()
    }
}

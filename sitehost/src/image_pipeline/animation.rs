//! Animated GIFs and WebPs: every frame, composited on the canvas as browsers show it,
//! resized to each variant's size by the same cascade as a still image and encoded as an
//! animation in the original's format, with the delays and loop count kept. A GIF's
//! variants get animated WebP siblings (small and thumbnail at upload, the others on first
//! request from the stored GIF variant).
//!
//! A GIF's variants of its own size (an animation smaller than the variant's box) are its
//! frames copied without its metadata (gif_copy.rs): the same picture, without the LZW
//! encoding of every frame.
//!
//! Frames stream through: the decoder composites one frame at a time, the cascade resizes
//! it, and one thread per encoder (a variant or a sibling) takes it from a channel of a
//! few MiB of frames, so memory holds a few frames of each size whatever the frame count.
//! The cost grows with canvas x frames, bounded by `ImageLimits::max_animation_pixels` and
//! `max_frames`, which the header walks check before any frame is decoded. A single-frame
//! GIF or WebP never comes here.

use std::num::NonZeroU32;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::anim_gif::GifWriter;
use super::anim_webp::AnimWebp;
use super::format::ImageFormat;
use super::gif_copy::copy_frames;
use super::pixels::{Layout, Pixels};
use super::sniff::Header;
use super::{
    assemble, colour, gif_codec, resize, upright_in_srgb, variant_sizes, wants_siblings, ImageInfo,
    Processed, Timings,
};
use crate::config::{ImageLimits, MAX_ANIMATED_SIBLING_PIXELS};
use crate::error::{ApiError, Result};

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

/// Opens an animated GIF or WebP whose header has been checked against the limits.
fn open<'a>(bytes: &'a [u8], header: &Header, limits: &ImageLimits) -> Result<Animation<'a>> {
    match header.format {
        ImageFormat::Gif => gif_codec::frames(bytes, header, limits),
        ImageFormat::WebP => super::anim_webp::frames(bytes, header, limits),
        other => Err(ApiError::internal(format!("{other} is never animated"))),
    }
}

/// An animation being written, a frame at a time.
enum Encoder {
    Gif(GifWriter),
    WebP(AnimWebp),
}

impl Encoder {
    fn new(format: ImageFormat, (width, height): (u32, u32), plays: Plays) -> Result<Self> {
        Ok(match format {
            ImageFormat::Gif => Encoder::Gif(GifWriter::new(width, height, plays)?),
            _ => Encoder::WebP(AnimWebp::new(width, height, plays)?),
        })
    }

    fn add(&mut self, (frame, delay_ms, colours): Sent) -> Result<()> {
        match self {
            Encoder::Gif(gif) => gif.add(&frame, delay_ms, colours),
            Encoder::WebP(webp) => webp.add(&frame, delay_ms),
        }
    }

    fn finish(self) -> Result<Vec<u8>> {
        match self {
            Encoder::Gif(gif) => gif.finish(),
            Encoder::WebP(webp) => webp.finish(),
        }
    }
}

/// How many frames of `size` may wait for their encoder: as many as fit in 4 MiB, at
/// least one, at most 16. The decoder runs ahead of the encoders by that much instead of
/// waiting for each small frame to be taken (a thread switch each).
fn in_flight((width, height): (u32, u32)) -> usize {
    let frame = (width as usize * height as usize * 4).max(1);
    ((4 << 20) / frame).clamp(1, 16)
}

/// A frame at one size, its delay and its source's colours.
type Sent = (Arc<Pixels>, u32, Option<Arc<[u8]>>);

/// One encoder's thread: every frame it is sent, then the file, unless `abort` was set
/// (the frames stopped early: what it made is not wanted).
fn encode_frames(
    format: ImageFormat,
    size: (u32, u32),
    plays: Plays,
    frames: Receiver<Sent>,
    abort: &AtomicBool,
) -> Result<Vec<u8>> {
    let mut encoder = Encoder::new(format, size, plays)?;
    for frame in frames {
        encoder.add(frame)?;
    }
    if abort.load(Ordering::Relaxed) {
        return Err(ApiError::internal("the animation stopped before its end"));
    }
    encoder.finish()
}

/// The pipeline for an animated upload (`header.frames > 1`): see the module comment.
pub(super) fn process(
    bytes: &[u8],
    header: &Header,
    info: &ImageInfo,
    limits: &ImageLimits,
    start: Instant,
) -> Result<Processed> {
    let (distinct, which) = variant_sizes(info);
    let wants_sibling = wants_siblings(info.format, &which, distinct.len());
    // A GIF's variants of its own size are its frames, copied (gif_copy.rs).
    let copied = |index: usize| {
        info.format == ImageFormat::Gif && distinct[index] == (header.width, header.height)
    };
    let mut frames = open(bytes, header, limits)?;
    let plays = frames.plays;
    let to_srgb = colour::to_srgb(bytes, info.format, Layout::Rgba8);
    let colour_nanos = AtomicU64::new(0);
    let orientation = info.orientation;
    // Each size's upright size, as its first frame came out.
    let mut made: Vec<Option<(u32, u32)>> = vec![None; distinct.len()];
    let opened = Instant::now();
    let mut frame_decode = Duration::ZERO;
    let abort = AtomicBool::new(false);
    let mut frames_done = opened;
    let encoded = std::thread::scope(|scope| -> Result<Vec<[Option<Vec<u8>>; 2]>> {
        // One encoder per distinct size and, where wanted, one for its WebP sibling; each
        // starts on its size's first frame, which says the size.
        let mut senders: Vec<[Option<SyncSender<Sent>>; 2]> = vec![[None, None]; distinct.len()];
        let mut threads = Vec::new();
        let outcome = (|| -> Result<()> {
            loop {
                let decoding = Instant::now();
                let Some(frame) = frames.next().transpose()? else {
                    return Ok(());
                };
                frame_decode += decoding.elapsed();
                let (delay, colours) = (frame.delay_ms, frame.colours);
                let mut sized: Vec<Option<Arc<Pixels>>> = vec![None; distinct.len()];
                resize::cascade(opaque_as_rgb(frame.pixels), &distinct, |index, image| {
                    sized[index] = Some(image);
                })?;
                for (index, image) in sized.into_iter().enumerate() {
                    let image = image.ok_or_else(|| ApiError::internal("a size was not made"))?;
                    let upright =
                        upright_in_srgb(image, orientation, to_srgb.as_ref(), &colour_nanos)?;
                    if made[index].is_none() {
                        let size = (upright.width, upright.height);
                        made[index] = Some(size);
                        for (slot, format) in [(0, info.format), (1, ImageFormat::WebP)] {
                            if (slot == 0 && copied(index)) || (slot == 1 && !wants_sibling[index])
                            {
                                continue;
                            }
                            let (send, receive) = sync_channel::<Sent>(in_flight(size));
                            let abort = &abort;
                            let thread = scope
                                .spawn(move || encode_frames(format, size, plays, receive, abort));
                            threads.push((index, slot, thread));
                            senders[index][slot] = Some(send);
                        }
                    }
                    for send in senders[index].iter().flatten() {
                        send.send((Arc::clone(&upright), delay, colours.clone()))
                            // Its encoder failed: its error is reported when it is joined.
                            .map_err(|_| ApiError::internal("an encoder stopped"))?;
                    }
                }
            }
        })();
        if outcome.is_err() {
            abort.store(true, Ordering::Relaxed);
        }
        drop(senders);
        frames_done = Instant::now();
        let mut encoded: Vec<[Option<Vec<u8>>; 2]> = vec![[None, None]; distinct.len()];
        let mut failed = None;
        for (index, slot, thread) in threads {
            match thread.join() {
                Ok(Ok(bytes)) => encoded[index][slot] = Some(bytes),
                Ok(Err(e)) => failed = failed.or(Some(e)),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        // A decoder's refusal says more than the encoders it stopped.
        outcome?;
        if let Some(e) = failed {
            return Err(e);
        }
        for (index, encoded) in encoded.iter_mut().enumerate() {
            if copied(index) {
                encoded[0] = Some(copy_frames(bytes, header.frames)?);
            }
        }
        Ok(encoded)
    })?;
    let done = Instant::now();
    let made: Vec<(u32, u32)> = made
        .into_iter()
        .map(|size| size.ok_or_else(|| ApiError::internal("an animation without frames")))
        .collect::<Result<_>>()?;
    let timings = Timings {
        read: Duration::ZERO,
        decode: (opened - start) + frame_decode,
        resize: (frames_done - opened).saturating_sub(frame_decode),
        colour: Duration::from_nanos(colour_nanos.load(Ordering::Relaxed)),
        encode: done - frames_done,
        total: done - start,
    };
    assemble(info, &which, &made, encoded, timings)
}

/// An RGBA frame without a transparent pixel as RGB: a quarter fewer bytes to resize, and
/// no alpha to premultiply and divide at each size.
fn opaque_as_rgb(frame: Pixels) -> Pixels {
    if frame.layout != Layout::Rgba8 || frame.data.chunks_exact(4).any(|p| p[3] != 255) {
        return frame;
    }
    Pixels {
        layout: Layout::Rgb8,
        data: frame
            .data
            .chunks_exact(4)
            .flat_map(|p| [p[0], p[1], p[2]])
            .collect(),
        ..frame
    }
}

/// The animated WebP sibling of a stored animated GIF variant (made on first request):
/// its frames as browsers show them, at its size, with its delays and loop count. Not made
/// for a variant of more than [`MAX_ANIMATED_SIBLING_PIXELS`] in all its frames: refused
/// from its header, before any frame is decoded.
pub(super) fn webp_sibling(bytes: &[u8], header: &Header, limits: &ImageLimits) -> Result<Vec<u8>> {
    let pixels = u64::from(header.width) * u64::from(header.height) * u64::from(header.frames);
    if pixels > MAX_ANIMATED_SIBLING_PIXELS {
        return Err(ApiError::TooLarge(format!(
            "the animated variant is {}x{} pixels with {} frames ({:.1} megapixels in all its \
             frames): WebP siblings are made for at most {} megapixels in all frames; it is \
             served as it is",
            header.width,
            header.height,
            header.frames,
            pixels as f64 / 1e6,
            MAX_ANIMATED_SIBLING_PIXELS as f64 / 1e6
        )));
    }
    let animation = open(bytes, header, limits)?;
    let mut webp = AnimWebp::new(animation.width, animation.height, animation.plays)?;
    for frame in animation {
        let frame = frame?;
        webp.add(&frame.pixels, frame.delay_ms)?;
    }
    webp.finish()
}

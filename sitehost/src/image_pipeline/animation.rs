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

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;
use std::thread::{Scope, ScopedJoinHandle};
use std::time::{Duration, Instant};

use super::anim_gif::GifWriter;
use super::anim_webp::AnimWebp;
use super::format::ImageFormat;
use super::frames::{Animation, Plays};
use super::gif_copy::copy_frames;
use super::pixels::{Layout, Pixels};
use super::sniff::Header;
use super::{
    assemble, colour, gif_codec, resize, upright_in_srgb, variant_sizes, wants_siblings, Encoded,
    ImageInfo, Processed, Timings,
};
use crate::config::{ImageLimits, MAX_ANIMATED_SIBLING_PIXELS};
use crate::error::{ApiError, Result};

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
    let wants_sibling = wants_siblings(info.format, &which, distinct.len(), limits);
    // A GIF's variants of its own size are its frames, copied (gif_copy.rs).
    let copied: Vec<bool> = distinct
        .iter()
        .map(|&size| info.format == ImageFormat::Gif && size == (header.width, header.height))
        .collect();
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
    let encoded = std::thread::scope(|scope| -> Result<Vec<Encoded>> {
        // One encoder per distinct size and, where wanted, one for its WebP sibling; each
        // starts on its size's first frame, which says the size.
        let mut encoders = Encoders::new(scope, plays, &abort, distinct.len());
        let outcome = (|| -> Result<()> {
            loop {
                let decoding = Instant::now();
                let Some(frame) = frames.next().transpose()? else {
                    return Ok(());
                };
                frame_decode += decoding.elapsed();
                let (delay, colours) = (frame.delay_ms, frame.colours);
                for (index, image) in resized(frame.pixels, &distinct)?.into_iter().enumerate() {
                    let upright =
                        upright_in_srgb(image, orientation, to_srgb.as_ref(), &colour_nanos)?;
                    if made[index].is_none() {
                        let size = (upright.width, upright.height);
                        made[index] = Some(size);
                        let sibling = wants_sibling[index].is_some();
                        encoders.start_size(index, size, info.format, !copied[index], sibling);
                    }
                    encoders.send(index, (upright, delay, colours.clone()))?;
                }
            }
        })();
        if outcome.is_err() {
            abort.store(true, Ordering::Relaxed);
        }
        let threads = encoders.close();
        frames_done = Instant::now();
        let (mut encoded, failed) = join_encoders(threads, distinct.len());
        // A decoder's refusal says more than the encoders it stopped.
        outcome?;
        if let Some(e) = failed {
            return Err(e);
        }
        copy_same_size(&mut encoded, &copied, bytes, header)?;
        Ok(encoded)
    })?;
    let done = Instant::now();
    let made = made
        .into_iter()
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| ApiError::internal("an animation without frames"))?;
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

/// Which of a size's outputs an encoder makes.
#[derive(Debug, Clone, Copy)]
enum Output {
    Variant,
    WebpSibling,
}

/// The channels to one size's encoders, once its first frame has started them.
#[derive(Default)]
struct SizeSenders {
    variant: Option<SyncSender<Sent>>,
    webp_sibling: Option<SyncSender<Sent>>,
}

/// An encoder thread of one size's output.
type EncoderThread<'scope> = (usize, Output, ScopedJoinHandle<'scope, Result<Vec<u8>>>);

/// The encoder threads of an animation's outputs, and the channels that feed them.
struct Encoders<'scope, 'env> {
    scope: &'scope Scope<'scope, 'env>,
    plays: Plays,
    /// Set when the frames stop early: the encoders' files are not wanted.
    abort: &'env AtomicBool,
    senders: Vec<SizeSenders>,
    threads: Vec<EncoderThread<'scope>>,
}

impl<'scope, 'env> Encoders<'scope, 'env> {
    /// No encoder yet for any of `count` sizes.
    fn new(
        scope: &'scope Scope<'scope, 'env>,
        plays: Plays,
        abort: &'env AtomicBool,
        count: usize,
    ) -> Self {
        Encoders {
            scope,
            plays,
            abort,
            senders: (0..count).map(|_| SizeSenders::default()).collect(),
            threads: Vec::new(),
        }
    }

    /// Starts the encoder of size `index`'s `output`, in `format`, at `size`.
    fn start(&mut self, index: usize, output: Output, format: ImageFormat, size: (u32, u32)) {
        let (send, receive) = sync_channel::<Sent>(in_flight(size));
        let (plays, abort) = (self.plays, self.abort);
        let thread = self
            .scope
            .spawn(move || encode_frames(format, size, plays, receive, abort));
        self.threads.push((index, output, thread));
        let senders = &mut self.senders[index];
        match output {
            Output::Variant => senders.variant = Some(send),
            Output::WebpSibling => senders.webp_sibling = Some(send),
        }
    }

    /// Starts size `index`'s encoders on its first frame, which says its `size`: its
    /// variant's in `format` and its WebP sibling's, each if wanted.
    fn start_size(
        &mut self,
        index: usize,
        size: (u32, u32),
        format: ImageFormat,
        variant: bool,
        webp_sibling: bool,
    ) {
        if variant {
            self.start(index, Output::Variant, format, size);
        }
        if webp_sibling {
            self.start(index, Output::WebpSibling, ImageFormat::WebP, size);
        }
    }

    /// Hands a frame of size `index` to each of its encoders.
    fn send(&self, index: usize, (frame, delay, colours): Sent) -> Result<()> {
        let senders = &self.senders[index];
        for send in senders.variant.iter().chain(&senders.webp_sibling) {
            send.send((Arc::clone(&frame), delay, colours.clone()))
                // Its encoder failed: its error is reported when it is joined.
                .map_err(|_| ApiError::internal("an encoder stopped"))?;
        }
        Ok(())
    }

    /// No more frames: the channels close, and the threads finish their files.
    fn close(self) -> Vec<EncoderThread<'scope>> {
        self.threads
    }
}

/// One frame at each distinct size, by the cascade.
fn resized(frame: Pixels, distinct: &[(u32, u32)]) -> Result<Vec<Arc<Pixels>>> {
    let mut sized: Vec<Option<Arc<Pixels>>> = vec![None; distinct.len()];
    resize::cascade(opaque_as_rgb(frame), distinct, |index, image| {
        sized[index] = Some(image);
    })?;
    sized
        .into_iter()
        .map(|image| image.ok_or_else(|| ApiError::internal("a size was not made")))
        .collect()
}

/// The variants of the sizes `copied` marks: the GIF's frames copied (gif_copy.rs).
fn copy_same_size(
    encoded: &mut [Encoded],
    copied: &[bool],
    bytes: &[u8],
    header: &Header,
) -> Result<()> {
    for (encoded, _) in encoded.iter_mut().zip(copied).filter(|(_, &copied)| copied) {
        encoded.variant = Some(copy_frames(bytes, header.frames)?);
    }
    Ok(())
}

/// Waits for every encoder: what each of the `count` sizes got, and the first encoder's
/// error, if any.
fn join_encoders(
    threads: Vec<EncoderThread<'_>>,
    count: usize,
) -> (Vec<Encoded>, Option<ApiError>) {
    let mut encoded = vec![Encoded::default(); count];
    let mut failed = None;
    for (index, output, thread) in threads {
        match thread.join() {
            Ok(Ok(bytes)) => match output {
                Output::Variant => encoded[index].variant = Some(bytes),
                Output::WebpSibling => encoded[index].webp_sibling = Some(bytes),
            },
            Ok(Err(e)) => failed = failed.or(Some(e)),
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }
    (encoded, failed)
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

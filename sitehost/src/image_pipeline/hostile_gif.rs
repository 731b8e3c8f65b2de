//! Builders of animated GIFs, hostile (a GIF bomb) and ordinary, for the regression tests
//! and `examples/bench_hostile.rs`, which includes this file by path, as it does
//! `hostile.rs`: it is not part of the library.

#![allow(dead_code)]

/// One frame of a test GIF: its area on the screen, its own colour table (RGB triples),
/// its colour indices, the transparent index, its delay (hundredths) and disposal.
pub struct GifFrame {
    pub left: u16,
    pub top: u16,
    pub width: u16,
    pub height: u16,
    pub palette: Vec<u8>,
    pub indices: Vec<u8>,
    pub transparent: Option<u8>,
    pub delay_cs: u16,
    pub dispose: gif::DisposalMethod,
}

impl GifFrame {
    /// A frame of one colour covering `width`x`height` at `left`,`top`.
    pub fn filled(left: u16, top: u16, width: u16, height: u16, rgb: [u8; 3]) -> Self {
        GifFrame {
            left,
            top,
            width,
            height,
            palette: rgb.to_vec(),
            indices: vec![0; usize::from(width) * usize::from(height)],
            transparent: None,
            delay_cs: 10,
            dispose: gif::DisposalMethod::Keep,
        }
    }
}

/// A GIF of the given frames on a `width`x`height` screen, with a loop count (`Finite(0)`:
/// none written), written by the gif crate.
pub fn gif_animation(width: u16, height: u16, repeat: gif::Repeat, frames: &[GifFrame]) -> Vec<u8> {
    let mut out = Vec::new();
    {
        let mut encoder = gif::Encoder::new(&mut out, width, height, &[]).expect("gif encoder");
        encoder.set_repeat(repeat).expect("loop count");
        for f in frames {
            let frame = gif::Frame {
                left: f.left,
                top: f.top,
                width: f.width,
                height: f.height,
                palette: Some(f.palette.clone()),
                buffer: std::borrow::Cow::Borrowed(&f.indices),
                transparent: f.transparent,
                delay: f.delay_cs,
                dispose: f.dispose,
                ..gif::Frame::default()
            };
            encoder.write_frame(&frame).expect("gif frame");
        }
    }
    out
}

/// A GIF bomb: a `width`x`height` logical screen and `frames` frames of one pixel each
/// (29 bytes apiece: a graphic control extension, an image descriptor, a colour table
/// and a few bytes of LZW data). A decoder that draws each frame on the whole screen does
/// width x height work per frame, however small the file.
pub fn gif_bomb(width: u16, height: u16, frames: usize) -> Vec<u8> {
    let one = gif_animation(
        1,
        1,
        gif::Repeat::Infinite,
        &[GifFrame::filled(0, 0, 1, 1, [255, 0, 0])],
    );
    // The header and the loop extension, then the frame (from its graphic control
    // extension), then the trailer.
    let at = one
        .windows(2)
        .position(|w| w == [0x21, 0xF9])
        .expect("a graphic control extension");
    let (head, frame) = one.split_at(at);
    let frame = &frame[..frame.len() - 1];
    let mut bytes = Vec::with_capacity(head.len() + frames * frame.len() + 1);
    bytes.extend_from_slice(head);
    bytes[6..8].copy_from_slice(&width.to_le_bytes());
    bytes[8..10].copy_from_slice(&height.to_le_bytes());
    for _ in 0..frames {
        bytes.extend_from_slice(frame);
    }
    bytes.push(0x3B);
    bytes
}

/// A legitimate worst case: `frames` frames of `width`x`height` in which every pixel
/// changes (a colour gradient that moves, with fine noise, as in a video clip turned into
/// a GIF), each quantised to its own palette by the gif crate.
pub fn gif_video(width: u16, height: u16, frames: u16) -> Vec<u8> {
    let (w, h) = (u32::from(width), u32::from(height));
    let mut out = Vec::new();
    {
        let mut encoder = gif::Encoder::new(&mut out, width, height, &[]).expect("gif encoder");
        encoder
            .set_repeat(gif::Repeat::Infinite)
            .expect("loop count");
        let mut noise = 0x2545_F491u32;
        for f in 0..u32::from(frames) {
            let mut rgba = Vec::with_capacity((w * h * 4) as usize);
            for y in 0..h {
                for x in 0..w {
                    noise ^= noise << 13;
                    noise ^= noise >> 17;
                    noise ^= noise << 5;
                    let grain = noise % 16;
                    rgba.extend([
                        ((x + 7 * f) * 255 / w.max(1) % 256 + grain).min(255) as u8,
                        ((y + 5 * f) * 255 / h.max(1) % 256 + grain).min(255) as u8,
                        ((x + y + 11 * f) % 256) as u8,
                        255,
                    ]);
                }
            }
            let mut frame = gif::Frame::from_rgba_speed(width, height, &mut rgba, 30);
            frame.delay = 4;
            encoder.write_frame(&frame).expect("gif frame");
        }
    }
    out
}

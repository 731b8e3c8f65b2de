//! The WebP header: the size of a simple (VP8, VP8L) or extended (VP8X) file, checked
//! against the image data the decoder will decode, and the orientation from its EXIF chunk.

use super::{bytes_at, le16, le24, le32, tiff_orientation};
use crate::error::Result;
use crate::image_pipeline::refusal::bad_upload;

/// Rounds a RIFF chunk size up to the even size it occupies.
fn riff_padded(size: u32) -> usize {
    size as usize + (size as usize & 1)
}

/// The size a VP8 (lossy) or VP8L (lossless) bitstream's own header declares; None if the
/// chunk is neither or too short.
fn webp_bitstream_size(kind: &[u8], data: &[u8]) -> Option<(u32, u32)> {
    match kind {
        b"VP8 " => {
            // Frame tag (3 bytes), start code 9D 01 2A, then 14-bit sizes with 2-bit scale.
            if data.get(3..6)? != [0x9D, 0x01, 0x2A] {
                return None;
            }
            Some((le16(data, 6)? & 0x3FFF, le16(data, 8)? & 0x3FFF))
        }
        b"VP8L" => {
            if *data.first()? != 0x2F {
                return None;
            }
            let bits = le32(data, 1)?;
            Some(((bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1))
        }
        _ => None,
    }
}

/// Simple lossy (VP8), lossless (VP8L) or extended (VP8X) WebP, and its frame count (1 for
/// a still image). For VP8X the size is the canvas, and the image data `image-webp` will
/// decode must declare exactly that size (a still image) or fit in it (each frame of an
/// animation, whose bitstream must declare the frame's size): it allocates for the
/// bitstream's own size before comparing. An animation's frames are counted up to
/// `max_frames + 1` (enough to say "more than"), each checked so; the decoder reads only
/// the frames counted.
pub(super) fn webp_header(b: &[u8], max_frames: u32) -> Result<Option<(u32, u32, u8, u32)>> {
    let data = 20;
    let Some(kind) = b.get(12..16) else {
        return Ok(None);
    };
    if kind != b"VP8X" {
        let Some(data) = b.get(data..) else {
            return Ok(None);
        };
        return Ok(webp_bitstream_size(kind, data).map(|(w, h)| (w, h, 1, 1)));
    }
    let (Some(&flags), Some(width), Some(height)) =
        (b.get(data), le24(b, data + 4), le24(b, data + 7))
    else {
        return Ok(None);
    };
    let (width, height) = (width + 1, height + 1);
    let orientation = if flags & 0x08 != 0 {
        webp_exif_orientation(b).unwrap_or(1)
    } else {
        1
    };
    let (Some(riff_size), Some(vp8x_size)) = (le32(b, 4), le32(b, 16)) else {
        return Ok(None);
    };
    let animated = flags & 0x02 != 0;
    // The first chunk of each kind, walked like image-webp does (from the chunk after
    // VP8X, up to where the RIFF size says, stopping at the end of the file); an
    // animation's frames, each checked as it is met.
    let (mut first_vp8, mut first_vp8l) = (None, None);
    let mut frames = 0u32;
    let mut pos = data + riff_padded(vp8x_size);
    let end = pos.saturating_add((riff_size as usize).saturating_sub(12));
    while pos < end {
        let (Some(kind), Some(size)) = (bytes_at(b, pos, 4), le32(b, pos + 4)) else {
            break;
        };
        let chunk = b.get(pos + 8..).map(|d| &d[..d.len().min(size as usize)]);
        match kind {
            b"VP8 " => first_vp8 = first_vp8.or(chunk),
            b"VP8L" => first_vp8l = first_vp8l.or(chunk),
            b"ANMF" if animated => {
                frames += 1;
                if frames > max_frames {
                    break;
                }
                match chunk.map(|anmf| check_frame(anmf, (width, height), frames)) {
                    Some(Err(refused)) => return Err(refused),
                    Some(Ok(true)) => {}
                    // A frame cut short: the first leaves nothing to check, a later one
                    // is where the decoder stops reading, truncated.
                    _ if frames == 1 => return Ok(None),
                    _ => break,
                }
            }
            _ => {}
        }
        pos = pos.saturating_add(8).saturating_add(riff_padded(size));
    }
    if animated {
        return Ok((frames > 0).then_some((width, height, orientation, frames)));
    }
    // A still image: image-webp decodes the VP8L chunk if there is one, else the VP8 one.
    let stream = match (first_vp8l, first_vp8) {
        (Some(d), _) => Some((b"VP8L".as_slice(), d)),
        (None, Some(d)) => Some((b"VP8 ".as_slice(), d)),
        (None, None) => None,
    };
    match stream.and_then(|(kind, data)| webp_bitstream_size(kind, data)) {
        Some(size) if size == (width, height) => Ok(Some((width, height, orientation, 1))),
        Some((w, h)) => Err(mismatch(
            (width, height),
            format!("its image data is {w}x{h}"),
        )),
        None => Ok(None),
    }
}

/// 400: the canvas and what is drawn on it disagree.
fn mismatch((width, height): (u32, u32), what: String) -> crate::error::ApiError {
    bad_upload(format!(
        "the WebP is corrupt: its canvas is {width}x{height} but {what}"
    ))
}

/// Checks one ANMF chunk (frame `number`, from 1): the frame fits the canvas and its
/// bitstream declares the frame's size. False if the chunk is too short to tell.
fn check_frame(anmf: &[u8], canvas: (u32, u32), number: u32) -> Result<bool> {
    let which = match number {
        1 => "its first frame".to_string(),
        n => format!("its frame {n}"),
    };
    let (Some(x), Some(y), Some(frame_width), Some(frame_height)) =
        (le24(anmf, 0), le24(anmf, 3), le24(anmf, 6), le24(anmf, 9))
    else {
        return Ok(false);
    };
    let (x, y, frame_width, frame_height) = (x * 2, y * 2, frame_width + 1, frame_height + 1);
    if x + frame_width > canvas.0 || y + frame_height > canvas.1 {
        return Err(mismatch(
            canvas,
            format!("{which} is {frame_width}x{frame_height} at {x},{y}"),
        ));
    }
    // The frame's bitstream; an ALPH chunk may come first.
    let mut at = 16;
    let (Some(mut kind), Some(mut size)) = (bytes_at(anmf, at, 4), le32(anmf, at + 4)) else {
        return Ok(false);
    };
    if kind == b"ALPH" {
        at += 8 + riff_padded(size);
        let (Some(k), Some(s)) = (bytes_at(anmf, at, 4), le32(anmf, at + 4)) else {
            return Ok(false);
        };
        (kind, size) = (k, s);
    }
    let Some(stream) = anmf.get(at + 8..).map(|d| &d[..d.len().min(size as usize)]) else {
        return Ok(false);
    };
    match webp_bitstream_size(kind, stream) {
        Some(size) if size == (frame_width, frame_height) => Ok(true),
        Some((w, h)) => Err(mismatch(
            canvas,
            format!("{which} is {frame_width}x{frame_height} and that frame's image data {w}x{h}"),
        )),
        None => Ok(false),
    }
}

/// Finds the EXIF chunk of an extended WebP (usually after the image data).
fn webp_exif_orientation(b: &[u8]) -> Option<u8> {
    let mut pos = 12usize;
    while let (Some(kind), Some(len)) = (bytes_at(b, pos, 4), le32(b, pos.saturating_add(4))) {
        let len = len as usize;
        let body = pos + 8;
        if kind == b"EXIF" {
            let data = bytes_at(b, body, len)?;
            // Some writers keep the JPEG-style "Exif\0\0" prefix.
            let tiff = data.strip_prefix(b"Exif\0\0").unwrap_or(data);
            return tiff_orientation(tiff);
        }
        // Chunks are padded to an even size.
        pos = body.checked_add(len)?.checked_add(len & 1)?;
    }
    None
}

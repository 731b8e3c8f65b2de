//! The WebP header: the size of a simple (VP8, VP8L) or extended (VP8X) file, checked
//! against the image data the decoder will decode, and the orientation from its EXIF chunk.

use super::{bytes_at, le16, le24, le32, tiff_orientation};
use crate::error::Result;
use crate::upload::pipeline::refusal::bad_upload;

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

/// Simple lossy (VP8), lossless (VP8L) or extended (VP8X) WebP. For VP8X the size is the
/// canvas, and the image data `image-webp` will decode must declare exactly that size (a
/// still image) or fit in it (the first frame of an animation, whose bitstream must
/// declare the frame's size): it allocates for the bitstream's own size before comparing.
pub(super) fn webp_header(b: &[u8]) -> Result<Option<(u32, u32, u8)>> {
    let data = 20;
    let Some(kind) = b.get(12..16) else {
        return Ok(None);
    };
    if kind != b"VP8X" {
        let Some(data) = b.get(data..) else {
            return Ok(None);
        };
        return Ok(webp_bitstream_size(kind, data).map(|(w, h)| (w, h, 1)));
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
    let mismatch = |what: String| {
        Err(bad_upload(format!(
            "the WebP is corrupt: its canvas is {width}x{height} but {what}"
        )))
    };
    let (Some(riff_size), Some(vp8x_size)) = (le32(b, 4), le32(b, 16)) else {
        return Ok(None);
    };
    // The first chunk of each kind, walked like image-webp does (from the chunk after
    // VP8X, up to where the RIFF size says, stopping at the end of the file).
    let (mut first_vp8, mut first_vp8l, mut first_anmf) = (None, None, None);
    let mut pos = data + riff_padded(vp8x_size);
    let end = pos.saturating_add((riff_size as usize).saturating_sub(12));
    while pos < end {
        let (Some(kind), Some(size)) = (bytes_at(b, pos, 4), le32(b, pos + 4)) else {
            break;
        };
        let range = (pos + 8, size);
        match kind {
            b"VP8 " => first_vp8 = first_vp8.or(Some(range)),
            b"VP8L" => first_vp8l = first_vp8l.or(Some(range)),
            b"ANMF" => first_anmf = first_anmf.or(Some(range)),
            _ => {}
        }
        pos = pos.saturating_add(8).saturating_add(riff_padded(size));
    }
    let chunk = |(at, size): (usize, u32)| b.get(at..).map(|d| &d[..d.len().min(size as usize)]);
    if flags & 0x02 != 0 {
        let Some(anmf) = first_anmf.and_then(chunk) else {
            return Ok(None);
        };
        let (Some(x), Some(y), Some(frame_width), Some(frame_height)) =
            (le24(anmf, 0), le24(anmf, 3), le24(anmf, 6), le24(anmf, 9))
        else {
            return Ok(None);
        };
        let (x, y, frame_width, frame_height) = (x * 2, y * 2, frame_width + 1, frame_height + 1);
        if x + frame_width > width || y + frame_height > height {
            return mismatch(format!(
                "its first frame is {frame_width}x{frame_height} at {x},{y}"
            ));
        }
        // The frame's bitstream; an ALPH chunk may come first.
        let mut at = 16;
        let (Some(mut kind), Some(mut size)) = (bytes_at(anmf, at, 4), le32(anmf, at + 4)) else {
            return Ok(None);
        };
        if kind == b"ALPH" {
            at += 8 + riff_padded(size);
            let (Some(k), Some(s)) = (bytes_at(anmf, at, 4), le32(anmf, at + 4)) else {
                return Ok(None);
            };
            (kind, size) = (k, s);
        }
        let Some(stream) = anmf.get(at + 8..).map(|d| &d[..d.len().min(size as usize)]) else {
            return Ok(None);
        };
        return match webp_bitstream_size(kind, stream) {
            Some(size) if size == (frame_width, frame_height) => {
                Ok(Some((width, height, orientation)))
            }
            Some((w, h)) => mismatch(format!(
                "its first frame is {frame_width}x{frame_height} and that frame's image data {w}x{h}"
            )),
            None => Ok(None),
        };
    }
    // A still image: image-webp decodes the VP8L chunk if there is one, else the VP8 one.
    let stream = match (first_vp8l, first_vp8) {
        (Some(range), _) => chunk(range).map(|d| (b"VP8L".as_slice(), d)),
        (None, Some(range)) => chunk(range).map(|d| (b"VP8 ".as_slice(), d)),
        (None, None) => None,
    };
    match stream.and_then(|(kind, data)| webp_bitstream_size(kind, data)) {
        Some(size) if size == (width, height) => Ok(Some((width, height, orientation))),
        Some((w, h)) => mismatch(format!("its image data is {w}x{h}")),
        None => Ok(None),
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

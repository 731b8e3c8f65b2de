//! The variants of an animated GIF that keep its size (an animation smaller than a
//! variant's box is not upscaled): the original's own frames, copied block by block,
//! without its metadata. Decoding and re-encoding them would give the same picture, at the
//! price of the LZW encoding of every frame, most of an animated upload's work.

use crate::error::{ApiError, Result};

/// The GIF's header, colour table, loop count, and its first `frames` frames (each with
/// its graphic control extension: delay, disposal, transparency), then a trailer. Every
/// other extension (comments, plain text, XMP, ICC and other application data) is left
/// out. The file has passed the header walk, which counted these frames, and every one
/// of them has been decoded.
pub(super) fn copy_frames(b: &[u8], frames: u32) -> Result<Vec<u8>> {
    let malformed = || ApiError::internal("a GIF the header walk read could not be copied");
    let flags = *b.get(10).ok_or_else(malformed)?;
    let mut pos = 13;
    if flags & 0x80 != 0 {
        pos += 3 << ((flags & 0x07) + 1);
    }
    let mut out = Vec::with_capacity(b.len());
    // "GIF89a" (the graphic control extension needs it), the screen and its colour table.
    out.extend_from_slice(b"GIF89a");
    out.extend_from_slice(b.get(6..pos).ok_or_else(malformed)?);
    let mut copied = 0;
    while copied < frames {
        let start = pos;
        match b.get(pos) {
            Some(0x21) => {
                let label = *b.get(pos + 1).ok_or_else(malformed)?;
                let end = sub_blocks_end(b, pos + 2).ok_or_else(malformed)?;
                let application = b.get(pos + 3..pos + 14);
                let keep = label == 0xF9
                    || (label == 0xFF
                        && matches!(application, Some(b"NETSCAPE2.0") | Some(b"ANIMEXTS1.0")));
                if keep {
                    out.extend_from_slice(&b[start..end]);
                }
                pos = end;
            }
            Some(0x2C) => {
                let local = *b.get(pos + 9).ok_or_else(malformed)?;
                pos += 10;
                if local & 0x80 != 0 {
                    pos += 3 << ((local & 0x07) + 1);
                }
                pos = sub_blocks_end(b, pos + 1).ok_or_else(malformed)?;
                out.extend_from_slice(&b[start..pos]);
                copied += 1;
            }
            _ => return Err(malformed()),
        }
    }
    out.push(0x3B);
    Ok(out)
}

/// Where a chain of sub-blocks starting at `pos` ends, or None if the file ends first.
fn sub_blocks_end(b: &[u8], mut pos: usize) -> Option<usize> {
    loop {
        let len = *b.get(pos)?;
        pos += 1 + usize::from(len);
        if len == 0 {
            return (pos <= b.len()).then_some(pos);
        }
    }
}

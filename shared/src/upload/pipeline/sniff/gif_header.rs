//! The GIF header: the logical screen size, and the check that the first frame fits it.

use super::le16;
use crate::error::Result;
use crate::upload::pipeline::refusal::bad_upload;

/// The logical screen size, which is the size `image` decodes: the first frame is drawn
/// onto a canvas of that size. That frame must fit inside it: a frame larger than the
/// screen would make the decoder allocate for the frame's size, not the checked one.
/// Walks the blocks as the `gif` decoder does (extensions are chains of sub-blocks) up to
/// the first image descriptor.
pub(super) fn gif_header(b: &[u8]) -> Result<Option<(u32, u32, u8)>> {
    let (Some(width), Some(height), Some(&flags)) = (le16(b, 6), le16(b, 8), b.get(10)) else {
        return Ok(None);
    };
    let mut pos = 13usize;
    if flags & 0x80 != 0 {
        // Global colour table: 2^(n+1) RGB entries.
        pos += 3 << ((flags & 0x07) + 1);
    }
    loop {
        match b.get(pos) {
            // Extension: introducer, label, then sub-blocks until a zero length.
            Some(0x21) => {
                pos += 2;
                loop {
                    let Some(&len) = b.get(pos) else {
                        return Ok(None);
                    };
                    pos += 1 + usize::from(len);
                    if len == 0 {
                        break;
                    }
                }
            }
            Some(0x2C) => {
                let (Some(left), Some(top), Some(frame_width), Some(frame_height)) = (
                    le16(b, pos + 1),
                    le16(b, pos + 3),
                    le16(b, pos + 5),
                    le16(b, pos + 7),
                ) else {
                    return Ok(None);
                };
                if left + frame_width > width || top + frame_height > height {
                    return Err(bad_upload(format!(
                        "the GIF is corrupt: its first frame ({frame_width}x{frame_height} \
                         at {left},{top}) does not fit its {width}x{height} screen"
                    )));
                }
                return Ok(Some((width, height, 1)));
            }
            // Trailer before any frame, an unknown block or the end of the file.
            _ => return Ok(None),
        }
    }
}

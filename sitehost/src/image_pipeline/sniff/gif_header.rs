//! The GIF header: the logical screen size, and a walk over the file's blocks that checks
//! that every frame fits the screen and counts the frames.

use super::le16;
use crate::error::Result;
use crate::image_pipeline::refusal::bad_upload;

/// The logical screen size, which is the size `image` decodes: every frame is drawn onto a
/// canvas of that size. Each frame must fit inside it: a frame larger than the screen would
/// make the decoder allocate for the frame's size, not the checked one. Walks the blocks as
/// the `gif` decoder does (extensions and image data are chains of sub-blocks, skipped
/// without decoding) and counts the frames, up to `max_frames + 1` (enough to say "more
/// than"): the frame limits are checked before any frame is decoded, however many frames the
/// file declares. The walk stops at the trailer, at the end of the file or at a byte that
/// starts no block: the decoder reads only the frames counted, and a frame cut short is
/// counted, so that decoding it says the file is truncated.
pub(super) fn gif_header(b: &[u8], max_frames: u32) -> Result<Option<(u32, u32, u32)>> {
    let (Some(width), Some(height), Some(&flags)) = (le16(b, 6), le16(b, 8), b.get(10)) else {
        return Ok(None);
    };
    let mut pos = 13usize;
    if flags & 0x80 != 0 {
        // Global colour table: 2^(n+1) RGB entries.
        pos += 3 << ((flags & 0x07) + 1);
    }
    let mut frames = 0u32;
    loop {
        match b.get(pos) {
            // Extension: introducer, label, then sub-blocks until a zero length.
            Some(0x21) => match skip_sub_blocks(b, pos + 2) {
                Some(next) => pos = next,
                None => break,
            },
            Some(0x2C) => {
                frames += 1;
                let (Some(left), Some(top), Some(frame_width), Some(frame_height)) = (
                    le16(b, pos + 1),
                    le16(b, pos + 3),
                    le16(b, pos + 5),
                    le16(b, pos + 7),
                ) else {
                    // A first frame cut in its descriptor leaves no size to check.
                    if frames == 1 {
                        return Ok(None);
                    }
                    break;
                };
                if left + frame_width > width || top + frame_height > height {
                    let which = match frames {
                        1 => "its first frame".to_string(),
                        n => format!("its frame {n}"),
                    };
                    return Err(bad_upload(format!(
                        "the GIF is corrupt: {which} ({frame_width}x{frame_height} at \
                         {left},{top}) does not fit its {width}x{height} screen"
                    )));
                }
                if frames > max_frames {
                    break;
                }
                let Some(&local) = b.get(pos + 9) else {
                    break;
                };
                pos += 10;
                if local & 0x80 != 0 {
                    // Local colour table, like the global one.
                    pos += 3 << ((local & 0x07) + 1);
                }
                // The LZW minimum code size, then the image data's sub-blocks.
                match skip_sub_blocks(b, pos + 1) {
                    Some(next) => pos = next,
                    None => break,
                }
            }
            // The trailer, a byte that starts no block, or the end of the file.
            _ => break,
        }
    }
    Ok((frames > 0).then_some((width, height, frames)))
}

/// Where a chain of sub-blocks starting at `pos` ends (after its zero-length block), or None
/// if the file ends first.
fn skip_sub_blocks(b: &[u8], mut pos: usize) -> Option<usize> {
    loop {
        let len = *b.get(pos)?;
        pos += 1 + usize::from(len);
        if len == 0 {
            return Some(pos);
        }
    }
}

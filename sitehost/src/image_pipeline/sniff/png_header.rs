//! The PNG header: IHDR's size, the orientation from eXIf, and the refusal of chunk floods
//! and of compressed metadata that inflates too far, walked up to the image data.

use super::{be32, bytes_at, tiff_orientation};
use crate::error::Result;
use crate::image_pipeline::refusal::bad_upload;

/// Most chunks a PNG may have before its image data. Real files have a dozen or two
/// (IHDR, sRGB or iCCP, gAMA, pHYs, a few text chunks, eXIf); the decoder parses each, so
/// this refuses only floods.
const MAX_PNG_CHUNKS: usize = 1000;

/// Most bytes one compressed ancillary chunk (iCCP, zTXt, compressed iTXt) may inflate to.
/// ICC profiles are a few KB (sRGB is 3 KB; large display profiles with lookup tables a few
/// hundred KB; the multi-MB CMYK printer profiles cannot go in a PNG) and compressed text
/// is XMP or a comment: 1 MiB leaves room for every real one.
const MAX_PNG_INFLATED: usize = 1 << 20;

/// Most bytes all compressed ancillary chunks before the image data may inflate to
/// together, so that checking them stays cheap (a few ms).
const MAX_PNG_INFLATED_TOTAL: usize = 4 << 20;

/// The compressed part of an iCCP, zTXt or iTXt chunk (a zlib stream), if it has one:
/// after a keyword and its terminating zero, iCCP and zTXt have a compression method byte;
/// iTXt has a compression flag and method, a language tag and a translated keyword.
pub(in crate::image_pipeline) fn png_compressed_part<'a>(
    kind: &[u8],
    data: &'a [u8],
) -> Option<&'a [u8]> {
    let keyword_end = data.iter().position(|&v| v == 0)?;
    let rest = data.get(keyword_end + 1..)?;
    match kind {
        b"iCCP" | b"zTXt" => rest.get(1..),
        b"iTXt" => {
            let (&flag, rest) = rest.split_first()?;
            if flag == 0 {
                return None;
            }
            let rest = rest.get(1..)?;
            let language_end = rest.iter().position(|&v| v == 0)?;
            let rest = rest.get(language_end + 1..)?;
            let translated_end = rest.iter().position(|&v| v == 0)?;
            rest.get(translated_end + 1..)
        }
        _ => None,
    }
}

/// How many bytes a zlib stream inflates to, up to `bound` + 1 (more is not looked at);
/// None if it is corrupt (the decoder skips those chunks without inflating them either).
fn inflated_size(stream: &[u8], bound: usize) -> Option<usize> {
    match fdeflate::decompress_to_vec_bounded(stream, bound + 1) {
        Ok(out) => Some(out.len()),
        Err(fdeflate::BoundedDecompressionError::OutputTooLarge { .. }) => Some(bound + 1),
        Err(fdeflate::BoundedDecompressionError::DecompressionError { .. }) => None,
    }
}

/// IHDR must be the first chunk. Walks the chunks up to the image data (where the decoder
/// stops reading metadata): the orientation from an eXIf chunk, and the refusal of chunk
/// floods and of compressed chunks that inflate past [`MAX_PNG_INFLATED`] or, together,
/// [`MAX_PNG_INFLATED_TOTAL`] (the png crate in `image` inflated an iCCP profile up to its
/// allocation limit, hundreds of MB from a file of a few hundred KB).
pub(super) fn png_header(b: &[u8]) -> Result<Option<(u32, u32, u8)>> {
    if b.get(12..16) != Some(b"IHDR".as_slice()) {
        return Ok(None);
    }
    let (Some(width), Some(height)) = (be32(b, 16), be32(b, 20)) else {
        return Ok(None);
    };
    // The PNG spec caps each side at 2^31-1.
    if width > i32::MAX as u32 || height > i32::MAX as u32 {
        return Ok(None);
    }
    let mut orientation = None;
    let mut pos = 8usize;
    let mut chunks = 0;
    let mut inflated_total = 0;
    while let (Some(len), Some(kind)) = (be32(b, pos), bytes_at(b, pos.saturating_add(4), 4)) {
        let len = len as usize;
        if kind == b"IDAT" {
            break;
        }
        chunks += 1;
        if chunks > MAX_PNG_CHUNKS {
            return Err(bad_upload(format!(
                "the PNG has more than {MAX_PNG_CHUNKS} chunks before its image data; \
                 at most {MAX_PNG_CHUNKS} are accepted"
            )));
        }
        let data = bytes_at(b, pos + 8, len);
        if kind == b"eXIf" && orientation.is_none() {
            orientation = data.map(|d| tiff_orientation(d).unwrap_or(1));
        }
        if let Some(stream) = data.and_then(|d| png_compressed_part(kind, d)) {
            let name = String::from_utf8_lossy(kind);
            let size = inflated_size(stream, MAX_PNG_INFLATED).unwrap_or(0);
            if size > MAX_PNG_INFLATED {
                return Err(bad_upload(format!(
                    "the PNG's {name} chunk inflates to more than {} MiB; at most {} MiB \
                     are accepted",
                    MAX_PNG_INFLATED >> 20,
                    MAX_PNG_INFLATED >> 20
                )));
            }
            inflated_total += size;
            if inflated_total > MAX_PNG_INFLATED_TOTAL {
                return Err(bad_upload(format!(
                    "the PNG's compressed metadata chunks (iCCP, zTXt, iTXt) inflate to more \
                     than {} MiB together; at most {} MiB are accepted",
                    MAX_PNG_INFLATED_TOTAL >> 20,
                    MAX_PNG_INFLATED_TOTAL >> 20
                )));
            }
        }
        // Length, type, data, CRC.
        pos = pos.saturating_add(12).saturating_add(len);
    }
    Ok(Some((width, height, orientation.unwrap_or(1))))
}

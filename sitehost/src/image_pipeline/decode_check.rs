//! What every decoder checks of what it decoded, below the decoders (codec.rs, gif_codec.rs,
//! anim_webp.rs): how much one decode may allocate, and that it came out at the size the
//! header walk reported.

use super::refusal::bad_upload;
use super::sniff::Header;
use crate::error::Result;

/// Room a decoder gets beyond the decoded pixels, for what it keeps of the file's metadata
/// and its scratch buffers: the PNG chunks the png crate holds (PLTE, tRNS, eXIf, ...) and
/// its output row (16,384 pixels at 4 bytes: 64 KiB). 1 MiB is over ten times what a real
/// file needs there: EXIF is at most 64 KiB in a JPEG and is copied as is into PNGs.
pub(super) const DECODER_ALLOWANCE: u64 = 1 << 20;

/// The most one decode may allocate: its pixels at `bytes_per_pixel` plus
/// [`DECODER_ALLOWANCE`]. Derived from each image's own size, not from the largest allowed
/// image, so a small image cannot make the decoder allocate like a large one.
pub(super) fn decode_alloc_limit(width: u32, height: u32, bytes_per_pixel: u64) -> u64 {
    u64::from(width)
        .saturating_mul(u64::from(height))
        .saturating_mul(bytes_per_pixel)
        .saturating_add(DECODER_ALLOWANCE)
}

/// 400 unless the decoder's size is the one the header check reported.
pub(super) fn agree(header: &Header, width: u32, height: u32) -> Result<()> {
    if (width, height) != (header.width, header.height) {
        return Err(bad_upload(format!(
            "the {} is corrupt: its header says {}x{} but it decodes to {}x{}",
            header.format.name(),
            header.width,
            header.height,
            width,
            height
        )));
    }
    Ok(())
}

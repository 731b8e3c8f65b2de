//! Files that browsers show but a strict reading refuses, put right before any check or
//! decoder reads them, the way libjpeg and libpng read them:
//!
//! - **JPEG: stray bytes before a marker** ("N extraneous bytes before marker", which libjpeg
//!   skips; Photoshop has written such files). Between the marker segments up to the first
//!   scan, bytes other than 0xFF where a marker should start, and stuffed FF 00 pairs, are
//!   dropped, as libjpeg's `next_marker` drops them.
//! - **PNG: the end chunk missing.** A file whose last chunk is whole but is not IEND gets
//!   one; a file cut inside a chunk stays cut (and is refused as truncated).
//! - **PNG: `tRNS` masked to the bit depth.** The PNG spec stores a grey or RGB transparent
//!   value as 16 bits and says to use only the low `depth` bits; the png crate compares the
//!   low byte whole, so a 1-bit image whose value has high bits set came out opaque.
//!
//! - **GIF: no colour table.** The GIF spec lets a file have neither a global nor a local
//!   colour table and leaves the colours to the decoder, suggesting black and white for
//!   the first two; the gif crate refuses such a file. It gets a global table of 256
//!   entries: 0 black, 1 white, every other index n the grey (n, n, n) (MuPDF's and
//!   libgd's default). Frames with their own table keep using it.
//!
//! The repaired file is a copy only when something was put right (the original bytes are
//! what is stored); then every check that bounds decode cost runs on it as on any upload.

use std::borrow::Cow;
use std::ops::Range;

use super::format::ImageFormat;
use super::sniff::jpeg_markers::MAX_JPEG_SEGMENTS;
use super::sniff::{be16, be32, bytes_at};

/// `bytes`, or a repaired copy of it.
pub(super) fn repaired(bytes: &[u8]) -> Cow<'_, [u8]> {
    let copy = match ImageFormat::guess(bytes) {
        Some(ImageFormat::Jpeg) => jpeg_without_stray_bytes(bytes),
        Some(ImageFormat::Png) => png_repaired(bytes),
        Some(ImageFormat::Gif) => gif_with_a_colour_table(bytes),
        _ => None,
    };
    copy.map_or(Cow::Borrowed(bytes), Cow::Owned)
}

/// The JPEG without the stray bytes between its marker segments up to the first scan, or
/// None if it has none.
fn jpeg_without_stray_bytes(b: &[u8]) -> Option<Vec<u8>> {
    let stray = jpeg_stray_runs(b);
    if stray.is_empty() {
        return None;
    }
    let mut out = Vec::with_capacity(b.len());
    let mut from = 0;
    for run in stray {
        out.extend_from_slice(&b[from..run.start]);
        from = run.end;
    }
    out.extend_from_slice(&b[from..]);
    Some(out)
}

/// Where libjpeg would skip bytes looking for the next marker, up to the first scan header.
/// Stops (with what it found) wherever the strict header walk will refuse or the file ends:
/// that walk then says what is wrong.
fn jpeg_stray_runs(b: &[u8]) -> Vec<Range<usize>> {
    let mut runs = Vec::new();
    let mut pos = 2;
    for _ in 0..=MAX_JPEG_SEGMENTS {
        // The next 0xFF that is followed, after any fill 0xFFs, by a marker (not 0x00).
        let start = pos;
        let (ff, marker_at) = loop {
            let Some(ff) = b
                .get(pos..)
                .and_then(|rest| rest.iter().position(|&v| v == 0xFF))
            else {
                return runs;
            };
            let ff = pos + ff;
            let mut at = ff;
            while b.get(at) == Some(&0xFF) {
                at += 1;
            }
            match b.get(at) {
                None => return runs,
                Some(0x00) => pos = at + 1,
                Some(_) => break (ff, at),
            }
        };
        if ff > start {
            runs.push(start..ff);
        }
        match b[marker_at] {
            // The first scan (the body is entropy-coded data), or standalone markers the
            // header walk refuses.
            0xDA | 0x01 | 0xD0..=0xD9 => return runs,
            _ => {}
        }
        let Some(len) = be16(b, marker_at + 1) else {
            return runs;
        };
        if len < 2 {
            return runs;
        }
        pos = marker_at + 1 + len as usize;
    }
    runs
}

/// The PNG with an IEND chunk added if its last chunk is whole and is not one, and its
/// grey or RGB `tRNS` values masked to the bit depth; None if neither applies.
fn png_repaired(b: &[u8]) -> Option<Vec<u8>> {
    let depth = *b.get(24)?;
    let colour_type = *b.get(25)?;
    let mut pos = 8usize;
    let mut trns = None;
    let mut image_data = false;
    let mut ended = false;
    while let (Some(len), Some(kind)) = (be32(b, pos), bytes_at(b, pos.saturating_add(4), 4)) {
        let end = pos.checked_add(12)?.checked_add(len as usize)?;
        if end > b.len() {
            break;
        }
        match kind {
            b"IEND" => {
                ended = true;
                break;
            }
            b"IDAT" => image_data = true,
            b"tRNS" if !image_data && trns.is_none() => {
                trns = Some(pos + 8..pos + 8 + len as usize)
            }
            _ => {}
        }
        pos = end;
    }
    let add_end = !ended && image_data && pos == b.len();
    let masked =
        trns.and_then(|at| masked_trns(&b[at.clone()], depth, colour_type).map(|v| (at, v)));
    if !add_end && masked.is_none() {
        return None;
    }
    let mut out = b.to_vec();
    if let Some((at, value)) = masked {
        out[at.clone()].copy_from_slice(&value);
        let crc = png_crc(&out[at.start - 4..at.end]);
        out[at.end..at.end + 4].copy_from_slice(&crc.to_be_bytes());
    }
    if add_end {
        out.extend_from_slice(&[0, 0, 0, 0]);
        out.extend_from_slice(b"IEND");
        out.extend_from_slice(&png_crc(b"IEND").to_be_bytes());
    }
    Some(out)
}

/// A grey (type 0) or RGB (type 2) transparent value masked to a bit depth under 8, if
/// that changes it. At 8 bits the decoder already reads only the low byte; 16 bits use all.
fn masked_trns(value: &[u8], depth: u8, colour_type: u8) -> Option<Vec<u8>> {
    if depth >= 8 || !matches!(colour_type, 0 | 2) || !value.len().is_multiple_of(2) {
        return None;
    }
    let mask = (1u16 << depth) - 1;
    let masked: Vec<u8> = value
        .chunks_exact(2)
        .flat_map(|s| (u16::from_be_bytes([s[0], s[1]]) & mask).to_be_bytes())
        .collect();
    (masked != value).then_some(masked)
}

/// The PNG chunk CRC (CRC-32 over the type and data).
fn png_crc(type_and_data: &[u8]) -> u32 {
    let mut crc = 0xFFFF_FFFFu32;
    for &byte in type_and_data {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                0xEDB8_8320 ^ (crc >> 1)
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// The GIF with the default global colour table if its logical screen has none.
fn gif_with_a_colour_table(b: &[u8]) -> Option<Vec<u8>> {
    let flags = *b.get(10)?;
    if flags & 0x80 != 0 || b.len() < 13 {
        return None;
    }
    let mut out = Vec::with_capacity(b.len() + 768);
    out.extend_from_slice(&b[..13]);
    // A global table of 2^(7+1) = 256 entries.
    out[10] = flags | 0x87;
    out.extend((0..=255u8).flat_map(|n| match n {
        0 => [0, 0, 0],
        1 => [255, 255, 255],
        n => [n, n, n],
    }));
    out.extend_from_slice(&b[13..]);
    Some(out)
}

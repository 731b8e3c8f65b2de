//! Type detection and header parsing from the bytes alone.
//!
//! Everything here reads a few hundred bytes at most (plus a walk over chunk headers), never
//! decodes pixels and never allocates in proportion to the declared size, so that a file
//! declaring absurd dimensions is refused before any decoder sees it.

use super::{bad_upload, ImageFormat, ACCEPTED};
use crate::error::Result;

/// What the header says: the stored (not yet rotated) size and the EXIF orientation (1-8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Header {
    pub format: ImageFormat,
    pub width: u32,
    pub height: u32,
    pub orientation: u8,
}

/// Detects the format and reads the header dimensions and EXIF orientation.
pub(super) fn read_header(bytes: &[u8]) -> Result<Header> {
    let format = detect(bytes)?;
    let parsed = match format {
        ImageFormat::Jpeg => jpeg_header(bytes),
        ImageFormat::Png => png_header(bytes),
        ImageFormat::Gif => gif_header(bytes),
        ImageFormat::WebP => webp_header(bytes),
    };
    match parsed {
        Some((width, height, orientation)) if width > 0 && height > 0 => Ok(Header {
            format,
            width,
            height,
            orientation,
        }),
        _ => Err(bad_upload(format!(
            "the file looks like a {} but its header is truncated or corrupt",
            format.name()
        ))),
    }
}

/// Recognises the four accepted formats by their signatures; anything else is refused with
/// a message naming what it looks like.
fn detect(bytes: &[u8]) -> Result<ImageFormat> {
    if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
        return Ok(ImageFormat::Jpeg);
    }
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        return Ok(ImageFormat::Png);
    }
    if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        return Ok(ImageFormat::Gif);
    }
    if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        return Ok(ImageFormat::WebP);
    }
    Err(bad_upload(format!(
        "the file is {}; accepted: {ACCEPTED}",
        describe_other(bytes)
    )))
}

/// A short human name for a file that is not one of the accepted formats.
fn describe_other(bytes: &[u8]) -> &'static str {
    if bytes.is_empty() {
        return "empty";
    }
    let starts = |sig: &[u8]| bytes.starts_with(sig);
    if starts(b"%PDF-") {
        return "PDF";
    }
    if bytes.len() >= 12 && &bytes[4..8] == b"ftyp" {
        return match &bytes[8..12] {
            b"heic" | b"heix" | b"hevc" | b"hevx" | b"heim" | b"heis" | b"mif1" | b"msf1" => {
                "HEIC/HEIF"
            }
            b"avif" | b"avis" => "AVIF",
            b"crx " => "a camera RAW file (CR3)",
            _ => "a video or other ISO media file (MP4/MOV)",
        };
    }
    if starts(b"II*\0") || starts(b"MM\0*") {
        return "TIFF (or a camera RAW file)";
    }
    if starts(&[0xFF, 0x0A]) || starts(b"\0\0\0\x0cJXL \r\n\x87\n") {
        return "JPEG XL";
    }
    if starts(b"\0\0\0\x0cjP  \r\n\x87\n") {
        return "JPEG 2000";
    }
    if starts(b"BM") && bytes.len() >= 26 {
        return "BMP";
    }
    if starts(&[0, 0, 1, 0]) {
        return "ICO";
    }
    if starts(b"8BPS") {
        return "PSD (Photoshop)";
    }
    if starts(b"PK\x03\x04") {
        return "a ZIP archive (or an Office document)";
    }
    if starts(&[0x1F, 0x8B]) {
        return "gzip-compressed (SVGZ?)";
    }
    if starts(b"RIFF") {
        return "a RIFF file that is not WebP";
    }
    describe_text(bytes)
}

/// Text-based formats: SVG, HTML, XML, or plain text.
fn describe_text(bytes: &[u8]) -> &'static str {
    let head = &bytes[..bytes.len().min(4096)];
    // A UTF-8 sequence cut at the 4 KiB boundary is still text.
    let valid = match std::str::from_utf8(head) {
        Ok(_) => true,
        Err(e) => e.error_len().is_none(),
    };
    if !valid || head.contains(&0) {
        return "of an unknown type";
    }
    let lower = head.to_ascii_lowercase();
    let trimmed = lower
        .strip_prefix(b"\xef\xbb\xbf")
        .unwrap_or(&lower)
        .trim_ascii_start();
    let contains = |needle: &[u8]| lower.windows(needle.len()).any(|w| w == needle);
    if trimmed.starts_with(b"<") && contains(b"<svg") {
        return "SVG";
    }
    if trimmed.starts_with(b"<!doctype html") || trimmed.starts_with(b"<html") || contains(b"<html")
    {
        return "HTML";
    }
    if trimmed.starts_with(b"<?xml") {
        return "XML";
    }
    "text"
}

/// `len` bytes at `at`, or None if out of bounds (with overflow-checked arithmetic, since
/// offsets come from the file).
fn bytes_at(b: &[u8], at: usize, len: usize) -> Option<&[u8]> {
    b.get(at..at.checked_add(len)?)
}

fn be16(b: &[u8], at: usize) -> Option<u32> {
    let s = bytes_at(b, at, 2)?;
    Some(u32::from(u16::from_be_bytes([s[0], s[1]])))
}

fn be32(b: &[u8], at: usize) -> Option<u32> {
    let s = bytes_at(b, at, 4)?;
    Some(u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
}

fn le16(b: &[u8], at: usize) -> Option<u32> {
    let s = bytes_at(b, at, 2)?;
    Some(u32::from(u16::from_le_bytes([s[0], s[1]])))
}

fn le24(b: &[u8], at: usize) -> Option<u32> {
    let s = bytes_at(b, at, 3)?;
    Some(u32::from_le_bytes([s[0], s[1], s[2], 0]))
}

fn le32(b: &[u8], at: usize) -> Option<u32> {
    let s = bytes_at(b, at, 4)?;
    Some(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
}

/// Walks the JPEG marker segments up to the frame header (SOFn); EXIF (APP1) comes before it.
fn jpeg_header(b: &[u8]) -> Option<(u32, u32, u8)> {
    let mut pos = 2;
    let mut orientation = 1;
    loop {
        if *b.get(pos)? != 0xFF {
            return None;
        }
        // Any number of 0xFF fill bytes may precede a marker.
        while *b.get(pos)? == 0xFF {
            pos += 1;
        }
        let marker = b[pos];
        pos += 1;
        match marker {
            // Markers without a length field.
            0x01 | 0xD0..=0xD8 => continue,
            // End of image or start of scan before any frame header: nothing to decode.
            0xD9 | 0xDA => return None,
            _ => {}
        }
        let len = be16(b, pos)? as usize;
        if len < 2 {
            return None;
        }
        let segment = b.get(pos + 2..pos + len)?;
        match marker {
            // SOF0..SOF15 except DHT (C4), JPG (C8) and DAC (CC).
            0xC0..=0xCF if !matches!(marker, 0xC4 | 0xC8 | 0xCC) => {
                let height = be16(segment, 1)?;
                let width = be16(segment, 3)?;
                return Some((width, height, orientation));
            }
            0xE1 if orientation == 1 => {
                if let Some(tiff) = segment.strip_prefix(b"Exif\0\0") {
                    orientation = tiff_orientation(tiff).unwrap_or(1);
                }
            }
            _ => {}
        }
        pos += len;
    }
}

/// True if an end-of-image marker follows the first scan. zune-jpeg (like libjpeg) decodes
/// a truncated file without error, filling the missing part with grey; this catches that.
/// Inside entropy-coded data 0xFF is always followed by 0x00 or a restart marker, so an
/// FF D9 after the first SOS is the real EOI (or that of an image appended after ours, as
/// in MPF files and motion photos, which are complete too). Searching from the end finds it
/// at once in ordinary files.
pub(super) fn jpeg_is_complete(b: &[u8]) -> bool {
    let Some(scan) = jpeg_first_scan(b) else {
        return false;
    };
    b[scan..].windows(2).rev().any(|w| w == [0xFF, 0xD9])
}

/// Offset just after the first SOS marker.
fn jpeg_first_scan(b: &[u8]) -> Option<usize> {
    let mut pos = 2;
    loop {
        if *b.get(pos)? != 0xFF {
            return None;
        }
        while *b.get(pos)? == 0xFF {
            pos += 1;
        }
        let marker = b[pos];
        pos += 1;
        match marker {
            0x01 | 0xD0..=0xD8 => continue,
            0xD9 => return None,
            0xDA => return Some(pos),
            _ => pos += be16(b, pos)? as usize,
        }
    }
}

/// IHDR must be the first chunk; an eXIf chunk, if any, comes before the image data.
fn png_header(b: &[u8]) -> Option<(u32, u32, u8)> {
    if b.get(12..16)? != b"IHDR" {
        return None;
    }
    let width = be32(b, 16)?;
    let height = be32(b, 20)?;
    // The PNG spec caps each side at 2^31-1.
    if width > i32::MAX as u32 || height > i32::MAX as u32 {
        return None;
    }
    let mut orientation = 1;
    let mut pos = 8usize;
    while let (Some(len), Some(kind)) = (be32(b, pos), bytes_at(b, pos.saturating_add(4), 4)) {
        let len = len as usize;
        if kind == b"IDAT" {
            break;
        }
        if kind == b"eXIf" {
            if let Some(data) = bytes_at(b, pos + 8, len) {
                orientation = tiff_orientation(data).unwrap_or(1);
            }
            break;
        }
        // Length, type, data, CRC.
        pos = pos.saturating_add(12).saturating_add(len);
    }
    Some((width, height, orientation))
}

/// The logical screen size; the first frame is drawn onto a canvas of that size.
fn gif_header(b: &[u8]) -> Option<(u32, u32, u8)> {
    Some((le16(b, 6)?, le16(b, 8)?, 1))
}

/// Simple lossy (VP8), lossless (VP8L) or extended (VP8X) WebP.
fn webp_header(b: &[u8]) -> Option<(u32, u32, u8)> {
    let data = 20;
    match b.get(12..16)? {
        b"VP8 " => {
            // Frame tag (3 bytes), start code 9D 01 2A, then 14-bit sizes with 2-bit scale.
            if b.get(data + 3..data + 6)? != [0x9D, 0x01, 0x2A] {
                return None;
            }
            Some((le16(b, data + 6)? & 0x3FFF, le16(b, data + 8)? & 0x3FFF, 1))
        }
        b"VP8L" => {
            if *b.get(data)? != 0x2F {
                return None;
            }
            let bits = le32(b, data + 1)?;
            Some(((bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1, 1))
        }
        b"VP8X" => {
            let flags = *b.get(data)?;
            let width = le24(b, data + 4)? + 1;
            let height = le24(b, data + 7)? + 1;
            let orientation = if flags & 0x08 != 0 {
                webp_exif_orientation(b).unwrap_or(1)
            } else {
                1
            };
            Some((width, height, orientation))
        }
        _ => None,
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

/// The Orientation tag (0x0112) of IFD0 in a TIFF-structured EXIF block.
pub(super) fn tiff_orientation(tiff: &[u8]) -> Option<u8> {
    let little = match tiff.get(..4)? {
        b"II*\0" => true,
        b"MM\0*" => false,
        _ => return None,
    };
    let u16_at = |at: usize| {
        if little {
            le16(tiff, at)
        } else {
            be16(tiff, at)
        }
    };
    let u32_at = |at: usize| {
        if little {
            le32(tiff, at)
        } else {
            be32(tiff, at)
        }
    };
    let ifd = u32_at(4)? as usize;
    let count = u16_at(ifd)? as usize;
    for i in 0..count {
        let entry = ifd.checked_add(2 + 12 * i)?;
        if u16_at(entry)? == 0x0112 {
            // Type SHORT (3): the value sits in the first two bytes of the value field.
            if u16_at(entry.checked_add(2)?)? != 3 {
                return None;
            }
            let value = u16_at(entry.checked_add(8)?)?;
            return (1..=8).contains(&value).then_some(value as u8);
        }
    }
    None
}

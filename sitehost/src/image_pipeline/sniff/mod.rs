//! Type detection and header parsing from the bytes alone: here the detection, the
//! [`Header`] every format's walk fills and the bounds-checked reads they share; each
//! format's walk in a module of its own.
//!
//! Everything here reads a few hundred bytes at most (plus a walk over chunk headers), never
//! decodes pixels and never allocates in proportion to the declared size, so that a file
//! declaring absurd dimensions is refused before any decoder sees it.

mod gif_header;
pub(super) mod jpeg_markers;
pub(super) mod png_header;
mod webp_header;

use super::format::{ImageFormat, ACCEPTED};
use super::refusal::bad_upload;
use crate::config::ImageLimits;
use crate::error::Result;
use gif_header::gif_header;
use jpeg_markers::{jpeg_header, JpegScan};
use png_header::png_header;
use webp_header::webp_header;

/// What the header says: the stored (not yet rotated) size and the EXIF orientation (1-8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Header {
    pub format: ImageFormat,
    pub width: u32,
    pub height: u32,
    pub orientation: u8,
    /// Frames: more than 1 for an animated GIF or WebP (counted up to the frame limit plus
    /// one), else 1.
    pub frames: u32,
    /// For a JPEG, where the header walk stopped: [`jpeg_markers::jpeg_check_body`] goes on
    /// from there.
    pub jpeg_scan: Option<JpegScan>,
}

/// A header's size and orientation as each format's walk finds them.
struct Parsed {
    width: u32,
    height: u32,
    orientation: u8,
    frames: u32,
    jpeg_scan: Option<JpegScan>,
}

impl Parsed {
    fn new(width: u32, height: u32, orientation: u8) -> Self {
        Parsed {
            width,
            height,
            orientation,
            frames: 1,
            jpeg_scan: None,
        }
    }

    fn frames(self, frames: u32) -> Self {
        Parsed { frames, ..self }
    }
}

/// Detects the format and reads the dimensions the decoder will decode (for GIF and WebP
/// after checking that every frame fits the screen or canvas), the EXIF orientation and
/// the frame count (up to `limits.max_frames + 1`).
pub(super) fn read_header(bytes: &[u8], limits: &ImageLimits) -> Result<Header> {
    let format = detect(bytes)?;
    let max_frames = limits.max_frames;
    let parsed = match format {
        ImageFormat::Jpeg => jpeg_header(bytes)?,
        ImageFormat::Png => png_header(bytes)?.map(|(w, h, o)| Parsed::new(w, h, o)),
        ImageFormat::Gif => {
            gif_header(bytes, max_frames)?.map(|(w, h, frames)| Parsed::new(w, h, 1).frames(frames))
        }
        ImageFormat::WebP => webp_header(bytes, max_frames)?
            .map(|(w, h, o, frames)| Parsed::new(w, h, o).frames(frames)),
    };
    match parsed {
        Some(p) if p.width > 0 && p.height > 0 => Ok(Header {
            format,
            width: p.width,
            height: p.height,
            orientation: p.orientation,
            frames: p.frames,
            jpeg_scan: p.jpeg_scan,
        }),
        _ => Err(bad_upload(format!(
            "the file looks like a {} but its header is truncated or corrupt; upload the \
             whole file, or save it again",
            format.name()
        ))),
    }
}

/// Recognises the four accepted formats by their signatures (`image`'s own detection);
/// anything else is refused with a message naming what it looks like.
fn detect(bytes: &[u8]) -> Result<ImageFormat> {
    ImageFormat::guess(bytes).ok_or_else(|| {
        bad_upload(format!(
            "the file is {}; accepted: {ACCEPTED}",
            describe_other(bytes)
        ))
    })
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
pub(super) fn bytes_at(b: &[u8], at: usize, len: usize) -> Option<&[u8]> {
    b.get(at..at.checked_add(len)?)
}

pub(super) fn be16(b: &[u8], at: usize) -> Option<u32> {
    let s = bytes_at(b, at, 2)?;
    Some(u32::from(u16::from_be_bytes([s[0], s[1]])))
}

pub(super) fn be32(b: &[u8], at: usize) -> Option<u32> {
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

pub(super) fn le32(b: &[u8], at: usize) -> Option<u32> {
    let s = bytes_at(b, at, 4)?;
    Some(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
}

/// The Orientation tag of IFD0 in a TIFF-structured EXIF block (`image`'s own reading).
fn tiff_orientation(tiff: &[u8]) -> Option<u8> {
    ::image::metadata::Orientation::from_exif_chunk(tiff).map(|o| o.to_exif())
}

//! Type detection and header parsing from the bytes alone.
//!
//! Everything here reads a few hundred bytes at most (plus a walk over chunk headers), never
//! decodes pixels and never allocates in proportion to the declared size, so that a file
//! declaring absurd dimensions is refused before any decoder sees it.

use super::{bad_upload, ImageFormat, ACCEPTED};
use crate::error::{ApiError, Result};

/// What the header says: the stored (not yet rotated) size and the EXIF orientation (1-8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Header {
    pub format: ImageFormat,
    pub width: u32,
    pub height: u32,
    pub orientation: u8,
    /// For a JPEG, where the header walk stopped: [`jpeg_check_body`] goes on from there.
    pub jpeg_scan: Option<JpegScan>,
}

/// The end of a JPEG's first scan header, and the marker segments counted up to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct JpegScan {
    /// The first byte of the entropy-coded data.
    data_start: usize,
    segments: usize,
    /// SOF2: the decoder keeps every coefficient of the image until the last scan.
    pub progressive: bool,
}

/// A header's size and orientation as each format's walk finds them.
struct Parsed {
    width: u32,
    height: u32,
    orientation: u8,
    jpeg_scan: Option<JpegScan>,
}

impl Parsed {
    fn new(width: u32, height: u32, orientation: u8) -> Self {
        Parsed {
            width,
            height,
            orientation,
            jpeg_scan: None,
        }
    }
}

/// Detects the format and reads the dimensions the decoder will decode (for GIF and WebP
/// after checking that the first frame fits the screen or canvas) and the EXIF orientation.
pub(super) fn read_header(bytes: &[u8]) -> Result<Header> {
    let format = detect(bytes)?;
    let parsed = match format {
        ImageFormat::Jpeg => jpeg_header(bytes)?,
        ImageFormat::Png => png_header(bytes)?.map(|(w, h, o)| Parsed::new(w, h, o)),
        ImageFormat::Gif => gif_header(bytes)?.map(|(w, h, o)| Parsed::new(w, h, o)),
        ImageFormat::WebP => webp_header(bytes)?.map(|(w, h, o)| Parsed::new(w, h, o)),
    };
    match parsed {
        Some(p) if p.width > 0 && p.height > 0 => Ok(Header {
            format,
            width: p.width,
            height: p.height,
            orientation: p.orientation,
            jpeg_scan: p.jpeg_scan,
        }),
        _ => Err(bad_upload(format!(
            "the file looks like a {} but its header is truncated or corrupt",
            format.name()
        ))),
    }
}

/// Recognises the four accepted formats by their signatures (`image`'s own detection);
/// anything else is refused with a message naming what it looks like.
fn detect(bytes: &[u8]) -> Result<ImageFormat> {
    match ::image::guess_format(bytes) {
        Ok(::image::ImageFormat::Jpeg) => return Ok(ImageFormat::Jpeg),
        Ok(::image::ImageFormat::Png) => return Ok(ImageFormat::Png),
        Ok(::image::ImageFormat::Gif) => return Ok(ImageFormat::Gif),
        Ok(::image::ImageFormat::WebP) => return Ok(ImageFormat::WebP),
        _ => {}
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

/// Most marker segments (APPn, COM, DQT, DHT, ... and the scan headers) a JPEG may have.
/// zune-jpeg re-examines every extended-XMP segment it holds after each marker it parses
/// before the first scan, so n such segments cost n^2; each DHT also builds lookup tables.
/// Real files have a few dozen (a large Photoshop XMP packet a few hundred: 25 MiB holds at
/// most ~400 full 64 KiB segments), so this refuses only floods.
pub(super) const MAX_JPEG_SEGMENTS: usize = 1000;

/// Most scans a JPEG may have. Each scan of a progressive file is a pass over every block of
/// the components it covers, however few bytes it has: a 50 MP greyscale JPEG of 100 nearly
/// empty scans (541 KB) took 447 ms to decode, against 16 ms for the same image as one
/// baseline scan (docs/image-pipeline-bench.md). Encoders write up to a dozen or so
/// (libjpeg's progression: 10 for colour, 6 for grey), so 100 keeps the worst file near
/// what a real progressive file of the same size costs, and refuses only floods.
pub(super) const MAX_JPEG_SCANS: usize = 100;

fn jpeg_too_many_segments() -> ApiError {
    bad_upload(format!(
        "the JPEG has more than {MAX_JPEG_SEGMENTS} marker segments (metadata or table blocks); \
         at most {MAX_JPEG_SEGMENTS} are accepted"
    ))
}

fn jpeg_corrupt(what: &str) -> ApiError {
    bad_upload(format!("the JPEG is corrupt: {what}"))
}

/// The coding process each SOFn marker declares, for the refusal of those the decoder
/// cannot decode (it decodes only SOF0, SOF1 and SOF2: Huffman-coded baseline, extended
/// and progressive DCT).
fn jpeg_unsupported_frame(marker: u8) -> Option<&'static str> {
    Some(match marker {
        0xC3 => "SOF3 (lossless)",
        0xC5 => "SOF5 (differential sequential, hierarchical)",
        0xC6 => "SOF6 (differential progressive, hierarchical)",
        0xC7 => "SOF7 (differential lossless, hierarchical)",
        0xC9 => "SOF9 (arithmetic-coded sequential)",
        0xCA => "SOF10 (arithmetic-coded progressive)",
        0xCB => "SOF11 (arithmetic-coded lossless)",
        0xCD => "SOF13 (arithmetic-coded differential sequential)",
        0xCE => "SOF14 (arithmetic-coded differential progressive)",
        0xCF => "SOF15 (arithmetic-coded differential lossless)",
        _ => return None,
    })
}

/// Walks the JPEG marker segments up to the first scan (SOS), as the decoder will, and
/// returns the size of the one frame header (SOF0-SOF2) it will decode, the EXIF
/// orientation (APP1 comes before the frame header) and where the image data starts. Only strictly laid-out files pass
/// (segment after segment, fill bytes allowed), so the decoder's own, more lenient marker
/// search finds the same segments; the frame types it would skip or refuse, a second frame
/// header and segment floods are refused here with a message saying which.
fn jpeg_header(b: &[u8]) -> Result<Option<Parsed>> {
    let mut pos = 2;
    let mut orientation = 1;
    let mut frame = None;
    let mut segments = 0;
    loop {
        let Some(&first) = b.get(pos) else {
            return Ok(None);
        };
        if first != 0xFF {
            return Err(jpeg_corrupt(&format!(
                "expected a marker at byte {pos} of the header"
            )));
        }
        // Any number of 0xFF fill bytes may precede a marker.
        while b.get(pos) == Some(&0xFF) {
            pos += 1;
        }
        let Some(&marker) = b.get(pos) else {
            return Ok(None);
        };
        pos += 1;
        match marker {
            // Standalone markers (stuffing, TEM, RSTn, a second SOI) have no place before
            // the first scan, and the decoder would read a length after them.
            0x00 | 0x01 | 0xD0..=0xD8 => {
                return Err(jpeg_corrupt(&format!(
                    "marker FF{marker:02X} before the image data"
                )))
            }
            0xD9 => return Err(jpeg_corrupt("it ends before its image data")),
            0xCC => {
                return Err(bad_upload(
                    "the JPEG uses arithmetic coding (DAC), which is not supported; \
                     accepted: baseline and progressive JPEG",
                ))
            }
            0xDC => return Err(jpeg_corrupt("a DNL marker before the image data")),
            _ => {}
        }
        segments += 1;
        if segments > MAX_JPEG_SEGMENTS {
            return Err(jpeg_too_many_segments());
        }
        let Some(len) = be16(b, pos) else {
            return Ok(None);
        };
        let len = len as usize;
        if len < 2 {
            return Err(jpeg_corrupt(&format!(
                "marker FF{marker:02X} has length {len}"
            )));
        }
        let Some(segment) = b.get(pos + 2..pos + len) else {
            return Ok(None);
        };
        match marker {
            0xC0..=0xC2 => {
                if frame.is_some() {
                    return Err(jpeg_corrupt("it has two frame headers (SOF)"));
                }
                let (Some(height), Some(width)) = (be16(segment, 1), be16(segment, 3)) else {
                    return Ok(None);
                };
                frame = Some((width, height, marker == 0xC2));
            }
            marker if jpeg_unsupported_frame(marker).is_some() => {
                let kind = jpeg_unsupported_frame(marker).unwrap_or("unknown");
                return Err(bad_upload(format!(
                    "the JPEG is coded as {kind}, which is not supported; \
                     accepted: baseline and progressive JPEG (SOF0, SOF1, SOF2)"
                )));
            }
            0xDA => {
                return match frame {
                    Some((width, height, progressive)) => Ok(Some(Parsed {
                        jpeg_scan: Some(JpegScan {
                            data_start: pos + len,
                            segments,
                            progressive,
                        }),
                        ..Parsed::new(width, height, orientation)
                    })),
                    None => Err(jpeg_corrupt("its image data comes before a frame header")),
                };
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

/// Checks what follows the first scan header (where [`jpeg_header`] stopped): an
/// end-of-image marker must come (zune-jpeg, like libjpeg, decodes a truncated file without
/// error, filling the missing part with grey), and the marker segments between the scans
/// of a progressive file count towards [`MAX_JPEG_SEGMENTS`] (each costs the decoder a
/// table rebuild or a copy), its scans towards [`MAX_JPEG_SCANS`]. Inside entropy-coded data 0xFF is always followed by 0x00
/// (stuffing), 0xFF (fill) or a restart marker, so any other FF xx is a marker. Anything
/// after the first EOI (the second image of an MPF file or a motion photo's video) is not
/// read. One pass over the compressed bytes, none over pixels.
pub(super) fn jpeg_check_body(b: &[u8], header: &Header) -> Result<()> {
    let truncated = || bad_upload("the JPEG is truncated: its image data has no end marker");
    let JpegScan {
        data_start: mut pos,
        mut segments,
        ..
    } = header
        .jpeg_scan
        .ok_or_else(|| ApiError::internal("a JPEG header without its scan position"))?;
    // The header walk stopped at the first scan.
    let mut scans = 1;
    loop {
        // The next marker after entropy-coded data.
        let ff = b
            .get(pos..)
            .and_then(|rest| rest.iter().position(|&v| v == 0xFF))
            .ok_or_else(truncated)?;
        pos += ff + 1;
        let marker = *b.get(pos).ok_or_else(truncated)?;
        match marker {
            0x00 | 0xFF | 0xD0..=0xD7 => {
                // Stuffed byte or restart marker: still image data. A fill 0xFF is looked
                // at again as the start of the marker.
                if marker != 0xFF {
                    pos += 1;
                }
            }
            0xD9 => return Ok(()),
            _ => {
                segments += 1;
                if segments > MAX_JPEG_SEGMENTS {
                    return Err(jpeg_too_many_segments());
                }
                if marker == 0xDA {
                    scans += 1;
                    if scans > MAX_JPEG_SCANS {
                        return Err(bad_upload(format!(
                            "the JPEG has more than {MAX_JPEG_SCANS} scans (progressive \
                             passes); at most {MAX_JPEG_SCANS} are accepted"
                        )));
                    }
                }
                let len = be16(b, pos + 1).ok_or_else(truncated)? as usize;
                pos = pos + 1 + len.max(2);
            }
        }
    }
}

/// Most chunks a PNG may have before its image data. Real files have a dozen or two
/// (IHDR, sRGB or iCCP, gAMA, pHYs, a few text chunks, eXIf); the decoder parses each, so
/// this refuses only floods.
pub(super) const MAX_PNG_CHUNKS: usize = 1000;

/// Most bytes one compressed ancillary chunk (iCCP, zTXt, compressed iTXt) may inflate to.
/// ICC profiles are a few KB (sRGB is 3 KB; large display profiles with lookup tables a few
/// hundred KB; the multi-MB CMYK printer profiles cannot go in a PNG) and compressed text
/// is XMP or a comment: 1 MiB leaves room for every real one.
pub(super) const MAX_PNG_INFLATED: usize = 1 << 20;

/// Most bytes all compressed ancillary chunks before the image data may inflate to
/// together, so that checking them stays cheap (a few ms).
pub(super) const MAX_PNG_INFLATED_TOTAL: usize = 4 << 20;

/// The compressed part of an iCCP, zTXt or iTXt chunk (a zlib stream), if it has one:
/// after a keyword and its terminating zero, iCCP and zTXt have a compression method byte;
/// iTXt has a compression flag and method, a language tag and a translated keyword.
pub(super) fn png_compressed_part<'a>(kind: &[u8], data: &'a [u8]) -> Option<&'a [u8]> {
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
fn png_header(b: &[u8]) -> Result<Option<(u32, u32, u8)>> {
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

/// The logical screen size, which is the size `image` decodes: the first frame is drawn
/// onto a canvas of that size. That frame must fit inside it: a frame larger than the
/// screen would make the decoder allocate for the frame's size, not the checked one.
/// Walks the blocks as the `gif` decoder does (extensions are chains of sub-blocks) up to
/// the first image descriptor.
fn gif_header(b: &[u8]) -> Result<Option<(u32, u32, u8)>> {
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
fn webp_header(b: &[u8]) -> Result<Option<(u32, u32, u8)>> {
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

/// The Orientation tag of IFD0 in a TIFF-structured EXIF block (`image`'s own reading).
fn tiff_orientation(tiff: &[u8]) -> Option<u8> {
    ::image::metadata::Orientation::from_exif_chunk(tiff).map(|o| o.to_exif())
}

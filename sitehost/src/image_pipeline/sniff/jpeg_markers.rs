//! The JPEG marker walk: the header up to the first scan (the frame size, the EXIF
//! orientation, the coding processes refused), then the body up to its end marker, with
//! the limits on marker segments and scans that keep a decode's cost near the file's size.

use super::{be16, tiff_orientation, Header, Parsed};
use crate::error::{ApiError, Result};
use crate::image_pipeline::refusal::bad_upload;

/// The end of a JPEG's first scan header, and the marker segments counted up to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::image_pipeline) struct JpegScan {
    /// The first byte of the entropy-coded data.
    data_start: usize,
    segments: usize,
    /// SOF2: the decoder keeps every coefficient of the image until the last scan.
    pub progressive: bool,
}

/// Most marker segments (APPn, COM, DQT, DHT, ... and the scan headers) a JPEG may have.
/// zune-jpeg re-examines every extended-XMP segment it holds after each marker it parses
/// before the first scan, so n such segments cost n^2; each DHT also builds lookup tables.
/// Real files have a few dozen (a large Photoshop XMP packet a few hundred: 25 MiB holds at
/// most ~400 full 64 KiB segments), so this refuses only floods.
pub(in crate::image_pipeline) const MAX_JPEG_SEGMENTS: usize = 1000;

/// Most scans a JPEG may have. Each scan of a progressive file is a pass over every block of
/// the components it covers, however few bytes it has: a 50 MP greyscale JPEG of 100 nearly
/// empty scans (541 KB) took 447 ms to decode, against 16 ms for the same image as one
/// baseline scan (docs/image-pipeline-bench.md). Encoders write up to a dozen or so
/// (libjpeg's progression: 10 for colour, 6 for grey), so 100 keeps the worst file near
/// what a real progressive file of the same size costs, and refuses only floods.
pub(in crate::image_pipeline) const MAX_JPEG_SCANS: usize = 100;

fn jpeg_too_many_segments() -> ApiError {
    bad_upload(format!(
        "the JPEG has more than {MAX_JPEG_SEGMENTS} marker segments (metadata or table blocks); \
         at most {MAX_JPEG_SEGMENTS} are accepted"
    ))
}

fn jpeg_corrupt(what: &str) -> ApiError {
    bad_upload(format!(
        "the JPEG is corrupt: {what}; save or export it again and upload the new file"
    ))
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
pub(super) fn jpeg_header(b: &[u8]) -> Result<Option<Parsed>> {
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
        refuse_before_scan(marker)?;
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

/// Refuses the markers that have no place before the first scan, saying what they are.
fn refuse_before_scan(marker: u8) -> Result<()> {
    match marker {
        // Standalone markers (stuffing, TEM, RSTn, a second SOI) have no place before the
        // first scan, and the decoder would read a length after them.
        0x00 | 0x01 | 0xD0..=0xD8 => Err(jpeg_corrupt(&format!(
            "marker FF{marker:02X} before the image data"
        ))),
        0xD9 => Err(jpeg_corrupt("it ends before its image data")),
        0xCC => Err(bad_upload(
            "the JPEG uses arithmetic coding (DAC), which is not supported; \
             accepted: baseline and progressive JPEG",
        )),
        0xDC => Err(jpeg_corrupt("a DNL marker before the image data")),
        _ => Ok(()),
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
pub(in crate::image_pipeline) fn jpeg_check_body(b: &[u8], header: &Header) -> Result<()> {
    let truncated = || {
        bad_upload(
            "the JPEG is truncated: its image data ends before the image is complete; upload \
             the whole file",
        )
    };
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

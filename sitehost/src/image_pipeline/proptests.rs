//! Property tests of the header checks: for generated and mutated files of the four
//! formats (random frame-header sequences, APPn/COM floods, PNG chunk floods and
//! compressed-chunk bombs, PNGs of every bit depth and colour type, rewritten dimensions,
//! truncation, stray bytes), the size the check reports is the size the decoder reports,
//! or the file is refused with a 400/413; never a panic or a 500. Accepted files make 8-bit
//! variants.

use std::io::Cursor;
use std::sync::OnceLock;

use proptest::prelude::*;

use super::hostile;
use super::*;

/// Small limits keep every accepted decode cheap; files declaring more are refused.
const LIMITS: ImageLimits = ImageLimits {
    max_pixels: 300_000,
    max_side: 2_000,
    max_frames: 10,
    max_animation_pixels: 1_000_000,
    webp_siblings_at_upload: true,
};

struct Bases {
    jpeg: Vec<u8>,
    jpeg_progressive: Vec<u8>,
    png: Vec<u8>,
    gif: Vec<u8>,
    webp_lossy: Vec<u8>,
    webp_lossless: Vec<u8>,
    webp_extended: Vec<u8>,
    webp_animated: Vec<u8>,
    png16_rgba: Vec<u8>,
    png16_grey: Vec<u8>,
    png_palette: Vec<u8>,
    png_1bit: Vec<u8>,
}

fn bases() -> &'static Bases {
    static BASES: OnceLock<Bases> = OnceLock::new();
    BASES.get_or_init(|| {
        let rgb = ::image::RgbImage::from_raw(24, 16, hostile::gradient_rgb(24, 16))
            .expect("gradient fits");
        let dynamic = ::image::DynamicImage::ImageRgb8(rgb);
        let encode = |format| {
            let mut out = Cursor::new(Vec::new());
            dynamic.write_to(&mut out, format).expect("encodes");
            out.into_inner()
        };
        let encode_16 = |image: ::image::DynamicImage| {
            let mut out = Cursor::new(Vec::new());
            image
                .write_to(&mut out, ::image::ImageFormat::Png)
                .expect("encodes");
            out.into_inner()
        };
        let lossy = hostile::webp_lossy(24, 16);
        // An extended still WebP: VP8X canvas 24x16 around the same VP8 chunk.
        let mut extended = b"RIFF\0\0\0\0WEBPVP8X\x0a\0\0\0\0\0\0\0".to_vec();
        extended.extend(&23u32.to_le_bytes()[..3]);
        extended.extend(&15u32.to_le_bytes()[..3]);
        extended.extend(&lossy[12..]);
        let size = (extended.len() - 8) as u32;
        extended[4..8].copy_from_slice(&size.to_le_bytes());
        Bases {
            jpeg: hostile::jpeg(24, 16, false),
            jpeg_progressive: hostile::jpeg(24, 16, true),
            png: encode(::image::ImageFormat::Png),
            gif: encode(::image::ImageFormat::Gif),
            webp_lossy: lossy,
            webp_lossless: encode(::image::ImageFormat::WebP),
            webp_extended: extended,
            webp_animated: hostile::webp_animation((64, 48), (64, 48), 64, 48),
            png16_rgba: encode_16(::image::DynamicImage::ImageRgba16(dynamic.to_rgba16())),
            png16_grey: encode_16(::image::DynamicImage::ImageLuma16(dynamic.to_luma16())),
            png_palette: hostile::png_zeros(
                24,
                16,
                4,
                3,
                &[hostile::png_chunk(b"PLTE", &[10, 20, 30, 200, 100, 0])],
            ),
            png_1bit: hostile::png_zeros(24, 16, 1, 0, &[]),
        }
    })
}

/// One edit of a file.
#[derive(Debug, Clone)]
enum Edit {
    /// A JPEG marker segment inserted after SOI (or before the first scan).
    Segment {
        before_scan: bool,
        marker: u8,
        payload: Vec<u8>,
    },
    /// A frame header (any SOF type) of the given size, inserted after SOI.
    Frame { marker: u8, width: u16, height: u16 },
    /// Many copies of one APPn or COM segment (extended XMP or a comment) after SOI.
    Flood { count: usize, extended_xmp: bool },
    /// A 16-bit value written at an offset (little- or big-endian): header sizes live here.
    Write16 { at: usize, value: u16, big: bool },
    /// One byte changed.
    Byte { at: usize, value: u8 },
    /// The file cut to a fraction (per mille) of its length.
    Truncate { keep: u16 },
    /// `count` PNG chunks of one kind after the IHDR; the compressed kinds (iCCP, zTXt,
    /// iTXt) inflate to `size` bytes, the others hold `size` bytes (at most 4 KB).
    PngChunks {
        kind: [u8; 4],
        count: usize,
        size: usize,
    },
    /// The IHDR's bit depth and colour type rewritten (with its CRC).
    PngDepth { depth: u8, color: u8 },
}

fn edit() -> impl Strategy<Value = Edit> {
    let sof = prop_oneof![0xC0u8..=0xC3, 0xC5u8..=0xCF];
    let app = prop_oneof![0xE0u8..=0xEF, Just(0xFEu8), Just(0xDDu8), any::<u8>()];
    prop_oneof![
        1 => (
            any::<bool>(),
            app,
            prop::collection::vec(any::<u8>(), 0..40)
        )
            .prop_map(|(before_scan, marker, payload)| Edit::Segment {
                before_scan,
                marker,
                payload
            }),
        // Mostly within the test limits, so the check does not refuse on size alone.
        3 => (sof, 0u16..700, 0u16..700).prop_map(|(marker, width, height)| Edit::Frame {
            marker,
            width,
            height
        }),
        1 => (0usize..1300, any::<bool>()).prop_map(|(count, extended_xmp)| Edit::Flood {
            count,
            extended_xmp
        }),
        1 => (0usize..64, any::<u16>(), any::<bool>()).prop_map(|(at, value, big)| Edit::Write16 {
            at,
            value,
            big
        }),
        1 => (0usize..64, 0u16..2500, any::<bool>()).prop_map(|(at, value, big)| Edit::Write16 {
            at,
            value,
            big
        }),
        1 => (0usize..400, any::<u8>()).prop_map(|(at, value)| Edit::Byte { at, value }),
        1 => (0u16..1000).prop_map(|keep| Edit::Truncate { keep }),
        2 => (
            prop::sample::select(vec![*b"iCCP", *b"zTXt", *b"iTXt", *b"tEXt", *b"eXIf", *b"prIv"]),
            prop_oneof![0usize..4, 990usize..1010],
            prop_oneof![1usize..5000, 1_040_000usize..1_100_000],
        )
            .prop_map(|(kind, count, size)| Edit::PngChunks { kind, count, size }),
        1 => (
            prop_oneof![prop::sample::select(vec![1u8, 2, 4, 8, 16]), any::<u8>()],
            prop_oneof![prop::sample::select(vec![0u8, 2, 3, 4, 6]), any::<u8>()],
        )
            .prop_map(|(depth, color)| Edit::PngDepth { depth, color }),
    ]
}

fn apply(bytes: &mut Vec<u8>, edit: &Edit) {
    let scan = hostile::jpeg_marker_at(bytes, 0xDA).unwrap_or(bytes.len().min(2));
    let after_soi = bytes.len().min(2);
    match edit {
        Edit::Segment {
            before_scan,
            marker,
            payload,
        } => {
            let at = if *before_scan { scan } else { after_soi };
            bytes.splice(at..at, hostile::jpeg_segment(*marker, payload));
        }
        Edit::Frame {
            marker,
            width,
            height,
        } => {
            let segment =
                hostile::jpeg_segment(*marker, &hostile::jpeg_frame_payload(*width, *height));
            bytes.splice(after_soi..after_soi, segment);
        }
        Edit::Flood {
            count,
            extended_xmp,
        } => {
            let segment = if *extended_xmp {
                hostile::jpeg_extended_xmp_segment()
            } else {
                hostile::jpeg_segment(0xFE, b"")
            };
            let flood: Vec<u8> = std::iter::repeat_n(segment, *count).flatten().collect();
            bytes.splice(after_soi..after_soi, flood);
        }
        Edit::Write16 { at, value, big } => {
            if let Some(slot) = bytes.get_mut(*at..*at + 2) {
                slot.copy_from_slice(&if *big {
                    value.to_be_bytes()
                } else {
                    value.to_le_bytes()
                });
            }
        }
        Edit::Byte { at, value } => {
            if let Some(byte) = bytes.get_mut(*at) {
                *byte = *value;
            }
        }
        Edit::Truncate { keep } => {
            bytes.truncate(bytes.len() * usize::from(*keep) / 1000);
        }
        Edit::PngChunks { kind, count, size } => {
            let chunk = match kind {
                b"iCCP" => hostile::png_iccp(*size),
                b"zTXt" => hostile::png_ztxt(*size),
                b"iTXt" => hostile::png_itxt(*size),
                _ => hostile::png_chunk(kind, &vec![7; size % 4096]),
            };
            let at = bytes.len().min(33);
            let flood: Vec<u8> = std::iter::repeat_n(chunk, *count).flatten().collect();
            bytes.splice(at..at, flood);
        }
        Edit::PngDepth { depth, color } => {
            if bytes.len() >= 33 && &bytes[12..16] == b"IHDR" {
                bytes[24] = *depth;
                bytes[25] = *color;
                let chunk = hostile::png_chunk(b"IHDR", &bytes[16..29]);
                bytes[8..33].copy_from_slice(&chunk);
            }
        }
    }
}

/// The size the decoder itself reports after parsing its headers, if it gets that far.
fn decoder_size(bytes: &[u8], format: ImageFormat) -> Option<(u32, u32)> {
    match format {
        ImageFormat::Jpeg => {
            let mut decoder =
                zune_jpeg::JpegDecoder::new(zune_jpeg::zune_core::bytestream::ZCursor::new(bytes));
            decoder.decode_headers().ok()?;
            let (w, h) = decoder.dimensions()?;
            Some((w as u32, h as u32))
        }
        _ => {
            let format = match format {
                ImageFormat::Png => ::image::ImageFormat::Png,
                ImageFormat::Gif => ::image::ImageFormat::Gif,
                _ => ::image::ImageFormat::WebP,
            };
            ::image::ImageReader::with_format(Cursor::new(bytes), format)
                .into_dimensions()
                .ok()
        }
    }
}

fn check_file(original: &[u8]) -> Result<(), TestCaseError> {
    let refused = |err: &ApiError| matches!(err.status(), 400 | 413);
    let checked = inspect(original, &LIMITS);
    // The checks and decoders read the file as repair.rs puts it right.
    let repaired = super::repair::repaired(original);
    let bytes = &*repaired;
    match &checked {
        // Where the check accepts a file and the decoder parses its headers, they report
        // the same size: the check never passes a size the decoder will not use.
        Ok(info) => {
            let stored = if resize::swaps_sides(info.orientation) {
                (info.height, info.width)
            } else {
                (info.width, info.height)
            };
            if let Some(decoder) = decoder_size(bytes, info.format) {
                prop_assert_eq!(decoder, stored, "check and decoder disagree");
            }
        }
        Err(err) => prop_assert!(refused(err), "inspect: {err:?}"),
    }
    let result = process(original, &LIMITS);
    match (&checked, &result) {
        (Ok(info), Ok(processed)) => {
            // Both in upright terms.
            prop_assert_eq!(
                (processed.width, processed.height),
                (info.width, info.height)
            );
            let stored = if resize::swaps_sides(info.orientation) {
                (info.height, info.width)
            } else {
                (info.width, info.height)
            };
            prop_assert_eq!(decoder_size(bytes, info.format), Some(stored));
            prop_assert!(u64::from(info.width) * u64::from(info.height) <= LIMITS.max_pixels);
            // The decode allocates by the image: its pixels (at most 4 bytes each, twice
            // for a GIF's frame buffer) and a 1 MiB allowance, whatever the metadata; and
            // by the file, up to three times: image-webp reads a VP8 partition whole
            // (`read_to_end`, whose buffer grows by doubling) and copies it into words
            // (memory_tests: a_lossy_webp_decode_is_bounded_by_its_pixels_and_its_file).
            // The file is bounded by the upload limits.
            let header = sniff::read_header(bytes, &LIMITS).expect("inspected");
            let (decoded, peak) = super::tests::memory::peak(|| {
                codec::decode(bytes, &header, &LIMITS, (header.width, header.height))
            });
            prop_assert!(decoded.is_ok());
            let budget = u64::from(info.width) * u64::from(info.height) * 8
                + (1 << 20)
                + 3 * bytes.len() as u64;
            prop_assert!(peak as u64 <= budget, "decoding took {peak} bytes");
            // Whatever the source's bit depth, the variants have 8 bits a channel.
            let thumbnail = processed.variants.last().expect("five variants");
            let decoded = ::image::load_from_memory(&thumbnail.bytes).expect("variant decodes");
            prop_assert!(
                matches!(
                    decoded.color(),
                    ::image::ColorType::L8
                        | ::image::ColorType::La8
                        | ::image::ColorType::Rgb8
                        | ::image::ColorType::Rgba8
                ),
                "{:?}",
                decoded.color()
            );
        }
        (Err(_), Ok(processed)) => {
            prop_assert!(
                false,
                "inspect refused what process accepted: {processed:?}"
            )
        }
        (_, Err(err)) => prop_assert!(refused(err), "process: {err:?}"),
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 300,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn checked_size_is_decoded_size_or_refused(
        base in 0usize..16,
        edits in prop::collection::vec(edit(), 0..4),
    ) {
        let b = bases();
        // JPEG, the format with the most header structure, twice as often.
        let mut bytes = [
            &b.jpeg,
            &b.jpeg_progressive,
            &b.jpeg,
            &b.jpeg_progressive,
            &b.jpeg,
            &b.jpeg_progressive,
            &b.png,
            &b.gif,
            &b.webp_lossy,
            &b.webp_lossless,
            &b.webp_extended,
            &b.webp_animated,
            &b.png16_rgba,
            &b.png16_grey,
            &b.png_palette,
            &b.png_1bit,
        ][base]
            .clone();
        for edit in &edits {
            apply(&mut bytes, edit);
        }
        check_file(&bytes)?;
    }
}

/// Real profiles for the colour proptest: moxcms's Display P3, Adobe RGB and ProPhoto (RGB
/// matrix-shaper profiles with parametric curves) and a grey one.
fn profiles() -> &'static [Vec<u8>; 4] {
    static PROFILES: OnceLock<[Vec<u8>; 4]> = OnceLock::new();
    PROFILES.get_or_init(|| {
        [
            moxcms::ColorProfile::new_display_p3(),
            moxcms::ColorProfile::new_adobe_rgb(),
            moxcms::ColorProfile::new_pro_photo_rgb(),
            moxcms::ColorProfile::new_gray_with_gamma(2.2),
        ]
        .map(|p| p.encode().expect("profile serialises"))
    })
}

/// `icc` in one APP2 segment of the 24x16 base JPEG.
fn jpeg_with_profile(icc: &[u8]) -> Vec<u8> {
    let jpeg = &bases().jpeg;
    let mut segment = b"ICC_PROFILE\0\x01\x01".to_vec();
    segment.extend(icc);
    let mut out = jpeg[..2].to_vec();
    out.extend([0xFF, 0xE2]);
    out.extend(((segment.len() + 2) as u16).to_be_bytes());
    out.extend(segment);
    out.extend(&jpeg[2..]);
    out
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 200,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// A damaged profile (bytes overwritten, the file cut short) never fails the upload
    /// nor takes long: it is converted from, or ignored.
    #[test]
    fn damaged_profiles_never_fail_the_upload(
        which in 0usize..4,
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        keep in prop::option::of(any::<prop::sample::Index>()),
    ) {
        let mut icc = profiles()[which].clone();
        for (at, value) in &edits {
            let at = at.index(icc.len());
            icc[at] = *value;
        }
        if let Some(keep) = keep {
            icc.truncate(keep.index(icc.len()));
        }
        let bytes = jpeg_with_profile(&icc);
        let start = std::time::Instant::now();
        let processed = process(&bytes, &LIMITS);
        prop_assert!(processed.is_ok(), "{processed:?}");
        prop_assert!(start.elapsed() < std::time::Duration::from_secs(1));
    }
}

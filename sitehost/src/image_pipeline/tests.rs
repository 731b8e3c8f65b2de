//! What the pipeline's tests share: images generated here (no files from disk), their
//! encoders and checks, and a counting allocator. The tests are in `*_tests.rs` beside it,
//! one subject each.

use std::io::Cursor;

use ::image::codecs::gif::GifEncoder;
use ::image::{DynamicImage, Frame, GenericImageView, Rgb, RgbImage, Rgba, RgbaImage};

use super::*;

pub(super) const RED: [u8; 3] = [255, 0, 0];
pub(super) const GREEN: [u8; 3] = [0, 255, 0];
pub(super) const BLUE: [u8; 3] = [0, 0, 255];

/// A smooth colour gradient (compresses like a photo, not like noise).
pub(super) fn gradient(width: u32, height: u32) -> RgbImage {
    RgbImage::from_fn(width, height, |x, y| {
        Rgb([
            (x * 255 / width.max(1)) as u8,
            (y * 255 / height.max(1)) as u8,
            ((x + y) % 256) as u8,
        ])
    })
}

pub(super) fn encode_with_image(image: &DynamicImage, format: ::image::ImageFormat) -> Vec<u8> {
    let mut out = Cursor::new(Vec::new());
    image
        .write_to(&mut out, format)
        .expect("test image encodes");
    out.into_inner()
}

pub(super) fn png(image: &DynamicImage) -> Vec<u8> {
    encode_with_image(image, ::image::ImageFormat::Png)
}

/// 4:4:4 at high quality so colours survive at sharp edges.
pub(super) fn jpeg(image: &RgbImage) -> Vec<u8> {
    let mut out = Vec::new();
    let mut encoder = jpeg_encoder::Encoder::new(&mut out, 95);
    encoder.set_sampling_factor(jpeg_encoder::SamplingFactor::F_1_1);
    encoder
        .encode(
            image.as_raw(),
            image.width() as u16,
            image.height() as u16,
            jpeg_encoder::ColorType::Rgb,
        )
        .expect("test jpeg encodes");
    out
}

pub(super) fn webp_lossy(image: &RgbImage) -> Vec<u8> {
    webp::Encoder::from_rgb(image.as_raw(), image.width(), image.height())
        .encode_simple(false, 90.0)
        .expect("test webp encodes")
        .to_vec()
}

pub(super) fn gif_frames(frames: Vec<RgbaImage>) -> Vec<u8> {
    let mut out = Vec::new();
    {
        let mut encoder = GifEncoder::new(&mut out);
        encoder
            .encode_frames(frames.into_iter().map(Frame::new))
            .expect("test gif encodes");
    }
    out
}

pub(super) fn message(err: &ApiError) -> String {
    match err {
        ApiError::Validation(fields) => fields
            .get("upload")
            .and_then(|m| m.first())
            .cloned()
            .unwrap_or_else(|| panic!("no upload message in {fields:?}")),
        ApiError::TooLarge(m) => m.clone(),
        other => panic!("unexpected error {other:?}"),
    }
}

pub(super) fn decode(bytes: &[u8]) -> DynamicImage {
    ::image::load_from_memory(bytes).expect("variant decodes")
}

pub(super) fn close(actual: [u8; 3], expected: [u8; 3], tolerance: i32) -> bool {
    actual
        .iter()
        .zip(expected)
        .all(|(&a, e)| (i32::from(a) - i32::from(e)).abs() <= tolerance)
}

pub(super) fn rgb_at(image: &DynamicImage, x: u32, y: u32) -> [u8; 3] {
    let p = image.get_pixel(x, y).0;
    [p[0], p[1], p[2]]
}

pub(super) fn sizes(processed: &Processed) -> Vec<(u32, u32)> {
    processed
        .variants
        .iter()
        .map(|v| (v.width, v.height))
        .collect()
}

/// 400x300, the left half fully transparent (red under it), the right half opaque green.
pub(super) fn half_transparent() -> RgbaImage {
    RgbaImage::from_fn(400, 300, |x, _| {
        if x < 200 {
            Rgba([255, 0, 0, 0])
        } else {
            Rgba([0, 255, 0, 255])
        }
    })
}

/// An APP1 segment with an EXIF IFD0 holding only the Orientation tag.
pub(super) fn exif_app1(orientation: u16, little_endian: bool) -> Vec<u8> {
    let u16b = |v: u16| {
        if little_endian {
            v.to_le_bytes()
        } else {
            v.to_be_bytes()
        }
    };
    let u32b = |v: u32| {
        if little_endian {
            v.to_le_bytes()
        } else {
            v.to_be_bytes()
        }
    };
    let mut tiff = if little_endian {
        b"II*\0".to_vec()
    } else {
        b"MM\0*".to_vec()
    };
    tiff.extend(u32b(8)); // IFD0 offset
    tiff.extend(u16b(1)); // one entry
    tiff.extend(u16b(0x0112)); // Orientation
    tiff.extend(u16b(3)); // SHORT
    tiff.extend(u32b(1)); // count
    tiff.extend(u16b(orientation));
    tiff.extend([0, 0]);
    tiff.extend(u32b(0)); // no next IFD
    let mut segment = vec![0xFF, 0xE1];
    segment.extend(((2 + 6 + tiff.len()) as u16).to_be_bytes());
    segment.extend(b"Exif\0\0");
    segment.extend(tiff);
    segment
}

/// A PNG chunk with its CRC (png checks CRCs).
pub(super) fn png_chunk(kind: &[u8; 4], data: &[u8]) -> Vec<u8> {
    let mut crc = 0xFFFF_FFFFu32;
    for &byte in kind.iter().chain(data) {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    let mut chunk = (data.len() as u32).to_be_bytes().to_vec();
    chunk.extend(kind);
    chunk.extend(data);
    chunk.extend((!crc).to_be_bytes());
    chunk
}

pub(super) fn assert_refused(bytes: &[u8], expected: &str) -> ApiError {
    let err = process(bytes, &ImageLimits::default()).expect_err(expected);
    assert!(
        matches!(err, ApiError::Validation(_) | ApiError::TooLarge(_)),
        "{expected}: {err:?}"
    );
    assert!(
        message(&err).contains(expected),
        "{} !~ {expected}",
        message(&err)
    );
    err
}

/// Peak bytes allocated by the current thread while a closure runs: a counting global
/// allocator for this test binary, which counts only on threads that are measuring (the
/// decoders run on the calling thread).
pub(super) mod memory {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;

    struct Counting;

    thread_local! {
        static MEASURING: Cell<bool> = const { Cell::new(false) };
        static NOW: Cell<isize> = const { Cell::new(0) };
        static PEAK: Cell<isize> = const { Cell::new(0) };
    }

    fn count(delta: isize) {
        // `try_with`: never panic inside the allocator (thread teardown).
        let _ = MEASURING.try_with(|measuring| {
            if measuring.get() {
                let now = NOW.with(|n| {
                    n.set(n.get() + delta);
                    n.get()
                });
                PEAK.with(|p| p.set(p.get().max(now)));
            }
        });
    }

    // SAFETY: every call is passed on to `System` unchanged; only sizes are counted.
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            let ptr = unsafe { System.alloc(layout) };
            if !ptr.is_null() {
                count(layout.size() as isize);
            }
            ptr
        }

        unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
            let ptr = unsafe { System.alloc_zeroed(layout) };
            if !ptr.is_null() {
                count(layout.size() as isize);
            }
            ptr
        }

        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            unsafe { System.dealloc(ptr, layout) };
            count(-(layout.size() as isize));
        }

        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            let new = unsafe { System.realloc(ptr, layout, new_size) };
            if !new.is_null() {
                count(new_size as isize - layout.size() as isize);
            }
            new
        }
    }

    #[global_allocator]
    static COUNTING: Counting = Counting;

    /// Runs `f` and returns its result with the most bytes this thread had allocated (and
    /// not freed) at any point during it.
    pub fn peak<T>(f: impl FnOnce() -> T) -> (T, usize) {
        NOW.with(|n| n.set(0));
        PEAK.with(|p| p.set(0));
        MEASURING.with(|m| m.set(true));
        let result = f();
        MEASURING.with(|m| m.set(false));
        (result, PEAK.with(|p| p.get()).max(0) as usize)
    }
}

/// `chunks` inserted right after the IHDR of `png` (8 signature + 25 IHDR bytes).
pub(super) fn with_chunks(mut png: Vec<u8>, chunks: &[Vec<u8>]) -> Vec<u8> {
    let extra: Vec<u8> = chunks.iter().flatten().copied().collect();
    png.splice(33..33, extra);
    png
}

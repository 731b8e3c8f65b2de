//! Builders of hostile images (and a legitimate large one) for the regression tests and
//! `examples/bench_hostile.rs`, which includes this file by path: it is not part of the
//! library. Every file here is built from scratch, none is read from disk.

#![allow(dead_code)]

/// A smooth colour gradient as interleaved RGB (compresses like a photo, not like noise).
pub fn gradient_rgb(width: u32, height: u32) -> Vec<u8> {
    let mut data = Vec::with_capacity(width as usize * height as usize * 3);
    for y in 0..height {
        for x in 0..width {
            data.extend([
                (x * 255 / width.max(1)) as u8,
                (y * 255 / height.max(1)) as u8,
                ((x + y) % 256) as u8,
            ]);
        }
    }
    data
}

/// A real JPEG (quality 90, 4:2:0), baseline or progressive.
pub fn jpeg(width: u16, height: u16, progressive: bool) -> Vec<u8> {
    let mut out = Vec::new();
    let mut encoder = jpeg_encoder::Encoder::new(&mut out, 90);
    encoder.set_progressive(progressive);
    encoder
        .encode(
            &gradient_rgb(u32::from(width), u32::from(height)),
            width,
            height,
            jpeg_encoder::ColorType::Rgb,
        )
        .expect("test jpeg encodes");
    out
}

/// Offset of the first marker `FF marker` in a JPEG written by jpeg-encoder (its headers
/// hold no such byte pair before the frame header).
pub fn jpeg_marker_at(bytes: &[u8], marker: u8) -> Option<usize> {
    bytes.windows(2).position(|w| w == [0xFF, marker])
}

/// One marker segment: FF, marker, big-endian length (including itself), payload.
pub fn jpeg_segment(marker: u8, payload: &[u8]) -> Vec<u8> {
    let mut segment = vec![0xFF, marker];
    segment.extend(((payload.len() + 2) as u16).to_be_bytes());
    segment.extend(payload);
    segment
}

/// A one-component frame header payload (SOFn) of the given size.
pub fn jpeg_frame_payload(width: u16, height: u16) -> Vec<u8> {
    let mut payload = vec![8];
    payload.extend(height.to_be_bytes());
    payload.extend(width.to_be_bytes());
    payload.extend([1, 1, 0x11, 0]);
    payload
}

/// The first file: a lossless (SOF3) frame header saying 1x1, which zune-jpeg
/// skips, then the real frame header (SOF0, or SOF2 if progressive) of a 16x16 JPEG
/// rewritten to say `width`x`height`. The old check took 1x1 from the SOF3; the decoder
/// allocated and decoded the full declared size.
pub fn jpeg_sof3_then_large_frame(width: u16, height: u16, progressive: bool) -> Vec<u8> {
    let mut bytes = jpeg(16, 16, progressive);
    let sof = jpeg_marker_at(&bytes, if progressive { 0xC2 } else { 0xC0 })
        .expect("jpeg-encoder writes a frame header");
    bytes[sof + 5..sof + 7].copy_from_slice(&height.to_be_bytes());
    bytes[sof + 7..sof + 9].copy_from_slice(&width.to_be_bytes());
    bytes.splice(sof..sof, jpeg_segment(0xC3, &jpeg_frame_payload(1, 1)));
    bytes
}

/// An empty extended-XMP APP1 segment: namespace, GUID, total size 1, offset 0, no data.
/// It never completes, so zune-jpeg keeps it and re-examines all it holds after every
/// later marker.
pub fn jpeg_extended_xmp_segment() -> Vec<u8> {
    let mut payload = b"http://ns.adobe.com/xmp/extension/\0".to_vec();
    payload.extend(b"0123456789ABCDEF0123456789ABCDEF");
    payload.extend(1u32.to_be_bytes());
    payload.extend(0u32.to_be_bytes());
    jpeg_segment(0xE1, &payload)
}

/// The second file: a 32x32 JPEG behind `count` empty extended-XMP segments
/// (40,000 make 3.2 MB; 330,000 fill the 25 MiB fetch limit).
pub fn jpeg_extended_xmp_flood(count: usize) -> Vec<u8> {
    let image = jpeg(32, 32, false);
    let segment = jpeg_extended_xmp_segment();
    let mut bytes = Vec::with_capacity(image.len() + count * segment.len());
    bytes.extend(&image[..2]);
    for _ in 0..count {
        bytes.extend(&segment);
    }
    bytes.extend(&image[2..]);
    bytes
}

/// A GIF whose logical screen is 1x1 and whose only frame is `width`x`height` (one
/// colour): `image` allocates for the frame, then composes it onto the 1x1 screen.
pub fn gif_frame_larger_than_screen(width: u32, height: u32) -> Vec<u8> {
    use ::image::codecs::gif::GifEncoder;
    use ::image::{Frame, Rgba, RgbaImage};
    let frame = RgbaImage::from_pixel(width, height, Rgba([200, 30, 30, 255]));
    let mut bytes = Vec::new();
    GifEncoder::new(&mut bytes)
        .encode_frame(Frame::new(frame))
        .expect("test gif encodes");
    // Logical screen width and height (little-endian) follow the 6-byte signature.
    bytes[6..10].copy_from_slice(&[1, 0, 1, 0]);
    bytes
}

/// A simple lossy WebP (RIFF, WEBP, one VP8 chunk).
pub fn webp_lossy(width: u32, height: u32) -> Vec<u8> {
    webp::Encoder::from_rgb(&gradient_rgb(width, height), width, height)
        .encode_simple(false, 80.0)
        .expect("test webp encodes")
        .to_vec()
}

fn riff_chunk(kind: &[u8; 4], data: &[u8]) -> Vec<u8> {
    let mut chunk = kind.to_vec();
    chunk.extend((data.len() as u32).to_le_bytes());
    chunk.extend(data);
    if data.len() % 2 == 1 {
        chunk.push(0);
    }
    chunk
}

fn riff_webp(chunks: &[Vec<u8>]) -> Vec<u8> {
    let body: Vec<u8> = b"WEBP"
        .iter()
        .copied()
        .chain(chunks.iter().flatten().copied())
        .collect();
    let mut file = b"RIFF".to_vec();
    file.extend((body.len() as u32).to_le_bytes());
    file.extend(body);
    file
}

fn vp8x_chunk(flags: u8, width: u32, height: u32) -> Vec<u8> {
    let mut data = vec![flags, 0, 0, 0];
    data.extend(&(width - 1).to_le_bytes()[..3]);
    data.extend(&(height - 1).to_le_bytes()[..3]);
    riff_chunk(b"VP8X", &data)
}

/// The VP8 chunk (header and data) of a simple lossy WebP, with its bitstream's declared
/// size rewritten if `declare` is given (the data then no longer matches it).
fn vp8_chunk(simple: &[u8], declare: Option<(u16, u16)>) -> Vec<u8> {
    let mut chunk = simple[12..].to_vec();
    if let Some((width, height)) = declare {
        chunk[8 + 6..8 + 8].copy_from_slice(&width.to_le_bytes());
        chunk[8 + 8..8 + 10].copy_from_slice(&height.to_le_bytes());
    }
    chunk
}

/// An extended WebP whose canvas is 1x1 and whose (still) image data is a VP8 bitstream
/// declaring `width`x`height` (a real 64x48 image if that is what it declares): image-webp
/// decodes the bitstream at its own size before comparing.
pub fn webp_canvas_smaller_than_image(width: u16, height: u16) -> Vec<u8> {
    let simple = webp_lossy(64, 48);
    let declare = ((width, height) != (64, 48)).then_some((width, height));
    riff_webp(&[vp8x_chunk(0, 1, 1), vp8_chunk(&simple, declare)])
}

/// An animated WebP: canvas `canvas`, one `frame`-sized frame at 0,0 whose VP8 bitstream
/// (a real 64x48 one) declares `width`x`height`.
pub fn webp_animation(canvas: (u32, u32), frame: (u32, u32), width: u16, height: u16) -> Vec<u8> {
    let simple = webp_lossy(64, 48);
    let declare = ((width, height) != (64, 48)).then_some((width, height));
    let mut anmf = Vec::new();
    anmf.extend([0, 0, 0, 0, 0, 0]); // x/2, y/2
    anmf.extend(&(frame.0 - 1).to_le_bytes()[..3]);
    anmf.extend(&(frame.1 - 1).to_le_bytes()[..3]);
    anmf.extend([100, 0, 0, 0]); // duration, flags
    anmf.extend(vp8_chunk(&simple, declare));
    let mut anim = vec![0, 0, 0, 0];
    anim.extend(0u16.to_le_bytes());
    riff_webp(&[
        vp8x_chunk(0x02, canvas.0, canvas.1),
        riff_chunk(b"ANIM", &anim),
        riff_chunk(b"ANMF", &anmf),
    ])
}

/// A 32x32 progressive JPEG with `count` comment segments after its first scan, which the
/// decoder parses between scans (4 bytes each: 6.5 million fill the 25 MiB fetch limit).
pub fn jpeg_comments_between_scans(count: usize) -> Vec<u8> {
    let mut bytes = jpeg(32, 32, true);
    let first_scan = jpeg_marker_at(&bytes, 0xDA).expect("a scan");
    // The second scan header: the comments go just before it.
    let second_scan = first_scan
        + 2
        + jpeg_marker_at(&bytes[first_scan + 2..], 0xDA).expect("progressive: several scans");
    let segment = jpeg_segment(0xFE, b"");
    let flood: Vec<u8> = std::iter::repeat_n(segment, count).flatten().collect();
    bytes.splice(second_scan..second_scan, flood);
    bytes
}

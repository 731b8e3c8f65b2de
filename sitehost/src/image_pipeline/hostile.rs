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

/// A simple lossy `width`x`height` WebP whose VP8 chunk carries `padding` zero bytes past its
/// partitions: the last partition runs to the chunk's end, so a decoder reads them all.
pub fn webp_lossy_padded(width: u32, height: u32, padding: usize) -> Vec<u8> {
    let simple = webp_lossy(width, height);
    let mut data = vp8_chunk(&simple, None)[8..].to_vec();
    data.resize(data.len() + padding, 0);
    riff_webp(&[riff_chunk(b"VP8 ", &data)])
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

/// A 32x32 progressive JPEG whose last scan (its header and data) is repeated until the
/// file has `count` scans: each is a pass over every block for the decoder, however small.
pub fn jpeg_scan_flood(count: usize) -> Vec<u8> {
    let mut bytes = jpeg(32, 32, true);
    let mut last_scan = jpeg_marker_at(&bytes, 0xDA).expect("a scan");
    let mut scans = 1;
    while let Some(next) = jpeg_marker_at(&bytes[last_scan + 2..], 0xDA) {
        last_scan += 2 + next;
        scans += 1;
    }
    let end = bytes.len() - 2;
    let scan = bytes[last_scan..end].to_vec();
    let flood: Vec<u8> = std::iter::repeat_n(scan, count.saturating_sub(scans))
        .flatten()
        .collect();
    bytes.splice(end..end, flood);
    bytes
}

/// The CRC-32 of PNG chunks (table-driven: bomb chunks are hundreds of KB).
fn crc32(parts: &[&[u8]]) -> u32 {
    let mut table = [0u32; 256];
    for (n, slot) in table.iter_mut().enumerate() {
        let mut c = n as u32;
        for _ in 0..8 {
            c = if c & 1 != 0 {
                0xEDB8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
        }
        *slot = c;
    }
    let mut crc = 0xFFFF_FFFFu32;
    for &byte in parts.iter().copied().flatten() {
        crc = table[((crc ^ u32::from(byte)) & 0xFF) as usize] ^ (crc >> 8);
    }
    !crc
}

/// One PNG chunk: length, type, data, CRC (the decoder checks CRCs).
pub fn png_chunk(kind: &[u8; 4], data: &[u8]) -> Vec<u8> {
    let mut chunk = (data.len() as u32).to_be_bytes().to_vec();
    chunk.extend(kind);
    chunk.extend(data);
    chunk.extend(crc32(&[kind, data]).to_be_bytes());
    chunk
}

/// Deflate bits, least significant first; Huffman codes most significant bit first.
struct Bits {
    out: Vec<u8>,
    len: usize,
}

impl Bits {
    fn put(&mut self, value: u32, count: usize) {
        for i in 0..count {
            if self.len.is_multiple_of(8) {
                self.out.push(0);
            }
            if (value >> i) & 1 == 1 {
                *self.out.last_mut().expect("pushed") |= 1 << (self.len % 8);
            }
            self.len += 1;
        }
    }

    fn code(&mut self, code: u32, length: usize) {
        for i in (0..length).rev() {
            self.put((code >> i) & 1, 1);
        }
    }

    /// `count` zero bits at once.
    fn zeros(&mut self, count: usize) {
        self.len += count;
        self.out.resize(self.len.div_ceil(8), 0);
    }
}

/// A zlib stream that inflates to `len` (at least 1) zero bytes at deflate's best ratio,
/// about 1032:1: one dynamic-Huffman block whose length-258 and distance-1 codes are one
/// bit each, so every 258 bytes cost 2 bits (390 MB in 378 KB). Written by hand, in
/// milliseconds, instead of compressing the zeros.
pub fn zlib_zeros(len: usize) -> Vec<u8> {
    assert!(len >= 1, "at least one byte");
    let mut bits = Bits {
        out: vec![0x78, 0xDA],
        len: 16,
    };
    bits.put(1, 1); // the final block
    bits.put(2, 2); // dynamic Huffman codes
    bits.put(286 - 257, 5); // literal/length codes
    bits.put(2 - 1, 5); // distance codes
    bits.put(18 - 4, 4); // code length codes, in the order below
                         // Code length code lengths, in the order 16 17 18 0 8 7 9 6 10 5 11 4 12 3 13 2 14 1:
                         // 18 (a run of zeros) has 1 bit ("0"), 1 and 2 have 2 bits ("10", "11").
    for length in [0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 2] {
        bits.put(length, 3);
    }
    let (one, two) = ((0b10, 2), (0b11, 2));
    let zeros = |bits: &mut Bits, run: u32| {
        bits.code(0, 1);
        bits.put(run - 11, 7);
    };
    // Literal/length code lengths: 0 has 2 bits ("10"), end of block 2 ("11"), 285 (length
    // 258) 1 bit ("0"); all others none.
    bits.code(two.0, two.1); // 0
    zeros(&mut bits, 138); // 1..=138
    zeros(&mut bits, 117); // 139..=255
    bits.code(two.0, two.1); // 256
    zeros(&mut bits, 28); // 257..=284
    bits.code(one.0, one.1); // 285
                             // Distance code lengths: codes 0 (distance 1, "0") and 1 ("1"), one bit each.
    bits.code(one.0, one.1);
    bits.code(one.0, one.1);
    // The data: a literal zero, then copies of the previous 258 bytes, then literals.
    let literal = |bits: &mut Bits| bits.code(0b10, 2);
    literal(&mut bits);
    let copies = (len - 1) / 258;
    bits.zeros(2 * copies);
    for _ in 0..(len - 1) % 258 {
        literal(&mut bits);
    }
    bits.code(0b11, 2); // end of block
    let mut out = bits.out;
    // Adler-32 of zeros: a stays 1, b counts the bytes.
    out.extend(((((len % 65521) as u32) << 16) | 1).to_be_bytes());
    out
}

/// A PNG of zero-valued pixels (transparent black where there is alpha) with the given
/// chunks between IHDR and IDAT: one IDAT at deflate's best ratio, so the file is tiny
/// whatever the size. `color_type` as in IHDR (0 grey, 2 RGB, 4 grey+alpha, 6 RGBA).
pub fn png_zeros(
    width: u32,
    height: u32,
    bit_depth: u8,
    color_type: u8,
    chunks: &[Vec<u8>],
) -> Vec<u8> {
    let channels = match color_type {
        0 | 3 => 1,
        2 => 3,
        4 => 2,
        _ => 4,
    };
    let row = (width as usize * channels * usize::from(bit_depth)).div_ceil(8);
    let mut ihdr = width.to_be_bytes().to_vec();
    ihdr.extend(height.to_be_bytes());
    ihdr.extend([bit_depth, color_type, 0, 0, 0]);
    let mut bytes = b"\x89PNG\r\n\x1a\n".to_vec();
    bytes.extend(png_chunk(b"IHDR", &ihdr));
    for chunk in chunks {
        bytes.extend(chunk);
    }
    bytes.extend(png_chunk(b"IDAT", &zlib_zeros(height as usize * (1 + row))));
    bytes.extend(png_chunk(b"IEND", b""));
    bytes
}

/// An iCCP chunk whose profile inflates to `inflated` zero bytes.
pub fn png_iccp(inflated: usize) -> Vec<u8> {
    let mut data = b"ICC profile\0\0".to_vec();
    data.extend(zlib_zeros(inflated));
    png_chunk(b"iCCP", &data)
}

/// A zTXt chunk whose text inflates to `inflated` bytes.
pub fn png_ztxt(inflated: usize) -> Vec<u8> {
    let mut data = b"Comment\0\0".to_vec();
    data.extend(zlib_zeros(inflated));
    png_chunk(b"zTXt", &data)
}

/// A compressed iTXt chunk whose text inflates to `inflated` bytes.
pub fn png_itxt(inflated: usize) -> Vec<u8> {
    // Keyword, compression flag and method, empty language tag and translated keyword.
    let mut data = b"XML:com.adobe.xmp\0\x01\x00\0\0".to_vec();
    data.extend(zlib_zeros(inflated));
    png_chunk(b"iTXt", &data)
}

/// The first PNG: 1x1, with an iCCP profile that inflates to `inflated` bytes
/// (390 MB in a 379 KB file).
pub fn png_iccp_bomb(inflated: usize) -> Vec<u8> {
    png_zeros(1, 1, 8, 2, &[png_iccp(inflated)])
}

/// `count` copies of one chunk between the IHDR and the image data of a 1x1 PNG.
pub fn png_chunk_flood(kind: &[u8; 4], data: &[u8], count: usize) -> Vec<u8> {
    let chunk = png_chunk(kind, data);
    png_zeros(1, 1, 8, 2, &vec![chunk; count])
}

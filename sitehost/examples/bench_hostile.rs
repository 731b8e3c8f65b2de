//! Hostile-image benchmark: what each hostile file costs the upload pipeline, next to
//! legitimate 50-megapixel images (a JPEG photo and an 8-bit RGBA PNG) and an animation
//! at the frame-pixel limit. `scripts/bench-hostile` runs it (see
//! docs/image-pipeline-bench.md):
//!
//!   bench_hostile make DIR     # writes the files into DIR
//!   bench_hostile run FILE     # runs `pipeline::process` on FILE with the default limits
//!                              # and prints: file, result, wall ms, peak RSS MiB
//!
//! Each `run` is its own process, so its peak RSS is that file's alone.

#[path = "../src/image_pipeline/hostile.rs"]
mod hostile;
#[path = "../src/image_pipeline/hostile_gif.rs"]
mod hostile_gif;

use std::path::Path;
use std::time::Instant;

use sitehost::config::ImageLimits;
use sitehost::image_pipeline::process;

// Reads better whole: a table of the hostile files, one row each.
fn make(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let files: Vec<(&str, Vec<u8>)> = vec![
        // Legitimate: 8660x5773 = 49.99 MP, just under the 50 MP limit.
        ("legit-50mp-8660x5773.jpg", hostile::jpeg(8660, 5773, false)),
        // The 8-bit counterpart of the 16-bit file below: what any 50 MP RGBA PNG costs.
        (
            "legit-50mp-8660x5773-rgba8.png",
            hostile::png_zeros(8660, 5773, 8, 6, &[]),
        ),
        (
            "sof3-1x1-then-sof0-16384x16384.jpg",
            hostile::jpeg_sof3_then_large_frame(16384, 16384, false),
        ),
        (
            "sof3-1x1-then-sof2-16384x16384.jpg",
            hostile::jpeg_sof3_then_large_frame(16384, 16384, true),
        ),
        (
            "sof3-1x1-then-sof2-8660x5773.jpg",
            hostile::jpeg_sof3_then_large_frame(8660, 5773, true),
        ),
        // Just under the segment limit: accepted, and the decoder's quadratic header
        // parse is bounded by 1000^2 cheap steps.
        (
            "extended-xmp-900.jpg",
            hostile::jpeg_extended_xmp_flood(900),
        ),
        (
            "extended-xmp-40000.jpg",
            hostile::jpeg_extended_xmp_flood(40_000),
        ),
        (
            "extended-xmp-331000-25mib.jpg",
            hostile::jpeg_extended_xmp_flood(331_000),
        ),
        (
            "comments-between-scans-6500000-25mib.jpg",
            hostile::jpeg_comments_between_scans(6_500_000),
        ),
        (
            "gif-screen-1x1-frame-4096x4096.gif",
            hostile::gif_frame_larger_than_screen(4096, 4096),
        ),
        (
            "webp-canvas-1x1-vp8-16383x16383.webp",
            hostile::webp_canvas_smaller_than_image(16383, 16383),
        ),
        (
            "webp-animation-frame-1x1-vp8-16383x16383.webp",
            hostile::webp_animation((1, 1), (1, 1), 16383, 16383),
        ),
        // An animation at the frame-pixel limit (50 frames of 1000x1000, every pixel
        // changing each frame): the legitimate worst case the GIF bombs compare with.
        (
            "legit-anim-1000x1000-50-frames.gif",
            hostile_gif::gif_video(1000, 1000, 50),
        ),
        // GIF bombs: a 48 MP screen under 5,000 one-pixel frames (145 KB), the same
        // screen with 1,000 frames, and 25 MiB of one-pixel frames (the fetch limit).
        (
            "gif-bomb-8000x6000-5000-frames.gif",
            hostile_gif::gif_bomb(8000, 6000, 5_000),
        ),
        (
            "gif-bomb-8000x6000-1000-frames.gif",
            hostile_gif::gif_bomb(8000, 6000, 1_000),
        ),
        (
            "gif-bomb-1x1-900000-frames-25mib.gif",
            hostile_gif::gif_bomb(1, 1, 900_000),
        ),
        // An iCCP profile inflating to 390 MB in a 1x1 PNG, a 16-bit RGBA 50 MP PNG, and
        // both at once.
        (
            "png-1x1-iccp-390mb.png",
            hostile::png_iccp_bomb(390_000_000),
        ),
        (
            "png-16bit-rgba-8660x5773.png",
            hostile::png_zeros(8660, 5773, 16, 6, &[]),
        ),
        (
            "png-16bit-rgba-8660x5773-iccp-390mb.png",
            hostile::png_zeros(8660, 5773, 16, 6, &[hostile::png_iccp(390_000_000)]),
        ),
        (
            "png-1x1-ztxt-390mb.png",
            hostile::png_zeros(1, 1, 8, 2, &[hostile::png_ztxt(390_000_000)]),
        ),
        // 25 MiB of empty tEXt chunks (14 bytes each) before the image data.
        (
            "png-1x1-text-flood-1870000-25mib.png",
            hostile::png_chunk_flood(b"tEXt", b"k\0", 1_870_000),
        ),
    ];
    for (name, bytes) in files {
        std::fs::write(dir.join(name), bytes)?;
    }
    Ok(())
}

/// Peak resident set size of this process so far, in KiB (Linux).
fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

fn run(file: &Path) -> std::io::Result<()> {
    let bytes = std::fs::read(file)?;
    let start = Instant::now();
    let result = process(&bytes, &ImageLimits::default());
    let elapsed = start.elapsed();
    let outcome = match result {
        Ok(p) => format!("decoded {}x{}", p.width, p.height),
        Err(e) => format!("{} {}", e.status(), e),
    };
    let name = file.file_name().unwrap_or_default().to_string_lossy();
    println!(
        "{name}\t{} bytes\t{:.2} ms\t{:.0} MiB\t{outcome}",
        bytes.len(),
        elapsed.as_secs_f64() * 1000.0,
        peak_rss_kib() as f64 / 1024.0
    );
    Ok(())
}

fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [command, dir] if command == "make" => make(Path::new(dir)),
        [command, file] if command == "run" => run(Path::new(file)),
        _ => {
            eprintln!("usage: bench_hostile make DIR | bench_hostile run FILE");
            std::process::exit(2);
        }
    }
}

//! AVIF sibling timing: for each image given, makes its five variants with the upload
//! pipeline, then for each variant prints its bytes, its WebP sibling's bytes and time, and
//! its AVIF encode's bytes and time at each speed asked for, on one thread (what one
//! `image-sibling` instance has), and the whole first request of the AVIF sibling as the
//! siblings make it (decode and encode) with the peak resident
//! memory of the process while it ran (Linux: the peak is reset first). Times are CPU
//! time (Linux), the best of `--runs`. Run in release:
//!
//!   cargo run --release -p sitehost --example avif_timing -- [--speeds 6,8,10] [--runs N] FILE...
//!
//! docs/image-pipeline-bench.md ("AVIF siblings") has its tables.

use std::time::{Duration, Instant};

use sitehost::config::ImageLimits;
use sitehost::domain::image_record::{SiblingFormat, SiblingSource};
use sitehost::image_pipeline::{
    encode_avif, process, sibling_of_variant, sibling_quality, AvifSettings, AVIF_MAX_PIXELS,
    AVIF_SPEED,
};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut speeds = vec![AVIF_SPEED];
    let mut runs = 1usize;
    let mut files = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--speeds" => {
                let list = args.next().ok_or("--speeds needs a list")?;
                speeds = list.split(',').map(str::parse).collect::<Result<_, _>>()?;
            }
            "--runs" => runs = args.next().ok_or("--runs needs a number")?.parse()?,
            _ => files.push(arg),
        }
    }
    let limits = ImageLimits::default();
    println!(
        "AVIF at each size's quality, alpha quality {}; bound {AVIF_MAX_PIXELS} pixels; best of {runs}",
        AvifSettings::sibling(0.0).alpha_quality
    );
    print!("| image | variant | pixels | variant bytes | WebP bytes | WebP ms |");
    for speed in &speeds {
        print!(" AVIF s{speed} bytes | AVIF s{speed} ms (1 thread) |");
    }
    println!(" first request ms | peak RSS MiB |");
    for file in &files {
        let bytes = std::fs::read(file)?;
        let processed = process(&bytes, &limits)?;
        let name = std::path::Path::new(file)
            .file_name()
            .map_or(file.clone(), |n| n.to_string_lossy().into_owned());
        for variant in &processed.variants {
            let source = SiblingSource {
                variant: &variant.bytes,
                original: Some(&bytes),
                size: variant.name,
            };
            let (webp, webp_time) = best_of(runs, || {
                sibling_of_variant(source, SiblingFormat::Webp, &limits)
            })?;
            let webp = webp.ok_or("no WebP")?;
            let decoded = image::load_from_memory(&variant.bytes)?;
            let (pixels, channels) = if decoded.color().has_alpha() {
                (decoded.to_rgba8().into_raw(), 4)
            } else {
                (decoded.to_rgb8().into_raw(), 3)
            };
            print!(
                "| {name} | {} | {}x{} | {} | {} | {:.0} |",
                variant.name,
                variant.width,
                variant.height,
                variant.bytes.len(),
                webp.len(),
                ms(webp_time)
            );
            for &speed in &speeds {
                let settings = AvifSettings {
                    speed,
                    ..AvifSettings::sibling(sibling_quality(SiblingFormat::Avif, variant.name))
                };
                let (avif, time) = best_of(runs, || {
                    encode_avif(&pixels, variant.width, variant.height, channels, settings)
                })?;
                print!(" {} | {:.0} |", avif.len(), ms(time));
            }
            reset_peak_rss();
            let (sibling, time) = best_of(runs, || {
                sibling_of_variant(source, SiblingFormat::Avif, &limits)
            })?;
            let peak = peak_rss_mib().map_or("?".to_string(), |mib| format!("{mib:.0}"));
            match sibling {
                Some(_) => println!(" {:.0} | {peak} |", ms(time)),
                None => println!(" none (past the bound: the WebP) | {peak} |"),
            }
        }
    }
    Ok(())
}

/// The result of the fastest of `runs` runs, and its time: the CPU time of the process
/// (Linux `/proc/self/stat`, every thread's, those that ended too; 10 ms ticks), which on a
/// shared machine says what one core would take better than the wall time; the wall time
/// where that cannot be read.
fn best_of<T>(
    runs: usize,
    mut run: impl FnMut() -> sitehost::Result<T>,
) -> Result<(T, Duration), Box<dyn std::error::Error>> {
    let mut best: Option<(T, Duration)> = None;
    for _ in 0..runs.max(1) {
        let (start, cpu_start) = (Instant::now(), cpu_time());
        let out = run()?;
        let took = match (cpu_start, cpu_time()) {
            (Some(before), Some(after)) => after.saturating_sub(before),
            _ => start.elapsed(),
        };
        if best.as_ref().is_none_or(|(_, t)| took < *t) {
            best = Some((out, took));
        }
    }
    best.ok_or_else(|| "no run".into())
}

/// The process's user and system CPU time (`utime` and `stime`, in ticks of 10 ms).
fn cpu_time() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The fields after the command name, which is in parentheses and may hold spaces.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10))
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Resets the process's peak resident set (Linux `clear_refs` 5), so that the next reading
/// is the peak since now.
fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// The peak resident set since the last reset (Linux `VmHWM`), in MiB.
fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

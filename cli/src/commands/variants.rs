//! `sitehost variants`: the upload pipeline on a local file, with the time of each stage
//! (the image benchmark).

use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context, Result};
use clap::Args;
use sitehost::config::{Config, Defaults, ImageLimits};
use sitehost::domain::image_record::{SiblingFormat, SiblingSource};
use sitehost::image_pipeline::{process_file_timed, sibling_of_variant, write_variants, Variant};

#[derive(Args)]
pub struct VariantsArgs {
    file: PathBuf,
    outdir: PathBuf,
    /// Also makes the siblings that are made on their first request (the WebPs of medium,
    /// large and big, every AVIF), timing each: not part of an upload's work, so off for the
    /// benchmark's runs.
    #[arg(long)]
    first_request_siblings: bool,
}

/// SITEHOST_BENCH_NO_WEBP_SIBLINGS=1: uploads (`serve`) and `variants` make no WebP
/// siblings, for measuring their cost against the same build (docs/image-pipeline-bench.md).
/// Read by the command only: no function turns them off.
pub fn bench_switches(limits: &mut ImageLimits) {
    if std::env::var_os("SITEHOST_BENCH_NO_WEBP_SIBLINGS").is_some_and(|v| v == "1") {
        limits.webp_siblings_at_upload = false;
        eprintln!(
            "SITEHOST_BENCH_NO_WEBP_SIBLINGS=1: no WebP siblings are made (measurement only)"
        );
    }
}

pub fn run(args: VariantsArgs) -> Result<()> {
    let VariantsArgs {
        file,
        outdir,
        first_request_siblings,
    } = args;
    let mut limits = Config::from_env(Defaults::command())?.image_limits;
    bench_switches(&mut limits);
    let processed = process_file_timed(&file, &limits).map_err(|e| match e {
        sitehost::ApiError::Validation(fields) => anyhow!("{}: {fields:?}", file.display()),
        other => anyhow::Error::new(other).context(file.display().to_string()),
    })?;
    let paths = write_variants(&processed, &outdir)?;
    // The first-request siblings of still variants are made from the original's pixels.
    let original = match first_request_siblings {
        true => std::fs::read(&file).with_context(|| file.display().to_string())?,
        false => Vec::new(),
    };
    println!(
        "{} {}x{} ({})",
        processed.format.name(),
        processed.width,
        processed.height,
        processed.mimetype
    );
    for (variant, path) in processed.variants.iter().zip(&paths) {
        println!(
            "  {:<9} {:>4}x{:<4} {:>9} bytes  {}",
            variant.name,
            variant.width,
            variant.height,
            variant.bytes.len(),
            path.display()
        );
        if let Some(webp) = &variant.webp {
            println!(
                "  {:<9} {:>9} {:>9} bytes  {}.webp (WebP sibling)",
                "",
                "",
                webp.len(),
                path.display()
            );
        }
        if !first_request_siblings || processed.extension == "webp" {
            continue;
        }
        make_first_request_siblings(variant, path, &original, &limits)?;
    }
    println!("{}", processed.timings);
    Ok(())
}

/// Makes `variant`'s siblings that are made on their first request (those the upload did not
/// make), each timed, and writes each beside `path`.
fn make_first_request_siblings(
    variant: &Variant,
    path: &Path,
    original: &[u8],
    limits: &ImageLimits,
) -> Result<()> {
    for format in SiblingFormat::ALL {
        if format == SiblingFormat::Webp && variant.webp.is_some() {
            continue;
        }
        // What the frontend's first request of this sibling costs (operations::siblings):
        // made from the stored variant and the original, as image-sibling and `serve`
        // make it.
        let sibling = format!("{}.{}", path.display(), format.extension());
        let started = std::time::Instant::now();
        let source = SiblingSource {
            variant: &variant.bytes,
            original: Some(original),
            size: variant.name,
        };
        let made = match sibling_of_variant(source, format, limits) {
            Ok(made) => made,
            // Over a bound (an animated variant of too many pixels): the variant is
            // served in its place, as the siblings operation does.
            Err(e @ sitehost::ApiError::TooLarge(_)) => {
                println!(
                    "  {:<9} {:>9} {:>9}        {sibling} not made: {e}",
                    "", "", ""
                );
                continue;
            }
            Err(e) => return Err(anyhow::Error::new(e).context(sibling.clone())),
        };
        let took = started.elapsed().as_secs_f64() * 1000.0;
        let Some(made) = made else {
            println!(
                "  {:<9} {:>9} {:>9}        {sibling}: none, its WebP stands in ({took:.1} ms to tell)",
                "", "", ""
            );
            continue;
        };
        std::fs::write(&sibling, &made).with_context(|| format!("writing {sibling}"))?;
        println!(
            "  {:<9} {:>9} {:>9} bytes  {sibling} (made on first request in {took:.1} ms)",
            "",
            "",
            made.len()
        );
    }
    Ok(())
}

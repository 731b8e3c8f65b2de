//! `sitehost variants`: the upload pipeline on a local file, with the time of each stage
//! (the image benchmark).

use std::path::PathBuf;

use anyhow::{anyhow, Context, Result};
use clap::Args;
use sitehost::config::{Config, Defaults};
use sitehost::domain::image_record::SiblingFormat;
use sitehost::image_pipeline::{process_file_timed, sibling_of_variant, write_variants};

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
pub fn bench_switches() {
    if std::env::var_os("SITEHOST_BENCH_NO_WEBP_SIBLINGS").is_some_and(|v| v == "1") {
        sitehost::image_pipeline::bench_without_webp_siblings();
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
    bench_switches();
    let limits = Config::from_env(Defaults::command())?.image_limits;
    let processed = process_file_timed(&file, &limits).map_err(|e| match e {
        sitehost::ApiError::Validation(fields) => anyhow!("{}: {fields:?}", file.display()),
        other => anyhow::Error::new(other).context(file.display().to_string()),
    })?;
    let paths = write_variants(&processed, &outdir)?;
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
        for format in SiblingFormat::ALL {
            if format == SiblingFormat::Webp && variant.webp.is_some() {
                continue;
            }
            // What the frontend's first request of this sibling costs (operations::siblings):
            // made from the stored variant, as image-sibling and `serve` make it.
            let sibling = format!("{}.{}", path.display(), format.extension());
            let started = std::time::Instant::now();
            let made = match sibling_of_variant(&variant.bytes, format, &limits) {
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
    }
    println!("{}", processed.timings);
    Ok(())
}

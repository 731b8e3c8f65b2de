//! The encoding half of the fidelity measurement (`scripts/fidelity`, which scores what this
//! writes; docs/image-fidelity.md): for each image and each distinct variant size, the
//! variant's pixels as the pipeline makes them (`ref.png`, lossless), the JPEG variant as an
//! upload encodes it (`jpeg.jpg`), the siblings as the service makes them on first request
//! (`served-webp.webp`, `served-avif.avif`: from the JPEG variant and the original, at the
//! size's quality), and a ladder of each sibling format's encodings made with the pipeline's
//! own encoders (`webp-q<Q>.webp`, `avif-q<Q>.avif`), each listed in `manifest.json` with
//! its bytes and encode time.
//!
//!   fidelity_ladder --out DIR [--webp-qualities 70,75,...] [--webp-method 2]
//!       [--avif-qualities 50,60,...] [--avif-speed 9] IMAGE...

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use clap::Parser;
use serde_json::{json, Value};
use sitehost::config::ImageLimits;
use sitehost::domain::image_record::{SiblingFormat, SiblingSource, VARIANTS};
use sitehost::image_pipeline::measure::Reference;
use sitehost::image_pipeline::{sibling_of_variant, AVIF_MAX_PIXELS};

#[derive(Parser)]
struct Cli {
    /// Where each image's directory goes.
    #[arg(long)]
    out: PathBuf,
    /// libwebp qualities of the WebP ladder.
    #[arg(long, value_delimiter = ',', default_values_t = [70.0, 75.0, 80.0, 85.0, 90.0, 95.0, 100.0])]
    webp_qualities: Vec<f32>,
    /// libwebp's method (0 fastest .. 6 smallest).
    #[arg(long, default_value_t = 2)]
    webp_method: i32,
    /// ravif qualities of the AVIF ladder (none: no AVIF).
    #[arg(long, value_delimiter = ',', default_values_t = [50.0, 60.0, 70.0, 80.0, 90.0])]
    avif_qualities: Vec<f32>,
    /// rav1e's speed (1 slowest .. 10 fastest).
    #[arg(long, default_value_t = sitehost::image_pipeline::AVIF_SPEED)]
    avif_speed: u8,
    images: Vec<PathBuf>,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let mut manifest = Vec::new();
    for image in &cli.images {
        let original =
            std::fs::read(image).with_context(|| format!("reading {}", image.display()))?;
        let stem = image
            .file_stem()
            .and_then(|s| s.to_str())
            .context("an image path without a name")?;
        for &(size, side) in &VARIANTS {
            let reference = Reference::of(&original, side)?;
            let dims = (reference.width(), reference.height());
            // A variant of an image smaller than its box is the image's own size, not one
            // of this size's: left out.
            if dims.0.max(dims.1) != side {
                continue;
            }
            let dir = cli.out.join(stem).join(size);
            std::fs::create_dir_all(&dir)?;
            let mut files = Vec::new();
            let mut write = |name: String,
                             quality: Option<f32>,
                             encode: &dyn Fn() -> sitehost::error::Result<Vec<u8>>|
             -> anyhow::Result<()> {
                let start = Instant::now();
                let bytes = encode()?;
                let millis = start.elapsed().as_secs_f64() * 1000.0;
                std::fs::write(dir.join(&name), &bytes)?;
                files.push(json!({"file": name, "quality": quality, "bytes": bytes.len(), "encode_ms": millis}));
                Ok(())
            };
            write("ref.png".into(), None, &|| reference.png())?;
            let jpeg = reference.jpeg()?;
            write("jpeg.jpg".into(), None, &|| Ok(jpeg.clone()))?;
            // The siblings as served, from the JPEG variant as stored and the original.
            for format in SiblingFormat::ALL {
                let source = SiblingSource {
                    variant: &jpeg,
                    original: Some(&original),
                    size,
                };
                let served = sibling_of_variant(source, format, &ImageLimits::default())?;
                if let Some(served) = served {
                    let name = format!("served-{0}.{0}", format.extension());
                    write(name, None, &|| Ok(served.clone()))?;
                }
            }
            for &q in &cli.webp_qualities {
                write(format!("webp-q{q}.webp"), Some(q), &|| {
                    reference.webp(q, cli.webp_method)
                })?;
            }
            // Variants over the AVIF bound get no AVIF sibling: none to measure.
            let avif_qualities = if u64::from(dims.0) * u64::from(dims.1) <= AVIF_MAX_PIXELS {
                cli.avif_qualities.as_slice()
            } else {
                &[]
            };
            for &q in avif_qualities {
                write(format!("avif-q{q}.avif"), Some(q), &|| {
                    reference.avif(q, cli.avif_speed)
                })?;
            }
            manifest.push(json!({
                "image": stem, "size": size, "width": dims.0, "height": dims.1,
                "dir": dir, "files": files,
            }));
            eprintln!("{stem} {size} {}x{}", dims.0, dims.1);
        }
    }
    let manifest = Value::Array(manifest);
    std::fs::write(
        cli.out.join("manifest.json"),
        serde_json::to_vec_pretty(&manifest)?,
    )?;
    Ok(())
}

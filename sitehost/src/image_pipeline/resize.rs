//! Variant sizes, cascaded Lanczos3 downsampling and EXIF orientation.

use std::sync::Arc;

use anyhow::Context;
use fast_image_resize as fir;
use fir::images::{Image, ImageRef};
use fir::{FilterType, PixelType, ResizeAlg, ResizeOptions, Resizer};

use super::pixels::{Layout, Pixels};
use crate::error::{ApiError, Result};

/// Makes every target size (distinct, largest first) from `source`, and hands each to `each`
/// with its index as soon as it can: an image without alpha at once, so that its encoding
/// runs while the smaller ones are made; one with alpha when the cascade is done. Each target
/// is downsampled from the smallest already-made image at least twice its size (or else the
/// source), so every step is a 2x-or-more Lanczos reduction of a sharp image, and the
/// full-size source is read only once or twice.
///
/// With alpha, colours are weighted by it (premultiplied) so that transparent pixels do not
/// bleed into their neighbours. The source is premultiplied in place, the whole cascade
/// works on premultiplied images and each result is divided back at the end:
/// fast_image_resize would otherwise premultiply into a full-size copy of the source at
/// each step from it (a second 200 MB for a 50 MP RGBA image).
pub(super) fn cascade(
    mut source: Pixels,
    targets: &[(u32, u32)],
    mut each: impl FnMut(usize, Arc<Pixels>),
) -> Result<()> {
    let alpha = matches!(source.layout, Layout::La8 | Layout::Rgba8);
    if !alpha {
        cascade_premultiplied(source, targets, |index, image| {
            each(index, Arc::clone(image))
        })?;
        return Ok(());
    }
    let mul_div = fir::MulDiv::default();
    // Through resize-kernels, which compiles fast_image_resize's loops optimised.
    resize_kernels::multiply_alpha(&mul_div, &mut view_mut(&mut source)?)
        .context("premultiplying alpha")?;
    let made = cascade_premultiplied(source, targets, |_, _| {})?;
    for (index, image) in made.into_iter().enumerate() {
        // The cascade is over: nothing else holds the image, so this moves it.
        let mut image = Arc::unwrap_or_clone(image);
        resize_kernels::divide_alpha(&mul_div, &mut view_mut(&mut image)?)
            .context("dividing alpha")?;
        each(index, Arc::new(image));
    }
    Ok(())
}

fn pixel_type(layout: Layout) -> PixelType {
    match layout {
        Layout::L8 => PixelType::U8,
        Layout::La8 => PixelType::U8x2,
        Layout::Rgb8 => PixelType::U8x3,
        Layout::Rgba8 => PixelType::U8x4,
    }
}

fn view_mut(pixels: &mut Pixels) -> Result<Image<'_>> {
    Ok(Image::from_slice_u8(
        pixels.width,
        pixels.height,
        &mut pixels.data,
        pixel_type(pixels.layout),
    )
    .context("a pixel buffer that does not match its size")?)
}

fn cascade_premultiplied(
    source: Pixels,
    targets: &[(u32, u32)],
    mut on_made: impl FnMut(usize, &Arc<Pixels>),
) -> Result<Vec<Arc<Pixels>>> {
    let mut resizer = Resizer::new();
    // Alpha is handled by `cascade`.
    let options = ResizeOptions::new()
        .resize_alg(ResizeAlg::Convolution(FilterType::Lanczos3))
        .use_alpha(false);
    let mut made: Vec<Arc<Pixels>> = Vec::with_capacity(targets.len());
    let mut source = Some(source);
    for (i, &(width, height)) in targets.iter().enumerate() {
        let long = width.max(height);
        let smallest_2x = made
            .iter()
            .rposition(|p| p.width.max(p.height) >= long.saturating_mul(2));
        let next = if let Some(index) = smallest_2x {
            resize(&mut resizer, &made[index], width, height, &options)?
        } else if source
            .as_ref()
            .is_some_and(|s| (s.width, s.height) == (width, height))
        {
            // Smaller than the box: the variant is the source itself, moved, not copied.
            source
                .take()
                .ok_or_else(|| ApiError::internal("source vanished"))?
        } else {
            let from = source
                .as_ref()
                .or(made.first().map(|first| &**first))
                .ok_or_else(|| ApiError::internal("no source left for a variant"))?;
            if (from.width, from.height) == (width, height) {
                from.clone()
            } else {
                resize(&mut resizer, from, width, height, &options)?
            }
        };
        made.push(Arc::new(next));
        on_made(i, &made[i]);
        // Free the full-size source as soon as the biggest variant can feed the next one,
        // to keep peak memory down.
        let next_long = targets.get(i + 1).map_or(0, |&(w, h)| w.max(h));
        if made[0].width.max(made[0].height) >= next_long.saturating_mul(2) {
            source = None;
        }
    }
    Ok(made)
}

fn resize(
    resizer: &mut Resizer,
    from: &Pixels,
    width: u32,
    height: u32,
    options: &ResizeOptions,
) -> Result<Pixels> {
    let pixel_type = pixel_type(from.layout);
    let src = ImageRef::new(from.width, from.height, &from.data, pixel_type)
        .context("a pixel buffer that does not match its size")?;
    let mut dst = Image::new(width, height, pixel_type);
    resize_kernels::resize(resizer, &src, &mut dst, options)
        .with_context(|| format!("resizing to {width}x{height}"))?;
    Ok(Pixels {
        width,
        height,
        layout: from.layout,
        data: dst.into_vec(),
    })
}

/// True if the orientation swaps width and height (5-8).
pub(super) fn swaps_sides(orientation: u8) -> bool {
    (5..=8).contains(&orientation)
}

/// False for orientation 1 (and for values outside 1-8, which are ignored).
pub(super) fn needs_orienting(orientation: u8) -> bool {
    (2..=8).contains(&orientation)
}

/// Turns stored pixels upright according to the EXIF orientation (1-8).
pub(super) fn orient(pixels: Pixels, orientation: u8) -> Result<Pixels> {
    match ::image::metadata::Orientation::from_exif(orientation) {
        None | Some(::image::metadata::Orientation::NoTransforms) => Ok(pixels),
        Some(transform) => {
            let mut image = pixels.into_dynamic()?;
            image.apply_orientation(transform);
            Ok(Pixels::from_dynamic(image))
        }
    }
}

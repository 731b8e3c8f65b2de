//! Palettes for the frames of animated GIF variants: at most 255 colours (the 256th index
//! is kept for transparency) and each pixel's index. In order of preference:
//!
//! 1. **exact**, when the pixels have at most 255 colours;
//! 2. **the source's colours**: a GIF frame shows at most 256 colours (its canvas usually
//!    fewer), and the resized frame's pixels are those colours and blends of neighbours.
//!    Each pixel takes the nearest of the source canvas's colours, as gifsicle's resize
//!    does by default: no palette to learn, and flat artwork keeps its exact colours;
//! 3. **NeuQuant** (the quantiser `gif` and `image` use), learnt from the pixels, for a
//!    canvas of more colours (frames with palettes of their own drawn over each other).
//!
//! Lookups go through a cache of 2^18 cells (the two low bits of each channel dropped):
//! resized frames repeat colours within a few levels of each other.

use std::borrow::Cow;

/// NeuQuant's sampling factor (1 best .. 30 fastest), as the still GIF variants use.
const SAMPLE_FACTOR: i32 = 10;

/// The most pixels NeuQuant learns a palette from: a larger frame is sampled evenly.
/// Learning compares every 10th pixel given with each of the 255 colours, so its time
/// grows with this, not with the frame.
const MAX_LEARNING_PIXELS: usize = 65_536;

/// The distinct opaque colours (RGB triples) of RGBA `pixels` whose alpha is not 0, if
/// there are at most `max` (at most 256).
pub(super) fn colours_of(pixels: &[u8], max: usize) -> Option<Vec<u8>> {
    let opaque = pixels.chunks_exact(4).filter(|p| p[3] != 0);
    exact(opaque, max).map(|(palette, _)| palette)
}

/// The distinct colours of `pixels` (RGB triples, in order of first use) and each pixel's
/// index, if there are at most `max` (at most 256). A run of equal pixels is looked up once.
fn exact<'a>(pixels: impl Iterator<Item = &'a [u8]>, max: usize) -> Option<(Vec<u8>, Vec<u8>)> {
    let mut table = ColourTable::new();
    let mut palette = Vec::new();
    let mut indices = Vec::new();
    let mut last: Option<(&[u8], u8)> = None;
    for p in pixels {
        let index = match last {
            Some((q, index)) if q[..3] == p[..3] => index,
            _ => match table.get(p) {
                Some(index) => index,
                None => {
                    if palette.len() / 3 == max.min(256) {
                        return None;
                    }
                    let index = (palette.len() / 3) as u8;
                    table.insert(p, index);
                    palette.extend_from_slice(&p[..3]);
                    index
                }
            },
        };
        last = Some((p, index));
        indices.push(index);
    }
    Some((palette, indices))
}

/// A palette of at most 255 colours (RGB triples) for the opaque RGBA `colours`, and each
/// one's index. `source`: the colours the frame was made from, if at most 256.
pub(super) fn quantise(colours: &[u8], source: Option<&[u8]>) -> (Vec<u8>, Vec<u8>) {
    if let Some(exact) = exact(colours.chunks_exact(4), 255) {
        return exact;
    }
    if let Some(source) = source.filter(|s| !s.is_empty() && s.len() / 3 <= 256) {
        let palette = at_most_255(source);
        let nearest = Nearest::new(&palette);
        return (palette, cached(colours, |p| nearest.index_of(p)));
    }
    let pixels = colours.len() / 4;
    let learn: Cow<'_, [u8]> = if pixels > MAX_LEARNING_PIXELS {
        let step = pixels.div_ceil(MAX_LEARNING_PIXELS);
        let sampled: Vec<u8> = colours
            .chunks_exact(4)
            .step_by(step)
            .flatten()
            .copied()
            .collect();
        sampled.into()
    } else {
        colours.into()
    };
    let quant = color_quant::NeuQuant::new(SAMPLE_FACTOR, 255, &learn);
    let indices = cached(colours, |p| quant.index_of(p) as u8);
    (quant.color_map_rgb(), indices)
}

/// The palette, without its most redundant colour (one of the two closest) if it has 256.
fn at_most_255(palette: &[u8]) -> Vec<u8> {
    let mut palette = palette.to_vec();
    if palette.len() / 3 > 255 {
        let distance = |a: &[u8], b: &[u8]| -> i32 {
            a.iter()
                .zip(b)
                .map(|(&x, &y)| (i32::from(x) - i32::from(y)).pow(2))
                .sum()
        };
        let colours: Vec<&[u8]> = palette.chunks_exact(3).collect();
        let closest = (0..colours.len())
            .flat_map(|i| (i + 1..colours.len()).map(move |j| (i, j)))
            .min_by_key(|&(i, j)| distance(colours[i], colours[j]))
            .map_or(0, |(_, j)| j);
        palette.drain(closest * 3..closest * 3 + 3);
        palette.truncate(255 * 3);
    }
    palette
}

/// Each pixel's index by `find`, asked once per cache cell.
fn cached(colours: &[u8], find: impl Fn(&[u8]) -> u8) -> Vec<u8> {
    const UNKNOWN: u16 = u16::MAX;
    let mut cache = vec![UNKNOWN; 1 << 18];
    colours
        .chunks_exact(4)
        .map(|p| {
            let cell = (usize::from(p[0] >> 2) << 12)
                | (usize::from(p[1] >> 2) << 6)
                | usize::from(p[2] >> 2);
            if cache[cell] == UNKNOWN {
                cache[cell] = u16::from(find(p));
            }
            cache[cell] as u8
        })
        .collect()
}

/// The nearest colour of a palette (squared RGB distance): entries sorted by green, the
/// search going outwards from the pixel's green until green alone is farther than the best
/// match (NeuQuant's search, on any palette).
struct Nearest {
    /// (green, red, blue, palette index), by green.
    entries: Vec<[i32; 4]>,
    /// For each green value, the first entry with that green or more.
    by_green: Vec<usize>,
}

impl Nearest {
    fn new(palette: &[u8]) -> Self {
        let mut entries: Vec<[i32; 4]> = palette
            .chunks_exact(3)
            .enumerate()
            .map(|(i, p)| [i32::from(p[1]), i32::from(p[0]), i32::from(p[2]), i as i32])
            .collect();
        entries.sort_unstable();
        let by_green = (0..256)
            .map(|g| entries.partition_point(|e| e[0] < g))
            .collect();
        Nearest { entries, by_green }
    }

    fn index_of(&self, p: &[u8]) -> u8 {
        let (r, g, b) = (i32::from(p[0]), i32::from(p[1]), i32::from(p[2]));
        let mut best = (i32::MAX, 0);
        let start = self.by_green[usize::from(p[1])];
        let mut consider = |e: &[i32; 4]| -> bool {
            let dg = (e[0] - g) * (e[0] - g);
            if dg >= best.0 {
                return false;
            }
            let d = dg + (e[1] - r) * (e[1] - r) + (e[2] - b) * (e[2] - b);
            if d < best.0 {
                best = (d, e[3]);
            }
            true
        };
        let (mut up, mut down) = (start, start);
        let (mut going_up, mut going_down) = (true, true);
        while going_up || going_down {
            if going_up {
                going_up = up < self.entries.len() && consider(&self.entries[up]);
                up += 1;
            }
            if going_down {
                going_down = down > 0 && consider(&self.entries[down - 1]);
                down = down.saturating_sub(1);
            }
        }
        best.1 as u8
    }
}

/// RGB to an index, by open addressing over 1024 slots (at most 256 used).
struct ColourTable {
    /// RGB + 1; 0 is an empty slot.
    keys: [u32; 1024],
    values: [u8; 1024],
}

impl ColourTable {
    fn new() -> Self {
        ColourTable {
            keys: [0; 1024],
            values: [0; 1024],
        }
    }

    fn slot(&self, p: &[u8]) -> (usize, u32) {
        let key = ((u32::from(p[0]) << 16) | (u32::from(p[1]) << 8) | u32::from(p[2])) + 1;
        let mut at = (key.wrapping_mul(0x9E37_79B1) >> 22) as usize;
        while self.keys[at] != 0 && self.keys[at] != key {
            at = (at + 1) % self.keys.len();
        }
        (at, key)
    }

    fn get(&self, p: &[u8]) -> Option<u8> {
        let (at, key) = self.slot(p);
        (self.keys[at] == key).then_some(self.values[at])
    }

    fn insert(&mut self, p: &[u8], value: u8) {
        let (at, key) = self.slot(p);
        self.keys[at] = key;
        self.values[at] = value;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nearest_colour_is_found_as_a_full_search_finds_it() {
        let palette: Vec<u8> = (0..200u32)
            .flat_map(|i| {
                [
                    (i * 37 % 256) as u8,
                    (i * 91 % 256) as u8,
                    (i * 53 % 256) as u8,
                ]
            })
            .collect();
        let nearest = Nearest::new(&palette);
        let distance = |p: &[u8], q: &[u8]| -> i32 {
            p.iter()
                .zip(q)
                .map(|(&a, &b)| (i32::from(a) - i32::from(b)).pow(2))
                .sum()
        };
        for i in 0..5_000u32 {
            let pixel = [
                (i * 7 % 256) as u8,
                (i * 13 % 256) as u8,
                (i * 29 % 256) as u8,
                255,
            ];
            let found = usize::from(nearest.index_of(&pixel));
            let best = palette
                .chunks_exact(3)
                .map(|q| distance(&pixel[..3], q))
                .min()
                .expect("a palette");
            assert_eq!(
                distance(&pixel[..3], &palette[found * 3..found * 3 + 3]),
                best
            );
        }
    }

    #[test]
    fn few_colours_are_kept_exactly_and_many_are_reduced_to_255() {
        let few: Vec<u8> = (0..1000u32)
            .flat_map(|i| [(i % 7) as u8 * 30, 0, 0, 255])
            .collect();
        let (palette, indices) = quantise(&few, None);
        assert_eq!(palette.len(), 7 * 3);
        for (p, &i) in few.chunks_exact(4).zip(&indices) {
            assert_eq!(&palette[usize::from(i) * 3..][..3], &p[..3]);
        }
        let many: Vec<u8> = (0..100_000u32)
            .flat_map(|i| {
                [
                    (i % 256) as u8,
                    (i / 256 % 256) as u8,
                    (i * 7 % 256) as u8,
                    255,
                ]
            })
            .collect();
        let (palette, indices) = quantise(&many, None);
        assert!(palette.len() <= 255 * 3);
        assert!(indices.iter().all(|&i| usize::from(i) < palette.len() / 3));
        assert!(colours_of(&many, 256).is_none());
    }
}

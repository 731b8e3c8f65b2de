"""The image benchmark's driver (run by scripts/bench-images): our pipeline and libvips's
best way side by side, interleaved round by round, on each image.

- sitehost: `sitehost variants IN OUTDIR`, one process per round (one decode, the five
  variants, the small and thumbnail WebP siblings an upload makes; files written; the
  siblings made on first request only in the untimed warm-up, for their bytes). Timed as the process's wall time, start-up and
  writing included; its own in-process stage times are printed too.
- libvips, used well: in this process, warm (the library loaded, its caches filled by a
  discarded first round): `thumbnail` to the big variant's box with shrink-on-load, kept in
  memory, then each smaller variant from it in memory; every variant saved as JPEG Q85
  without metadata. Timed from the file name to the last file written.

With BENCH_BEFORE=<another sitehost binary> (an older build), that one runs in every round
too, and its median and ratio are printed beside ours.

Prints the medians and their ratio, peak RSS (ours: the largest of its runs; pyvips: this
Python process so far, interpreter and earlier images included), each variant's bytes from both, and what WebP at Q85
would weigh for each of our variants (libwebp's default method 4, re-encoding the decoded
JPEG variant, as a WebP sibling made from the same pixels would).
"""

import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import pyvips

VARIANTS = [("big", 2048), ("large", 1024), ("medium", 640), ("small", 320), ("thumbnail", 150)]


def vips_best(path, out, ext):
    big = pyvips.Image.thumbnail(path, VARIANTS[0][1], size="down").copy_memory()
    big.write_to_file(f"{out}/big.{ext}", Q=85, keep="none")
    for name, side in VARIANTS[1:]:
        small = big.thumbnail_image(side, size="down")
        small.write_to_file(f"{out}/{name}.{ext}", Q=85, keep="none")


def ours(binary, path, out, *options):
    """Wall time, the stage line and peak RSS in KiB (GNU time's %M: a child's own
    ru_maxrss from Python would include this process's RSS at the fork)."""
    with tempfile.NamedTemporaryFile("r") as rss:
        start = time.perf_counter()
        run = subprocess.run(["/usr/bin/time", "-f", "%M", "-o", rss.name, binary, "variants", *options, path, out],
                             capture_output=True, text=True, check=True)
        wall = (time.perf_counter() - start) * 1000
        return wall, run.stdout.strip().splitlines()[-1], int(rss.read().strip().splitlines()[-1])


def main():
    binary, rounds, images = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    print(f"libvips {pyvips.version(0)}.{pyvips.version(1)}.{pyvips.version(2)} (pyvips-binary), "
          f"{os.cpu_count()} CPUs, {rounds} rounds after one discarded warm-up")
    for path in images:
        ext = path.rsplit(".", 1)[-1]
        with tempfile.TemporaryDirectory() as work:
            ours_out, vips_out = f"{work}/ours", f"{work}/vips"
            os.makedirs(vips_out)
            # The warm-up also makes the siblings made on first request, for their bytes;
            # the timed runs do an upload's work only (variants and the upload's siblings).
            ours(binary, path, ours_out, "--first-request-siblings")
            vips_best(path, vips_out, ext)
            before = os.environ.get("BENCH_BEFORE")
            before_ms, before_peak = [], 0
            ours_ms, vips_ms, totals, peak = [], [], [], 0
            for _ in range(rounds):
                start = time.perf_counter()
                vips_best(path, vips_out, ext)
                vips_ms.append((time.perf_counter() - start) * 1000)
                wall, stages, rss = ours(binary, path, ours_out)
                ours_ms.append(wall)
                peak = max(peak, rss)
                if before:
                    wall, _, rss = ours(before, path, f"{work}/before")
                    before_ms.append(wall)
                    before_peak = max(before_peak, rss)
                totals.append(float(re.search(r"total ([0-9.]+) ms", stages).group(1)))
            o, v = statistics.median(ours_ms), statistics.median(vips_ms)
            print(f"== {os.path.basename(path)}: sitehost {o:.1f} ms (in-process total "
                  f"{statistics.median(totals):.1f} ms), libvips best way {v:.1f} ms, ratio {o / v:.2f}")
            if before:
                b = statistics.median(before_ms)
                print(f"   before ({before}): {b:.1f} ms, ratio {b / v:.2f}, peak RSS {before_peak // 1024} MiB, "
                      f"runs {[round(x) for x in before_ms]}")
            print(f"   runs: sitehost {[round(x) for x in ours_ms]}, libvips {[round(x) for x in vips_ms]}")
            print(f"   last sitehost stages: {stages}")
            vips_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
            print(f"   peak RSS: sitehost {peak // 1024} MiB; the pyvips process so far {vips_peak} MiB "
                  f"(Python and earlier images included)")
            for name, _ in VARIANTS:
                mine, theirs = f"{ours_out}/{name}.{ext}", f"{vips_out}/{name}.{ext}"
                decoded = pyvips.Image.new_from_file(mine)
                webp = len(decoded.webpsave_buffer(Q=85, keep="none"))
                sibling = f"{mine}.webp"
                made = f", our sibling {os.path.getsize(sibling)} B" if os.path.exists(sibling) else ""
                print(f"   {name:<9} {decoded.width}x{decoded.height}: sitehost {os.path.getsize(mine)} B, "
                      f"libvips {os.path.getsize(theirs)} B (ratio {os.path.getsize(mine) / os.path.getsize(theirs):.3f}); "
                      f"WebP Q85 of ours {webp} B ({webp / os.path.getsize(mine):.2f}x){made}")

if __name__ == "__main__":
    main()

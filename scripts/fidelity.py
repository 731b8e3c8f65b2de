"""The scoring half of the fidelity measurement (scripts/fidelity runs it; docs/image-fidelity.md).

Reads the manifest cli/examples/fidelity_ladder.rs wrote: per image and variant size, the
variant's pixels before encoding (ref.png), the JPEG variant (jpeg.jpg) and a ladder of
sibling encodings per format (`<format>-q<Q>.<ext>`). Every file is scored against ref.png
with SSIMULACRA2 (the `ssimulacra2` package; files decoded by Pillow, which reads JPEG, WebP
and AVIF). For each format it finds, by bisection over its ladder, where its score meets the
JPEG's:
  - equal-fidelity bytes: the bytes interpolated (linearly in score) between the two rungs
    around the JPEG's score; "not reached" when even the top rung scores below it;
  - equal-fidelity quality: the quality interpolated the same way (the settings in use are
    its median per format and size, rounded).
The siblings as the service serves them (`served-<format>.<ext>`) are scored too, against
the JPEG's score and bytes. Prints both tables (Markdown) and writes results.json beside
the first manifest.

    python scripts/fidelity.py MANIFEST... [--jobs N]
"""

import argparse
import json
import math
import os
import statistics
from multiprocessing import Pool

from ssimulacra2 import compute_ssimulacra2


def ladders(entry):
    """{format: [(quality, file, bytes), ...] sorted by quality} of one image and size."""
    out = {}
    for f in entry["files"]:
        if f["quality"] is None:
            continue
        fmt = f["file"].split("-q")[0]
        out.setdefault(fmt, []).append((f["quality"], f["file"], f["bytes"], f.get("encode_ms")))
    for rungs in out.values():
        rungs.sort()
    return out


def measure(entry):
    """Scores one image and size: the JPEG, then each ladder by bisection."""
    d = entry["dir"]
    scores = {}

    def score(name):
        if name not in scores:
            scores[name] = compute_ssimulacra2(os.path.join(d, "ref.png"), os.path.join(d, name))
        return scores[name]

    jpeg_bytes = next(f["bytes"] for f in entry["files"] if f["file"] == "jpeg.jpg")
    target = score("jpeg.jpg")
    result = {
        "image": entry["image"], "size": entry["size"],
        "width": entry["width"], "height": entry["height"],
        "jpeg": {"bytes": jpeg_bytes, "score": target}, "formats": {},
        # The siblings as the service makes them (`served-<format>.<ext>`), scored as they are.
        "served": {f["file"].split(".")[0][len("served-"):]: {"bytes": f["bytes"], "score": score(f["file"])}
                   for f in entry["files"] if f["file"].startswith("served-")},
    }
    formats = ladders(entry)
    for fmt, rungs in formats.items():
        lo, hi = 0, len(rungs) - 1
        if score(rungs[hi][1]) < target:
            equal = None
        elif score(rungs[lo][1]) >= target:
            equal = {"quality": rungs[lo][0], "bytes": rungs[lo][2], "encode_ms": rungs[lo][3], "at_bottom": True}
        else:
            # Invariant: rung lo scores below the JPEG, rung hi at or above it.
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if score(rungs[mid][1]) >= target:
                    hi = mid
                else:
                    lo = mid
            (q0, f0, b0, ms0), (q1, f1, b1, ms1) = rungs[lo], rungs[hi]
            s0, s1 = score(f0), score(f1)
            t = (target - s0) / (s1 - s0) if s1 != s0 else 1.0
            millis = ms0 + t * (ms1 - ms0) if ms0 is not None and ms1 is not None else None
            equal = {"quality": q0 + t * (q1 - q0), "bytes": b0 + t * (b1 - b0), "encode_ms": millis,
                     "at_bottom": False}
        result["formats"][fmt] = {
            "equal": equal,
            "rungs": [{"quality": q, "bytes": b, "encode_ms": ms} for q, _, b, ms in rungs],
            "scores": {f: scores[f] for _, f, _, _ in rungs if f in scores},
        }
    return result


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("manifests", nargs="+", help="one or more manifests, read as one")
    parser.add_argument("--jobs", type=int, default=os.cpu_count())
    parser.add_argument("--scratch", action="store_true",
                        help="the results' directory is removed after the run: name no path in it")
    args = parser.parse_args()
    manifest = []
    for path in args.manifests:
        with open(path) as f:
            manifest += json.load(f)
    if not manifest:
        raise SystemExit("fidelity: the manifest lists no image and size")
    with Pool(args.jobs) as pool:
        results = pool.map(measure, manifest, chunksize=1)
    for r in results:
        scores = [r["jpeg"]["score"]] + [v for f in r["formats"].values() for v in f["scores"].values()]
        if not all(math.isfinite(v) and v <= 100 for v in scores):
            raise SystemExit(f"fidelity: a score out of range for {r['image']} {r['size']}: {scores}")
    sizes = [s for s in ("big", "large", "medium", "small", "thumbnail") if any(r["size"] == s for r in results)]
    formats = sorted({fmt for r in results for fmt in r["formats"]})
    images = sorted({r["image"] for r in results})
    print(f"{len(images)} images: {', '.join(images)}\n")
    print("Bytes at the JPEG variant's fidelity (SSIMULACRA2 against the variant's pixels before encoding), median over the images with that size:\n")
    print("| format | size | images | JPEG score (median) | quality at equal score (median) | bytes against the JPEG (median) "
          "| encode ms at equal score (median) | not reached |")
    print("|---|---|---|---|---|---|---|---|")
    for fmt, size, rows in groups(results, formats, sizes, "formats"):
        reached = [r for r in rows if r["formats"][fmt]["equal"]]
        ratios = [r["formats"][fmt]["equal"]["bytes"] / r["jpeg"]["bytes"] for r in reached]
        # An image whose top rung stays below the JPEG counts as no saving at best.
        ratios += [float("inf")] * (len(rows) - len(reached))
        quality = [r["formats"][fmt]["equal"]["quality"] for r in reached]
        median_ratio = statistics.median(ratios)
        equal_quality = f"{statistics.median(quality):.0f}" if quality else "-"
        millis = [r["formats"][fmt]["equal"]["encode_ms"] for r in reached]
        equal_millis = f"{statistics.median(millis):.0f}" if millis and None not in millis else "-"
        print(f"| {fmt} | {size} | {len(rows)} | {statistics.median(r['jpeg']['score'] for r in rows):.1f} | "
              f"{equal_quality} | {fmt_ratio(median_ratio)} | {equal_millis} | {len(rows) - len(reached)} |")
    served = sorted({fmt for r in results for fmt in r["served"]})
    if served:
        print("\nThe siblings as served, against the JPEG, median over the images:\n")
        print("| sibling | size | images | score minus the JPEG's | bytes against the JPEG |")
        print("|---|---|---|---|---|")
        for fmt, size, rows in groups(results, served, sizes, "served"):
            print(f"| {fmt} | {size} | {len(rows)} | "
                  f"{statistics.median(r['served'][fmt]['score'] - r['jpeg']['score'] for r in rows):+.1f} | "
                  f"{fmt_ratio(statistics.median(r['served'][fmt]['bytes'] / r['jpeg']['bytes'] for r in rows))} |")
    out = os.path.join(os.path.dirname(os.path.abspath(args.manifests[0])), "results.json")
    with open(out, "w") as f:
        json.dump({"results": results}, f, indent=1)
    if not args.scratch:
        print(f"\nresults: {out}")


def groups(results, formats, sizes, kind):
    """(format, size, the results with that size and format under `kind`), for each pair that has any."""
    for fmt in formats:
        for size in sizes:
            rows = [r for r in results if r["size"] == size and fmt in r[kind]]
            if rows:
                yield fmt, size, rows


def fmt_ratio(ratio):
    if ratio == float("inf"):
        return "not reached"
    return f"{ratio:.2f} ({(1 - ratio) * 100:+.0f}% saved)" if ratio <= 1 else f"{ratio:.2f} ({(ratio - 1) * 100:.0f}% larger)"


if __name__ == "__main__":
    main()

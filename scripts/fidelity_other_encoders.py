"""Encoders the service does not use, measured beside its own (scripts/fidelity
--other-encoders; docs/image-fidelity.md, "Other encoders").

For each image and variant size in a fidelity_ladder manifest, encodes the variant's pixels
before encoding (ref.png, the same pixels the pipeline's encoders get) with libvips
(pyvips-binary, which bundles libaom and libwebp) and adds each ladder to the manifest, so
scripts/fidelity.py scores them the same way:
  - aom-iq: AVIF by libaom, tune=iq (libaom's tuning for still images, and libvips's
    default), effort 4; aom-iq-fast the same at effort 2;
  - aom-ssim: AVIF by libaom, tune=ssim, effort 4;
  - webp-m4: WebP by libwebp at method 4 (libwebp's default; the pipeline uses 2);
  - webp-slowest: WebP by libwebp at its slowest method (6) with sharp RGB->YUV conversion.
Only big, large and medium are encoded (where the pipeline's own encoders save least)
and no AVIF of big (the service makes none over AVIF_MAX_PIXELS).

Times are the process's CPU time for one encode with libvips's own threads set to one, so
they compare with rav1e's single-threaded times in the same manifest.

    python scripts/fidelity_other_encoders.py MANIFEST...
"""

import json
import os
import sys
import time

os.environ.setdefault("VIPS_CONCURRENCY", "1")
import pyvips  # noqa: E402  (reads VIPS_CONCURRENCY when it loads)

AVIF_QUALITIES = [30, 40, 50, 60, 70, 80, 90]
WEBP_QUALITIES = [70, 75, 80, 85, 90, 95, 100]
QUICK_QUALITIES = {"avif": [30, 60, 90], "webp": [70, 85, 100]}

LADDERS = {
    "aom-iq": ("avif", lambda im, q: im.heifsave_buffer(
        compression="av1", encoder="aom", Q=q, effort=4, tune="iq", keep="none")),
    "aom-iq-fast": ("avif", lambda im, q: im.heifsave_buffer(
        compression="av1", encoder="aom", Q=q, effort=2, tune="iq", keep="none")),
    "aom-ssim": ("avif", lambda im, q: im.heifsave_buffer(
        compression="av1", encoder="aom", Q=q, effort=4, tune="ssim", keep="none")),
    "webp-m4": ("webp", lambda im, q: im.webpsave_buffer(Q=q, effort=4, keep="none")),
    "webp-slowest": ("webp", lambda im, q: im.webpsave_buffer(
        Q=q, effort=6, smart_subsample=True, keep="none")),
}


def add_ladders(entry, quick):
    if entry["size"] not in ("big", "large", "medium") and not quick:
        return
    image = pyvips.Image.new_from_file(os.path.join(entry["dir"], "ref.png"))
    for name, (ext, save) in LADDERS.items():
        if ext == "avif" and entry["size"] == "big":
            continue
        qualities = QUICK_QUALITIES[ext] if quick else (AVIF_QUALITIES if ext == "avif" else WEBP_QUALITIES)
        for quality in qualities:
            start = time.process_time()
            data = save(image, quality)
            millis = (time.process_time() - start) * 1000
            file = f"{name}-q{quality}.{ext}"
            with open(os.path.join(entry["dir"], file), "wb") as f:
                f.write(data)
            entry["files"].append({"file": file, "quality": quality, "bytes": len(data), "encode_ms": millis})


def main():
    quick = "--quick" in sys.argv[1:]
    for path in (a for a in sys.argv[1:] if a != "--quick"):
        with open(path) as f:
            manifest = json.load(f)
        for entry in manifest:
            add_ladders(entry, quick)
        with open(path, "w") as f:
            json.dump(manifest, f, indent=1)


if __name__ == "__main__":
    main()

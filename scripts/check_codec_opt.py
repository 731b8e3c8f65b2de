"""Fails when image codec code is compiled into the `sitehost` library itself, where the dev
profile does not optimise it (`cargo run -p sitehost-cli -- serve` and the tests run it).

The dev profile optimises the codec crates (the workspace Cargo.toml), but a codec's
`#[inline]` or generic function is compiled in the crate that calls it, at that crate's
opt-level. `ravif::Encoder::encode_rgb` is `#[inline]`: called from `sitehost`, the whole
AV1 encoder was compiled into `sitehost` at opt-level 0, and a large variant's AVIF took
13.1 s against 1.43 s in release. So the encoders are called through small crates the
profile optimises (`avif-kernel`, `resize-kernels`), and this check reads the symbols the
`sitehost` library defines (`nm`), adds up the code of each codec crate among them, and
fails when one is over its budget. A few small generic helpers (a builder, a writer over a
`Vec`) are expected and harmless; an encoder's inner loops are tens of kilobytes or more.

    python3 scripts/check_codec_opt.py [RLIB...]

Without arguments it asks cargo for the `sitehost` library of the test build (built by
then: scripts/test runs this after its build step; a no-op build otherwise builds it).
"""
import json, os, re, subprocess, sys
from collections import defaultdict

# The crates whose code does per-pixel work: the codecs, compression, colour management
# and the resizer. Their code compiled into `sitehost`, in bytes, above the budget fails.
# The budget is generous for builders and generic I/O glue and far below an encoder's
# loops: rav1e compiled into `sitehost` was 1,350,853 bytes (docs/development.md, the build
# profiles).
CODEC_CRATES = [
    "rav1e", "ravif", "image", "png", "gif", "webp", "libwebp_sys", "mozjpeg", "mozjpeg_sys",
    "zune_jpeg", "zune_core", "image_webp", "fdeflate", "flate2", "miniz_oxide", "weezl",
    "color_quant", "moxcms", "fast_image_resize", "jpeg_encoder",
]
BUDGET_BYTES = 64 * 1024
# Known exceptions, held at their size: decoders whose loops are generic over the reader,
# still called from `sitehost` (225,783 and 207,041 bytes measured), and `image`'s decoder
# glue (83,880). Moving them behind a kernel crate is the next step (development.md). And
# png's writer, generic over where it writes (63,591: headers, chunks, the calls into its
# filters and deflate, which are compiled in png and fdeflate).
BUDGETS = {"zune_jpeg": 240 * 1024, "image_webp": 224 * 1024, "image": 96 * 1024,
           "png": 80 * 1024}


def rlibs_from_cargo():
    command = ["cargo", "build", "--workspace", "--lib", "--bins", "--tests", "--locked",
               "--message-format=json"]
    out = subprocess.run(command, check=True, stdout=subprocess.PIPE, text=True).stdout
    found = set()
    for line in out.splitlines():
        if not line.startswith("{"):
            continue
        message = json.loads(line)
        target = message.get("target") or {}
        if message.get("reason") == "compiler-artifact" and target.get("name") == "sitehost" \
                and "lib" in target.get("kind", []) and not message.get("profile", {}).get("test"):
            found.update(f for f in message.get("filenames", []) if f.endswith(".rlib"))
    return sorted(found)


def owner(symbol):
    """The crate whose function a demangled symbol is: `rav1e::me::f` and
    `<rav1e::Ctx<u8> as Trait>::f` are rav1e's; drop glue and std's own generics are not."""
    name = symbol[1:] if symbol.startswith("<") else symbol
    match = re.match(r"([A-Za-z_][A-Za-z0-9_]*)::", name)
    return match.group(1) if match else None


def codec_code(rlib):
    out = subprocess.run(["nm", "--defined-only", "--print-size", "--demangle", rlib],
                         check=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         text=True).stdout
    sizes, biggest = defaultdict(int), defaultdict(list)
    for line in out.splitlines():
        parts = line.split(" ", 3)
        if len(parts) != 4 or parts[2] not in ("t", "T", "W", "w"):
            continue
        crate = owner(parts[3])
        if crate in CODEC_CRATES:
            size = int(parts[1], 16)
            sizes[crate] += size
            biggest[crate].append((size, parts[3]))
    return sizes, biggest


def main():
    rlibs = sys.argv[1:] or rlibs_from_cargo()
    if not rlibs:
        sys.exit("check-codec-opt: cargo built no `sitehost` library")
    failed = False
    for rlib in rlibs:
        sizes, biggest = codec_code(rlib)
        total = sum(sizes.values())
        print(f"check-codec-opt: {os.path.basename(rlib)}: {total:,} bytes of codec code "
              f"compiled into sitehost (budget {BUDGET_BYTES:,} per crate, or as BUDGETS says)")
        for crate, size in sorted(sizes.items(), key=lambda kv: -kv[1]):
            over = size > BUDGETS.get(crate, BUDGET_BYTES)
            failed |= over
            print(f"  {crate:18} {size:>10,}" + ("  OVER BUDGET" if over else ""))
            if over:
                for sym_size, name in sorted(biggest[crate], reverse=True)[:5]:
                    print(f"      {sym_size:>8,}  {name[:150]}")
    if failed:
        sys.exit("check-codec-opt: a codec is compiled into sitehost, unoptimised in the dev "
                 "profile: call it through a crate the profile optimises (avif-kernel, "
                 "resize-kernels; docs/development.md, the build profiles)")


if __name__ == "__main__":
    main()

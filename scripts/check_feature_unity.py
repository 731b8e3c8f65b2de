"""Fails when `cargo run -p sitehost-cli -- serve` (README's first command) and the test
build (`cargo test --workspace`, scripts/test) would compile a crate they share with
different features.

Cargo compiles a crate once per feature set, and every crate above it again with it: when
the test build's dev-dependencies turned on a feature of serde_json, bitflags or hashbrown,
going from the first `serve` to the first `scripts/test` compiled 110 crates again (rav1e,
rusqlite, the AWS SDK, sitehost). cli/Cargo.toml turns those features on for `serve` too;
this check keeps the two builds one. It reads `cargo tree` (resolution only, no build).

    python3 scripts/check_feature_unity.py
"""
import subprocess, sys

SERVE = ["cargo", "tree", "--locked", "-p", "sitehost-cli", "-e", "normal,build"]
TESTS = ["cargo", "tree", "--locked", "--workspace", "-e", "normal,build,dev"]


def features(command):
    """{(package, version): set of features} as the build resolves them."""
    out = subprocess.run(command + ["--prefix", "none", "-f", "{p}|{f}"], check=True,
                         stdout=subprocess.PIPE, text=True).stdout
    found = {}
    for line in out.splitlines():
        line = line.replace(" (*)", "").strip()
        if "|" not in line:
            continue
        package, listed = line.split("|", 1)
        name_version = " ".join(package.split()[:2])
        found.setdefault(name_version, set()).update(f for f in listed.split(",") if f)
    return found


def main():
    serve, tests = features(SERVE), features(TESTS)
    differ = [(package, sorted(tests[package] - serve[package]), sorted(serve[package] - tests[package]))
              for package in sorted(serve) if package in tests and serve[package] != tests[package]]
    print(f"check-feature-unity: {len(serve)} crates in serve's build, "
          f"{len(differ)} with other features in the test build")
    for package, tests_only, serve_only in differ:
        print(f"  {package}: the tests add {tests_only or '-'}, serve adds {serve_only or '-'}")
    if differ:
        sys.exit("check-feature-unity: turn the same features on in cli/Cargo.toml (its "
                 "feature-unification block), so the two builds share every crate")


if __name__ == "__main__":
    main()

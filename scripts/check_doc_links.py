"""Every relative link in README.md and docs/*.md resolves to a file, and every #anchor to a
heading of that file (GitHub's slugs).

    python3 scripts/check_doc_links.py [ROOT]   (default: the repository this script is in)
"""
import glob, os, re, sys

root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
files = [os.path.join(root, "README.md")] + sorted(glob.glob(os.path.join(root, "docs", "*.md")))

def slug(heading):
    s = heading.strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)  # drop punctuation, keep word chars, hyphens, spaces
    return s.replace(" ", "-")

def anchors(path):
    out, fence = set(), False
    counts = {}
    for line in open(path, encoding="utf-8"):
        if line.startswith("```"):
            fence = not fence
        if fence:
            continue
        m = re.match(r"^(#{1,6})\s+(.*)", line)
        if m:
            base = slug(m.group(2))
            n = counts.get(base, 0)
            out.add(base if n == 0 else f"{base}-{n}")
            counts[base] = n + 1
    return out

bad = 0
checked = 0
for path in files:
    text = open(path, encoding="utf-8").read()
    text = re.sub(r"```.*?```", "", text, flags=re.S)  # links in code blocks are not links
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"^[a-z]+:", target):
            continue
        checked += 1
        file_part, _, anchor = target.partition("#")
        dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
        if not os.path.exists(dest):
            print(f"{os.path.relpath(path, root)}: {target}: no such file")
            bad += 1
        elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
            print(f"{os.path.relpath(path, root)}: {target}: no heading #{anchor}")
            bad += 1
print(f"{checked} relative links checked, {bad} broken")
sys.exit(1 if bad else 0)

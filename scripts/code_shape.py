#!/usr/bin/env python3
"""The shape of the code, for reviews of its structure, and the checks that keep it.

Without --check it prints the picture: the longest source files (their code before inline
unit tests), the longest functions (code and tests apart), and which top-level module of
the `sitehost` crate uses which, with the circles inside its folders.

With --check (scripts/test runs it) it fails when
- a source file's code runs past MAX_FILE_LINES lines;
- a function runs past MAX_FUNCTION_LINES lines without its reason: a WHOLE_BECAUSE
  comment above it or among its first lines, or an entry in FUNCTION_EXCEPTIONS (code) or
  TEST_FUNCTION_EXCEPTIONS (tests);
- a top-level module uses one above it in LAYERS, or one missing from LAYERS;
- the modules of one folder use each other in a circle (not in CIRCLE_EXCEPTIONS);
- a module other than the FEATURE_SEAM names a cargo feature;
- docs/architecture.md says otherwise: its layer table must list LAYERS in order, name
  only paths that exist, and name every record trait `Store` is made of.

What counts:
- A file's code: its lines before the first `#[cfg(test)]`-like attribute that opens an
  inline `mod ... {`. Test-only files (declared behind `#[cfg(test)]`, or named *test*)
  are left out of the file check.
- A function: the lines from its `fn` line to its closing brace, blank and comment lines
  included, doc comments and attributes not. A function inside another counts in both.
  Test functions (in tests/ folders, test-only files, inline test modules, or marked
  `#[test]`) are measured apart, with their own exceptions.
- A use: a `crate::`, `super::` or `self::` path in code outside unit tests (`use` trees
  expanded), resolved to the deepest module it names. Uses of a folder's own `mod.rs`
  items by its children, and of children by their parent, are not circles.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

MAX_FILE_LINES = 450
MAX_FUNCTION_LINES = 80

# The library's top-level modules, bottom to top, grouped by layer (docs/architecture.md
# has the same table): each module may use the modules listed before it, never one after.
LAYERS: list[tuple[str, list[str]]] = [
    ("foundation", ["error", "clock", "config"]),
    ("domain", ["domain"]),
    ("storage", ["store"]),
    ("services", ["auth", "fetch", "image_pipeline"]),
    ("operations", ["operations", "upload"]),
    ("composition", ["deployment"]),
    ("http", ["api"]),
    ("command", ["server", "client"]),
]

# The only files (under the library's src/) that may name a cargo feature outside unit
# tests: the optional modules' declarations and the composition that answers for every
# build.
FEATURE_SEAM = ["lib.rs", "store/mod.rs", "deployment.rs"]



# Code functions allowed past MAX_FUNCTION_LINES without a WHOLE_BECAUSE comment (for a
# file that cannot carry one): "path:name" (path under the repository) and why.
FUNCTION_EXCEPTIONS: dict[str, str] = {
}

# Test functions allowed past MAX_FUNCTION_LINES without a WHOLE_BECAUSE comment, by name,
# and why.
TEST_FUNCTION_EXCEPTIONS: dict[str, str] = {
}

# Uses that close a circle inside a folder, allowed for now: (folder, user, used), and why.
# The circle check leaves these uses out.
CIRCLE_EXCEPTIONS: dict[tuple[str, str, str], str] = {
}

# Where the library and the other crates' sources are, under the repository.
CODE_ROOTS = ["cli/src", "functions", "dynamo-double/src"]
TEST_ROOTS = ["cli/tests", "tests", "examples", "benches"]


def library_dir(repo: Path) -> str:
    """The library crate's folder: `sitehost/` (`shared/` in older trees)."""
    return "sitehost" if (repo / "sitehost" / "src" / "lib.rs").is_file() else "shared"


# --- reading Rust -------------------------------------------------------------------


def blank_strings_and_comments(text: str) -> str:
    """The text with the insides of comments, strings and char literals replaced by spaces
    (newlines kept), so braces and paths found in it are code."""
    out = list(text)
    i, n = 0, len(text)

    def blank(start: int, end: int) -> None:
        for k in range(start, min(end, n)):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        c = text[i]
        if text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            blank(i, end)
            i = end
        elif text.startswith("/*", i):
            depth, k = 1, i + 2
            while k < n and depth:
                if text.startswith("/*", k):
                    depth, k = depth + 1, k + 2
                elif text.startswith("*/", k):
                    depth, k = depth - 1, k + 2
                else:
                    k += 1
            blank(i, k)
            i = k
        elif raw := re.match(r'b?r(#*)"', text[i : i + 260]):
            if i > 0 and (text[i - 1].isalnum() or text[i - 1] == "_"):
                i += 1
                continue
            close = '"' + raw.group(1)
            end = text.find(close, i + raw.end())
            end = n if end < 0 else end + len(close)
            blank(i + 1, end - 1)
            i = end
        elif c == '"':
            k = i + 1
            while k < n and text[k] != '"':
                k += 2 if text[k] == "\\" else 1
            blank(i + 1, k)
            i = k + 1
        elif c == "'":
            # A char literal ('a', '\n', '\u{1F600}', b'x'), not a lifetime ('a, 'static).
            lit = re.match(r"'(\\(u\{[0-9a-fA-F]+\}|x[0-9a-fA-F]{2}|.)|[^\\'])'", text[i : i + 12])
            if lit:
                blank(i + 1, i + lit.end() - 1)
                i += lit.end()
            else:
                i += 1
        else:
            i += 1
    return "".join(out)


TEST_ATTRIBUTE = re.compile(r"#\[cfg\((.*)\)\]")


def is_test_cfg(line: str) -> bool:
    """`#[cfg(test)]` or `#[cfg(all(test, ...))]`: a cfg that holds only in tests."""
    found = TEST_ATTRIBUTE.fullmatch(line.strip())
    if not found:
        return False
    inner = found.group(1).replace(" ", "")
    return inner == "test" or (inner.startswith("all(") and "test" in inner.split("(", 1)[1].split(","))


def tests_start(lines: list[str]) -> int:
    """Where a file's inline unit tests start: a test cfg before a `mod ... {` (not a
    `mod x;` declaring a test file)."""
    for i, line in enumerate(lines):
        if is_test_cfg(line):
            following = next((l.strip() for l in lines[i + 1 :] if l.strip()), "")
            if following.startswith("mod ") and following.endswith("{"):
                return i
    return len(lines)


def test_only_children(lines: list[str]) -> set[str]:
    """The modules a file declares behind a test cfg (`#[cfg(test)] mod tests;`)."""
    found = set()
    for i, line in enumerate(lines):
        if is_test_cfg(line):
            for following in lines[i + 1 :]:
                following = following.strip()
                if not following or following.startswith("#["):
                    continue
                declared = re.fullmatch(r"(pub(\([^)]*\))?\s+)?mod\s+(\w+)\s*;", following)
                if declared:
                    found.add(declared.group(3))
                break
    return found


FN_START = re.compile(
    r"^[ \t]*(?:pub(?:\([^)]*\))?\s+)?(?:default\s+)?(?:const\s+)?(?:async\s+)?"
    r"(?:unsafe\s+)?(?:extern\s+\"[^\"]*\"\s+)?fn\s+(\w+)",
    re.M,
)


@dataclass
class Function:
    path: str
    name: str
    line: int  # 1-based, the `fn` line
    length: int
    test: bool
    # The reason given in the code, a `// Reads better whole: <why>` comment just above the
    # function or among its first lines, if any: such a function may run past the limit.
    whole_because: str | None = None

    @property
    def key(self) -> str:
        """What an exception names: a test by its name, other code by path and name."""
        return self.name if self.test else f"{self.path}:{self.name}"


# The comment that gives, in the code, the reason a function reads better whole.
WHOLE_BECAUSE = "// Reads better whole:"


def functions_in(path: str, text: str, all_test: bool) -> list[Function]:
    """Every function with a body in a file, with its length in lines."""
    code = blank_strings_and_comments(text)
    lines = text.splitlines()
    test_from = tests_start(lines)
    found = []
    for match in FN_START.finditer(code):
        # The body opens at the first `{` after the signature, unless a `;` ends it first
        # (a trait method without a default body).
        k = match.end()
        depth_paren = 0
        while k < len(code):
            ch = code[k]
            if ch in "([":
                depth_paren += 1
            elif ch in ")]":
                depth_paren -= 1
            elif depth_paren == 0 and ch in "{;":
                break
            k += 1
        if k >= len(code) or code[k] == ";":
            continue
        depth, end = 0, k
        while end < len(code):
            if code[end] == "{":
                depth += 1
            elif code[end] == "}":
                depth -= 1
                if depth == 0:
                    break
            end += 1
        first = code.count("\n", 0, match.start()) + 1
        while lines[first - 1].strip().startswith("#") or not re.search(r"\bfn\b", lines[first - 1]):
            first += 1
        last = code.count("\n", 0, end) + 1
        attributes, k = [], first - 2
        while k >= 0 and lines[k].strip().startswith(("#[", "//")):
            attributes.append(lines[k].strip())
            k -= 1
        marked = any(re.match(r"#\[(tokio::)?test\b", l) for l in attributes)
        test = all_test or first - 1 >= test_from or marked
        said = [l.strip() for l in attributes + lines[first:first + 3]]
        because = next((l.split(":", 1)[1].strip() for l in said if l.startswith(WHOLE_BECAUSE)), None)
        found.append(Function(path, match.group(1), first, last - first + 1, test, because))
    return found


USE_STATEMENT = re.compile(r"\buse\s+([^;]*);")
INLINE_PATH = re.compile(r"(?<![\w:])((?:crate|super|self)(?:::\w+)+)")


def expand_use_tree(tree: str) -> list[str]:
    """`a::{b, c::{d, e}}` -> `a::b`, `a::c::d`, `a::c::e` (`as` renames dropped)."""
    tree = re.sub(r"\s+", "", re.sub(r"\s+as\s+\w+", "", tree))

    def split_top(s: str) -> list[str]:
        parts, depth, start = [], 0, 0
        for i, ch in enumerate(s):
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            elif ch == "," and depth == 0:
                parts.append(s[start:i])
                start = i + 1
        parts.append(s[start:])
        return [p for p in parts if p]

    def expand(s: str) -> list[str]:
        brace = s.find("{")
        if brace < 0:
            return [s]
        prefix, inner = s[:brace], s[brace + 1 : s.rindex("}")]
        out = []
        for part in split_top(inner):
            for tail in expand(part):
                out.append(prefix + tail if tail != "self" else prefix.rstrip(":"))
        return out

    return expand(tree)


def paths_used(code: str) -> list[str]:
    """The `crate::`/`super::`/`self::` paths of (blanked) code: `use` trees expanded,
    then the paths written inline."""
    found = []
    for use in USE_STATEMENT.finditer(code):
        for path in expand_use_tree(use.group(1)):
            if re.match(r"(crate|super|self)::", path):
                found.append(path)
    rest = USE_STATEMENT.sub(" ", code)
    found += INLINE_PATH.findall(rest)
    return found


# --- the library's modules ------------------------------------------------------------


@dataclass
class Module:
    path: tuple[str, ...]  # () for the crate root
    file: str  # relative to the repository
    code: str = ""  # blanked code before unit tests
    test_only: bool = False
    children: set[str] = field(default_factory=set)


def library_modules(repo: Path, lib: str) -> dict[tuple[str, ...], Module]:
    """Every module file of the library, by module path, with which are test-only."""
    src = repo / lib / "src"
    modules: dict[tuple[str, ...], Module] = {}
    for file in sorted(src.rglob("*.rs")):
        rel = file.relative_to(src).with_suffix("")
        parts = tuple(rel.parts)
        if parts == ("lib",):
            parts = ()
        elif parts[-1] == "mod":
            parts = parts[:-1]
        text = file.read_text(encoding="utf-8")
        lines = text.splitlines()
        code = blank_strings_and_comments("\n".join(lines[: tests_start(lines)]))
        modules[parts] = Module(parts, str(file.relative_to(repo)), code)
    for parts, module in modules.items():
        if parts:
            parent = modules.get(parts[:-1])
            if parent:
                parent.children.add(parts[-1])
    for parts, module in modules.items():
        text = (repo / module.file).read_text(encoding="utf-8")
        for child in test_only_children(text.splitlines()):
            mark_test_only(modules, parts + (child,))
    for parts, module in modules.items():
        if parts and "test" in parts[-1]:
            mark_test_only(modules, parts)
    return modules


def mark_test_only(modules: dict[tuple[str, ...], Module], parts: tuple[str, ...]) -> None:
    for other, module in modules.items():
        if other[: len(parts)] == parts:
            module.test_only = True


def resolve(modules: dict, at: tuple[str, ...], is_folder_root: bool, path: str) -> tuple[str, ...] | None:
    """The deepest module a path names, from the module `at`, or None when it leaves the
    crate's modules (an item of the root, a glob)."""
    parts = path.split("::")
    if parts[0] == "crate":
        base, rest = (), parts[1:]
    else:
        base = at
        while parts and parts[0] in ("super", "self"):
            if parts[0] == "super":
                if not base:
                    return None
                base = base[:-1]
            parts = parts[1:]
        rest = parts
    target = base
    for part in rest:
        if target + (part,) in modules:
            target = target + (part,)
        else:
            break
    return target


def module_uses(modules: dict) -> list[tuple[tuple[str, ...], tuple[str, ...]]]:
    """(user, used) for every use in code of a non-test module."""
    uses = []
    for parts, module in modules.items():
        if module.test_only:
            continue
        for path in paths_used(module.code):
            target = resolve(modules, parts, module.file.endswith(("mod.rs", "lib.rs")), path)
            if target is not None and target != parts and not modules[target].test_only:
                uses.append((parts, target))
    return uses


def folder_edges(uses) -> dict[tuple[str, ...], dict[str, set[str]]]:
    """Per folder, which of its child modules uses which (through any descendant)."""
    edges: dict[tuple[str, ...], dict[str, set[str]]] = collections.defaultdict(
        lambda: collections.defaultdict(set)
    )
    for user, used in uses:
        common = 0
        while common < min(len(user), len(used)) and user[common] == used[common]:
            common += 1
        if common < len(user) and common < len(used):
            folder = user[:common]
            edges[folder][user[common]].add(used[common])
    return edges


def circles(graph: dict[str, set[str]]) -> list[tuple[str, ...]]:
    """The strongly connected groups of more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(tuple(sorted(group)))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


# --- the whole tree --------------------------------------------------------------------


def rust_files(repo: Path, roots: list[str]) -> list[str]:
    files = []
    for root in roots:
        for dirpath, _, names in os.walk(repo / root):
            files += [str(Path(dirpath, n).relative_to(repo)) for n in names if n.endswith(".rs")]
    return sorted(files)


@dataclass
class Shape:
    repo: Path
    lib: str
    sizes: list[tuple[int, int, str]]  # code lines, all lines, path
    functions: list[Function]
    modules: dict
    uses: list


def read_shape(repo: Path) -> Shape:
    lib = library_dir(repo)
    modules = library_modules(repo, lib)
    test_files = {m.file for m in modules.values() if m.test_only}
    code_files = rust_files(repo, [f"{lib}/src"] + CODE_ROOTS)
    test_roots = [f"{lib}/{r}" for r in TEST_ROOTS] + ["cli/tests"]
    sizes, functions = [], []
    for path in code_files:
        text = (repo / path).read_text(encoding="utf-8")
        lines = text.splitlines()
        test_file = path in test_files or "test" in Path(path).name
        if not test_file:
            sizes.append((tests_start(lines), len(lines), path))
        functions += functions_in(path, text, test_file)
    for path in rust_files(repo, sorted(set(test_roots))):
        functions += functions_in(path, (repo / path).read_text(encoding="utf-8"), True)
    sizes.sort(reverse=True)
    functions.sort(key=lambda f: (-f.length, f.path, f.line))
    return Shape(repo, lib, sizes, functions, modules, module_uses(modules))


def layer_order() -> list[str]:
    return [module for _, modules in LAYERS for module in modules]


def layer_problems(shape: Shape) -> list[str]:
    order = layer_order()
    problems = set()
    for top in sorted(p[0] for p in shape.modules if len(p) == 1):
        if top not in order:
            problems.add(f"{top}: a top-level module missing from LAYERS")
    for user, used in shape.uses:
        if not user or not used or user[0] == used[0]:
            continue
        a, b = user[0], used[0]
        if a in order and b in order and order.index(b) > order.index(a):
            problems.add(f"{a} -> {b}: upward ({'/'.join(user)} uses {'/'.join(used)})")
    return sorted(problems)


def without_exceptions(folder: tuple[str, ...], graph: dict[str, set[str]]) -> dict[str, set[str]]:
    name = "/".join(folder)
    return {
        user: {used for used in uses if (name, user, used) not in CIRCLE_EXCEPTIONS}
        for user, uses in graph.items()
    }


def circle_problems(shape: Shape) -> list[str]:
    """Circles inside folders, the allowed uses left out; allowed uses no longer there."""
    edges = folder_edges(shape.uses)
    problems = [
        f"{'/'.join(folder) or 'src'}/: {' <-> '.join(circle)} use each other in a circle"
        for folder, graph in sorted(edges.items())
        for circle in circles(without_exceptions(folder, graph))
    ]
    for folder, user, used in CIRCLE_EXCEPTIONS:
        if used not in edges.get(tuple(folder.split("/")), {}).get(user, ()):
            problems.append(f"CIRCLE_EXCEPTIONS: {folder}/{user} no longer uses {used} (drop it)")
    return problems


def length_problems(shape: Shape) -> list[str]:
    problems = [
        f"{path}: {code} lines of code, over {MAX_FILE_LINES}"
        for code, _, path in shape.sizes
        if code > MAX_FILE_LINES
    ]
    long = {}
    for function in shape.functions:
        if function.length > MAX_FUNCTION_LINES and not function.whole_because:
            long.setdefault(function.key, function)
    for key, function in long.items():
        exceptions = TEST_FUNCTION_EXCEPTIONS if function.test else FUNCTION_EXCEPTIONS
        if key not in exceptions:
            kind = "test function" if function.test else "function"
            problems.append(
                f"{function.path}:{function.line}: {kind} {function.name} is "
                f"{function.length} lines, over {MAX_FUNCTION_LINES} (cut it, or say why it "
                f"reads better whole: `{WHOLE_BECAUSE} <why>` above it)"
            )
    for exceptions in (FUNCTION_EXCEPTIONS, TEST_FUNCTION_EXCEPTIONS):
        for key in exceptions:
            if key not in long:
                problems.append(f"{key}: an exception no longer needed (drop it)")
    return problems


def feature_problems(shape: Shape) -> list[str]:
    problems = []
    for parts, module in sorted(shape.modules.items()):
        rel = module.file.removeprefix(f"{shape.lib}/src/")
        if module.test_only or rel in FEATURE_SEAM:
            continue
        if re.search(r'\bfeature\s*=\s*"', module.code):
            problems.append(f"{module.file}: names a cargo feature outside {', '.join(FEATURE_SEAM)}")
    return problems


def store_traits(shape: Shape) -> list[str]:
    code = shape.modules[("store",)].code
    found = re.search(r"pub trait Store:\s*([^{]*)\{", code)
    return sorted(t.strip() for t in found.group(1).split("+")) if found else []


def doc_problems(shape: Shape) -> list[str]:
    """docs/architecture.md's claims that the code can check."""
    doc_path = shape.repo / "docs" / "architecture.md"
    doc = doc_path.read_text(encoding="utf-8")
    problems = []
    rows = re.findall(r"^\| \*\*(\w+)\*\* \| ([^|]*) \|", doc, re.M)
    stated = [(layer, re.findall(r"`([\w/.]+)`", modules)) for layer, modules in rows]
    expected = [(layer, modules) for layer, modules in LAYERS]
    stated_tops = [(layer, [m.split("/")[0].removesuffix(".rs") for m in ms]) for layer, ms in stated]
    if stated_tops != expected:
        problems.append(
            "docs/architecture.md: its layer table (rows `| **layer** | `module`, ... |`) "
            f"says {stated_tops}, LAYERS says {expected}"
        )
    for _, modules in stated:
        for module in modules:
            if not (shape.repo / shape.lib / "src" / module).exists():
                problems.append(f"docs/architecture.md: the layer table names {module}, not in {shape.lib}/src")
    traits = store_traits(shape)
    section = re.search(r"^The record traits: (.*?)\n\n", doc, re.M | re.S)
    named = sorted(re.findall(r"`(\w+)`", section.group(1))) if section else []
    if named != traits:
        problems.append(
            f"docs/architecture.md: 'The record traits:' names {named}; `Store` is made of {traits}"
        )
    for number in re.findall(r"\b(two|three|four|five|six|seven|eight|nine|ten) record traits\b", doc):
        problems.append(f"docs/architecture.md: counts the record traits ({number}); name them instead")
    return problems


# --- output ----------------------------------------------------------------------------


def print_picture(shape: Shape, top: int) -> None:
    print(f"{'code':>6} {'lines':>6}  file (code: lines before #[cfg(test)])")
    for code, total, path in shape.sizes[:top]:
        print(f"{code:>6} {total:>6}  {path}")
    over = sum(1 for code, _, _ in shape.sizes if code > MAX_FILE_LINES)
    print(f"{over} files over {MAX_FILE_LINES} lines of code")
    for test, title in ((False, "functions"), (True, "test functions")):
        chosen = [f for f in shape.functions if f.test == test]
        print()
        print(f"{'lines':>6}  {title} (fn line to closing brace)")
        for function in chosen[:top]:
            exceptions = TEST_FUNCTION_EXCEPTIONS if test else FUNCTION_EXCEPTIONS
            why = exceptions.get(function.key)
            note = f"  [{why}]" if why else ""
            print(f"{function.length:>6}  {function.path}:{function.line} {function.name}{note}")
        over = sum(1 for f in chosen if f.length > MAX_FUNCTION_LINES)
        print(f"{over} {title} over {MAX_FUNCTION_LINES} lines, of {len(chosen)}")
    print()
    print(f"module uses ({shape.lib}/src, crate::/super:: paths, unit tests left out)")
    edges = folder_edges(shape.uses)
    order = layer_order()
    tops = sorted(edges.get((), {}), key=lambda m: (order.index(m) if m in order else len(order), m))
    for module in tops:
        used = sorted(edges[()][module], key=lambda m: (order.index(m) if m in order else len(order), m))
        print(f"  {module:<15} {', '.join(used)}")
    for problem in layer_problems(shape):
        print(f"  not allowed: {problem}")
    print()
    inner = sum(len(graph) for folder, graph in edges.items() if folder)
    print(f"circles inside folders ({inner} modules that use a sibling):")
    found = False
    for folder, graph in sorted(edges.items()):
        for circle in circles(graph):
            found = True
            print(f"  {'/'.join(folder) or 'src'}/: {' <-> '.join(circle)}")
            name = "/".join(folder)
            for user in circle:
                for used in sorted(graph[user] & set(circle)):
                    allowed = CIRCLE_EXCEPTIONS.get((name, user, used))
                    if allowed:
                        print(f"    allowed for now: {user} -> {used}  [{allowed}]")
    if not found:
        print("  none")


def main() -> int:
    parser = argparse.ArgumentParser(
        description="The shape of the code: longest files and functions, the import "
        "picture; with --check, the rules (docs/architecture.md).",
        epilog=f"Limits: {MAX_FILE_LINES} lines of code per file, {MAX_FUNCTION_LINES} "
        "lines per function (named exceptions in this script).",
    )
    parser.add_argument("top", nargs="?", type=int, default=15, help="how many of the longest files and functions to list (15)")
    parser.add_argument("--check", action="store_true", help="print nothing but problems; exit 1 on any")
    parser.add_argument(
        "--repo",
        type=Path,
        default=Path(__file__).resolve().parent.parent,
        help="the repository to read (this one); e.g. another worktree, to compare",
    )
    args = parser.parse_args()
    shape = read_shape(args.repo)
    if not args.check:
        print_picture(shape, args.top)
        return 0
    problems = (
        length_problems(shape)
        + layer_problems(shape)
        + circle_problems(shape)
        + feature_problems(shape)
        + doc_problems(shape)
    )
    for problem in problems:
        print(f"code-shape: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

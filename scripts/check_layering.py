#!/usr/bin/env python3
"""Fails on an #include that crosses modules along an edge docs/architecture.md does not allow,
and on LibTorch where the build does not expect it.

A module is a library folder (the longest one that holds the file: protocol/net/ before
protocol/, training/zoo/ before training/). The allowed edges are the table under "## Allowed
includes" in docs/architecture.md: one row per module, its second column the modules it may
include (a module may always include itself). System and third-party headers (<...>) are not
checked, but for LibTorch's own (<torch/...>, <ATen/...>, <c10/...>): only the rooms of training/
named in TORCH_ROOMS include them, directly or through a header of the project; and the files of
training/ that do are exactly the SOURCES of the vt_torch_library calls in training/'s
CMakeLists.txt files (the build compiles them with LibTorch's flags, and the sanitizer build
without UBSan's vptr check: cmake/sanitize.cmake).

  check_layering.py [--root DIR] [--inject FILE:HEADER ...]

--inject pretends FILE also includes HEADER: how the tests show that a forbidden edge fails.
"""
import argparse
import pathlib
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)
TORCH_INCLUDE = re.compile(r"^\s*#\s*include\s+<(?:torch|ATen|c10)/", re.MULTILINE)
TORCH_LIBRARY = re.compile(
    r"vt_torch_library\(\s*\w+\s+SOURCES\s+([^)]*?)(?:\s(?:OTHER_SOURCES|DEPS)\s|\))", re.DOTALL)
# The rooms whose files may include LibTorch; zoo/ and data/ stay torch-free, so that the light
# `veritrain` and the torch-free test programs link them without LibTorch.
TORCH_ROOMS = {"training", "training/portable", "training/model", "training/script"}
ROW = re.compile(r"^\|\s*`([a-z/]+)/`\s*\|([^|]*)\|")


def read_table(doc: pathlib.Path) -> dict[str, set[str]]:
    text = doc.read_text(encoding="utf-8")
    start = text.find("## Allowed includes")
    if start < 0:
        sys.exit(f"{doc}: no '## Allowed includes' section")
    table: dict[str, set[str]] = {}
    for line in text[start:].splitlines()[1:]:
        if line.startswith("## "):
            break
        m = ROW.match(line)
        if m:
            table[m.group(1)] = set(re.findall(r"`([a-z/]+)/`", m.group(2)))
    if not table:
        sys.exit(f"{doc}: the 'Allowed includes' table has no rows")
    return table


def module_of(path: str, modules: list[str]) -> str | None:
    """The longest module folder that holds `path` (a path relative to the root)."""
    best = None
    for m in modules:
        if path.startswith(m + "/") and (best is None or len(m) > len(best)):
            best = m
    return best


def torch_files_problems(root: pathlib.Path, includes: dict[str, list[str]],
                         modules: list[str]) -> list[str]:
    """LibTorch outside the torch rooms, and training/'s torch files against its CMake lists."""
    direct = {f for f in includes if (root / f).is_file() and
              TORCH_INCLUDE.search((root / f).read_text(encoding="utf-8", errors="replace"))}
    # A file includes LibTorch if it does or if a header of the project it includes does; `via`
    # keeps the header it came through, for the message.
    via: dict[str, str] = {f: "" for f in direct}
    changed = True
    while changed:
        changed = False
        for f, headers in includes.items():
            if f in via:
                continue
            for h in headers:
                if h in via:
                    via[f] = h
                    changed = True
                    break
    problems = []
    for f in sorted(via):
        m = module_of(f, modules)
        if m is None or m in TORCH_ROOMS:
            continue
        through = f" (through {via[f]})" if via[f] else ""
        problems.append(f"{f}: includes LibTorch{through}, which {m}/ may not")
    listed: set[str] = set()
    for cmake in sorted((root / "training").rglob("CMakeLists.txt")):
        folder = cmake.parent.relative_to(root).as_posix()
        text = re.sub(r"#[^\n]*", "", cmake.read_text(encoding="utf-8"))
        for m in TORCH_LIBRARY.finditer(text):
            listed |= {f"{folder}/{name}" for name in m.group(1).split()}
    found = {f for f in via if f.startswith("training/") and f.endswith(".cpp")
             and module_of(f, modules) in TORCH_ROOMS}
    problems += [f"{f}: includes LibTorch but is not in the SOURCES of a vt_torch_library "
                 f"({f.rsplit('/', 1)[0]}/CMakeLists.txt)" for f in sorted(found - listed)]
    problems += [f"{f}: in the SOURCES of a vt_torch_library but includes no LibTorch "
                 "(list it under OTHER_SOURCES)" for f in sorted(listed - found)]
    return problems


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default=str(pathlib.Path(__file__).resolve().parent.parent))
    ap.add_argument("--inject", action="append", default=[], metavar="FILE:HEADER")
    args = ap.parse_args()
    root = pathlib.Path(args.root)
    table = read_table(root / "docs" / "architecture.md")
    modules = sorted(table)
    for m in modules:
        for dep in table[m]:
            if dep not in table:
                sys.exit(f"docs/architecture.md: module {m}/ may include {dep}/, which has no row")

    includes: dict[str, list[str]] = {}
    for m in modules:
        folder = root / m
        if not folder.is_dir():
            sys.exit(f"docs/architecture.md: module {m}/ has no folder")
        for f in sorted(folder.rglob("*")):
            if f.suffix in (".h", ".cpp"):
                rel = f.relative_to(root).as_posix()
                includes[rel] = INCLUDE.findall(f.read_text(encoding="utf-8", errors="replace"))
    for spec in args.inject:
        file, _, header = spec.partition(":")
        includes.setdefault(file, []).append(header)

    bad = torch_files_problems(root, includes, modules)
    for file, headers in includes.items():
        src = module_of(file, modules)
        for h in headers:
            dst = module_of(h, modules)
            if dst is None or src is None or dst == src or dst in table[src]:
                continue
            bad.append(f'{file}: #include "{h}": {src}/ -> {dst}/ is not in the allowed table')
    for line in bad:
        print(line, file=sys.stderr)
    print(f"layering: {len(includes)} files, {sum(map(len, includes.values()))} includes, "
          f"{len(bad)} problem(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

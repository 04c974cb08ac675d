#!/usr/bin/env python3
"""Fails on an #include that crosses modules along an edge docs/architecture.md does not allow,
and on LibTorch where the build does not expect it.

A module is a library folder (the longest one that holds the file: protocol/net/ before
protocol/). The allowed edges are the table under "## Allowed includes" in docs/architecture.md:
one row per module, its second column the modules it may include (a module may always include
itself). System and third-party headers (<...>) are not checked, but for LibTorch's own
(<torch/...>, <ATen/...>, <c10/...>): only training/ includes them, and the files of training/
that include them, directly or through training/internal/, are exactly the list
VT_TRAINING_TORCH_SOURCES in training/CMakeLists.txt (the build compiles them with LibTorch's
flags, and the sanitizer build without UBSan's vptr check: cmake/sanitize.cmake).

  check_layering.py [--root DIR] [--inject FILE:HEADER ...]

--inject pretends FILE also includes HEADER: how the test shows that a forbidden edge fails.
"""
import argparse
import pathlib
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)
TORCH_INCLUDE = re.compile(r"^\s*#\s*include\s+<(?:torch|ATen|c10)/", re.MULTILINE)
TORCH_LIST = re.compile(r"set\(VT_TRAINING_TORCH_SOURCES\s+([^)]*)\)")
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
    """LibTorch outside training/, and training/'s torch files against its CMake list."""
    direct = {f for f in includes
              if TORCH_INCLUDE.search((root / f).read_text(encoding="utf-8", errors="replace"))}
    problems = [f"{f}: includes LibTorch, which only training/ may" for f in sorted(direct)
                if module_of(f, modules) != "training"]
    # A file includes LibTorch if it does or if a training/ header it includes does.
    torch_files = set(direct)
    changed = True
    while changed:
        changed = False
        for f, headers in includes.items():
            if f not in torch_files and any(h in torch_files for h in headers):
                torch_files.add(f)
                changed = True
    cmake = root / "training" / "CMakeLists.txt"
    m = TORCH_LIST.search(cmake.read_text(encoding="utf-8"))
    if not m:
        return problems + [f"{cmake.relative_to(root)}: no set(VT_TRAINING_TORCH_SOURCES ...)"]
    listed = {"training/" + name for name in m.group(1).split()}
    found = {f for f in torch_files if f.startswith("training/") and f.endswith(".cpp")}
    problems += [f"{f}: includes LibTorch but is not in VT_TRAINING_TORCH_SOURCES "
                 "(training/CMakeLists.txt)" for f in sorted(found - listed)]
    problems += [f"{f}: listed in VT_TRAINING_TORCH_SOURCES (training/CMakeLists.txt) but "
                 "includes no LibTorch" for f in sorted(listed - found)]
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

#!/usr/bin/env python3
"""Every GoogleTest test compiled into a test program is one ctest runs.

tests/CMakeLists.txt registers a program's tests with ctest through a filter built from the
suites its files define with TEST, TEST_F or TEST_P at the start of a line. A test defined any
other way (TYPED_TEST, a macro that expands to TEST) would compile into the program and never
run. This asks each program for its whole list (--gtest_list_tests, no filter) and ctest for the
tests it registered, and names every test the first has and the second lacks. ctest runs most
tests one per process (`--gtest_filter=Suite.Test`) and some whole suites in one
(`--gtest_filter=Suite.*:*/Suite.*`, vt_test's ONE_PROCESS_PER_SUITE): a test counts as run
when one of its program's filters selects it, and a filter that selects no test is named too.

  check_test_lists.py --build BUILD_DIR [--only PROGRAM] [--pretend-unlisted SUITE.TEST]
                      [--pretend-filter PROGRAM=FILTER]

--only checks one program (named by its file name) instead of all. --pretend-unlisted drops one
registered test from ctest's list, --pretend-filter adds a filter to a program's, so that each
failure can be seen (tests/CMakeLists.txt runs the check all three ways, the two pretended ones
on their one program: listing every program's tests loads LibTorch in several).
"""

import argparse
import fnmatch
import json
import os
import subprocess
import sys
import tempfile


def registered(build):
    """{program path: set of the --gtest_filter values ctest runs it with}.

    ctest is asked from a scratch folder whose test file includes the build's: even --show-only
    rewrites Testing/Temporary/LastTest.log, and in the build folder that is the log of the
    `ctest` run this check is part of."""
    build = os.path.abspath(build)
    with tempfile.TemporaryDirectory() as scratch:
        quoted = build.replace("\\", "\\\\").replace('"', '\\"')
        with open(os.path.join(scratch, "CTestTestfile.cmake"), "w", encoding="utf-8") as f:
            f.write(f'subdirs("{quoted}")\n')
        shown = subprocess.run(["ctest", "--show-only=json-v1"], cwd=scratch, check=True,
                               capture_output=True, text=True).stdout
    out = {}
    for test in json.loads(shown)["tests"]:
        command = test.get("command") or []
        for arg in command[1:]:
            if arg.startswith("--gtest_filter="):
                out.setdefault(command[0], set()).add(arg[len("--gtest_filter="):])
    return out


def compiled(program):
    """The full names of the tests in `program`, as --gtest_list_tests prints them."""
    listing = subprocess.run([program, "--gtest_list_tests"], check=True, capture_output=True,
                             text=True).stdout
    names, suite = [], None
    for line in listing.splitlines():
        text = line.split("#", 1)[0].rstrip()
        if not text:
            continue
        if not line.startswith(" "):
            suite = text
        else:
            names.append(suite + text.strip())
    return names


def selects(gtest_filter, name):
    """Whether GoogleTest's --gtest_filter selects `name`: `:`-separated patterns with `*` and
    `?`, and after a `-` the patterns it then leaves out."""
    positive, _, negative = gtest_filter.partition("-")

    def matches(patterns):
        return any(fnmatch.fnmatchcase(name, p) for p in patterns.split(":") if p)

    return matches(positive or "*") and not matches(negative)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", required=True)
    parser.add_argument("--only")
    parser.add_argument("--pretend-unlisted")
    parser.add_argument("--pretend-filter")
    args = parser.parse_args()
    by_program = registered(args.build)
    if args.only:
        by_program = {p: f for p, f in by_program.items() if os.path.basename(p) == args.only}
        if not by_program:
            print(f"--only {args.only}: ctest runs no program of that name", file=sys.stderr)
            return 1
    if args.pretend_unlisted:
        for filters in by_program.values():
            filters.discard(args.pretend_unlisted)
    if args.pretend_filter:
        name, _, extra = args.pretend_filter.partition("=")
        for program, filters in by_program.items():
            if os.path.basename(program) == name:
                filters.add(extra)
    missing = []
    tests = 0
    for program, filters in sorted(by_program.items()):
        names = compiled(program)
        tests += len(names)
        for name in names:
            if not any(selects(f, name) for f in filters):
                missing.append(f"{program}: {name} is compiled in but ctest does not run it "
                               "(define it with TEST, TEST_F or TEST_P at the start of a line)")
        for f in sorted(filters):
            if not any(selects(f, name) for name in names):
                missing.append(f"{program}: ctest runs it with --gtest_filter={f}, "
                               "which selects no test")
    for line in missing:
        print(line, file=sys.stderr)
    if missing:
        return 1
    print(f"{tests} tests in {len(by_program)} programs, each run by ctest")
    return 0


if __name__ == "__main__":
    sys.exit(main())

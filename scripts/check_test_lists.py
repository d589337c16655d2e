#!/usr/bin/env python3
"""Checks that every test tests/sanitizer_skips.txt names exists in tests/ (a renamed or removed
test would otherwise leave a line that skips nothing, or later skips a new test of that name).

  check_test_lists.py --root DIR    exit 1 listing the names no TEST / TEST_F / TEST_P defines
  check_test_lists.py --self-test   plants a missing name and expects it reported
"""
import argparse
import re
import sys
from pathlib import Path

TEST_MACRO = re.compile(r"\bTEST(?:_F|_P)?\(\s*(\w+)\s*,\s*(\w+)\s*\)")


def defined_tests(tests_dir: Path):
    found = set()
    for path in tests_dir.rglob("*.cpp"):
        for suite, name in TEST_MACRO.findall(path.read_text(errors="replace")):
            found.add((suite, name))
    return found


def listed_names(skips_text: str):
    for number, line in enumerate(skips_text.splitlines(), 1):
        fields = line.split()
        if not fields or fields[0].startswith("#"):
            continue
        if fields[0] not in ("asan", "tsan") or len(fields) < 2:
            yield number, line, "a line is `<asan|tsan> <Suite.Test or Suite.*> reason`"
            continue
        yield number, fields[1], None


def problems(skips_text: str, tests):
    suites = {suite for suite, _ in tests}
    out = []
    for number, name, error in listed_names(skips_text):
        if error:
            out.append(f"line {number}: {error}: {name!r}")
            continue
        suite, _, test = name.partition(".")
        if test == "*":
            if suite not in suites:
                out.append(f"line {number}: no test suite {suite} in tests/")
        elif (suite, test) not in tests:
            out.append(f"line {number}: no test {name} in tests/")
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent)
    parser.add_argument("--self-test", action="store_true")
    args = parser.parse_args()
    if args.self_test:
        tests = {("Suite", "Kept"), ("Other", "One")}
        text = "# comment\nasan Suite.Kept  why\ntsan Other.*  why\nasan Suite.Gone  why\nmsan X.Y\n"
        found = problems(text, tests)
        expected = ["no test Suite.Gone", "`<asan|tsan>"]
        if len(found) != 2 or not all(any(e in f for f in found) for e in expected):
            print("check_test_lists self-test failed:", found)
            return 1
        print("check_test_lists self-test: ok")
        return 0
    skips = args.root / "tests" / "sanitizer_skips.txt"
    found = problems(skips.read_text(), defined_tests(args.root / "tests"))
    for p in found:
        print(f"{skips}: {p}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())

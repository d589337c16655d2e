#!/usr/bin/env python3
"""Checks the layer rules of src/ (docs/ARCHITECTURE.md, "Layer rules").

    scripts/check_layers.py [--root DIR]   check the tree at DIR (default: this repository)
    scripts/check_layers.py --self-test    plant violations in a scratch tree and check that each
                                           is reported (and nothing else)

The table of allowed includes is read from docs/ARCHITECTURE.md, so the documented rules and the
checked ones are one table. Two rules:
  1. A file under src/<folder>/ includes only its own folder's headers and those of the folders in
     <folder>'s row (a folder without a row belongs to its parent's row).
  2. No backend file (src/backend/**) names an ops:: entity that op_types/ does not declare: the
     backends sit below the dispatch layer (ops/) and never call back into it.
Exit status 0 when the tree follows the rules, 1 with one line per violation otherwise, 2 when the
table cannot be read.
"""

import argparse
import os
import re
import shutil
import sys
import tempfile

DOC = os.path.join("docs", "ARCHITECTURE.md")
TABLE_HEADING = "## Layer rules"
VOCABULARY = "op_types"  # the folder that declares the ops:: names a backend may use
BACKEND = "backend"  # src/backend/** may name no other ops:: entity
SOURCE_EXTENSIONS = (".h", ".hpp", ".cpp", ".cc", ".cu", ".cuh")

INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
OPS_NAME = re.compile(r"\bops\s*::\s*([A-Za-z_]\w*)")
USING_OPS = re.compile(r"\busing\s+namespace\s+(?:::)?(?:ltx\s*::\s*)?ops\b|\bnamespace\s+\w+\s*=\s*(?:::)?(?:ltx\s*::\s*)?ops\b")
IDENTIFIER = re.compile(r"[A-Za-z_]\w*")


class TableError(Exception):
    pass


def read_table(root):
    """{folder: set of folders it may include}, from the Layer rules table of ARCHITECTURE.md."""
    path = os.path.join(root, DOC)
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise TableError(f"cannot read {path}: {e}")
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == TABLE_HEADING)
    except StopIteration:
        raise TableError(f"{path} has no '{TABLE_HEADING}' section with the table of allowed includes")
    table = {}
    in_table = False
    for line in lines[start + 1:]:
        if line.startswith("## "):
            break
        if not line.startswith("|"):
            if in_table:
                break
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 2 or set(cells[0]) <= set("- "):
            continue  # the separator row
        if cells[0] == "folder":
            in_table = True
            continue
        folders = re.findall(r"`([^`]+)`", cells[0])
        if len(folders) != 1:
            raise TableError(f"{path}: row '{line}' must name one folder in backquotes")
        allowed = {a.strip("/") for a in re.findall(r"`([^`]+)`", cells[1])}
        table[folders[0].strip("/")] = allowed
    if not table:
        raise TableError(f"{path}: the '{TABLE_HEADING}' section has no | folder | may include | table")
    for folder, allowed in table.items():
        unknown = sorted(a for a in allowed if a not in table)
        if unknown:
            raise TableError(f"{path}: row {folder}/ allows {', '.join(unknown)}, which have no row")
    cycle = find_cycle(table)
    if cycle:
        raise TableError(f"{path}: the layer rules must not form a cycle, but "
                         f"{' -> '.join(f + '/' for f in cycle)} may include each other")
    return table


def find_cycle(table):
    """A list of folders [a, b, ..., a] where each may include the next, or None."""
    state = {}  # folder -> 1 while on the path, 2 when done

    def visit(folder, path):
        state[folder] = 1
        path.append(folder)
        for lower in sorted(table[folder] - {folder}):
            if state.get(lower) == 1:
                return path[path.index(lower):] + [lower]
            if lower not in state:
                found = visit(lower, path)
                if found:
                    return found
        path.pop()
        state[folder] = 2
        return None

    for folder in sorted(table):
        if folder not in state:
            found = visit(folder, [])
            if found:
                return found
    return None


def layer_of(rel, table):
    """The row of a path relative to src/: its folder, or the nearest parent folder with a row."""
    parts = rel.split("/")[:-1]
    while parts:
        folder = "/".join(parts)
        if folder in table:
            return folder
        parts.pop()
    return None


def strip_comments_and_strings(text):
    """text with comments, string and character literals blanked (newlines kept for line numbers)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
            i = j
        elif c == '"' or (c == "'" and not (i > 0 and text[i - 1].isalnum())):  # not 1'000
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            if j < n and text[j] == c:
                j += 1
            out.append(" " * (j - i))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def vocabulary_names(src):
    """Every identifier that the headers of op_types/ declare or mention outside comments."""
    names = set()
    folder = os.path.join(src, VOCABULARY)
    for dirpath, _, files in os.walk(folder):
        for name in files:
            if name.endswith((".h", ".hpp", ".cuh")):
                with open(os.path.join(dirpath, name), encoding="utf-8") as f:
                    names.update(IDENTIFIER.findall(strip_comments_and_strings(f.read())))
    return names


def source_files(src):
    for dirpath, dirs, files in os.walk(src):
        dirs.sort()
        for name in sorted(files):
            if name.endswith(SOURCE_EXTENSIONS):
                path = os.path.join(dirpath, name)
                yield path, os.path.relpath(path, src).replace(os.sep, "/")


def check(root):
    """The violations of the tree at root, as 'path:line: message' strings (paths from root)."""
    table = read_table(root)
    src = os.path.join(root, "src")
    vocabulary = vocabulary_names(src)
    problems = []
    reported_folders = set()
    for path, rel in source_files(src):
        shown = "src/" + rel
        layer = layer_of(rel, table)
        if layer is None:
            top = rel.split("/")[0] if "/" in rel else "."
            if top not in reported_folders:
                reported_folders.add(top)
                problems.append(f"{shown}:1: folder src/{top}/ has no row in {DOC}'s layer rules; "
                                f"add one (which folders it may include) before adding code there")
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        for number, line in enumerate(text.splitlines(), 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            target = m.group(1)
            if not os.path.exists(os.path.join(src, target)):
                beside = os.path.normpath(os.path.join(os.path.dirname(rel), target)).replace(os.sep, "/")
                if os.path.exists(os.path.join(src, beside)):
                    target = beside  # an include relative to the file's own folder
                elif target.split("/")[0] not in {k.split("/")[0] for k in table}:
                    continue  # not a header of src/ (a system or third-party header)
            target_layer = layer_of(target, table)
            if target_layer is None or target_layer == layer or target_layer in table[layer]:
                continue
            allowed = ", ".join(sorted(table[layer])) or "nothing but itself"
            problems.append(f"{shown}:{number}: includes \"{m.group(1)}\" ({target_layer}/), but "
                            f"{layer}/ may include only {allowed} ({DOC}, Layer rules)")
        if layer != BACKEND and not layer.startswith(BACKEND + "/"):
            continue
        code = strip_comments_and_strings(text)
        for number, line in enumerate(code.splitlines(), 1):
            if USING_OPS.search(line):
                problems.append(f"{shown}:{number}: brings namespace ops into a backend file; name "
                                f"the op vocabulary as ops::<name> (from {VOCABULARY}/) instead")
            for m in OPS_NAME.finditer(line):
                if m.group(1) not in vocabulary:
                    problems.append(f"{shown}:{number}: names ops::{m.group(1)}, which {VOCABULARY}/ "
                                    f"does not declare: a backend never calls the dispatch layer "
                                    f"above it; use the backend's own function, or move the "
                                    f"composition up into src/ops/")
    return problems


# ---------------------------------------------------------------- self-test

PLANTED = {
    # path: (text, expected violations as (line, fragment) pairs)
    "src/op_types/elementwise.h": ("enum class BinaryOp { Add };\n", []),
    "src/ops/elementwise.h": ('#include "op_types/elementwise.h"\nvoid add_();\n', []),
    "src/backend/cuda/uses_ops.cu": (
        '#include "ops/elementwise.h"\n'
        '#include "op_types/elementwise.h"\n'
        "void f() {\n"
        "  g(ops::BinaryOp::Add);  // ops::add_ in a comment is fine\n"
        '  fail("call ops::pad first");\n'
        "  ops::add_(x, y);\n"
        "  ltx::ops::add_(x, y);\n"
        "}\n"
        "using namespace ltx::ops;\n",
        [(1, 'includes "ops/elementwise.h"'), (6, "names ops::add_"), (7, "names ops::add_"),
         (9, "brings namespace ops")]),
    "src/backend/cuda/uses_cpu.cu": ('#include "backend/cpu/conv.h"\n', [(1, 'includes "backend/cpu/conv.h"')]),
    "src/backend/cpu/conv.h": ('#include "op_types/elementwise.h"\n', []),
    "src/backend/step_graph.cpp": ('#include "backend/cuda/uses_cpu.cu"\n', []),
    "src/core/upward.h": ('#include "models/model.h"\n#include <vector>\n#include "CLI/CLI.hpp"\n',
                          [(1, 'includes "models/model.h"')]),
    "src/models/model.h": ("", []),
    "src/models/transformer/block.cpp": (
        '#include "ops/elementwise.h"\n#include "block.h"\n#include "pipelines/p.h"\n',
        [(3, 'includes "pipelines/p.h"')]),
    "src/models/transformer/block.h": ("", []),
    "src/pipelines/p.h": ("", []),
    "src/somewhere_new/thing.cpp": ("", [(1, "has no row")]),
}


def self_test():
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    scratch = tempfile.mkdtemp(prefix="check_layers_")
    try:
        os.makedirs(os.path.join(scratch, "docs"))
        shutil.copy(os.path.join(repo, DOC), os.path.join(scratch, DOC))
        for rel, (text, _) in PLANTED.items():
            path = os.path.join(scratch, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
        found = check(scratch)
        missing = []
        for rel, (_, expected) in PLANTED.items():
            for line, fragment in expected:
                hits = [p for p in found if p.startswith(f"{rel}:{line}:") and fragment in p]
                if not hits:
                    missing.append(f"{rel}:{line}: {fragment}")
                for p in hits:
                    found.remove(p)
        for m in missing:
            print(f"self-test: the planted violation {m} was not reported")
        for p in found:
            print(f"self-test: reported without a planted violation: {p}")
        # A table whose rows include each other is refused.
        with open(os.path.join(scratch, DOC), encoding="utf-8") as f:
            doc = f.read()
        with open(os.path.join(scratch, DOC), "w", encoding="utf-8") as f:
            f.write(doc.replace("| `core/` | |", "| `core/` | `ops/` |", 1))
        try:
            check(scratch)
            print("self-test: a table with the cycle core/ -> ops/ -> core/ was accepted")
            missing.append("cycle")
        except TableError as e:
            if "cycle" not in str(e):
                print(f"self-test: the cyclic table was refused for another reason: {e}")
                missing.append("cycle")
        if missing or found:
            return 1
        print(f"self-test: all {sum(len(e) for _, e in PLANTED.values())} planted violations "
              "reported, nothing else; a cyclic table refused")
        return 0
    finally:
        shutil.rmtree(scratch)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        help="repository root (default: the one holding this script)")
    parser.add_argument("--self-test", action="store_true",
                        help="check planted violations in a scratch tree instead")
    args = parser.parse_args()
    try:
        if args.self_test:
            return self_test()
        problems = check(args.root)
    except TableError as e:
        print(f"check_layers: {e}", file=sys.stderr)
        return 2
    for p in problems:
        print(p)
    if problems:
        print(f"check_layers: {len(problems)} violation(s) of the layer rules ({DOC}, Layer rules)")
        return 1
    print("check_layers: the includes under src/ follow the layer rules")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Checks that every C++ file of a target can share a translation unit with every other.

A unity build (LTX_UNITY_BUILD, docs/CONTRIBUTING.md "Build layout") compiles a target's files in
batches that shift as files are added, so two files' local names may only meet later. This
includes all of a target's batched sources in one file, in their build order and reversed (a
using-directive reaches only the files after it), and compiles that with the target's own command
line and -fsyntax-only: a clash anywhere in the target is an error now.

usage: scripts/check_unity.py BUILD_DIR [TARGET...]   (default: every C++ target of BUILD_DIR)
BUILD_DIR is a configured Ninja build folder, unity on or off; nothing is built.
"""
import os
import re
import shlex
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict


def compile_commands(build_dir):
    """{target: [(source, command)]} for the C++ objects in build.ninja."""
    # CXX_COMPILER__<target>_<config> (a config name has no underscore)
    rule = re.compile(r'^build (\S+\.o): CXX_COMPILER__(\w+)_[A-Za-z]+ (\S+)')
    objects = defaultdict(list)
    with open(os.path.join(build_dir, 'build.ninja')) as f:
        for line in f:
            m = rule.match(line)
            if m:
                objects[m.group(2)].append((m.group(1), m.group(3)))
    out = {}
    for target, objs in objects.items():
        cmds = subprocess.run(['ninja', '-C', build_dir, '-t', 'commands'] + [o for o, _ in objs],
                              capture_output=True, text=True, check=True).stdout.splitlines()
        by_obj = {}
        for c in cmds:
            m = re.search(r' -o (\S+\.o) ', c)
            if m:
                by_obj[m.group(1)] = c
        out[target] = [(os.path.normpath(os.path.join(build_dir, s)), by_obj[o]) for o, s in objs]
    return out


def batched_sources(entries):
    """The sources that may share a unit (a unity file's includes, or the files with the
    target's common command line), and that command line."""
    def flags(c):
        return re.sub(r' (-MT|-MF|-o|-c) \S+', '', c)
    common = Counter(flags(c) for _, c in entries).most_common(1)[0][0]
    sources, command = [], None
    for src, c in entries:
        if flags(c) != common:
            continue  # own source properties: compiled alone in unity builds too
        command = c
        if '/Unity/unity_' in src:
            with open(src) as f:
                sources += re.findall(r'^#include "(.+)"', f.read(), flags=re.M)
        else:
            sources.append(src)
    return sources, command


def syntax_check(build_dir, target, sources, command, reverse):
    args = shlex.split(command)
    if args[0].endswith('ccache'):
        args = args[1:]
    kept, i = [], 0
    while i < len(args):
        if args[i] in ('-o', '-MT', '-MF', '-c'):
            i += 2
            continue
        if args[i] != '-MD':
            kept.append(args[i])
        i += 1
    order = list(reversed(sources)) if reverse else sources
    with tempfile.NamedTemporaryFile('w', suffix='.cpp', prefix=f'unity_{target}_') as tu:
        tu.write(''.join(f'#include "{s}"\n' for s in order))
        tu.flush()
        cmd = kept + ['-Wno-subobject-linkage', '-fsyntax-only', tu.name]
        if 'clang' in os.path.basename(kept[0]):
            cmd.remove('-Wno-subobject-linkage')
        return subprocess.run(cmd, cwd=build_dir).returncode == 0


def main():
    if len(sys.argv) < 2 or sys.argv[1] in ('-h', '--help'):
        sys.exit(__doc__)
    build_dir = sys.argv[1]
    targets = compile_commands(build_dir)
    wanted = sys.argv[2:] or sorted(targets)
    failed = []
    for t in wanted:
        if t not in targets:
            sys.exit(f'check_unity: no C++ target {t} in {build_dir} (targets: {" ".join(sorted(targets))})')
        sources, command = batched_sources(targets[t])
        if len(sources) < 2:
            continue
        for reverse in (False, True):
            ok = syntax_check(build_dir, t, sources, command, reverse)
            print(f'check_unity: {t} ({len(sources)} files{", reversed" if reverse else ""}): '
                  f'{"ok" if ok else "CLASH"}', flush=True)
            if not ok:
                failed.append(t)
                break
    if failed:
        sys.exit(f'check_unity: clashes in {" ".join(failed)}; see docs/CONTRIBUTING.md "Build layout"')


if __name__ == '__main__':
    main()

#!/usr/bin/env python3
"""Where a kernel's instructions go: an Nsight Compute source-page export grouped by how often each SASS line ran.

Made for issue-bound kernels (bench/README.md, "Instruction by instruction"):

  LTX_CUDA_PROFILER_RANGE=1 ncu --profile-from-start off --kernel-name-base demangled \\
      -k 'regex:gated_add_rms_norm_modulate_kernel' -c 3 --section SourceCounters \\
      -o norms ltx bench transformer --device cuda --warmup 0 --iters 1
  ncu -i norms.ncu-rep --page source --csv --print-source sass > norms.csv
  python3 tools/bench/ncu_source_summary.py norms.csv [--elements N] [--show COUNT] [--stalls] [--all]

A kernel's loops show up as sets of lines executed equally often: in a block-per-row kernel the
lines run once per chunk of a row, once per row, once per launch. Per kernel name the launch with
the most instructions is shown (--all: every launch); --elements N adds thread instructions per
element of an N-element problem; --show COUNT lists the SASS lines executed COUNT times;
--stalls prints the warp-state samples by reason (the stall_* columns), most frequent first.
"""
import argparse
import csv
import sys
from collections import defaultdict


def number(text: str) -> float:
    try:
        return float(text.replace(",", ""))  # ncu prints thousands separators
    except ValueError:
        return 0.0


def read_launches(path: str):
    """The export's launches: (kernel name, header, SASS rows); a section ncu repeats is kept once."""
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    launches = []
    current = None
    for r in rows:
        if not r:
            continue
        if r[0] == "Kernel Name":
            current = {"name": r[1] if len(r) > 1 else "", "header": None, "rows": []}
            launches.append(current)
        elif current is not None and r[0] == "Address":
            current["header"] = r
        elif current is not None and current["header"] is not None and len(r) == len(current["header"]):
            current["rows"].append(r)
    kept = []
    for launch in launches:
        if kept and kept[-1]["name"] == launch["name"] and kept[-1]["rows"] == launch["rows"]:
            continue
        kept.append(launch)
    return kept


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv", help="ncu --page source --csv --print-source sass export")
    ap.add_argument("--elements", type=float, default=0, help="problem elements, for instructions per element")
    ap.add_argument("--show", type=int, default=None, help="list the SASS lines executed this many times")
    ap.add_argument("--all", action="store_true", help="every launch, not only each kernel's largest")
    ap.add_argument("--stalls", action="store_true", help="warp-state samples by reason")
    ap.add_argument("--name-chars", type=int, default=110, help="kernel name characters kept")
    args = ap.parse_args()

    launches = read_launches(args.csv)
    if not launches:
        print(f"{args.csv}: no 'Kernel Name' sections (not an ncu --page source --csv export)", file=sys.stderr)
        return 1
    for launch in launches:
        header = launch["header"] or []
        for column in ("Source", "Instructions Executed"):
            if column not in header:
                print(f"{args.csv}: no '{column}' column (profile with --section SourceCounters and export "
                      "with --print-source sass)", file=sys.stderr)
                return 1
        col_exec = header.index("Instructions Executed")
        launch["total"] = sum(number(r[col_exec]) for r in launch["rows"])

    if not args.all:
        largest = {}
        for launch in launches:
            best = largest.get(launch["name"])
            if best is None or launch["total"] > best["total"]:
                largest[launch["name"]] = launch
        launches = sorted(largest.values(), key=lambda l: -l["total"])

    for launch in launches:
        header, rows = launch["header"], launch["rows"]
        col_exec, col_src = header.index("Instructions Executed"), header.index("Source")
        col_samples = header.index("# Samples") if "# Samples" in header else None
        total = launch["total"]
        samples_total = sum(number(r[col_samples]) for r in rows) if col_samples is not None else 0
        line = f"{launch['name'][: args.name_chars]}\n  {total / 1e6:.2f} M warp instructions"
        if args.elements > 0:
            line += f", {32 * total / args.elements:.1f} thread instructions per element"
        print(line + (f", {int(samples_total)} stall samples" if col_samples is not None else ""))
        groups = defaultdict(lambda: [0, 0.0, 0.0])  # executions -> lines, instructions, samples
        for r in rows:
            executions = number(r[col_exec])
            if executions == 0:
                continue
            g = groups[executions]
            g[0] += 1
            g[1] += executions
            g[2] += number(r[col_samples]) if col_samples is not None else 0
        print(f"  {'executions':>12} {'lines':>6} {'M instr':>9} {'share':>6} {'samples':>8}")
        for executions, (lines, instructions, samples) in sorted(groups.items(), key=lambda kv: -kv[1][1]):
            share = 100 * instructions / total if total > 0 else 0.0
            print(f"  {int(executions):12d} {lines:6d} {instructions / 1e6:9.3f} {share:5.1f}% {int(samples):8d}")
        if args.stalls:
            reasons = [(i, c) for i, c in enumerate(header) if c.startswith("stall_") and "(Not Issued)" not in c]
            if not reasons:
                print("  no stall_* columns (export the source page of a SourceCounters profile)")
            else:
                sums = [(c[len("stall_"):], sum(number(r[i]) for r in rows)) for i, c in reasons]
                all_samples = sum(v for _, v in sums)
                top = sorted(sums, key=lambda kv: -kv[1])
                shown = [(name, 100 * v / all_samples) for name, v in top if all_samples > 0]
                print("  stalls: " + ", ".join(f"{name} {pct:.0f}%" for name, pct in shown if pct >= 0.5))
        if args.show is not None:
            print(f"  lines executed {args.show} times:")
            for r in rows:
                if int(number(r[col_exec])) == args.show:
                    samples = int(number(r[col_samples])) if col_samples is not None else 0
                    print(f"    {r[0][-6:]} {samples:6d}  {r[col_src].strip()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Sums per-kernel GPU times from an Nsight Compute CSV export, heaviest first.

Made for finding where a transformer step's time goes kernel by kernel (bench/README.md):

  LTX_CUDA_PROFILER_RANGE=1 ncu --profile-from-start off --clock-control none \\
      --metrics gpu__time_duration.sum -o step ltx bench transformer --device cuda --warmup 1 --iters 1
  ncu -i step.ncu-rep --csv --page raw --print-units base > step.csv
  python3 tools/bench/ncu_kernel_summary.py step.csv [--top 60] [--by name|shape]

Each kernel is timed alone (Nsight Compute serialises launches), so the times are what the kernel
costs by itself, without the other stream's concurrent work. Rows group by kernel name (template
arguments cut at --name-chars), or with --by shape also by grid and block size.
"""
import argparse
import csv
import sys
from collections import defaultdict


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv", help="ncu --csv --page raw export")
    ap.add_argument("--top", type=int, default=50, help="rows to print (default 50)")
    ap.add_argument("--by", choices=["name", "shape"], default="shape")
    ap.add_argument("--name-chars", type=int, default=90, help="kernel name characters kept")
    args = ap.parse_args()

    with open(args.csv, newline="") as f:
        rows = [r for r in csv.reader(f)]
    header_at = next((i for i, r in enumerate(rows) if "Kernel Name" in r), None)
    if header_at is None:
        print(f"{args.csv}: no 'Kernel Name' column (not an ncu --csv --page raw export)", file=sys.stderr)
        return 1
    header = rows[header_at]
    col = {name: header.index(name) for name in header}
    metric = "gpu__time_duration.sum"
    if metric not in col:
        print(f"{args.csv}: no {metric} column (profile with --metrics {metric})", file=sys.stderr)
        return 1
    total_ns = 0.0
    groups = defaultdict(lambda: [0.0, 0])
    for r in rows[header_at + 1:]:
        if len(r) != len(header):
            continue
        try:
            ns = float(r[col[metric]].replace(",", ""))  # ncu prints thousands separators
        except ValueError:
            continue  # the units row
        name = r[col["Kernel Name"]][: args.name_chars]
        key = name if args.by == "name" else f"{name}  grid {r[col['Grid Size']]} block {r[col['Block Size']]}"
        groups[key][0] += ns
        groups[key][1] += 1
        total_ns += ns
    print(f"{sum(c for _, c in groups.values())} kernels, {total_ns / 1e6:.2f} ms in all")
    print(f"{'ms':>10} {'calls':>6} {'us/call':>9} {'share':>6}  kernel")
    for key, (ns, calls) in sorted(groups.items(), key=lambda kv: -kv[1][0])[: args.top]:
        print(f"{ns / 1e6:10.3f} {calls:6d} {ns / calls / 1e3:9.1f} {100 * ns / total_ns:5.1f}%  {key}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Kernel A/B: two builds of `ssmcheck_bench` side by side on one GPU (a benchmark, never a test;
docs/cuda.md "Running the gpu tests and the benchmark").

    bench/bench_ab.py [--reps 2] [--preset P] [--layers N] [--max-batch B] [--bench-reps R]
                      [--rows REGEX] NEW_BENCH BASE_BENCH

Runs BASE and NEW alternately, --reps times each (`ssmcheck_bench --json`), and prints one
markdown row per op, h mode and batch, in ssmcheck_bench's order: each build's best time (us per
step, every layer) and the change of NEW against BASE in percent (negative: NEW faster).
`spread` is the largest gap between two runs of one build on that row, in percent: a change
smaller than it is noise. --rows keeps the rows whose "op h B" (e.g. "decode f32 128") matches
the regular expression. Exit status 1, with the reason on stderr, when a run fails or the two
builds did not measure the same rows.
"""
import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path


def run(binary, args, out):
    """One ssmcheck_bench run: {(op, h, batch): time_us}."""
    p = subprocess.run([binary] + args + ["--json", str(out)], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"bench_ab: {binary} exited {p.returncode}:\n{p.stdout}{p.stderr}")
    try:
        rows = json.loads(Path(out).read_text())["rows"]
        return {(r["op"].strip(), r["h"], int(r["batch"])): float(r["time_us"]) for r in rows if r["h"] != "-"}
    except (OSError, ValueError, KeyError, TypeError) as e:
        sys.exit(f"bench_ab: {binary} wrote no readable --json {out}: {e!r}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("new")
    ap.add_argument("base")
    ap.add_argument("--reps", type=int, default=2, help="runs of each build, alternating (base first)")
    ap.add_argument("--preset", default="qwen3-next-80b")
    ap.add_argument("--layers", type=int, default=0)
    ap.add_argument("--max-batch", type=int, default=128)
    ap.add_argument("--bench-reps", type=int, default=5, help="ssmcheck_bench --reps")
    ap.add_argument("--rows", default="", help="keep rows whose 'op h B' matches this regular expression")
    a = ap.parse_args()
    if a.reps < 1:
        sys.exit("bench_ab: --reps must be at least 1")
    try:
        keep = re.compile(a.rows)
    except re.error as e:
        sys.exit(f"bench_ab: --rows {a.rows!r}: {e}")
    args = ["--preset", a.preset, "--max-batch", str(a.max_batch), "--reps", str(a.bench_reps)]
    if a.layers:
        args += ["--layers", str(a.layers)]
    runs = {"base": [], "new": []}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(a.reps):
            for name, binary in (("base", a.base), ("new", a.new)):
                runs[name].append(run(binary, args, Path(tmp) / f"{name}{i}.json"))
    keys = [set(r) for r in runs["base"] + runs["new"]]
    if any(k != keys[0] for k in keys):
        sys.exit("bench_ab: the runs did not measure the same rows (different ssmcheck_bench versions?)")
    print(f"{a.preset}: best of {a.reps} runs each, us per step (every layer); change: new against base")
    print("| op | h | B | base us | new us | change | spread |")
    print("|---|---|---|---|---|---|---|")
    for key in runs["base"][0]:  # ssmcheck_bench's own order
        op, h, batch = key
        if not keep.search(f"{op} {h} {batch}"):
            continue
        base = [r[key] for r in runs["base"]]
        new = [r[key] for r in runs["new"]]
        spread = max(max(v) / min(v) - 1 for v in (base, new)) * 100
        change = (min(new) / min(base) - 1) * 100
        print(f"| {op} | {h} | {batch} | {min(base):.1f} | {min(new):.1f} | {change:+.1f}% | {spread:.1f}% |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Campaign throughput: ops per second of a fixed set of `ssmcheck fuzz` campaigns (a benchmark,
never a test; docs/fuzzing.md "Speed").

    bench/campaign_throughput.py [--backend reference|cuda] [--reps 3] [--jobs N] BIN [BASELINE_BIN]

Runs each campaign --reps times with BIN (and, alternating, BASELINE_BIN), prints one markdown row
per campaign with the median ops/s and, from BIN's last run, the summary's `time:` split. With a
baseline it also checks that both binaries printed the same summary (cases, ops, accept
positions, refusals, coverage, verdict; times left out): a speed-up must not change a campaign.
Exit status 1 when they differ or a campaign fails. --jobs N runs BIN's campaigns in N processes
(`fuzz --jobs`), the baseline's in one: `--jobs 8 BIN BIN` measures the processes against one.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

# (name, fuzz arguments): the small odd presets and the real shapes of issue 13
CAMPAIGNS = [
    ("odd presets, 300 cases", ["--cases", "300", "--seed", "1"]),
    ("qwen3-next-80b, 2 layers, 6 cases",
     ["--preset", "qwen3-next-80b", "--layers", "2", "--cases", "6", "--seed", "1"]),
    ("qwen3-next-80b, 1 layer, f16, 10 cases",
     ["--preset", "qwen3-next-80b", "--layers", "1", "--h-mode", "f16", "--cases", "10", "--seed", "1"]),
]

OPS_RATE = re.compile(r" in [0-9.]+ s \(([0-9]+) ops/s\)")


def run(binary, backend, args, jobs=1, env=None):
    """One campaign: (ops/s, the summary without its timing, the time: line); env: variables set on
    top of this process's environment for it."""
    with tempfile.TemporaryDirectory() as out:
        jobs_flag = ["--jobs", str(jobs)] if jobs != 1 else []  # builds before --jobs run too (the "before" of docs/fuzzing.md)
        p = subprocess.run([binary, "fuzz", "--backend", backend, "--out", out] + jobs_flag + args,
                           capture_output=True, text=True, env=dict(os.environ, **(env or {})))
    text = p.stdout + p.stderr
    if p.returncode != 0:
        sys.exit(f"{binary} fuzz {' '.join(args)} exited {p.returncode}:\n{text}")
    lines = [l for l in text.splitlines() if not l.startswith("ssmcheck fuzz:")]
    m = next((OPS_RATE.search(l) for l in lines if OPS_RATE.search(l)), None)
    if not m:
        sys.exit(f"{binary}: no 'ops/s' in the summary:\n{text}")
    timing = next((l.strip() for l in lines if l.strip().startswith("time:")), "")
    summary = "\n".join(OPS_RATE.sub("", l) for l in lines if not l.strip().startswith("time:"))
    return int(m.group(1)), summary, timing


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("binary")
    ap.add_argument("baseline", nargs="?")
    ap.add_argument("--backend", default="reference")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=1)
    a = ap.parse_args()
    binaries = ["bin"] + (["baseline"] if a.baseline else [])
    path = {"bin": a.binary, "baseline": a.baseline}
    jobs = {"bin": a.jobs, "baseline": 1}
    header = "| campaign (" + a.backend + ") |" + (" baseline ops/s |" if a.baseline else "") + " ops/s | time |"
    print(header)
    print("|---|" + ("---|" if a.baseline else "") + "---|---|")
    same = True
    for name, args in CAMPAIGNS:
        rates = {b: [] for b in binaries}
        summaries, timing = {}, ""
        for _ in range(a.reps):
            for b in reversed(binaries):  # alternate, the baseline first
                rate, summary, t = run(path[b], a.backend, args, jobs[b])
                rates[b].append(rate)
                summaries[b] = summary
                if b == "bin":
                    timing = t
        cells = [f"{statistics.median(rates[b]):.0f}" for b in reversed(binaries)]
        print(f"| {name} | " + " | ".join(cells) + f" | {timing.removeprefix('time: ')} |")
        if a.baseline and summaries["baseline"] != summaries["bin"]:
            same = False
            print(f"  DIFFERENT SUMMARIES for {name}:\n--- baseline\n{summaries['baseline']}\n--- {a.binary}\n"
                  f"{summaries['bin']}", file=sys.stderr)
    if a.baseline:
        print("summaries identical" if same else "summaries DIFFER", file=sys.stderr)
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""What running the system under test in its host process costs (issue 39; a benchmark, never a
test; docs/plugins.md "The host process").

    bench/host_overhead.py [--reps 3] BIN PLUGIN.so [--gate-backend cuda]

Runs the same campaigns through `plugin:PLUGIN.so` (its host process, the default) and
`plugin-in-process:PLUGIN.so` (loaded into ssmcheck), alternating, and prints one markdown row per
campaign: the median ops/s of each and their ratio; then the hosted one's with its exports in
calls of their own (SSMCHECK_EXPORTS_WITH_OPS=off: before they travelled with the ops' replies)
and with field digests switched off (SSMCHECK_FIELD_DIGESTS=off). All must print the same summary
(cases, ops, coverage, verdict; times left out): the host must not change a campaign. With
--gate-backend B it also times `ssmcheck gate --backend B` against `ssmcheck gate --backend
plugin:PLUGIN.so` (the default gate: golden and faulty traces and the seeded campaign) and prints
the ratio of the wall times. Exit status 1 when summaries differ or a run fails.
"""
import argparse
import statistics
import subprocess
import sys
import tempfile
import time

# campaign_throughput.py is the script beside this one: run as a script, this directory is
# sys.path[0], so it imports by name
from campaign_throughput import run  # one campaign: ops/s, summary, time line

# the small presets of issue 39's target, where the host's cost per call weighs most
CAMPAIGNS = [
    ("tiny, 300 cases", ["--preset", "tiny", "--cases", "300", "--seed", "3"]),
    ("odd-a, 200 cases", ["--preset", "odd-a", "--cases", "200", "--seed", "3"]),
    ("drawn presets, 200 cases", ["--cases", "200", "--seed", "3"]),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("plugin")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--gate-backend", default="")
    a = ap.parse_args()
    hosted, inproc = "plugin:" + a.plugin, "plugin-in-process:" + a.plugin
    # (column, backend, environment on top of this one's): the variants run alternating, in this order
    variants = [("in process", inproc, {}), ("hosted", hosted, {}),
                ("hosted, exports in their own calls", hosted, {"SSMCHECK_EXPORTS_WITH_OPS": "off"}),
                ("hosted, no field digests", hosted, {"SSMCHECK_FIELD_DIGESTS": "off"})]
    print("| campaign | in process (ops/s) | hosted (ops/s) | hosted / in process | "
          "hosted, exports in their own calls (ops/s) | hosted, no field digests (ops/s) |")
    print("|---|---:|---:|---:|---:|---:|")
    bad = False
    label = "plugin:" + a.plugin.rsplit("/", 1)[-1].rsplit(".", 1)[0]
    for name, args in CAMPAIGNS:
        rates = {v[0]: [] for v in variants}
        summaries = {}
        for _ in range(a.reps):
            for column, backend, env in variants:
                r, summary, _ = run(a.binary, backend, args, env=env)
                rates[column].append(r)
                summaries[column] = summary.replace(hosted, "B").replace(inproc, "B").replace(label, "B")
        same = len(set(summaries.values())) == 1
        bad |= not same
        med = {k: statistics.median(v) for k, v in rates.items()}
        h, i = med["hosted"], med["in process"]
        print(f"| {name} | {i:.0f} | {h:.0f} | {h / i:.2f}{'' if same else ' (SUMMARIES DIFFER)'} | "
              f"{med['hosted, exports in their own calls']:.0f} | {med['hosted, no field digests']:.0f} |", flush=True)
    if a.gate_backend:
        walls = {}
        for b in (a.gate_backend, hosted):
            with tempfile.TemporaryDirectory() as d:
                t = time.monotonic()
                p = subprocess.run([a.binary, "gate", "--backend", b, "--junit", d + "/j.xml"], capture_output=True,
                                   text=True)
                walls[b] = time.monotonic() - t
            if p.returncode != 0:
                print(f"gate --backend {b} exited {p.returncode}:\n{p.stdout[-2000:]}{p.stderr[-2000:]}")
                bad = True
        print(f"\ngate: --backend {a.gate_backend} {walls[a.gate_backend]:.1f} s, --backend {hosted} "
              f"{walls[hosted]:.1f} s: {walls[hosted] / walls[a.gate_backend]:.2f}x")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()

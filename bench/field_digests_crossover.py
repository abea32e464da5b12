#!/usr/bin/env python3
"""Where field digests start to pay (a benchmark, never a test; docs/plugins.md "Field digests").

    bench/field_digests_crossover.py [--reps 3] BIN PLUGIN.so

Runs the same campaign on presets of growing live state through PLUGIN.so (a plug-in that offers
ssmp_plugin.field_digests: the reference or CUDA plug-in), in ssmcheck's process and hosted, with
field digests forced on and off (SSMCHECK_FIELD_DIGESTS), alternating, and prints one markdown row
per preset: the live state's size and the median ops/s of each. All four runs of a preset must
print the same summary (cases, ops, coverage, verdict): digests must not change a campaign. Exit
status 1 when summaries differ or a run fails. plugin::kFieldDigestsMinBytes (the default bound
of SSMCHECK_FIELD_DIGESTS=auto) was set from this table.
"""
import argparse
import os
import statistics
import sys

# campaign_throughput.py is the script beside this one: run as a script, this directory is
# sys.path[0], so it imports by name
from campaign_throughput import run  # one campaign: ops/s, summary, time line

# (preset flags, cases, live state in KiB: plugin::live_state_bytes, h and conv of every layer in FP32)
PRESETS = [
    (["--preset", "tiny"], 200, 2.8),
    (["--preset", "hybrid-odd"], 200, 25.4),
    (["--preset", "odd-a"], 200, 27.8),
    (["--preset", "odd-c"], 200, 28.1),
    (["--preset", "mamba-odd-a"], 200, 62.2),
    (["--preset", "mamba-odd-c"], 80, 92.6),
    (["--preset", "odd-d"], 80, 164.7),
    (["--preset", "nemotron-h-8b", "--layers", "1"], 20, 4256.0),
]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("binary")
    ap.add_argument("plugin")
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    print("| preset (live state) | in process, on / off (ops/s) | hosted, on / off (ops/s) |")
    print("|---|---:|---:|")
    bad = False
    for flags, cases, kib in PRESETS:
        args = flags + ["--cases", str(cases), "--seed", "3"]
        rates, summaries = {}, {}
        for _ in range(a.reps):
            for where in ("plugin-in-process:", "plugin:"):
                for mode in ("on", "off"):
                    os.environ["SSMCHECK_FIELD_DIGESTS"] = mode
                    try:
                        r, summary, _ = run(a.binary, where + a.plugin, args)
                    finally:
                        os.environ.pop("SSMCHECK_FIELD_DIGESTS", None)
                    rates.setdefault((where, mode), []).append(r)
                    summaries[(where, mode)] = summary.replace(where + a.plugin, "B").replace(
                        "plugin:" + a.plugin.rsplit("/", 1)[-1].rsplit(".", 1)[0], "B")
        same = len(set(summaries.values())) == 1
        bad |= not same
        m = {k: statistics.median(v) for k, v in rates.items()}
        print(f"| {' '.join(flags[1:])} ({kib:g} KiB) | {m[('plugin-in-process:', 'on')]:,.0f} / "
              f"{m[('plugin-in-process:', 'off')]:,.0f} | {m[('plugin:', 'on')]:,.0f} / {m[('plugin:', 'off')]:,.0f}"
              f"{'' if same else ' (SUMMARIES DIFFER)'} |", flush=True)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()

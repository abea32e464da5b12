#!/usr/bin/env python3
"""What the host process costs a GPU engine (issue 39, item 5; a benchmark, never a test;
docs/plugins.md "The host process").

    SSMCHECK_VLLM_PATH=peers/vllm bench/adapter_throughput.py [--reps 2] [--cases 20] [--warmup 1] BIN

Runs the same `ssmcheck fuzz` campaign with vLLM's GDN kernels as the system under test (the
adapter `python:vllm-gdn,gating=contract`, in its host process, arrays through shared memory) and
with ssmcheck's built-in CUDA backend, alternating, on qwen3-next-80b with 2 layers, in h modes
f32 and f16-pool, and prints one markdown row per mode: the median ops/s of each and their ratio
(the target: the adapter at >= 50% of the built-in backend), the adapter's with its field digests
asked for in calls of their own instead of sent with each op's reply (SSMCHECK_EXPORTS_WITH_OPS=off)
and with the bridge's field digests switched off (SSMCHECK_FIELD_DIGESTS=off: every live state read
back whole after every op, as before them), then each campaign's "time:" split. All campaigns get the same flags;
the row says whether the two summaries drew the same cases (cases, sequences, ops), since a
backend's capabilities can change the draw. Exit status 1 when a campaign fails (its verdict is printed; the rates still count).
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

# campaign_throughput.py is the script beside this one: run as a script, this directory is
# sys.path[0], so it imports by name (as host_overhead.py does)
from campaign_throughput import OPS_RATE  # a summary's "in T s (N ops/s)"

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.join(os.path.dirname(HERE), "python")
DRAWN = re.compile(r"([0-9,]+) cases?.*?([0-9,]+) sequences?.*?([0-9,]+) ops")

MODES = ["f32", "f16-pool"]
FAILED = []  # the verdicts of campaigns that failed (exit 1)
# gating=contract: the contract's clamped gates fed to vLLM's kernel, so that both backends compute
# the same function under the same flags (docs/plugins.md, "Third-party kernels")
ADAPTER = "python:vllm-gdn,gating=contract"


def campaign(command, env):
    """One campaign: (ops/s, the drawn (cases, sequences, ops) or None, the output)."""
    p = subprocess.run(command, capture_output=True, text=True, env=env)
    text = p.stdout + p.stderr
    if p.returncode not in (0, 1):  # 1: a verdict (its rate still counts; the row says so)
        sys.exit(f"{' '.join(command)} exited {p.returncode}:\n{text}")
    if p.returncode == 1:
        FAILED.append(next((l.strip() for l in text.splitlines() if "FAILED" in l or "FAIL " in l), "exit 1"))
    m = next((OPS_RATE.search(l) for l in text.splitlines() if OPS_RATE.search(l)), None)
    if not m:
        sys.exit(f"{' '.join(command)}: no 'ops/s' in the summary:\n{text}")
    d = DRAWN.search(text)
    return int(m.group(1)), (d.groups() if d else None), text


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("binary")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--cases", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--warmup", type=int, default=1, help="reps run first and not counted")
    a = ap.parse_args()
    if not os.environ.get("SSMCHECK_VLLM_PATH"):
        sys.exit("adapter_throughput: set SSMCHECK_VLLM_PATH to the folder holding vLLM's kernels "
                 "(docs/plugins.md, 'Third-party kernels')")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [PYTHON_DIR] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    print(f"seed {a.seed}, {a.cases} cases per campaign, {a.reps} reps after {a.warmup} warm-up, --preset qwen3-next-80b --layers 2")
    print("| h mode | cuda ops/s | vLLM adapter ops/s | adapter / cuda | digests in calls of their own, ops/s | "
          "without field digests, ops/s | same cases drawn |")
    print("|---|---|---|---|---|---|---|")
    splits = []  # each campaign's "time:" line of its last rep: where the time went
    for mode in MODES:
        flags = ["--preset", "qwen3-next-80b", "--layers", "2", "--h-mode", mode, "--gates", "clamped",
                 "--cases", str(a.cases), "--seed", str(a.seed)]
        rates = {"cuda": [], "adapter": [], "own calls": [], "no digests": []}
        drawn, times = {}, {}
        adapter = [sys.executable, "-m", "ssmcheck.adapters.vllm_gdn", a.binary, "fuzz", "--backend", ADAPTER]
        runs = [("cuda", [a.binary, "fuzz", "--backend", "cuda"], env), ("adapter", adapter, env),
                ("own calls", adapter, dict(env, SSMCHECK_EXPORTS_WITH_OPS="off")),  # hosted_plugin.cpp reads it
                ("no digests", adapter, dict(env, SSMCHECK_FIELD_DIGESTS="off"))]  # PluginBackend reads it
        for rep in range(-a.warmup, a.reps):  # warm-up reps first, not counted: Triton's compile cache, torch's imports
            for name, command, run_env in runs:
                with tempfile.TemporaryDirectory() as out:
                    r, d, text = campaign(command + ["--out", out] + flags, run_env)
                if rep < 0:
                    continue
                rates[name].append(r)
                drawn[name] = d
                times[name] = next((l.strip() for l in text.splitlines() if l.strip().startswith("time:")), "")
        med = {k: statistics.median(v) for k, v in rates.items()}
        same = "yes" if len(set(drawn.values())) == 1 else f"no: {drawn}"
        print(f"| {mode} | {med['cuda']:.0f} | {med['adapter']:.0f} | {med['adapter'] / med['cuda']:.2f} | "
              f"{med['own calls']:.0f} | {med['no digests']:.0f} | {same} |", flush=True)
        splits += [f"{mode}, {name}: {times[name]}" for name, _, _ in runs]
    print("\n".join(splits))
    for f in sorted(set(FAILED)):
        print("a campaign failed:", f)
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())

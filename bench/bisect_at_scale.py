#!/usr/bin/env python3
"""A divergence deep in a long trace, found by bisect and reduced (issue 44's "done when"; a
benchmark, never a test; docs/trace-format.md "Bisect and reduce at scale").

    python3 bench/bisect_at_scale.py [--ssmcheck build/ssmcheck] [--ops 100000] [--every 8]
                                     [--fault-at OP] [--keep DIR]

Records a trace of --ops ops (bench/trace_scaling.py's script: cycles of `checkpoint; verify 3;
commit 2 3; decode` on two sequences of `tiny`, f32) with the states of every live sequence after
every --every-th op, as an engine that checkpoints its recorded state now and then would; plants
one fault, as an engine with a bug at one op would have recorded it: one element of one layer's h
in the recorded state after op --fault-at (default: the recorded op nearest 70% of the trace) one
ULP off (h5py). Then times, each in its own process:

  1. `ssmcheck replay TRACE --bisect`: must name the planted op as the first divergence;
  2. `ssmcheck reduce TRACE -o MIN.h5`: must write a trace of at most --every ops (it starts at
     the recorded state nearest before the fault) that diverges in the same field;
  3. `ssmcheck replay MIN.h5`: must exit 1 with the divergence pinpointed.

Prints what each took (wall and CPU seconds, peak RSS), bisect's segments and ops replayed, and
reduce's before/after table. Exit status 1 when any of the three does not find the fault.
"""
import argparse
import json
import os
import sys
import tempfile

import h5py
import numpy as np

from trace_scaling import script, timed  # beside this one (its directory is sys.path[0])


def plant(trace, op):
    """One ULP up on element 5 of layer 1's h in the state of sequence 0 recorded after `op`."""
    with h5py.File(trace, "r+") as f:
        name = f"ops/{op:06d}/state/seq0/layer1/h"
        if name not in f:
            sys.exit(f"{trace}: no {name}: op {op} records no state of sequence 0")
        d = f[name]
        flat = d[()].reshape(-1)
        if flat.dtype != np.float32:
            sys.exit(f"{trace}: {name} is {flat.dtype}, expected float32")
        before = flat[5]
        flat[5] = np.nextafter(flat[5], np.float32(np.inf))
        d[()] = flat.reshape(d.shape)
        return float(before), float(flat[5])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ssmcheck", default="build/ssmcheck")
    ap.add_argument("--ops", type=int, default=100000)
    ap.add_argument("--every", type=int, default=8, help="record the states after every N-th op")
    ap.add_argument("--fault-at", type=int, help="the recorded op whose state is made one ULP off")
    ap.add_argument("--keep", help="write the traces here (kept) instead of a temporary directory")
    a = ap.parse_args()
    if a.ops < 8 * a.every:
        sys.exit("--ops must be at least 8 x --every (a few start points before the fault)")
    recorded = list(range(a.every - 1, a.ops, a.every))  # every N-th op: indexes N-1, 2N-1, ...
    fault = a.fault_at if a.fault_at is not None else min(recorded, key=lambda i: abs(i - 0.7 * a.ops))
    if fault not in recorded:
        sys.exit(f"--fault-at {fault}: not a recorded op (every {a.every}-th: {a.every - 1}, {2 * a.every - 1}, ...)")
    with tempfile.TemporaryDirectory(prefix="ssmcheck-bisect-scale-") as tmp:
        d = a.keep or tmp
        os.makedirs(d, exist_ok=True)
        ops, trace, small = (os.path.join(d, n) for n in ("ops.txt", "long.h5", "min.h5"))
        with open(ops, "w") as f:
            f.write(script(a.ops))
        states = ",".join(str(i) for i in recorded)
        print(f"recording {a.ops} ops, the states after every {a.every}-th ({len(recorded)} ops) ...", flush=True)
        _, _, rs, rc, rm = timed([a.ssmcheck, "record", "--ops", "@" + ops, "-o", trace, "--states", states])
        old, new = plant(trace, fault)
        print(f"planted: op {fault}, seq 0, layer 1, h[5]: {old!r} -> {new!r} (one ULP)", flush=True)
        failures = []

        code, out, bs, bc, bm = timed([a.ssmcheck, "replay", trace, "--bisect", "--json", os.path.join(d, "bisect.json")],
                                      ok=(0, 1))
        with open(os.path.join(d, "bisect.json")) as f:
            bj = json.load(f)["results"][0]
        found = bj["divergences"][0]["op_index"] if bj["divergences"] else None
        if code != 1 or found != fault:
            failures.append(f"bisect: exit {code}, first divergence at op {found}, planted at {fault}")
        seg = bj["bisect"]

        code, out_r, ds, dc, dm = timed([a.ssmcheck, "reduce", trace, "-o", small, "--json", os.path.join(d, "reduce.json")])
        with open(os.path.join(d, "reduce.json")) as f:
            rj = json.load(f)
        # the cut starts at the recorded state nearest before the fault: the ops of the faulty
        # sequence from there on all shape the h it is compared in, so at most --every of them stay
        o, r = rj["original"], rj["reduced"]
        if (o["op_index"], o["seq"], o["layer"], o["tensor"]) != (fault, 0, 1, "h") or rj["after"]["ops"] > a.every or \
                (r["what"], r["tensor"], r["seq"]) != (o["what"], o["tensor"], o["seq"]):
            failures.append(f"reduce: {json.dumps(rj['original'])} -> {json.dumps(rj['reduced'])}, {rj['after']['ops']} ops")

        code, out_m, ms, mc, mm = timed([a.ssmcheck, "replay", small], ok=(0, 1))
        if code != 1 or "pinpointed" not in out_m:
            failures.append(f"replay of the reduced trace: exit {code}:\n{out_m[-1500:]}")

        size = os.path.getsize(trace) / 1e6
        print(f"\ntrace: {a.ops} ops, {size:.0f} MB; fault at op {fault}\n")
        print("| step | wall s | CPU s | peak MiB | what it found |")
        print("|---|---|---|---|---|")
        print(f"| record | {rs:.0f} | {rc:.0f} | {rm:.0f} | {len(recorded)} recorded states |")
        print(f"| replay --bisect | {bs:.0f} | {bc:.0f} | {bm:.0f} | op {found}: {len(seg['segments'])} segments over "
              f"{seg['boundaries']} boundaries, {seg['ops_replayed']} ops replayed, {seg['ops_skipped']} not |")
        print(f"| reduce | {ds:.0f} | {dc:.0f} | {dm:.0f} | {rj['before']['ops']} ops, {rj['before']['seqs']} seqs, "
              f"{rj['before']['layers']} layers -> {rj['after']['ops']}, {rj['after']['seqs']}, {rj['after']['layers']}; "
              f"{rj['after']['bytes']} bytes; {rj['replays']} candidate replays |")
        print(f"| replay MIN.h5 | {ms:.1f} | {mc:.1f} | {mm:.0f} | {'pinpointed' if 'pinpointed' in out_m else 'NOT pinpointed'} |")
        print("\n" + out_r.strip())
        for f in failures:
            print("FAILED: " + f)
        sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()

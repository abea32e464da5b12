#!/usr/bin/env python3
"""Trace scaling (issue 44 item 5): wall time and peak memory of `ssmcheck record` and
`ssmcheck replay` against the number of ops, a state of every live sequence after every op.
A benchmark, never a test. Usage:

    python3 bench/trace_scaling.py [--ssmcheck build/ssmcheck] [--ops 1000,10000,50000] [--json OUT]

Each size records `alloc @0; alloc @1; prefill 4 @0; prefill 4 @1` then cycles of
`checkpoint; verify 3; commit 2 3; decode` on both sequences (the `tiny` preset, f32), to a
temporary directory, then replays it on the reference. Prints one row per size: wall seconds, CPU
seconds (user + system, the child's and its reaped children's: replay's crash probe) and peak RSS
(MiB, ru_maxrss) of each, the trace's size, and the time per op; the ratio of time per op between
consecutive sizes is what "linear" is checked against (docs/trace-format.md). CPU time is the
steadier figure on a shared machine: wall time also counts waiting for the disk (record fsyncs
every op) and for other processes.
"""
import argparse, json, os, subprocess, tempfile, time


def script(ops):
    lines = ["alloc @0", "alloc @1", "prefill 4 @0", "prefill 4 @1"]
    cycle = ["checkpoint @{q}", "verify 3 @{q}", "commit 2 3 @{q}", "decode @{q}"]
    q = 0
    while len(lines) < ops:
        lines += [c.format(q=q) for c in cycle]
        q ^= 1
    return "\n".join(lines[:ops]) + "\n"


def timed(cmd, ok=(0,)):
    """(exit code, output, wall s, CPU s, peak RSS MiB) of cmd: its own rusage (os.wait4), with its
    reaped children's (the crash probe), not the other children's. Exits naming cmd when its code
    is not in `ok`."""
    t = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = p.stdout.read()
    _, status, usage = os.wait4(p.pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code not in ok:
        raise SystemExit(f"{' '.join(cmd)}: exit {code}: {out[-2000:]}")
    return code, out, time.monotonic() - t, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ssmcheck", default="build/ssmcheck")
    ap.add_argument("--ops", default="1000,10000,50000")
    ap.add_argument("--json")
    a = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="ssmcheck-scaling-") as d:
        print(f"{'ops':>8} {'record s':>9} {'rec cpu':>8} {'rec MiB':>8} {'replay s':>9} {'rep cpu':>8} "
              f"{'rep MiB':>8} {'trace MB':>9} {'rec us/op':>10} {'rep us/op':>10} {'rec cpu/op':>10} {'rep cpu/op':>10}")
        for n in [int(x) for x in a.ops.split(",")]:
            ops = os.path.join(d, f"ops{n}.txt")
            with open(ops, "w") as f:
                f.write(script(n))
            trace = os.path.join(d, f"t{n}.h5")
            _, _, rs, rc, rm = timed([a.ssmcheck, "record", "--ops", "@" + ops, "-o", trace, "--states", "all"])
            _, _, ps, pc, pm = timed([a.ssmcheck, "replay", trace])
            size = os.path.getsize(trace) / 1e6
            row = {"ops": n, "record_s": rs, "record_cpu_s": rc, "record_peak_mib": rm, "replay_s": ps,
                   "replay_cpu_s": pc, "replay_peak_mib": pm, "trace_mb": size}
            rows.append(row)
            print(f"{n:>8} {rs:>9.2f} {rc:>8.2f} {rm:>8.0f} {ps:>9.2f} {pc:>8.2f} {pm:>8.0f} {size:>9.1f} "
                  f"{1e6 * rs / n:>10.0f} {1e6 * ps / n:>10.0f} {1e6 * rc / n:>10.0f} {1e6 * pc / n:>10.0f}", flush=True)
            os.remove(trace)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()

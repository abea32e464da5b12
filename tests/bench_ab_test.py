#!/usr/bin/env python3
"""bench/bench_ab.py against stand-ins for two ssmcheck_bench builds (no GPU needed): each stand-in
writes a --json table whose times it takes, run by run, from a list, so the expected best times,
changes and spreads are known. Checks the table, the --rows filter, the arguments passed on, and
the refusals (a failing build, builds measuring different rows)."""
import json
import os
import stat
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "bench" / "bench_ab.py"

# A stand-in ssmcheck_bench: run i writes the times TIMES[i] for ROWS, and logs its arguments.
STAND_IN = """#!{python}
import json, sys
from pathlib import Path
here = Path(__file__).parent
name = Path(__file__).name
count = here / (name + ".count")
i = int(count.read_text()) if count.exists() else 0
count.write_text(str(i + 1))
with open(here / (name + ".args"), "a") as f:
    f.write(" ".join(sys.argv[1:]) + "\\n")
if {fail}:
    print("no CUDA device", file=sys.stderr)
    sys.exit(1)
rows = [{{"op": op, "h": h, "batch": b, "time_us": t, "gbs": 1.0, "of_copy": 0.5}}
        for (op, h, b), t in zip({rows}, {times}[i])]
rows.insert(0, {{"op": "d2d cudaMemcpy", "h": "-", "batch": 0, "time_us": 1.0, "gbs": 1.0, "of_copy": 1.0}})
out = sys.argv[sys.argv.index("--json") + 1]
Path(out).write_text(json.dumps({{"tool": "ssmcheck_bench", "rows": rows}}))
"""

ROWS = [("decode        ", "f32", 1), ("decode        ", "f32", 128), ("verify K=4 ex ", "f16", 8)]


def stand_in(folder, name, times, rows=ROWS, fail=False):
    p = Path(folder) / name
    p.write_text(STAND_IN.format(python=sys.executable, rows=repr(rows), times=repr(times), fail=fail))
    p.chmod(p.stat().st_mode | stat.S_IXUSR)
    return str(p)


def ab(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True)


class BenchAb(unittest.TestCase):
    def test_best_times_change_and_spread(self):
        with tempfile.TemporaryDirectory() as d:
            base = stand_in(d, "base", [[10.0, 200.0, 50.0], [10.2, 204.0, 50.0]])
            new = stand_in(d, "new", [[11.0, 180.0, 40.0], [11.0, 181.8, 40.4]])
            p = ab("--reps", "2", "--preset", "nemotron-h-8b", "--layers", "3", new, base)
            self.assertEqual(p.returncode, 0, p.stderr)
            lines = [l for l in p.stdout.splitlines() if l.startswith("| ") and "---" not in l][1:]
            self.assertEqual(lines, [
                "| decode | f32 | 1 | 10.0 | 11.0 | +10.0% | 2.0% |",
                "| decode | f32 | 128 | 200.0 | 180.0 | -10.0% | 2.0% |",
                "| verify K=4 ex | f16 | 8 | 50.0 | 40.0 | -20.0% | 1.0% |",
            ])
            # each build ran twice, with the preset, layers and a --json of its own
            for name in ("base", "new"):
                args = (Path(d) / (name + ".args")).read_text().splitlines()
                self.assertEqual(len(args), 2)
                for a in args:
                    self.assertIn("--preset nemotron-h-8b", a)
                    self.assertIn("--layers 3", a)
                    self.assertIn("--json", a)

    def test_rows_filter(self):
        with tempfile.TemporaryDirectory() as d:
            base = stand_in(d, "base", [[10.0, 200.0, 50.0]])
            new = stand_in(d, "new", [[10.0, 100.0, 50.0]])
            p = ab("--reps", "1", "--rows", r"^decode f32 128$", new, base)
            self.assertEqual(p.returncode, 0, p.stderr)
            rows = [l for l in p.stdout.splitlines() if l.startswith("| decode") or l.startswith("| verify")]
            self.assertEqual(rows, ["| decode | f32 | 128 | 200.0 | 100.0 | -50.0% | 0.0% |"])

    def test_a_failing_build_is_named(self):
        with tempfile.TemporaryDirectory() as d:
            base = stand_in(d, "base", [[10.0, 200.0, 50.0]])
            new = stand_in(d, "new", [[10.0, 200.0, 50.0]], fail=True)
            p = ab("--reps", "1", new, base)
            self.assertNotEqual(p.returncode, 0)
            self.assertIn("new exited 1", p.stderr)
            self.assertIn("no CUDA device", p.stderr)

    def test_builds_measuring_different_rows_are_refused(self):
        with tempfile.TemporaryDirectory() as d:
            base = stand_in(d, "base", [[10.0, 200.0, 50.0]])
            new = stand_in(d, "new", [[10.0, 200.0]], rows=ROWS[:2])
            p = ab("--reps", "1", new, base)
            self.assertNotEqual(p.returncode, 0)
            self.assertIn("did not measure the same rows", p.stderr)


if __name__ == "__main__":
    unittest.main()

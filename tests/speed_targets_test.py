#!/usr/bin/env python3
"""bench/speed_targets.py on stand-in outputs of one device call (no GPU needed): ssmcheck_bench,
peers_gdn.py, peers_mamba2.py and campaign_throughput.py files whose figures are chosen so that
each target is met or not by a known margin. Checks the table's times, fractions and ratios,
each target's verdict, and the refusals (an unreadable file, a file without rows, a row the
table needs that is missing)."""
import json
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "bench" / "speed_targets.py"


def bench_json(layers, rows):
    """rows: {(op, h, B): (time_us for every layer together, of_copy)}"""
    return {"tool": "ssmcheck_bench", "layers": layers,
            "rows": [{"op": "d2d cudaMemcpy", "h": "-", "batch": 0, "time_us": 1.0, "gbs": 1.0, "of_copy": 1.0}] +
                    [{"op": op, "h": h, "batch": b, "time_us": t, "gbs": 1.0, "of_copy": f}
                     for (op, h, b), (t, f) in rows.items()]}


def peers_json(rows):
    """rows: {(peer or None, op, K, h, B): (us, frac)}"""
    out = []
    for (peer, op, k, h, b), (us, f) in rows.items():
        r = {"op": op, "K": k, "B": b, "state_dtype": h, "us_per_call": us, "frac_copy_bw": f}
        if peer:
            r["peer"] = peer
        out.append(r)
    return {"rows": out}


# GDN, 2 layers (times are per step: the script divides by the layers)
GDN = {("decode", "f32", 1): (12.0, 0.16), ("decode", "f32", 32): (100.0, 0.86),
       ("decode", "f16", 32): (50.0, 0.80), ("verify K=4 ex", "f32", 32): (300.0, 0.74),
       ("verify K=4 ex", "f16", 32): (150.0, 0.70), ("checkpoint", "f32", 32): (1305.0, 0.925)}
PEERS_GDN = {("vllm", "decode", 1, "f32", 1): (5.0, 0.2), ("fla", "decode", 1, "f32", 1): (3.0, 0.3),
             ("vllm", "decode", 1, "f32", 32): (66.0, 0.6), ("fla", "decode", 1, "f32", 32): (60.0, 0.65),
             ("vllm", "verify", 4, "f32", 32): (180.0, 0.6)}
# Mamba-2, 1 layer; the Triton peer's rows carry no "peer"
M2 = {("decode", "f32", 1): (5.5, 0.3), ("decode", "f32", 128): (300.0, 0.91),
      ("decode", "f16", 128): (160.0, 0.83), ("verify K=2 ex", "f32", 128): (480.0, 0.82)}
PEERS_M2 = {(None, "decode", 1, "f32", 128): (360.0, 0.76), (None, "verify", 2, "f32", 128): (660.0, 0.59),
            (None, "decode", 1, "f32", 1): (4.0, 0.4)}
CAMPAIGN = """| campaign (cuda) | ops/s | time |
|---|---|---|
| odd presets, 300 cases | 2552 | setup 9% |
| qwen3-next-80b, 2 layers, 6 cases | 99 | setup 8% |
| qwen3-next-80b, 1 layer, f16, 10 cases | 321 | setup 5% |
"""


class SpeedTargets(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        d = Path(self.dir.name)
        self.files = {}
        for name, content in (("gdn.json", bench_json(2, GDN)), ("peers_gdn.json", peers_json(PEERS_GDN)),
                              ("m2.json", bench_json(1, M2)), ("peers_m2.json", peers_json(PEERS_M2))):
            (d / name).write_text(json.dumps(content))
            self.files[name] = str(d / name)
        (d / "campaign.md").write_text(CAMPAIGN)
        self.files["campaign.md"] = str(d / "campaign.md")

    def tearDown(self):
        self.dir.cleanup()

    def run_script(self, *args):
        return subprocess.run([sys.executable, str(SCRIPT)] + list(args), capture_output=True, text=True)

    def full(self):
        f = self.files
        p = self.run_script("--gdn", f["gdn.json"], "--peers-gdn", f["peers_gdn.json"], "--mamba2", f["m2.json"],
                            "--peers-mamba2", f["peers_m2.json"], "--campaign", f["campaign.md"])
        self.assertEqual(p.returncode, 0, p.stderr)
        return p.stdout

    def test_table_has_per_layer_times_fractions_and_ratios(self):
        out = self.full()
        # decode B=32: 100 us over 2 layers = 50 us; fla 60/50 = 1.20, vLLM 66/50 = 1.32
        self.assertIn("| decode | 32 | 60.00 us (65%) | 66.00 us (60%) | 50.00 us (86%) | 1.32 | 1.20 |", out)
        self.assertIn("| verify K=4 | 32 | - | 180.00 us (60%) | 150.00 us (74%) | 1.20 | - |", out)
        self.assertIn("| checkpoint copy | 32 | - | - | 1305 us per step (92.5%) | - | - |", out)
        self.assertNotIn("| decode | 8 |", out)  # a batch the bench did not measure is left out

    def test_each_target_is_judged_by_its_threshold(self):
        out = self.full()
        self.assertIn("GDN decode, FP32, B >= 32: >= 85% of copy: B=32 86.0%: met", out)
        self.assertIn("GDN verify K=4, FP32, B >= 32: >= 75% of copy: B=32 74.0%: NOT MET", out)
        self.assertIn("GDN FP16 state >= 1.8x faster than FP32, B >= 32: decode B=32 2.00x, verify K=4 ex B=32 2.00x: met",
                      out)
        self.assertIn("GDN decode B=1, whole layer, FP32: <= 6.0 us: 6.00 us: met", out)
        # 5 peer rows: decode B=1 vLLM 5/6, fla 3/6 (0.50, the least), decode B=32 1.32 and 1.20, verify 1.20
        self.assertIn("GDN >= 1.2x ahead of every peer on every row: 3 of 5 rows; the least 0.50x (decode B=1, fla): "
                      "NOT MET", out)
        self.assertIn("Mamba-2 decode, FP32, B >= 32: >= 85% of copy: B=128 91.0%: met", out)
        self.assertIn("Mamba-2 FP16 state >= 1.8x faster than FP32, B >= 32: decode B=128 1.88x: met", out)
        self.assertIn("Mamba-2 decode B=1, whole layer, FP32: <= 6.0 us: 5.50 us: met", out)
        self.assertIn("Mamba-2 >= 1.2x ahead of every peer on every row: 2 of 3 rows; the least 0.73x (decode f32 B=1, "
                      "triton): NOT MET", out)
        self.assertIn("campaign 'odd presets, 300 cases': >= 2000 ops/s: 2552 ops/s: met", out)
        self.assertIn("campaign 'qwen3-next-80b, 2 layers, 6 cases': >= 100 ops/s: 99 ops/s: NOT MET", out)

    def test_the_bench_alone_gives_its_own_targets(self):
        p = self.run_script("--gdn", self.files["gdn.json"])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("| decode | 32 | - | - | 50.00 us (86%) | - | - |", p.stdout)
        self.assertNotIn("ahead of every peer", p.stdout)

    def test_bad_inputs_are_exit_two_naming_the_file(self):
        missing = self.run_script("--gdn", "/nonexistent/bench.json")
        self.assertEqual(missing.returncode, 2)
        self.assertIn("/nonexistent/bench.json: cannot read ssmcheck_bench --json output", missing.stderr)
        no_rows = Path(self.dir.name) / "norows.json"
        no_rows.write_text("{}")
        p = self.run_script("--gdn", str(no_rows))
        self.assertEqual(p.returncode, 2)
        self.assertIn("norows.json: not ssmcheck_bench --json output (no 'rows' list)", p.stderr)
        bad_campaign = Path(self.dir.name) / "c.md"
        bad_campaign.write_text("| odd presets, 300 cases | 2552 | x |\n")
        p = self.run_script("--gdn", self.files["gdn.json"], "--campaign", str(bad_campaign))
        self.assertEqual(p.returncode, 2)
        self.assertIn("c.md: no campaign row 'qwen3-next-80b, 2 layers...'", p.stderr)


if __name__ == "__main__":
    unittest.main()

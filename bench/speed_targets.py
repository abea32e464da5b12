#!/usr/bin/env python3
"""Issue 13's speed targets from one device call's outputs (a benchmark report, never a test;
docs/cuda.md "Issue 13's targets").

    bench/speed_targets.py --gdn BENCH.json [--peers-gdn PEERS.json] [--mamba2 BENCH.json]
                           [--peers-mamba2 PEERS.json] [--campaign CAMPAIGN.md]

--gdn and --mamba2: `ssmcheck_bench --preset qwen3-next-80b --json` and `--preset nemotron-h-8b
--json`; --peers-gdn and --peers-mamba2: `bench/peers_gdn.py --json` and `bench/peers_mamba2.py
--json` of the same call; --campaign: `bench/campaign_throughput.py --backend cuda`'s table.
Prints the issue's GDN table (ssmcheck's whole layer beside vLLM's and fla's recurrent kernel,
per layer, fraction of each process's copy bandwidth, ratio > 1: ssmcheck faster) and one line
per target: its figures and whether it is met. Exit status 0, or 2 naming a file it cannot read
or a row it needs and does not find.
"""
import argparse
import json
import re
import sys

# the targets (issue 13)
COPY_DECODE, COPY_VERIFY, F16_SPEEDUP, B1_US, PEER_LEAD = 0.85, 0.75, 1.8, 6.0, 1.2
CAMPAIGN_MIN = {"odd presets": 2000, "qwen3-next-80b, 2 layers": 100}
TABLE_B = (1, 8, 32, 128)


class Missing(Exception):
    pass


def load_json(path, what):
    try:
        with open(path) as f:
            j = json.load(f)
    except (OSError, ValueError) as e:
        raise Missing(f"{path}: cannot read {what}: {e}")
    if not isinstance(j, dict) or not isinstance(j.get("rows"), list):
        raise Missing(f"{path}: not {what} (no 'rows' list)")
    return j


class Bench:
    """ssmcheck_bench --json: us per layer of (op, h, B)."""

    def __init__(self, path):
        j = load_json(path, "ssmcheck_bench --json output")
        self.path, self.layers = path, int(j.get("layers") or 1)
        self.rows = {}
        for r in j["rows"]:
            try:
                self.rows[(r["op"].strip(), r["h"], int(r["batch"]))] = (float(r["time_us"]), float(r["of_copy"]))
            except (KeyError, TypeError, ValueError) as e:
                raise Missing(f"{path}: a row without {e}: {r}")

    def batches(self, op, h):
        return sorted(b for (o, hh, b) in self.rows if o == op and hh == h)

    def us(self, op, h, b):  # per layer
        if (op, h, b) not in self.rows:
            raise Missing(f"{self.path}: no row '{op}' h {h} B {b}")
        return self.rows[(op, h, b)][0] / self.layers

    def of_copy(self, op, h, b):
        self.us(op, h, b)
        return self.rows[(op, h, b)][1]


class Peers:
    """peers_gdn.py / peers_mamba2.py --json: us per call of (peer, op, K, h, B)."""

    def __init__(self, path, default_peer):
        j = load_json(path, "a peers --json output")
        self.path, self.rows = path, {}
        for r in j["rows"]:
            try:
                key = (r.get("peer", default_peer), r["op"], int(r["K"]), r["state_dtype"], int(r["B"]))
                self.rows[key] = (float(r["us_per_call"]), float(r["frac_copy_bw"]))
            except (KeyError, TypeError, ValueError) as e:
                raise Missing(f"{path}: a row without {e}: {r}")

    def get(self, peer, op, k, h, b):
        return self.rows.get((peer, op, k, h, b))


def fmt_us(v):
    return "-" if v is None else f"{v[0]:.2f} us ({v[1]:.0%})"


def gdn_table(bench, peers):
    """The issue's table: (op label, ssmcheck op, peer op, K, h, B) rows."""
    spec = [("decode", "decode", "decode", 1, "f32", b) for b in TABLE_B]
    spec += [("verify K=4", "verify K=4 ex", "verify", 4, "f32", b) for b in TABLE_B]
    spec += [("decode, FP16 state", "decode", "decode", 1, "f16", b) for b in TABLE_B]
    spec += [("verify K=4, FP16 state", "verify K=4 ex", "verify", 4, "f16", b) for b in TABLE_B]
    lines = ["| op | B | fla fused_recurrent | vLLM spec-decode kernel | ssmcheck | vLLM / ssmcheck | fla / ssmcheck |",
             "|---|---|---|---|---|---|---|"]
    ratios = []  # (label, B, peer, ratio)
    for label, op, pop, k, h, b in spec:
        if (op, h, b) not in bench.rows:
            continue
        us = bench.us(op, h, b)
        cells = []
        for peer in ("fla", "vllm"):
            v = peers.get(peer, pop, k, h, b) if peers else None
            cells.append(v)
            if v:
                ratios.append((f"{label} B={b}", peer, v[0] / us))
        rat = [f"{v[0] / us:.2f}" if v else "-" for v in (cells[1], cells[0])]
        lines.append(f"| {label} | {b} | {fmt_us(cells[0])} | {fmt_us(cells[1])} | "
                     f"{us:.2f} us ({bench.of_copy(op, h, b):.0%}) | {rat[0]} | {rat[1]} |")
    if ("checkpoint", "f32", 32) in bench.rows:
        lines.append(f"| checkpoint copy | 32 | - | - | {bench.rows[('checkpoint', 'f32', 32)][0]:.0f} us per step "
                     f"({bench.of_copy('checkpoint', 'f32', 32):.1%}) | - | - |")
    return lines, ratios


def verdict(ok):
    return "met" if ok else "NOT MET"


def kernel_targets(name, bench, ratios):
    """The kernel targets of one layer kind: lines of text."""
    out = []
    big = [b for b in bench.batches("decode", "f32") if b >= 32]
    if big:
        fr = [bench.of_copy("decode", "f32", b) for b in big]
        out.append(f"{name} decode, FP32, B >= 32: >= {COPY_DECODE:.0%} of copy: "
                   + ", ".join(f"B={b} {f:.1%}" for b, f in zip(big, fr)) + f": {verdict(min(fr) >= COPY_DECODE)}")
        vb = [b for b in big if ("verify K=4 ex", "f32", b) in bench.rows]
        if vb:
            fr = [bench.of_copy("verify K=4 ex", "f32", b) for b in vb]
            out.append(f"{name} verify K=4, FP32, B >= 32: >= {COPY_VERIFY:.0%} of copy: "
                       + ", ".join(f"B={b} {f:.1%}" for b, f in zip(vb, fr)) + f": {verdict(min(fr) >= COPY_VERIFY)}")
        sp = []
        for op in ("decode", "verify K=4 ex"):
            for b in big:
                if (op, "f16", b) in bench.rows and (op, "f32", b) in bench.rows:
                    sp.append((op, b, bench.us(op, "f32", b) / bench.us(op, "f16", b)))
        if sp:
            out.append(f"{name} FP16 state >= {F16_SPEEDUP}x faster than FP32, B >= 32: "
                       + ", ".join(f"{op} B={b} {x:.2f}x" for op, b, x in sp)
                       + f": {verdict(min(x for _, _, x in sp) >= F16_SPEEDUP)}")
    if ("decode", "f32", 1) in bench.rows:
        us = bench.us("decode", "f32", 1)
        f16 = f" (FP16 {bench.us('decode', 'f16', 1):.2f} us)" if ("decode", "f16", 1) in bench.rows else ""
        out.append(f"{name} decode B=1, whole layer, FP32: <= {B1_US} us: {us:.2f} us{f16}: {verdict(us <= B1_US)}")
    if ratios:
        worst = min(ratios, key=lambda r: r[2])
        behind = [r for r in ratios if r[2] < PEER_LEAD]
        out.append(f"{name} >= {PEER_LEAD}x ahead of every peer on every row: {len(ratios) - len(behind)} of "
                   f"{len(ratios)} rows; the least {worst[2]:.2f}x ({worst[0]}, {worst[1]}): "
                   f"{verdict(not behind)}")
    return out


def mamba2_ratios(bench, peers):
    ratios = []
    for (peer, op, k, h, b), (us, _) in sorted(peers.rows.items()):
        sop = "decode" if op == "decode" else f"verify K={k} ex"
        if (sop, h, b) in bench.rows:
            ratios.append((f"{sop.replace(' ex', '')} {h} B={b}", peer, us / bench.us(sop, h, b)))
    return ratios


def campaign_targets(path):
    try:
        text = open(path).read()
    except OSError as e:
        raise Missing(f"{path}: cannot read the campaign table: {e}")
    rates = {}
    for line in text.splitlines():
        m = re.match(r"\|\s*([^|]+?)\s*\|\s*([0-9]+)\s*\|", line)
        if m:
            rates[m.group(1)] = int(m.group(2))
    out = []
    for prefix, least in CAMPAIGN_MIN.items():
        found = [(k, v) for k, v in rates.items() if k.startswith(prefix)]
        if not found:
            raise Missing(f"{path}: no campaign row '{prefix}...'")
        for k, v in found:
            out.append(f"campaign '{k}': >= {least} ops/s: {v} ops/s: {verdict(v >= least)}")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gdn", required=True)
    ap.add_argument("--peers-gdn")
    ap.add_argument("--mamba2")
    ap.add_argument("--peers-mamba2")
    ap.add_argument("--campaign")
    a = ap.parse_args()
    try:
        gdn = Bench(a.gdn)
        peers = Peers(a.peers_gdn, "vllm") if a.peers_gdn else None
        table, ratios = gdn_table(gdn, peers)
        print("\n".join(table))
        print()
        lines = kernel_targets("GDN", gdn, ratios)
        if a.mamba2:
            m2 = Bench(a.mamba2)
            m2_ratios = mamba2_ratios(m2, Peers(a.peers_mamba2, "triton")) if a.peers_mamba2 else []
            lines += kernel_targets("Mamba-2", m2, m2_ratios)
        if a.campaign:
            lines += campaign_targets(a.campaign)
    except Missing as e:
        print(f"speed_targets: {e}", file=sys.stderr)
        sys.exit(2)
    for line in lines:
        print("- " + line)


if __name__ == "__main__":
    main()

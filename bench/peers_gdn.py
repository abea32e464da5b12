#!/usr/bin/env python3
# peers_gdn.py: device time and effective state bandwidth of the peers' Gated DeltaNet recurrent
# kernels for the qwen3-next-80b GDN layer (nk 16, nv 32, kd = vd = 128; state per sequence
# [nv][kd][vd], vd fastest), FP32 and/or FP16 state, against a torch device-to-device copy measured
# in the same process, and (with --ssmcheck-json) ssmcheck's own numbers beside them as ratios.
#   vllm    vLLM's fused_recurrent_gated_delta_rule (vllm/model_executor/layers/fla/ops), called the
#           way Qwen3-Next's spec-decode path calls it: a pool [slots, nv, kd, vd], in place,
#           use_qk_l2norm_in_kernel, cu_seqlens.
#             decode    1-D ssm_state_indices [B] (random pool slots): one state read, one written;
#             verify K  2-D ssm_state_indices [B, K] and num_accepted_tokens = 1: the state of
#                       column 0 is read once, the state after every token t written to column t,
#                       so K states are written.
#   fla     flash-linear-attention's fused_recurrent_gated_delta_rule (fla/ops/gated_delta_rule),
#           decode only: initial_state [B, nv, kd, vd] in, the final state out (FP32 state only).
# Bytes: state bytes (reads + writes above); q, k, v, g, beta, o traffic is not counted. The time is
# the median over --reps of (a loop of N calls)/N, captured in a CUDA graph when capture works
# (bench/peer_timing.py), rotating over enough state pools to touch >= --cold-mib MiB.
# ssmcheck's numbers (ssmcheck_bench --preset qwen3-next-80b --json F) time a WHOLE layer (conv,
# gates, rows, norm); the peers' their recurrent kernel alone: the ratio favours the peers.
# The peer code is not part of ssmcheck: it stays git-ignored under peers/ (peers/*/SOURCES.txt).
#   python3 bench/peers_gdn.py --json out.json [--ssmcheck-json bench.json]  (needs torch, triton, a GPU)
import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from peer_timing import Timer, cold_pools, copy_gbps  # noqa: E402

NK, NV, KD, VD = 16, 32, 128, 128
ROOT = Path(__file__).resolve().parents[1]
VLLM_REL = "vllm/model_executor/layers/fla/ops/fused_recurrent.py"
FLA_REL = "fla/ops/gated_delta_rule/fused_recurrent.py"


def main():
    ap = argparse.ArgumentParser(description="Time vLLM's and fla's GDN recurrent kernels (qwen3-next-80b layer).")
    ap.add_argument("--peers-vllm", type=Path, default=ROOT / "peers" / "vllm")
    ap.add_argument("--peers-fla", type=Path, default=ROOT / "peers" / "fla")
    ap.add_argument("--state-dtype", choices=["f32", "f16", "both"], default="both")
    ap.add_argument("--batches", default="1,8,32,128")
    ap.add_argument("--ks", default="4", help="verify token counts")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--launches", type=int, default=20)
    ap.add_argument("--cold-mib", type=int, default=256)
    ap.add_argument("--no-graph", action="store_true")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--ssmcheck-json", type=Path, help="ssmcheck_bench --json output on the same machine")
    a = ap.parse_args()
    try:
        import torch
        import triton  # noqa: F401
    except ImportError as e:
        sys.exit(f"peers_gdn: needs torch and triton: {e}")
    if not torch.cuda.is_available():
        sys.exit("peers_gdn: torch sees no CUDA device")
    peers = {}
    for name, root, rel, mod in (("vllm", a.peers_vllm, VLLM_REL, "vllm.model_executor.layers.fla.ops.fused_recurrent"),
                                 ("fla", a.peers_fla, FLA_REL, "fla.ops.gated_delta_rule.fused_recurrent")):
        if not (root / rel).is_file():
            print(f"note: {root / rel} missing (git-ignored peer code, peers/*/SOURCES.txt): {name} skipped")
            continue
        sys.path.insert(0, str(root))
        try:
            peers[name] = __import__(mod, fromlist=["fused_recurrent_gated_delta_rule"]).fused_recurrent_gated_delta_rule
        except Exception as e:  # noqa: BLE001
            print(f"note: cannot import {name}'s fused_recurrent_gated_delta_rule from {root}: {e!r}: skipped")
    if not peers:
        sys.exit("peers_gdn: no peer kernel found")
    dev = torch.device("cuda")
    f32 = dict(device=dev, dtype=torch.float32)
    DT = {"f32": torch.float32, "f16": torch.float16}
    torch.manual_seed(0)
    scale = KD ** -0.5

    def inputs(T):  # q, k, v, g (log decay), beta for T token rows, as [1, T, ...]
        q, k = (torch.randn(1, T, NK, KD, **f32) for _ in range(2))
        v = torch.randn(1, T, NV, VD, **f32)
        g = -torch.rand(1, T, NV, **f32) * 0.5
        beta = torch.rand(1, T, NV, **f32)
        return q, k, v, g, beta

    def vllm_call(pool, inp, B, K, idx, acc):
        q, k, v, g, beta = inp
        cu = torch.arange(0, B * K + 1, K, dtype=torch.int32, device=dev)
        return peers["vllm"](q=q, k=k, v=v, g=g, beta=beta, scale=scale, initial_state=pool, inplace_final_state=True,
                             cu_seqlens=cu, ssm_state_indices=idx, num_accepted_tokens=acc,
                             use_qk_l2norm_in_kernel=True)[0]

    def fla_call(state, inp, B):
        q, k, v, g, beta = (t.reshape(B, 1, *t.shape[2:]) for t in inp)
        return peers["fla"](q=q, k=k, v=v, g=g, beta=beta, scale=scale, initial_state=state, output_final_state=True,
                            use_qk_l2norm_in_kernel=True)

    def reference(h, inp, B, K):  # torch FP32: h [B, nv, kd, vd]; token rows ordered b*K + t
        q, k, v, g, beta = (t[0] for t in inp)
        q = torch.nn.functional.normalize(q, dim=-1).repeat_interleave(NV // NK, 1)
        k = torch.nn.functional.normalize(k, dim=-1).repeat_interleave(NV // NK, 1)
        os_, hs = [], []
        for t in range(K):
            r = slice(t, B * K, K)
            h = h * torch.exp(g[r])[..., None, None]
            hk = torch.einsum("bhkv,bhk->bhv", h, k[r])
            vn = (v[r] - hk) * beta[r][..., None]
            h = h + k[r][..., :, None] * vn[..., None, :]
            os_.append(torch.einsum("bhkv,bhk->bhv", h, q[r]) * scale)
            hs.append(h)
        return torch.stack(os_, 1).reshape(B * K, NV, VD), hs

    def rel(x, y):
        return ((x.float() - y).abs().max() / y.abs().max().clamp_min(1e-30)).item()

    smoke = {}
    if "vllm" in peers:
        for op, K in (("decode", 1), ("verify", 3)):  # B = 2, FP32 state
            B = 2
            inp = inputs(B * K)
            pool = 0.1 * torch.randn(B * K, NV, KD, VD, **f32)
            idx = torch.randperm(B * K, device=dev).to(torch.int32)
            cols = [idx.view(B, K)[:, t].long() for t in range(K)]
            o_ref, hs = reference(pool[cols[0]].clone(), inp, B, K)
            o = vllm_call(pool, inp, B, K, idx if K == 1 else idx.view(B, K),
                          None if K == 1 else torch.ones(B, dtype=torch.int32, device=dev))
            torch.cuda.synchronize()
            e = max(rel(o.reshape(B * K, NV, VD), o_ref), *(rel(pool[c], h) for c, h in zip(cols, hs)))
            smoke[f"vllm_{op}_K{K}"] = e
            print(f"smoke vllm {op} K={K} B=2 f32: max rel err (o and written states) {e:.2e} "
                  f"{'ok' if e < 1e-4 else 'FAIL (> 1e-4): call convention or kernel differs'}")
    if "fla" in peers:
        B = 2
        inp = inputs(B)
        h0 = 0.1 * torch.randn(B, NV, KD, VD, **f32)
        o_ref, hs = reference(h0.clone(), inp, B, 1)
        o, ht = fla_call(h0, inp, B)
        torch.cuda.synchronize()
        e = max(rel(o.reshape(B, NV, VD), o_ref), rel(ht, hs[0]))
        smoke["fla_decode_K1"] = e
        print(f"smoke fla decode B=2 f32: max rel err (o and final state) {e:.2e} "
              f"{'ok' if e < 1e-4 else 'FAIL (> 1e-4): call convention or kernel differs'}")

    copy = copy_gbps(torch, a.reps)
    print(f"device {torch.cuda.get_device_name()}, d2d copy {copy:.0f} GB/s (read + written)")
    timer = Timer(torch, a.reps, not a.no_graph)
    mine = {}
    if a.ssmcheck_json:
        d = json.loads(a.ssmcheck_json.read_text())
        for r in d["rows"]:  # ssmcheck_bench times every layer of the model: per layer
            mine[(r["op"], r["h"], r["batch"])] = (r["time_us"] / d["layers"], r["of_copy"])
    sdts = ["f32", "f16"] if a.state_dtype == "both" else [a.state_dtype]
    ks = [int(k) for k in a.ks.split(",")]
    rows = []
    hdr = (f"{'peer':5} {'op':6} {'K':>2} {'B':>4} {'state':>5} {'us/call':>9} {'GB/s':>7} {'of copy':>7}"
           f" {'ssmcheck us':>11} {'of copy':>7} {'peer/ssm':>8}  timing")
    print(hdr)
    print("-" * len(hdr))
    for sd in sdts:
        sdt = DT[sd]
        se = NV * KD * VD * torch.empty(0, dtype=sdt).element_size()
        for B in [int(b) for b in a.batches.split(",")]:
            cases = [("vllm", "decode", 1)] + [("vllm", "verify", k) for k in ks]
            cases += [("fla", "decode", 1)] if sd == "f32" else []
            for peer, op, K in cases:
                if peer not in peers:
                    continue
                slots = B * K
                inp = inputs(B * K)
                if peer == "vllm":
                    pools = [(0.1 * torch.randn(slots, NV, KD, VD, **f32)).to(sdt)
                             for _ in range(cold_pools(slots * se, a.cold_mib))]
                    idx = torch.randperm(slots, device=dev).to(torch.int32)
                    idx = idx.view(B, K) if op == "verify" else idx
                    acc = torch.ones(B, dtype=torch.int32, device=dev) if op == "verify" else None
                    fns = [lambda p=p: vllm_call(p, inp, B, K, idx, acc) for p in pools]
                else:
                    pools = [0.1 * torch.randn(B, NV, KD, VD, **f32) for _ in range(cold_pools(2 * B * se, a.cold_mib))]
                    fns = [lambda p=p: fla_call(p, inp, B) for p in pools]
                us, mode, nl = timer.us(fns, a.launches)
                rd, wr = B * se, K * B * se
                gbps = (rd + wr) / (us * 1e-6) / 1e9
                key = ("decode" if op == "decode" else f"verify K={K} ex", sd, B)
                m_us, m_frac = mine.get(key, (None, None))
                rows.append(dict(peer=peer, op=op, K=K, B=B, state_dtype=sd, us_per_call=us, state_bytes_read=rd,
                                 state_bytes_written=wr, state_gbps=gbps, frac_copy_bw=gbps / copy, timing=mode,
                                 launches_per_loop=nl, ssmcheck_us_per_layer=m_us, ssmcheck_frac_copy_bw=m_frac))
                mine_txt = (f" {m_us:11.2f} {m_frac:7.1%} {us / m_us:8.2f}" if m_us else f" {'-':>11} {'-':>7} {'-':>8}")
                print(f"{peer:5} {op:6} {K:>2} {B:>4} {sd:>5} {us:9.2f} {gbps:7.0f} {gbps / copy:7.1%}{mine_txt}  {mode}")
                del pools, fns
            torch.cuda.empty_cache()
    if a.json:
        a.json.write_text(json.dumps(dict(
            copy_gbps=copy, device=torch.cuda.get_device_name(), peers=sorted(peers),
            shape=dict(nk=NK, nv=NV, kd=KD, vd=VD), smoke_max_rel_err=smoke, torch=torch.__version__,
            cold_mib=a.cold_mib, reps=a.reps, rows=rows), indent=1) + "\n")
        print(f"wrote {a.json}")


if __name__ == "__main__":
    main()

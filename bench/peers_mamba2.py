#!/usr/bin/env python3
# peers_mamba2.py: device time and effective state bandwidth of vLLM's Triton Mamba-2 decode
# kernel `selective_state_update` (mamba_ssm.py @ 007ad216) for the Nemotron-H 8B Mamba-2 layer
# (nheads 128, head dim 64, d_state 128, ngroups 8; state per sequence [nh][hp][ns], ns fastest),
# FP32 and/or FP16 state, batch 1..128, against a torch device-to-device copy measured in the
# same process. Called the way vLLM's MambaMixer2 decode path does: dt [T,nh] expanded to
# [T,nh,hp] (stride 0) with dt_bias and dt_softplus=True, A = -exp(A_log) expanded to [nh,hp,ns]
# with strides 0 (tie_hdim), D expanded likewise, state_batch_indices = dst_state_batch_indices
# (slots of a pool, a random permutation), pad_slot_id default; z is passed (gated output),
# whereas MambaMixer2 itself passes z=None and gates in its RMSNorm.
#   decode      one token per sequence: state read once, written once (in place).
#   verify K    spec-decode verify, K tokens per sequence in ONE launch (cu_seqlens, 2-D state
#               indices [B,K], num_accepted_tokens=1): the state of slot [b,0] is read once and
#               the state after every token t is written to slot [b,t], i.e. K states written.
#   kcalls K    (--kcalls) K plain decode launches back to back, for comparison: K reads, K writes.
# Bytes: state bytes only (reads + writes above); the x/z/out/dt/B/C traffic is reported apart
# as io_bytes. The time is the median over --reps of (a loop of N launches)/N, the loop captured
# in a CUDA graph when capture works (else plain launches, said in the output). Between launches
# the loop rotates over enough state pools to touch >= --cold-mib MiB, so that a small batch's
# state is not served from the 50 MB L2 (--cold-mib 0: the same pool every launch).
# The peer code is not part of ssmcheck: it stays git-ignored under peers/ (peers/vllm/SOURCES.txt).
#   python3 bench/peers_mamba2.py --json out.json   (needs torch, triton, packaging and a GPU)
import argparse, json, sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from peer_timing import Timer, cold_pools, copy_gbps  # noqa: E402

NH, HP, NS, NG = 128, 64, 128, 8
KERNEL = "vllm selective_state_update @007ad216"
REL = "vllm/model_executor/layers/mamba/ops/mamba_ssm.py"


def main():
    ap = argparse.ArgumentParser(description="Time vLLM's Triton Mamba-2 selective_state_update "
                                 "(Nemotron-H 8B layer) against a d2d copy.")
    ap.add_argument("--peers-vllm", type=Path,
                    default=Path(__file__).resolve().parents[1] / "peers" / "vllm")
    ap.add_argument("--state-dtype", choices=["f32", "f16", "both"], default="both")
    ap.add_argument("--input-dtype", choices=["f32", "bf16"], default="f32",
                    help="dtype of x, z, dt, B, C and out")
    ap.add_argument("--batches", default="1,2,4,8,16,32,64,128")
    ap.add_argument("--ks", default="2,3,4", help="verify (and --kcalls) token counts")
    ap.add_argument("--kcalls", action="store_true", help="also time K sequential decode calls")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--launches", type=int, default=20, help="launches per timed loop (at least)")
    ap.add_argument("--cold-mib", type=int, default=256)
    ap.add_argument("--no-graph", action="store_true")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    try:
        import torch, triton  # noqa: F401
        import torch.nn.functional as F
    except ImportError as e:
        sys.exit(f"peers_mamba2: needs torch and triton: {e}")
    if not torch.cuda.is_available():
        sys.exit("peers_mamba2: torch sees no CUDA device")
    if not (a.peers_vllm / REL).is_file():
        sys.exit(f"peers_mamba2: {a.peers_vllm / REL} missing (vendored, git-ignored peer code; "
                 "see peers/vllm/SOURCES.txt, or pass --peers-vllm DIR)")
    sys.path.insert(0, str(a.peers_vllm))
    try:
        from vllm.model_executor.layers.mamba.ops.mamba_ssm import selective_state_update
    except Exception as e:  # noqa: BLE001
        sys.exit(f"peers_mamba2: cannot import selective_state_update from {a.peers_vllm}: {e!r}")
    dev = torch.device("cuda")
    DT = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
    f32 = dict(device=dev, dtype=torch.float32)
    torch.manual_seed(0)
    # Layer parameters (float32, as vLLM keeps them), shared by every case.
    A = -torch.exp(torch.log(torch.empty(NH, **f32).uniform_(1, 16)))
    dt_bias = torch.log(torch.expm1(torch.empty(NH, **f32).uniform_(1e-3, 0.1)))
    D = torch.randn(NH, **f32)
    A_k = A[:, None, None].expand(NH, HP, NS)          # strides (1, 0, 0): tie_hdim
    dtb_k, D_k = dt_bias[:, None].expand(NH, HP), D[:, None].expand(NH, HP)

    def inputs(T, idt):
        x, z = (torch.randn(T, NH, HP, **f32).to(idt) for _ in range(2))
        dt = (0.5 * torch.randn(T, NH, **f32)).to(idt)
        Bm, Cm = (torch.randn(T, NG, NS, **f32).to(idt) for _ in range(2))
        return x, z, dt, Bm, Cm

    def call(state, inp, out, sbi, spec):
        x, z, dt, Bm, Cm = inp
        kw = dict(num_accepted_tokens=spec[0], cu_seqlens=spec[1]) if spec else {}
        selective_state_update(state, x, dt[:, :, None].expand(-1, -1, HP), A_k, Bm, Cm, D_k,
                               z=z, dt_bias=dtb_k, dt_softplus=True, state_batch_indices=sbi,
                               dst_state_batch_indices=sbi, out=out, **kw)

    def spec_args(B, K):  # all sequences accepted 1 token last step -> initial state in slot [b,0]
        return (torch.ones(B, dtype=torch.int32, device=dev),
                torch.arange(0, B * K + 1, K, dtype=torch.int32, device=dev))

    def reference(h, inp, K):  # plain torch FP32; token rows ordered b*K + t
        x, z, dt, Bm, Cm = (t.float() for t in inp)
        ys, hs = [], []
        for t in range(K):
            xt, d = x[t::K], F.softplus(dt[t::K] + dt_bias)                     # [B,nh,hp], [B,nh]
            Bh, Ch = (m[t::K].repeat_interleave(NH // NG, 1)[:, :, None, :] for m in (Bm, Cm))
            h = h * torch.exp(A * d)[..., None, None] + d[..., None, None] * xt[..., None] * Bh
            ys.append(((h * Ch).sum(-1) + D[:, None] * xt) * F.silu(z[t::K]))
            hs.append(h)
        return torch.stack(ys, 1).reshape(-1, NH, HP), hs

    def rel(a_, b_):
        return ((a_.float() - b_).abs().max() / b_.abs().max().clamp_min(1e-30)).item()

    smoke = {}
    for op, K in (("decode", 1), ("verify", 3)):  # B=2, FP32 state and inputs
        inp = inputs(2 * K, torch.float32)
        pool = 0.1 * torch.randn(2 * K, NH, HP, NS, **f32)
        sbi = torch.randperm(2 * K, device=dev).to(torch.int32).view(2, K)
        cols = [sbi[:, t].long() for t in range(K)]
        y_ref, hs = reference(pool[cols[0]].clone(), inp, K)
        out = torch.empty_like(inp[0])
        call(pool, inp, out, sbi.view(2) if K == 1 else sbi, spec_args(2, K) if K > 1 else None)
        torch.cuda.synchronize()
        e = max(rel(out, y_ref), *(rel(pool[c], h) for c, h in zip(cols, hs)))
        smoke[f"{op}_K{K}_B2"] = e
        print(f"smoke {op} K={K} B=2 f32: max rel err (y and written states) {e:.2e} "
              f"{'ok' if e < 1e-4 else 'FAIL (> 1e-4): call convention or kernel differs'}")

    copy = copy_gbps(torch, a.reps)
    print(f"device {torch.cuda.get_device_name()}, d2d copy {copy:.0f} GB/s (read + written)")
    timer = Timer(torch, a.reps, not a.no_graph)

    sdts = ["f32", "f16"] if a.state_dtype == "both" else [a.state_dtype]
    ks = [int(k) for k in a.ks.split(",")]
    idt = DT[a.input_dtype]; ie = torch.empty(0, dtype=idt).element_size()
    tok_io = (3 * NH * HP + NH + 2 * NG * NS) * ie  # x, z, out, dt, B, C per token
    cases = [("decode", 1)] + [("verify", k) for k in ks]
    cases += [("kcalls", k) for k in ks] if a.kcalls else []
    rows = []
    hdr = (f"{'op':7} {'K':>2} {'B':>4} {'state':>5} {'us/call':>9} {'state MB':>9} {'GB/s':>7} "
           f"{'of copy':>7}  timing")
    print(hdr); print("-" * len(hdr))
    for sd in sdts:
        sdt = DT[sd]; se = NH * HP * NS * torch.empty(0, dtype=sdt).element_size()
        for B in [int(b) for b in a.batches.split(",")]:
            for op, K in cases:
                spec = op == "verify"
                T, slots = (B * K, B * K) if spec else (B, B)
                npool = cold_pools(slots * se, a.cold_mib)
                pools = [(0.1 * torch.randn(slots, NH, HP, NS, **f32)).to(sdt)
                         for _ in range(npool)]
                inp = inputs(T, idt); out = torch.empty_like(inp[0])
                sbi = torch.randperm(slots, device=dev).to(torch.int32)
                sbi = sbi.view(B, K) if spec else sbi
                sa = spec_args(B, K) if spec else None
                reps_in = K if op == "kcalls" else 1
                fns = [lambda p=p: [call(p, inp, out, sbi, sa) for _ in range(reps_in)]
                       for p in pools]
                us, mode, nl = timer.us(fns, a.launches)
                rd, wr = (B * se, K * B * se) if op != "kcalls" else (K * B * se, K * B * se)
                gbps = (rd + wr) / (us * 1e-6) / 1e9
                rows.append(dict(op=op, K=K, B=B, state_dtype=sd, input_dtype=a.input_dtype,
                                 us_per_call=us, state_bytes_read=rd, state_bytes_written=wr,
                                 state_bytes=rd + wr, state_gbps=gbps,
                                 frac_copy_bw=gbps / copy,
                                 io_bytes=(K if op == "kcalls" else 1) * T * tok_io, timing=mode,
                                 launches_per_loop=nl, state_pools_rotated=npool,
                                 launches_per_call=reps_in))
                print(f"{op:7} {K:>2} {B:>4} {sd:>5} {us:9.2f} {(rd + wr) / 1e6:9.2f} {gbps:7.0f} "
                      f"{gbps / copy:7.1%}  {mode}"
                      + (f" ({K} launches)" if op == "kcalls" else ""))
                del pools, fns
            torch.cuda.empty_cache()
    if a.json:
        a.json.write_text(json.dumps(dict(
            copy_gbps=copy, device=torch.cuda.get_device_name(), kernel=KERNEL,
            shape=dict(nheads=NH, headdim=HP, dstate=NS, ngroups=NG), smoke_max_rel_err=smoke,
            torch=torch.__version__, triton=triton.__version__, cold_mib=a.cold_mib,
            reps=a.reps, rows=rows), indent=1) + "\n")
        print(f"wrote {a.json}")


if __name__ == "__main__":
    main()

"""vLLM's Mamba-2 state kernel (Triton ``selective_state_update``) as ssmcheck's system under test.

    SSMCHECK_VLLM_PATH=peers/vllm PYTHONPATH=python \\
        python3 -m ssmcheck.adapters.vllm_mamba2 build/ssmcheck fuzz --preset mamba-odd-b --h-mode f32 --cases 200

What runs is vLLM's ``selective_state_update`` (vllm/model_executor/layers/mamba/ops/mamba_ssm.py),
called the way vLLM's MambaMixer2 calls it on the decode and spec-decode paths: x, B, C from the
conv's output, dt [rows, nh] expanded over the head dimension with ``dt_bias`` and
``dt_softplus=True``, ``A = -exp(A_log)`` and ``D`` expanded with stride 0 (its tied-head-dim
instance), ``z=None`` (MambaMixer2 gates in its norm), on a pool ``[slots, nh, hp, ns]`` (FP32, or
FP16 in h mode f16-pool). The slots follow the spec-decode convention the kernel shares with
vLLM's GDN kernel: ``state_batch_indices`` ``[N, W]`` with ``num_accepted_tokens`` choosing the
start state (column num_accepted - 1) and the state after row t written to the slot of column t,
so the contract's h intermediate t is the slot of column t and ``commit n k`` is vLLM's accept of
n tokens (the next step reads column n - 1; nothing is copied); a decode of a sequence with no
drafts in flight uses the non-spec path (1-D indices, in place). Every op of a sequence is one
kernel call per layer: prefill is one call of T rows (vLLM's prefill kernel, the chunked scan, is
not exercised).

Glue, in torch, where the contract asks for what this kernel does not do, and said so: every
contract slot owns ``num_spec + 1`` row slots and a home slot (a decode or prefill that starts
from an accepted draft writes the home slot, so that the last verify's intermediates stay
readable until the next verify, as the contract promises); checkpoints and prefix-cache
snapshots are torch copies; the conv and its window (the contract's d_conv columns; vLLM's
``causal_conv1d_update`` is not exercised here); the output's gated RMS norm (the contract's,
grouped by ng, before or after the gate as the layer says).

Numerics it declares (docs/plugins.md, "Convention profiles"): FP16 stores that overflow to inf
(the kernel's ``.to(float16)``) and FP16 rows carried in FP32 (``f16_rows = "carried"``: the
kernel widens the stored FP16 state once per call and carries it in FP32 registers across the
rows; only the per-row stores round). Not declarable, so judged as they are: the kernel's
softplus (``log(exp(x) + 1)`` in FP32 below 20 with Triton 3), its ``exp`` (``ex2.approx``), and
that it applies no dt limits (``time_step_limit``): ``dt=contract`` computes the contract's dt in
torch (FP64: softplus linear above 20, clamped to [dt_min, dt_max]) and passes it with
``dt_softplus=False``.

Options (``--backend python:vllm-mamba2,key=value``): ``dt=vllm`` (default) or ``dt=contract``;
``device=cuda:N``. Models: Mamba-2 layers only (run GDN layers with ``python:vllm-gdn``); run its
campaigns on a Mamba-2 preset (``--preset mamba-odd-a`` ...). h modes: f32 and f16-pool (vLLM's
``mamba_ssm_cache_dtype`` float32 / float16); mode f16 (an FP32 pool converted by ``to_f16``) has
no vLLM counterpart and is refused.
"""
import numpy as np

from .common import SpecSlots, import_peer, main
from .peer_adapter import PeerAdapter

ENV = "SSMCHECK_VLLM_PATH"


def _kernel():
    return import_peer("vllm.model_executor.layers.mamba.ops.mamba_ssm", ENV,
                       "vLLM's Mamba-2 selective_state_update").selective_state_update


class _Seq:
    """Where one contract slot's state is: h in its row slot ``live`` (0..M) or its home slot
    (live == -1); the conv window per layer (glue), the last verify's conv windows and K."""

    def __init__(self, windows):
        self.live = -1
        self.conv = windows
        self.conv_inter = [[] for _ in windows]
        self.last_k = 0
        self.ckpt = None  # (h per layer, conv window per layer)


class VllmMamba2(PeerAdapter):
    name = "vLLM Mamba-2 selective_state_update (Triton, spec-decode mode)"
    own_legality = False
    bitwise = False
    mamba2 = True              # its layers are Mamba-2 layers (the bridge declares SSMP_MAMBA2)
    prefill_stage = False      # FP16 state is widened in registers, never staged
    f16_store = "inf"          # the kernel's .to(float16) store overflows to inf
    f16_rows = "carried"       # one kernel call per op: the rows carry FP32 in registers, only stores round

    PEER = "vLLM"
    F16_POOL_HINT = " (mamba_ssm_cache_dtype float32 / float16)"

    def __init__(self, options=""):
        o = self._options(options, dict(dt=("vllm", "contract")))
        self.dt_mode = o.get("dt", "vllm")
        self.update = _kernel()

    # --- the pool -----------------------------------------------------------------------------

    def create_pool(self, layers, pool):
        torch = self.torch
        gdn = [l for l, L in enumerate(layers) if L.kind != "mamba2"]
        if gdn:
            raise NotImplementedError("layer %d is a GDN layer: this adapter runs Mamba-2 layers only (python:vllm-gdn "
                                      "runs GDN layers); give its campaigns a Mamba-2 preset" % gdn[0])
        self._start_pool(layers, pool)
        self.spec = SpecSlots(pool.h_capacity)
        S = pool.max_slots
        f32 = dict(device=self.dev, dtype=torch.float32)
        for L in layers:
            # the glue conv accumulates in FP64: [conv_dim][d_conv], [conv_dim]
            L.t_conv_w = torch.from_numpy(L.conv_w.copy()).to(self.dev).double()
            L.t_conv_bias = None if L.conv_bias is None else torch.from_numpy(L.conv_bias.copy()).to(self.dev).double()
            L.t_dt_bias = torch.from_numpy(L.dt_bias.copy()).to(self.dev)
            L.t_norm_w = torch.from_numpy(L.norm_w.copy()).to(self.dev)
            A = -torch.exp(torch.from_numpy(L.A_log.copy()).to(**f32))
            # as MambaMixer2 hands them over: per head, expanded with stride 0 (the tied instance)
            L.k_A = A[:, None, None].expand(L.nh, L.hp, L.ns)
            L.k_D = torch.from_numpy(L.D.copy()).to(**f32)[:, None].expand(L.nh, L.hp)
            L.k_dt_bias = L.t_dt_bias[:, None].expand(L.nh, L.hp)
            L.k_zero_bias = torch.zeros(L.nh, **f32)[:, None].expand(L.nh, L.hp)
        self.ssm = [torch.zeros(self.spec.count(S), L.nh, L.hp, L.ns, dtype=self.dtype, device=self.dev) for L in layers]
        self.seqs = [self._fresh() for _ in range(S)]

    def _fresh(self):
        return _Seq([self.torch.zeros(L.conv_dim, L.d_conv, device=self.dev) for L in self.layers])

    def alloc(self, min_capacity):
        s = self.policy.alloc(min_capacity)
        for l in range(len(self.layers)):
            self.ssm[l][self.spec.range(s)].zero_()
        self.seqs[s] = self._fresh()
        return s

    def _phys(self, s):
        return self.spec.phys(s, self.seqs[s].live)

    # --- one layer over a batch of entries of T rows each ----------------------------------------

    def _conv(self, l, q, x, keep):
        """Glue: the contract's conv window update and silu for T rows of one sequence (FP64
        accumulation), in place on its window; keep: record the windows after rows 0..T-2."""
        torch = self.torch
        L = self.layers[l]
        ys = []
        if keep:
            q.conv_inter[l] = []
        for t in range(x.shape[0]):
            q.conv[l] = torch.cat([q.conv[l][:, 1:], x[t][:, None]], dim=1)
            acc = (L.t_conv_w * q.conv[l].double()).sum(dim=1)
            if L.t_conv_bias is not None:
                acc = acc + L.t_conv_bias
            ys.append(torch.nn.functional.silu(acc).float())
            if keep and t < x.shape[0] - 1:
                q.conv_inter[l].append(q.conv[l].clone())
        return torch.stack(ys)

    def _dt(self, L, a):
        """The dt the kernel takes, [rows, nh] (with its dt_bias and softplus, or the contract's dt)."""
        torch = self.torch
        if self.dt_mode == "vllm":
            return a, L.k_dt_bias, True
        x = a.double() + L.t_dt_bias.double()
        sp = torch.where(x > 20.0, x, torch.log1p(torch.exp(torch.clamp(x, max=20.0))))
        # dt_bias zero, not None: the kernel's wrapper reads dt_bias.stride() to choose its tied instance
        return torch.clamp(sp, min=L.dt_min, max=L.dt_max).float(), L.k_zero_bias, False

    def _norm(self, L, y, z):
        """Glue: the contract's gated RMS norm per group; y, z [rows, nh*hp] -> [rows, nh*hp]."""
        torch = self.torch
        silu = torch.nn.functional.silu
        u = y if L.norm_before_gate else y * silu(z)
        g = u.view(u.shape[0], L.ng, -1)
        out = (g * torch.rsqrt((g * g).mean(dim=-1, keepdim=True) + L.eps)).reshape(u.shape) * L.t_norm_w
        return out * silu(z) if L.norm_before_gate else out

    def _layer(self, l, entries, T, idx, acc, keep):
        """Layer l of entries [(seq, inputs)] of T rows each: glue conv, one kernel call with
        state indices idx (1-D: in place; 2-D: spec mode with num_accepted acc), glue norm."""
        torch = self.torch
        L = self.layers[l]
        di, gs = L.nh * L.hp, L.ng * L.ns
        xbc = torch.cat([self._conv(l, q, torch.from_numpy(np.array(i[l]["x"])).to(self.dev), keep) for q, i in entries])
        a = torch.from_numpy(np.concatenate([i[l]["a"] for _, i in entries])).to(self.dev)
        z = torch.from_numpy(np.concatenate([i[l]["z"] for _, i in entries])).to(self.dev)
        n = xbc.shape[0]
        x = xbc[:, :di].reshape(n, L.nh, L.hp).contiguous()
        B = xbc[:, di:di + gs].reshape(n, L.ng, L.ns).contiguous()
        C = xbc[:, di + gs:].reshape(n, L.ng, L.ns).contiguous()
        dt, dt_bias, softplus = self._dt(L, a)
        out = torch.empty_like(x)
        cu = torch.arange(0, (len(entries) + 1) * T, T, dtype=torch.int32, device=self.dev)
        self.update(self.ssm[l], x, dt[:, :, None].expand(n, L.nh, L.hp), L.k_A, B, C, D=L.k_D, z=None,
                    dt_bias=dt_bias, dt_softplus=softplus, state_batch_indices=idx, dst_state_batch_indices=idx,
                    out=out, num_accepted_tokens=acc, cu_seqlens=cu)
        return self._norm(L, out.reshape(n, di), z)

    def _idx(self, rows):
        return self.torch.tensor(rows, dtype=self.torch.int32, device=self.dev)

    def _split(self, res, T, count):
        return [res[j * T:(j + 1) * T] for j in range(count)]

    # --- ops ------------------------------------------------------------------------------------

    def prefill(self, slot, inputs):
        T = len(inputs[0]["x"])
        q = self.seqs[slot]
        rows, accepted = self.spec.prefill(slot, q.live, T)
        idx, acc = self._idx([rows]), self._idx([accepted])
        outs = [self._layer(l, [(q, inputs)], T, idx, acc, False) for l in range(len(self.layers))]
        q.live = -1
        return outs

    def decode(self, slots, inputs):
        real = [i for i, s in enumerate(slots) if s >= 0]  # padding rows are not run
        outs = [[np.zeros((1, L.out_dim), np.float32) for L in self.layers] for _ in slots]
        in_place = [i for i in real if self.seqs[slots[i]].live < 0]  # vLLM's non-spec path
        from_draft = [i for i in real if self.seqs[slots[i]].live >= 0]
        for group, spec in ((in_place, False), (from_draft, True)):
            if not group:
                continue
            entries = [(self.seqs[slots[i]], inputs[i]) for i in group]
            if spec:
                pairs = [self.spec.from_draft(slots[i], self.seqs[slots[i]].live) for i in group]
                idx, acc = self._idx([p[0] for p in pairs]), self._idx([p[1] for p in pairs])
            else:
                idx, acc = self._idx([self.spec.home(slots[i]) for i in group]), None
            for l in range(len(self.layers)):
                for i, o in zip(group, self._split(self._layer(l, entries, 1, idx, acc, False), 1, len(group))):
                    outs[i][l] = o
        for i in real:
            self.seqs[slots[i]].live = -1
        return outs

    def verify(self, slots, k, arm, inputs):
        real = [i for i, s in enumerate(slots) if s >= 0]
        outs = [[np.zeros((k, L.out_dim), np.float32) for L in self.layers] for _ in slots]
        if not real:
            return outs
        pairs = [self.spec.verify(slots[i], self.seqs[slots[i]].live) for i in real]
        idx, acc = self._idx([p[0] for p in pairs]), self._idx([p[1] for p in pairs])
        entries = [(self.seqs[slots[i]], inputs[i]) for i in real]
        for l in range(len(self.layers)):
            for i, o in zip(real, self._split(self._layer(l, entries, k, idx, acc, True), k, len(real))):
                outs[i][l] = o
        for q, _ in entries:
            q.live, q.last_k = k - 1, k
        return outs

    def _accept(self, slot, n):
        """vLLM's accept: the state after n kept rows of the last verify, row slot n - 1 (the next
        step reads column n - 1), conv window n - 1."""
        q = self.seqs[slot]
        q.live = n - 1
        q.conv = [w[n - 1].clone() for w in q.conv_inter]

    def _save(self, slot):
        q = self.seqs[slot]
        p = self._phys(slot)
        return [self.ssm[l][p].clone() for l in range(len(self.layers))], [w.clone() for w in q.conv]

    def _restore(self, slot, saved):
        q = self.seqs[slot]
        for l in range(len(self.layers)):
            self.ssm[l][self.spec.home(slot)].copy_(saved[0][l])
        q.conv = [w.clone() for w in saved[1]]
        q.live = -1

    def _record(self, slot):
        return self.seqs[slot]

    def _layer_state(self, slot, l, n):
        q = self.seqs[slot]
        return (self.ssm[l][self._phys(slot)], q.conv[l], [self.ssm[l][self.spec.row(slot, t)] for t in range(n)],
                q.conv_inter[l][:n])


if __name__ == "__main__":
    main(VllmMamba2, "vllm-mamba2")

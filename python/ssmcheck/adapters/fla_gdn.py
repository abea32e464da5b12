"""flash-linear-attention's ``fused_recurrent_gated_delta_rule`` as ssmcheck's system under test.

    SSMCHECK_FLA_PATH=peers/fla PYTHONPATH=python \\
        python3 -m ssmcheck.adapters.fla_gdn build/ssmcheck fuzz --h-mode f32 --cases 200

What runs is fla's recurrent kernel, called the way fla's own GatedDeltaNet layer calls it in
inference (fla/layers/gated_deltanet.py): raw a and b with the gate computed in the kernel
(``use_gate_in_kernel``: g = -exp(A_log) softplus(a + dt_bias); ``use_beta_sigmoid_in_kernel``),
``use_qk_l2norm_in_kernel``, and the state in fla's layer layout ``state_v_first`` ([N, HV, V, K],
kd fastest: the ``nv,vd,kd`` profile). fla has no pool indices, no speculative path and no
in-place state: the adapter keeps one state tensor per slot and passes it as ``initial_state``;
the kernel returns the final state (always FP32), which the adapter stores (rounded to FP16 in h
mode f16-pool, with torch's round-to-nearest-even). A verify runs its K rows one kernel call each
(batched over the sequences), because the kernel returns only the final state: the state after
each row is the contract's intermediate. A prefill of T rows is one call of T rows.

The short convolution is the adapter's, in torch (fla's ``causal_conv1d_update`` keeps the full
d_conv window [N, D, W] with column 0 oldest: the contract's convention); so is the gated RMS
norm of the output. Checkpoints and snapshots are torch copies.

Numerics it declares: torch's gates (fla's in-kernel softplus is linear above 20, nothing is
clamped) and FP16 stores that overflow to inf (torch's conversion of the FP32 final state).

Options (``--backend python:fla-gdn,key=value``): ``gating=kernel`` (default) or
``gating=contract`` (the contract's clamped gates computed in torch and passed as log g; run it
with ``--gates clamped``);
``device=cuda:N``. h modes f32 and f16-pool; f16 (to_f16 of an FP32 pool) has no fla counterpart.
"""
import numpy as np

from .common import (SlotPolicy, contract_gates, gated_rms_norm, import_peer, main, parse_options,
                     stack_inputs, to_device)
from ..bridge import LayerState, State

ENV = "SSMCHECK_FLA_PATH"


class _Slot:
    def __init__(self):
        self.h, self.conv = None, None  # per layer
        self.ckpt = None
        self.inter = None  # per layer: [(h, conv) after rows 0..K-2]
        self.last_k = 0


class FlaGdn:
    name = "flash-linear-attention fused_recurrent_gated_delta_rule (state_v_first, gate and beta in kernel)"
    own_legality = False
    bitwise = False
    conv_window = "d_conv"
    h_layout = "nv,vd,kd"   # state_v_first: [HV, V, K]
    prefill_stage = False   # the kernel widens FP16 state in registers
    gates = "torch"         # the in-kernel gate: softplus linear above 20, no clamps (--gates clamped with gating=contract)
    f16_store = "inf"       # the FP32 final state is stored with torch's .to(float16): overflow to inf

    def __init__(self, options=""):
        import torch
        self.torch = torch
        o = parse_options(options, dict(gating=("kernel", "contract"), device=None))
        self.gating = o.get("gating", "kernel")
        self.dev = torch.device(o.get("device", "cuda"))
        self.recurrent = import_peer("fla.ops.gated_delta_rule", ENV,
                                     "flash-linear-attention").fused_recurrent_gated_delta_rule

    def create_pool(self, layers, pool):
        if pool.h_mode == "f16":
            raise NotImplementedError("h mode f16 (an FP32 pool converted by to_f16) has no fla counterpart: "
                                      "use f32 or f16-pool")
        self.layers, self.pool = layers, pool
        self.dtype = self.torch.float16 if pool.h_mode == "f16-pool" else self.torch.float32
        to_device(self.torch, layers, self.dev)
        self.policy = SlotPolicy(pool.h_capacity)
        self.slots = [_Slot() for _ in range(pool.max_slots)]
        self.snaps = [None] * pool.snapshot_slots

    def alloc(self, min_capacity):
        torch = self.torch
        s = self.policy.alloc(min_capacity)
        q = _Slot()
        q.h = [torch.zeros(L.nv, L.vd, L.kd, dtype=self.dtype, device=self.dev) for L in self.layers]
        q.conv = [torch.zeros(L.conv_dim, L.d_conv, dtype=torch.float32, device=self.dev) for L in self.layers]
        q.inter = [[] for _ in self.layers]
        self.slots[s] = q
        return s

    def release(self, slot):
        self.policy.release(slot)

    def _conv(self, L, win, x):
        """One row of the short convolution on windows win [N, conv_dim, d_conv] (in place):
        shift left, newest input last, silu(bias + sum w * win)."""
        torch = self.torch
        win[:, :, :-1] = win[:, :, 1:].clone()
        win[:, :, -1] = x
        y = (win * L.t_conv_w).sum(dim=-1)
        if L.t_conv_bias is not None:
            y = y + L.t_conv_bias
        return torch.nn.functional.silu(y)

    def _rows(self, l, slots, x, a, b, z, T):
        """T rows of layer l for the sequences ``slots`` (x [N, T, conv_dim]): the conv row by
        row in torch, then one kernel call of T rows; returns outputs [N, T, out] and the FP32
        final states [N, HV, V, K]."""
        torch = self.torch
        L = self.layers[l]
        N = len(slots)
        win = torch.stack([self.slots[s].conv[l] for s in slots])
        y = torch.stack([self._conv(L, win, x[:, t]) for t in range(T)], dim=1)  # [N, T, conv_dim]
        for i, s in enumerate(slots):
            self.slots[s].conv[l] = win[i].clone()
        qk = L.nk * L.kd
        q = y[..., :qk].reshape(N, T, L.nk, L.kd)
        k = y[..., qk:2 * qk].reshape(N, T, L.nk, L.kd)
        v = y[..., 2 * qk:].reshape(N, T, L.nv, L.vd)
        h0 = torch.stack([self.slots[s].h[l] for s in slots])
        if self.gating == "contract":
            g, beta = contract_gates(torch, L, a.reshape(N * T, L.nv), b.reshape(N * T, L.nv))
            kw = dict(g=g.reshape(N, T, L.nv), beta=beta.reshape(N, T, L.nv))
        else:
            kw = dict(g=a, beta=b, use_gate_in_kernel=True, A_log=L.t_A_log, dt_bias=L.t_dt_bias,
                      use_beta_sigmoid_in_kernel=True)
        o, ht = self.recurrent(q=q, k=k, v=v, initial_state=h0, output_final_state=True,
                               use_qk_l2norm_in_kernel=True, state_v_first=True, **kw)
        out = gated_rms_norm(torch, L, o.reshape(N * T, L.nv, L.vd), z.reshape(N * T, L.out_dim))
        return out.reshape(N, T, L.out_dim), ht

    def _run(self, slots, inputs, T, keep):
        """Every layer over the sequences ``slots`` (padding rows are not run): one call of T rows,
        or (keep) T calls of one row, keeping the state after rows 0..T-2."""
        torch = self.torch
        outs = [[np.zeros((T, L.out_dim), np.float32) for L in self.layers] for _ in slots]
        real = [i for i, s in enumerate(slots) if s >= 0]
        if not real:
            return outs
        ss = [slots[i] for i in real]
        for l, L in enumerate(self.layers):
            x, a, b, z = stack_inputs(torch, self.dev, [inputs[i] for i in real], l)
            x = x.reshape(len(ss), T, L.conv_dim)
            a, b = a.reshape(len(ss), T, L.nv), b.reshape(len(ss), T, L.nv)
            z = z.reshape(len(ss), T, L.out_dim)
            pieces = [(t, t + 1) for t in range(T)] if keep else [(0, T)]
            res = []
            if keep:
                for s in ss:
                    self.slots[s].inter[l] = []
            for t0, t1 in pieces:
                o, ht = self._rows(l, ss, x[:, t0:t1], a[:, t0:t1].contiguous(), b[:, t0:t1].contiguous(),
                                   z[:, t0:t1], t1 - t0)
                res.append(o)
                for i, s in enumerate(ss):
                    q = self.slots[s]
                    q.h[l] = ht[i].to(self.dtype)  # the store: FP32, or FP16 rounded to nearest even
                    if keep and t1 < T:
                        q.inter[l].append((q.h[l].clone(), q.conv[l].clone()))
            res = torch.cat(res, dim=1)
            for j, i in enumerate(real):
                outs[i][l] = res[j]
        if keep:
            for s in ss:
                self.slots[s].last_k = T
        return outs

    def prefill(self, slot, inputs):
        return self._run([slot], [inputs], len(inputs[0]["x"]), False)[0]

    def decode(self, slots, inputs):
        return self._run(slots, inputs, 1, False)

    def verify(self, slots, k, arm, inputs):
        return self._run(slots, inputs, k, True)

    def _save(self, slot):
        q = self.slots[slot]
        return ([h.clone() for h in q.h], [c.clone() for c in q.conv])

    def _load(self, slot, saved):
        q = self.slots[slot]
        q.h, q.conv = [h.clone() for h in saved[0]], [c.clone() for c in saved[1]]

    def checkpoint(self, slot, is_async):
        self.slots[slot].ckpt = self._save(slot)

    def commit(self, slot, n, k):
        if n < k:
            self._load(slot, ([p[n - 1][0] for p in self.slots[slot].inter], [p[n - 1][1] for p in self.slots[slot].inter]))

    def rollback(self, slot, n, and_checkpoint):
        q = self.slots[slot]
        if n == 0:
            if q.ckpt is not None:
                self._load(slot, q.ckpt)
        else:
            self.commit(slot, n, n + 1)
        if and_checkpoint:
            self.checkpoint(slot, True)

    def to_f16(self, slot):
        raise NotImplementedError("to_f16: h mode f16 is not supported by this adapter")

    def snapshot_save(self, slot, snap):
        self.snaps[snap] = self._save(slot)

    def snapshot_restore(self, slot, snap):
        self._load(slot, self.snaps[snap])

    def export_state(self, slot):
        q = self.slots[slot]
        n = max(q.last_k - 1, 0)
        layers = []
        for l in range(len(self.layers)):
            layers.append(LayerState(
                q.h[l], q.conv[l],
                h_checkpoint=None if q.ckpt is None else q.ckpt[0][l],
                conv_checkpoint=None if q.ckpt is None else q.ckpt[1][l],
                h_intermediates=[p[0] for p in q.inter[l][:n]],
                conv_intermediates=[p[1] for p in q.inter[l][:n]]))
        return State(q.last_k, layers)


if __name__ == "__main__":
    main(FlaGdn, "fla-gdn")

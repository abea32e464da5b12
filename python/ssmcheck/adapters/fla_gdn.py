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
mode f16-pool, with torch's round-to-nearest-even). A prefill, decode or verify of T rows is one
kernel call of T rows (batched over the sequences) from the stored state: its outputs, and the
state it stores, come from the FP32 state the kernel carries across the rows. Because the kernel
returns only the final state, a verify of K rows also calls it on each prefix of t + 1 rows (t =
0..K-2) from the same start state, with nothing else stored: the final state of that call, the
FP32 state after rows 0..t (the same arithmetic as row t of the K-row call), rounded once, is
the contract's intermediate t.

The short convolution is the adapter's, in torch (fla's ``causal_conv1d_update`` keeps the full
d_conv window [N, D, W] with column 0 oldest: the contract's convention); so is the gated RMS
norm of the output. Checkpoints and snapshots are torch copies.

Numerics it declares (docs/plugins.md, "Convention profiles"): torch's gates (fla's in-kernel
softplus is linear above 20, nothing is clamped), FP16 stores that overflow to inf (torch's
conversion of the FP32 final state) and FP16 rows carried in FP32 (``f16_rows = "carried"``: the
rows of one call widen the stored FP16 state once and carry it in FP32; each row's output reads
that unrounded state, and only what is stored, the final state and a verify's intermediates, is
rounded to FP16).

Options (``--backend python:fla-gdn,key=value``): ``gating=kernel`` (default) or
``gating=contract`` (the contract's clamped gates computed in torch and passed as log g; run it
with ``--gates clamped``);
``device=cuda:N``. h modes f32 and f16-pool; f16 (to_f16 of an FP32 pool) has no fla counterpart.
"""
import numpy as np

from .common import contract_gates, gated_rms_norm, import_peer, main, stack_inputs, to_device
from .peer_adapter import PeerAdapter

ENV = "SSMCHECK_FLA_PATH"


class _Slot:
    def __init__(self):
        self.h, self.conv = None, None  # per layer
        self.ckpt = None
        self.inter = None  # per layer: [(h, conv) after rows 0..K-2]
        self.last_k = 0


class FlaGdn(PeerAdapter):
    name = "flash-linear-attention fused_recurrent_gated_delta_rule (state_v_first, gate and beta in kernel)"
    own_legality = False
    bitwise = False
    conv_window = "d_conv"
    h_layout = "nv,vd,kd"   # state_v_first: [HV, V, K]
    prefill_stage = False   # the kernel widens FP16 state in registers
    gates = "torch"         # the in-kernel gate: softplus linear above 20, no clamps (--gates clamped with gating=contract)
    f16_store = "inf"       # the FP32 final state is stored with torch's .to(float16): overflow to inf
    f16_rows = "carried"    # one call per op: the rows carry FP32, only the stores round to FP16
    PEER = "fla"

    def __init__(self, options=""):
        o = self._options(options, dict(gating=("kernel", "contract")))
        self.gating = o.get("gating", "kernel")
        self.recurrent = import_peer("fla.ops.gated_delta_rule", ENV,
                                     "flash-linear-attention").fused_recurrent_gated_delta_rule

    def create_pool(self, layers, pool):
        self._start_pool(layers, pool)
        to_device(self.torch, layers, self.dev)
        self.slots = [_Slot() for _ in range(pool.max_slots)]

    def alloc(self, min_capacity):
        torch = self.torch
        s = self.policy.alloc(min_capacity)
        q = _Slot()
        q.h = [torch.zeros(L.nv, L.vd, L.kd, dtype=self.dtype, device=self.dev) for L in self.layers]
        q.conv = [torch.zeros(L.conv_dim, L.d_conv, dtype=torch.float32, device=self.dev) for L in self.layers]
        q.inter = [[] for _ in self.layers]
        self.slots[s] = q
        return s

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

    def _conv_rows(self, l, slots, x, T):
        """The short convolution of T rows for the sequences ``slots`` (x [N, T, conv_dim]), row
        by row in torch, on their windows (updated in place): returns the activations [N, T,
        conv_dim] and the windows after each row (T tensors [N, conv_dim, d_conv])."""
        L = self.layers[l]
        win = self.torch.stack([self.slots[s].conv[l] for s in slots])
        ys, wins = [], []
        for t in range(T):
            ys.append(self._conv(L, win, x[:, t]))
            wins.append(win.clone())
        for i, s in enumerate(slots):
            self.slots[s].conv[l] = wins[-1][i].clone()
        return self.torch.stack(ys, dim=1), wins

    def _kernel(self, l, y, a, b, h0):
        """One call of fla's kernel over the T rows of y [N, T, conv_dim] (a, b [N, T, nv]) from
        the start states h0 [N, HV, V, K] (FP32 or FP16): returns the outputs o [N, T, HV, V] and
        the FP32 final states [N, HV, V, K]."""
        torch = self.torch
        L = self.layers[l]
        N, T = y.shape[0], y.shape[1]
        qk = L.nk * L.kd
        q = y[..., :qk].reshape(N, T, L.nk, L.kd)
        k = y[..., qk:2 * qk].reshape(N, T, L.nk, L.kd)
        v = y[..., 2 * qk:].reshape(N, T, L.nv, L.vd)
        if self.gating == "contract":
            g, beta = contract_gates(torch, L.t_A_log, L.t_dt_bias, a.reshape(N * T, L.nv), b.reshape(N * T, L.nv))
            kw = dict(g=g.reshape(N, T, L.nv), beta=beta.reshape(N, T, L.nv))
        else:
            kw = dict(g=a.contiguous(), beta=b.contiguous(), use_gate_in_kernel=True, A_log=L.t_A_log,
                      dt_bias=L.t_dt_bias, use_beta_sigmoid_in_kernel=True)
        return self.recurrent(q=q, k=k, v=v, initial_state=h0, output_final_state=True,
                              use_qk_l2norm_in_kernel=True, state_v_first=True, **kw)

    def _run(self, slots, inputs, T, keep):
        """Every layer over the sequences ``slots`` (padding rows are not run): one kernel call of
        T rows from the stored state, whose outputs are the op's and whose final state is stored
        (FP32, or FP16 rounded to nearest even); with ``keep`` (a verify) also one call of t + 1
        rows from the same stored state for t = 0..T-2, whose final state, rounded the same way,
        is intermediate t (with the conv window after row t)."""
        torch = self.torch
        outs = [[np.zeros((T, L.out_dim), np.float32) for L in self.layers] for _ in slots]
        real = [i for i, s in enumerate(slots) if s >= 0]
        if not real:
            return outs
        ss = [slots[i] for i in real]
        N = len(ss)
        for l, L in enumerate(self.layers):
            x, a, b, z = stack_inputs(torch, self.dev, [inputs[i] for i in real], l)
            x = x.reshape(N, T, L.conv_dim)
            a, b = a.reshape(N, T, L.nv), b.reshape(N, T, L.nv)
            y, wins = self._conv_rows(l, ss, x, T)
            h0 = torch.stack([self.slots[s].h[l] for s in ss])  # the stored state, before the op
            o, ht = self._kernel(l, y, a, b, h0)
            res = gated_rms_norm(torch, L, o.reshape(N * T, L.nv, L.vd), z.reshape(N * T, L.out_dim))
            res = res.reshape(N, T, L.out_dim)
            inter = [[] for _ in ss]
            if keep:
                for t in range(T - 1):
                    _, hp = self._kernel(l, y[:, :t + 1].contiguous(), a[:, :t + 1], b[:, :t + 1], h0)
                    for i in range(N):
                        inter[i].append((hp[i].to(self.dtype), wins[t][i].clone()))
            for i, s in enumerate(ss):
                q = self.slots[s]
                q.h[l] = ht[i].to(self.dtype)  # the store: FP32, or FP16 rounded to nearest even
                if keep:
                    q.inter[l] = inter[i]
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

    def _record(self, slot):
        return self.slots[slot]

    def _save(self, slot):
        q = self.slots[slot]
        return ([h.clone() for h in q.h], [c.clone() for c in q.conv])

    def _restore(self, slot, saved):
        q = self.slots[slot]
        q.h, q.conv = [h.clone() for h in saved[0]], [c.clone() for c in saved[1]]

    def _accept(self, slot, n):
        """Intermediate n - 1 of the last verify (h and conv window) as the live state."""
        inter = self.slots[slot].inter
        self._restore(slot, ([p[n - 1][0] for p in inter], [p[n - 1][1] for p in inter]))

    def _layer_state(self, slot, l, n):
        q = self.slots[slot]
        return q.h[l], q.conv[l], [p[0] for p in q.inter[l][:n]], [p[1] for p in q.inter[l][:n]]


if __name__ == "__main__":
    main(FlaGdn, "fla-gdn")

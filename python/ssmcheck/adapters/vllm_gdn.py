"""vLLM's Gated DeltaNet speculative-decoding kernels as ssmcheck's system under test.

    SSMCHECK_VLLM_PATH=peers/vllm PYTHONPATH=python \\
        python3 -m ssmcheck.adapters.vllm_gdn build/ssmcheck fuzz --h-mode f32 --cases 200

What runs is vLLM's code, driven the way Qwen3-Next's GDN layer drives it on the spec-decode path
(vllm/model_executor/models/qwen3_next.py, ``_forward_core``):
- ``causal_conv1d_update`` on a conv cache line of ``d_conv - 1 + num_spec`` columns
  (``[lines, dim, state_len]``, dim contiguous) with ``num_accepted_tokens`` choosing where the
  sequence's window starts: after a verify of K rows the window after row t is columns
  ``t .. t + d_conv - 2`` of the line, so the contract's conv intermediate t is that window;
- ``fused_gdn_gating`` (g = -exp(A_log) softplus(a + dt_bias), threshold 20; beta = sigmoid(b));
- ``fused_recurrent_gated_delta_rule`` on a pool ``[slots, nv, kd, vd]`` (FP32, or FP16 in h mode
  f16-pool) with ``ssm_state_indices`` ``[N, num_spec + 1]`` and ``num_accepted_tokens``: the
  kernel reads the start state from column ``num_accepted - 1`` of a sequence's row and writes
  the state after row t to column t, so the contract's h intermediate t is the slot of column t and
  ``commit n k`` is vLLM's accept of n tokens (the next step reads column n - 1; nothing is copied);
  a decode on a sequence with no drafts in flight uses the non-spec path (1-D indices, in place).

Where the contract asks for more than vLLM's scheduler ever does, the adapter adds the least glue
it can, in torch, and says so: every contract slot owns a row of ``num_spec + 1`` pool slots plus
a home slot, and two conv lines. A decode or prefill that starts from an accepted draft writes the
home slot (2-D indices [home, draft], num_accepted 2) and, for conv, copies the accepted window to
the sequence's second line first, so that the last verify's intermediates stay readable (vLLM
overwrites them at the next step; the contract keeps them until the next verify). Checkpoints and
prefix-cache snapshots are torch copies (vLLM has neither for GDN state). Prefill runs the same
two kernels (causal_conv1d_update in chunks of the line's width; vLLM's prefill kernels
``causal_conv1d_fn`` and ``chunk_gated_delta_rule`` are not exercised). The gated RMS norm of the
output is the contract's, in torch.

Numerics it declares (docs/plugins.md, "Convention profiles"): torch's gates (``fused_gdn_gating``
saturates softplus as torch does and clamps nothing), FP16 stores that overflow to inf (the
kernel's ``.to(float16)``) and FP16 rows carried in FP32 (``f16_rows = "carried"``: the kernel
widens the stored FP16 state once per call and carries it in FP32 registers across the rows;
each row's output reads that unrounded state and only the stores, the state after each row in
its own slot, round to FP16). In each layer, every decode, verify and prefill of a sequence is
one call of the recurrent kernel (a batched decode may take two, one per path, each sequence in
one of them), so nothing rounds between the rows of an op; ssmcheck checks it on a model with
those numerics.

Options (``--backend python:vllm-gdn,key=value``): ``gating=vllm`` (default: vLLM's
``fused_gdn_gating``) or ``gating=contract`` (the contract's clamped gates computed in torch in
FP64 on the host, copied with the inputs and fed to the recurrent kernel as log g; run it with
``--gates clamped``);
``device=cuda:N``. h modes: f32 and f16-pool (vLLM's ``mamba_ssm_cache_dtype`` float32 /
float16); mode f16 (an FP32 pool converted by ``to_f16``) has no vLLM counterpart and is refused.
"""
import numpy as np

from .common import SpecSlots, gated_rms_norm, host_contract_gates, import_peer, main, stack_inputs, to_device
from .peer_adapter import PeerAdapter

ENV = "SSMCHECK_VLLM_PATH"
PREFILL_COLUMNS = 8  # extra conv-line columns beyond num_spec, so a prefill runs in chunks of >= 8 rows


def _kernels():
    ops = import_peer("vllm.model_executor.layers.fla.ops", ENV, "vLLM's GDN kernels")
    conv = import_peer("vllm.model_executor.layers.mamba.ops.causal_conv1d", ENV, "vLLM's causal_conv1d")
    try:
        gating = import_peer("vllm.model_executor.models.qwen3_next", ENV, "vLLM's Qwen3-Next model").fused_gdn_gating
    except (ImportError, AttributeError):
        gating = import_peer("vllm_gdn_gating", ENV, "vLLM's fused_gdn_gating (copied beside vllm/)").fused_gdn_gating
    return ops.fused_recurrent_gated_delta_rule, conv.causal_conv1d_update, gating


def _rows(gates, sel):
    """The rows sel of _inputs' gates (None stays None)."""
    return None if gates is None else tuple(t[sel] for t in gates)


class _Seq:
    """Where one contract slot's state is: h in its row slot ``live`` (0..M) or its home slot
    (live == -1); conv in (line, offset); the last verify's conv line and K."""

    def __init__(self, s):
        self.live = -1
        self.line, self.off = 2 * s, 0
        self.verify_line = None
        self.last_k = 0
        self.ckpt = None  # (h per layer, conv window per layer)


class VllmGdn(PeerAdapter):
    name = "vLLM GDN spec-decode kernels (fused_recurrent_gated_delta_rule, causal_conv1d_update, fused_gdn_gating)"
    own_legality = False
    bitwise = False
    conv_window = "d_conv-1"   # causal_conv1d's state: the d_conv - 1 inputs the next step reads
    h_layout = "nv,kd,vd"      # this version's pool [slots, HV, K, V]; newer vLLM uses [HV, V, K]
    prefill_stage = False      # FP16 state is widened in registers, never staged
    gates = "torch"            # fused_gdn_gating: softplus linear above 20, no clamps (--gates clamped with gating=contract)
    f16_store = "inf"          # the kernel's .to(float16) store overflows to inf
    f16_rows = "carried"       # one kernel call per op: the rows carry FP32 in registers, only stores round

    PEER = "vLLM"
    F16_POOL_HINT = " (mamba_ssm_cache_dtype float32 / float16)"

    def __init__(self, options=""):
        o = self._options(options, dict(gating=("vllm", "contract")))
        self.gating = o.get("gating", "vllm")
        self.recurrent, self.conv_update, self.gdn_gating = _kernels()

    # --- the pool -----------------------------------------------------------------------------

    def create_pool(self, layers, pool):
        torch = self.torch
        self._start_pool(layers, pool)
        self.spec = SpecSlots(pool.h_capacity)
        self.M = self.spec.M  # num_spec: the most drafts a verify can carry
        S = pool.max_slots
        to_device(torch, layers, self.dev)
        self.host_gates = [host_contract_gates(torch, L) for L in layers]
        self.ssm, self.conv = [], []
        for L in layers:
            self.ssm.append(torch.zeros(self.spec.count(S), L.nv, L.kd, L.vd, dtype=self.dtype, device=self.dev))
            width = L.d_conv - 1 + max(self.M, PREFILL_COLUMNS)
            # vLLM keeps [lines, state_len, dim] and hands the kernel its transpose (dim contiguous)
            self.conv.append(torch.zeros(2 * S, width, L.conv_dim, dtype=torch.float32, device=self.dev).transpose(1, 2))
        self.seqs = [_Seq(s) for s in range(S)]

    def alloc(self, min_capacity):
        s = self.policy.alloc(min_capacity)
        for l in range(len(self.layers)):
            self.ssm[l][self.spec.range(s)].zero_()
            self.conv[l][2 * s:2 * s + 2].zero_()
        self.seqs[s] = _Seq(s)
        return s

    def _home(self, s):
        return self.spec.home(s)

    def _phys(self, s):
        return self.spec.phys(s, self.seqs[s].live)

    def _window(self, l, line, off):
        return self.conv[l][line, :, off:off + self.layers[l].d_conv - 1]

    def _free_conv_line(self, s):
        """Before a decode or prefill: when the live window is in the line of the last verify and
        that verify's intermediates are still readable, copy it to the other line (glue)."""
        q = self.seqs[s]
        if q.line == q.verify_line and q.last_k > 1:
            other = q.line ^ 1  # a sequence's lines are 2s and 2s + 1
            for l in range(len(self.layers)):
                self._window(l, other, 0).copy_(self._window(l, q.line, q.off))
            q.line, q.off = other, 0

    # --- one layer over a batch of entries of T rows each ----------------------------------------

    def _conv(self, l, x, seqs, T):
        """causal_conv1d_update in place on each sequence's live line (spec mode: num_accepted
        selects the window); returns the activations [N*T, conv_dim]."""
        torch = self.torch
        L = self.layers[l]
        lines = torch.tensor([q.line for q in seqs], dtype=torch.int32, device=self.dev)
        acc = torch.tensor([q.off + 1 for q in seqs], dtype=torch.int32, device=self.dev)
        qsl = torch.arange(0, (len(seqs) + 1) * T, T, dtype=torch.int32, device=self.dev)
        return self.conv_update(x, self.conv[l], L.t_conv_w, L.t_conv_bias, "silu", conv_state_indices=lines,
                                num_accepted_tokens=acc, query_start_loc=qsl, max_query_len=T)

    def _inputs(self, entries, l):
        """Layer l's inputs of the entries on the device: (x, a, b, z, gates), gates the
        contract's (g, beta) computed on the host with gating=contract, else None."""
        torch = self.torch
        if self.gating != "contract":
            return (*stack_inputs(torch, self.dev, entries, l), None)
        x, a, b, z, g, beta = stack_inputs(torch, self.dev, entries, l, self.host_gates[l])
        return x, a, b, z, (g, beta)

    def _gates(self, L, a, b, gates):
        if gates is not None:  # gating=contract: the contract's, from _inputs
            return gates[0].unsqueeze(0), gates[1].unsqueeze(0)
        return self.gdn_gating(L.t_A_log, a.contiguous(), b.contiguous(), L.t_dt_bias)

    def _recurrent(self, l, y, a, b, z, T, idx, acc, gates):
        """fused_recurrent_gated_delta_rule on rows y [N*T, conv_dim]; idx: 1-D [N] (in place) or
        2-D [N, W] ssm_state_indices with num_accepted_tokens acc; gates: _inputs'. Returns
        outputs [N*T, out]."""
        torch = self.torch
        L = self.layers[l]
        n = y.shape[0]
        qk = L.nk * L.kd
        q = y[:, :qk].reshape(1, n, L.nk, L.kd)
        k = y[:, qk:2 * qk].reshape(1, n, L.nk, L.kd)
        v = y[:, 2 * qk:].reshape(1, n, L.nv, L.vd)
        g, beta = self._gates(L, a, b, gates)
        N = n // T
        cu = torch.arange(0, (N + 1) * T, T, dtype=torch.int32, device=self.dev)
        o, _ = self.recurrent(q=q, k=k, v=v, g=g, beta=beta, initial_state=self.ssm[l], inplace_final_state=True,
                              cu_seqlens=cu, ssm_state_indices=idx, num_accepted_tokens=acc,
                              use_qk_l2norm_in_kernel=True)
        return gated_rms_norm(torch, L, o.reshape(n, L.nv, L.vd), z)

    def _idx(self, rows):
        return self.torch.tensor(rows, dtype=self.torch.int32, device=self.dev)

    # --- ops ------------------------------------------------------------------------------------

    def prefill(self, slot, inputs):
        torch = self.torch
        T = len(inputs[0]["x"])
        self._free_conv_line(slot)
        q = self.seqs[slot]
        rows, accepted = self.spec.prefill(slot, q.live, T)
        outs = []
        line, off = q.line, q.off
        for l, L in enumerate(self.layers):
            x, a, b, z, gates = self._inputs([inputs], l)
            chunk = self.conv[l].shape[2] - (L.d_conv - 1) + 1  # rows the line holds in spec mode
            q.line, q.off = line, off
            ys = []
            for t0 in range(0, T, chunk):
                c = min(chunk, T - t0)
                ys.append(self._conv(l, x[t0:t0 + c].contiguous(), [q], c))
                q.off = c - 1
            y = torch.cat(ys, dim=0)
            idx, acc = self._idx([rows]), self._idx([accepted])
            outs.append(self._recurrent(l, y, a, b, z, T, idx, acc, gates))
        q.live = -1
        return outs

    def decode(self, slots, inputs):
        torch = self.torch
        real = [i for i, s in enumerate(slots) if s >= 0]  # padding rows are not run
        outs = [[np.zeros((1, L.out_dim), np.float32) for L in self.layers] for _ in slots]
        if not real:
            return outs
        for i in real:
            self._free_conv_line(slots[i])
        seqs = [self.seqs[slots[i]] for i in real]
        in_place = [j for j, i in enumerate(real) if self.seqs[slots[i]].live < 0]   # vLLM's non-spec path
        from_draft = [j for j, i in enumerate(real) if self.seqs[slots[i]].live >= 0]
        for l, L in enumerate(self.layers):
            x, a, b, z, gates = self._inputs([inputs[i] for i in real], l)
            y = self._conv(l, x, seqs, 1)
            res = torch.empty(len(real), L.out_dim, device=self.dev)
            if in_place:
                sel = torch.tensor(in_place, device=self.dev)
                idx = self._idx([self._home(slots[real[j]]) for j in in_place])
                res[sel] = self._recurrent(l, y[sel], a[sel], b[sel], z[sel], 1, idx, None, _rows(gates, sel))
            if from_draft:
                sel = torch.tensor(from_draft, device=self.dev)
                pairs = [self.spec.from_draft(slots[real[j]], self.seqs[slots[real[j]]].live) for j in from_draft]
                idx, acc = self._idx([p[0] for p in pairs]), self._idx([p[1] for p in pairs])
                res[sel] = self._recurrent(l, y[sel], a[sel], b[sel], z[sel], 1, idx, acc, _rows(gates, sel))
            for j, i in enumerate(real):
                outs[i][l] = res[j:j + 1]
        for q in seqs:
            q.off = 0
            q.live = -1
        return outs

    def verify(self, slots, k, arm, inputs):
        torch = self.torch
        real = [i for i, s in enumerate(slots) if s >= 0]
        outs = [[np.zeros((k, L.out_dim), np.float32) for L in self.layers] for _ in slots]
        if not real:
            return outs
        seqs = [self.seqs[slots[i]] for i in real]
        pairs = [self.spec.verify(slots[i], self.seqs[slots[i]].live) for i in real]
        idx, acc = self._idx([p[0] for p in pairs]), self._idx([p[1] for p in pairs])
        for l, L in enumerate(self.layers):
            x, a, b, z, gates = self._inputs([inputs[i] for i in real], l)
            y = self._conv(l, x, seqs, k)
            res = self._recurrent(l, y, a, b, z, k, idx, acc, gates)
            for j, i in enumerate(real):
                outs[i][l] = res[j * k:(j + 1) * k]
        for q in seqs:
            q.verify_line, q.off, q.live, q.last_k = q.line, k - 1, k - 1, k
        return outs

    def _record(self, slot):
        return self.seqs[slot]

    def _save(self, slot):
        q = self.seqs[slot]
        p = self._phys(slot)
        return ([self.ssm[l][p].clone() for l in range(len(self.layers))],
                [self._window(l, q.line, q.off).clone() for l in range(len(self.layers))])

    def _restore(self, slot, saved):
        """h into the home slot, conv into a line that holds no readable intermediate."""
        q = self.seqs[slot]
        line = q.line if q.line != q.verify_line else q.verify_line ^ 1
        for l in range(len(self.layers)):
            self.ssm[l][self._home(slot)].copy_(saved[0][l])
            self._window(l, line, 0).copy_(saved[1][l])
        q.live, q.line, q.off = -1, line, 0

    def _accept(self, slot, n):
        """vLLM's accept: the next step reads column n - 1 of the last verify's rows and conv line."""
        q = self.seqs[slot]
        q.live, q.line, q.off = n - 1, q.verify_line, n - 1

    def _layer_state(self, slot, l, n):
        q = self.seqs[slot]
        return (self.ssm[l][self._phys(slot)], self._window(l, q.line, q.off),
                [self.ssm[l][self.spec.row(slot, t)] for t in range(n)],
                [self._window(l, q.verify_line, t) for t in range(n)])


if __name__ == "__main__":
    main(VllmGdn, "vllm-gdn")

"""A complete system under test in numpy: every transition of the GDN state model in every h mode
(f32, f16, f16-pool), PLE carries included, served to ssmcheck by the Python bridge. FP64
compute; FP32 storage, or FP16 h as STATE-MODEL section 6 has it (rows compute from the stored
FP16 state and store it clamped to +-65504, NaN -> -65504; prefill runs in FP32, widened, and is
rounded once by the converter; f16-pool prefills through the slot's FP32 staging blob). ssmcheck
judges it against its reference under the tolerance classes.

    PYTHONPATH=python /usr/bin/python3 python/examples/numpy_gdn.py build/ssmcheck fuzz --h-mode f32 --cases 50
    PYTHONPATH=python /usr/bin/python3 python/examples/numpy_gdn.py build/ssmcheck check --h-mode f32 --ops 'alloc; prefill 3; verify 3; commit 1 3'
    PYTHONPATH=python /usr/bin/python3 python/examples/numpy_gdn.py build/ssmcheck fuzz --h-mode f16-pool --cases 50

(PYTHONPATH=python: the package of this tree; not needed once it is installed, pip install ./python.)

It relies on ssmcheck's legality decisions (own_legality = False), so it never sees an illegal op
and need not check any.
"""
import os
import sys

import numpy as np

import ssmcheck  # installed (pip install ./python) or on PYTHONPATH (docs/plugins.md, "Python")


def silu(x):
    with np.errstate(over="ignore"):  # exp(-x) overflows to inf for x << 0: silu is then -0
        return x / (1.0 + np.exp(-x))


def to_half(h):
    """The FP32 -> FP16 converter (to_f16, the f16-pool narrow): round to nearest even, no
    saturation (overflow gives inf)."""
    with np.errstate(over="ignore"):
        return h.astype(np.float32).astype(np.float16)


def store(H, dtype, f16_store="saturate"):
    """A row's store of its new state H (FP64 here) as h's dtype: FP32, or FP16 clamped to
    [-65504, 65504] with NaN -> -65504 (the contract's "saturate"), or with "inf" torch's
    conversion (overflow to inf)."""
    H = H.astype(np.float32)
    if dtype != np.float16:
        return H
    if f16_store == "inf":
        return to_half(H)
    return np.where(np.isnan(H), np.float32(-65504.0), np.clip(H, -65504.0, 65504.0)).astype(np.float16)


def conv_silu(L, win, x):
    """The conv window update of either layer kind (win [conv_dim][d_conv], column 0 oldest,
    updated in place with x) and silu of the conv's output, in FP64."""
    win[:, :-1] = win[:, 1:]
    win[:, -1] = x
    acc = (L.conv_w.astype(np.float64) * win.astype(np.float64)).sum(axis=1)
    if L.conv_bias is not None:
        acc += L.conv_bias
    return silu(acc)


def step(L, h, win, x, a, b, z, gates="clamped", f16_store="saturate"):
    """One token of one layer; h [nv][kd][vd] (float32 or float16) and win [conv_dim][d_conv]
    (float32) updated in place.
    gates: "clamped" (the contract's) or "torch" (softplus linear above 20, no clamps); f16_store:
    how FP16 h is stored (store)."""
    y = conv_silu(L, win, x)
    nk, nv, kd, vd = L.nk, L.nv, L.kd, L.vd
    qk = y[:2 * nk * kd].reshape(2 * nk, kd)
    qk = qk / np.sqrt((qk * qk).sum(axis=1, keepdims=True) + 1e-6)  # L2 norm of each Q and K head
    kh = np.arange(nv) // (nv // nk)  # the key head of each value head
    q, k = qk[kh], qk[nk + kh]  # [nv][kd]
    v = y[2 * nk * kd:].reshape(nv, vd)
    with np.errstate(over="ignore"):
        beta = 1.0 / (1.0 + np.exp(-b.astype(np.float64)))
    xg = a.astype(np.float64) + L.dt_bias
    if gates == "torch":
        with np.errstate(over="ignore"):
            dt = np.where(xg > 20.0, xg, np.log1p(np.exp(np.minimum(xg, 20.0))))
            g = np.exp(-np.exp(L.A_log.astype(np.float64)) * dt)
    else:
        dt = np.log1p(np.exp(np.minimum(xg, 20.0)))
        A = np.exp(np.minimum(L.A_log.astype(np.float64), 20.0))
        g = np.clip(np.exp(-A * dt), 1e-6, 1.0 - 1e-6)
    H = h.astype(np.float64)
    vn = (v - g[:, None] * np.einsum("hkv,hk->hv", H, k)) * beta[:, None]
    H = g[:, None, None] * H + np.einsum("hk,hv->hkv", k, vn)
    h[...] = store(H, h.dtype, f16_store)  # the output reads the stored state
    o = np.einsum("hkv,hk->hv", h.astype(np.float64), q) / np.sqrt(kd)
    r = 1.0 / np.sqrt((o * o).mean(axis=1, keepdims=True) + L.eps)
    zz = z.astype(np.float64).reshape(nv, vd)
    with np.errstate(over="ignore"):
        gate = silu(zz) if L.output_gate == "silu" else 1.0 / (1.0 + np.exp(-zz))
    return (o * r * L.norm_w * gate).reshape(-1).astype(np.float32)


def ple_row(P, carry, x, token):
    """One row of a PLE carry (docs/state-model.md "PLE carry"): carry (history, conv) updated in
    place; returns x + silu(y), y[c] = sum_j w[c][j] X[t - (k_size-1-j) dilation][c] over X = conv ++ x."""
    history, conv = carry
    X = np.concatenate([conv.astype(np.float64), x[None, :].astype(np.float64)])  # [conv_rows + 1][C]
    y = np.zeros(P.channels)
    for j in range(P.k_size):
        y += P.w[:, j].astype(np.float64) * X[len(X) - 1 - (P.k_size - 1 - j) * P.dilation]
    out = (x.astype(np.float64) + silu(y)).astype(np.float32)
    if P.conv_rows:
        conv[...] = X[1:].astype(np.float32)  # the last conv_rows rows of conv ++ x
    history[...] = np.concatenate([history[1:], [token]]).astype(np.float32)
    return out


def fresh_carry(P):
    """A carry as the first row op creates it: the history EOS-filled, the conv state zero."""
    return (np.full(P.history_len, P.eos_id, np.float32), np.zeros((P.conv_rows, P.channels), np.float32))


def copy_carries(carries):
    return [None if c is None else (c[0].copy(), c[1].copy()) for c in carries]


class Slot:
    def __init__(self, layers, h_cap, conv_cap, h_mode):
        # f16-pool: FP16 h from allocation, and the slot's FP32 staging blob (shared by its layers)
        self.h = [np.zeros(L.h_shape, np.float16 if h_mode == "f16-pool" else np.float32) for L in layers]
        self.stage = np.zeros(max(int(np.prod(L.h_shape)) for L in layers), np.float32) if h_mode == "f16-pool" else None
        self.conv = [np.zeros((L.conv_dim, L.d_conv), np.float32) for L in layers]
        self.ple = [None for _ in layers]  # per layer: its PLE carry (history, conv), None while absent
        self.ple_snaps = [[] for _ in layers]  # per layer: the last verify's carries after t rows, t = 0..K-1
        self.ckpt = None  # (h list, conv list, PLE carry list) once taken
        self.inter = [[] for _ in layers]  # per layer: (h, conv) after verify rows 0..K-2
        self.last_k = 0
        self.h_cap, self.conv_cap = h_cap, conv_cap
        self.claimed = False


class NumpyGdn:
    name = "numpy GDN (python/examples/numpy_gdn.py)"
    own_legality = False
    bitwise = False
    gates = "clamped"  # the contract's gates; a subclass with "torch" computes (and declares) torch's
    f16_store = "saturate"  # the contract's FP16 store; a subclass with "inf" computes (and declares) torch's
    ple = True  # runs the PLE carries of the layers that host one

    # options: fault=F, a deliberate bug (python/tests/test_bridge.py): commit_keeps_live (commit
    # n < k keeps the live state), f16_store_inf (FP16 stores overflow to inf, declared
    # "saturate"), no_to_f16 (f16 mode: decode on FP32 h without converting it), no_stage
    # (f16-pool: prefill leaves the staging blob as it was)
    FAULTS = ("commit_keeps_live", "f16_store_inf", "no_to_f16", "no_stage")

    def __init__(self, options=""):
        self.fault = dict(kv.split("=", 1) for kv in options.split(",") if kv).get("fault", "")
        if self.fault and self.fault not in self.FAULTS:
            raise ValueError("fault=%s: expected one of %s" % (self.fault, ", ".join(self.FAULTS)))
        self.f16_math = "inf" if self.fault == "f16_store_inf" else self.f16_store

    def step(self, L, h, win, row):
        """One token of layer L (row: its inputs x, a, b, z), h and win updated in place."""
        return step(L, h, win, row["x"], row["a"], row["b"], row["z"], self.gates, self.f16_math)

    def create_pool(self, layers, pool):
        self.layers, self.pool = layers, pool
        caps = pool.h_capacity + [max(pool.h_capacity)]  # the dummy slot runs padding rows
        self.slots = [Slot(layers, c, pool.conv_capacity, pool.h_mode) for c in caps]
        self.snaps = [None] * pool.snapshot_slots

    def alloc(self, min_capacity):
        free = [i for i in range(self.pool.max_slots) if not self.slots[i].claimed and self.slots[i].h_cap >= min_capacity]
        slot = min(free, key=lambda i: (self.slots[i].h_cap, i))  # smallest that fits, lowest index
        self.slots[slot] = Slot(self.layers, self.slots[slot].h_cap, self.pool.conv_capacity, self.pool.h_mode)
        self.slots[slot].claimed = True
        return slot

    def release(self, slot):
        self.slots[slot].claimed = False

    def rows(self, slot, inputs, rows, keep, prefill=False):
        s = self.slots[self.pool.max_slots if slot == -1 else slot]
        if not prefill and self.pool.h_mode == "f16" and self.fault != "no_to_f16":
            self.convert(s)  # the first decode step on FP32 h converts it
        outs = []
        for l, L in enumerate(self.layers):
            i = inputs[l]
            # prefill runs in FP32: f16 widens the slot back (exact; FP32 until the next decode
            # converts it), f16-pool widens into the stage and narrows back below
            staged = prefill and self.pool.h_mode == "f16-pool"
            if prefill and s.h[l].dtype == np.float16:
                s.h[l] = s.h[l].astype(np.float32)
            out = np.zeros((rows, L.out_dim), np.float32)
            P = L.ple
            if P is not None and s.ple[l] is None:
                s.ple[l] = fresh_carry(P)  # created on first use
            if keep:
                s.inter[l] = []
                s.ple_snaps[l] = copy_carries([s.ple[l]]) if P is not None else []
            ple_out = np.zeros((rows, P.channels), np.float32) if P is not None else None
            for t in range(rows):
                out[t] = self.step(L, s.h[l], s.conv[l], {k: (v[t] if v is not None else None) for k, v in i.items()})
                if P is not None:
                    ple_out[t] = ple_row(P, s.ple[l], i["ple_x"][t], i["ple_tokens"][t])
                if keep and t < rows - 1:
                    s.inter[l].append((s.h[l].copy(), s.conv[l].copy()))
                    if P is not None:
                        s.ple_snaps[l] += copy_carries([s.ple[l]])
            if staged:  # the stage holds this layer's FP32 result until the next layer widens into it
                if self.fault != "no_stage":
                    s.stage[:s.h[l].size] = s.h[l].reshape(-1)
                s.h[l] = to_half(s.h[l])
            outs.append(out if P is None else (out, ple_out))
        if keep:
            s.last_k = rows
        return outs

    def prefill(self, slot, inputs):
        return self.rows(slot, inputs, len(inputs[0]["x"]), False, prefill=True)

    def decode(self, slots, inputs):
        return [self.rows(s, i, 1, False) for s, i in zip(slots, inputs)]

    def verify(self, slots, k, arm, inputs):
        return [self.rows(s, i, k, True) for s, i in zip(slots, inputs)]

    def checkpoint(self, slot, is_async):
        s = self.slots[slot]
        s.ckpt = ([h.copy() for h in s.h], [c.copy() for c in s.conv], copy_carries(s.ple))

    def restore(self, slot, n):
        s = self.slots[slot]
        if n == 0:
            if s.ckpt is not None:
                s.h, s.conv = [h.copy() for h in s.ckpt[0]], [c.copy() for c in s.ckpt[1]]
                s.ple = copy_carries(s.ckpt[2])  # absent where the carry was absent then
        else:
            s.h = [s.inter[l][n - 1][0].copy() for l in range(len(self.layers))]
            s.conv = [s.inter[l][n - 1][1].copy() for l in range(len(self.layers))]
            # the carry after n kept rows (its history: the pre-verify one plus the first n tokens)
            s.ple = [copy_carries([s.ple_snaps[l][n]])[0] if s.ple_snaps[l] else s.ple[l]
                     for l in range(len(self.layers))]

    def commit(self, slot, n, k):
        if n < k and self.fault != "commit_keeps_live":
            self.restore(slot, n)

    def rollback(self, slot, n, and_checkpoint):
        self.restore(slot, n)
        if and_checkpoint:
            self.checkpoint(slot, True)

    @staticmethod
    def convert(s):
        s.h = [to_half(h) if h.dtype == np.float32 else h for h in s.h]

    def to_f16(self, slot):
        self.convert(self.slots[slot])

    def snapshot_save(self, slot, snap):
        s = self.slots[slot]
        self.snaps[snap] = ([h.copy() for h in s.h], [c.copy() for c in s.conv], copy_carries(s.ple))

    def snapshot_restore(self, slot, snap):
        s = self.slots[slot]
        s.h, s.conv = [h.copy() for h in self.snaps[snap][0]], [c.copy() for c in self.snaps[snap][1]]
        s.ple = copy_carries(self.snaps[snap][2])

    def export_state(self, slot):
        s = self.slots[slot]
        n = max(s.last_k - 1, 0)
        layers = []
        for l in range(len(self.layers)):
            layers.append(ssmcheck.LayerState(
                s.h[l], s.conv[l],
                h_checkpoint=None if s.ckpt is None else s.ckpt[0][l],
                conv_checkpoint=None if s.ckpt is None else s.ckpt[1][l],
                h_intermediates=[p[0] for p in s.inter[l][:n]],
                conv_intermediates=[p[1] for p in s.inter[l][:n]],
                ple=s.ple[l], ple_checkpoint=None if s.ckpt is None else s.ckpt[2][l],
                ple_snapshots=s.ple_snaps[l] if s.last_k > 0 else []))
        return ssmcheck.State(s.last_k, layers, prefill_stage=s.stage)


def main(cls, backend):
    """`SCRIPT SSMCHECK SUBCOMMAND [ARGS...]`: runs ssmcheck with cls as --backend python:backend."""
    if len(sys.argv) < 3:
        sys.exit("usage: %s SSMCHECK SUBCOMMAND [ARGS...]   (--backend python:%s is added)"
                 % (os.path.basename(sys.argv[0]), backend))
    args = sys.argv[2:]
    if "--backend" not in args:
        args += ["--backend", "python:" + backend]
    sys.exit(ssmcheck.run(args, cls, ssmcheck=sys.argv[1]))


if __name__ == "__main__":
    main(NumpyGdn, "numpy-gdn")

#!/usr/bin/env python3
"""Writes a valid ssmcheck state trace with nothing but h5py and numpy, the way an engine
written in Python would record one (schema: docs/trace-format.md).

The "engine" here is a small numpy implementation of one Gated DeltaNet layer step (FP64
compute, FP32 storage, h mode f32), driven through alloc; prefill 3; checkpoint; decode;
verify 3; commit 2 3; rollback 0. The trace stores the model and weights, every op with its
inputs, the outputs, and the full state of the sequence after every op.

    /usr/bin/python3 scripts/write_trace_example.py /tmp/example.h5
    build/ssmcheck replay /tmp/example.h5        # exit 0: the reference agrees
"""
import sys

import h5py
import numpy as np

# Layout attributes of state datasets (the dump layout, docs/trace-format.md).
LAYOUT_H = "[nv][kd][vd], vd fastest"
LAYOUT_CONV = "[conv_dim][d_conv], column 0 oldest"
LAYOUT_H_INTER = "[t][nv][kd][vd], vd fastest"
LAYOUT_CONV_INTER = "[t][conv_dim][d_conv], column 0 oldest"

NK, NV, KD, VD, DCONV = 1, 2, 8, 12, 4
CONV_DIM = 2 * NK * KD + NV * VD
EPS = 1e-6
LAYERS = 2


def make_weights(rng):
    return [dict(conv_w=rng.uniform(-0.5, 0.5, (CONV_DIM, DCONV)).astype(np.float32),
                 A_log=rng.uniform(-4.5, -3.5, NV).astype(np.float32),
                 dt_bias=rng.uniform(-1.0, 0.0, NV).astype(np.float32),
                 norm_w=rng.uniform(0.5, 1.5, VD).astype(np.float32)) for _ in range(LAYERS)]


def make_inputs(rng, rows):
    return [dict(x=rng.uniform(-1, 1, (rows, CONV_DIM)).astype(np.float32),
                 a=rng.uniform(-3, 3, (rows, NV)).astype(np.float32),
                 b=rng.uniform(-3, 3, (rows, NV)).astype(np.float32),
                 z=rng.uniform(-2, 2, (rows, NV * VD)).astype(np.float32)) for _ in range(LAYERS)]


def step(w, h, conv, x, a, b, z):
    """One token of one layer. h [nv][kd][vd] f32 and conv [conv_dim][d_conv] f32, updated in place."""
    conv[:, :-1] = conv[:, 1:]
    conv[:, -1] = x
    acc = (w["conv_w"].astype(np.float64) * conv.astype(np.float64)).sum(axis=1)
    y = acc / (1.0 + np.exp(-acc))  # silu
    for head in range(2 * NK):  # L2-normalise each Q and K head
        seg = y[head * KD:(head + 1) * KD]
        seg *= 1.0 / np.sqrt((seg * seg).sum() + 1e-6)
    out = np.zeros(NV * VD, np.float32)
    for vh in range(NV):
        kh = vh // (NV // NK)
        q = y[kh * KD:(kh + 1) * KD]
        k = y[(NK + kh) * KD:(NK + kh + 1) * KD]
        v = y[2 * NK * KD + vh * VD:2 * NK * KD + (vh + 1) * VD]
        beta = 1.0 / (1.0 + np.exp(-float(b[vh])))
        dt = np.log1p(np.exp(min(float(a[vh]) + float(w["dt_bias"][vh]), 20.0)))
        A = np.exp(min(float(w["A_log"][vh]), 20.0))
        g = min(max(np.exp(-A * dt), 1e-6), 1.0 - 1e-6)
        H = h[vh].astype(np.float64)
        vn = (v - g * (H.T @ k)) * beta
        H = g * H + np.outer(k, vn)
        h[vh] = H.astype(np.float32)  # FP32 store; the output reads the stored state
        o = h[vh].astype(np.float64).T @ q / np.sqrt(KD)
        zz = z[vh * VD:(vh + 1) * VD].astype(np.float64)
        r = 1.0 / np.sqrt((o * o).mean() + EPS)
        out[vh * VD:(vh + 1) * VD] = (o * r * w["norm_w"] * zz / (1.0 + np.exp(-zz))).astype(np.float32)
    return out


class Engine:
    """One sequence's state: live h/conv, checkpoint, verify intermediates."""

    def __init__(self, weights):
        self.w = weights
        self.h = [np.zeros((NV, KD, VD), np.float32) for _ in range(LAYERS)]
        self.conv = [np.zeros((CONV_DIM, DCONV), np.float32) for _ in range(LAYERS)]
        self.ckpt = None
        self.inter = [[] for _ in range(LAYERS)]  # (h, conv) after verify rows 0..K-2
        self.last_k = 0

    def run(self, inputs, rows, keep_intermediates=False):
        outs = [np.zeros((rows, NV * VD), np.float32) for _ in range(LAYERS)]
        for l in range(LAYERS):
            if keep_intermediates:
                self.inter[l] = []
            for t in range(rows):
                i = inputs[l]
                outs[l][t] = step(self.w[l], self.h[l], self.conv[l], i["x"][t], i["a"][t], i["b"][t], i["z"][t])
                if keep_intermediates and t < rows - 1:
                    self.inter[l].append((self.h[l].copy(), self.conv[l].copy()))
        return outs

    def checkpoint(self):
        self.ckpt = [(h.copy(), c.copy()) for h, c in zip(self.h, self.conv)]

    def restore(self, pairs):
        self.h = [p[0].copy() for p in pairs]
        self.conv = [p[1].copy() for p in pairs]


def put(group, name, data, layout):
    d = group.create_dataset(name, data=data)
    d.attrs["dtype"] = "f32" if data.dtype == np.float32 else "f16"
    d.attrs["layout"] = layout


def write_state(op_group, seq, slot, eng):
    s = op_group.require_group("state").create_group("seq%d" % seq)
    s.attrs["seq"] = np.int64(seq)
    s.attrs["slot"] = np.int64(slot)
    s.attrs["last_verify_k"] = np.int64(eng.last_k)
    n = max(eng.last_k - 1, 0)
    for l in range(LAYERS):
        g = s.create_group("layer%d" % l)
        g.attrs["h_is_f16"] = np.int64(0)
        g.attrs["intermediates"] = np.int64(n)
        put(g, "h", eng.h[l], LAYOUT_H)
        put(g, "conv", eng.conv[l], LAYOUT_CONV)
        if eng.ckpt is not None:
            put(g, "h_checkpoint", eng.ckpt[l][0], LAYOUT_H)
            put(g, "conv_checkpoint", eng.ckpt[l][1], LAYOUT_CONV)
        if n:
            put(g, "h_intermediates", np.stack([p[0] for p in eng.inter[l][:n]]), LAYOUT_H_INTER)
            put(g, "conv_intermediates", np.stack([p[1] for p in eng.inter[l][:n]]), LAYOUT_CONV_INTER)


def main(path):
    rng = np.random.default_rng(7)
    weights = make_weights(rng)
    eng = Engine(weights)
    with h5py.File(path, "w") as f:
        f.attrs["format"] = "ssmcheck-trace"
        f.attrs["version"] = np.int64(1)
        f.attrs["producer"] = "write_trace_example.py (numpy GDN)"
        f.attrs["backend"] = "numpy"
        f.attrs["h_mode"] = "f32"
        pool = f.create_group("pool")
        pool.attrs["max_slots"] = np.int64(2)
        pool.attrs["h_capacity"] = np.array([4, 4], np.int64)
        pool.attrs["conv_capacity"] = np.int64(4)
        pool.attrs["snapshot_slots"] = np.int64(0)
        model = f.create_group("model")
        model.attrs["name"] = "python-example"
        model.attrs["layers"] = np.int64(LAYERS)
        for l, w in enumerate(weights):
            g = model.create_group("layer%d" % l)
            for k, v in dict(nk=NK, nv=NV, kd=KD, vd=VD, d_conv=DCONV, conv_bias=0).items():
                g.attrs[k] = np.int64(v)
            g.attrs["kind"] = "gdn"
            g.attrs["output_gate"] = "silu"
            g.attrs["eps"] = np.float32(EPS)
            for k, v in w.items():
                g.create_dataset(k, data=v)

        ops = ["alloc", "prefill 3", "checkpoint", "decode", "verify 3", "commit 2 3", "rollback 0"]
        f.attrs["ops"] = np.int64(len(ops))
        slot = 0
        for i, text in enumerate(ops):
            og = f.create_group("ops/%06d" % i)
            og.attrs["op"] = text
            name, *args = text.split()
            if name in ("prefill", "decode", "verify"):
                rows = int(args[0]) if args else 1
                inputs = make_inputs(rng, rows)
                for l in range(LAYERS):
                    g = og.create_group("inputs/entry0/layer%d" % l)
                    for k, v in inputs[l].items():
                        g.create_dataset(k, data=v)
                outs = eng.run(inputs, rows, keep_intermediates=(name == "verify"))
                if name == "verify":
                    eng.last_k = rows
                for l in range(LAYERS):
                    og.create_dataset("outputs/entry0/layer%d" % l, data=outs[l])
            elif name == "checkpoint":
                eng.checkpoint()
            elif name == "commit":
                n, k = int(args[0]), int(args[1])
                if n < k:
                    eng.restore([eng.inter[l][n - 1] for l in range(LAYERS)])
            elif name == "rollback":
                n = int(args[0])
                eng.restore(eng.ckpt if n == 0 else [eng.inter[l][n - 1] for l in range(LAYERS)])
            write_state(og, 0, slot, eng)
    print("wrote %s: %d ops" % (path, len(ops)))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: write_trace_example.py OUT.h5")
    main(sys.argv[1])

#!/usr/bin/env python3
"""Derives deliberately faulty traces from golden ones (h5py + numpy). Each fault sits in one
recorded tensor (or one recorded refusal) at a known op; the root attributes expect_op,
expect_seq, expect_layer and expect_tensor say where `ssmcheck replay` must report the first
divergence, and `ssmcheck gate` fails when it does not.

    /usr/bin/python3 scripts/make_faulty_traces.py fixtures/traces fixtures/traces/faulty
"""
import os
import shutil
import sys

import h5py
import numpy as np


def ops_of(f):
    return [(int(k), f["ops"][k]) for k in sorted(f["ops"].keys())]


def find_op(f, pred):
    for i, g in ops_of(f):
        if pred(g.attrs["op"] if isinstance(g.attrs["op"], str) else g.attrs["op"].decode(), g):
            return i, g
    raise SystemExit("no op matches in %s" % f.filename)


def derive(src_dir, dst_dir, src, dst, description, fault):
    out = os.path.join(dst_dir, dst)
    shutil.copyfile(os.path.join(src_dir, src), out)
    with h5py.File(out, "r+") as f:
        op, seq, layer, tensor = fault(f)
        f.attrs["expect_op"] = np.int64(op)
        f.attrs["expect_seq"] = np.int64(seq)
        f.attrs["expect_layer"] = np.int64(layer)
        f.attrs["expect_tensor"] = tensor
        f.attrs["description"] = description
        f.attrs["producer"] = "scripts/make_faulty_traces.py from " + src
    print("%-34s op %d, seq %d, layer %d, %s" % (dst, op, seq, layer, tensor or "(refusal)"))


def flip_live_h(op_prefix, layer, index):
    """One element of live h of seq 0 after the first op starting with op_prefix that recorded a
    state, off by half itself plus 0.25: a restore that picked the wrong intermediate."""
    def fault(f):
        i, g = find_op(f, lambda t, g: t.startswith(op_prefix) and "state" in g)
        d = g["state/seq0/layer%d/h" % layer]
        a = d[...]
        a[index] = np.float32(a[index] * 1.5 + 0.25)
        d[...] = a
        return i, 0, layer, "h"
    return fault


def zero_h_intermediate(op_prefix, layer, t):
    """h intermediate t of seq 0 after the first op starting with op_prefix that recorded a state
    set to zero: a verify that never wrote it (bug class 1)."""
    def fault(f):
        i, g = find_op(f, lambda text, g: text.startswith(op_prefix) and "state" in g)
        d = g["state/seq0/layer%d/h_intermediates" % layer]
        a = d[...]
        a[t] = 0
        d[...] = a
        return i, 0, layer, "h_intermediate[%d]" % t
    return fault


def nan_output(f):
    # a NaN in the prefill's output of layer 0
    i, g = find_op(f, lambda t, g: t.startswith("prefill") and "outputs" in g)
    d = g["outputs/entry0/layer0"]
    a = d[...]
    a[2, 3] = np.nan
    d[...] = a
    return i, 0, 0, "output"


def zero_conv_checkpoint(f):
    # checkpoint copied h but not conv (bug class 8)
    i, g = find_op(f, lambda t, g: t == "checkpoint" and "state" in g)
    d = g["state/seq0/layer1/conv_checkpoint"]
    d[...] = np.zeros(d.shape, d.dtype)
    return i, 0, 1, "conv_checkpoint"


def f16_flip(f):
    # one FP16 h element off by four times the tensor's rms after a decode on FP16 state, seq 0 layer 1
    i, g = find_op(f, lambda t, g: t.startswith("decode") and "state" in g and g["state/seq0/layer0/h"].dtype == np.float16)
    layer = 1
    d = g["state/seq0/layer%d/h" % layer]
    a = d[...]
    rms = float(np.sqrt(np.mean(a.astype(np.float64) ** 2)))
    a[0, 4, 1] = np.float16(float(a[0, 4, 1]) + 4 * rms)
    d[...] = a
    return i, 0, layer, "h"


def missing_refusal(f):
    # the engine accepted commit 0 3 (bug class 13): the trace records no refusal there
    i, g = find_op(f, lambda t, g: t.startswith("commit 0 ") and "refused" in g.attrs)
    del g.attrs["refused"]
    return i, 0, -1, ""


def batched_neighbour(f):
    # batched verify wrote seq 1's intermediate into seq 0's slot (bug class 4)
    i, g = find_op(f, lambda t, g: t.startswith("verify 4 @0,1") and "state" in g)
    src = g["state/seq1/layer1/h_intermediates"][...]
    d = g["state/seq0/layer1/h_intermediates"]
    a = d[...]
    a[0] = src[0]
    d[...] = a
    return i, 0, 1, "h_intermediate[0]"


def ple_after(f, op_text, layer):
    """The op whose text is op_text (it recorded a state) and seq 0's PLE carry of `layer` there and
    after the op before it."""
    ops = ops_of(f)
    for n, (i, g) in enumerate(ops):
        text = g.attrs["op"] if isinstance(g.attrs["op"], str) else g.attrs["op"].decode()
        if text == op_text and "state" in g:
            prev = ops[n - 1][1]
            return i, g["state/seq0/layer%d" % layer], prev["state/seq0/layer%d" % layer]
    raise SystemExit("no op %r in %s" % (op_text, f.filename))


def ple_not_rolled_back(op_text, layer):
    """After a partial accept, the PLE carry as the verify left it (bug class 15)."""
    def fault(f):
        i, now, before = ple_after(f, op_text, layer)
        tensor = "ple_history"
        if np.array_equal(now["ple_history"][...], before["ple_history"][...]):
            tensor = "ple_conv"  # the tokens happened to repeat: the conv state still differs
        for name in ("ple_history", "ple_conv"):
            now[name][...] = before[name][...]
        return i, 0, layer, tensor
    return fault


def ple_history_truncated(op_text, layer, k, n):
    """After a partial accept of n rows of a K = k verify, the post-verify history with its last
    k - n ids dropped and EOS in front, instead of the rebuild (bug class 15)."""
    def fault(f):
        i, now, before = ple_after(f, op_text, layer)
        post = before["ple_history"][...]
        eos = float(f["model/layer%d" % layer].attrs["ple_eos_id"])
        drop = min(len(post), k - n)
        bad = np.concatenate([np.full(drop, eos, np.float32), post[:len(post) - drop]]).astype(np.float32)
        if np.array_equal(bad, now["ple_history"][...]):
            raise SystemExit("%s: the truncated history equals the rebuilt one; pick another op" % f.filename)
        now["ple_history"][...] = bad
        return i, 0, layer, "ple_history"
    return fault


def main(src_dir, dst_dir):
    os.makedirs(dst_dir, exist_ok=True)
    derive(src_dir, dst_dir, "tiny_f32_every_op.h5", "flip_h_after_commit.h5",
           "live h of layer 1 perturbed after commit 2 4", flip_live_h("commit 2 4", 1, (1, 3, 5)))
    derive(src_dir, dst_dir, "tiny_f32_every_op.h5", "zero_h_intermediate.h5",
           "h intermediate 1 of layer 0 never written by verify 4", zero_h_intermediate("verify 4", 0, 1))
    derive(src_dir, dst_dir, "tiny_f32_every_op.h5", "nan_output.h5",
           "NaN in a prefill output", nan_output)
    derive(src_dir, dst_dir, "tiny_f32_every_op.h5", "zero_conv_checkpoint.h5",
           "checkpoint without the conv copy", zero_conv_checkpoint)
    derive(src_dir, dst_dir, "tiny_f16pool_batched.h5", "f16_h_perturbed.h5",
           "an FP16 h element off by 4 rms after a batched decode", f16_flip)
    derive(src_dir, dst_dir, "tiny_f32_refusals.h5", "missing_refusal.h5",
           "commit 0 3 recorded as accepted", missing_refusal)
    derive(src_dir, dst_dir, "tiny_f16pool_batched.h5", "batched_wrong_stride.h5",
           "batched verify: seq 1's intermediate 0 in seq 0", batched_neighbour)
    derive(src_dir, dst_dir, "mamba_tiny_f16_every_op.h5", "mamba2_flip_h_after_commit.h5",
           "live FP16 h of the Mamba-2 layer 1 ([nh][hp][ns]) perturbed after commit 3 4",
           flip_live_h("commit 3 4", 1, (1, 2, 5)))
    derive(src_dir, dst_dir, "mamba_odd_b_f16pool_every_op.h5", "mamba2_zero_h_intermediate.h5",
           "Mamba-2 h intermediate 0 of layer 1 never written by verify 3 (f16-pool)",
           zero_h_intermediate("verify 3", 1, 0))
    derive(src_dir, dst_dir, "ple_tiny_f32_every_op.h5", "ple_not_rolled_back.h5",
           "commit 2 4 left the PLE carry of layer 0 as verify 4 left it", ple_not_rolled_back("commit 2 4", 0))
    derive(src_dir, dst_dir, "ple_tiny_f32_every_op.h5", "ple_history_truncated.h5",
           "commit 2 4 truncated the post-verify PLE history of layer 0 instead of rebuilding it",
           ple_history_truncated("commit 2 4", 0, 4, 2))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: make_faulty_traces.py GOLDEN_DIR FAULTY_DIR")
    main(sys.argv[1], sys.argv[2])

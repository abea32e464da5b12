"""The Python trace writer (ssmcheck.TraceWriter) with Mamba-2 layers and with models mixing GDN
and Mamba-2 layers (ctest python_capture, cpu label), with Debian's python3-numpy and python3-h5py:

- traces that `ssmcheck record` writes from the reference are read back with h5py and written
  again through TraceWriter (add_layer / add_mamba2_layer, inputs by name, outputs, states,
  refusals). The copies replay on the reference bit for bit (`--bitwise`), and every attribute
  and dataset of /model, /pool and /ops is identical to the original. The traces: hybrid-odd
  (GDN and Mamba-2 alternating) in f32 through every transition, batched ops with padding rows and
  a refusal; mamba-odd-a in f16 (dt limits, to_f16, FP16 h); mamba-odd-b in f16-pool (norm before
  the gate, a layer without conv bias, the staging blob); hybrid-odd in f16 with states of some
  layers only (a GDN and a Mamba-2 layer), written with None for the others;
- misuse is refused naming op, entry, layer and field: Mamba-2 inputs of the wrong shape, GDN's
  input names on a Mamba-2 layer (and the reverse), b on a Mamba-2 layer, a NaN dt, a transposed
  Mamba-2 h, outputs of the wrong width, weights of the wrong shape or non-finite, nh not a
  multiple of ng, bad dt limits or eps (the library's refusal); an abandoned mixed capture keeps
  its finished ops.

    SSMCHECK=build/ssmcheck /usr/bin/python3 python/tests/test_capture.py
Exit 77 (skipped) without h5py.
"""
import math
import os
import subprocess
import sys
import tempfile

import numpy as np

try:
    import h5py
except ImportError:
    print("skip: python3-h5py is not installed")
    sys.exit(77)

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, ".."))
import ssmcheck  # noqa: E402

SSMCHECK = os.environ["SSMCHECK"]
failures = []

# Provenance the writer sets itself (or the C ABI has no call for): not compared.
PROVENANCE = {"producer", "backend", "build", "case", "description", "seed", "tool_version"}
MODEL_PROVENANCE = {"source"}

RECORDINGS = [
    ("hybrid_f32", ["--preset", "hybrid-odd", "--outputs", "--ops",
                    "alloc; prefill 5; checkpoint; decode; alloc @1; prefill 3 @1; verify 3 @0,1,pad; commit 2 3; "
                    "commit 3 3 @1; decode @1,pad,0; rollback 0; verify 4 wy @0; rollback 2; snapshot_save 0; "
                    "release @1; commit 0 4"]),
    ("mamba_odd_a_f16", ["--preset", "mamba-odd-a", "--h-mode", "f16", "--outputs", "--ops",
                         "alloc; prefill 4; decode; checkpoint_async; verify 3; commit 1 3; to_f16; decode; "
                         "rollback_and_checkpoint_async 1; decode @0,pad"]),
    ("mamba_odd_b_f16pool", ["--preset", "mamba-odd-b", "--h-mode", "f16-pool", "--outputs", "--ops",
                             "alloc; prefill 3; decode; verify 2; commit 2 2; snapshot_save 1; decode; "
                             "snapshot_restore 1; prefill 2"]),
    ("hybrid_f16_some_layers", ["--preset", "hybrid-odd", "--h-mode", "f16", "--state-layers", "1,2",
                                "--states", "0,2,3", "--ops", "alloc; prefill 2; decode; verify 2 @0,pad; commit 9 2"]),
]


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


def text(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def expect_error(kind, needle, f, what):
    try:
        f()
    except kind as e:
        check(needle in str(e), "%s: %s" % (what, e))
        return
    except Exception as e:  # noqa: BLE001 -- the wrong kind is a failure, named
        check(False, "%s: raised %s: %s, expected %s saying %r" % (what, type(e).__name__, e, kind.__name__, needle))
        return
    check(False, "%s: nothing raised, expected %s saying %r" % (what, kind.__name__, needle))


def add_layers(w, model):
    """Every layer of /model through add_layer (GDN) or add_mamba2_layer."""
    for l in range(int(model.attrs["layers"])):
        g = model["layer%d" % l]
        A = g.attrs
        bias = g["conv_bias"][()] if "conv_bias" in g else None
        if text(A["kind"]) == "gdn":
            w.add_layer(int(A["nk"]), int(A["nv"]), int(A["kd"]), int(A["vd"]), int(A["d_conv"]), g["conv_w"][()],
                        g["A_log"][()], g["dt_bias"][()], g["norm_w"][()], conv_bias=bias, eps=float(A["eps"]),
                        output_gate=text(A.get("output_gate", "silu")))
        else:
            w.add_mamba2_layer(A["nh"], A["hp"], A["ns"], A["ng"], A["d_conv"], conv_w=g["conv_w"][()],
                               A_log=g["A_log"][()], dt_bias=g["dt_bias"][()], D=g["D"][()], norm_w=g["norm_w"][()],
                               conv_bias=bias, eps=float(A["eps"]), norm_before_gate=bool(A.get("norm_before_gate", 0)),
                               dt_min=float(A.get("dt_min", 0.0)), dt_max=float(A.get("dt_max", math.inf)))


def by_index(group, prefix):
    return sorted(((int(k[len(prefix):]), v) for k, v in group.items()), key=lambda kv: kv[0])


def rewrite(src, dst):
    """src (a trace) written again through TraceWriter as dst."""
    with h5py.File(src, "r") as f:
        model, pool = f["model"], f["pool"].attrs
        with ssmcheck.TraceWriter(dst, producer="test_capture.py", backend="rewritten", h_mode=text(f.attrs["h_mode"]),
                                  model_name=text(model.attrs["name"])) as w:
            w.set_pool(max_slots=int(pool["max_slots"]), conv_capacity=int(pool["conv_capacity"]),
                       snapshot_slots=int(pool["snapshot_slots"]), h_capacity=[int(c) for c in pool["h_capacity"]])
            add_layers(w, model)
            L = int(model.attrs["layers"])
            for i in range(int(f.attrs["ops"])):
                og = f["ops/%06d" % i]
                with w.op(text(og.attrs["op"])) as op:
                    if "refused" in og.attrs:
                        op.refused(text(og.attrs["refused"]))
                    for e, eg in by_index(og.get("inputs", {}), "entry"):
                        for l, lg in by_index(eg, "layer"):
                            op.inputs(entry=e, layer=l, **{k: v[()] for k, v in lg.items()})
                    for e, eg in by_index(og.get("outputs", {}), "entry"):
                        for l, ds in by_index(eg, "layer"):
                            op.outputs(entry=e, layer=l, out=ds[()])
                    for _, sg in by_index(og.get("state", {}), "seq"):
                        layers = [None] * L
                        for l, lg in by_index({k: v for k, v in sg.items() if k.startswith("layer")}, "layer"):
                            layers[l] = {k: (list(v[()]) if k.endswith("intermediates") else v[()]) for k, v in lg.items()}
                        op.state(seq=int(sg.attrs["seq"]), slot=int(sg.attrs["slot"]),
                                 last_verify_k=int(sg.attrs["last_verify_k"]), layers=layers,
                                 prefill_stage=sg["h_prefill_stage"][()] if "h_prefill_stage" in sg else None)


def attrs_of(obj, skip):
    return {k: (text(v) if isinstance(v, (bytes, str)) else np.asarray(v).tolist()) for k, v in obj.attrs.items()
            if k not in skip}


def differences(a_path, b_path):
    """What differs between two traces, apart from provenance: attributes, members, datasets (dtype,
    shape and bytes)."""
    out = []
    with h5py.File(a_path, "r") as a, h5py.File(b_path, "r") as b:
        def compare(name, x, y, skip=()):
            if attrs_of(x, skip) != attrs_of(y, skip):
                out.append("%s: attributes %s != %s" % (name, attrs_of(x, skip), attrs_of(y, skip)))
            if isinstance(x, h5py.Dataset) or isinstance(y, h5py.Dataset):
                if not (isinstance(x, h5py.Dataset) and isinstance(y, h5py.Dataset)):
                    out.append("%s: a dataset on one side only" % name)
                elif x.dtype != y.dtype or x.shape != y.shape or x[()].tobytes() != y[()].tobytes():
                    out.append("%s: %s %s != %s %s (or the values)" % (name, x.dtype, x.shape, y.dtype, y.shape))
                return
            if set(x.keys()) != set(y.keys()):
                out.append("%s: members %s != %s" % (name, sorted(x.keys()), sorted(y.keys())))
            for k in sorted(set(x.keys()) & set(y.keys())):
                compare(name.rstrip("/") + "/" + k, x[k], y[k], MODEL_PROVENANCE if k == "model" else ())
        compare("/", a, b, PROVENANCE)
    return out


def replay(path, *flags):
    return subprocess.run([SSMCHECK, "replay", path] + list(flags), capture_output=True, text=True)


def tiny_mixed(w):
    """GDN layer 0 (nk 1, nv 2, kd 8, vd 12: conv_dim 40) and Mamba-2 layer 1 (nh 4, hp 6, ns 10,
    ng 2: conv_dim 64, d_inner 24)."""
    rng = np.random.default_rng(5)
    w.set_pool(max_slots=2, conv_capacity=4)
    w.add_layer(1, 2, 8, 12, 4, rng.uniform(-0.5, 0.5, (40, 4)), np.full(2, -4.0), np.full(2, -0.5), np.ones(12))
    w.add_mamba2_layer(4, 6, 10, 2, 4, conv_w=rng.uniform(-0.5, 0.5, (64, 4)), conv_bias=np.zeros(64),
                       A_log=np.zeros(4), dt_bias=np.zeros(4), D=np.ones(4), norm_w=np.ones(24))


def gdn_in(rows):
    return dict(x=np.zeros((rows, 40)), a=np.zeros((rows, 2)), b=np.zeros((rows, 2)), z=np.zeros((rows, 24)))


def mamba_in(rows):
    return dict(xBC=np.zeros((rows, 64)), dt=np.zeros((rows, 4)), z=np.zeros((rows, 24)))


def misuse(tmp):
    n = [0]

    def writer():
        n[0] += 1
        w = ssmcheck.TraceWriter(os.path.join(tmp, "misuse%d.h5" % n[0]), producer="test", backend="test", h_mode="f32")
        tiny_mixed(w)
        return w

    def in_op(op_text, body):
        def run():
            w = writer()
            try:
                with w.op("alloc"):
                    pass
                with w.op(op_text) as op:
                    body(op)
            finally:
                w.abandon()
        return run

    expect_error(ValueError, "op 1 'prefill 2' entry 0 layer 1: xBC [rows][conv_dim] has shape (2, 65), expected (2, 64)",
                 in_op("prefill 2", lambda op: (op.inputs(0, 0, **gdn_in(2)),
                                                op.inputs(0, 1, xBC=np.zeros((2, 65)), dt=np.zeros((2, 4)), z=np.zeros((2, 24))))),
                 "a wrongly shaped xBC is a ValueError naming op, entry, layer and field")
    expect_error(ValueError, "op 1 'decode' entry 0 layer 1: dt [rows][nh] has shape (1, 3), expected (1, 4)",
                 in_op("decode", lambda op: op.inputs(0, 1, xBC=np.zeros((1, 64)), dt=np.zeros((1, 3)), z=np.zeros((1, 24)))),
                 "a wrongly shaped dt names it")
    expect_error(ValueError, "op 1 'decode' entry 0 layer 1: a mamba2 layer takes the inputs xBC, dt, z (b given)",
                 in_op("decode", lambda op: op.inputs(0, 1, b=np.zeros((1, 4)), **mamba_in(1))),
                 "b on a Mamba-2 layer is refused naming the layer")
    expect_error(ValueError, "layer 1: a mamba2 layer takes the inputs xBC, dt, z (x, a, b given; xBC, dt missing)",
                 in_op("decode", lambda op: op.inputs(0, 1, np.zeros((1, 64)), np.zeros((1, 4)), np.zeros((1, 4)), np.zeros((1, 24)))),
                 "GDN's positional inputs on a Mamba-2 layer are refused")
    expect_error(ValueError, "layer 0: a gdn layer takes the inputs x, a, b, z (xBC given; x missing)",
                 in_op("decode", lambda op: op.inputs(0, 0, xBC=np.zeros((1, 40)), a=np.zeros((1, 2)), b=np.zeros((1, 2)), z=np.zeros((1, 24)))),
                 "xBC on a GDN layer is refused")
    expect_error(ValueError, "layer 2: the trace has 2 layers",
                 in_op("decode", lambda op: op.inputs(0, 2, **mamba_in(1))), "a layer beyond the model is refused")

    def nan_dt(op):
        op.inputs(0, 0, **gdn_in(1))
        i = mamba_in(1)
        i["dt"][0, 3] = np.nan
        op.inputs(0, 1, **i)
    expect_error(ssmcheck.CaptureError, "entry0/layer1/dt: non-finite value nan at (0, 3)", in_op("decode", nan_dt),
                 "a NaN dt is refused when the op ends, naming entry, layer, field and element")
    expect_error(ValueError, "op 1 'decode' entry 0 layer 1: out [rows][nh*hp] has shape (1, 40), expected (1, 24)",
                 in_op("decode", lambda op: op.outputs(0, 1, np.zeros((1, 40)))), "Mamba-2 outputs of GDN's width are refused")
    expect_error(ValueError, "seq 0 layer 1 h has shape (4, 10, 6), expected (4, 6, 10)",
                 in_op("checkpoint", lambda op: op.state(0, 0, [None, dict(h=np.zeros((4, 10, 6), np.float32), conv=np.zeros((64, 4)))])),
                 "a Mamba-2 h stored [nh][ns][hp] (transposed) is refused")
    expect_error(ValueError, "seq 0: state of 1 layers, the trace has 2",
                 in_op("checkpoint", lambda op: op.state(0, 0, [dict(h=np.zeros((2, 8, 12)), conv=np.zeros((40, 4)))])),
                 "a state must list every layer (None for those not recorded)")
    expect_error(ssmcheck.CaptureError, "no layer recorded",
                 in_op("checkpoint", lambda op: op.state(0, 0, [None, None])), "a state of no layer is refused")

    def add(**kw):
        def run():
            w = ssmcheck.TraceWriter(os.path.join(tmp, "add.h5"), producer="test", backend="test", h_mode="f32")
            try:
                w.set_pool(max_slots=1, conv_capacity=1)
                args = dict(nh=4, hp=6, ns=10, ng=2, d_conv=4, conv_w=np.zeros((64, 4)), A_log=np.zeros(4),
                            dt_bias=np.zeros(4), D=np.ones(4), norm_w=np.ones(24))
                args.update(kw)
                w.add_mamba2_layer(**args)
            finally:
                w.abandon()
        return run

    expect_error(ValueError, "layer 0: nh 4 is not a multiple of ng 3", add(ng=3), "nh not a multiple of ng is refused")
    expect_error(ValueError, "layer 0 D [nh] has shape (3,), expected (4,)", add(D=np.ones(3)), "a D of the wrong size is refused")
    expect_error(ValueError, "layer 0 norm_w [nh*hp] has shape (6,), expected (24,)", add(norm_w=np.ones(6)),
                 "a per-head-dim norm_w (GDN's shape) is refused")
    expect_error(ValueError, "layer 0 conv_w [conv_dim][d_conv] has shape (4, 64), expected (64, 4)",
                 add(conv_w=np.zeros((4, 64))), "a transposed conv_w is refused")
    a_log = np.zeros(4)
    a_log[1] = np.inf
    expect_error(ValueError, "layer 0 A_log [nh]: non-finite value inf at (1,)", add(A_log=a_log), "a non-finite weight is refused")
    expect_error(ValueError, "layer 0 hp is 0: expected an integer >= 1", add(hp=0), "a zero head dim is refused")
    expect_error(ssmcheck.CaptureError, "dt limits must satisfy 0 <= dt_min < dt_max", add(dt_min=0.5, dt_max=0.1),
                 "dt_min above dt_max is the library's refusal")
    expect_error(ssmcheck.CaptureError, "eps must be finite and > 0", add(eps=0.0), "eps 0 is the library's refusal")
    expect_error(ssmcheck.CaptureError, "hp and ns must be <= 256",
                 add(ns=300, conv_w=np.zeros((24 + 1200, 4))), "the reader's bounds are the writer's")

    # an abandoned mixed capture keeps its finished ops
    bad = os.path.join(tmp, "abandoned.h5")
    try:
        with ssmcheck.TraceWriter(bad, producer="test", backend="test", h_mode="f32") as w:
            tiny_mixed(w)
            with w.op("alloc") as op:
                op.state(0, 0, [dict(h=np.zeros((2, 8, 12), np.float32), conv=np.zeros((40, 4))),
                                dict(h=np.zeros((4, 6, 10), np.float32), conv=np.zeros((64, 4)))])
            with w.op("prefill 2") as op:
                op.inputs(0, 0, **gdn_in(2))
                op.inputs(0, 1, **mamba_in(2))
            with w.op("decode") as op:
                raise KeyboardInterrupt  # the engine dies mid-op
    except KeyboardInterrupt:
        pass
    r = replay(bad)
    check(r.returncode == 0 and "2 ops recovered" in r.stdout + r.stderr,
          "an abandoned mixed capture keeps its 2 finished ops and replay recovers them (rc %d)" % r.returncode)


def dropped_op(tmp):
    """An exception inside `with w.op(...)` drops that op (ABI minor 2: ssmc_drop_op): the engine
    goes on, the next ops are written, close() succeeds, and the trace replays with the ops around
    the dropped one."""
    path = os.path.join(tmp, "dropped.h5")
    w = ssmcheck.TraceWriter(path, producer="test", backend="test", h_mode="f32")
    tiny_mixed(w)
    with w.op("alloc"):
        pass
    try:
        with w.op("decode") as op:
            op.inputs(0, 0, **gdn_in(1))
            raise RuntimeError("the engine's step failed")
    except RuntimeError:
        pass
    with w.op("alloc @1"):
        pass
    check(w.lib.ssmc_op_count(w.t) == 2, "the dropped op is not written, the ops around it are (%d ops)" % w.lib.ssmc_op_count(w.t))
    try:
        w.close()
        check(True, "close() succeeds after an op dropped by an exception")
    except ssmcheck.CaptureError as e:
        check(False, "close() after an op dropped by an exception raised: %s" % e)
    r = replay(path)
    check(r.returncode == 0, "the trace with the dropped op replays (rc %d): %s" % (r.returncode, r.stdout.strip().splitlines()[-1:]))


def main():
    with tempfile.TemporaryDirectory() as tmp:
        for name, args in RECORDINGS:
            src, dst = os.path.join(tmp, name + ".h5"), os.path.join(tmp, name + "_rewritten.h5")
            rec = subprocess.run([SSMCHECK, "record", "-o", src] + args, capture_output=True, text=True)
            if rec.returncode != 0:
                check(False, "%s: ssmcheck record failed (rc %d): %s" % (name, rec.returncode, rec.stderr[-1500:]))
                continue
            try:
                rewrite(src, dst)
            except Exception as e:  # noqa: BLE001
                check(False, "%s: rewriting through TraceWriter raised %s: %s" % (name, type(e).__name__, e))
                continue
            r = replay(dst, "--bitwise")
            check(r.returncode == 0 and "AGREE" in r.stdout,
                  "%s: the rewritten trace replays bit for bit (rc %d): %s" % (name, r.returncode, r.stdout.strip().splitlines()[-1:]))
            if r.returncode != 0:
                print(r.stdout[-3000:], r.stderr[-1500:])
            diff = differences(src, dst)
            check(not diff, "%s: model, pool, inputs, outputs, refusals and states round-trip exactly%s" % (
                name, "" if not diff else ": " + "; ".join(diff[:5])))
        misuse(tmp)
        dropped_op(tmp)
    if failures:
        sys.exit("%d trace writer checks failed: %s" % (len(failures), "; ".join(failures)))
    print("all trace writer checks passed")


main()

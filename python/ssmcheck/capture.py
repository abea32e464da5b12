"""Recording a state trace from a Python engine: libssmcheck_capture.so through ctypes.

The C library writes the format of docs/trace-format.md crash-safely (every op is durable once it
ends; a process that dies leaves PATH.partial/, which ``ssmcheck replay PATH`` recovers). This
wrapper checks every array's shape against the model before handing it over, naming the op,
entry, layer and field, and accepts numpy arrays or torch tensors (copied to the host).

    with TraceWriter("run.h5", producer="my-engine 0.3", backend="my kernels", h_mode="f32") as w:
        w.set_pool(max_slots=4, conv_capacity=4, snapshot_slots=0)
        w.add_layer(nk=2, nv=4, kd=32, vd=48, d_conv=4, conv_w=..., A_log=..., dt_bias=..., norm_w=...)
        w.add_mamba2_layer(nh=8, hp=16, ns=32, ng=2, d_conv=4, conv_w=..., conv_bias=..., A_log=...,
                           dt_bias=..., D=..., norm_w=..., eps=1e-5)
        with w.op("prefill 17") as op:
            op.inputs(entry=0, layer=0, x=x, a=a, b=b, z=z)          # a GDN layer
            op.inputs(entry=0, layer=1, xBC=xBC, dt=dt, z=z1)        # a Mamba-2 layer
            op.outputs(entry=0, layer=0, out=y)
            op.outputs(entry=0, layer=1, out=y1)
            op.state(seq=0, slot=3, layers=[dict(h=h0, conv=c0), dict(h=h1, conv=c1)])

An exception inside ``with w.op(...)`` drops that op; one inside ``with TraceWriter(...)``
abandons the capture (PATH.partial/ stays, as after a crash).
"""
import ctypes
import math
import os

import numpy as np

from .bridge import _numpy, find_ssmcheck

SSMC_HOST, SSMC_F32, SSMC_F16 = 0, 0, 1


class CaptureError(RuntimeError):
    """A call of the capture library failed; the message is the library's."""


class _LayerDesc(ctypes.Structure):
    _fields_ = [("nk", ctypes.c_int), ("nv", ctypes.c_int), ("kd", ctypes.c_int), ("vd", ctypes.c_int),
                ("d_conv", ctypes.c_int), ("conv_bias", ctypes.c_int), ("sigmoid_gate", ctypes.c_int),
                ("eps", ctypes.c_float)]


class _Mamba2LayerDesc(ctypes.Structure):
    _fields_ = [("nh", ctypes.c_int), ("hp", ctypes.c_int), ("ns", ctypes.c_int), ("ng", ctypes.c_int),
                ("d_conv", ctypes.c_int), ("conv_bias", ctypes.c_int), ("norm_before_gate", ctypes.c_int),
                ("dt_min", ctypes.c_float), ("dt_max", ctypes.c_float), ("eps", ctypes.c_float)]


def _find_library(explicit):
    cands = [explicit, os.environ.get("SSMCHECK_CAPTURE_LIB")]
    try:
        cands.append(os.path.join(os.path.dirname(os.path.realpath(find_ssmcheck())), "libssmcheck_capture.so"))
    except FileNotFoundError:
        pass
    for c in cands:
        if c and os.path.exists(c):
            return c
    raise FileNotFoundError("libssmcheck_capture.so not found: pass lib=PATH, set $SSMCHECK_CAPTURE_LIB, "
                            "or put ssmcheck (built next to it) on PATH / in $SSMCHECK")


def _load(path):
    lib = ctypes.CDLL(path)
    P, I, C, F = ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_float
    fp = ctypes.POINTER(ctypes.c_float)
    sig = {
        "ssmc_last_error": ([], C), "ssmc_trace_version": ([], I),
        "ssmc_open": ([C, C, C, C, C, ctypes.POINTER(P)], I),
        "ssmc_set_pool": ([P, I, ctypes.POINTER(I), I, I], I),
        "ssmc_add_layer": ([P, ctypes.POINTER(_LayerDesc), fp, fp, fp, fp, fp], I),
        "ssmc_begin_op": ([P, C], I), "ssmc_op_inputs": ([P, I, I, fp, fp, fp, fp, I], I),
        "ssmc_op_outputs": ([P, I, I, fp, I], I), "ssmc_op_refused": ([P, C], I),
        "ssmc_state_begin": ([P, I, I, I], I), "ssmc_state_tensor": ([P, I, I, C, I, I, P, I], I),
        "ssmc_end_op": ([P], I), "ssmc_close": ([P], I), "ssmc_abandon": ([P], None),
        "ssmc_op_count": ([P], I),
    }
    # ABI minor 1 (Mamba-2 layers): a library built before it lacks them and still records GDN layers
    optional = {
        "ssmc_abi_minor": ([], I),
        "ssmc_add_mamba2_layer": ([P, ctypes.POINTER(_Mamba2LayerDesc), fp, fp, fp, fp, fp, fp], I),
        # ABI minor 2: without it an op dropped by an exception stays begun (the next op and close fail)
        "ssmc_drop_op": ([P], I),
    }
    for name, (args, res) in sig.items():
        f = getattr(lib, name)
        f.argtypes, f.restype = args, res
    for name, (args, res) in optional.items():
        if hasattr(lib, name):
            f = getattr(lib, name)
            f.argtypes, f.restype = args, res
    return lib


def _shaped(a, shape, what):
    """a as `shape`: its shape must be exactly that, or flat with that many elements (a transposed
    array of the same size, the classic porting slip, is refused)."""
    if a.shape == tuple(shape):
        return a
    if a.ndim == 1 and a.size == int(np.prod(shape)):
        return a.reshape(shape)
    raise ValueError("%s has shape %s, expected %s" % (what, a.shape, tuple(shape)))


def _rows_of(op_text):
    name, *args = op_text.split("@")[0].split()
    return {"prefill": int(args[0]) if args else 0, "decode": 1, "verify": int(args[0]) if args else 0}.get(name, 0)


class _Op:
    def __init__(self, writer, text):
        self.w, self.text, self.rows = writer, text, _rows_of(text)

    def _where(self, entry, layer):
        return "op %d '%s' entry %d layer %d" % (self.w.ops, self.text, entry, layer)

    def _f32(self, x, shape, what):
        return _shaped(_numpy(x, np.float32), shape, what)

    def _layer(self, layer):
        if not 0 <= layer < len(self.w.layers):
            raise ValueError("layer %d: the trace has %d layers" % (layer, len(self.w.layers)))
        return self.w.layers[layer]

    def inputs(self, entry, layer, x=None, a=None, b=None, z=None, xBC=None, dt=None):
        """The inputs of one entry and layer, by the layer's names: a GDN layer x, a, b, z; a
        Mamba-2 layer xBC, dt, z (rows of the op's tokens, see TraceWriter.add_*layer)."""
        L, r, where = self._layer(layer), self.rows, self._where(entry, layer)
        given = dict(x=x, a=a, b=b, z=z, xBC=xBC, dt=dt)
        names = [n for n, _ in L["inputs"]]
        extra = [n for n, v in given.items() if v is not None and n not in names]
        missing = [n for n in names if given[n] is None]
        if extra or missing:
            raise ValueError("%s: a %s layer takes the inputs %s (%s)" % (
                where, L["kind"], ", ".join(names),
                "; ".join(filter(None, ["%s given" % ", ".join(extra) if extra else "",
                                        "%s missing" % ", ".join(missing) if missing else ""]))))
        arrs = {n: self._f32(given[n], (r, width), "%s: %s [rows][%s]" % (where, n, label))
                for n, (width, label) in L["inputs"]}
        fp = ctypes.POINTER(ctypes.c_float)

        # the C ABI's parameters x, a, b, z; a Mamba-2 layer's are xBC, dt, NULL, z
        order = ("xBC", "dt", None, "z") if L["kind"] == "mamba2" else ("x", "a", "b", "z")
        ptrs = [None if n is None else arrs[n].ctypes.data_as(fp) for n in order]
        self.w._check(self.w.lib.ssmc_op_inputs(self.w.t, entry, layer, *ptrs, SSMC_HOST))

    def outputs(self, entry, layer, out):
        L = self._layer(layer)
        o = self._f32(out, (self.rows, L["out_dim"]), self._where(entry, layer) + ": out [rows][%s]" % L["out_label"])
        self.w._check(self.w.lib.ssmc_op_outputs(self.w.t, entry, layer, o.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), SSMC_HOST))

    def refused(self, kind):
        self.w._check(self.w.lib.ssmc_op_refused(self.w.t, kind.encode()))

    def state(self, seq, slot, layers, last_verify_k=0, prefill_stage=None):
        """layers: one dict per layer with h, conv and, where the sequence has them, h_checkpoint,
        conv_checkpoint, h_intermediates, conv_intermediates (lists of K-1 arrays); None for a
        layer whose state is not recorded (at least one layer must be). Each layer's shapes are its
        kind's: h [nv][kd][vd] (GDN) or [nh][hp][ns] (Mamba-2), conv [conv_dim][d_conv]."""
        w = self.w
        w._check(w.lib.ssmc_state_begin(w.t, seq, slot, last_verify_k))
        if len(layers) != len(w.layers):
            raise ValueError("op %d '%s' seq %d: state of %d layers, the trace has %d" % (w.ops, self.text, seq, len(layers), len(w.layers)))
        for l, fields in enumerate(layers):
            if fields is None:
                continue
            L = w.layers[l]
            hshape, cshape = L["h_shape"], (L["conv_dim"], L["d_conv"])
            for name in ("h", "conv", "h_checkpoint", "conv_checkpoint", "h_intermediates", "conv_intermediates"):
                if fields.get(name) is None:
                    continue
                values = fields[name] if name.endswith("intermediates") else [fields[name]]
                field = name[:-1] if name.endswith("intermediates") else name
                for t, v in enumerate(values):
                    what = "op %d '%s' seq %d layer %d %s%s" % (w.ops, self.text, seq, l, field, " %d" % t if field != name else "")
                    a = _numpy(v)
                    f16 = name.startswith("h") and a.dtype == np.float16
                    a = a if f16 else a.astype(np.float32)
                    a = _shaped(a, hshape if name.startswith("h") else cshape, what)
                    w._check(w.lib.ssmc_state_tensor(w.t, seq, l, field.encode(), t, SSMC_F16 if f16 else SSMC_F32,
                                                     np.ascontiguousarray(a).ctypes.data_as(ctypes.c_void_p), SSMC_HOST))
        if prefill_stage is not None:
            s = _numpy(prefill_stage, np.float32)
            w._check(w.lib.ssmc_state_tensor(w.t, seq, 0, b"h_prefill_stage", 0, SSMC_F32, s.ctypes.data_as(ctypes.c_void_p), SSMC_HOST))

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.w._check(self.w.lib.ssmc_end_op(self.w.t))
            self.w.ops += 1
        elif hasattr(self.w.lib, "ssmc_drop_op") and self.w.t:
            self.w.lib.ssmc_drop_op(self.w.t)  # nothing of it is written; the next op and close work
        return False  # the op is dropped; the exception goes on


class TraceWriter:
    def __init__(self, path, producer, backend, h_mode="f32", model_name=None, lib=None):
        self.lib = _load(_find_library(lib))
        self.t = ctypes.c_void_p()
        self.layers, self.ops = [], 0
        self._check(self.lib.ssmc_open(path.encode(), producer.encode(), backend.encode(),
                                       model_name.encode() if model_name else None, h_mode.encode(), ctypes.byref(self.t)))

    def _check(self, status):
        if status != 0:
            raise CaptureError(self.lib.ssmc_last_error().decode())

    def set_pool(self, max_slots, conv_capacity, snapshot_slots=0, h_capacity=None):
        caps = None
        if h_capacity is not None:
            if len(h_capacity) != max_slots:
                raise ValueError("h_capacity lists %d slots, max_slots is %d" % (len(h_capacity), max_slots))
            caps = (ctypes.c_int * max_slots)(*h_capacity)
        self._check(self.lib.ssmc_set_pool(self.t, max_slots, caps, conv_capacity, snapshot_slots))

    def add_layer(self, nk, nv, kd, vd, d_conv, conv_w, A_log, dt_bias, norm_w, conv_bias=None, eps=1e-6,
                  output_gate="silu"):
        """A GDN layer: conv_w [conv_dim][d_conv] (conv_dim = 2*nk*kd + nv*vd), conv_bias [conv_dim]
        (optional), A_log [nv], dt_bias [nv], norm_w [vd]. Its inputs: x, a, b, z."""
        conv_dim = 2 * nk * kd + nv * vd
        fp = ctypes.POINTER(ctypes.c_float)
        where = "layer %d" % len(self.layers)

        def f32(x, shape, name):
            return _shaped(_numpy(x, np.float32), shape, "%s %s" % (where, name))

        arrs = [f32(conv_w, (conv_dim, d_conv), "conv_w"), None if conv_bias is None else f32(conv_bias, (conv_dim,), "conv_bias"),
                f32(A_log, (nv,), "A_log"), f32(dt_bias, (nv,), "dt_bias"), f32(norm_w, (vd,), "norm_w")]
        if output_gate not in ("silu", "sigmoid"):
            raise ValueError("%s output_gate '%s': expected silu or sigmoid" % (where, output_gate))
        desc = _LayerDesc(nk, nv, kd, vd, d_conv, int(conv_bias is not None), int(output_gate == "sigmoid"), eps)
        self._check(self.lib.ssmc_add_layer(self.t, ctypes.byref(desc), *[None if a is None else a.ctypes.data_as(fp) for a in arrs]))
        self.layers.append(dict(kind="gdn", nk=nk, nv=nv, kd=kd, vd=vd, d_conv=d_conv, conv_dim=conv_dim,
                                h_shape=(nv, kd, vd), out_dim=nv * vd, out_label="nv*vd",
                                inputs=[("x", (conv_dim, "conv_dim")), ("a", (nv, "nv")), ("b", (nv, "nv")),
                                        ("z", (nv * vd, "nv*vd"))]))

    def add_mamba2_layer(self, nh, hp, ns, ng, d_conv, conv_w, A_log, dt_bias, D, norm_w, conv_bias=None, eps=1e-5,
                         norm_before_gate=False, dt_min=0.0, dt_max=math.inf):
        """A Mamba-2 layer: heads nh, head dim hp, state size ns, groups ng (nh a multiple of ng);
        conv_w [conv_dim][d_conv] (conv_dim = nh*hp + 2*ng*ns, channels x | B | C), conv_bias
        [conv_dim] (Mamba-2 layers usually have one), A_log [nh], dt_bias [nh], D [nh], norm_w
        [nh*hp]. norm_before_gate: rms_norm(y) * silu(z) instead of Nemotron-H's
        rms_norm(y * silu(z)); dt_min, dt_max: the model's time_step_limit (dt after softplus is
        clamped to it; the defaults clamp nothing). Its inputs: xBC, dt (before dt_bias), z; its h
        is [nh][hp][ns], ns fastest; its outputs [rows][nh*hp]."""
        where = "layer %d" % len(self.layers)
        if not hasattr(self.lib, "ssmc_add_mamba2_layer"):
            raise CaptureError("%s: the capture library %s predates Mamba-2 layers (no ssmc_add_mamba2_layer, ABI minor 0); "
                               "rebuild libssmcheck_capture" % (where, self.lib._name))
        for name, v in (("nh", nh), ("hp", hp), ("ns", ns), ("ng", ng), ("d_conv", d_conv)):
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 1:
                raise ValueError("%s %s is %r: expected an integer >= 1" % (where, name, v))
        if nh % ng:
            raise ValueError("%s: nh %d is not a multiple of ng %d (head h reads group h / (nh/ng))" % (where, nh, ng))
        conv_dim = nh * hp + 2 * ng * ns
        fp = ctypes.POINTER(ctypes.c_float)

        def f32(x, shape, name):
            a = _shaped(_numpy(x, np.float32), shape, "%s %s" % (where, name))
            bad = np.flatnonzero(~np.isfinite(a))
            if bad.size:
                raise ValueError("%s %s: non-finite value %r at %s" % (where, name, float(a.flat[bad[0]]),
                                                                       np.unravel_index(bad[0], a.shape)))
            return a

        arrs = [f32(conv_w, (conv_dim, d_conv), "conv_w [conv_dim][d_conv]"),
                None if conv_bias is None else f32(conv_bias, (conv_dim,), "conv_bias [conv_dim]"),
                f32(A_log, (nh,), "A_log [nh]"), f32(dt_bias, (nh,), "dt_bias [nh]"), f32(D, (nh,), "D [nh]"),
                f32(norm_w, (nh * hp,), "norm_w [nh*hp]")]
        nh, hp, ns, ng, d_conv = int(nh), int(hp), int(ns), int(ng), int(d_conv)
        desc = _Mamba2LayerDesc(nh, hp, ns, ng, d_conv, int(conv_bias is not None), int(bool(norm_before_gate)),
                                float(dt_min), float(dt_max), float(eps))
        self._check(self.lib.ssmc_add_mamba2_layer(self.t, ctypes.byref(desc),
                                                   *[None if a is None else a.ctypes.data_as(fp) for a in arrs]))
        self.layers.append(dict(kind="mamba2", nh=nh, hp=hp, ns=ns, ng=ng, d_conv=d_conv, conv_dim=conv_dim,
                                h_shape=(nh, hp, ns), out_dim=nh * hp, out_label="nh*hp",
                                inputs=[("xBC", (conv_dim, "conv_dim")), ("dt", (nh, "nh")), ("z", (nh * hp, "nh*hp"))]))

    def op(self, text):
        """``with w.op("verify 4 @0,1"):`` one op; it is written durably when the block ends."""
        self._check(self.lib.ssmc_begin_op(self.t, text.encode()))
        return _Op(self, text)

    def close(self):
        if self.t:
            t, self.t = self.t, None
            status = self.lib.ssmc_close(t)
            if status != 0:
                raise CaptureError(self.lib.ssmc_last_error().decode())

    def abandon(self):
        if self.t:
            self.lib.ssmc_abandon(self.t)
            self.t = None

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.close()
        else:
            self.abandon()
        return False

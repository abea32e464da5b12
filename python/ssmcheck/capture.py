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
        # GDN layer 0 hosts a PLE carry (ABI minor 3): C = 8 channels, ple_w [C][k_size]
        w.set_layer_ple(0, channels=8, ngram_size=3, k_size=4, dilation=3, eos_id=2, ple_w=ple_w)
        with w.op("prefill 17") as op:
            op.inputs(entry=0, layer=0, x=x, a=a, b=b, z=z,          # a GDN layer, hosting the carry:
                      ple_tokens=ids, ple_x=e)                       #   ids [rows] token ids, e [rows][C]
            op.inputs(entry=0, layer=1, xBC=xBC, dt=dt, z=z1)        # a Mamba-2 layer
            op.outputs(entry=0, layer=0, out=y, ple_out=p)           # p [rows][C], the PLE output
            op.outputs(entry=0, layer=1, out=y1)
            op.state(seq=0, slot=3, layers=[dict(h=h0, conv=c0, ple_history=hist, ple_conv=pc),
                                             dict(h=h1, conv=c1)])

The PLE carry (docs/state-model.md, "PLE carry"; GDN layers only) is declared by ``set_layer_ple``
after the layer's ``add_layer`` and before the first op. The hosting layer's inputs then also take
``ple_tokens`` (token ids [rows], or [rows][1] as traces store them: any integer array, or floats
holding integers, in 0..2^24-1; handed to the library as int32) and ``ple_x [rows][C]``; its
outputs ``ple_out [rows][C]``; its states, where the carry exists, ``ple_history [H]`` (token ids,
H = ngram_size-1), ``ple_conv [R][C]`` (R = (k_size-1)*dilation), ``ple_history_checkpoint``,
``ple_conv_checkpoint`` and, when last_verify_k = K > 0, ``ple_history_snapshots [K][H]`` and
``ple_conv_snapshots [K][R][C]`` (arrays, or lists of K). PLE names on a layer hosting none, token
ids that are not integers in range, and unknown state fields are refused, naming op, entry or
sequence, layer and field. A library older than ABI minor 3 raises CaptureError as soon as a
carry is declared.

An engine that computes or lays out its state otherwise than the contract declares it per layer with
``set_layer_conventions`` (ABI minor 4; docs/trace-format.md, "Conventions"), by the names the
library knows: ``gates``, ``f16_store``, ``f16_rows`` (its numerics, written into the trace for
replay to compute with), ``conv_window="d_conv-1"`` (conv fields [conv_dim][d_conv-1], as
causal_conv1d keeps them) and ``h_layout="nv,vd,kd"`` (h fields [nv][vd][kd], Mamba-2
[nh][ns][hp]). ``op.state`` then takes the state in the engine's own layout; the library converts
it to the contract's and the trace says which conv column was not kept:

        w.add_layer(...)
        w.set_layer_conventions(0, gates="torch", conv_window="d_conv-1", h_layout="nv,vd,kd")

Layers by name (ABI minor 6): ``add_layer_by_name(kind, attrs, weights)`` adds a layer of any kind
from the trace format's /model/layer<l> attributes (a dict: nk=2, eps=1e-6, gates="torch",
ple_channels=8, ...) and its weights by name, and returns its index; ``geometry(layer)`` is the
library's statement of its inputs, outputs, weights and state shapes (under its conventions), and
``set_layer_weight`` gives or replaces one weight before the first op. With such a library
``add_layer`` and ``add_mamba2_layer`` go through it too, and every shape this writer checks (weights,
inputs, outputs, states) is the library's: ``op.inputs`` takes any layer's inputs by their names and
hands each over by name. With an older library the per-kind calls and this package's shape formulas
(bridge._geometry) remain, as the fallback:

        l = w.add_layer_by_name("mamba2", dict(nh=8, hp=16, ns=32, ng=2, d_conv=4, conv_bias=1, eps=1e-5,
                                               norm_groups=1, dt_min=0.001, dt_max=0.1),
                                dict(conv_w=..., conv_bias=..., A_log=..., dt_bias=..., D=..., norm_w=...))

An exception inside ``with w.op(...)`` drops that op; one inside ``with TraceWriter(...)``
abandons the capture (PATH.partial/ stays, as after a crash).
"""
import ctypes
import math

import numpy as np

from .bridge import _geometry, _numpy, _ple_shapes
from .locate import find_capture_library

SSMC_HOST, SSMC_F32, SSMC_F16, SSMC_I32 = 0, 0, 1, 2
MAX_TOKEN_ID = (1 << 24) - 1  # token ids are integers in 0..2^24-1 (exact in FP32)
# The state fields a layer's dict may hold: the layer's own, then the PLE carry's (a hosting layer).
STATE_FIELDS = ("h", "conv", "h_checkpoint", "conv_checkpoint", "h_intermediates", "conv_intermediates")
PLE_STATE_FIELDS = ("ple_history", "ple_conv", "ple_history_checkpoint", "ple_conv_checkpoint",
                    "ple_history_snapshots", "ple_conv_snapshots")


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


class _PleDesc(ctypes.Structure):
    _fields_ = [("channels", ctypes.c_int), ("ngram_size", ctypes.c_int), ("k_size", ctypes.c_int),
                ("dilation", ctypes.c_int), ("eos_id", ctypes.c_int)]


def _find_library(explicit):
    """libssmcheck_capture.so: lib=PATH, $SSMCHECK_CAPTURE_LIB, beside the ssmcheck executable or in
    its prefix, the install prefix (locate.py has the order; its error names every place)."""
    return find_capture_library(explicit)


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
        # ABI minor 3: the PLE carry (and SSMC_I32 token ids in ssmc_state_tensor)
        "ssmc_set_layer_ple": ([P, I, ctypes.POINTER(_PleDesc), fp], I),
        "ssmc_op_ple_inputs": ([P, I, I, ctypes.POINTER(ctypes.c_int32), fp, I], I),
        "ssmc_op_ple_outputs": ([P, I, I, fp, I], I),
        # ABI minor 4: a layer's conventions by name, and the shape a state field is read in
        "ssmc_set_layer_convention": ([P, I, C, C], I),
        "ssmc_state_field_shape": ([P, I, C, ctypes.POINTER(ctypes.c_int64)], I),
        # ABI minor 6: everything by name, and the layer's geometry from the library
        "ssmc_add_layer_by_name": ([P, C, I, ctypes.POINTER(C), ctypes.POINTER(C), ctypes.POINTER(I)], I),
        "ssmc_set_layer_weight": ([P, I, C, fp, ctypes.c_int64], I),
        "ssmc_op_input": ([P, I, I, C, I, P, I], I),
        "ssmc_op_output": ([P, I, I, C, fp, I], I),
        "ssmc_layer_fields": ([P, I, C], I),
        "ssmc_layer_field": ([P, I, C, I, ctypes.POINTER(C), ctypes.POINTER(I), ctypes.POINTER(ctypes.c_int64)], I),
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


def _token_ids(x, shape, what):
    """x (any integer array, or floats holding integers) as int32 token ids of `shape`: each an
    integer in 0..MAX_TOKEN_ID; anything else (a fraction, NaN, a negative id, bools) is refused,
    naming the element."""
    a = _numpy(x)
    if a.dtype.kind not in "iuf":
        raise ValueError("%s: token ids of dtype %s, expected integers (or floats holding integers)" % (what, a.dtype))
    a = _shaped(a, shape, what)
    with np.errstate(invalid="ignore"):
        bad = (a < 0) | (a > MAX_TOKEN_ID)
        if a.dtype.kind == "f":
            bad |= ~np.isfinite(a) | (a != np.floor(a))
    idx = np.flatnonzero(bad)
    if idx.size:
        v = a.flat[idx[0]]
        raise ValueError("%s: %r at %s is not a token id (an integer in 0..%d)" % (
            what, float(v) if a.dtype.kind == "f" else int(v), np.unravel_index(idx[0], a.shape), MAX_TOKEN_ID))
    return np.ascontiguousarray(a.astype(np.int32))


def _attr_text(v):
    """An attribute's value as the library reads it (core/layer_attrs.h): integers in decimal, bools
    as 1 / 0, floats as the shortest text of their FP32 value ("inf" for an unbounded dt_max), text as is."""
    if isinstance(v, (bool, np.bool_)):
        return "1" if v else "0"
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        return str(np.float32(v))
    if isinstance(v, bytes):
        return v.decode()
    return str(v)


def _finite(a, what):
    bad = np.flatnonzero(~np.isfinite(a))
    if bad.size:
        raise ValueError("%s: non-finite value %r at %s" % (what, float(a.flat[bad[0]]), np.unravel_index(bad[0], a.shape)))
    return a


# The labels the per-kind methods name their fields' widths by in messages (a layer added by name
# names them by their sizes).
_LABELS = {"gdn": dict(x="conv_dim", a="nv", b="nv", z="nv*vd", ple_x="C", out="nv*vd", ple_out="C"),
           "mamba2": dict(xBC="conv_dim", dt="nh", z="nh*hp", ple_x="C", out="nh*hp", ple_out="C")}


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

    def inputs(self, entry, layer, x=None, a=None, b=None, z=None, xBC=None, dt=None, ple_tokens=None, ple_x=None,
               **named):
        """The inputs of one entry and layer, by the layer's names: a GDN layer x, a, b, z; a
        Mamba-2 layer xBC, dt, z (rows of the op's tokens, see TraceWriter.add_*layer); a layer
        hosting a PLE carry (TraceWriter.set_layer_ple) also ple_tokens [rows] (token ids: any
        integers, or floats holding integers, in 0..2^24-1; [rows][1] as traces store them is
        accepted) and ple_x [rows][C]. With a library of ABI minor >= 6 the names and widths are the
        library's (TraceWriter.geometry), any layer kind's inputs come by their names (``**named``)
        and each is handed over by name (ssmc_op_input)."""
        L, r, where = self._layer(layer), self.rows, self._where(entry, layer)
        given = dict(x=x, a=a, b=b, z=z, xBC=xBC, dt=dt, ple_tokens=ple_tokens, ple_x=ple_x, **named)
        if self.w.by_name:
            names = [n for n, _ in L["inputs"]]
        else:
            names = [n for n, _ in L["inputs"]] + (["ple_tokens", "ple_x"] if L["ple"] else [])
        extra = [n for n, v in given.items() if v is not None and n not in names]
        missing = [n for n in names if given[n] is None]
        if extra or missing:
            hosts_none = any(n.startswith("ple_") for n in extra) and not L["ple"]
            raise ValueError("%s: a %s layer%s takes the inputs %s (%s)" % (
                where, L["kind"], " hosting a PLE carry" if L["ple"] else "", ", ".join(names),
                "; ".join(filter(None, ["%s given%s" % (", ".join(extra), ": the layer hosts no PLE carry" if hosts_none else "")
                                        if extra else "",
                                        "%s missing" % ", ".join(missing) if missing else ""]))))
        if self.w.by_name:
            for n, (width, label) in L["inputs"]:
                if n == "ple_tokens":  # token ids: [rows] or [rows][1] as traces store them, handed over as int32
                    t = _numpy(given[n])
                    t = t.reshape(r) if t.shape in ((r, 1), ()) and t.size == r else t
                    a, dtype = _token_ids(t, (r,), "%s: ple_tokens [rows]" % where), SSMC_I32
                else:
                    a, dtype = self._f32(given[n], (r, width), "%s: %s [rows][%s]" % (where, n, label)), SSMC_F32
                self.w._check(self.w.lib.ssmc_op_input(self.w.t, entry, layer, n.encode(), dtype,
                                                       a.ctypes.data_as(ctypes.c_void_p), SSMC_HOST))
            return
        arrs = {n: self._f32(given[n], (r, width), "%s: %s [rows][%s]" % (where, n, label))
                for n, (width, label) in L["inputs"]}
        fp = ctypes.POINTER(ctypes.c_float)
        if L["ple"]:
            # the trace stores the ids [rows][1]; an engine holds them [rows]: both are taken
            t = _numpy(ple_tokens)
            t = t.reshape(r) if t.shape in ((r, 1), ()) and t.size == r else t
            ids = _token_ids(t, (r,), "%s: ple_tokens [rows]" % where)
            px = self._f32(ple_x, (r, L["ple"]["channels"]), "%s: ple_x [rows][C]" % where)

        # the C ABI's parameters x, a, b, z; a Mamba-2 layer's are xBC, dt, NULL, z
        order = ("xBC", "dt", None, "z") if L["kind"] == "mamba2" else ("x", "a", "b", "z")
        ptrs = [None if n is None else arrs[n].ctypes.data_as(fp) for n in order]
        self.w._check(self.w.lib.ssmc_op_inputs(self.w.t, entry, layer, *ptrs, SSMC_HOST))
        if L["ple"]:
            self.w._check(self.w.lib.ssmc_op_ple_inputs(self.w.t, entry, layer, ids.ctypes.data_as(ctypes.POINTER(ctypes.c_int32)),
                                                        px.ctypes.data_as(fp), SSMC_HOST))

    def outputs(self, entry, layer, out, ple_out=None):
        """The outputs of one entry and layer: out [rows][out_dim] (GDN nv*vd, Mamba-2 nh*hp); on a
        layer hosting a PLE carry also ple_out [rows][C] (the PLE output x + silu(y), required
        there: an entry's outputs are complete or absent)."""
        L, where = self._layer(layer), self._where(entry, layer)
        if L["ple"] and ple_out is None:
            raise ValueError("%s: the layer hosts a PLE carry: its outputs are out and ple_out [rows][C] (ple_out missing)" % where)
        if not L["ple"] and ple_out is not None:
            raise ValueError("%s: ple_out given, but the %s layer hosts no PLE carry" % (where, L["kind"]))
        fp = ctypes.POINTER(ctypes.c_float)
        if self.w.by_name:  # by the library's names and widths (ABI minor 6)
            for n, (width, label) in L["outputs"]:
                a = self._f32(out if n == "out" else ple_out, (self.rows, width), "%s: %s [rows][%s]" % (where, n, label))
                self.w._check(self.w.lib.ssmc_op_output(self.w.t, entry, layer, n.encode(), a.ctypes.data_as(fp), SSMC_HOST))
            return
        o = self._f32(out, (self.rows, L["out_dim"]), where + ": out [rows][%s]" % L["out_label"])
        p = None if ple_out is None else self._f32(ple_out, (self.rows, L["ple"]["channels"]), where + ": ple_out [rows][C]")
        self.w._check(self.w.lib.ssmc_op_outputs(self.w.t, entry, layer, o.ctypes.data_as(fp), SSMC_HOST))
        if p is not None:
            self.w._check(self.w.lib.ssmc_op_ple_outputs(self.w.t, entry, layer, p.ctypes.data_as(fp), SSMC_HOST))

    def refused(self, kind):
        self.w._check(self.w.lib.ssmc_op_refused(self.w.t, kind.encode()))

    def state(self, seq, slot, layers, last_verify_k=0, prefill_stage=None):
        """layers: one dict per layer with h, conv and, where the sequence has them, h_checkpoint,
        conv_checkpoint, h_intermediates, conv_intermediates (lists of K-1 arrays); None for a
        layer whose state is not recorded (at least one layer must be). Each layer's shapes are its
        kind's: h [nv][kd][vd] (GDN) or [nh][hp][ns] (Mamba-2), conv [conv_dim][d_conv]. A layer
        hosting a PLE carry also takes, where the carry exists, ple_history [H] (token ids, H =
        ngram_size-1), ple_conv [R][C] (R = (k_size-1)*dilation), ple_history_checkpoint,
        ple_conv_checkpoint and, when last_verify_k = K > 0, ple_history_snapshots [K][H] and
        ple_conv_snapshots [K][R][C] (arrays, or lists of K): snapshot t is the carry after t rows
        of the last verify. A field the layer cannot hold is refused, naming it."""
        w = self.w
        w._check(w.lib.ssmc_state_begin(w.t, seq, slot, last_verify_k))
        if len(layers) != len(w.layers):
            raise ValueError("op %d '%s' seq %d: state of %d layers, the trace has %d" % (w.ops, self.text, seq, len(layers), len(w.layers)))
        for l, fields in enumerate(layers):
            if fields is None:
                continue
            L = w.layers[l]
            at = "op %d '%s' seq %d layer %d" % (w.ops, self.text, seq, l)
            # the fields: the library's names (ABI minor 6; an indexed one, *_intermediate or *_snapshot,
            # taken as a list under its plural), else this module's
            known = ([n + "s" if n.endswith(("_intermediate", "_snapshot")) else n for n in L["state"]]
                     if w.by_name else list(STATE_FIELDS))
            known += [k for k in PLE_STATE_FIELDS if k not in known]
            unknown = [k for k in fields if k not in known]
            if unknown:
                raise ValueError("%s: unknown state field %s (known: %s)" % (at, ", ".join(map(repr, unknown)),
                                                                           ", ".join(known)))
            ple_given = [k for k in PLE_STATE_FIELDS if fields.get(k) is not None]
            if ple_given and not L["ple"]:
                raise ValueError("%s %s: the %s layer hosts no PLE carry" % (at, ple_given[0], L["kind"]))
            # the engine's layout where the layer declares one (set_layer_conventions), else the contract's
            if w.by_name:  # the library's shapes under the layer's conventions (ABI minor 6)
                shapes = None
            else:  # a library older than minor 6: the shapes from this module's formulas (bridge._geometry)
                shapes = dict(h=L.get("h_engine_shape", L["h_shape"]),
                              conv=L.get("conv_engine_shape", (L["conv_dim"], L["d_conv"])))
                if L["ple"]:
                    shapes.update(_ple_shapes(L["ple"]))
            for name in known:
                if fields.get(name) is None:
                    continue
                many = name.endswith(("intermediates", "snapshots"))
                values = fields[name] if many else [fields[name]]
                field = name[:-1] if many else name  # the C ABI's field: h_intermediate, ple_conv_snapshot, ...
                kind = next((k for k in ("ple_history", "ple_conv", "h", "conv") if name.startswith(k)), name)
                shape = L["state"][field] if shapes is None else shapes[kind]
                for t, v in enumerate(values):
                    what = "%s %s%s" % (at, field, " %d" % t if many else "")
                    if kind == "ple_history":  # token ids, handed over as int32
                        a, dtype = _token_ids(v, shape, what), SSMC_I32
                    else:
                        a = _numpy(v)
                        f16 = kind == "h" and a.dtype == np.float16
                        a = a if f16 else a.astype(np.float32)
                        a, dtype = _shaped(a, shape, what), SSMC_F16 if f16 else SSMC_F32
                    w._check(w.lib.ssmc_state_tensor(w.t, seq, l, field.encode(), t, dtype,
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
        # the library's ABI minor (0: a library from before ssmc_abi_minor)
        self.minor = self.lib.ssmc_abi_minor() if hasattr(self.lib, "ssmc_abi_minor") else 0
        # ABI minor 6: layers, weights, inputs and outputs by name, and the geometry from the library
        self.by_name = self.minor >= 6 and hasattr(self.lib, "ssmc_add_layer_by_name")
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

    def geometry(self, layer):
        """Layer `layer`'s fields as the library states them (ABI minor 6; ssmc_layer_field): a dict of
        "inputs" and "outputs" ([(name, width per token)]), "weights" ([(name, shape)]) and "state"
        ({field: shape} as op.state takes it, under the layer's conventions; an indexed field, one per
        t, under its singular name: h_intermediate, ple_conv_snapshot)."""
        if not self.by_name:
            raise CaptureError("the capture library %s predates the geometry query (ABI minor %d; ssmc_layer_field "
                               "needs 6); rebuild libssmcheck_capture" % (self.lib._name, self.minor))
        g = {}
        for group in ("inputs", "weights", "outputs", "state"):
            n = self.lib.ssmc_layer_fields(self.t, int(layer), group.encode())
            if n < 0:
                raise CaptureError(self.lib.ssmc_last_error().decode())
            fields = []
            for i in range(n):
                name, rank, dims = ctypes.c_char_p(), ctypes.c_int(), (ctypes.c_int64 * 4)()
                self._check(self.lib.ssmc_layer_field(self.t, int(layer), group.encode(), i, ctypes.byref(name),
                                                      ctypes.byref(rank), dims))
                fields.append((name.value.decode(), tuple(dims[:rank.value])))
            g[group] = dict(fields) if group == "state" else (
                fields if group == "weights" else [(k, v[0]) for k, v in fields])
        return g

    def _describe(self, layer):
        """Layer `layer`'s record here from the library's geometry (ABI minor 6): its inputs and
        outputs by name with their widths and the labels messages use, its state shapes."""
        L = self.layers[layer]
        g = self.geometry(layer)
        labels = _LABELS.get(L["kind"], {}) if L.get("per_kind") else {}
        L["inputs"] = [(n, (w, labels.get(n, str(w)))) for n, w in g["inputs"]]
        L["outputs"] = [(n, (w, labels.get(n, str(w)))) for n, w in g["outputs"]]
        L["out_dim"] = dict(g["outputs"])["out"]
        L["weights"], L["state"] = g["weights"], g["state"]
        L["h_shape"] = g["state"].get("h")

    def add_layer_by_name(self, kind, attrs, weights, labels=None):
        """A layer of any kind by the trace format's /model/layer<l> attributes (ABI minor 6;
        docs/trace-format.md "Model"): ``attrs`` maps each name to its value (ints, floats, bools or
        text: GDN nk, nv, kd, vd, output_gate; Mamba-2 nh, hp, ns, ng, norm_before_gate, norm_groups,
        dt_min, dt_max; both d_conv, conv_bias (0 / 1), eps, gates, f16_store, f16_rows; a GDN layer
        hosting a PLE carry ple_channels, ple_ngram_size, ple_k_size, ple_dilation, ple_eos_id), and
        ``weights`` each weight by its name (conv_w, conv_bias, A_log, dt_bias, D, norm_w, ple_w: the
        library lists the layer's, with their shapes, in geometry(layer)["weights"]). The library
        checks the attributes (an unknown, missing or malformed one raises CaptureError naming it;
        nothing is added). The weights are then checked here (names, shapes, finite: ValueError)
        and handed over one by one; a weight refused leaves the layer added without it, and the
        first op is refused naming it until set_layer_weight gives it. Returns the layer's index.
        Inputs, outputs and state shapes then come from the library: nothing here knows the kind."""
        if not self.by_name:
            raise CaptureError("the capture library %s predates layers by name (ABI minor %d; ssmc_add_layer_by_name "
                               "needs 6); rebuild libssmcheck_capture, or use add_layer / add_mamba2_layer"
                               % (self.lib._name, self.minor))
        items = [(str(k), _attr_text(v)) for k, v in attrs.items() if k != "kind"]
        names = (ctypes.c_char_p * max(len(items), 1))(*[k.encode() for k, _ in items])
        values = (ctypes.c_char_p * max(len(items), 1))(*[v.encode() for _, v in items])
        index = ctypes.c_int(-1)
        self._check(self.lib.ssmc_add_layer_by_name(self.t, str(kind).encode(), len(items), names, values,
                                                    ctypes.byref(index)))
        l = index.value
        a = dict(items)
        ple = None
        if "ple_channels" in a:
            ple = dict(channels=int(a["ple_channels"]), ngram_size=int(a["ple_ngram_size"]), k_size=int(a["ple_k_size"]),
                       dilation=int(a["ple_dilation"]), eos_id=int(a["ple_eos_id"]))
        self.layers.append(dict(kind=str(kind), ple=ple, per_kind=labels is not None, weight_labels=labels or {}))
        self._describe(l)
        where = "layer %d" % l
        wanted = [n for n, _ in self.layers[l]["weights"]]
        extra = [n for n in weights if weights[n] is not None and n not in wanted]
        missing = [n for n in wanted if weights.get(n) is None]
        if extra or missing:
            raise ValueError("%s: a %s layer with these attributes takes the weights %s (%s); the layer is added "
                             "without them (set_layer_weight)" % (
                                 where, kind, ", ".join(wanted), "; ".join(filter(None, [
                                     "%s given" % ", ".join(extra) if extra else "",
                                     "%s missing" % ", ".join(missing) if missing else ""]))))
        for n, _ in self.layers[l]["weights"]:
            self.set_layer_weight(l, n, weights[n])
        return l

    def set_layer_weight(self, layer, name, value):
        """Weight `name` of layer `layer` (ABI minor 6; before the first op): its shape is the
        library's (geometry(layer)["weights"]), its values finite; a later call replaces it."""
        L = self.layers[layer]
        shapes = dict(L["weights"])
        where = "layer %d %s%s" % (layer, name, L.get("weight_labels", {}).get(name, ""))
        if name not in shapes:  # the library's refusal names the layer's weights
            a = np.zeros(0, np.float32)
        else:
            a = _finite(_shaped(_numpy(value, np.float32), shapes[name], where), where)
        a = np.ascontiguousarray(a)
        self._check(self.lib.ssmc_set_layer_weight(self.t, int(layer), name.encode(),
                                                   a.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), a.size))

    def add_layer(self, nk, nv, kd, vd, d_conv, conv_w, A_log, dt_bias, norm_w, conv_bias=None, eps=1e-6,
                  output_gate="silu"):
        """A GDN layer: conv_w [conv_dim][d_conv] (conv_dim = 2*nk*kd + nv*vd), conv_bias [conv_dim]
        (optional), A_log [nv], dt_bias [nv], norm_w [vd]. Its inputs: x, a, b, z (and ple_tokens,
        ple_x once set_layer_ple declared it hosting a PLE carry). With a library of ABI minor >= 6
        this is add_layer_by_name("gdn", ...); older libraries take ssmc_add_layer, with the shapes
        from this module's formulas (bridge._geometry)."""
        if output_gate not in ("silu", "sigmoid"):
            raise ValueError("layer %d output_gate '%s': expected silu or sigmoid" % (len(self.layers), output_gate))
        if self.by_name:
            attrs = dict(nk=nk, nv=nv, kd=kd, vd=vd, d_conv=d_conv, conv_bias=conv_bias is not None, eps=eps)
            if output_gate != "silu":
                attrs["output_gate"] = output_gate
            self.add_layer_by_name("gdn", attrs, dict(conv_w=conv_w, conv_bias=conv_bias, A_log=A_log, dt_bias=dt_bias,
                                                      norm_w=norm_w), labels={})
            return
        # the sizes as the bridge derives them for a layer without ssmcheck's geometry: one place
        conv_dim, _, out_dim, h_shape, _ = _geometry(dict(kind="gdn", nk=nk, nv=nv, kd=kd, vd=vd, d_conv=d_conv))
        fp = ctypes.POINTER(ctypes.c_float)
        where = "layer %d" % len(self.layers)

        def f32(x, shape, name):
            return _shaped(_numpy(x, np.float32), shape, "%s %s" % (where, name))

        arrs = [f32(conv_w, (conv_dim, d_conv), "conv_w"), None if conv_bias is None else f32(conv_bias, (conv_dim,), "conv_bias"),
                f32(A_log, (nv,), "A_log"), f32(dt_bias, (nv,), "dt_bias"), f32(norm_w, (vd,), "norm_w")]
        desc = _LayerDesc(nk, nv, kd, vd, d_conv, int(conv_bias is not None), int(output_gate == "sigmoid"), eps)
        self._check(self.lib.ssmc_add_layer(self.t, ctypes.byref(desc), *[None if a is None else a.ctypes.data_as(fp) for a in arrs]))
        self.layers.append(dict(kind="gdn", nk=nk, nv=nv, kd=kd, vd=vd, d_conv=d_conv, conv_dim=conv_dim,
                                h_shape=h_shape, out_dim=out_dim, out_label="nv*vd", ple=None,
                                inputs=[("x", (conv_dim, "conv_dim")), ("a", (nv, "nv")), ("b", (nv, "nv")),
                                        ("z", (out_dim, "nv*vd"))]))

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
        if self.by_name:  # ABI minor 6: by name, the shapes from the library
            attrs = dict(nh=nh, hp=hp, ns=ns, ng=ng, d_conv=d_conv, conv_bias=conv_bias is not None, eps=eps,
                         norm_before_gate=bool(norm_before_gate), dt_min=dt_min,
                         dt_max=math.inf if float(dt_max) == 0 else dt_max)  # 0 means none, as in the C desc
            self.add_layer_by_name("mamba2", attrs, dict(conv_w=conv_w, conv_bias=conv_bias, A_log=A_log, dt_bias=dt_bias,
                                                         D=D, norm_w=norm_w),
                                   labels=dict(conv_w=" [conv_dim][d_conv]", conv_bias=" [conv_dim]", A_log=" [nh]",
                                               dt_bias=" [nh]", D=" [nh]", norm_w=" [nh*hp]"))
            return
        conv_dim, _, out_dim, h_shape, _ = _geometry(dict(kind="mamba2", nh=nh, hp=hp, ns=ns, ng=ng, d_conv=d_conv))
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
                f32(norm_w, (out_dim,), "norm_w [nh*hp]")]
        nh, hp, ns, ng, d_conv = int(nh), int(hp), int(ns), int(ng), int(d_conv)
        desc = _Mamba2LayerDesc(nh, hp, ns, ng, d_conv, int(conv_bias is not None), int(bool(norm_before_gate)),
                                float(dt_min), float(dt_max), float(eps))
        self._check(self.lib.ssmc_add_mamba2_layer(self.t, ctypes.byref(desc),
                                                   *[None if a is None else a.ctypes.data_as(fp) for a in arrs]))
        self.layers.append(dict(kind="mamba2", nh=nh, hp=hp, ns=ns, ng=ng, d_conv=d_conv, conv_dim=conv_dim,
                                h_shape=h_shape, out_dim=out_dim, out_label="nh*hp", ple=None,
                                inputs=[("xBC", (conv_dim, "conv_dim")), ("dt", (nh, "nh")), ("z", (out_dim, "nh*hp"))]))

    def set_layer_ple(self, layer, channels, ngram_size, k_size, dilation, eos_id, ple_w):
        """GDN layer `layer` (already added) hosts a PLE carry (ABI minor 3; docs/state-model.md,
        "PLE carry"): C = channels, a history of ngram_size-1 token ids filled with eos_id when
        the carry is created, a conv of k_size taps `dilation` rows apart (its state: the last
        (k_size-1)*dilation rows), and its weight ple_w [C][k_size] (finite). Before the first op,
        once per layer. Its inputs then also take ple_tokens and ple_x, its outputs ple_out, its
        states the ple_* fields (see _Op.inputs, outputs, state)."""
        where = "layer %s" % (layer,)
        if self.minor < 3 or not hasattr(self.lib, "ssmc_set_layer_ple"):
            raise CaptureError("%s: the capture library %s predates the PLE carry (ABI minor %d; ssmc_set_layer_ple "
                               "needs 3); rebuild libssmcheck_capture" % (where, self.lib._name, self.minor))
        if not isinstance(layer, (int, np.integer)) or not 0 <= layer < len(self.layers):
            raise ValueError("%s: the trace has %d layers (add the layer first)" % (where, len(self.layers)))
        L = self.layers[layer]
        if L["kind"] != "gdn":
            raise ValueError("%s is a %s layer: only GDN layers host a PLE carry" % (where, L["kind"]))
        for name, v in (("channels", channels), ("ngram_size", ngram_size), ("k_size", k_size), ("dilation", dilation)):
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 1:
                raise ValueError("%s PLE %s is %r: expected an integer >= 1" % (where, name, v))
        if not isinstance(eos_id, (int, np.integer)) or isinstance(eos_id, bool) or not 0 <= eos_id <= MAX_TOKEN_ID:
            raise ValueError("%s PLE eos_id is %r: expected a token id (an integer in 0..%d)" % (where, eos_id, MAX_TOKEN_ID))
        channels, ngram_size, k_size, dilation, eos_id = int(channels), int(ngram_size), int(k_size), int(dilation), int(eos_id)
        w = _shaped(_numpy(ple_w, np.float32), (channels, k_size), "%s ple_w [C][k_size]" % where)
        bad = np.flatnonzero(~np.isfinite(w))
        if bad.size:
            raise ValueError("%s ple_w [C][k_size]: non-finite value %r at %s" % (where, float(w.flat[bad[0]]),
                                                                              np.unravel_index(bad[0], w.shape)))
        desc = _PleDesc(channels, ngram_size, k_size, dilation, eos_id)
        self._check(self.lib.ssmc_set_layer_ple(self.t, int(layer), ctypes.byref(desc),
                                                w.ctypes.data_as(ctypes.POINTER(ctypes.c_float))))
        L["ple"] = dict(channels=channels, ngram_size=ngram_size, k_size=k_size, dilation=dilation, eos_id=eos_id)
        if self.by_name:
            self._describe(int(layer))

    def set_layer_conventions(self, layer, **conventions):
        """The conventions of layer `layer` (already added; before the first op; ABI minor 4), by
        name=value as docs/trace-format.md ("Conventions") and the library define them: gates
        ("clamped" or "torch"), f16_store ("saturate" or "inf"), f16_rows ("stored" or "carried"),
        conv_window ("d_conv" or "d_conv-1"), h_layout ("nv,kd,vd" or "nv,vd,kd") and, on a Mamba-2
        layer, norm_groups (0: ng; 1: the output norm over the whole width, HF's Mamba2). The library
        checks names and values (an unknown one raises CaptureError naming it); op.state then takes
        this layer's h and conv fields in the shapes the library reports for them."""
        where = "layer %s" % (layer,)
        if self.minor < 4 or not hasattr(self.lib, "ssmc_set_layer_convention"):
            raise CaptureError("%s: the capture library %s predates layer conventions (ABI minor %d; "
                               "ssmc_set_layer_convention needs 4); rebuild libssmcheck_capture" % (where, self.lib._name, self.minor))
        if not isinstance(layer, (int, np.integer)) or not 0 <= layer < len(self.layers):
            raise ValueError("%s: the trace has %d layers (add the layer first)" % (where, len(self.layers)))
        for name, value in conventions.items():
            self._check(self.lib.ssmc_set_layer_convention(self.t, int(layer), name.encode(), str(value).encode()))
        L = self.layers[layer]
        if self.by_name:  # the state shapes under the conventions, from the library
            self._describe(int(layer))
            return
        for key, field in (("h_engine_shape", b"h"), ("conv_engine_shape", b"conv")):
            dims = (ctypes.c_int64 * 4)()
            n = self.lib.ssmc_state_field_shape(self.t, int(layer), field, dims)
            if n < 0:
                raise CaptureError(self.lib.ssmc_last_error().decode())
            L[key] = tuple(dims[:n])

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

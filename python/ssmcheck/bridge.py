"""A Python class as ssmcheck's system under test (see __init__.py).

``run(args, backend)`` runs the ``ssmcheck`` executable; for ``--backend python:NAME`` ssmcheck
starts a host process of its own (``python -m ssmcheck.host``, host.py) that imports the class
and serves its calls: ssmcheck's plug-in table for hosted backends (plugin/hosted_plugin.cpp)
forwards every call of the C ABI to it, its arrays through shared memory; the answer goes back
the same way. So nothing the class does (an exit, os._exit, a crash, a hang, print) can end
ssmcheck or change its exit code: each is an error of the call it happened in. A Python exception
becomes an error of that call (a divergence, with the traceback in the report), and
``Refused(kind)`` a refusal of that kind. Wire format: plugin/host_wire.h.

The class (or a function taking the options text) must be importable by the host: defined at the
top level of a module or script (not inside a function). It is instantiated once per case. Its
methods:

    create_pool(layers: list[Layer], pool: Pool)
    alloc(min_capacity) -> slot
    release(slot)
    prefill(slot, inputs) -> outputs
    decode(slots, inputs) -> [outputs per entry]
    verify(slots, k, arm, inputs) -> [outputs per entry]          arm: "exact" or "wy"
    checkpoint(slot, is_async); commit(slot, n, k); rollback(slot, n, and_checkpoint)
    to_f16(slot); snapshot_save(slot, snap); snapshot_restore(slot, snap)
    export_state(slot) -> State

inputs: one dict per layer with float32 arrays x [rows][conv_dim] (channels Q | K | V),
a [rows][nv], b [rows][nv], z [rows][nv*vd]; decode and verify get one such list per entry
(slot -1 is a padding row). outputs: one array [rows][nv*vd] per layer. A class that declares
``mamba2 = True`` also gets Mamba-2 layers (Layer.kind "mamba2"): x is xBC [rows][nh*hp + 2*ng*ns]
(channels x | B | C), a is dt before dt_bias [rows][nh], b is None, z and outputs [rows][nh*hp],
h [nh][hp][ns]. A class that declares ``ple = True`` also gets layers hosting a PLE carry
(Layer.ple): their inputs add ple_tokens [rows] and ple_x [rows][C], their output is a pair
(output, PLE output [rows][C]), and LayerState carries ple, ple_checkpoint and ple_snapshots.
Class attributes:
``name`` (what it declares), ``own_legality`` (False: ssmcheck refuses illegal ops itself and
the class never sees one), ``bitwise`` (False: judged under the tolerance classes), and the
convention profile of what export_state returns (docs/plugins.md): ``conv_window`` ("d_conv",
or "d_conv-1" for causal_conv1d's state), ``h_layout`` ("nv,kd,vd", or "nv,vd,kd") and
``prefill_stage`` (False: no FP32 staging blob in f16-pool mode; the stage is not compared);
``field_digests`` (True: ssmcheck asks for a digest of each field of export_state's arrays, taken
where they live, and reads a state back only when one changed: field_digest.py; the bridge then
calls export_state on every slot it holds after each op and sends their digests with the op's
reply; by default on live states of 64 KiB and more, smaller ones are read back whole; ssmcheck's
environment variable SSMCHECK_FIELD_DIGESTS=on|off|auto overrides that, for a benchmark or to rule
them out); and
the numerics it computes, which the model it is checked on then uses: ``gates`` ("clamped", the
contract's, or "torch": softplus linear above 20, no clamps), ``f16_store`` ("saturate", the
contract's, or "inf": FP16 stores overflow to inf) and ``f16_rows`` ("stored", the contract's, or
"carried": with FP16 state the rows of one op carry it in FP32 and outputs read that).
"""
import json
import math
import mmap
import operator
import os
import socket
import struct
import subprocess
import sys
import traceback

import numpy as np

from . import locate
from .field_digest import Digester, is_f16, fields_reply, state_digests, states_digests

SSMP_OK, SSMP_REFUSED, SSMP_ERROR = 0, 1, 2
ABI_VERSION = 1


# The module name under which host.load_class imports a class given as "PATH.py:QUALNAME".
SUT_MODULE = "__ssmcheck_sut__"


class Refused(Exception):
    """The op breaks the contract: ``kind`` is an ssmcheck error kind ("capacity", ...)."""

    def __init__(self, kind, message=""):
        super().__init__(message or kind)
        self.kind = kind


def _geometry(desc):
    """(conv_dim, heads, out_dim, h_shape, state) of a layer description; heads is the width of a,
    state the shapes of the state's fields by their names in traces (h, conv; on a layer hosting a
    PLE carry ple_history and ple_conv). ssmcheck sends each layer's "geometry" as
    core/layer_geometry.cpp states it once; the formulas below serve only a description without it
    (built by hand, a class driven without ssmcheck: python/examples/write_trace.py) and the
    "state" member an ssmcheck from before it did not send."""
    g = desc.get("geometry")
    if g is not None:
        conv_dim, heads, out_dim, h_shape = g["conv_dim"], g["inputs"][1][1], g["out_dim"], tuple(g["h_shape"])
    elif desc["kind"] == "mamba2":
        conv_dim, heads, out_dim = desc["nh"] * desc["hp"] + 2 * desc["ng"] * desc["ns"], desc["nh"], desc["nh"] * desc["hp"]
        h_shape = (desc["nh"], desc["hp"], desc["ns"])
    else:
        conv_dim, heads, out_dim = 2 * desc["nk"] * desc["kd"] + desc["nv"] * desc["vd"], desc["nv"], desc["nv"] * desc["vd"]
        h_shape = (desc["nv"], desc["kd"], desc["vd"])
    if g is not None and "state" in g:
        state = {name: tuple(shape) for name, shape in g["state"].items()}
    else:
        state = dict(h=h_shape, conv=(conv_dim, desc["d_conv"]))
        if desc.get("ple"):
            state.update(_ple_shapes(desc["ple"]))
    return conv_dim, heads, out_dim, h_shape, state


def _ple_shapes(p):
    """The PLE carry's fields of a description without ssmcheck's geometry (see _geometry)."""
    return dict(ple_history=(p["ngram_size"] - 1,), ple_conv=((p["k_size"] - 1) * p["dilation"], p["channels"]))


def _weight_shapes(desc):
    """The weights of a layer description in the order ssmcheck sends them, as its geometry names
    them: [(name, shape)]."""
    return [(name, tuple(shape)) for name, shape in desc["geometry"]["weights"]]


class Layer:
    """One recurrent layer: geometry and FP32 weights (numpy arrays). kind "gdn": nk, nv, kd, vd,
    output_gate; kind "mamba2" (only for a class that declares ``mamba2 = True``): nh, hp, ns, ng,
    norm_before_gate, dt_min, dt_max (inf: none), D [nh]. Both: d_conv, eps, conv_dim, out_dim,
    heads (the width of a), h_shape, conv_w [conv_dim][d_conv], conv_bias (or None), A_log and
    dt_bias [heads], norm_w (GDN [vd], Mamba-2 [nh*hp]), ple (a Ple, or None); state_shapes, the
    shapes of the state's fields by their names in traces ({"h": ..., "conv": ..., on a layer
    hosting a PLE carry "ple_history" and "ple_conv"}; a field's checkpoint, intermediates and
    snapshots have its shape); geometry, what ssmcheck sent of it (None for a Layer built by hand)."""

    def __init__(self, desc, weights):
        self.kind = desc["kind"]
        self.d_conv = desc["d_conv"]
        self.eps = float(desc["eps"])
        self.geometry = desc.get("geometry")
        self.conv_dim, self.heads, self.out_dim, self.h_shape, self.state_shapes = _geometry(desc)
        if self.kind == "mamba2":
            self.nh, self.hp, self.ns, self.ng = desc["nh"], desc["hp"], desc["ns"], desc["ng"]
            self.norm_before_gate = bool(desc["norm_before_gate"])
            self.dt_min = float(desc["dt_min"])
            self.dt_max = float("inf") if desc["dt_max"] is None else float(desc["dt_max"])
            self.D = weights["D"]
        else:
            self.nk, self.nv, self.kd, self.vd = desc["nk"], desc["nv"], desc["kd"], desc["vd"]
            self.output_gate = desc["output_gate"]  # "silu" (out *= silu(z)) or "sigmoid"
        self.conv_w = weights["conv_w"].reshape(self.conv_dim, self.d_conv)
        self.conv_bias = weights.get("conv_bias")
        self.A_log, self.dt_bias, self.norm_w = weights["A_log"], weights["dt_bias"], weights["norm_w"]
        self.ple = Ple(desc["ple"], weights["ple_w"], self.state_shapes) if desc.get("ple") else None


class Ple:
    """The PLE carry a layer hosts (only for a class that declares ``ple = True``;
    docs/state-model.md "PLE carry"): channels C, ngram_size (the history keeps ngram_size-1 token
    ids), k_size and dilation of the conv (its state: conv_rows = (k_size-1)*dilation rows of C),
    eos_id, and the weight w [C][k_size]."""

    def __init__(self, d, w, state_shapes=None):
        self.channels, self.ngram_size = d["channels"], d["ngram_size"]
        self.k_size, self.dilation, self.eos_id = d["k_size"], d["dilation"], d["eos_id"]
        # the carry's fields as the layer's geometry names them (Layer.state_shapes)
        shapes = state_shapes or _ple_shapes(d)
        self.history_len, self.conv_rows = shapes["ple_history"][0], shapes["ple_conv"][0]
        self.w = w.reshape(self.channels, self.k_size)


class Pool:
    def __init__(self, d):
        self.h_mode = d["h_mode"]  # "f32", "f16" or "f16-pool"
        self.max_slots = d["max_slots"]
        self.h_capacity = list(d["h_capacity"])  # h intermediates of each slot
        self.conv_capacity = d["conv_capacity"]
        self.snapshot_slots = d["snapshot_slots"]


class LayerState:
    """The state of one layer of a slot. h-like fields are float32 or float16 arrays [nv][kd][vd];
    conv fields float32 [conv_dim][d_conv] (column 0 oldest). None / empty: the slot has none.
    A layer hosting a PLE carry: ple and ple_checkpoint are (history, conv) pairs or None (absent),
    ple_snapshots the last verify's (history, conv) after t of its rows, t = 0..K-1."""

    def __init__(self, h, conv, h_checkpoint=None, conv_checkpoint=None, h_intermediates=(),
                 conv_intermediates=(), ple=None, ple_checkpoint=None, ple_snapshots=()):
        self.h, self.conv = h, conv
        self.h_checkpoint, self.conv_checkpoint = h_checkpoint, conv_checkpoint
        self.h_intermediates, self.conv_intermediates = list(h_intermediates), list(conv_intermediates)
        self.ple, self.ple_checkpoint, self.ple_snapshots = ple, ple_checkpoint, list(ple_snapshots)


class State:
    def __init__(self, last_verify_k, layers, prefill_stage=None):
        self.last_verify_k = last_verify_k
        self.layers = layers
        self.prefill_stage = prefill_stage  # f16-pool: the FP32 staging blob


# --- wire format (plugin/host_wire.h) -------------------------------------------------------

_HEADER = struct.Struct("<QIIQ")  # json bytes, array count, 0, arena bytes
_PAIR = struct.Struct("<QQ")      # offset, bytes
_ALIGN = 64
# A frame's bounds, so that a confused peer cannot make the host allocate without limit: the same
# values as plugin/host_wire.h's wire::kMaxJson, kMaxArrays and kMaxArena (restated here: an
# installed package has no header to read; python/tests/test_bridge.py checks they agree).
MAX_JSON = 1 << 26      # kMaxJson: 64 MiB of JSON
MAX_ARRAYS = 1 << 22    # kMaxArrays
MAX_ARENA = 1 << 36     # kMaxArena: 64 GiB of arrays
# The doorbell page's word naming the slot the host exports after an op (host_wire.h's
# kBellExportingOffset: slot + 1 as a native int32, 0 otherwise), so that a crash or hang there is
# reported as one of export_state; restated like the bounds above.
BELL_EXPORTING_OFFSET = 64
# Integers in a reply travel into C ints (plugin/ssmcheck_plugin.h: a slot, last_verify_k).
INT_MIN, INT_MAX = -(1 << 31), (1 << 31) - 1


class _Channel:
    """The host's end: control frames on a socket, arrays in the shared arena file, and the
    doorbell page (bell_fd; only its exporting word: frames go through the socket)."""

    def __init__(self, sock_fd, arena_fd, bell_fd=None):
        self.sock = socket.socket(fileno=sock_fd)
        self.arena_fd = arena_fd
        self.mm = None
        self.size = 0
        self.bell = mmap.mmap(bell_fd, 4096) if bell_fd is not None else None
        self.pinned = None  # the arena's address while CUDA has it page-locked (_pin), 0: refused
        self.staging = {}   # device -> uint8 tensor there: a reply's tensors gathered for one copy

    def set_exporting(self, slot):
        """Names the slot whose state the host reads after an op (-1: none) in the doorbell page."""
        if self.bell is not None:
            struct.pack_into("=i", self.bell, BELL_EXPORTING_OFFSET, slot + 1)

    def _remap(self, n):
        self._unpin()
        self.mm, self.size = mmap.mmap(self.arena_fd, n), n

    def _pin(self):
        """Page-locks the arena's mapping for CUDA (once per mapping), so that a copy from a GPU
        goes straight into it instead of through the driver's staging; where CUDA refuses, copies
        take that way as before."""
        if self.pinned is not None or self.mm is None:
            return
        self.pinned = 0
        try:
            import ctypes
            import torch
            buf = ctypes.c_char.from_buffer(self.mm)
            addr = ctypes.addressof(buf)
            del buf  # the mapping may be replaced later: no export of it outlives this
            res = torch.cuda.cudart().cudaHostRegister(addr, self.size, 0)
            if int(getattr(res, "value", res)) == 0:
                self.pinned = addr
        except Exception:  # noqa: BLE001 - an optimisation: any failure leaves the copies as they were
            pass

    def _unpin(self):
        if self.pinned:
            import torch
            torch.cuda.cudart().cudaHostUnregister(self.pinned)
        self.pinned = None

    def _read(self, n, eof_ok=False):
        buf = bytearray(n)
        view, got = memoryview(buf), 0
        while got < n:
            r = self.sock.recv_into(view[got:], n - got)
            if r == 0:
                if eof_ok and got == 0:
                    return None
                raise EOFError("the channel closed in the middle of a frame")
            got += r
        return bytes(buf)

    def _map(self, n):
        if n > self.size:
            self._remap(n)

    def recv(self):
        """(request, arrays as bytes), or None when ssmcheck closed the channel."""
        head = self._read(_HEADER.size, eof_ok=True)
        if head is None:
            return None
        n, count, zero, arena = _HEADER.unpack(head)
        if n > MAX_JSON or count > MAX_ARRAYS or arena > MAX_ARENA or zero != 0:
            raise ValueError("ssmcheck sent a malformed frame header: %d bytes of JSON (at most %d), %d arrays (at most "
                             "%d), an arena of %d bytes (at most %d), reserved word %d (must be 0)"
                             % (n, MAX_JSON, count, MAX_ARRAYS, arena, MAX_ARENA, zero))
        body = self._read(n + count * _PAIR.size)
        self._map(arena)
        blobs = []
        for i in range(count):
            off, m = _PAIR.unpack_from(body, n + i * _PAIR.size)
            if off + m > self.size:
                raise ValueError("array %d lies outside the shared arena" % i)
            blobs.append(self.mm[off:off + m] if m else b"")
        return json.loads(body[:n].decode()), blobs

    def send(self, reply, arrays=()):
        """reply with its arrays (numpy arrays, bytes, or torch tensors: those are copied from their
        device straight into the arena, a GPU's gathered there first for one copy) placed in the arena."""
        views = [a.detach().contiguous() if hasattr(a, "detach") else
                 memoryview(np.ascontiguousarray(a)).cast("B") if isinstance(a, np.ndarray) else memoryview(a)
                 for a in arrays]
        at, end = [], 0
        for v in views:
            n = v.numel() * v.element_size() if hasattr(v, "detach") else v.nbytes
            at.append((end, n))
            end = (end + n + _ALIGN - 1) // _ALIGN * _ALIGN
        if end > self.size:
            grown = max(end, self.size + self.size // 2)
            os.ftruncate(self.arena_fd, grown)
            self._remap(grown)
        tensors = [(off, m, v) for (off, m), v in zip(at, views) if m and hasattr(v, "detach")]
        if tensors:  # first: a GPU's gathered span may cover the host arrays' places, written next
            self._place_tensors(tensors)
        for (off, m), v in zip(at, views):
            if m and not hasattr(v, "detach"):
                self.mm[off:off + m] = v
        text = json.dumps(reply).encode()
        parts = [_HEADER.pack(len(text), len(at), 0, self.size), text] + [_PAIR.pack(o, m) for o, m in at]
        self.sock.sendall(b"".join(parts))

    def _place_tensors(self, tensors):
        """Copies torch tensors [(offset, bytes, tensor)] into the arena: those of one GPU gathered
        into a buffer there at their offsets and copied back in one piece (one wait for the device
        instead of one per tensor), into the page-locked arena where CUDA allows it."""
        import torch
        by_device = {}
        for item in tensors:
            by_device.setdefault(item[2].device, []).append(item)
        for device, items in by_device.items():
            if device.type == "cuda":
                self._pin()
            if device.type != "cuda" or len(items) == 1:
                for off, m, t in items:
                    _place_tensor_into(self.mm, off, m, t)
                continue
            lo, hi = min(i[0] for i in items), max(i[0] + i[1] for i in items)
            stage = self.staging.get(device)
            if stage is None or stage.numel() < hi - lo:
                stage = self.staging[device] = torch.empty(max(hi - lo, (stage.numel() * 3 // 2) if stage is not None else 0),
                                                           dtype=torch.uint8, device=device)
            for off, m, t in items:
                stage[off - lo:off - lo + m].copy_(t.reshape(-1).view(torch.uint8))
            _place_tensor_into(self.mm, lo, hi - lo, stage[:hi - lo])


def _place_tensor_into(mm, off, m, t):
    """Copies torch tensor t (m bytes, on any device) to mm[off:off + m]: straight from its device
    into the mapping, or, where torch cannot view the mapping, through a host copy."""
    import torch
    src = t.detach().contiguous().reshape(-1)
    try:
        torch.frombuffer(mm, dtype=torch.uint8, count=m, offset=off).copy_(src.view(torch.uint8))
    except (TypeError, ValueError, RuntimeError, BufferError):
        mm[off:off + m] = memoryview(np.ascontiguousarray(src.cpu().numpy())).cast("B")


def _numpy(x, dtype=None):
    """A C-contiguous numpy array of x (numpy, torch tensor, list)."""
    if hasattr(x, "detach"):  # a torch tensor, wherever it lives
        x = x.detach().cpu().numpy()
    a = np.ascontiguousarray(x)
    return a.astype(dtype) if dtype is not None and a.dtype != dtype else a


def _real(x, what, dtype=None):
    """_numpy(x, dtype) for an array the class returned, refused (ValueError naming ``what``)
    unless its dtype is real: floating or integer. A complex array would lose its imaginary part
    in the cast, an object or bool array means something else went wrong."""
    a = _numpy(x)
    if a.dtype.kind not in "fiu":
        raise ValueError("%s has dtype %s; expected real numbers (float32%s)"
                         % (what, a.dtype, ", float16" if dtype is None else ""))
    return a.astype(dtype) if dtype is not None and a.dtype != dtype else a


def _real_kept(x, what, dtype=None):
    """An array the class returned, for the reply: as float32 (dtype np.float32), or float32 or
    float16 as it is (dtype None: anything else becomes float32). A torch tensor stays where it is
    (send copies it from its device, a GPU's in one piece per reply), anything else becomes a numpy
    array; refused (ValueError naming ``what``) unless its dtype is real, as _real."""
    if hasattr(x, "detach") and hasattr(x, "is_complex"):
        if x.is_complex() or not (x.is_floating_point() or "int" in str(x.dtype)):
            raise ValueError("%s has dtype %s; expected real numbers (float32%s)" % (what, x.dtype, ", float16" if dtype is None else ""))
        keep = ("torch.float32",) if dtype is not None else ("torch.float32", "torch.float16")
        return x.detach() if str(x.dtype) in keep else x.detach().float()
    a = _real(x, what, dtype)
    return a if a.dtype in (np.float32, np.float16) else a.astype(np.float32)


def _shape(a):
    """The shape of a numpy array or torch tensor, as a tuple."""
    return tuple(a.shape)


def _numel(a):
    return int(np.prod(_shape(a), dtype=np.int64))


def _int_reply(value, call, what):
    """An integer the class returned, for a C int of the reply: refused (ValueError naming the
    call and the value) if it is not an integer or does not fit, never truncated."""
    try:
        if isinstance(value, (bool, np.bool_)):
            raise TypeError("a bool")
        v = operator.index(value)  # int, numpy integers, an integer torch scalar
    except TypeError:
        if not (isinstance(value, (float, np.floating)) and math.isfinite(value) and float(value).is_integer()):
            raise ValueError("%s returned %s %r (%s), expected an integer" % (call, what, value, type(value).__name__))
        v = int(value)
    if not INT_MIN <= v <= INT_MAX:
        raise ValueError("%s returned %s %d, which does not fit the wire's 32-bit int (%d..%d)" % (call, what, v, INT_MIN, INT_MAX))
    return v


def _floats(blob, shape):
    return np.frombuffer(blob, dtype=np.float32).reshape(shape)


def _inputs(layers, blobs, rows, entries):
    """Blobs x, a, b, z per entry and layer -> [entry][layer] dicts (b None for Mamba-2)."""
    out, i = [], 0
    for _ in range(entries):
        per = []
        for L in layers:
            b = None if L.kind == "mamba2" else _floats(blobs[i + 2], (rows, L.heads))
            d = dict(x=_floats(blobs[i], (rows, L.conv_dim)), a=_floats(blobs[i + 1], (rows, L.heads)),
                     b=b, z=_floats(blobs[i + 3], (rows, L.out_dim)))
            i += 4
            if L.ple is not None:  # token ids (integers in float32) and the PLE rows
                d["ple_tokens"], d["ple_x"] = _floats(blobs[i], (rows,)), _floats(blobs[i + 1], (rows, L.ple.channels))
                i += 2
            per.append(d)
        out.append(per)
    return out


def _outputs(layers, outs, rows, what):
    """One array [rows][out_dim] per layer; a layer hosting a PLE carry gives a pair (output,
    PLE output [rows][C])."""
    if len(outs) != len(layers):
        raise ValueError("%s returned %d output arrays for %d layers" % (what, len(outs), len(layers)))
    blobs = []
    for l, (L, o) in enumerate(zip(layers, outs)):
        pairs = [(o, L.out_dim, "output")]
        if L.ple is not None:
            if not isinstance(o, (tuple, list)) or len(o) != 2:
                raise ValueError("%s: layer %d hosts a PLE carry: its output must be a pair (output, PLE output)" % (what, l))
            pairs = [(o[0], L.out_dim, "output"), (o[1], L.ple.channels, "PLE output")]
        for x, width, name in pairs:
            a = _real_kept(x, "%s: %s of layer %d" % (what, name, l), np.float32)
            if _numel(a) != rows * width:
                raise ValueError("%s: %s of layer %d has shape %s, expected (%d, %d)" % (what, name, l, tuple(a.shape), rows, width))
            blobs.append(a)
    return blobs


def _state_reply(layers, st, conv_window="d_conv", h_layout="nv,kd,vd"):
    """export_state's reply: fields in JSON, arrays in the order hosted_plugin.cpp reads them, in
    the class's convention profile (checked here: a shape that does not match it is an error)."""
    if len(st.layers) != len(layers):
        raise ValueError("export_state returned %d layers, the model has %d" % (len(st.layers), len(layers)))
    js, blobs = [], []

    def h_like(x, l, name):
        a = _real_kept(x, "export_state: layer %d %s" % (l, name))
        L = layers[l]
        h = tuple(L.state_shapes["h"])
        want = (h[0], h[2], h[1]) if h_layout == "nv,vd,kd" else h
        if _shape(a) != want and not (len(_shape(a)) == 1 and _numel(a) == int(np.prod(want))):
            raise ValueError("export_state: layer %d %s has shape %s, expected %s (h_layout %s)" % (l, name, _shape(a), want, h_layout))
        blobs.append(a)
        return is_f16(a)

    def conv_like(x, l, name):
        a = _real_kept(x, "export_state: layer %d %s" % (l, name), np.float32)
        L = layers[l]
        rows, cols = L.state_shapes["conv"]
        want = (rows, cols - (1 if conv_window == "d_conv-1" else 0))
        if _shape(a) != want and not (len(_shape(a)) == 1 and _numel(a) == want[0] * want[1]):
            raise ValueError("export_state: layer %d %s has shape %s, expected %s (conv_window %s)" % (l, name, _shape(a), want, conv_window))
        blobs.append(a)

    for l, s in enumerate(st.layers):
        j = {}
        j["h_is_f16"] = h_like(s.h, l, "h")
        conv_like(s.conv, l, "conv")
        j["has_h_checkpoint"] = s.h_checkpoint is not None
        if s.h_checkpoint is not None:
            j["h_checkpoint_is_f16"] = h_like(s.h_checkpoint, l, "h_checkpoint")
        j["has_conv_checkpoint"] = s.conv_checkpoint is not None
        if s.conv_checkpoint is not None:
            conv_like(s.conv_checkpoint, l, "conv_checkpoint")
        j["n_h_intermediates"] = len(s.h_intermediates)
        f16 = [h_like(x, l, "h_intermediate %d" % t) for t, x in enumerate(s.h_intermediates)]
        j["h_intermediates_are_f16"] = bool(f16 and f16[0])
        j["n_conv_intermediates"] = len(s.conv_intermediates)
        for t, x in enumerate(s.conv_intermediates):
            conv_like(x, l, "conv_intermediate %d" % t)
        P = layers[l].ple
        if P is not None:  # live, checkpoint, snapshots: each its history, then its conv
            def carry(c, name):
                shapes = layers[l].state_shapes
                for x, shape, part in ((c[0], shapes["ple_history"], "history"), (c[1], shapes["ple_conv"], "conv")):
                    a = _real_kept(x, "export_state: layer %d %s %s" % (l, name, part), np.float32)
                    if _numel(a) != int(np.prod(shape)):
                        raise ValueError("export_state: layer %d %s %s has shape %s, expected %s" % (l, name, part, _shape(a), shape))
                    blobs.append(a)
            j["ple"] = dict(has_live=s.ple is not None, has_checkpoint=s.ple_checkpoint is not None,
                            n_snapshots=len(s.ple_snapshots))
            if s.ple is not None:
                carry(s.ple, "ple")
            if s.ple_checkpoint is not None:
                carry(s.ple_checkpoint, "ple_checkpoint")
            for t, c in enumerate(s.ple_snapshots):
                carry(c, "ple_snapshot %d" % t)
        js.append(j)
    reply = dict(status=SSMP_OK, last_verify_k=_int_reply(st.last_verify_k, "export_state", "last_verify_k"), layers=js,
                 has_prefill_stage=st.prefill_stage is not None)
    if st.prefill_stage is not None:
        blobs.append(_real_kept(st.prefill_stage, "export_state: prefill_stage", np.float32))
    return reply, blobs


class _AfterOp(Exception):
    """An error of the class's export_state while the bridge digested the slots after an op
    (``digests_after``): ``what`` names that call, __cause__ is the error."""

    def __init__(self, what):
        super().__init__(what)
        self.what = what


# The calls ssmcheck may ask to send the field digests of every claimed slot with their reply
# ("digests_after": plugin/hosted_plugin.cpp, exchange_op): the ops, which may change a slot.
OPS = frozenset(("alloc", "release", "prefill", "decode", "verify", "checkpoint", "commit", "rollback", "to_f16",
                 "snapshot_save", "snapshot_restore"))


class _Server:
    def __init__(self, backend):
        self.backend = backend
        self.instances = {}  # id -> [object, layers, claimed slots]
        self.next_id = 1
        self.digester = Digester()
        self.exporting = lambda slot: None  # names the slot being read after an op (serve sets it)

    def digests_after(self, call, obj, claimed):
        """The field digests of every claimed slot after op ``call``: [[slot, fields, rest], ...],
        each as field_digests answers; all slots' fields digested at once (one wait for a GPU)."""
        slots, states = sorted(claimed), []
        for slot in slots:
            self.exporting(slot)
            try:
                states.append(obj.export_state(slot))
            except Exception as e:
                raise _AfterOp("export_state(slot %d), sent with the reply of %s" % (slot, call)) from e
            finally:
                self.exporting(-1)
        return [[slot, fields, rest] for slot, (fields, rest) in zip(slots, states_digests(states, self.digester))]

    def declared(self):
        b = self.backend
        name = getattr(b, "name", None) or getattr(b, "__name__", "python")
        return dict(status=SSMP_OK, name=str(name), own_legality=bool(getattr(b, "own_legality", False)),
                    bitwise=bool(getattr(b, "bitwise", False)), conv_window=getattr(b, "conv_window", "d_conv"),
                    h_layout=getattr(b, "h_layout", "nv,kd,vd"), prefill_stage=bool(getattr(b, "prefill_stage", True)),
                    gates=getattr(b, "gates", "clamped"), f16_store=getattr(b, "f16_store", "saturate"),
                    f16_rows=getattr(b, "f16_rows", "stored"), mamba2=bool(getattr(b, "mamba2", False)),
                    ple=bool(getattr(b, "ple", False)), capabilities=self.capabilities(),
                    perturbable=callable(getattr(b, "perturb_schedule", None)),
                    field_digests=bool(getattr(b, "field_digests", False)))

    # What the class runs (docs/plugins.md, "Capabilities"; plugin/capabilities_wire.h reads it and
    # refuses a wrong value by name): the attributes it sets among these, the rest run everything.
    CAPABILITIES = ("h_modes", "checkpoint_async", "rollback_and_checkpoint_async", "snapshots", "verify_arms",
                    "pad_rows", "max_batch", "max_verify_k", "max_slots")

    def capabilities(self):
        caps = {}
        for name in self.CAPABILITIES:
            if not hasattr(self.backend, name):
                continue
            v = getattr(self.backend, name)
            caps[name] = list(v) if isinstance(v, (tuple, list, set, frozenset)) else v
        return caps

    def handle(self, req, blobs):
        call = req["call"]
        if call == "hello":
            if req.get("abi") != ABI_VERSION:
                return dict(status=SSMP_ERROR, message="this bridge speaks plug-in ABI %d, ssmcheck %s" % (ABI_VERSION, req.get("abi"))), []
            return self.declared(), []
        if call == "create":
            obj = self.backend(req["options"]) if req["options"] else self.backend()
            i = self.next_id
            self.next_id += 1
            self.instances[i] = [obj, [], set()]
            return dict(status=SSMP_OK, instance=i), []
        inst = self.instances[req["instance"]]
        obj = inst[0]
        if call == "destroy":
            del self.instances[req["instance"]]
            return dict(status=SSMP_OK), []
        if call == "create_pool":
            layers, i = [], 0
            for d in req["layers"]:
                w = {}
                for name, shape in _weight_shapes(d):
                    w[name] = _floats(blobs[i], shape).copy()
                    i += 1
                layers.append(Layer(d, w))
            obj.create_pool(layers, Pool(req))
            inst[1], inst[2] = layers, set()
            return dict(status=SSMP_OK), []
        reply, arrays = self.handle_state(call, req, blobs, obj, inst[1], inst[2])
        if req.get("digests_after") and call in OPS:  # the op succeeded (an error raised before)
            reply["digests"] = self.digests_after(call, obj, inst[2])
        return reply, arrays

    def handle_state(self, call, req, blobs, obj, layers, claimed):
        """The calls on a pool: ops, exports and digests."""
        if call == "alloc":
            slot = _int_reply(obj.alloc(req["min_capacity"]), "alloc", "slot")
            claimed.add(slot)
            return dict(status=SSMP_OK, slot=slot), []
        if call == "prefill":
            rows = req["rows"]
            outs = obj.prefill(req["slot"], _inputs(layers, blobs, rows, 1)[0])
            return dict(status=SSMP_OK), _outputs(layers, outs, rows, "prefill")
        if call in ("decode", "verify"):
            slots = req["slots"]
            rows = 1 if call == "decode" else req["k"]
            ins = _inputs(layers, blobs, rows, len(slots))
            outs = obj.decode(slots, ins) if call == "decode" else obj.verify(slots, req["k"], req["arm"], ins)
            if len(outs) != len(slots):
                raise ValueError("%s returned outputs for %d entries, expected %d" % (call, len(outs), len(slots)))
            return dict(status=SSMP_OK), [b for o in outs for b in _outputs(layers, o, rows, call)]
        if call == "perturb_schedule":  # optional (docs/plugins.md): a falsy return means "not offered"
            on = obj.perturb_schedule(req["seed"])
            return dict(status=SSMP_OK, on=0 if on is False else 1), []
        if call == "field_digests":  # only for a class that sets field_digests = True (field_digest.py)
            fields, rest = state_digests(obj.export_state(req["slot"]), self.digester)
            return dict(status=SSMP_OK, fields=fields, rest=rest), []
        if call == "export_fields":  # the fields whose digest changed, after field_digests
            st = obj.export_state(req["slot"])
            answers, arrays = fields_reply(st, req["fields"], _real_kept)
            return dict(status=SSMP_OK, fields=answers, last_verify_k=_int_reply(st.last_verify_k, "export_state", "last_verify_k")), arrays
        if call == "export_state":
            return _state_reply(layers, obj.export_state(req["slot"]), getattr(self.backend, "conv_window", "d_conv"),
                                getattr(self.backend, "h_layout", "nv,kd,vd"))
        simple = dict(release=lambda: obj.release(req["slot"]),
                      checkpoint=lambda: obj.checkpoint(req["slot"], req["async"]),
                      commit=lambda: obj.commit(req["slot"], req["n"], req["k"]),
                      rollback=lambda: obj.rollback(req["slot"], req["n"], req["and_checkpoint"]),
                      to_f16=lambda: obj.to_f16(req["slot"]),
                      snapshot_save=lambda: obj.snapshot_save(req["slot"], req["snap"]),
                      snapshot_restore=lambda: obj.snapshot_restore(req["slot"], req["snap"]))
        if call not in simple:
            return dict(status=SSMP_ERROR, message="the bridge does not know the call '%s'" % call), []
        simple[call]()
        if call == "release":
            claimed.discard(req["slot"])
        return dict(status=SSMP_OK), []

    def serve(self, channel):
        self.exporting = channel.set_exporting
        while True:
            msg = channel.recv()
            if msg is None:
                return
            req, blobs = msg
            try:
                reply, out = self.handle(req, blobs)
            except Refused as e:
                reply, out = dict(status=SSMP_REFUSED, kind=e.kind, message="python: " + str(e)), []
            except _AfterOp as a:  # the op ran; reading a slot after it failed: named as that call
                e = a.__cause__
                reply, out = dict(status=SSMP_ERROR, message="python %s: %s: %s (%s)" % (a.what, type(e).__name__, e, _where(e))), []
            except Exception as e:  # every error of the class is an error of this call, with where it happened
                reply, out = dict(status=SSMP_ERROR, message="python %s: %s: %s (%s)" % (req.get("call"), type(e).__name__, e, _where(e))), []
            channel.send(reply, out)


def _where(e):
    """Where exception e happened: the last two frames of its traceback, one line."""
    tb = "".join(traceback.format_exception(type(e), e, e.__traceback__, limit=4)).strip().splitlines()
    return " | ".join(line.strip() for line in tb[1:-1][-2:])


def find_ssmcheck(explicit=None):
    """The ssmcheck executable: explicit, $SSMCHECK, on PATH, or in the install prefix (locate.py
    has the order; its error names every place looked at)."""
    return locate.find_ssmcheck(explicit)


def class_spec(backend):
    """"MODULE:QUALNAME" or "PATH.py:QUALNAME": how the host process imports ``backend``."""
    qual = getattr(backend, "__qualname__", None)
    module = getattr(backend, "__module__", None)
    if not qual or not module or "<" in qual:
        raise TypeError("ssmcheck.run: %r cannot be imported by the host process: define the class (or a "
                        "function taking the options text) at the top level of a module or script" % (backend,))
    if module == SUT_MODULE:  # loaded from a file by host.load_class (a rerun line): that file again
        return "%s:%s" % (os.path.abspath(sys.modules[module].__file__), qual)
    if module == "__main__":
        main = sys.modules["__main__"]
        spec = getattr(main, "__spec__", None)
        if spec is not None and spec.name:  # python -m package.module
            module = spec.name
        elif getattr(main, "__file__", None):
            return "%s:%s" % (os.path.abspath(main.__file__), qual)
        else:
            raise TypeError("ssmcheck.run: %s is defined in an interactive session; define it in a file" % qual)
    return "%s:%s" % (module, qual)


def run(args, backend, ssmcheck=None, stdout=None, stderr=None):
    """Runs ``ssmcheck ARGS`` with ``backend`` (a class, or a function taking the options text,
    defined at the top level of a module or script) serving ``--backend python:NAME``; returns
    ssmcheck's exit code (0 ok, 1 diverged, 2 bad input, 5 nothing checked). ssmcheck runs the
    class in a host process it starts (``python -m ssmcheck.host``), so nothing the class does
    changes that code. Output goes to this process's stdout and stderr, or to the files given
    (as subprocess.Popen takes them); the class's own output is kept apart (shown in the report
    of a call that failed)."""
    exe = find_ssmcheck(ssmcheck)
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = [package_root] + [p if p else os.getcwd() for p in sys.path]
    env = dict(os.environ, SSMCHECK_PYTHON_HOST=json.dumps([sys.executable, "-m", "ssmcheck.host"]),
               SSMCHECK_PYTHON_CLASS=class_spec(backend), SSMCHECK_PYTHON_PATH=json.dumps(path),
               PYTHONPATH=os.pathsep.join([package_root] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    return subprocess.call([exe] + [str(a) for a in args], env=env, stdout=stdout, stderr=stderr)

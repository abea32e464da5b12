"""What the adapters of third-party GDN kernels share: importing the peer's code, options, the
slot policy of the contract, the contract's gates and output norm in torch, and the command line.

The adapters run on a GPU with torch; nothing here is imported by ssmcheck's CPU tests.
"""
import functools
import importlib
import os
import sys

import numpy as np


def import_peer(module, env, what):
    """``module`` from an installed package, or from the directory named by $``env`` (put first
    on sys.path). The error says which package and which variable."""
    path = os.environ.get(env)
    if path:
        if not os.path.isdir(path):
            raise ImportError("%s=%s is not a directory" % (env, path))
        if path not in sys.path:
            sys.path.insert(0, path)
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise ImportError("%s: cannot import %s (%s); install it, or set %s to a directory that holds it "
                          "(docs/plugins.md, 'Third-party kernels')" % (what, module, e, env)) from e


@functools.lru_cache(maxsize=None)  # once per process and device
def warm_up(torch, device):
    """What an engine pays once, at its start, paid when the adapter is constructed instead of at
    its first op: CUDA's context and torch's allocator on ``device`` (0.3 s on an H100 machine),
    and Triton's cache key (a hash of Triton's own sources, 0.42 s, computed at the first kernel
    launch of a process). ssmcheck constructs the class once before a campaign's first case
    (torch's and the peer's imports happen there too), so the campaign's time is the kernels' and
    not this. Triton's part is skipped where Triton (or this function of it) is absent."""
    if device.type == "cuda":
        torch.zeros(1, device=device)
    try:
        from triton.runtime.cache import triton_key
    except ImportError:
        return
    triton_key()


def parse_options(text, allowed):
    """'key=value,key=value' -> dict; a key not in ``allowed`` (a dict of key -> accepted values or
    None for any) is an error naming the keys it knows."""
    out = {}
    for kv in (text or "").split(","):
        if not kv:
            continue
        if "=" not in kv:
            raise ValueError("option '%s' is not key=value" % kv)
        k, v = kv.split("=", 1)
        if k not in allowed:
            raise ValueError("unknown option '%s' (known: %s)" % (k, ", ".join(sorted(allowed))))
        if allowed[k] is not None and v not in allowed[k]:
            raise ValueError("option %s=%s: expected one of %s" % (k, v, ", ".join(allowed[k])))
        out[k] = v
    return out


class SlotPolicy:
    """The contract's allocation: the smallest free slot with at least ``min_capacity`` h
    intermediates, the lowest index among equals (docs/state-model.md, 'Transitions')."""

    def __init__(self, capacities):
        self.capacities = list(capacities)
        self.claimed = [False] * len(self.capacities)

    def alloc(self, min_capacity):
        free = [i for i, c in enumerate(self.capacities) if not self.claimed[i] and c >= min_capacity]
        if not free:
            raise RuntimeError("no free slot with capacity %d (ssmcheck should have refused this op)" % min_capacity)
        slot = min(free, key=lambda i: (self.capacities[i], i))
        self.claimed[slot] = True
        return slot

    def release(self, slot):
        self.claimed[slot] = False


class SpecSlots:
    """vLLM's spec-decode state slots, as both of its recurrent kernels read them
    (``fused_recurrent_gated_delta_rule``, ``selective_state_update``): a row of state indices
    with ``num_accepted_tokens`` n starts from the state in column n - 1 and writes the state after
    row t to column t. Each contract slot s owns M + 1 row slots (the state after draft t in row
    slot t; M = num_spec, the most drafts a verify carries) and a home slot, where a decode or
    prefill that starts from an accepted draft writes (glue: the last verify's intermediates stay
    readable until the next verify, as the contract promises). ``live``: the row slot holding the
    sequence's state, or -1 for its home slot."""

    def __init__(self, capacities):
        self.M = max(list(capacities) + [0])
        self.per = self.M + 2  # pool slots per contract slot

    def count(self, max_slots):
        return max_slots * self.per

    def range(self, s):
        return slice(s * self.per, (s + 1) * self.per)

    def row(self, s, t):
        return s * self.per + t

    def home(self, s):
        return s * self.per + self.M + 1

    def phys(self, s, live):
        return self.home(s) if live < 0 else self.row(s, live)

    def prefill(self, s, live, T):
        """T rows from the live state, every row's state to home: (indices, num_accepted)."""
        return [self.home(s)] * T + [self.phys(s, live)], T + 1

    def from_draft(self, s, live):
        """One row from an accepted draft's slot to home: (indices, num_accepted)."""
        return [self.home(s), self.phys(s, live)], 2

    def verify(self, s, live):
        """K <= M + 1 rows from the live state, row t's state to row slot t: (indices, num_accepted)."""
        return [self.row(s, t) for t in range(self.M + 1)] + [self.home(s)], live + 1 if live >= 0 else self.M + 2


def contract_gates(torch, A_log, dt_bias, a, b):
    """The contract's gates in FP64 (docs/state-model.md, 'One token', step 2), returned as the
    log-space decay and beta the kernels take: g = clamp(exp(-exp(min(A_log, 20)) *
    softplus(min(a + dt_bias, 20))), 1e-6, 1 - 1e-6), beta = sigmoid(b). a, b: [rows, nv]; the
    weights A_log, dt_bias [nv] on the same device (host_contract_gates: on the host)."""
    x = a.double() + dt_bias.double()
    dt = torch.log1p(torch.exp(torch.clamp(x, max=20.0)))
    A = torch.exp(torch.clamp(A_log.double(), max=20.0))
    g = torch.clamp(torch.exp(-A * dt), 1e-6, 1.0 - 1e-6)
    return torch.log(g).float(), torch.sigmoid(b.double()).float()


def host_contract_gates(torch, L):
    """contract_gates of layer L on the host, as a function of numpy a, b (the inputs as ssmcheck
    sent them) giving numpy g, beta, for stack_inputs: for the few rows of an op, a dozen torch
    calls on the CPU cost less than launching them on the device (measured 0.6 ms a layer and op
    there, H100)."""
    A_log, dt_bias = torch.from_numpy(L.A_log), torch.from_numpy(L.dt_bias)
    return lambda a, b: tuple(t.numpy() for t in contract_gates(torch, A_log, dt_bias, torch.from_numpy(a),
                                                                   torch.from_numpy(b)))


def gated_rms_norm(torch, L, o, z):
    """The contract's output (step 4): o [rows, nv, vd] FP32 -> o / sqrt(mean(o^2) + eps) *
    norm_w * gate(z) per value head, [rows, nv*vd]."""
    rows = o.shape[0]
    o = o.float()
    r = torch.rsqrt((o * o).mean(dim=-1, keepdim=True) + L.eps)
    zz = z.view(rows, L.nv, L.vd)
    gate = torch.nn.functional.silu(zz) if L.output_gate == "silu" else torch.sigmoid(zz)
    return (o * r * L.t_norm_w * gate).reshape(rows, L.out_dim)


def to_device(torch, layers, device):
    """Copies every layer's weights to the device once (attributes t_conv_w, t_conv_bias, t_A_log,
    t_dt_bias, t_norm_w)."""
    for L in layers:
        L.t_conv_w = torch.from_numpy(L.conv_w.copy()).to(device).contiguous()  # [conv_dim][d_conv]
        L.t_conv_bias = None if L.conv_bias is None else torch.from_numpy(L.conv_bias.copy()).to(device)
        L.t_A_log = torch.from_numpy(L.A_log.copy()).to(device)
        L.t_dt_bias = torch.from_numpy(L.dt_bias.copy()).to(device)
        L.t_norm_w = torch.from_numpy(L.norm_w.copy()).to(device)


def stack_inputs(torch, device, per_entry, l, gates=None):
    """Layer l's inputs of several entries, stacked row after row: x [N*T, conv_dim], a, b
    [N*T, nv], z [N*T, nv*vd] on the device; with ``gates`` (host_contract_gates) also the
    contract's g and beta [N*T, nv], computed on the host. All in one copy to the device."""
    arrays = [np.concatenate([e[l][key] for e in per_entry], axis=0) for key in ("x", "a", "b", "z")]
    if gates is not None:
        arrays += list(gates(arrays[1], arrays[2]))
    return to_device_at_once(torch, device, arrays)


def to_device_at_once(torch, device, arrays):
    """FP32 numpy arrays -> tensors of their shapes on ``device`` from one host-to-device copy
    (every copy waits for the device): one buffer, each array at an offset of a multiple of 64
    bytes (Triton specialises a kernel on its pointers' alignment)."""
    at, end = [], 0
    for a in arrays:
        at.append(end)
        end += (a.size + 15) // 16 * 16
    buf = np.empty(end, np.float32)
    for off, a in zip(at, arrays):
        buf[off:off + a.size] = a.reshape(-1)
    dev = torch.from_numpy(buf).to(device)
    return [dev[off:off + a.size].view(a.shape) for off, a in zip(at, arrays)]


def main(cls, default_name):
    """``python3 -m ssmcheck.adapters.NAME SSMCHECK SUBCOMMAND [ARGS...]``: runs ssmcheck with this
    adapter as ``--backend python:NAME`` (added when ARGS name no backend)."""
    from ..bridge import run
    if len(sys.argv) < 3:
        sys.exit("usage: python3 -m ssmcheck.adapters.%s SSMCHECK SUBCOMMAND [ARGS...] "
                 "(--backend python:%s is added; python:%s,key=value passes options)"
                 % (default_name, default_name, default_name))
    args = sys.argv[2:]
    if "--backend" not in args:
        args += ["--backend", "python:" + default_name]
    sys.exit(run(args, cls, ssmcheck=sys.argv[1]))

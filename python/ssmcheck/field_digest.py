"""Field digests of a Python class's exported state (the plug-in ABI's ``field_digests``,
plugin/ssmcheck_plugin.h; docs/plugins.md "Field digests").

A class that sets ``field_digests = True`` lets ssmcheck ask, after every op, for a 64-bit digest of
each field of a slot's state instead of its bytes: the bridge calls ``export_state(slot)`` and
digests each array where it lives (a torch tensor on its device, a numpy array on the host), and
ssmcheck reads the state back only when a digest changed. On a GPU engine, where an op touches a
few of the live sequences and one export is tens of megabytes, that is most of what crossing to
the host cost.

The digest of a field of n words x_i (its bits as int32, or int16 for an FP16 field) is
sum_i x_i * w_i mod 2^64, with w_i odd 64-bit constants (splitmix64 of i, so the same for every
field, device and run). A change of one word always changes it (x_i differs by less than 2^32 and
w_i is odd, so the difference times w_i is not 0 mod 2^64); a change of several words leaves it
equal only when the weighted sum of the differences is 0 mod 2^64, which for these weights is a
chance of about 2^-32 or less per comparison. A sum is one pass over the field: on a GPU it
costs a few kernel launches per group of fields of one size, and one copy of the digests back.
"""
import numpy as np

_MASK = (1 << 64) - 1


def _weights(n):
    """w_0..w_{n-1}: splitmix64(i) | 1 as int64 (numpy; uint64 arithmetic wraps by definition)."""
    z = np.arange(n, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(0x2545F4914F6CDD1D)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z = z ^ (z >> np.uint64(31))
    return (z | np.uint64(1)).view(np.int64)


def named_fields(state):
    """(name, layer, index, array) of every field a State holds, named as the ABI names them."""
    for l, s in enumerate(state.layers):
        yield "h", l, 0, s.h
        yield "conv", l, 0, s.conv
        if s.h_checkpoint is not None:
            yield "h_checkpoint", l, 0, s.h_checkpoint
        if s.conv_checkpoint is not None:
            yield "conv_checkpoint", l, 0, s.conv_checkpoint
        for t, x in enumerate(s.h_intermediates):
            yield "h_intermediate", l, t, x
        for t, x in enumerate(s.conv_intermediates):
            yield "conv_intermediate", l, t, x
        carries = [("", 0, s.ple)] if s.ple is not None else []
        if s.ple_checkpoint is not None:
            carries.append(("_checkpoint", 0, s.ple_checkpoint))
        carries += [("_snapshot", t, c) for t, c in enumerate(s.ple_snapshots)]
        for suffix, t, c in carries:
            yield "ple_history" + suffix, l, t, c[0]
            yield "ple_conv" + suffix, l, t, c[1]
    if state.prefill_stage is not None:
        yield "h_prefill_stage", -1, 0, state.prefill_stage


def is_f16(x):
    """Whether x (a numpy array or torch tensor) holds float16."""
    return str(x.dtype) in ("float16", "torch.float16")


class Digester:
    """Digests arrays with the weights above, kept per device (torch) or on the host (numpy)."""

    def __init__(self):
        self._host = np.zeros(0, np.int64)
        self._device = {}  # torch device -> int64 weights there

    def _host_weights(self, n):
        if n > self._host.size:
            self._host = _weights(max(n, 2 * self._host.size))
        return self._host[:n]

    def _words_np(self, a):
        """The words of a numpy array as the bridge sends it: float16 as it is, anything else as float32."""
        a = np.ascontiguousarray(a).reshape(-1)
        if a.dtype != np.float16:
            a = a.astype(np.float32, copy=False)
        return a.view(np.int16 if a.dtype == np.float16 else np.int32).astype(np.int64)

    def digests(self, arrays):
        """One int (0..2^64-1) per array, in order."""
        arrays = list(arrays)
        out = [None] * len(arrays)
        groups = {}  # (device, words): indices of torch tensors with that many words there
        for i, a in enumerate(arrays):
            if hasattr(a, "detach"):
                if str(a.dtype) not in ("torch.float32", "torch.float16"):  # as the bridge sends it: float32 (float16 stays)
                    arrays[i] = a = a.float()
                groups.setdefault((a.device, a.numel(), a.element_size()), []).append(i)
            else:
                x = self._words_np(a)
                out[i] = int(np.sum(x * self._host_weights(x.size), dtype=np.int64)) & _MASK
        if not groups:
            return out
        import torch
        sums = {}  # device -> [(indices, their sums there)]: copied back once per device
        for (device, n, size), idx in groups.items():
            word = torch.int16 if size == 2 else torch.int32
            w = self._device.get(device)
            if w is None or w.numel() < n:
                w = torch.from_numpy(self._host_weights(n).copy()).to(device)
                self._device[device] = w
            # each field's bits as words (a view, whatever its strides), stacked in one copy
            words = [arrays[i].detach().view(word) for i in idx]
            if len({w_.shape for w_ in words}) > 1:  # the same count in other shapes: flattened first
                words = [w_.reshape(-1) for w_ in words]
            x = torch.stack(words).reshape(len(idx), -1).to(torch.int64)
            sums.setdefault(device, []).append((idx, (x * w[:n]).sum(dim=1)))
        for parts in sums.values():
            back = torch.cat([s for _, s in parts]).cpu().numpy()
            at = 0
            for idx, _ in parts:
                for i in idx:
                    out[i] = int(back[at]) & _MASK
                    at += 1
        return out


def state_digests(state, digester):
    """What the bridge answers to ``field_digests``: (the present fields as [name, layer, index,
    is_f16, digest], the rest digest: last_verify_k and each field's dtype)."""
    return states_digests([state], digester)[0]


def states_digests(states, digester):
    """state_digests of each of several States, their fields digested in one Digester.digests call
    (on a GPU: one copy back for all of them): the digests the bridge sends with an op's reply."""
    per_state = [list(named_fields(st)) for st in states]
    digests = digester.digests([f[3] for fields in per_state for f in fields])
    out, at = [], 0
    for st, fields in zip(states, per_state):
        rows = [[name, layer, index, is_f16(x), d] for (name, layer, index, x), d in zip(fields, digests[at:])]
        at += len(fields)
        out.append((rows, hash((int(st.last_verify_k), tuple(r[3] for r in rows))) & _MASK))
    return out


def fields_reply(state, want, kept):
    """What the bridge answers to ``export_fields`` (the fields whose digest changed, [name, layer,
    index] each): ([present, is_f16] per field asked for, the arrays of the present ones in that
    order). kept(array, what, dtype) is the bridge's check and conversion of an array for a reply
    (bridge._real_kept: h-like fields float32 or float16 as they are, dtype None; the others
    float32; torch tensors stay where they are, for the bridge to copy into the arena)."""
    have = {(name, layer, index): x for name, layer, index, x in named_fields(state)}
    answers, arrays = [], []
    for name, layer, index in want:
        x = have.get((name, layer, index))
        if x is None:
            answers.append([False, False])
            continue
        h_like = name == "h" or (name.startswith("h_") and name != "h_prefill_stage")
        a = kept(x, "export_fields: layer %d %s (index %d)" % (layer, name, index), None if h_like else np.float32)
        answers.append([True, is_f16(a)])
        arrays.append(a)
    return answers, arrays

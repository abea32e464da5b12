"""The transitions every adapter of a third-party kernel runs the same way, written once over a few
hooks: the pool's set-up (h modes f32 and f16-pool, the contract's slot policy, snapshot room),
release, checkpoint, commit and rollback, the snapshots, to_f16's refusal and export_state.

An adapter subclasses PeerAdapter, sets PEER (the peer's name in messages) and provides:
    _record(slot)            the slot's record, with .ckpt (a _save) and .last_k (the last verify's K)
    _save(slot)              (h per layer, conv window per layer): copies of the live state
    _restore(slot, saved)    a _save back as the live state
    _accept(slot, n)         the live state becomes the last verify's after n kept rows (n >= 1)
    _layer_state(slot, l, n) (h, conv, h_intermediates[:n], conv_intermediates[:n]) of layer l
"""
from ..bridge import LayerState, State
from .common import SlotPolicy, parse_options, warm_up


class PeerAdapter:
    PEER = "the peer"      # the peer's name in messages: "vLLM", "fla"
    F16_POOL_HINT = ""     # what h mode f16-pool is called there, for the refusal of f16
    field_digests = True   # export_state's tensors are digested on the GPU; read back only when changed

    def _options(self, options, allowed):
        """Imports torch (an adapter without it is exit 2 naming it), parses 'key=value,...' with
        ``device`` allowed besides ``allowed``, sets the device (default cuda) and pays the
        engine's start-up there (warm_up)."""
        import torch
        self.torch = torch
        o = parse_options(options, dict(allowed, device=None))
        self.dev = torch.device(o.get("device", "cuda"))
        warm_up(torch, self.dev)
        return o

    def _start_pool(self, layers, pool):
        """The pool's set-up every adapter shares: h mode f16 (an FP32 pool converted by to_f16)
        refused, the state's dtype, the contract's slot policy and the snapshot room."""
        if pool.h_mode == "f16":
            raise NotImplementedError("h mode f16 (an FP32 pool converted by to_f16) has no %s counterpart: "
                                      "use f32 or f16-pool%s" % (self.PEER, self.F16_POOL_HINT))
        self.layers, self.pool = layers, pool
        self.dtype = self.torch.float16 if pool.h_mode == "f16-pool" else self.torch.float32
        self.policy = SlotPolicy(pool.h_capacity)
        self.snaps = [None] * pool.snapshot_slots

    def release(self, slot):
        self.policy.release(slot)

    def checkpoint(self, slot, is_async):
        self._record(slot).ckpt = self._save(slot)

    def commit(self, slot, n, k):
        if n < k:  # n == k keeps the live state, the last row's
            self._accept(slot, n)

    def rollback(self, slot, n, and_checkpoint):
        q = self._record(slot)
        if n == 0:
            if q.ckpt is not None:
                self._restore(slot, q.ckpt)
        else:
            self._accept(slot, n)
        if and_checkpoint:
            self.checkpoint(slot, True)

    def to_f16(self, slot):
        raise NotImplementedError("to_f16: h mode f16 is not supported by this adapter")

    def snapshot_save(self, slot, snap):
        self.snaps[snap] = self._save(slot)

    def snapshot_restore(self, slot, snap):
        self._restore(slot, self.snaps[snap])

    def export_state(self, slot):
        q = self._record(slot)
        n = max(q.last_k - 1, 0)
        layers = []
        for l in range(len(self.layers)):
            h, conv, h_inter, conv_inter = self._layer_state(slot, l, n)
            layers.append(LayerState(
                h, conv,
                h_checkpoint=None if q.ckpt is None else q.ckpt[0][l],
                conv_checkpoint=None if q.ckpt is None else q.ckpt[1][l],
                h_intermediates=h_inter, conv_intermediates=conv_inter))
        return State(q.last_k, layers)

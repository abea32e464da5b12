"""Recording an ssmcheck trace while a Hugging Face transformers model runs a speculative loop.

The hooks find the recurrent mixers of the model by what they hold (a GDN mixer: Qwen3-Next's
``Qwen3NextGatedDeltaNet`` and its kin, ``num_k_heads``/``num_v_heads``/``head_k_dim``/
``head_v_dim``; a Mamba-2 mixer: Nemotron-H's ``NemotronHMamba2Mixer``, ``num_heads``/``head_dim``/
``ssm_state_size``/``n_groups``), record what enters and leaves each through forward hooks on
its own submodules (nothing in transformers is patched), and read the state from the model's own
cache object (``cache.layers[i].conv_states`` / ``.recurrent_states``, or the older per-cache
lists ``conv_states[i]`` / ``recurrent_states[i]`` / ``ssm_states[i]``):

- GDN inputs: ``x`` the pre-conv ``[Q|K|V]`` projection (``in_proj_qkvz`` taken apart by the
  module's own ``fix_query_key_value_ordering``, or ``in_proj_qkv``), ``z``, ``b``, ``a`` (before
  the gates); its output the gated norm's, as ``out_proj`` receives it;
- Mamba-2 inputs: ``xBC``, ``dt`` (before dt_bias) and ``z`` from ``in_proj``'s output (its
  ``z | xBC | dt`` tail); its output the gated group norm's, as ``out_proj`` receives it;
- the state after every op: h and conv of every recurrent layer, in the cache's own layout
  (declared with ``set_layer_conventions`` where it is not the contract's: a d_conv-1 conv window,
  h as ``[nv][vd][kd]``), and the checkpoint and verify intermediates the loop keeps as copies;
- weights from the modules' parameters; GDN layers declare ``gates="torch"`` (transformers' gates
  are torch's ``F.softplus``, nothing clamped).

A trace holds the recurrent layers only: full-attention, MLP and MoE layers run in the model but
are not recorded (trace layer l is the l-th recurrent layer, in the model's layer order; the
result's ``layers`` maps them to the model's layer indices).

The loop (``record_speculative``), batch 1, greedy: prefill the prompt, then per step draft up to
``k`` tokens by an n-gram lookup over the tokens so far (what followed an earlier occurrence of the
last ``ngram``, ``ngram - 1``, ... tokens; ``ngram_drafts``; ``drafter=`` replaces it), take a
checkpoint (the hooks copy
the cache's states), verify the pending token and the drafts (``verify K`` with K = drafts + 1: row
0 the token the last step produced, rows 1.. the drafts), accept the longest prefix of drafts the
model's own argmax agrees with (n rows kept, 1 <= n <= K) and, when a draft was rejected, restore
the cache from the copies the hooks took: ``commit n K`` or ``rollback n`` (the copy after row n-1),
or ``rollback 0`` (the checkpoint) followed by the n accepted rows again as ``decode`` ops
(``reject`` picks, in turn). All drafts accepted: ``commit K K``. No draft found: ``decode``.
The verify's rows run as K one-token forwards (the path every transformers version runs from the
cache; a K-token forward with a cache does not continue from the recurrent state in every
version, and one forward leaves no per-row state to copy): the verify is the contract's exact arm,
and its intermediates are the cache after each row. Full-attention layers' key/value caches are
cut back to the kept tokens (``crop``); positions are passed explicitly.

    import ssmcheck.hf_capture as hf
    model = Qwen3NextForCausalLM(cfg).eval()          # or NemotronHForCausalLM(cfg), any device
    result = hf.record_speculative(model, prompt_ids=[3, 5, 7, 3, 5], steps=16, k=3, path="run.h5",
                                   reject=("commit", "rollback", "checkpoint"))
    # ssmcheck replay run.h5              (the reference; --backend cuda --gates clamped for GDN)

Numerics to know: the model should run in float32 (a bf16 model's projections are recorded as
they are, but its state and outputs carry bf16 roundings the tolerance classes do not allow); TF32
is switched off while the loop runs (cuDNN's convolutions allow it by default).
Nemotron-H clamps dt below at ``time_step_min`` in its multi-token path (transformers 5.17; some
versions in the one-token path too): the Mamba-2 layers are declared with ``dt_min`` =
``time_step_min`` (``mamba2_dt_min`` overrides), which a one-token row of a version that clamps
nothing there matches only while softplus(dt + dt_bias) >= time_step_min. A trace with torch gates
replays on the reference; ssmcheck's CUDA backend runs the contract's gates only (``replay
--backend cuda --gates clamped``, which agrees where no clamp is reached).
"""
import numpy as np

from .capture import TraceWriter

GDN, MAMBA2 = "gdn", "mamba2"
REJECT_POLICIES = ("commit", "rollback", "checkpoint")


def _torch():
    import torch  # only here: the rest of ssmcheck never needs torch

    return torch


def _np(t):
    """A tensor (any device, any float dtype) as a float32 numpy copy."""
    return t.detach().to("cpu").float().numpy().copy()


def _is_gdn(m):
    has = all(hasattr(m, a) for a in ("num_k_heads", "num_v_heads", "head_k_dim", "head_v_dim", "conv1d", "A_log",
                                      "dt_bias", "out_proj", "norm", "layer_idx"))
    return has and (hasattr(m, "in_proj_qkvz") and hasattr(m, "in_proj_ba") or
                    all(hasattr(m, a) for a in ("in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a")))


def _is_mamba2(m):
    return all(hasattr(m, a) for a in ("num_heads", "head_dim", "ssm_state_size", "n_groups", "intermediate_size",
                                       "conv1d", "A_log", "dt_bias", "D", "in_proj", "out_proj", "norm", "layer_idx"))


def find_mixers(model):
    """[(layer_idx, kind, name, module)]: the model's GDN and Mamba-2 mixers in layer order (the
    trace's layers). A model with none is an error naming what was looked for."""
    found = []
    for name, m in model.named_modules():
        kind = GDN if _is_gdn(m) else MAMBA2 if _is_mamba2(m) else None
        if kind:
            found.append((int(m.layer_idx), kind, name, m))
    found.sort(key=lambda f: f[0])
    if not found:
        raise ValueError("%s has no GDN mixer (num_k_heads, num_v_heads, head_k_dim, head_v_dim, in_proj_qkvz/in_proj_ba "
                         "or in_proj_qkv/z/b/a, conv1d, A_log, dt_bias, norm, out_proj) and no Mamba-2 mixer (num_heads, "
                         "head_dim, ssm_state_size, n_groups, in_proj, conv1d, A_log, dt_bias, D, norm, out_proj)"
                         % type(model).__name__)
    idx = [f[0] for f in found]
    if len(set(idx)) != len(idx):
        raise ValueError("two recurrent mixers share a layer_idx (%s): the cache cannot tell them apart" % idx)
    return found


def _pick_state(v):
    """One layer's state tensor from what a cache layer holds: the tensor, or state 0 of a dict or list."""
    torch = _torch()
    if torch.is_tensor(v):
        return v
    if isinstance(v, dict):
        v = v.get(0)
    elif isinstance(v, (list, tuple)):
        v = v[0] if v else None
    return v if torch.is_tensor(v) else None


def cache_state(cache, layer_idx):
    """(conv, h) tensors of layer ``layer_idx`` in the cache object, as the model keeps them
    (the tensors themselves: writing into them changes the cache). RuntimeError naming what the
    cache holds when neither layout is found."""
    torch = _torch()
    layers = getattr(cache, "layers", None)
    if layers is not None and layer_idx < len(layers):
        L = layers[layer_idx]
        conv = _pick_state(getattr(L, "conv_states", None))
        h = _pick_state(getattr(L, "recurrent_states", None))
        if h is None:
            h = _pick_state(getattr(L, "ssm_states", None))
        if conv is not None and h is not None:
            return conv, h
    conv_list = getattr(cache, "conv_states", None)
    for h_name in ("recurrent_states", "ssm_states"):
        h_list = getattr(cache, h_name, None)
        if isinstance(conv_list, (list, tuple)) and isinstance(h_list, (list, tuple)) and layer_idx < len(conv_list) \
                and layer_idx < len(h_list) and torch.is_tensor(conv_list[layer_idx]) and torch.is_tensor(h_list[layer_idx]):
            return conv_list[layer_idx], h_list[layer_idx]
    what = type(layers[layer_idx]).__name__ if layers is not None and layer_idx < len(layers) else "nothing"
    raise RuntimeError("cache %s: no conv and recurrent state for layer %d (looked at layers[%d].conv_states/"
                       "recurrent_states/ssm_states, where it holds %s, and at conv_states[%d] with recurrent_states[%d] "
                       "or ssm_states[%d])" % (type(cache).__name__, layer_idx, layer_idx, what, layer_idx, layer_idx,
                                                 layer_idx))


def crop_attention(cache, length, recurrent):
    """Cut the key/value cache of every full-attention layer back to ``length`` tokens (the layers in
    ``recurrent`` are skipped: their state is restored from copies instead)."""
    layers = getattr(cache, "layers", None)
    if layers is not None:
        for i, L in enumerate(layers):
            if i in recurrent or getattr(L, "keys", None) is None:
                continue
            L.crop(length)
        return
    keys, values = getattr(cache, "key_cache", None), getattr(cache, "value_cache", None)
    if isinstance(keys, list) and isinstance(values, list):
        torch = _torch()
        for i in range(len(keys)):
            if i in recurrent or not torch.is_tensor(keys[i]) or keys[i].dim() != 4:
                continue
            keys[i], values[i] = keys[i][..., :length, :], values[i][..., :length, :]
        return
    raise RuntimeError("cache %s: no layers[i].crop and no key_cache/value_cache lists to cut the attention "
                       "layers back with" % type(cache).__name__)


def ngram_drafts(tokens, ngram, k):
    """Up to k draft tokens: what followed an earlier occurrence of the last n tokens (n = ngram,
    ngram-1, ..., 1; the longest suffix that occurs wins; among its occurrences the most recent
    one followed by k tokens, else the one followed by the most); [] when none occurs."""
    for n in range(min(ngram, len(tokens) - 1), 0, -1):
        tail, best = tokens[-n:], []
        for start in range(len(tokens) - n - 1, -1, -1):
            if tokens[start:start + n] == tail:
                follow = tokens[start + n:start + n + k]
                if len(follow) > len(best):
                    best = follow
                if len(best) == k:
                    break
        if best:
            return list(best)
    return []


def _split_qkvz(m, qkvz, ba):
    """Qwen3-Next's fused projections taken apart as its forward does (the module's own
    fix_query_key_value_ordering where it has one): q, k [B][T][nk][kd], v, z [B][T][nv][vd],
    b, a [B][T][nv]. The fused layout, per key head: q (kd), k (kd), v and z (nv/nk value heads of
    vd each); b and a (nv/nk each)."""
    if hasattr(m, "fix_query_key_value_ordering"):
        return m.fix_query_key_value_ordering(qkvz, ba)
    torch = _torch()
    nk, nv, kd, vd = int(m.num_k_heads), int(m.num_v_heads), int(m.head_k_dim), int(m.head_v_dim)
    r = nv // nk
    B, T = qkvz.shape[0], qkvz.shape[1]
    q, k, v, z = torch.split(qkvz.view(B, T, nk, 2 * kd + 2 * r * vd), [kd, kd, r * vd, r * vd], dim=3)
    b, a = torch.split(ba.view(B, T, nk, 2 * r), [r, r], dim=3)
    return (q, k, v.reshape(B, T, nv, vd), z.reshape(B, T, nv, vd), b.reshape(B, T, nv), a.reshape(B, T, nv))


class MixerHooks:
    """Forward hooks on the mixers' submodules; ``take()`` returns what one forward recorded, per
    trace layer: a dict of [rows][...] float32 arrays (GDN x, a, b, z, out; Mamba-2 xBC, dt, z,
    out), batch row 0 only."""

    def __init__(self, mixers):
        self.mixers, self.handles, self.got = mixers, [], {}
        for l, (_, kind, _, m) in enumerate(mixers):
            self._install(l, kind, m)

    def _install(self, l, kind, m):
        got = self.got

        def keep(name):
            def hook(_mod, _args, out):
                got.setdefault(l, {})[name] = out.detach()
            return hook

        def finish(_mod, args):
            d = got.setdefault(l, {})
            d["out"] = args[0].detach()
            if kind == GDN:
                if "qkvz" in d:
                    q, k, v, z, b, a = _split_qkvz(m, d.pop("qkvz"), d.pop("ba"))
                    d["x"] = _torch().cat([t.reshape(t.shape[0], t.shape[1], -1) for t in (q, k, v)], dim=-1)
                    d["z"], d["b"], d["a"] = z, b, a
            else:
                p = d.pop("proj")
                if p.dim() == 2:  # a one-token path that squeezed the sequence dimension
                    p = p[:, None, :]
                inter, conv_dim, nh = int(m.intermediate_size), int(m.conv1d.weight.shape[0]), int(m.num_heads)
                tail = p[..., p.shape[-1] - (inter + conv_dim + nh):]
                d["z"], d["xBC"], d["dt"] = tail[..., :inter], tail[..., inter:inter + conv_dim], tail[..., inter + conv_dim:]
            for name in list(d):
                t = d[name]
                if t.dim() == 2 and name == "out":
                    t = t[:, None, :]
                d[name] = _np(t[0].reshape(t.shape[1], -1))
        if kind == GDN:
            if hasattr(m, "in_proj_qkvz"):
                subs = [("in_proj_qkvz", "qkvz"), ("in_proj_ba", "ba")]
            else:
                subs = [("in_proj_qkv", "x"), ("in_proj_z", "z"), ("in_proj_b", "b"), ("in_proj_a", "a")]
        else:
            subs = [("in_proj", "proj")]
        for attr, name in subs:
            self.handles.append(getattr(m, attr).register_forward_hook(keep(name)))
        self.handles.append(m.out_proj.register_forward_pre_hook(finish))

    def take(self, rows):
        """What the last forward recorded (every layer), each array [rows][...]."""
        out = {}
        for l, (idx, kind, name, _) in enumerate(self.mixers):
            d = self.got.pop(l, None)
            want = ("x", "a", "b", "z", "out") if kind == GDN else ("xBC", "dt", "z", "out")
            if d is None or any(n not in d for n in want):
                raise RuntimeError("layer %d (%s, model layer %d): the forward recorded %s, expected %s (did the "
                                   "mixer run through in_proj and out_proj?)" % (l, name, idx, sorted(d or {}), list(want)))
            for n in want:
                if d[n].shape[0] != rows:
                    raise RuntimeError("layer %d (%s) %s: %d rows recorded, the forward had %d" % (l, name, n, d[n].shape[0], rows))
            out[l] = d
        return out

    def remove(self):
        for h in self.handles:
            h.remove()
        self.handles = []


def _concat_rows(per_row):
    """[{layer: {name: [1][...]}}] of one-token forwards -> {layer: {name: [rows][...]}}."""
    return {l: {n: np.concatenate([r[l][n] for r in per_row], axis=0) for n in per_row[0][l]} for l in per_row[0]}


class _Recorder:
    """The trace side of the loop: the layers (declared from the modules and the cache), the copies
    the hooks keep (checkpoint, the last verify's rows), and one op at a time."""

    def __init__(self, writer, mixers, cache, k, mamba2_dt_min):
        self.w, self.mixers, self.ckpt, self.inter, self.last_k = writer, mixers, None, [], 0
        self.ops = []
        writer.set_pool(max_slots=1, conv_capacity=max(k, 1), snapshot_slots=0)
        for l, (idx, kind, _, m) in enumerate(mixers):
            conv, h = cache_state(cache, idx)
            conv_w = _np(m.conv1d.weight).reshape(m.conv1d.weight.shape[0], -1)
            d_conv = conv_w.shape[1]
            bias = None if m.conv1d.bias is None else _np(m.conv1d.bias)
            eps = float(getattr(m.norm, "variance_epsilon", getattr(m.norm, "eps", 1e-6)))
            conventions = {}
            if kind == GDN:
                nk, nv, kd, vd = int(m.num_k_heads), int(m.num_v_heads), int(m.head_k_dim), int(m.head_v_dim)
                writer.add_layer(nk=nk, nv=nv, kd=kd, vd=vd, d_conv=d_conv, conv_w=conv_w, conv_bias=bias,
                                 A_log=_np(m.A_log), dt_bias=_np(m.dt_bias), norm_w=_np(m.norm.weight), eps=eps)
                conventions["gates"] = "torch"
                a, b = kd, vd
            else:
                nh, hp, ns, ng = int(m.num_heads), int(m.head_dim), int(m.ssm_state_size), int(m.n_groups)
                dt_min = float(getattr(m, "time_step_min", 0.0) if mamba2_dt_min is None else mamba2_dt_min)
                writer.add_mamba2_layer(nh=nh, hp=hp, ns=ns, ng=ng, d_conv=d_conv, conv_w=conv_w, conv_bias=bias,
                                        A_log=_np(m.A_log), dt_bias=_np(m.dt_bias), D=_np(m.D),
                                        norm_w=_np(m.norm.weight), eps=eps, dt_min=dt_min)
                group = getattr(m.norm, "group_size", None)
                if group and int(m.intermediate_size) // int(group) != ng:
                    conventions["norm_groups"] = int(m.intermediate_size) // int(group)
                a, b = hp, ns
            # the cache's layouts: a d_conv-1 window (causal_conv1d's), h with its last two axes swapped
            if conv.shape[-1] == d_conv - 1:
                conventions["conv_window"] = "d_conv-1"
            elif conv.shape[-1] != d_conv:
                raise RuntimeError("layer %d (model layer %d): the cache keeps %d conv columns, d_conv is %d"
                                   % (l, idx, conv.shape[-1], d_conv))
            if tuple(h.shape[-2:]) == (b, a) and a != b:
                conventions["h_layout"] = "nv,vd,kd"
            elif tuple(h.shape[-2:]) != (a, b):
                raise RuntimeError("layer %d (model layer %d): the cache's h has shape %s, expected [..][%d][%d]"
                                   % (l, idx, tuple(h.shape), a, b))
            if conventions:
                writer.set_layer_conventions(l, **conventions)
        self.zero = [self._cut(c, h, zero=True) for c, h in (cache_state(cache, f[0]) for f in mixers)]

    @staticmethod
    def _cut(conv, h, zero=False):
        conv, h = _np(conv[0]), _np(h[0])
        return (np.zeros_like(conv), np.zeros_like(h)) if zero else (conv, h)

    def read(self, cache):
        """A copy of every recurrent layer's (conv, h), batch row 0, as numpy, and as tensors to restore."""
        live = [cache_state(cache, f[0]) for f in self.mixers]
        return [(c.clone(), h.clone()) for c, h in live]

    @staticmethod
    def restore(cache, mixers, copy):
        for (idx, _, _, _), (c, h) in zip(mixers, copy):
            conv, hh = cache_state(cache, idx)
            conv.copy_(c)
            hh.copy_(h)

    def op(self, text, live, rows=None):
        """Write op ``text``: inputs and outputs of its rows (per layer), the state after it."""
        with self.w.op(text) as op:
            for l in sorted(rows or {}):
                d = dict(rows[l])
                out = d.pop("out")
                op.inputs(entry=0, layer=l, **d)
                op.outputs(entry=0, layer=l, out=out)
            layers = []
            for l in range(len(self.mixers)):
                conv, h = live[l]
                f = dict(h=h, conv=conv)
                if self.ckpt is not None:
                    f["conv_checkpoint"], f["h_checkpoint"] = self.ckpt[l]
                if self.last_k > 1:
                    f["conv_intermediates"] = [r[l][0] for r in self.inter]
                    f["h_intermediates"] = [r[l][1] for r in self.inter]
                layers.append(f)
            op.state(seq=0, slot=0, layers=layers, last_verify_k=self.last_k)
        self.ops.append(text)


def _numpy_copy(copy):
    return [(_np(c[0]), _np(h[0])) for c, h in copy]


def record_speculative(model, prompt_ids, steps, k, path, ngram=3, reject=("commit",), producer=None, lib=None,
                       mamba2_dt_min=None, drafter=None):
    """Run ``steps`` speculative steps of ``model`` (greedy, batch 1) after a prefill of
    ``prompt_ids`` and record them as an ssmcheck trace at ``path`` (module docstring: the ops).
    ``k``: drafts per verify (K = k + 1 rows at most); ``ngram``: the longest suffix the drafter
    looks up; ``reject``: the policies for a rejected draft, taken in turn ("commit": ``commit n
    K``; "rollback": ``rollback n``; "checkpoint": ``rollback 0``, then the accepted rows as
    decodes); ``lib``: libssmcheck_capture.so (capture.TraceWriter finds it otherwise);
    ``drafter``: instead of the n-gram lookup, a callable (tokens so far, k) -> up to k draft tokens.
    Returns dict(ops=[op texts], tokens=[every token fed or produced], layers=[model layer of each
    trace layer], kinds=[...], accepted=[n per verify], verify_k=[K per verify])."""
    torch = _torch()
    prompt = [int(t) for t in (prompt_ids.tolist() if hasattr(prompt_ids, "tolist") else prompt_ids)]
    if not prompt:
        raise ValueError("prompt_ids is empty: the loop starts with a prefill of at least one token")
    if not isinstance(k, int) or k < 1:
        raise ValueError("k is %r: expected the number of drafts per verify, an integer >= 1" % (k,))
    if not isinstance(ngram, int) or ngram < 1:
        raise ValueError("ngram is %r: expected an integer >= 1" % (ngram,))
    reject = (reject,) if isinstance(reject, str) else tuple(reject)
    bad = [r for r in reject if r not in REJECT_POLICIES]
    if not reject or bad:
        raise ValueError("reject %r: expected one or more of %s" % (bad or reject, ", ".join(REJECT_POLICIES)))
    mixers = find_mixers(model)
    recurrent = {f[0] for f in mixers}
    device = next(model.parameters()).device
    hooks = MixerHooks(mixers)
    cache = None

    def forward(tokens, pos):
        nonlocal cache
        ids = torch.tensor([tokens], dtype=torch.long, device=device)
        positions = torch.arange(pos, pos + len(tokens), dtype=torch.long, device=device)[None, :]
        out = model(input_ids=ids, past_key_values=cache, use_cache=True, position_ids=positions)
        cache = out.past_key_values
        if cache is None:
            raise RuntimeError("%s returned no past_key_values with use_cache=True" % type(model).__name__)
        return int(out.logits[0, -1].argmax())

    try:
        import transformers
        version = transformers.__version__
    except ImportError:
        version = "?"
    result = dict(tokens=list(prompt), layers=[f[0] for f in mixers], kinds=[f[1] for f in mixers], accepted=[],
                  verify_k=[])
    # TF32 (cuDNN's convolutions allow it by default) rounds the conv and matmul operands to 10
    # mantissa bits: off while recording, as it was afterwards
    tf32 = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    try:
        with torch.no_grad():
            pending = forward(prompt, 0)
            prefill_rows = hooks.take(len(prompt))
            with TraceWriter(path, producer=producer or "transformers %s (ssmcheck.hf_capture)" % version,
                             backend="transformers %s %s on %s" % (version, type(model).__name__, device),
                             model_name=getattr(getattr(model, "config", None), "model_type", None), lib=lib) as w:
                rec = _Recorder(w, mixers, cache, k, mamba2_dt_min)
                rec.op("alloc", rec.zero)
                rec.op("prefill %d" % len(prompt), _numpy_copy(rec.read(cache)), prefill_rows)
                pos, tokens, turn = len(prompt), result["tokens"], 0
                for _ in range(steps):
                    drafts = [int(t) for t in (drafter(tokens + [pending], k) if drafter else
                                               ngram_drafts(tokens + [pending], ngram, k))][:k]
                    if not drafts:
                        nxt = forward([pending], pos)
                        rec.op("decode", _numpy_copy(rec.read(cache)), hooks.take(1))
                        tokens.append(pending)
                        pos, pending = pos + 1, nxt
                        continue
                    ckpt = rec.read(cache)
                    rec.ckpt = _numpy_copy(ckpt)
                    rec.op("checkpoint", rec.ckpt)
                    rows = [pending] + drafts
                    K, preds, per_row, after = len(rows), [], [], []
                    for t, tok in enumerate(rows):
                        preds.append(forward([tok], pos + t))
                        per_row.append(hooks.take(1))
                        after.append(rec.read(cache))
                    n = 1
                    while n < K and preds[n - 1] == rows[n]:
                        n += 1
                    rec.inter, rec.last_k = [_numpy_copy(a) for a in after[:K - 1]], K
                    rec.op("verify %d" % K, _numpy_copy(after[K - 1]), _concat_rows(per_row))
                    result["accepted"].append(n)
                    result["verify_k"].append(K)
                    tokens.extend(rows[:n])
                    if n == K:
                        rec.op("commit %d %d" % (K, K), _numpy_copy(after[K - 1]))
                        pos, pending = pos + K, preds[K - 1]
                        continue
                    policy = reject[turn % len(reject)]
                    turn += 1
                    if policy in ("commit", "rollback"):
                        _Recorder.restore(cache, mixers, after[n - 1])
                        crop_attention(cache, pos + n, recurrent)
                        rec.op("commit %d %d" % (n, K) if policy == "commit" else "rollback %d" % n,
                               _numpy_copy(rec.read(cache)))
                        pos, pending = pos + n, preds[n - 1]
                    else:  # the checkpoint, then the accepted rows again
                        _Recorder.restore(cache, mixers, ckpt)
                        crop_attention(cache, pos, recurrent)
                        rec.op("rollback 0", _numpy_copy(rec.read(cache)))
                        for tok in rows[:n]:
                            pending = forward([tok], pos)
                            rec.op("decode", _numpy_copy(rec.read(cache)), hooks.take(1))
                            pos += 1
                result["ops"] = list(rec.ops)
    finally:
        hooks.remove()
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = tf32
    return result

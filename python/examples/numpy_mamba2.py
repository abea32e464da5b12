"""The numpy implementation of python/examples/numpy_gdn.py with Mamba-2 layers too (hybrid models
included): it declares ``mamba2 = True``, so the Python bridge gives it Mamba-2 layers and its
campaigns draw the Mamba-2 and mixed presets. FP64 compute, FP32 or FP16 storage (every h mode);
ssmcheck judges it against its reference under the tolerance classes. The math is
docs/state-model.md "One token (Mamba-2 math)".

    PYTHONPATH=python /usr/bin/python3 python/examples/numpy_mamba2.py build/ssmcheck fuzz --h-mode f32 --cases 50
    PYTHONPATH=python /usr/bin/python3 python/examples/numpy_mamba2.py build/ssmcheck check --preset mamba-odd-a --h-mode f32 --ops 'alloc; prefill 3; verify 3; commit 1 3'

(PYTHONPATH=python: the package of this tree; not needed once it is installed, pip install ./python.)
"""
import numpy as np

# numpy_gdn.py is the example beside this one, not part of the package: run as a script, this
# directory is sys.path[0] (and ssmcheck.run hands sys.path to the host process), so it imports
# by name; a module importing this one puts python/examples on sys.path itself.
from numpy_gdn import NumpyGdn, conv_silu, main, silu, store


def mamba2_step(L, h, win, x, a, z, f16_store="saturate"):
    """One token of one Mamba-2 layer; h [nh][hp][ns] (float32 or float16) and win [conv_dim][d_conv]
    (float32) updated in place. x: xBC before the conv; a: dt before dt_bias."""
    xbc = conv_silu(L, win, x)
    nh, hp, ns, ng = L.nh, L.hp, L.ns, L.ng
    di = nh * hp
    xs = xbc[:di].reshape(nh, hp)
    grp = np.arange(nh) // (nh // ng)  # the group of each head
    B = xbc[di:di + ng * ns].reshape(ng, ns)[grp]  # [nh][ns]
    C = xbc[di + ng * ns:].reshape(ng, ns)[grp]
    xg = a.astype(np.float64) + L.dt_bias
    with np.errstate(over="ignore"):
        sp = np.where(xg > 20.0, xg, np.log1p(np.exp(np.minimum(xg, 20.0))))
        dt = np.clip(sp, L.dt_min, L.dt_max)
        dA = np.maximum(np.exp(-np.exp(L.A_log.astype(np.float64)) * dt), 2.0 ** -149)
    H = dA[:, None, None] * h.astype(np.float64) + (dt[:, None] * xs)[:, :, None] * B[:, None, :]
    h[...] = store(H, h.dtype, f16_store)  # the output reads the stored state
    y = (np.einsum("hpn,hn->hp", h.astype(np.float64), C) + L.D[:, None] * xs).reshape(-1)
    zz = z.astype(np.float64)
    u = y if L.norm_before_gate else y * silu(zz)
    g = u.reshape(ng, -1)
    r = 1.0 / np.sqrt((g * g).mean(axis=1, keepdims=True) + L.eps)
    out = (g * r).reshape(-1) * L.norm_w
    if L.norm_before_gate:
        out = out * silu(zz)
    return out.astype(np.float32)


class NumpyMamba2(NumpyGdn):
    name = "numpy GDN and Mamba-2 (python/examples/numpy_mamba2.py)"
    mamba2 = True  # the bridge gives it Mamba-2 layers too

    def step(self, L, h, win, row):
        if L.kind == "mamba2":
            return mamba2_step(L, h, win, row["x"], row["a"], row["z"], self.f16_math)
        return super().step(L, h, win, row)


if __name__ == "__main__":
    main(NumpyMamba2, "numpy-mamba2")

#!/usr/bin/env python3
"""Reads and writes ssmcheck dumps with h5py (schema: docs/dump-format.md).

  h5py_check.py check DUMP DATASET BITS   # DATASET is float16 and equals the raw uint16 BITS file
  h5py_check.py write DUMP                # writes a small valid dump the way a Python engine would
Used by tests/compare_dump_test.cpp; prints 'ok' on success, exits 1 with a message otherwise.
"""
import sys

import h5py
import numpy as np


def text(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def check(path, dataset, bits_path):
    with h5py.File(path, "r") as f:
        assert text(f.attrs["format"]) == "ssmcheck-dump", f.attrs["format"]
        assert int(f.attrs["version"]) == 1

        def visit(name, obj):
            if isinstance(obj, h5py.Dataset):
                want = {"f16": np.float16, "f32": np.float32}[text(obj.attrs["dtype"])]
                assert obj.dtype == want, f"{name}: dtype {obj.dtype}, attribute says {want}"
                assert text(obj.attrs["layout"]), name

        f.visititems(visit)
        d = f[dataset]
        assert d.dtype == np.float16, f"{dataset} reads as {d.dtype}, not float16"
        got = d[...].view(np.uint16).ravel()
        want = np.fromfile(bits_path, dtype="<u2")
        assert got.shape == want.shape, (got.shape, want.shape)
        bad = np.nonzero(got != want)[0]
        assert bad.size == 0, f"{bad.size} elements differ, first at {bad[0]}"
    print("ok")


def write(path):
    # tiny: one gdn layer nk=1 nv=2 kd=8 vd=12 d_conv=4; one sequence after a verify with K=3.
    nv, kd, vd, d_conv, nk = 2, 8, 12, 4, 1
    conv_dim = 2 * nk * kd + nv * vd
    n_h, n_c = nv * kd * vd, conv_dim * d_conv
    h = (((np.arange(n_h) * 37) % 101 - 50) / 64).astype(np.float16).reshape(nv, kd, vd)
    conv = (((np.arange(n_c)) % 13 - 6) / 8).astype(np.float32).reshape(conv_dim, d_conv)
    with h5py.File(path, "w") as f:
        f.attrs.update(format="ssmcheck-dump", version=1, tool_version="h5py-writer", backend="python",
                       seed=7, op_index=3, ops="alloc; prefill 4; to_f16; verify 3", h_mode="f16")
        f.attrs["sequences"] = 1
        m = f.create_group("model")
        m.attrs.update(name="py", layers=1)
        l0 = m.create_group("layer0")
        l0.attrs.update(kind="gdn", nk=nk, nv=nv, kd=kd, vd=vd, d_conv=d_conv, conv_bias=0,
                        output_gate="silu", eps=np.float32(1e-6))
        s = f.create_group("seq0")
        s.attrs.update(seq=0, slot=2, last_verify_k=3)
        L = s.create_group("layer0")
        L.attrs.update(h_is_f16=1, intermediates=2)

        def put(name, data, layout):
            d = L.create_dataset(name, data=data)
            d.attrs["dtype"] = "f16" if data.dtype == np.float16 else "f32"
            d.attrs["layout"] = layout

        put("h", h, "[nv][kd][vd], vd fastest")
        put("conv", conv, "[conv_dim][d_conv], column 0 oldest")
        put("h_intermediates", np.stack([h, -h]), "[t][nv][kd][vd], vd fastest")
        put("conv_intermediates", np.stack([conv, 2 * conv]), "[t][conv_dim][d_conv], column 0 oldest")
    print("ok")


def main(argv):
    try:
        if argv[1:2] == ["check"] and len(argv) == 5:
            check(argv[2], argv[3], argv[4])
        elif argv[1:2] == ["write"] and len(argv) == 3:
            write(argv[2])
        else:
            print(__doc__)
            return 2
    except AssertionError as e:
        print(f"FAILED: {e}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

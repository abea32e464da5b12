"""Structure-aware corruptions of an ssmcheck trace or dump, for tests/hostile_input_test.cpp:
every attribute deleted, set to a huge, negative, NaN or wrongly typed value; every dataset
deleted, reshaped, retyped or filled with NaN. Writes OUTDIR/NNNN.h5 and OUTDIR/manifest.tsv
("NNNN.h5<TAB>what"), at most MAX variants chosen with SEED (printed by the caller).

    /usr/bin/python3 corrupt_h5.py IN.h5 OUTDIR SEED MAX
"""
import os
import random
import shutil
import sys

import h5py
import numpy as np


def objects(f):
    """(path, is_dataset) of every group and dataset, root included."""
    out = [("/", False)]
    f.visititems(lambda name, obj: out.append(("/" + name, isinstance(obj, h5py.Dataset))))
    return out


def mutations(f):
    """(what, function taking the open file) for every attribute and dataset."""
    muts = []
    for path, is_ds in objects(f):
        obj = f[path]
        for name in list(obj.attrs):
            where = "%s@%s" % (path, name)
            muts.append(("delete " + where, lambda g, p=path, n=name: g[p].attrs.__delitem__(n)))
            for label, value in (("huge", np.int64(1 << 40)), ("negative", np.int64(-7)), ("NaN", np.float64("nan")),
                                 ("a string", "bogus"), ("empty string", "")):
                muts.append(("set %s to %s" % (where, label),
                             lambda g, p=path, n=name, v=value: g[p].attrs.__setitem__(n, v)))
        if is_ds:
            ds = obj
            parent, name = path.rsplit("/", 1)
            parent = parent or "/"

            def replace(g, p=parent, n=name, make=None):
                data = make(g[p][n])
                del g[p][n]
                g[p].create_dataset(n, data=data)

            muts.append(("delete dataset " + path, lambda g, p=parent, n=name: g[p].__delitem__(n)))
            muts.append(("reshape " + path + " to one element less",
                         lambda g, r=replace: r(make=lambda d: np.asarray(d[()]).reshape(-1)[:-1] if d.size > 1 else np.zeros(3))))
            muts.append(("retype " + path + " to int32",
                         lambda g, r=replace: r(make=lambda d: np.asarray(d[()]).astype(np.int32))))
            if ds.dtype.kind == "f":
                muts.append(("fill " + path + " with NaN",
                             lambda g, r=replace: r(make=lambda d: np.full(d.shape, np.nan, d.dtype))))
    return muts


def main(src, outdir, seed, limit):
    os.makedirs(outdir, exist_ok=True)
    with h5py.File(src, "r") as f:
        muts = mutations(f)
    rng = random.Random(seed)
    chosen = sorted(rng.sample(range(len(muts)), min(limit, len(muts))))
    with open(os.path.join(outdir, "manifest.tsv"), "w") as man:
        for k, i in enumerate(chosen):
            what, apply = muts[i]
            out = os.path.join(outdir, "%04d.h5" % k)
            shutil.copyfile(src, out)
            try:
                with h5py.File(out, "r+") as g:
                    apply(g)
            except Exception as e:  # a mutation h5py itself cannot make: not a case
                os.remove(out)
                continue
            man.write("%04d.h5\t%s\n" % (k, what))
    print("%d mutations possible, %d chosen" % (len(muts), len(chosen)))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))

"""Records a state trace the way a Python engine would: the numpy engine of numpy_gdn.py driven
through alloc; prefill 3; checkpoint; decode; verify 3; commit 2 3; rollback 0, every op written
with ssmcheck.TraceWriter (inputs, outputs, the sequence's full state after the op).

    SSMCHECK=build/ssmcheck PYTHONPATH=python /usr/bin/python3 python/examples/write_trace.py /tmp/example.h5
    build/ssmcheck replay /tmp/example.h5        # exit 0: the reference agrees

(PYTHONPATH=python: the package of this tree; not needed once it is installed, pip install ./python.)
The writer finds libssmcheck_capture.so beside the ssmcheck executable ($SSMCHECK, or on PATH),
or takes $SSMCHECK_CAPTURE_LIB (python/ssmcheck/locate.py has every place it looks).
"""
import sys

import numpy as np

import ssmcheck  # installed (pip install ./python) or on PYTHONPATH (docs/plugins.md, "Python")
# numpy_gdn.py is the example beside this one, not part of the package: run as a script, this
# directory is sys.path[0], so it imports by name.
from numpy_gdn import NumpyGdn

NK, NV, KD, VD, DCONV, LAYERS, EPS = 1, 2, 8, 12, 4, 2, 1e-6
OPS = ["alloc", "prefill 3", "checkpoint", "decode", "verify 3", "commit 2 3", "rollback 0"]


def main(path):
    rng = np.random.default_rng(7)
    conv_dim = 2 * NK * KD + NV * VD
    desc = dict(kind="gdn", nk=NK, nv=NV, kd=KD, vd=VD, d_conv=DCONV, output_gate="silu", eps=EPS)
    layers = [ssmcheck.Layer(desc, dict(conv_w=rng.uniform(-0.5, 0.5, (conv_dim, DCONV)).astype(np.float32),
                                        A_log=rng.uniform(-4.5, -3.5, NV).astype(np.float32),
                                        dt_bias=rng.uniform(-1.0, 0.0, NV).astype(np.float32),
                                        norm_w=rng.uniform(0.5, 1.5, VD).astype(np.float32)))
              for _ in range(LAYERS)]
    engine = NumpyGdn()
    engine.create_pool(layers, ssmcheck.Pool(dict(h_mode="f32", max_slots=2, h_capacity=[4, 4], conv_capacity=4,
                                                   snapshot_slots=0)))
    with ssmcheck.TraceWriter(path, producer="write_trace.py (numpy GDN)", backend="numpy", h_mode="f32",
                              model_name="python-example") as w:
        w.set_pool(max_slots=2, conv_capacity=4, snapshot_slots=0, h_capacity=[4, 4])
        for L in layers:
            w.add_layer(NK, NV, KD, VD, DCONV, L.conv_w, L.A_log, L.dt_bias, L.norm_w, eps=EPS)
        slot = None
        for text in OPS:
            name, *args = text.split()
            with w.op(text) as op:
                if name == "alloc":
                    slot = engine.alloc(1)
                elif name in ("prefill", "decode", "verify"):
                    rows = int(args[0]) if args else 1
                    inputs = [dict(x=rng.uniform(-1, 1, (rows, conv_dim)).astype(np.float32),
                                   a=rng.uniform(-3, 3, (rows, NV)).astype(np.float32),
                                   b=rng.uniform(-3, 3, (rows, NV)).astype(np.float32),
                                   z=rng.uniform(-2, 2, (rows, NV * VD)).astype(np.float32)) for _ in layers]
                    for l, i in enumerate(inputs):
                        op.inputs(entry=0, layer=l, **i)
                    outs = (engine.prefill(slot, inputs) if name == "prefill" else
                            engine.decode([slot], [inputs])[0] if name == "decode" else
                            engine.verify([slot], rows, "exact", [inputs])[0])
                    for l, o in enumerate(outs):
                        op.outputs(entry=0, layer=l, out=o)
                elif name == "checkpoint":
                    engine.checkpoint(slot, False)
                elif name == "commit":
                    engine.commit(slot, int(args[0]), int(args[1]))
                elif name == "rollback":
                    engine.rollback(slot, int(args[0]), False)
                st = engine.export_state(slot)
                op.state(seq=0, slot=slot, last_verify_k=st.last_verify_k,
                         layers=[dict(h=s.h, conv=s.conv, h_checkpoint=s.h_checkpoint, conv_checkpoint=s.conv_checkpoint,
                                      h_intermediates=s.h_intermediates, conv_intermediates=s.conv_intermediates)
                                 for s in st.layers])
    print("wrote %s: %d ops" % (path, len(OPS)))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: write_trace.py OUT.h5")
    main(sys.argv[1])

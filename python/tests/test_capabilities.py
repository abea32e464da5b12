"""A Python class that runs part of the contract (docs/plugins.md, "Capabilities"), in CI
(ctest python_capabilities, cpu label):

- an FP32-only class without snapshots, the WY arm or padding rows (python/examples/numpy_gdn.py
  restricted, failing any call outside its declaration) passes a drawn campaign: nothing outside
  reaches it;
- `fuzz --h-mode f16` on it checks nothing: exit 5 naming its h modes;
- `replay` of an FP16 trace on it is skipped and counted: exit 5;
- a malformed declaration (an unknown h mode, an unknown verify arm) is refused naming the member;
- a class offering `perturb_schedule` gets its seed under `--backend perturbed:python:NAME`, and a
  class that offers none (no method, or a falsy return) is refused there.

    SSMCHECK=build/ssmcheck PYTHONPATH=python /usr/bin/python3 python/tests/test_capabilities.py

Seed: $SSMCHECK_SEED (printed); cases: $SSMCHECK_CASES.
"""
import os
import sys
import tempfile

import ssmcheck  # installed (pip install ./python) or on PYTHONPATH (ctest sets it)

here = os.path.dirname(os.path.abspath(__file__))
# the numpy example is a script beside the package, imported by path (the host process gets this
# sys.path from ssmcheck.run)
sys.path.insert(0, os.path.join(here, "..", "examples"))
from numpy_gdn import NumpyGdn  # noqa: E402

SEED = int(os.environ.get("SSMCHECK_SEED", "20261204"))
CASES = int(os.environ.get("SSMCHECK_CASES", "40"))
TRACES = os.path.join(here, "..", "..", "fixtures", "traces")


class F32Only(NumpyGdn):
    """numpy_gdn, declaring FP32 state, no snapshots, the exact arm, no padding rows, K <= 4."""
    name = "numpy GDN, FP32 only"
    ple = False
    h_modes = ("f32",)
    snapshots = False
    verify_arms = ("exact",)
    pad_rows = False
    max_verify_k = 4

    def create_pool(self, layers, pool):
        if pool.h_mode != "f32":
            raise RuntimeError("called outside its capabilities: h mode %s" % pool.h_mode)
        return super().create_pool(layers, pool)

    def snapshot_save(self, slot, snap):
        raise RuntimeError("called outside its capabilities: snapshot_save")

    def snapshot_restore(self, slot, snap):
        raise RuntimeError("called outside its capabilities: snapshot_restore")

    def decode(self, slots, inputs):
        if -1 in list(slots):
            raise RuntimeError("called outside its capabilities: a padding row")
        return super().decode(slots, inputs)

    def verify(self, slots, k, arm, inputs):
        if -1 in list(slots) or arm != "exact" or k > 4:
            raise RuntimeError("called outside its capabilities: verify %d arm %s rows %s" % (k, arm, list(slots)))
        return super().verify(slots, k, arm, inputs)


class Perturbable(NumpyGdn):
    """numpy_gdn offering a perturbed schedule (docs/plugins.md): it has none to perturb, so it notes
    each seed it is given in the file $SSMCHECK_TEST_PERTURB_LOG (the host process inherits it)."""
    name = "numpy GDN, perturbable"

    def perturb_schedule(self, seed):
        with open(os.environ["SSMCHECK_TEST_PERTURB_LOG"], "a") as f:
            f.write("%d\n" % seed)
        return True


class NotPerturbable(NumpyGdn):
    """a perturb_schedule that says no (a falsy return: not offered)"""

    def perturb_schedule(self, seed):
        return False


class UnknownMode(NumpyGdn):
    h_modes = ("f64",)


class UnknownArm(NumpyGdn):
    verify_arms = ("exact", "fast")


def run(args, cls):
    with tempfile.TemporaryFile() as out:
        rc = ssmcheck.run(args, cls, stdout=out, stderr=out)
        out.seek(0)
        return rc, out.read().decode(errors="replace")


def test_f32_only_class_passes_a_campaign_inside_its_capabilities():
    rc, text = run(["fuzz", "--backend", "python:f32only", "--cases", str(CASES), "--seed", str(SEED)], F32Only)
    assert rc == 0, text
    assert "outside its capabilities" not in text, text
    assert "passed" in text, text


def test_a_fixed_mode_outside_checks_nothing():
    rc, text = run(["fuzz", "--backend", "python:f32only", "--cases", "3", "--h-mode", "f16"], F32Only)
    assert rc == 5, text
    assert "runs h modes f32 only" in text, text


def test_an_fp16_trace_is_skipped_and_counted():
    trace = os.path.join(TRACES, "odd_a_f16_every_op.h5")
    rc, text = run(["replay", trace, "--backend", "python:f32only"], F32Only)
    assert rc == 5, text
    assert "NOTHING CHECKED (1 of 1 checks skipped)" in text, text


def test_a_perturbed_schedule_reaches_the_class_and_one_not_offered_is_refused():
    with tempfile.TemporaryDirectory() as d:
        log = os.path.join(d, "seeds")
        os.environ["SSMCHECK_TEST_PERTURB_LOG"] = log
        try:
            rc, text = run(["fuzz", "--backend", "perturbed:python:p", "--cases", "3", "--seed", str(SEED)],
                           Perturbable)
        finally:
            del os.environ["SSMCHECK_TEST_PERTURB_LOG"]
        assert rc == 0, text
        with open(log) as f:
            seeds = f.read().split()
        assert seeds, "perturb_schedule was never called:\n" + text
    rc, text = run(["fuzz", "--backend", "perturbed:python:n", "--cases", "1"], NotPerturbable)
    assert rc == 2, text
    assert "perturb" in text, text
    rc, text = run(["fuzz", "--backend", "perturbed:python:n", "--cases", "1"], F32Only)
    assert rc == 2, text
    assert "perturb" in text, text


def test_a_malformed_declaration_is_refused_naming_it():
    rc, text = run(["fuzz", "--backend", "python:bad", "--cases", "1"], UnknownMode)
    assert rc == 2, text
    assert "capabilities.h_modes" in text and '"f64"' in text, text
    rc, text = run(["fuzz", "--backend", "python:bad", "--cases", "1"], UnknownArm)
    assert rc == 2, text
    assert "capabilities.verify_arms" in text and '"fast"' in text, text


def main():
    print("seed %d (rerun with SSMCHECK_SEED=%d), %d cases" % (SEED, SEED, CASES), flush=True)
    failed = 0
    for name, f in sorted(globals().items()):
        if name.startswith("test_") and callable(f):
            try:
                f()
                print("ok   " + name, flush=True)
            except AssertionError as e:
                failed += 1
                print("FAIL %s\n%s" % (name, e), flush=True)
    print("%d failed" % failed)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

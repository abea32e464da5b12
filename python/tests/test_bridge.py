"""The Python bridge in CI (ctest python_bridge, cpu label), with Debian's python3-numpy:

- the numpy implementation of python/examples/numpy_gdn.py passes a campaign through the bridge;
- PLE carries (numpy_gdn declares ple = True): a fixed script through the carry's transitions
  agrees, and a carry not rolled back on a partial accept is caught and shrunk;
- python/examples/numpy_mamba2.py (declaring mamba2 = True) passes a campaign of drawn GDN,
  Mamba-2 and mixed presets, reaching the Mamba-2 thresholds; one without D x diverges; a class
  that does not declare it is refused a Mamba-2 preset naming the layer;
- FP16 h: both pass campaigns in h modes f16 and f16-pool, reaching the FP16 store's clamp and
  the converter's overflow; FP16 stores that overflow to inf, a decode that skips
  to_f16 and an f16-pool prefill that bypasses the staging blob are caught; a class declaring
  f16_store = "inf" is judged on it and diverges when forced onto the contract's clamp;
- its deliberate fault (commit keeps the live state) is caught and shrunk to a short script;
- a Python exception in a method is a divergence naming the exception; a refusal of the right
  kind from a class with its own legality agrees, one of the wrong kind diverges;
- the geometry sent with create_pool names every layer's state fields with the trace format's
  shapes (GDN, Mamba-2, PLE), and a geometry without them (an older ssmcheck) or none gives the same;
- declared numerics: a class computing torch's gates is checked on them, and diverges when forced
  onto the contract's clamped gates;
- the vLLM (GDN and Mamba-2) and fla adapters import, parse their options, allocate slots as the
  contract does and declare their conventions; without torch they are exit 2 naming it;
- ssmcheck without the bridge refuses python: backends with exit 2;
- replies the wire cannot carry are errors of their call, naming what: a slot or last_verify_k
  beyond a C int (never truncated), a slot that is not an integer, a complex output or h (never
  cast); the host refuses a frame header announcing more than plugin/host_wire.h's bounds, and
  its bounds are that header's;
- ssmcheck.locate refuses explicit paths that name nothing and finds the capture library beside a
  linked executable's target and in its prefix (PATH and a venv's prefix: test_install.py);
- TraceWriter's traces replay, a wrongly shaped array is a ValueError naming the field, and an
  abandoned capture is recovered by replay.

    SSMCHECK=build/ssmcheck PYTHONPATH=python /usr/bin/python3 python/tests/test_bridge.py

(ctest python_bridge runs it so; without PYTHONPATH the package must be installed: pip install ./python.)
The test_* functions are pytest tests too (no fixtures; each fails when one of its checks failed).
Seed: $SSMCHECK_SEED (printed); cases: $SSMCHECK_CASES.
"""
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time

import numpy as np

import ssmcheck  # the package: installed (pip install ./python) or on PYTHONPATH (ctest sets it)
from ssmcheck import bridge

here = os.path.dirname(os.path.abspath(__file__))
# The numpy examples are scripts beside the package, not part of it: imported by path (the host
# process gets this sys.path from ssmcheck.run and imports them the same way).
sys.path.insert(0, os.path.join(here, "..", "examples"))
from numpy_gdn import NumpyGdn  # noqa: E402
from numpy_mamba2 import NumpyMamba2  # noqa: E402

SEED = int(os.environ.get("SSMCHECK_SEED", "20261130"))
CASES = int(os.environ.get("SSMCHECK_CASES", "40"))
failures = []
_tests = []  # every @case, in the order of this file


def ssmcheck_exe():
    """$SSMCHECK, PATH or the install prefix (ssmcheck.locate), resolved when a test needs it so
    that importing this module (pytest, the host process) needs none."""
    return ssmcheck.locate.find_ssmcheck()


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


def case(f):
    """A group of checks: a pytest test (it takes no fixtures; its name is test_*) that fails
    when one of its checks failed, and a step of main(), which reports them all."""
    def test():
        print("-- %s (seed %d: rerun with SSMCHECK_SEED=%d; %d cases)" % (f.__name__, SEED, SEED, CASES), flush=True)
        before = len(failures)
        with tempfile.TemporaryDirectory() as tmp:
            f(tmp)
        assert len(failures) == before, "; ".join(failures[before:])
    test.__name__, test.__qualname__, test.__doc__ = f.__name__, f.__qualname__, f.__doc__
    test.__module__ = f.__module__
    _tests.append(test)
    return test


def seeded_fuzz(tmp, mode="f32"):
    """A seeded campaign's arguments ($SSMCHECK_SEED, $SSMCHECK_CASES)."""
    return ["fuzz", "--h-mode", mode, "--seed", str(SEED), "--cases", str(CASES), "--max-ops", "25", "--out", tmp]


def run(args, backend, tmp, name):
    out = os.path.join(tmp, name + ".log")
    with open(out, "w") as f:
        rc = ssmcheck.run(args, backend, ssmcheck=ssmcheck_exe(), stdout=f, stderr=subprocess.STDOUT)
    text = open(out).read()
    return rc, text


class Boom(NumpyGdn):
    name = "numpy GDN whose decode raises"

    def decode(self, slots, inputs):
        raise ZeroDivisionError("boom in decode")


class Hostile(NumpyGdn):
    """Misbehaves in one call (options fault=KIND,at=CALL[,skip=N]: from its (N+1)th call on): ends
    its process, crashes, hangs, raises or prints; the rest is NumpyGdn. Run in its host process, none of it
    may end ssmcheck, change its exit code or reach its stdout."""
    name = "numpy GDN that misbehaves"

    def __init__(self, options=""):
        super().__init__("")
        opts = dict(kv.split("=", 1) for kv in options.split(",") if kv)
        self.fault, self.at, self.skip = opts.get("fault"), opts.get("at"), int(opts.get("skip", 0))

    def _fault(self, call):
        if call != self.at:
            return
        if self.skip > 0:
            self.skip -= 1
            return
        f = self.fault
        if f == "sys_exit0":
            sys.exit(0)
        if f == "os_exit0":
            os._exit(0)
        if f == "keyboard_interrupt":
            raise KeyboardInterrupt()
        if f == "segv":
            import ctypes
            ctypes.string_at(0)
        if f == "hang":
            time.sleep(1e6)
        if f == "print":
            for _ in range(2000):
                print("x" * 100)
        if f == "raise":
            raise RuntimeError("boom in " + call)

    def create_pool(self, layers, pool):
        self._fault("create_pool")
        return super().create_pool(layers, pool)

    def prefill(self, slot, inputs):
        self._fault("prefill")
        return super().prefill(slot, inputs)

    def decode(self, slots, inputs):
        self._fault("decode")
        return super().decode(slots, inputs)

    def commit(self, slot, n, k):
        self._fault("commit")
        return super().commit(slot, n, k)

    def export_state(self, slot):
        self._fault("export_state")
        return super().export_state(slot)


class DigestedHostile(Hostile):
    """Hostile with field digests: ssmcheck asks the bridge to send every claimed slot's digests
    with each op's reply, so export_state runs right after the op, in the op's call."""
    name = "numpy GDN with field digests that misbehaves"
    field_digests = True


class OwnLegality(NumpyGdn):
    """Makes the one legality decision the script below needs, with a kind given by its option."""
    own_legality = True

    def __init__(self, options=""):
        super().__init__("")
        self.kind = dict(kv.split("=", 1) for kv in options.split(",") if kv).get("kind", "commit_zero")

    def commit(self, slot, n, k):
        if n == 0:
            raise ssmcheck.Refused(self.kind, "commit with n == 0")
        super().commit(slot, n, k)


class VllmProfile(NumpyGdn):
    """Exports in vLLM's conventions: the causal_conv1d window of d_conv-1 columns, h transposed."""
    name = "numpy GDN in vLLM's layouts"
    conv_window = "d_conv-1"
    h_layout = "nv,vd,kd"

    def export_state(self, slot):
        st = NumpyGdn.export_state(self, slot)
        t = lambda h: None if h is None else np.ascontiguousarray(h.transpose(0, 2, 1))
        w = lambda c: None if c is None else np.ascontiguousarray(c[:, self.keep])
        for L in st.layers:
            L.h, L.h_checkpoint, L.conv, L.conv_checkpoint = t(L.h), t(L.h_checkpoint), w(L.conv), w(L.conv_checkpoint)
            L.h_intermediates = [t(h) for h in L.h_intermediates]
            L.conv_intermediates = [w(c) for c in L.conv_intermediates]
        return st

    keep = slice(1, None)  # the newest d_conv-1 columns


class WrongProfile(VllmProfile):
    keep = slice(None, -1)  # the oldest d_conv-1 columns: the newest input is lost


class PleNotRolledBack(NumpyGdn):
    """A partial accept keeps the PLE carry of all K rows (bug class 15)."""
    name = "numpy GDN whose PLE carry is not rolled back"

    def restore(self, slot, n):
        kept = self.slots[slot].ple
        super().restore(slot, n)
        if n > 0:
            self.slots[slot].ple = kept


class Mamba2WithoutD(NumpyMamba2):
    """Forgets the skip term D x of a Mamba-2 output: the outputs diverge, never the state."""
    name = "numpy Mamba-2 without D x"

    def step(self, L, h, win, row):
        if L.kind == "mamba2":
            D, L.D = L.D, np.zeros_like(L.D)
            try:
                return super().step(L, h, win, row)
            finally:
                L.D = D
        return super().step(L, h, win, row)


class Digested(NumpyGdn):
    """NumpyGdn with field digests (field_digest.py): ssmcheck asks for its exports' digests after
    every op and reads back only the fields that changed."""
    name = "numpy GDN with field digests"
    field_digests = True


def verdict_lines(text):
    """A campaign's summary without its timing: the counts line (rate removed) and the coverage lines."""
    keep = []
    for line in text.splitlines():
        if re.match(r"\d+ cases? \(case", line):
            keep.append(re.sub(r" in [0-9.]+ s \([0-9,]+ ops/s\)", "", line))
        elif re.match(r"  (ops|accept positions|refused|thresholds and axes):", line):
            keep.append(line)
    return keep


class F16StoreInf(NumpyGdn):
    """Computes (and declares) torch's FP16 store: overflow to inf, no clamp."""
    name = "numpy GDN with torch's FP16 store"
    f16_store = "inf"


class TorchGates(NumpyGdn):
    """Computes (and declares) torch's gates: softplus linear above 20, no clamps."""
    name = "numpy GDN with torch's gates"
    gates = "torch"


class BadDeclaration(NumpyGdn):
    gates = "tanh"


class BadReply(NumpyGdn):
    """Answers one call with something the wire cannot carry (options fault=KIND): alloc's slot
    2**40 (a C int would truncate it to 0, the slot it really took) or 0.5 off an integer,
    prefill's output of layer 0 complex, export_state's h of layer 0 complex or its
    last_verify_k 2**32 (0 once truncated, as the reference's). Each must be an error of that
    call naming what it refused. fault=numpy_slot answers a numpy integer: accepted."""
    name = "numpy GDN whose replies the wire cannot carry"

    def __init__(self, options=""):
        super().__init__("")
        self.fault = dict(kv.split("=", 1) for kv in options.split(",") if kv).get("fault")

    def alloc(self, min_capacity):
        slot = super().alloc(min_capacity)
        return dict(huge_slot=slot + (1 << 40), fraction_slot=slot + 0.5, numpy_slot=np.int64(slot)).get(self.fault, slot)

    def prefill(self, slot, inputs):
        outs = super().prefill(slot, inputs)
        if self.fault == "complex_output":
            outs[0] = outs[0] + 1j
        return outs

    def export_state(self, slot):
        st = super().export_state(slot)
        if self.fault == "complex_h":
            st.layers[0].h = st.layers[0].h.astype(np.complex64)
        if self.fault == "huge_k":
            st.last_verify_k = 1 << 32
        return st


@case
def test_campaigns(tmp):
    """numpy GDN, and numpy GDN with Mamba-2 layers, pass seeded campaigns in h mode f32."""
    fuzz = seeded_fuzz(tmp)
    rc, text = run(fuzz + ["--backend", "python:numpy-gdn"], NumpyGdn, tmp, "campaign")
    check(rc == 0 and ": passed" in text, "numpy GDN passes a %d-case campaign through the bridge (rc %d)" % (CASES, rc))
    if rc != 0:
        print(text[-3000:])

    rc, text = run(fuzz + ["--backend", "python:numpy-mamba2"], NumpyMamba2, tmp, "campaign_mamba2")
    axes = [l for l in text.splitlines() if "thresholds and axes:" in l]
    # a drawn case is a Mamba-2 preset about a third of the time: 40 cases without one is ~1e-8
    check(rc == 0 and ": passed" in text and axes and "[Mamba-2 " in axes[0],
          "numpy GDN and Mamba-2 passes a %d-case campaign of both kinds through the bridge (rc %d)" % (CASES, rc))
    if rc != 0:
        print(text[-3000:])


@case
def test_campaigns_f16(tmp):
    """FP16 h (numpy_gdn and numpy_mamba2 run every h mode): campaigns in h modes f16 and f16-pool
    reach the FP16 store's clamp and the converter's overflow."""
    for mode in ("f16", "f16-pool"):
        rc, text = run(seeded_fuzz(tmp, mode) + ["--backend", "python:numpy-mamba2"], NumpyMamba2, tmp, "campaign_" + mode)
        axes = next((l for l in text.splitlines() if "thresholds and axes:" in l), "")
        reached = all(a in axes for a in ("[f16 store clamp]", "[f16 converter overflow]"))  # NaN stores: most seeds
        check(rc == 0 and ": passed" in text and reached,
              "numpy GDN and Mamba-2 passes a %d-case campaign in h mode %s, FP16 store and converter "
              "branches reached (rc %d)" % (CASES, mode, rc))
        if rc != 0 or not reached:
            print(text[-3000:])


@case
def test_f16_faults(tmp):
    """FP16 faults are caught; a class declaring f16_store = "inf" is judged on it."""
    rc, text = run(["fuzz", "--h-mode", "f16-pool", "--seed", str(SEED), "--cases", "100", "--max-ops", "25", "--out", tmp,
                    "--backend", "python:numpy-gdn,fault=f16_store_inf"], NumpyGdn, tmp, "f16_store_inf")
    script = [l for l in text.splitlines() if l.strip().startswith("script:")]
    check(rc == 1 and script and "decode" in script[0] and script[0].count(";") <= 3,
          "FP16 stores overflowing to inf (declared: clamped) are caught and shrunk: %s (rc %d)"
          % (script[0].strip() if script else "no script", rc))
    rc, text = run(["check", "--h-mode", "f16", "--ops", "alloc; prefill 2; decode",
                    "--backend", "python:numpy-gdn,fault=no_to_f16"], NumpyGdn, tmp, "no_to_f16")
    check(rc == 1 and "h_is_f16 differs" in text, "f16 mode: a decode that skips to_f16 diverges at h_is_f16 (rc %d)" % rc)
    rc, text = run(["check", "--h-mode", "f16-pool", "--ops", "alloc; prefill 2",
                    "--backend", "python:numpy-gdn,fault=no_stage"], NumpyGdn, tmp, "no_stage")
    check(rc == 1 and "FAIL op 1 'prefill 2', seq 0 (slot 0), h_prefill_stage" in text,
          "f16-pool: a prefill that bypasses the staging blob diverges there (rc %d)" % rc)
    overflow = ["check", "--preset", "odd-a", "--h-mode", "f16-pool", "--slots", "1", "--capacity", "0",
                "--conv-capacity", "0", "--seed", "0", "--decay", "1", "--value-scale", "200000",
                "--ops", "alloc; prefill 1; decode", "--backend", "python:f16-store-inf"]
    rc, text = run(overflow, F16StoreInf, tmp, "f16_store_declared")
    check(rc == 0 and "--f16-store inf" in text, "a class declaring f16_store = 'inf' is checked on it (rc %d)" % rc)
    rc, text = run(overflow + ["--f16-store", "saturate"], F16StoreInf, tmp, "f16_store_forced")
    check(rc == 1 and "DIFFERENT" in text, "the same class forced onto the contract's clamped store diverges (rc %d)" % rc)


@case
def test_field_digests(tmp):
    """field_digests = True: the digest changes with any one word and with an order, equal arrays
    share it; a class that sets it gets the same campaign verdicts, and its faults are caught."""
    from ssmcheck.field_digest import Digester
    rng = np.random.default_rng(SEED)
    a = rng.standard_normal((4, 8, 16)).astype(np.float32)
    word = int(rng.integers(a.size))
    one = a.copy()
    one.reshape(-1)[word] = np.nextafter(one.reshape(-1)[word], np.float32(np.inf))  # the lowest bit of one word
    swapped = a.copy().reshape(-1)
    swapped[[0, 1]] = swapped[[1, 0]]
    half = a.astype(np.float16)
    d = Digester().digests([a, a.copy(), one, swapped.reshape(a.shape), half, half.copy()])
    check(d[0] == d[1] and d[4] == d[5], "equal arrays have equal digests (float32 and float16)")
    check(d[2] != d[0], "one word's lowest bit changed (word %d of seed %d) changes the digest" % (word, SEED))
    check(d[3] != d[0], "two words swapped change the digest")
    check(all(0 <= x < 1 << 64 for x in d), "digests are 64-bit unsigned")
    try:  # torch tensors (an adapter's, on its GPU; here on the CPU) digest as the same numpy arrays
        import torch
    except ImportError:
        print("skip torch digests: torch is not installed here", flush=True)
    else:
        t = torch.from_numpy(a)
        ints = np.arange(a.size, dtype=np.int32).reshape(a.shape)
        mixed = [t, t.transpose(1, 2), t.reshape(-1), torch.from_numpy(half), torch.from_numpy(ints), t[1]]
        want = Digester().digests([a, np.ascontiguousarray(a.transpose(0, 2, 1)), a.reshape(-1), half,
                                   ints.astype(np.float32), a[1]])
        check(Digester().digests(mixed) == want, "torch tensors (views, FP16, int32 as float32, one size in "
              "several shapes) digest as the numpy arrays the bridge would send")

    # the default (auto) asks for digests only on live states of 64 KiB and more; these presets are
    # smaller, so the path is forced on (SSMCHECK_FIELD_DIGESTS, docs/plugins.md "Field digests")
    # The digests travel with each op's reply unless SSMCHECK_EXPORTS_WITH_OPS=off: both give the
    # same campaign.
    os.environ["SSMCHECK_FIELD_DIGESTS"] = "on"
    for mode in ("f32", "f16-pool"):
        rc, plain = run(seeded_fuzz(tmp, mode) + ["--backend", "python:numpy-gdn"], NumpyGdn, tmp, "plain_" + mode)
        rc2, digested = run(seeded_fuzz(tmp, mode) + ["--backend", "python:numpy-gdn"], Digested, tmp, "digested_" + mode)
        os.environ["SSMCHECK_EXPORTS_WITH_OPS"] = "off"
        rc3, own_calls = run(seeded_fuzz(tmp, mode) + ["--backend", "python:numpy-gdn"], Digested, tmp, "own_calls_" + mode)
        del os.environ["SSMCHECK_EXPORTS_WITH_OPS"]
        same = verdict_lines(plain) == verdict_lines(digested) == verdict_lines(own_calls) and len(verdict_lines(plain)) >= 3
        check(rc == rc2 == rc3 == 0 and same, "h mode %s: the class with field digests, sent with the ops' replies or "
              "asked for in calls of their own, passes the campaign with the same cases, ops and coverage as "
              "without (rc %d, %d, %d)" % (mode, rc, rc2, rc3))
        if not same:
            print("\n".join(verdict_lines(plain)), "\n--\n", "\n".join(verdict_lines(digested)), "\n--\n",
                  "\n".join(verdict_lines(own_calls)))
    # a fault of export_state while the bridge digests the slots after an op is one of export_state
    # after that op: a crash or hang named so by ssmcheck, a Python exception by the bridge (the
    # digests come with an op's reply once the caller read a state after the op before: after alloc
    # its digests and its state are asked for in calls, the two export_state calls skipped;
    # prefill's digests come with its reply)
    script = ["--call-timeout", "2", "check", "--h-mode", "f32", "--ops", "alloc; prefill 3; decode"]
    says = dict(segv="killed by signal 11", hang="did not answer within 2 s", raise_="RuntimeError: boom in export_state")
    for fault, expected in says.items():
        rc, text = run(script + ["--backend", "python:hostile,fault=%s,at=export_state,skip=2" % fault.rstrip("_")],
                       DigestedHostile, tmp, "digested_hostile_" + fault)
        check(rc == 1 and expected in text and "export_state(slot 0), sent with the reply of prefill" in text,
              "with field digests, export_state doing %s after prefill is named as that (rc %d)" % (fault, rc))
        if rc != 1 or "sent with the reply of prefill" not in text:
            print(text[-1500:])
    # replay reads a state only where its trace has one: nothing is digested after the other ops
    trace = os.path.join(tmp, "last_state.h5")
    p = subprocess.run([ssmcheck_exe(), "record", "--ops", "alloc; prefill 3; decode; decode", "--states", "last",
                        "-o", trace], capture_output=True, text=True)
    rc, text = run(["replay", trace, "--backend", "python:hostile,fault=raise,at=export_state"], DigestedHostile,
                   tmp, "digested_replay")
    check(p.returncode == 0 and rc == 1 and "export_state(slot 0) failed: python export_state: RuntimeError: boom" in text
          and "sent with the reply" not in text,
          "replaying a trace with a state after its last op only, the class's export_state is first called for "
          "that state, never after the ops before it, and its failure is the replay's divergence there (rc %d, %d)"
          % (p.returncode, rc))
    rerun = [l.split("rerun:", 1)[1].strip() for l in text.splitlines() if l.strip().startswith("rerun:")]
    rerun_rc = subprocess.run(["/bin/sh", "-c", rerun[0]], env=dict(os.environ, SSMCHECK=ssmcheck_exe()), cwd=tmp,
                              capture_output=True, text=True, timeout=300) if rerun else None
    check(rerun and "fault=raise,at=export_state" in rerun[0] and rerun_rc.returncode == 1 and
          "boom in export_state" in rerun_rc.stdout,
          "the replay's rerun line keeps the backend's options and, run by the shell, diverges again: %s"
          % (rerun[0][-120:] if rerun else "none"))
    if rerun_rc is not None and rerun_rc.returncode != 1:
        print(rerun_rc.stdout[-1500:], rerun_rc.stderr[-1500:])
    rc, text = run(["fuzz", "--h-mode", "f16-pool", "--seed", str(SEED), "--cases", "100", "--max-ops", "25", "--out", tmp,
                    "--backend", "python:numpy-gdn,fault=f16_store_inf"], Digested, tmp, "digested_fault")
    script = [l for l in text.splitlines() if l.strip().startswith("script:")]
    check(rc == 1 and script and "decode" in script[0],
          "with field digests, FP16 stores overflowing to inf are still caught and shrunk: %s (rc %d)"
          % (script[0].strip() if script else "no script", rc))
    os.environ["SSMCHECK_EXPORTS_WITH_OPS"] = "maybe"
    rc, text = run(seeded_fuzz(tmp) + ["--backend", "python:numpy-gdn"], Digested, tmp, "with_ops_bogus")
    del os.environ["SSMCHECK_EXPORTS_WITH_OPS"]
    check(rc == 2 and "SSMCHECK_EXPORTS_WITH_OPS is 'maybe'" in text and "FAILED" not in text,
          "an unknown SSMCHECK_EXPORTS_WITH_OPS is refused by name before a campaign's first case (rc %d)" % rc)
    os.environ["SSMCHECK_FIELD_DIGESTS"] = "bogus"
    rc, text = run(["check", "--ops", "alloc", "--backend", "python:numpy-gdn"], Digested, tmp, "digests_bogus")
    check(rc == 2 and "SSMCHECK_FIELD_DIGESTS is 'bogus'" in text,
          "an unknown SSMCHECK_FIELD_DIGESTS is refused by name (rc %d)" % rc)
    del os.environ["SSMCHECK_FIELD_DIGESTS"]


@case
def test_mamba2_layers(tmp):
    """Mixed models agree; a Mamba-2 output without D x diverges; a class without mamba2 = True is
    refused a Mamba-2 preset."""
    rc, text = run(["check", "--preset", "hybrid-odd", "--h-mode", "f32", "--ops",
                    "alloc; prefill 3; verify 3; commit 2 3; decode; rollback 0", "--backend", "python:numpy-mamba2"],
                   NumpyMamba2, tmp, "hybrid")
    check(rc == 0 and "agree" in text, "a model mixing GDN and Mamba-2 layers agrees through the bridge (rc %d)" % rc)
    rc, text = run(["check", "--preset", "mamba-odd-a", "--h-mode", "f32", "--ops", "alloc; prefill 2",
                    "--backend", "python:no-d"], Mamba2WithoutD, tmp, "mamba2_no_d")
    check(rc == 1 and "DIFFERENT" in text and "output" in text, "a Mamba-2 output without D x diverges (rc %d)" % rc)
    rc, text = run(["check", "--preset", "mamba-odd-a", "--h-mode", "f32", "--ops", "alloc",
                    "--backend", "python:numpy-gdn"], NumpyGdn, tmp, "gdn_only")
    check(rc == 2 and "mamba2(" in text and "SSMP_MAMBA2" in text,
          "a class without mamba2 = True is refused a Mamba-2 preset naming the layer (rc %d)" % rc)


@case
def test_ple_carries(tmp):
    """PLE carries (numpy_gdn declares ple = True): a fixed script through every transition of the
    carry agrees; a carry not rolled back on a partial accept is caught and shrunk."""
    rc, text = run(["check", "--preset", "ple-odd", "--h-mode", "f32", "--ops",
                    "alloc; prefill 3; checkpoint; verify 4; commit 2 4; decode; verify 3; rollback 1; "
                    "snapshot_save 0; rollback 0; snapshot_restore 0; decode", "--backend", "python:numpy-gdn"],
                   NumpyGdn, tmp, "ple")
    check(rc == 0 and "agree" in text, "PLE carries agree through the bridge (rc %d)" % rc)
    rc, text = run(["fuzz", "--preset", "ple-odd", "--h-mode", "f32", "--seed", str(SEED), "--cases", "100",
                    "--out", tmp, "--backend", "python:ple-not-rolled-back"], PleNotRolledBack, tmp, "ple_fault")
    script = [l for l in text.splitlines() if l.strip().startswith("script:")]
    check(rc == 1 and "ple_" in text and script and script[0].count(";") <= 3,
          "a PLE carry not rolled back is caught and shrunk: %s (rc %d)" % (script[0].strip() if script else "no script", rc))


@case
def test_fault_shrunk(tmp):
    """The commit_keeps_live fault is caught and shrunk; its rerun line goes through ssmcheck.run."""
    rc, text = run(["fuzz", "--h-mode", "f32", "--seed", "3", "--cases", "200", "--out", tmp,
                    "--backend", "python:numpy-gdn,fault=commit_keeps_live"], NumpyGdn, tmp, "fault")
    script = [l for l in text.splitlines() if l.strip().startswith("script:")]
    check(rc == 1 and script and "commit" in script[0] and script[0].count(";") <= 3,
          "the commit_keeps_live fault is caught and shrunk: %s (rc %d)" % (script[0].strip() if script else "no script", rc))
    rerun = [l.split("rerun:", 1)[1].strip() for l in text.splitlines() if l.strip().startswith("rerun:")]
    check(rerun and "ssmcheck.host import load_class" in rerun[0] and
          "--backend python:numpy-gdn,fault=commit_keeps_live" in rerun[0],
          "the rerun line of a python: backend is a shell command through ssmcheck.run: %s" % (rerun[0] if rerun else "none"))
    if rerun:  # and it reproduces: run by the shell, it fails the same way
        env = dict(os.environ, SSMCHECK=ssmcheck_exe())
        p = subprocess.run(["/bin/sh", "-c", rerun[0]], env=env, cwd=tmp, capture_output=True, text=True, timeout=300)
        check(p.returncode == 1 and "DIVERGED" in p.stdout,
              "the python rerun line, run by the shell, diverges again (rc %d): %s" % (p.returncode, p.stdout[-300:]))


@case
def test_exceptions_and_containment(tmp):
    """A Python exception is a divergence; whatever a class does in a call, ssmcheck's exit code
    and verdict stand."""
    rc, text = run(["check", "--h-mode", "f32", "--ops", "alloc; decode", "--backend", "python:boom"], Boom, tmp, "boom")
    check(rc == 1 and "ZeroDivisionError: boom in decode" in text, "a Python exception is a divergence naming it (rc %d)" % rc)

    # containment: whatever the class does in a call, ssmcheck's exit code and verdict stand
    script = ["check", "--h-mode", "f32", "--ops", "alloc; prefill 3; verify 3; commit 2 3; decode"]
    says = dict(sys_exit0="exited 0", os_exit0="exited 0", keyboard_interrupt="killed by signal 2 (Interrupt)",
                segv="killed by signal 11", hang="did not answer within 2 s (--call-timeout) and was killed")
    for fault, expected in says.items():
        for call in ("prefill", "commit", "decode", "export_state"):
            rc, text = run(["--call-timeout", "2"] + script + ["--backend", "python:hostile,fault=%s,at=%s" % (fault, call)],
                           Hostile, tmp, "hostile_%s_%s" % (fault, call))
            check(rc == 1 and expected in text and " during %s(" % call in text,
                  "a class whose %s does %s: exit 1 naming the call (rc %d)" % (call, fault, rc))
    rc, text = run(script + ["--backend", "python:hostile,fault=os_exit0,at=create_pool"], Hostile, tmp, "hostile_pool")
    check(rc == 2 and "exited 0" in text and " during create_pool(" in text,
          "a class that ends its process in create_pool: exit 2 naming it (rc %d)" % rc)
    out = os.path.join(tmp, "verdict.json")
    with open(out, "w") as f:
        rc = ssmcheck.run(script + ["--json", "-", "--backend", "python:hostile,fault=print,at=decode"], Hostile,
                          ssmcheck=ssmcheck_exe(), stdout=f, stderr=subprocess.DEVNULL)
    text = open(out).read()
    try:
        json.loads(text)
        parsed = True
    except ValueError:
        parsed = False
    check(rc == 0 and parsed and "xxxxxxxx" not in text, "what a class prints never reaches --json - (rc %d)" % rc)
    try:
        ssmcheck.run(["backends"], lambda options: NumpyGdn(options), ssmcheck=ssmcheck_exe())
        check(False, "a lambda is refused")
    except TypeError as e:
        check("top level" in str(e), "a class the host cannot import is refused naming why: %s" % e)


@case
def test_own_legality(tmp):
    """A class with its own legality: a refusal of the contract's kind agrees, another diverges."""
    script = ["check", "--h-mode", "f32", "--ops", "alloc; verify 2; commit 0 2; commit 1 2"]
    rc, text = run(script + ["--backend", "python:own"], OwnLegality, tmp, "own")
    check(rc == 0, "a refusal of the contract's kind agrees (rc %d)" % rc)
    rc, text = run(script + ["--backend", "python:own,kind=capacity"], OwnLegality, tmp, "own_wrong")
    check(rc == 1 and "capacity" in text, "a refusal of another kind diverges (rc %d)" % rc)


class GeometryChecked(NumpyMamba2):
    """NumpyMamba2 (GDN and Mamba-2 layers, PLE carries) that refuses to run unless ssmcheck sent
    each layer's state fields by name in its geometry (plugin/hosted_plugin.cpp's "state"), with the
    shapes the trace format gives them (docs/trace-format.md)."""
    name = "numpy layers checking the geometry sent"

    def create_pool(self, layers, pool):
        for l, L in enumerate(layers):
            g = L.geometry or {}
            if "state" not in g:
                raise ValueError("layer %d: no state fields in the geometry ssmcheck sent: %r" % (l, g))
            want = dict(h=tuple(L.h_shape), conv=(L.conv_dim, L.d_conv))
            if L.ple is not None:
                p = L.ple
                want.update(ple_history=(p.ngram_size - 1,), ple_conv=((p.k_size - 1) * p.dilation, p.channels))
            if L.state_shapes != want:
                raise ValueError("layer %d: state fields %r, the trace format's %r" % (l, L.state_shapes, want))
        super().create_pool(layers, pool)


@case
def test_geometry_by_name(tmp):
    """The pipe sends each layer's state fields by name; the bridge reads them from it, and a peer
    that sends none (an older ssmcheck, a Layer built by hand) gets the same shapes."""
    for preset in ("hybrid-odd", "ple-odd"):
        rc, text = run(["check", "--preset", preset, "--h-mode", "f32", "--ops", "alloc; prefill 3; verify 2; commit 1 2",
                        "--backend", "python:geometry"], GeometryChecked, tmp, "geometry-" + preset)
        check(rc == 0, "%s: every layer's geometry names its state fields, with the trace format's shapes (rc %d)%s"
              % (preset, rc, "" if rc == 0 else "\n" + text[-2000:]))
    gdn = dict(kind="gdn", nk=2, nv=6, kd=5, vd=7, d_conv=4, ple=dict(channels=3, ngram_size=3, k_size=4, dilation=2))
    sent = dict(gdn, geometry=dict(conv_dim=2 * 2 * 5 + 6 * 7, out_dim=42, h_shape=[6, 5, 7], inputs=[["x", 62], ["a", 6]],
                                   weights=[], state=dict(h=[6, 5, 7], conv=[62, 4], ple_history=[2], ple_conv=[6, 3])))
    older = dict(sent, geometry={k: v for k, v in sent["geometry"].items() if k != "state"})
    shapes = [bridge._geometry(d)[4] for d in (sent, older, gdn)]
    check(shapes[0] == shapes[1] == shapes[2] == dict(h=(6, 5, 7), conv=(62, 4), ple_history=(2,), ple_conv=(6, 3)),
          "the sent state fields, and those of a geometry without them or of none, agree: %r" % shapes)
    odd = dict(sent, geometry=dict(sent["geometry"], state=dict(h=[6, 5, 7], conv=[62, 3], ple_history=[2], ple_conv=[6, 3])))
    check(bridge._geometry(odd)[4]["conv"] == (62, 3), "the sent shapes are what the bridge uses, not a formula")


@case
def test_convention_profiles(tmp):
    """Exports in vLLM's conventions pass; a window keeping the wrong columns diverges."""
    rc, text = run(seeded_fuzz(tmp) + ["--backend", "python:vllm-layout"], VllmProfile, tmp, "profile")
    check(rc == 0, "a class exporting in vLLM's conventions (d_conv-1 window, [nv][vd][kd] h) passes (rc %d)" % rc)
    rc, text = run(["check", "--h-mode", "f32", "--ops", "alloc; prefill 2", "--backend", "python:wrong"], WrongProfile, tmp, "wrong")
    check(rc == 1 and "conv" in text, "a d_conv-1 window that keeps the wrong columns diverges (rc %d)" % rc)


@case
def test_declared_numerics(tmp):
    """Declared numerics: the model follows the class's gates; forcing the contract's diverges."""
    extreme = ["check", "--preset", "odd-d", "--h-mode", "f32", "--slots", "1", "--capacity", "0", "--conv-capacity", "0",
               "--seed", "0", "--decay", "0", "--value-scale", "30", "--extreme-gates", "--ops", "alloc; prefill 2",
               "--backend", "python:torch-gates"]
    rc, text = run(extreme, TorchGates, tmp, "torch_gates")
    check(rc == 0 and "--gates torch" in text, "a class declaring torch's gates is checked on torch's gates (rc %d)" % rc)
    rc, text = run(extreme + ["--gates", "clamped"], TorchGates, tmp, "torch_gates_forced")
    check(rc == 1 and "DIFFERENT" in text, "the same class forced onto the contract's clamped gates diverges (rc %d)" % rc)
    rc, text = run(["check", "--ops", "alloc", "--backend", "python:bad"], BadDeclaration, tmp, "bad_declaration")
    check(rc == 2 and "declares gates 'tanh' (expected clamped or torch)" in text,
          "a declaration ssmcheck does not know is exit 2 naming it (rc %d)" % rc)
    rc, text = run(["backends", "python:torch-gates"], TorchGates, tmp, "torch_gates_declared")
    check(rc == 0 and "numerics: --gates torch" in text, "ssmcheck backends shows the declared numerics (rc %d)" % rc)
    rc, text = run(seeded_fuzz(tmp) + ["--backend", "python:torch-gates"], TorchGates, tmp, "torch_gates_campaign")
    check(rc == 0 and ": passed" in text, "a campaign (extreme gates drawn) on the declared torch gates passes (rc %d)" % rc)


@case
def test_adapters(tmp):
    """The third-party adapters (they need torch and a GPU: here only what runs without them)."""
    import importlib.util
    from ssmcheck.adapters import common, fla_gdn, vllm_gdn, vllm_mamba2
    check(common.parse_options("gating=contract,device=cuda:1", dict(gating=("vllm", "contract"), device=None))
          == dict(gating="contract", device="cuda:1"), "adapter options parse")
    try:
        common.parse_options("gatin=vllm", dict(gating=("vllm", "contract")))
        check(False, "a misspelt adapter option is refused")
    except ValueError as e:
        check("unknown option 'gatin'" in str(e) and "gating" in str(e), "a misspelt adapter option is refused: %s" % e)
    policy = common.SlotPolicy([3, 1, 4, 1])
    check([policy.alloc(1), policy.alloc(1), policy.alloc(2), policy.alloc(0)] == [1, 3, 0, 2],
          "the adapters' slot policy is the contract's (smallest fitting, lowest index)")
    check(vllm_gdn.VllmGdn.conv_window == "d_conv-1" and vllm_gdn.VllmGdn.gates == "torch" and
          fla_gdn.FlaGdn.h_layout == "nv,vd,kd" and fla_gdn.FlaGdn.f16_store == "inf",
          "the adapters declare their conventions")
    # vLLM's spec-decode slots (both vLLM adapters): contract slot s owns row slots 6s..6s+4
    # and home slot 6s+5 when the largest capacity is 4; the kernel starts from column n - 1
    spec = common.SpecSlots([3, 1, 4, 1])
    check((spec.M, spec.per, spec.count(4), spec.home(1), spec.row(1, 2), spec.phys(1, -1), spec.phys(1, 2))
          == (4, 6, 24, 11, 8, 11, 8) and
          spec.prefill(1, -1, 3) == ([11, 11, 11, 11], 4) and spec.prefill(1, 2, 2) == ([11, 11, 8], 3) and
          spec.from_draft(0, 1) == ([5, 1], 2) and spec.verify(2, -1) == ([12, 13, 14, 15, 16, 17], 6) and
          spec.verify(2, 0) == ([12, 13, 14, 15, 16, 17], 1),
          "the spec-decode slot indices (start column num_accepted - 1, row t's state to column t)")
    m2 = vllm_mamba2.VllmMamba2
    check(m2.mamba2 and m2.f16_store == "inf" and m2.f16_rows == "carried" and not m2.prefill_stage and
          getattr(m2, "conv_window", "d_conv") == "d_conv", "the Mamba-2 adapter declares its layers and conventions")
    if importlib.util.find_spec("torch") is None:
        rc, text = run(["check", "--ops", "alloc", "--backend", "python:vllm-gdn"], vllm_gdn.VllmGdn, tmp, "no_torch")
        check(rc == 2 and "torch" in text, "without torch an adapter is exit 2 naming what is missing (rc %d)" % rc)
        rc, text = run(["check", "--preset", "mamba-tiny", "--ops", "alloc", "--backend", "python:vllm-mamba2"],
                       vllm_mamba2.VllmMamba2, tmp, "no_torch_mamba2")
        check(rc == 2 and "No module named 'torch'" in text, "so is the Mamba-2 adapter (rc %d)" % rc)
    else:
        print("skip an adapter without torch: torch is installed here", flush=True)


@case
def test_without_bridge(tmp):
    """ssmcheck without the bridge refuses python: backends with exit 2."""
    p = subprocess.run([ssmcheck_exe(), "check", "--ops", "alloc", "--backend", "python:x"], capture_output=True, text=True)
    check(p.returncode == 2 and "SSMCHECK_PYTHON_HOST and SSMCHECK_PYTHON_CLASS are not set" in p.stderr,
          "without the bridge, python: backends are exit 2 with the reason (rc %d)" % p.returncode)


@case
def test_trace_writer(tmp):
    """The trace writer."""
    path = os.path.join(tmp, "example.h5")
    exe = ssmcheck_exe()
    env = dict(os.environ, SSMCHECK=exe)
    w = subprocess.run([sys.executable, os.path.join(here, "..", "examples", "write_trace.py"), path], env=env,
                       capture_output=True, text=True)
    r = subprocess.run([exe, "replay", path], capture_output=True, text=True)
    check(w.returncode == 0 and r.returncode == 0 and "AGREE: 7 ops" in r.stdout,
          "write_trace.py's trace replays (write rc %d, replay rc %d)" % (w.returncode, r.returncode))

    bad = os.path.join(tmp, "bad.h5")
    try:
        with ssmcheck.TraceWriter(bad, producer="test", backend="test", h_mode="f32") as tw:
            tw.set_pool(max_slots=1, conv_capacity=1)
            tw.add_layer(1, 2, 8, 12, 4, np.zeros((40, 4)), np.zeros(2), np.zeros(2), np.ones(12))
            with tw.op("alloc") as op:
                op.state(seq=0, slot=0, layers=[dict(h=np.zeros((2, 8, 12), np.float32), conv=np.zeros((40, 4), np.float32))])
            with tw.op("prefill 2") as op:
                op.inputs(entry=0, layer=0, x=np.zeros((2, 41)), a=np.zeros((2, 2)), b=np.zeros((2, 2)), z=np.zeros((2, 24)))
        check(False, "a wrongly shaped x raises")
    except ValueError as e:
        check("op 1 'prefill 2' entry 0 layer 0: x [rows][conv_dim] has shape (2, 41), expected (2, 40)" in str(e),
              "a wrongly shaped x is a ValueError naming op, entry, layer and field: %s" % e)
    try:
        with ssmcheck.TraceWriter(os.path.join(tmp, "t.h5"), producer="test", backend="test", h_mode="f32") as tw:
            tw.set_pool(max_slots=1, conv_capacity=1)
            tw.add_layer(1, 2, 8, 12, 4, np.zeros((40, 4)), np.zeros(2), np.zeros(2), np.ones(12))
            with tw.op("alloc") as op:  # h stored [nv][vd][kd]: the same size, transposed
                op.state(seq=0, slot=0, layers=[dict(h=np.zeros((2, 12, 8), np.float32), conv=np.zeros((40, 4), np.float32))])
        check(False, "a transposed h raises")
    except ValueError as e:
        check("seq 0 layer 0 h has shape (2, 12, 8), expected (2, 8, 12)" in str(e), "a transposed h is refused: %s" % e)
    r = subprocess.run([exe, "replay", bad], capture_output=True, text=True)
    check(r.returncode == 0 and "1 ops recovered" in r.stdout + r.stderr,
          "the abandoned capture keeps its finished op, and replay recovers it (rc %d)" % r.returncode)
    if r.returncode != 0 or "1 ops recovered" not in r.stdout + r.stderr:
        print(r.stdout[-1500:], r.stderr[-1500:])


@case
def test_replies_the_wire_cannot_carry(tmp):
    """A slot or last_verify_k beyond a C int, a slot that is not an integer, a complex output or
    h: errors of the call naming the value or the layer and field, never truncated or cast."""
    script = ["check", "--h-mode", "f32", "--ops", "alloc; prefill 2"]
    expect = dict(huge_slot="alloc returned slot 1099511627776, which does not fit the wire's 32-bit int",
                  fraction_slot="alloc returned slot 0.5 (float), expected an integer",
                  complex_output="prefill: output of layer 0 has dtype complex64; expected real numbers",
                  complex_h="export_state: layer 0 h has dtype complex64; expected real numbers",
                  huge_k="export_state returned last_verify_k 4294967296, which does not fit the wire's 32-bit int")
    for fault, says in expect.items():
        rc, text = run(script + ["--backend", "python:bad-reply,fault=" + fault], BadReply, tmp, "bad_reply_" + fault)
        check(rc == 1 and says in text, "a reply with %s is an error saying '%s' (rc %d)" % (fault, says, rc))
        if rc != 1 or says not in text:
            print(text[-2000:])
    rc, text = run(script + ["--backend", "python:bad-reply,fault=numpy_slot"], BadReply, tmp, "bad_reply_numpy_slot")
    check(rc == 0, "a slot given as a numpy integer is accepted (rc %d)" % rc)
    # the same checks on their own, as the host applies them
    for value, ok in ((7, True), (np.int32(-3), True), (2.0, True), ((1 << 31) - 1, True), (-(1 << 31), True),
                      (1 << 31, False), (-(1 << 31) - 1, False), (True, False), ("3", False), (float("nan"), False), (None, False)):
        try:
            got = bridge._int_reply(value, "alloc", "slot")
            check(ok and got == int(value), "integer reply %r accepted as %d" % (value, got))
        except ValueError as e:
            check(not ok and "alloc returned slot" in str(e), "integer reply %r refused: %s" % (value, e))


@case
def test_frame_limits(tmp):
    """The host's channel refuses a frame header announcing more JSON, arrays or arena than the
    wire's bounds (or a reserved word other than 0) before reading or allocating any of it; a
    frame within them is read."""
    def receive(header, body=b""):
        a, b = socket.socketpair()
        try:
            with tempfile.TemporaryFile() as arena:
                channel = bridge._Channel(b.detach(), arena.fileno())
                a.sendall(header + body)
                try:
                    return channel.recv()
                finally:
                    channel.sock.close()
        finally:
            a.close()
    text = b'{"call": "alloc"}'
    check(receive(bridge._HEADER.pack(len(text), 0, 0, 0), text) == ({"call": "alloc"}, []), "a frame within the bounds is read")
    H = bridge._HEADER
    for what, header, limit in (("JSON", H.pack(bridge.MAX_JSON + 1, 0, 0, 0), bridge.MAX_JSON),
                                ("arrays", H.pack(2, bridge.MAX_ARRAYS + 1, 0, 0), bridge.MAX_ARRAYS),
                                ("arena", H.pack(2, 0, 0, bridge.MAX_ARENA + 1), bridge.MAX_ARENA),
                                ("JSON (2^63 bytes)", H.pack(1 << 63, 0, 0, 0), bridge.MAX_JSON),
                                ("reserved word", H.pack(2, 0, 1, 0), 0)):
        try:
            receive(header)
            check(False, "a frame header announcing too much %s is refused" % what)
        except ValueError as e:
            check("malformed frame header" in str(e) and ("at most %d" % limit in str(e) or what == "reserved word"),
                  "a frame header announcing too much %s is refused: %s" % (what, e))


@case
def test_wire_bounds_match_the_cpp_side(tmp):
    """bridge.py's MAX_JSON, MAX_ARRAYS, MAX_ARENA and BELL_EXPORTING_OFFSET are
    plugin/host_wire.h's kMaxJson, kMaxArrays, kMaxArena and kBellExportingOffset (read from the
    header in a source tree)."""
    header = os.path.join(here, "..", "..", "plugin", "host_wire.h")
    if not os.path.exists(header):
        print("skip: %s is not here (not a source tree)" % header)
        return
    text = open(header).read()

    def value(name):
        m = re.search(r"constexpr\s+\w+\s+%s\s*=\s*([^;]+);" % name, text)
        if not m:
            return None
        expr = re.sub(r"\buint64_t\((\d+)\)|\b(\d+)u\b", lambda g: g.group(1) or g.group(2), m.group(1))
        return eval(expr, {"__builtins__": {}}) if re.fullmatch(r"[\d\s<()]+", expr) else None
    for cpp, py in (("kMaxJson", "MAX_JSON"), ("kMaxArrays", "MAX_ARRAYS"), ("kMaxArena", "MAX_ARENA"),
                    ("kBellExportingOffset", "BELL_EXPORTING_OFFSET")):
        check(value(cpp) == getattr(bridge, py), "bridge.%s = %d is host_wire.h's %s (%s)" % (py, getattr(bridge, py), cpp, value(cpp)))


@case
def test_locate(tmp):
    """ssmcheck.locate: an explicit path or $SSMCHECK / $SSMCHECK_CAPTURE_LIB naming nothing is an
    error naming it (never replaced by another ssmcheck); the library is found beside a symlinked
    executable's target and in <prefix>/lib of the prefix the executable lives in. (PATH and the
    install prefix of a venv: test_install.py.)"""
    from ssmcheck import locate
    saved = {k: os.environ.get(k) for k in ("SSMCHECK", "SSMCHECK_CAPTURE_LIB")}
    exe = os.path.realpath(ssmcheck_exe())
    try:
        missing = os.path.join(tmp, "nothing-here")
        for call, env, needle in ((lambda: locate.find_ssmcheck(missing), {}, "ssmcheck=%s (given)" % missing),
                                  (locate.find_ssmcheck, dict(SSMCHECK=missing), "$SSMCHECK=%s" % missing),
                                  (lambda: locate.find_capture_library(missing), {}, "lib=%s (given)" % missing),
                                  (locate.find_capture_library, dict(SSMCHECK_CAPTURE_LIB=missing, SSMCHECK=exe),
                                   "$SSMCHECK_CAPTURE_LIB=%s" % missing)):
            for k in saved:
                os.environ.pop(k, None)
            os.environ.update(env)
            try:
                call()
                check(False, "%s is refused" % needle)
            except FileNotFoundError as e:
                check(needle in str(e), "a path that names nothing is an error naming it: %s" % e)
        for k in saved:
            os.environ.pop(k, None)
        # <tmp>/bin/ssmcheck, a link to the build's: the library beside its target
        os.makedirs(os.path.join(tmp, "bin"))
        link = os.path.join(tmp, "bin", "ssmcheck")
        os.symlink(exe, link)
        got = locate.find_capture_library(ssmcheck=link)
        check(got == os.path.join(os.path.dirname(exe), locate.CAPTURE_LIBRARY), "beside a linked executable's target: %s" % got)
        # <tmp>/bin/ssmcheck, a file of its own: <tmp>/lib/libssmcheck_capture.so (an installed tree)
        os.remove(link)
        with open(link, "w") as f:
            f.write('#!/bin/sh\nexec "%s" "$@"\n' % exe)
        os.chmod(link, 0o755)
        os.makedirs(os.path.join(tmp, "lib"))
        open(os.path.join(tmp, "lib", locate.CAPTURE_LIBRARY), "w").close()
        got = locate.find_capture_library(ssmcheck=link)
        check(got == os.path.join(tmp, "lib", locate.CAPTURE_LIBRARY), "in the executable's prefix: %s" % got)
    finally:
        for k, v in saved.items():
            os.environ.pop(k, None)
            if v is not None:
                os.environ[k] = v


def main():
    print("python bridge tests: seed %d (rerun with SSMCHECK_SEED=%d), %d cases" % (SEED, SEED, CASES), flush=True)
    for t in _tests:  # in the order of this file
        try:
            t()
        except AssertionError:
            pass  # its checks are in failures
    if failures:
        sys.exit("%d python bridge checks failed: %s" % (len(failures), "; ".join(failures)))
    print("all python bridge checks passed")


if __name__ == "__main__":  # the host process imports this file for its classes
    main()

"""Recording from Hugging Face transformers (ssmcheck.hf_capture; ctest python_hf_capture, gpu label):
tiny random-weight models of the real architectures, cut to three layers with a full-attention
layer between two recurrent ones, run a greedy speculative loop (n-gram drafts, every second
proposal's last draft made wrong so that drafts get rejected, verify, accept, rejected drafts
restored from the hooks' copies by commit n K, rollback n and rollback 0 in turn) on CUDA when
there is one (else the CPU), and the traces replay:

- Qwen3-Next (GDN layers at the real head sizes kd = vd = 128, nk 1, nv 2, d_conv 4; float32):
  `ssmcheck replay` on the reference (the trace declares torch gates) and, with a GPU,
  `replay --backend cuda --gates clamped` (ssmcheck's kernels run the contract's gates; the test's
  A_log and dt_bias keep every gate inside the range where the two agree);
- Nemotron-H (Mamba-2 layers at the real head sizes hp 64, ns 128, nh 4, ng 2; float32; dt_bias
  chosen so softplus(dt + dt_bias) stays above time_step_min, where transformers' clamp does not
  act): replay on the reference and, with a GPU, on `--backend cuda`.

Each trace is checked for its ops (alloc, prefill, then checkpoint, verify K, commit/rollback or
decode, as the loop returned them, read back with h5py where it is installed), for two recorded
layers (the attention layer is not in the trace) and for the declared conventions.

    . .gpu/env && SSMCHECK=$PWD/build/ssmcheck PYTHONPATH=python python3 python/tests/test_hf_capture.py
Exit 77 (skipped) without torch or transformers (as on the CPU-only build machines), saying which.
$SSMCHECK_TEST_SEED picks the seed (printed). Under a sourced .gpu/env (LD_LIBRARY_PATH holding the
packed libraries), main() restarts itself without the entries holding libstdc++ or libssl so that
torch loads its own, loads the capture library's dependencies by full path (the system's copies
first), and hands the whole path back to the ssmcheck it runs.
"""
import ctypes
import os
import subprocess
import sys
import tempfile

SKIP = 77
SEED = int(os.environ.get("SSMCHECK_TEST_SEED", "4401"))
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


SHADOWING = ("libstdc++.so.6", "libssl.so.3")  # what a packed folder holds that shadows torch's own


def _restart_without_packed_libraries():
    """A sourced .gpu/env puts the packed libraries (libstdc++, libssl, ...) before torch's own:
    run this file again without the LD_LIBRARY_PATH entries that hold them (the others, such as a
    driver's folder, stay), keeping the whole path for the capture library and ssmcheck."""
    path = os.environ.get("LD_LIBRARY_PATH")
    if not path or "SSMCHECK_HF_TEST_LIBPATH" in os.environ:
        return
    entries = path.split(":")
    keep = [e for e in entries if not any(os.path.exists(os.path.join(e, lib)) for lib in SHADOWING)]
    if len(keep) == len(entries):
        return
    env = dict(os.environ, SSMCHECK_HF_TEST_LIBPATH=path, LD_LIBRARY_PATH=":".join(keep))
    if not keep:
        del env["LD_LIBRARY_PATH"]
    print("restarting without %s in LD_LIBRARY_PATH (kept for the capture library and ssmcheck)"
          % " ".join(e for e in entries if e not in keep), flush=True)
    os.execve(sys.executable, [sys.executable] + sys.argv, env)


def _packed_env():
    """The environment for ssmcheck: the LD_LIBRARY_PATH main() set aside, if any."""
    env = dict(os.environ)
    if os.environ.get("SSMCHECK_HF_TEST_LIBPATH"):
        env["LD_LIBRARY_PATH"] = os.environ["SSMCHECK_HF_TEST_LIBPATH"]
    return env


def _preload_capture_dependencies(lib):
    """Load what libssmcheck_capture.so needs by full path, the system's copy (or the one already
    loaded, torch's) first, the packed one where the system has none. Each is loaded RTLD_LOCAL:
    the capture library finds it by soname all the same, and it stays out of the global scope, where
    Debian's HDF5 1.10 would answer h5py's own HDF5 calls ("Not a datatype", H100, Dec 5)."""
    path = os.environ.get("SSMCHECK_HF_TEST_LIBPATH")
    if not path:
        return
    try:
        out = subprocess.run(["ldd", lib], env=dict(os.environ, LD_LIBRARY_PATH=path), capture_output=True,
                             text=True).stdout
    except OSError as e:
        print("note: ldd %s: %s (the capture library's dependencies are not preloaded)" % (lib, e))
        return
    packed = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[1] == "=>" and parts[2].startswith("/"):
            try:
                ctypes.CDLL(parts[0], mode=ctypes.RTLD_LOCAL)
            except OSError:
                packed.append(parts[2])
    while packed:  # a packed library may need another packed one first
        left = []
        for p in packed:
            try:
                ctypes.CDLL(p, mode=ctypes.RTLD_LOCAL)
            except OSError:
                left.append(p)
        if len(left) == len(packed):
            print("note: could not preload %s" % " ".join(left))
            break
        packed = left


def _imports():
    """(torch, transformers, why-not): the test needs both."""
    try:
        import torch
    except ImportError as e:
        return None, None, "torch is not installed (%s)" % e
    try:
        import transformers
    except ImportError as e:
        return torch, None, "transformers is not installed (%s)" % e
    for name in ("Qwen3NextConfig", "Qwen3NextForCausalLM", "NemotronHConfig", "NemotronHForCausalLM"):
        if not hasattr(transformers, name):
            return torch, None, "transformers %s has no %s" % (transformers.__version__, name)
    return torch, transformers, None


def hf_mixers(model):
    import ssmcheck.hf_capture as hf

    return hf.find_mixers(model)


def qwen3_next(transformers, torch, device):
    """Three layers: GDN, full attention, GDN; dense MLPs (mlp_only_layers: no MoE block); float32."""
    cfg = transformers.Qwen3NextConfig(
        vocab_size=48, hidden_size=128, intermediate_size=128, num_hidden_layers=3,
        layer_types=["linear_attention", "full_attention", "linear_attention"], num_attention_heads=2,
        num_key_value_heads=1, head_dim=64, linear_conv_kernel_dim=4, linear_key_head_dim=128,
        linear_value_head_dim=128, linear_num_key_heads=1, linear_num_value_heads=2, num_experts=4,
        num_experts_per_tok=2, moe_intermediate_size=64, shared_expert_intermediate_size=64,
        mlp_only_layers=[0, 1, 2], rms_norm_eps=1e-6, max_position_embeddings=512)
    model = transformers.Qwen3NextForCausalLM(cfg).to(device=device, dtype=torch.float32).eval()
    g = torch.Generator().manual_seed(SEED + 1)
    with torch.no_grad():
        for _, _, _, m in hf_mixers(model):
            # A in [0.1, 4] and dt = softplus(a + dt_bias) about 0.5..2: g = exp(-A dt) well inside
            # [1e-6, 1 - 1e-6] and a + dt_bias far below 20, where torch's and the contract's gates agree
            m.A_log.copy_(torch.empty(m.A_log.shape).uniform_(0.1, 4.0, generator=g).log())
            m.dt_bias.copy_(torch.empty(m.dt_bias.shape).uniform_(-0.5, 0.5, generator=g))
            m.norm.weight.copy_(torch.empty(m.norm.weight.shape).uniform_(0.5, 1.5, generator=g))
    return model


def nemotron_h(transformers, torch, device):
    """Three layers: Mamba-2, full attention, Mamba-2; float32; no mamba_ssm kernels."""
    cfg = transformers.NemotronHConfig(
        vocab_size=48, hidden_size=128, hybrid_override_pattern="M*M", num_hidden_layers=3, num_attention_heads=2,
        num_key_value_heads=1, head_dim=64, intermediate_size=128, mamba_num_heads=4, mamba_head_dim=64,
        ssm_state_size=128, n_groups=2, conv_kernel=4, expand=2, chunk_size=128, use_mamba_kernels=False,
        layer_norm_epsilon=1e-5, max_position_embeddings=512)
    model = transformers.NemotronHForCausalLM(cfg).to(device=device, dtype=torch.float32).eval()
    g = torch.Generator().manual_seed(SEED + 2)
    with torch.no_grad():
        for _, _, _, m in hf_mixers(model):
            # softplus(dt_bias) in [0.01, 0.1]: with |dt| small, dt stays above time_step_min (0.001)
            target = torch.empty(m.dt_bias.shape).uniform_(0.01, 0.1, generator=g)
            m.dt_bias.copy_(target + torch.log(-torch.expm1(-target)))
            m.norm.weight.copy_(torch.empty(m.norm.weight.shape).uniform_(0.5, 1.5, generator=g))
    return model


REJECT = ("commit", "rollback", "checkpoint")


def expected_ops(result, prompt_len):
    """The ops the loop's own account (verify K, accepted n) implies: alloc, prefill, then per
    verify checkpoint, verify K and commit K K (all accepted) or, in turn, commit n K / rollback n /
    rollback 0 and n decodes; decodes where no draft was found. [] when the account and the ops
    disagree in number."""
    ops, want, turn, v = result["ops"], ["alloc", "prefill %d" % prompt_len], 0, 0
    i = 2
    while i < len(ops):
        if ops[i] == "decode":
            want.append("decode")
            i += 1
            continue
        if v >= len(result["verify_k"]):
            return []
        K, n = result["verify_k"][v], result["accepted"][v]
        want += ["checkpoint", "verify %d" % K]
        if n == K:
            want.append("commit %d %d" % (K, K))
        else:
            policy = REJECT[turn % len(REJECT)]
            turn += 1
            want += (["commit %d %d" % (n, K)] if policy == "commit" else ["rollback %d" % n] if policy == "rollback"
                     else ["rollback 0"] + ["decode"] * n)
        i, v = len(want), v + 1
    return want


def replay(exe, trace, extra=()):
    p = subprocess.run([exe, "replay", *extra, trace], env=_packed_env(), capture_output=True, text=True)
    print(p.stdout[-3000:] + p.stderr[-2000:])
    return p.returncode, p.stdout


def run_model(name, build, transformers, torch, device, tmp, cuda_flags):
    import ssmcheck
    import ssmcheck.hf_capture as hf

    torch.manual_seed(SEED)
    model = build(transformers, torch, device)
    trace = os.path.join(tmp, name + ".h5")
    prompt = [3, 5, 7, 11, 3, 5, 7, 11, 3, 5, 7]
    calls = [0]

    def drafter(tokens, k):
        """The n-gram lookup, with every second proposal's last draft made wrong: a random model
        soon repeats itself and accepts every draft, and the rejections are what the test is for."""
        calls[0] += 1
        drafts = hf.ngram_drafts(tokens, 3, k)
        if drafts and calls[0] % 2 == 0:
            drafts[-1] = (drafts[-1] + 1) % model.config.vocab_size
        return drafts

    result = hf.record_speculative(model, prompt, steps=24, k=3, path=trace, reject=REJECT, drafter=drafter)
    ops = result["ops"]
    print("%s: %d ops; verify K %s, accepted %s; %s" % (name, len(ops), result["verify_k"], result["accepted"],
                                                      "; ".join(ops)))
    check(result["layers"] == [0, 2], "%s: the recurrent layers are model layers 0 and 2 (got %s); the attention layer "
          "is not recorded" % (name, result["layers"]))
    kind = "gdn" if name == "qwen3_next" else "mamba2"
    check(result["kinds"] == [kind, kind], "%s: both are %s mixers (got %s)" % (name, kind, result["kinds"]))
    check(ops == expected_ops(result, len(prompt)), "%s: alloc, prefill, then checkpoint, verify K and commit K K, or "
          "commit n K / rollback n / rollback 0 and n decodes in turn, as the loop accepted" % name)
    rejected = sum(1 for K, n in zip(result["verify_k"], result["accepted"]) if n < K)
    check(len(result["verify_k"]) >= 4 and rejected >= 3, "%s: %d verifies, %d with a rejected draft (>= 4 and >= 3: "
          "every reject policy ran)" % (name, len(result["verify_k"]), rejected))
    try:
        import h5py
    except ImportError:
        h5py = None
    if h5py is not None:
        with h5py.File(trace, "r") as f:
            got = [f["ops"][k].attrs["op"] for k in sorted(f["ops"])]
            got = [g.decode() if isinstance(g, bytes) else str(g) for g in got]
            check(got == ops, "%s: the trace's ops are the loop's (%d)" % (name, len(got)))
            check(int(f["model"].attrs["layers"]) == 2, "%s: the trace has the 2 recurrent layers" % name)
            gates = [f["model/layer%d" % l].attrs.get("gates") for l in range(2)]
            gates = [g.decode() if isinstance(g, bytes) else g for g in gates]
            want = ["torch", "torch"] if name == "qwen3_next" else [None, None]
            check(gates == want, "%s: the layers declare gates %s (got %s)" % (name, want, gates))
    exe = ssmcheck.locate.find_ssmcheck()
    rc, out = replay(exe, trace)
    check(rc == 0 and "AGREE" in out, "%s: ssmcheck replay on the reference agrees (exit %d)" % (name, rc))
    if device.type == "cuda":
        rc, out = replay(exe, trace, ["--backend", "cuda", *cuda_flags])
        check(rc == 0 and "AGREE" in out, "%s: ssmcheck replay --backend cuda %s agrees (exit %d)"
              % (name, " ".join(cuda_flags), rc))


def main():
    _restart_without_packed_libraries()
    print("seed %d (SSMCHECK_TEST_SEED)" % SEED, flush=True)
    torch, transformers, why = _imports()
    if why:
        print("SKIPPED: %s; this test runs where both are (the H200 image)" % why)
        return SKIP
    import ssmcheck.locate

    _preload_capture_dependencies(ssmcheck.locate.find_capture_library())
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    print("transformers %s, torch %s, on %s" % (transformers.__version__, torch.__version__, device), flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        run_model("qwen3_next", qwen3_next, transformers, torch, device, tmp, ["--gates", "clamped"])
        run_model("nemotron_h", nemotron_h, transformers, torch, device, tmp, [])
    if failures:
        print("%d failed: %s" % (len(failures), "; ".join(failures)))
        return 1
    print("all hf_capture checks passed")
    return 0


def test_hf_capture():
    """pytest: the same checks (skipped without torch or transformers)."""
    import pytest

    torch, transformers, why = _imports()
    if why:
        pytest.skip(why)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    before = len(failures)
    with tempfile.TemporaryDirectory() as tmp:
        run_model("qwen3_next", qwen3_next, transformers, torch, device, tmp, ["--gates", "clamped"])
        run_model("nemotron_h", nemotron_h, transformers, torch, device, tmp, [])
    assert len(failures) == before, "; ".join(failures[before:])


if __name__ == "__main__":
    sys.exit(main())

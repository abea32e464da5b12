"""The package as users install it (ctest python_install, cpu label), offline:

- python/pyproject.toml's version is CMakeLists.txt's project(ssmcheck VERSION ...) and the
  executable's --version;
- a fresh virtual environment (python3 -m venv --system-site-packages, for Debian's numpy,
  setuptools and wheel) in a temporary directory under WORK_DIR takes
  ``pip install --no-build-isolation --no-index`` of python/ (copied first, so that the build
  leaves nothing in the source tree); its metadata has that version;
- from another directory, with PYTHONPATH unset, the venv's python imports ssmcheck from the venv
  (``ssmcheck.__file__`` inside it), finds the built ssmcheck on PATH and libssmcheck_capture.so
  beside it, and ``ssmcheck.run(["check", "--backend", "python:x", ...], cls)`` with a subclass of
  python/examples/numpy_gdn.py's NumpyGdn (which checks that its host process imports ssmcheck from
  the venv too) is exit 0; python/examples/write_trace.py writes a trace through the installed
  TraceWriter that ssmcheck replays;
- without $SSMCHECK and without ssmcheck on PATH, the executable and the library are found in the
  install prefix (<venv>/bin/ssmcheck, a script running the build's, and
  <venv>/lib/<multiarch>/libssmcheck_capture.so, a link to the build's); with neither there, the errors name every place looked at.
The directory is removed at the end, whatever happened.

    SSMCHECK=build/ssmcheck /usr/bin/python3 python/tests/test_install.py [WORK_DIR]

WORK_DIR (default: the system's temporary directory) is where the temporary directory goes; ctest
passes the build tree. The test_* function is a pytest test too.
"""
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(here, "..", ".."))
failures = []

# What the venv's python runs, from a directory of its own: MODE (run | prefix | missing), the
# venv, the expected version. Its class is imported by the host process from this file by path.
PROBE = r'''
import os
import sys

import ssmcheck
from ssmcheck import locate

VENV = os.path.realpath(sys.argv[2]) if __name__ == "__main__" else os.environ["PROBE_VENV"]


def inside_venv(path):
    return os.path.realpath(path).startswith(VENV + os.sep)


# numpy_gdn.py is an example script, not part of the package: imported by path
sys.path.insert(0, os.environ["PROBE_EXAMPLES"])
from numpy_gdn import NumpyGdn  # noqa: E402


class InVenv(NumpyGdn):
    """NumpyGdn, refusing to run unless its host process imported ssmcheck from the venv."""
    name = "numpy GDN from the installed package"

    def create_pool(self, layers, pool):
        if not inside_venv(ssmcheck.__file__):
            raise RuntimeError("the host imported ssmcheck from %s, not from the venv %s" % (ssmcheck.__file__, VENV))
        return super().create_pool(layers, pool)


def say(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    return ok


def main(mode, version):
    ok = say(inside_venv(ssmcheck.__file__), "ssmcheck is imported from the venv: %s" % ssmcheck.__file__)
    if mode == "run":
        from importlib.metadata import version as dist_version
        ok &= say(dist_version("ssmcheck") == version, "the installed metadata says version %s" % dist_version("ssmcheck"))
        exe, lib = locate.find_ssmcheck(), locate.find_capture_library()
        ok &= say(os.path.realpath(exe) == os.path.realpath(os.environ["PROBE_SSMCHECK"]), "the executable is found on PATH: %s" % exe)
        ok &= say(lib == os.path.join(os.path.dirname(exe), "libssmcheck_capture.so"),
                  "the capture library is found beside it: %s" % lib)
        rc = ssmcheck.run(["check", "--backend", "python:x", "--h-mode", "f32", "--ops",
                           "alloc; prefill 3; checkpoint; verify 3; commit 2 3; decode; rollback 0"], InVenv)
        ok &= say(rc == 0, "ssmcheck.run(['check', '--backend', 'python:x', ...], InVenv) is exit 0 (rc %d)" % rc)
    elif mode == "prefix":
        exe, lib = locate.find_ssmcheck(), locate.find_capture_library()
        ok &= say(exe == os.path.join(sys.prefix, "bin", "ssmcheck"), "the executable is found in the install prefix: %s" % exe)
        ok &= say(inside_venv(os.path.dirname(lib)) and os.sep + "lib" + os.sep in lib,
                  "the capture library is found in the install prefix: %s" % lib)
    elif mode == "missing":
        for find, needles in ((locate.find_ssmcheck, ["$SSMCHECK (not set)", "PATH (", os.path.join(sys.prefix, "bin", "ssmcheck")]),
                              (locate.find_capture_library, ["$SSMCHECK_CAPTURE_LIB (not set)", "beside the executable",
                                                             os.path.join(sys.prefix, "lib", "libssmcheck_capture.so")])):
            try:
                find()
                ok &= say(False, "%s finds nothing here" % find.__name__)
            except FileNotFoundError as e:
                ok &= say(all(n in str(e) for n in needles), "%s's error names every place: %s" % (find.__name__, e))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[3])
'''


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)
    return cond


def cmake_version():
    m = re.search(r"project\(\s*ssmcheck\s+VERSION\s+([0-9][0-9.]*)", open(os.path.join(REPO, "CMakeLists.txt")).read())
    return m.group(1) if m else None


def pyproject_version():
    text = open(os.path.join(REPO, "python", "pyproject.toml")).read()
    try:
        import tomllib  # Python 3.11
        return tomllib.loads(text)["project"]["version"]
    except ImportError:
        m = re.search(r'^version\s*=\s*"([^"]+)"', text, re.M)
        return m.group(1) if m else None


def sh(cmd, what, **kw):
    """Runs cmd; a failure is a failed check showing its output."""
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    out = (p.stdout + p.stderr).strip()
    if out:
        print(out, flush=True)
    check(p.returncode == 0, "%s (rc %d)" % (what, p.returncode))
    return p.returncode == 0


def install_and_probe(work, exe):
    version = pyproject_version()
    check(version is not None and version == cmake_version(),
          "python/pyproject.toml's version %s is CMakeLists.txt's project VERSION %s" % (version, cmake_version()))
    p = subprocess.run([exe, "--version"], capture_output=True, text=True)
    check(p.stdout.split() == ["ssmcheck", str(version)], "ssmcheck --version says %r" % p.stdout.strip())

    venv, src, probe_dir = os.path.join(work, "venv"), os.path.join(work, "src"), os.path.join(work, "probe")
    if not sh([sys.executable, "-m", "venv", "--system-site-packages", venv],
              "a venv is created (%s -m venv; scripts/deps.sh installs python3-venv)" % sys.executable):
        return
    shutil.copytree(os.path.join(REPO, "python"), src,
                    ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info", "tests", "examples"))
    python = os.path.join(venv, "bin", "python")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("PIP_")}
    env.update(PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1", PYTHONDONTWRITEBYTECODE="1")
    if not sh([python, "-m", "pip", "install", "--no-build-isolation", "--no-index", "--no-cache-dir", "--quiet", src],
              "pip install --no-build-isolation --no-index python/ into the venv", env=env):
        return

    os.mkdir(probe_dir)
    probe = os.path.join(probe_dir, "probe.py")
    with open(probe, "w") as f:
        f.write(PROBE)
    env.pop("SSMCHECK", None)
    env.pop("SSMCHECK_CAPTURE_LIB", None)
    env.update(PROBE_EXAMPLES=os.path.join(REPO, "python", "examples"), PROBE_SSMCHECK=exe,
               PROBE_VENV=os.path.realpath(venv))
    path = os.environ.get("PATH", "/usr/bin:/bin").split(os.pathsep)
    without = os.pathsep.join(d for d in path if not os.path.exists(os.path.join(d, "ssmcheck")))
    with_build = os.pathsep.join([os.path.dirname(os.path.abspath(exe)), without])
    sh([python, probe, "run", venv, version], "from another directory, the installed package runs a check against the "
       "build's ssmcheck found on PATH", cwd=probe_dir, env=dict(env, PATH=with_build))

    trace = os.path.join(probe_dir, "example.h5")
    if sh([python, os.path.join(REPO, "python", "examples", "write_trace.py"), trace],
          "write_trace.py writes a trace through the installed TraceWriter", cwd=probe_dir, env=dict(env, PATH=with_build)):
        r = subprocess.run([exe, "replay", trace], capture_output=True, text=True)
        check(r.returncode == 0 and "AGREE: 7 ops" in r.stdout, "ssmcheck replays it (rc %d)" % r.returncode)

    sh([python, probe, "missing", venv, version], "without $SSMCHECK and ssmcheck on PATH or in the prefix, the errors "
       "name every place looked at", cwd=probe_dir, env=dict(env, PATH=without))
    multiarch = sysconfig.get_config_var("MULTIARCH")
    libdir = os.path.join(venv, "lib", multiarch) if multiarch else os.path.join(venv, "lib")
    os.makedirs(libdir, exist_ok=True)
    installed = os.path.join(venv, "bin", "ssmcheck")  # a script, not a link: the build's directory stays out of it
    with open(installed, "w") as f:
        f.write('#!/bin/sh\nexec "%s" "$@"\n' % os.path.abspath(exe))
    os.chmod(installed, 0o755)
    os.symlink(os.path.join(os.path.dirname(os.path.realpath(exe)), "libssmcheck_capture.so"),
               os.path.join(libdir, "libssmcheck_capture.so"))
    sh([python, probe, "prefix", venv, version], "without $SSMCHECK and ssmcheck on PATH, both are found in the install "
       "prefix (bin/, lib/%s)" % (multiarch or ""), cwd=probe_dir, env=dict(env, PATH=without))


def test_install(work_dir=None):
    exe = os.path.abspath(os.environ["SSMCHECK"]) if os.environ.get("SSMCHECK") else shutil.which("ssmcheck")
    assert exe, "set $SSMCHECK to the built ssmcheck (or put it on PATH)"
    before = len(failures)
    work = tempfile.mkdtemp(prefix="ssmcheck-install-", dir=work_dir)
    try:
        install_and_probe(work, exe)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    check(not os.path.exists(work), "the temporary directory %s is removed" % work)
    assert len(failures) == before, "; ".join(failures[before:])


if __name__ == "__main__":
    try:
        test_install(sys.argv[1] if len(sys.argv) > 1 else None)
    except AssertionError:
        pass
    if failures:
        sys.exit("%d install checks failed: %s" % (len(failures), "; ".join(failures)))
    print("all install checks passed")

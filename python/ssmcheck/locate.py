"""Where the ``ssmcheck`` executable and ``libssmcheck_capture.so`` are: the one place that knows
(bridge.find_ssmcheck and capture's TraceWriter ask here).

The executable, first found wins:
  1. the explicit argument (``ssmcheck.run(..., ssmcheck=PATH)``);
  2. ``$SSMCHECK``;
  3. ``ssmcheck`` on ``PATH``;
  4. the install prefix: ``<sys.prefix>/bin/ssmcheck`` (and ``<sys.base_prefix>/bin/ssmcheck`` in
     a virtual environment).
An explicit argument or ``$SSMCHECK`` that names nothing executable is an error naming it (never
silently replaced by another ssmcheck).

The capture library, first found wins:
  1. the explicit argument (``TraceWriter(..., lib=PATH)``);
  2. ``$SSMCHECK_CAPTURE_LIB``;
  3. beside the executable found above (the build tree: ``build/ssmcheck`` and
     ``build/libssmcheck_capture.so``; a symlinked executable's own directory and its target's),
     then ``<prefix>/lib`` and ``<prefix>/lib/<multiarch>`` of the prefix it lives in
     (``<prefix>/bin/ssmcheck``);
  4. the install prefix: ``<sys.prefix>/lib`` and ``<sys.prefix>/lib/<multiarch>`` (and the same
     under ``sys.base_prefix``).
Errors name every place looked at.
"""
import os
import shutil
import sys
import sysconfig

EXECUTABLE = "ssmcheck"
CAPTURE_LIBRARY = "libssmcheck_capture.so"


def _unique(paths):
    seen, out = set(), []
    for p in paths:
        if p not in seen:
            seen.add(p)
            out.append(p)
    return out


def _prefixes():
    """sys.prefix, then sys.base_prefix when it differs (a virtual environment)."""
    return _unique([os.path.abspath(sys.prefix), os.path.abspath(getattr(sys, "base_prefix", sys.prefix))])


def _lib_dirs(prefix):
    """<prefix>/lib and <prefix>/lib/<multiarch> (Debian's x86_64-linux-gnu, ...)."""
    dirs = [os.path.join(prefix, "lib")]
    multiarch = sysconfig.get_config_var("MULTIARCH")
    if multiarch:
        dirs.append(os.path.join(prefix, "lib", multiarch))
    return dirs


def _is_executable(path):
    return os.path.isfile(path) and os.access(path, os.X_OK)


def find_ssmcheck(explicit=None):
    """The ssmcheck executable (module docstring: the order); FileNotFoundError naming every place
    looked at."""
    if explicit:
        if _is_executable(explicit):
            return explicit
        raise FileNotFoundError("ssmcheck executable not found: ssmcheck=%s (given) is not an executable file" % explicit)
    env = os.environ.get("SSMCHECK")
    if env:
        if _is_executable(env):
            return env
        raise FileNotFoundError("ssmcheck executable not found: $SSMCHECK=%s is not an executable file" % env)
    on_path = shutil.which(EXECUTABLE)
    if on_path:
        return on_path
    installed = [os.path.join(p, "bin", EXECUTABLE) for p in _prefixes()]
    for c in installed:
        if _is_executable(c):
            return c
    raise FileNotFoundError(
        "ssmcheck executable not found; looked at: the ssmcheck= argument (not given); $SSMCHECK (not set); "
        "PATH (%s); the install prefix: %s. Pass ssmcheck=PATH, set $SSMCHECK, put it on PATH, or install it into the prefix"
        % (os.environ.get("PATH", "") or "empty", " ".join(installed)))


def capture_library_candidates(ssmcheck=None):
    """[(where, path)]: the places find_capture_library looks at, in order, without the explicit
    argument and $SSMCHECK_CAPTURE_LIB (which are decisive when given)."""
    out = []
    try:
        exe = find_ssmcheck(ssmcheck)
    except FileNotFoundError as e:
        exe, why = None, str(e)
    if exe:
        exe = os.path.abspath(exe)
        dirs = _unique([os.path.dirname(exe), os.path.dirname(os.path.realpath(exe))])
        for d in dirs:
            out.append(("beside the executable %s" % exe, os.path.join(d, CAPTURE_LIBRARY)))
        for d in dirs:
            for lib in _lib_dirs(os.path.dirname(d)):
                out.append(("in the prefix of %s" % exe, os.path.join(lib, CAPTURE_LIBRARY)))
    else:
        out.append(("beside the executable (%s)" % why, None))
    for p in _prefixes():
        for lib in _lib_dirs(p):
            out.append(("in the install prefix %s" % p, os.path.join(lib, CAPTURE_LIBRARY)))
    seen, unique = set(), []
    for where, path in out:
        if path is None or path not in seen:
            seen.add(path)
            unique.append((where, path))
    return unique


def find_capture_library(explicit=None, ssmcheck=None):
    """libssmcheck_capture.so (module docstring: the order); FileNotFoundError naming every place
    looked at. ``ssmcheck``: the executable's explicit path, if the caller has one."""
    if explicit:
        if os.path.isfile(explicit):
            return explicit
        raise FileNotFoundError("%s not found: lib=%s (given) is not a file" % (CAPTURE_LIBRARY, explicit))
    env = os.environ.get("SSMCHECK_CAPTURE_LIB")
    if env:
        if os.path.isfile(env):
            return env
        raise FileNotFoundError("%s not found: $SSMCHECK_CAPTURE_LIB=%s is not a file" % (CAPTURE_LIBRARY, env))
    cands = capture_library_candidates(ssmcheck=ssmcheck)
    for _, path in cands:
        if path and os.path.isfile(path):
            return path
    looked, groups = ["the lib= argument (not given)", "$SSMCHECK_CAPTURE_LIB (not set)"], []
    for where, path in cands:  # consecutive places of one kind as one group
        if groups and groups[-1][0] == where and path:
            groups[-1][1].append(path)
        else:
            groups.append((where, [path] if path else []))
    looked += ["%s: %s" % (where, " ".join(paths)) if paths else where for where, paths in groups]
    raise FileNotFoundError("%s not found; looked at: %s. Pass lib=PATH, set $SSMCHECK_CAPTURE_LIB, or put ssmcheck "
                            "(built or installed with it) on PATH or in $SSMCHECK" % (CAPTURE_LIBRARY, "; ".join(looked)))

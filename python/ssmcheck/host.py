"""The host process of a Python class under test: ``python -m ssmcheck.host``, started by ssmcheck
for ``--backend python:NAME`` (plugin/host_process.h), never by hand. It imports the class that
ssmcheck.run named (SSMCHECK_PYTHON_CLASS, "MODULE:QUALNAME" or "PATH.py:QUALNAME", with the
caller's sys.path in SSMCHECK_PYTHON_PATH) and serves ssmcheck's calls on descriptors 3 (the
channel) and 4 (the shared arena), with descriptor 5 the doorbell page where the host names a slot
it reads after an op (SSMCHECK_HOST_BELL), until ssmcheck closes the channel. It dies with ssmcheck (the
kernel kills it when its parent ends). Its stdout and stderr are a file ssmcheck keeps: what the
class prints never reaches ssmcheck's own output."""
import ctypes
import importlib
import importlib.util
import json
import os
import signal
import sys

from .bridge import SSMP_ERROR, SUT_MODULE, _Channel, _Server

PR_SET_PDEATHSIG = 1


def _die_with_parent():
    """Asks the kernel for SIGKILL when ssmcheck ends; False when it has already ended."""
    parent = os.environ.get("SSMCHECK_HOST_PARENT")
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    return parent is not None and os.getppid() == int(parent)


def load_class(spec):
    """The object SSMCHECK_PYTHON_CLASS names."""
    where, _, qual = spec.rpartition(":")
    if not where or not qual:
        raise ValueError("SSMCHECK_PYTHON_CLASS=%r is not MODULE:QUALNAME or PATH.py:QUALNAME" % spec)
    if where.endswith(".py"):
        loader_spec = importlib.util.spec_from_file_location(SUT_MODULE, where)
        module = importlib.util.module_from_spec(loader_spec)
        sys.modules[SUT_MODULE] = module
        loader_spec.loader.exec_module(module)
    else:
        module = importlib.import_module(where)
    obj = module
    for part in qual.split("."):
        obj = getattr(obj, part)
    return obj


def main():
    if os.environ.get("SSMCHECK_HOST_FDS") != "3,4" or not _die_with_parent():
        sys.exit("ssmcheck.host: not started by ssmcheck (SSMCHECK_HOST_FDS, SSMCHECK_HOST_PARENT)")
    sys.path[:0] = [p for p in json.loads(os.environ.get("SSMCHECK_PYTHON_PATH", "[]")) if p not in sys.path]
    bell = os.environ.get("SSMCHECK_HOST_BELL")  # the doorbell page, for its exporting word only
    channel = _Channel(3, 4, int(bell) if bell else None)
    try:
        backend = load_class(os.environ.get("SSMCHECK_PYTHON_CLASS", ""))
    except BaseException as e:  # the hello says why, then the host ends
        msg = channel.recv()
        if msg is not None:
            channel.send(dict(status=SSMP_ERROR, message="python: cannot load the class %s: %s: %s" % (
                os.environ.get("SSMCHECK_PYTHON_CLASS"), type(e).__name__, e)))
        sys.exit(2)
    _Server(backend).serve(channel)


if __name__ == "__main__":
    main()

"""ssmcheck from Python, without a compiled extension.

- ``ssmcheck.run(args, backend)`` runs the ``ssmcheck`` command line (``fuzz``, ``check``,
  ``replay``, ``gate``) with a Python class as the system under test: ``--backend python:NAME``
  in ``args`` names it. The class gets the same calls a C plug-in gets (plugin/ssmcheck_plugin.h),
  with numpy arrays (torch tensors are accepted back); GDN layers, and Mamba-2 layers for a class
  that declares ``mamba2 = True``.
- ``ssmcheck.TraceWriter`` records a state trace from a Python engine through
  ``libssmcheck_capture.so`` (ctypes): GDN and Mamba-2 layers (``add_layer``,
  ``add_mamba2_layer``) and PLE carries (``set_layer_ple``), crash-safe, and every array's shape
  is checked as it is written.

docs/plugins.md ("Python") and docs/trace-format.md ("Porting checklist") are the guides;
python/examples/numpy_gdn.py is a complete system under test, numpy_mamba2.py the same with
Mamba-2 layers.
"""
from .bridge import Layer, LayerState, Ple, Pool, Refused, State, run
from .capture import CaptureError, TraceWriter

__all__ = ["run", "Refused", "Layer", "Ple", "Pool", "LayerState", "State", "TraceWriter", "CaptureError"]

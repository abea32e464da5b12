"""Adapters that put third-party kernels under ssmcheck's campaigns through the Python bridge
(docs/plugins.md, "Third-party kernels"): ``vllm_gdn`` (vLLM's GDN spec-decode path), ``fla_gdn``
(flash-linear-attention's GDN recurrent kernel) and ``vllm_mamba2`` (vLLM's Triton Mamba-2
``selective_state_update``, spec-decode mode). They need torch and a GPU; the kernels come from an
installed package or from the directory named by $SSMCHECK_VLLM_PATH / $SSMCHECK_FLA_PATH.

    python3 -m ssmcheck.adapters.vllm_gdn SSMCHECK fuzz --h-mode f32 --cases 200
"""

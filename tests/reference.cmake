ssmcheck_test(reference_test LABEL cpu
  SOURCES gdn_conv_test.cpp gdn_gates_test.cpp gdn_delta_rule_test.cpp gdn_decode_test.cpp
          gdn_prefill_test.cpp gdn_verify_test.cpp rollback_test.cpp to_f16_test.cpp
          pool_test.cpp snapshot_test.cpp contract_errors_test.cpp reference_threads_test.cpp
          head_store_test.cpp underflow_condition_test.cpp
  LIBS ssmcheck_reference ssmcheck_fixtures OpenMP::OpenMP_CXX)
ssmcheck_test(mamba2_test LABEL cpu SOURCES mamba2_test.cpp LIBS ssmcheck_reference ssmcheck_fixtures OpenMP::OpenMP_CXX)
# A Mamba-2 layer's output norm groups (Hugging Face's Mamba2: the whole width): the reference's
# output stage, the name and bounds, the capability the CUDA backend and plug-ins lack, traces.
ssmcheck_test(mamba2_norm_groups_test LABEL cpu SOURCES mamba2_norm_groups_test.cpp
  LIBS ssmcheck_reference ssmcheck_formats OpenMP::OpenMP_CXX)
ssmcheck_test(ple_test LABEL cpu SOURCES ple_test.cpp LIBS ssmcheck_reference ssmcheck_fixtures ssmcheck_formats ssmcheck_compare)

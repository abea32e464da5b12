# Property-based campaigns. property_test: reference vs its alternate path (cpu).
# property_mutant_test: the same campaign against the catalogue's CPU mutants (the mutant builds
# of the alternate path and of the shared contract, switched at run time: docs/mutants.md).
ssmcheck_test(property_test LABEL cpu TIMEOUT 900
  SOURCES property_test.cpp
  LIBS ssmcheck_fuzz)

# the lockstep's shortcuts: state digests, the skipping of unchanged sequences, shared inputs, the side thread
ssmcheck_test(state_digest_test LABEL cpu
  SOURCES state_digest_test.cpp shared_inputs_test.cpp side_worker_test.cpp
  LIBS ssmcheck_fuzz)

ssmcheck_test(property_mutant_test LABEL cpu TIMEOUT 900
  SOURCES property_mutant_test.cpp
  LIBS ssmcheck_core_mutant_objs ssmcheck_alt_mutant_objs ssmcheck_fuzz)

if(TARGET ssmcheck_cuda)
  ssmcheck_test(property_gpu_test LABEL gpu TIMEOUT 1200
    SOURCES property_gpu_test.cpp
    LIBS ssmcheck_fuzz ssmcheck_cuda)
  # the catalogue's CUDA mutants, each caught by a campaign (the mutant build of cuda/)
  ssmcheck_test(property_gpu_mutant_test LABEL gpu TIMEOUT 1800
    SOURCES property_gpu_mutant_test.cpp
    LIBS ssmcheck_core_mutant_objs ssmcheck_cuda_mutant_objs ssmcheck_fuzz)
endif()

# The kill table on the command line: every CPU mutant of the catalogue killed by the default
# gate (`ssmcheck mutants` exits 1 when one survives); the CUDA ones where a GPU is present
# (exit 5, skipped, where none is).
add_test(NAME mutants.reference
  COMMAND ssmcheck mutants --backend reference --traces ${PROJECT_SOURCE_DIR}/fixtures/traces
          --logs ${CMAKE_CURRENT_BINARY_DIR}/mutants-reference-logs)  # in the build tree, not /tmp
set_tests_properties(mutants.reference PROPERTIES LABELS cpu TIMEOUT 900)
if(TARGET ssmcheck_cuda)
  add_test(NAME mutants.cuda
    COMMAND ssmcheck mutants --backend cuda --traces ${PROJECT_SOURCE_DIR}/fixtures/traces
            --logs ${CMAKE_CURRENT_BINARY_DIR}/mutants-cuda-logs)
  set_tests_properties(mutants.cuda PROPERTIES LABELS gpu TIMEOUT 3600 SKIP_RETURN_CODE 5)
endif()

# FP16's overflow threshold between agreeing states: the straddles, the reference's adoption, and
# the seed-204 false alarm of the CUDA campaigns reproduced on the CPU (core/overflow_straddle.h)
ssmcheck_test(overflow_straddle_test LABEL cpu
  SOURCES overflow_straddle_test.cpp
  LIBS ssmcheck_fuzz)

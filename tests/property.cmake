# Property-based campaigns. property_test: reference vs its alternate path (cpu).
# property_mutant_test: the same campaign against deliberately broken copies of the alternate
# path, compiled only here (docs/fuzzing.md, "Adding a mutant").
ssmcheck_test(property_test LABEL cpu TIMEOUT 900
  SOURCES property_test.cpp
  LIBS ssmcheck_fuzz)

# One test-only library per mutant of the alternate reference path, each in its own namespace.
set(mutant_libs)
foreach(m IN ITEMS commit_off_by_one commit_zero_accepted batch_inputs_shifted)
  string(TOUPPER ${m} M)
  add_library(ssmcheck_alt_${m} STATIC ${PROJECT_SOURCE_DIR}/fuzz/alt_reference.cpp)
  target_link_libraries(ssmcheck_alt_${m} PUBLIC ssmcheck_reference)
  target_compile_definitions(ssmcheck_alt_${m} PRIVATE SSM_ALT_NS=alt_${m} SSMCHECK_MUTANT="${m}"
    SSMCHECK_MUTANT_${M}=1)
  list(APPEND mutant_libs ssmcheck_alt_${m})
endforeach()
ssmcheck_test(property_mutant_test LABEL cpu TIMEOUT 900
  SOURCES property_mutant_test.cpp
  LIBS ${mutant_libs} ssmcheck_fuzz)

if(TARGET ssmcheck_cuda)
  ssmcheck_test(property_gpu_test LABEL gpu TIMEOUT 1200
    SOURCES property_gpu_test.cpp
    LIBS ssmcheck_fuzz ssmcheck_cuda)
endif()

# The GPU mutant: the row kernel compiled with its intermediate table indexed off by one slot
# (bug class 4: a sequence's intermediates land in its neighbour's), linked with the rest of the CUDA implementation, in a test-only library.
if(TARGET ssmcheck_cuda)
  add_library(ssmcheck_cuda_mutant STATIC ${PROJECT_SOURCE_DIR}/cuda/gdn_decode.cu)
  target_link_libraries(ssmcheck_cuda_mutant PUBLIC ssmcheck_cuda_objs)
  target_compile_definitions(ssmcheck_cuda_mutant PRIVATE SSMCHECK_MUTANT_VERIFY_INTER_STRIDE=1)
  ssmcheck_cuda_options(ssmcheck_cuda_mutant)
  ssmcheck_test(property_gpu_mutant_test LABEL gpu TIMEOUT 600
    SOURCES property_gpu_mutant_test.cpp
    LIBS ssmcheck_fuzz ssmcheck_cuda_mutant)
endif()

# gpu tests of the CUDA implementation (issue 4): one executable, label gpu. Each test skips
# with "no CUDA device: ..." where there is none (fails instead with SSMCHECK_REQUIRE_GPU=1).
if(TARGET ssmcheck_cuda)
  ssmcheck_test(cuda_test LABEL gpu
    SOURCES transitions_gpu_test.cpp verify_gpu_test.cpp batch_gpu_test.cpp cuda_pool_gpu_test.cpp
            margins_gpu_test.cpp region_digest_gpu_test.cpp rows_layout_test.cpp mamba2_rows_layout_test.cpp half_store_gpu_test.cpp pinned_buffer_gpu_test.cpp
            perturbed_schedule_gpu_test.cpp
            half_store_kernels.cu
    LIBS ssmcheck_cuda ssmcheck_fuzz
    TIMEOUT 1200)
endif()

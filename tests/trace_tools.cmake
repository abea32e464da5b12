# Engine-scale traces (issue 44): one writer per trace (a second live capture refused, a crashed
# one recovered, a handle shared by threads), replay from a recorded state (--from, --bisect),
# and reduce. cpu label.
ssmcheck_test(trace_tools_test LABEL cpu TIMEOUT 900
  SOURCES trace_writer_lock_test.cpp replay_from_test.cpp
  LIBS ssmcheck_replay ssmcheck_compare ssmcheck_formats ssmcheck_reference ssmcheck_fixtures ssmcheck_capture)
target_compile_definitions(trace_tools_test PRIVATE SSMCHECK_BIN="$<TARGET_FILE:ssmcheck>"
  SSMCHECK_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
  SSMCHECK_REFERENCE_PLUGIN="$<TARGET_FILE:ssmcheck_reference_plugin>")
add_dependencies(trace_tools_test ssmcheck ssmcheck_reference_plugin)

# Asynchronous capture (issue 44 item 1; ABI minor 5) with host pointers: queued ops written as a
# synchronous capture writes them, both back-pressure policies, the writer's failures reported at
# the next begin, flush and close, a crash after a flush recovered. cpu label.
ssmcheck_test(capture_async_test LABEL cpu TIMEOUT 300
  SOURCES capture_async_test.cpp
  LIBS ssmcheck_formats ssmcheck_reference ssmcheck_fixtures ssmcheck_capture)
target_compile_definitions(capture_async_test PRIVATE SSMCHECK_BIN="$<TARGET_FILE:ssmcheck>")
add_dependencies(capture_async_test ssmcheck)
# The capture ABI by name (issue 40 item 6; ABI minor 6): a trace captured by name equals the
# per-kind capture byte for byte (sync and async) and replays; misspelt names and wrong counts are
# refused naming them; the geometry query answers LayerSpec's shapes. cpu label.
ssmcheck_test(capture_by_name_test LABEL cpu TIMEOUT 300
  SOURCES capture_by_name_test.cpp
  LIBS ssmcheck_formats ssmcheck_reference ssmcheck_fixtures ssmcheck_capture)
target_compile_definitions(capture_by_name_test PRIVATE SSMCHECK_BIN="$<TARGET_FILE:ssmcheck>")
add_dependencies(capture_by_name_test ssmcheck)
# The same with device pointers on a GPU (gpu label): uploaded on the engine's stream, overwritten
# right after ssmc_end_op; the trace equals the recording bit for bit and replays.
if(TARGET ssmcheck_cuda)
  ssmcheck_test(capture_async_gpu_test LABEL gpu TIMEOUT 600
    SOURCES capture_async_gpu_test.cpp
    LIBS ssmcheck_cuda ssmcheck_fuzz ssmcheck_capture CUDA::cudart)
  target_compile_definitions(capture_async_gpu_test PRIVATE SSMCHECK_BIN="$<TARGET_FILE:ssmcheck>")
  add_dependencies(capture_async_gpu_test ssmcheck)
endif()

# Implementations that run part of the contract (core/capabilities.h): a vLLM-like partial plug-in
# through fuzz, replay and the gate, and the gate's filters.
add_library(ssmcheck_partial_plugin MODULE plugins/partial_plugin.cpp)
target_link_libraries(ssmcheck_partial_plugin PRIVATE ssmcheck_backend_plugin ssmcheck_reference)
target_include_directories(ssmcheck_partial_plugin PRIVATE ${PROJECT_SOURCE_DIR})
set_target_properties(ssmcheck_partial_plugin PROPERTIES PREFIX lib CXX_VISIBILITY_PRESET hidden
  VISIBILITY_INLINES_HIDDEN ON)
ssmcheck_test(capabilities_test LABEL cpu TIMEOUT 900
  SOURCES capabilities_test.cpp
  LIBS ssmcheck_fuzz ssmcheck_fixtures nlohmann_json::nlohmann_json)
target_compile_definitions(capabilities_test PRIVATE
  SSMCHECK_BIN="$<TARGET_FILE:ssmcheck>"
  SSMCHECK_PARTIAL_PLUGIN="$<TARGET_FILE:ssmcheck_partial_plugin>")
add_dependencies(capabilities_test ssmcheck ssmcheck_partial_plugin ssmcheck-plugin-host)
# the same through the Python bridge: a class declaring FP32 only, no snapshots, no padding rows
add_test(NAME python_capabilities COMMAND /usr/bin/python3 ${PROJECT_SOURCE_DIR}/python/tests/test_capabilities.py)
set_tests_properties(python_capabilities PROPERTIES LABELS cpu TIMEOUT 600
  ENVIRONMENT "SSMCHECK=$<TARGET_FILE:ssmcheck>;PYTHONPATH=${PROJECT_SOURCE_DIR}/python;PYTHONDONTWRITEBYTECODE=1")

# Implementations that run part of the contract (core/capabilities.h): a vLLM-like partial plug-in
# through fuzz, replay and the gate, and the gate's filters.
ssmcheck_test_plugin(ssmcheck_partial_plugin plugins/partial_plugin.cpp)
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

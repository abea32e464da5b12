# Plug-ins (issue 10): the reference built as a plug-in passes CPU campaigns through the C ABI
# alone, its deliberate faults are caught and shrunk, and bad plug-ins (no entry point, another
# ABI version, missing members, a call that aborts) are refused with exit 2 and a message.
foreach(bad NO_ENTRY ABI MISSING_CALL)
  string(TOLOWER ${bad} name)
  add_library(ssmcheck_bad_plugin_${name} MODULE plugins/bad_plugin.c)
  target_compile_definitions(ssmcheck_bad_plugin_${name} PRIVATE BAD_${bad}=1)
  target_include_directories(ssmcheck_bad_plugin_${name} PRIVATE ${PROJECT_SOURCE_DIR})
  set_target_properties(ssmcheck_bad_plugin_${name} PROPERTIES C_STANDARD 99 C_VISIBILITY_PRESET hidden PREFIX lib)
endforeach()
ssmcheck_test(plugin_test LABEL cpu TIMEOUT 900
  SOURCES plugin_test.cpp
  LIBS ssmcheck_plugin_host ssmcheck_fuzz ssmcheck_reference ssmcheck_fixtures)
target_compile_definitions(plugin_test PRIVATE
  SSMCHECK_BIN="$<TARGET_FILE:ssmcheck>"
  SSMCHECK_REFERENCE_PLUGIN="$<TARGET_FILE:ssmcheck_reference_plugin>"
  SSMCHECK_BAD_PLUGIN_DIR="$<TARGET_FILE_DIR:ssmcheck_bad_plugin_abi>")
add_dependencies(plugin_test ssmcheck ssmcheck_reference_plugin ssmcheck_bad_plugin_no_entry ssmcheck_bad_plugin_abi
  ssmcheck_bad_plugin_missing_call)

if(TARGET ssmcheck_cuda_plugin)
  ssmcheck_test(plugin_gpu_test LABEL gpu TIMEOUT 900
    SOURCES plugin_gpu_test.cpp
    LIBS ssmcheck_plugin_host ssmcheck_fuzz ssmcheck_reference ssmcheck_fixtures ssmcheck_cuda)
  target_compile_definitions(plugin_gpu_test PRIVATE
    SSMCHECK_BIN="$<TARGET_FILE:ssmcheck>"
    SSMCHECK_CUDA_PLUGIN="$<TARGET_FILE:ssmcheck_cuda_plugin>"
    SSMCHECK_FIXTURES="${PROJECT_SOURCE_DIR}/fixtures")
  add_dependencies(plugin_gpu_test ssmcheck ssmcheck_cuda_plugin)
endif()

# The Python bridge (python/ssmcheck, no compiled extension) with Debian's python3-numpy: a numpy
# implementation as the system under test of fuzz and check, and the trace writer. The package of
# this source tree, through PYTHONPATH (python_capture, trace.cmake, too).
add_test(NAME python_bridge COMMAND /usr/bin/python3 ${PROJECT_SOURCE_DIR}/python/tests/test_bridge.py)
set_tests_properties(python_bridge PROPERTIES LABELS cpu TIMEOUT 600
  ENVIRONMENT "SSMCHECK=$<TARGET_FILE:ssmcheck>;PYTHONPATH=${PROJECT_SOURCE_DIR}/python;PYTHONDONTWRITEBYTECODE=1")

# The package as users install it: a fresh venv under this build tree takes `pip install
# --no-build-isolation --no-index` of python/ (offline: Debian's setuptools, wheel and numpy through
# --system-site-packages), and from another directory its python runs ssmcheck.run against this
# build's ssmcheck (found on PATH) and finds the capture library; without either on PATH, both in
# the install prefix; pyproject.toml's version is this project's VERSION. The venv is removed.
add_test(NAME python_install
         COMMAND /usr/bin/python3 ${PROJECT_SOURCE_DIR}/python/tests/test_install.py ${CMAKE_CURRENT_BINARY_DIR})
set_tests_properties(python_install PROPERTIES LABELS cpu TIMEOUT 120
  ENVIRONMENT "SSMCHECK=$<TARGET_FILE:ssmcheck>;PYTHONDONTWRITEBYTECODE=1")

# Plug-ins in their host process: a plug-in that misbehaves in any call, at load, or in a campaign.
ssmcheck_test_plugin(ssmcheck_hostile_plugin plugins/hostile_plugin.cpp)
ssmcheck_test(hosted_plugin_test LABEL cpu TIMEOUT 600
  SOURCES hosted_plugin_test.cpp
  LIBS ssmcheck_core nlohmann_json::nlohmann_json)
target_compile_definitions(hosted_plugin_test PRIVATE
  SSMCHECK_BIN="$<TARGET_FILE:ssmcheck>"
  SSMCHECK_HOSTILE_PLUGIN="$<TARGET_FILE:ssmcheck_hostile_plugin>")
add_dependencies(hosted_plugin_test ssmcheck ssmcheck_hostile_plugin)

# docs/plugins.md's C examples compile as written: C99, -Wall -Wextra -Werror -pedantic, designated
# initialisers (a positional copy of the table is refused: the test's self-check).
add_test(NAME docs_c_example COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/docs_c_example_test.py
  ${PROJECT_SOURCE_DIR}/docs/plugins.md ${PROJECT_SOURCE_DIR}/plugin ${CMAKE_C_COMPILER})
set_tests_properties(docs_c_example PROPERTIES LABELS cpu TIMEOUT 60)

# The plug-in ABI by name (SSMP_BY_NAME, issue 40 item 6): a plug-in written only by name
# (tests/plugins/by_name_plugin.cpp) gets the verdicts the old-ABI reference plug-in gets, hosted and
# in ssmcheck's process; its wrong answers and a short table are reported by name.
ssmcheck_test_plugin(ssmcheck_by_name_plugin plugins/by_name_plugin.cpp)
ssmcheck_test(plugin_by_name_test LABEL cpu TIMEOUT 900
  SOURCES plugin_by_name_test.cpp
  LIBS ssmcheck_plugin_host ssmcheck_fuzz ssmcheck_reference ssmcheck_fixtures)
target_compile_definitions(plugin_by_name_test PRIVATE
  SSMCHECK_BIN="$<TARGET_FILE:ssmcheck>"
  SSMCHECK_REFERENCE_PLUGIN="$<TARGET_FILE:ssmcheck_reference_plugin>"
  SSMCHECK_BY_NAME_PLUGIN="$<TARGET_FILE:ssmcheck_by_name_plugin>")
add_dependencies(plugin_by_name_test ssmcheck ssmcheck_reference_plugin ssmcheck_by_name_plugin ssmcheck-plugin-host)

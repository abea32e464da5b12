# What a failure report says (planted slips of the state model, tests/plugins/slip_plugin.cpp): the
# likely cause, the shrunk configuration, the failure as fields, recurrence, systematic bias.
add_library(ssmcheck_slip_plugin MODULE plugins/slip_plugin.cpp)
target_link_libraries(ssmcheck_slip_plugin PRIVATE ssmcheck_backend_plugin ssmcheck_reference)
target_include_directories(ssmcheck_slip_plugin PRIVATE ${PROJECT_SOURCE_DIR})
set_target_properties(ssmcheck_slip_plugin PROPERTIES PREFIX lib CXX_VISIBILITY_PRESET hidden
  VISIBILITY_INLINES_HIDDEN ON)
ssmcheck_test(failure_report_test LABEL cpu TIMEOUT 600 SOURCES failure_report_test.cpp)
target_compile_definitions(failure_report_test PRIVATE
  SSMCHECK_BIN="$<TARGET_FILE:ssmcheck>"
  SSMCHECK_SLIP_PLUGIN="$<TARGET_FILE:ssmcheck_slip_plugin>")
add_dependencies(failure_report_test ssmcheck ssmcheck_slip_plugin ssmcheck-plugin-host)

# What a failure report says (planted slips of the state model, tests/plugins/slip_plugin.cpp): the
# likely cause, the shrunk configuration, the failure as fields, recurrence, systematic bias.
ssmcheck_test_plugin(ssmcheck_slip_plugin plugins/slip_plugin.cpp)
ssmcheck_test(failure_report_test LABEL cpu TIMEOUT 600 SOURCES failure_report_test.cpp)
target_compile_definitions(failure_report_test PRIVATE
  SSMCHECK_BIN="$<TARGET_FILE:ssmcheck>"
  SSMCHECK_SLIP_PLUGIN="$<TARGET_FILE:ssmcheck_slip_plugin>")
add_dependencies(failure_report_test ssmcheck ssmcheck_slip_plugin ssmcheck-plugin-host)

# What a failure report says (planted slips of the state model, tests/plugins/slip_plugin.cpp): the
# likely cause, the shrunk configuration, the failure as fields, recurrence, systematic bias.
ssmcheck_test_plugin(ssmcheck_slip_plugin plugins/slip_plugin.cpp)
ssmcheck_test(failure_report_test LABEL cpu TIMEOUT 600 SOURCES failure_report_test.cpp)
target_compile_definitions(failure_report_test PRIVATE
  SSMCHECK_BIN="$<TARGET_FILE:ssmcheck>"
  SSMCHECK_SLIP_PLUGIN="$<TARGET_FILE:ssmcheck_slip_plugin>")
add_dependencies(failure_report_test ssmcheck ssmcheck_slip_plugin ssmcheck-plugin-host)

# Conventions a trace's producer did not declare, named by a rerun under each (replay/convention_hints.h).
ssmcheck_test(convention_hints_test LABEL cpu TIMEOUT 300 SOURCES convention_hints_test.cpp
  LIBS ssmcheck_replay ssmcheck_compare ssmcheck_formats ssmcheck_reference ssmcheck_fixtures)
target_compile_definitions(convention_hints_test PRIVATE SSMCHECK_BIN="$<TARGET_FILE:ssmcheck>")
add_dependencies(convention_hints_test ssmcheck)

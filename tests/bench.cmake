# bench/bench_ab.py (the kernel A/B of two ssmcheck_bench builds) against stand-ins that write
# known tables: best times, changes, spreads, the --rows filter, refusals. No GPU needed.
add_test(NAME bench_ab COMMAND /usr/bin/python3 ${PROJECT_SOURCE_DIR}/tests/bench_ab_test.py)
set_tests_properties(bench_ab PROPERTIES LABELS cpu TIMEOUT 120 ENVIRONMENT "PYTHONDONTWRITEBYTECODE=1")

# bench/speed_targets.py (issue 13's targets from one device call's outputs) against stand-in
# bench, peers and campaign files: the table, each target's verdict, the refusals. No GPU needed.
add_test(NAME speed_targets COMMAND /usr/bin/python3 ${PROJECT_SOURCE_DIR}/tests/speed_targets_test.py)
set_tests_properties(speed_targets PROPERTIES LABELS cpu TIMEOUT 120 ENVIRONMENT "PYTHONDONTWRITEBYTECODE=1")

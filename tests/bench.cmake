# bench/bench_ab.py (the kernel A/B of two ssmcheck_bench builds) against stand-ins that write
# known tables: best times, changes, spreads, the --rows filter, refusals. No GPU needed.
add_test(NAME bench_ab COMMAND /usr/bin/python3 ${PROJECT_SOURCE_DIR}/tests/bench_ab_test.py)
set_tests_properties(bench_ab PROPERTIES LABELS cpu TIMEOUT 120 ENVIRONMENT "PYTHONDONTWRITEBYTECODE=1")

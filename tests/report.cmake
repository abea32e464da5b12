# The HTML report (report/, docs/report.md): its library under GoogleTest, and the pages in a
# real browser (headless Chromium; skipped with a reason when none is installed, a failure when
# SSMCHECK_REQUIRE_BROWSER=1, as scripts/test sets).
ssmcheck_test(report_test LABEL cpu SOURCES report_test.cpp LIBS ssmcheck_report ssmcheck_reference ssmcheck_fixtures)
add_test(NAME report.browser
         COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/report_browser_test.py $<TARGET_FILE:ssmcheck>
                 $<TARGET_FILE:ssmcheck-mutants> ${PROJECT_SOURCE_DIR}/fixtures ${CMAKE_CURRENT_BINARY_DIR}/report-pages)
set_tests_properties(report.browser PROPERTIES LABELS cpu TIMEOUT 600 SKIP_RETURN_CODE 77)

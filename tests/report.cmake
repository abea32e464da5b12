# The HTML report (report/, docs/report.md): its library under GoogleTest, and the pages in a
# real browser (headless Chromium; skipped with a reason when none is installed, a failure when
# SSMCHECK_REQUIRE_BROWSER=1, as scripts/test sets).
ssmcheck_test(report_test LABEL cpu SOURCES report_test.cpp LIBS ssmcheck_report ssmcheck_reference ssmcheck_fixtures)
add_test(NAME report.browser
         COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/report_browser_test.py $<TARGET_FILE:ssmcheck>
                 $<TARGET_FILE:ssmcheck-mutants> ${PROJECT_SOURCE_DIR}/fixtures ${CMAKE_CURRENT_BINARY_DIR}/report-pages)
set_tests_properties(report.browser PROPERTIES LABELS cpu TIMEOUT 600 SKIP_RETURN_CODE 77)
# what a verdict quotes cannot break it (formats/verdict_text.h)
ssmcheck_test(verdict_text_test LABEL cpu SOURCES verdict_text_test.cpp
  LIBS ssmcheck_formats ssmcheck_fixtures nlohmann_json::nlohmann_json)
target_compile_definitions(verdict_text_test PRIVATE SSMCHECK_BIN="$<TARGET_FILE:ssmcheck>")
add_dependencies(verdict_text_test ssmcheck)

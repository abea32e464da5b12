# The layering (README.md, "Layout"; cmake/layering.cmake): every source file's include arrows
# against the table's links, with a self-check that a planted upward arrow is found; and the
# build's side: compare's include path refuses "reference/..." and compiles what compare links.
add_test(NAME layering COMMAND /usr/bin/python3 ${PROJECT_SOURCE_DIR}/tests/layering_test.py ${PROJECT_SOURCE_DIR})
add_test(NAME layering.build
  COMMAND /usr/bin/python3 ${PROJECT_SOURCE_DIR}/tests/layering_test.py --build ${CMAKE_CXX_COMPILER}
          "$<TARGET_PROPERTY:ssmcheck_compare,INCLUDE_DIRECTORIES>"
  COMMAND_EXPAND_LISTS)
set_tests_properties(layering layering.build PROPERTIES LABELS cpu TIMEOUT 120)

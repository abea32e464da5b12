# compare/ (tolerance classes, reports) and formats/'s HDF5 dumps (issue 3). All cpu: no device needed.
ssmcheck_test(compare_tensor_test LABEL cpu
  SOURCES compare_tensor_test.cpp
  LIBS ssmcheck_compare)
ssmcheck_test(compare_state_test LABEL cpu
  SOURCES compare_state_test.cpp
  LIBS ssmcheck_compare ssmcheck_reference ssmcheck_fixtures)
# The measurement behind Tolerances::defaults(): FP32-compute emulation vs the FP64 reference.
ssmcheck_test(compare_derivation_test LABEL cpu
  SOURCES compare_derivation_test.cpp
  LIBS ssmcheck_compare ssmcheck_reference ssmcheck_fixtures)
# Dumps: round trips, python3-h5py interop, the catalogue of malformed files through the CLI.
ssmcheck_test(compare_dump_test LABEL cpu
  SOURCES compare_dump_test.cpp
  LIBS ssmcheck_compare ssmcheck_formats ssmcheck_reference ssmcheck_fixtures)
target_compile_definitions(compare_dump_test PRIVATE
  SSMCHECK_BIN="$<TARGET_FILE:ssmcheck>"
  SSMCHECK_H5PY_SCRIPT="${PROJECT_SOURCE_DIR}/scripts/h5py_check.py")
add_dependencies(compare_dump_test ssmcheck)

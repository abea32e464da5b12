ssmcheck_test(core_test LABEL cpu
  SOURCES half_test.cpp op_test.cpp layer_spec_test.cpp
  LIBS ssmcheck_core)

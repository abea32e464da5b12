ssmcheck_test(core_test LABEL cpu
  SOURCES half_test.cpp op_test.cpp layer_spec_test.cpp layer_attrs_test.cpp conventions_test.cpp device_select_test.cpp host_copies_test.cpp
  LIBS ssmcheck_core OpenMP::OpenMP_CXX)

ssmcheck_test(hf_config_test LABEL cpu
  SOURCES hf_config_test.cpp
  LIBS ssmcheck_fixtures)

# ssmcheck as a user gets it (issue 43), cpu label, each short:
#   install.setup       cmake --install into a temporary prefix, moved elsewhere (relocatable), and
#                       its layout: executables, the capture library (file name and SONAME agree),
#                       plug-ins, headers, traces, configs, Python sources, docs, CMake package,
#                       pkg-config; no installed text file names a build machine's path
#   install.gate        the installed gate from another directory, default traces from the prefix
#   install.new_c       `ssmcheck new c`: builds with find_package(ssmcheck) and -Werror, loads,
#                       passes check --ops alloc, names 'not implemented: prefill'; pkg-config's
#                       flags build it too; ssmcheck::capture links the installed library
#   install.new_python  `ssmcheck new python` under the installed package (PYTHONPATH, then a venv)
#   install.deb         cpack -G DEB: its dependencies, unpacked (dpkg-deb -x, never installed)
#                       its gate and a plug-in built against its headers
#   install.cli_profile CMakePresets.json's cli profile configures: no CUDA, no tests, no GoogleTest
#   install.ci_recipe   docs/ci.md's GitHub and GitLab jobs, every matrix entry (tests/install_ci_recipe.py)
# tests/install_test.sh has the steps; everything is written under install-test/ here, removed by
# install.cleanup (and each test removes its own directory).
set(ssm_install_work ${CMAKE_CURRENT_BINARY_DIR}/install-test)
set(ssm_install_env "SSMCHECK_SOURCE=${PROJECT_SOURCE_DIR}" "SSMCHECK_BUILD=${PROJECT_BINARY_DIR}"
  "WORK=${ssm_install_work}" "CMAKE=${CMAKE_COMMAND}" "CPACK=${CMAKE_CPACK_COMMAND}" "PYTHONDONTWRITEBYTECODE=1")
foreach(step setup gate new_c new_python deb cli_profile cleanup)
  add_test(NAME install.${step} COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/install_test.sh ${step})
  set_tests_properties(install.${step} PROPERTIES LABELS cpu TIMEOUT 300 ENVIRONMENT "${ssm_install_env}")
endforeach()
add_test(NAME install.ci_recipe
  COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/install_ci_recipe.py ${PROJECT_SOURCE_DIR}/docs/ci.md
          ${ssm_install_work}/prefix ${CMAKE_CURRENT_SOURCE_DIR}/install/ci_plugin ${ssm_install_work})
set_tests_properties(install.ci_recipe PROPERTIES LABELS cpu TIMEOUT 300 ENVIRONMENT "${ssm_install_env}")
set_tests_properties(install.setup PROPERTIES FIXTURES_SETUP ssm_install)
set_tests_properties(install.gate install.new_c install.new_python install.ci_recipe PROPERTIES FIXTURES_REQUIRED ssm_install)
set_tests_properties(install.cleanup PROPERTIES FIXTURES_CLEANUP ssm_install)
# install.deb works in its own directory under the same one: it must not run while setup empties it
set_tests_properties(install.deb install.cli_profile PROPERTIES DEPENDS install.setup FIXTURES_REQUIRED ssm_install)

# What `cmake --install BUILD --prefix PREFIX` puts where (relocatable: nothing installed names
# PREFIX or the build machine's paths; the executables find their data relative to themselves,
# cli/default_paths.h), the CMake package (find_package(ssmcheck)), the pkg-config file and the
# Debian package (cpack -G DEB). README.md "Install" and docs/ci.md use it; tests/install.cmake checks it.
#
#   bin/ssmcheck, bin/ssmcheck-plugin-host            the tool and the process every plug-in runs in
#   lib*/libssmcheck_capture.so.1.N (SONAME .so.1)    the capture library (capture/ssmcheck_capture.h)
#   lib*/ssmcheck/libssmcheck_reference_plugin.so     the built-in plug-ins (and the CUDA one, with CUDA)
#   include/ssmcheck/ssmcheck_plugin.h, ssmcheck_capture.h
#   share/ssmcheck/traces, share/ssmcheck/configs     golden and faulty traces, Hugging Face configs
#   share/ssmcheck/python                             the Python package's sources (pip install it)
#   share/doc/ssmcheck                                README.md and docs/
#   lib*/cmake/ssmcheck, lib*/pkgconfig/ssmcheck.pc   ssmcheck::plugin_abi, ssmcheck::capture, ssmcheck::ssmcheck
include(CMakePackageConfigHelpers)

set(SSMCHECK_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/ssmcheck)
set(SSMCHECK_PLUGIN_DIR ${CMAKE_INSTALL_LIBDIR}/ssmcheck)
set(SSMCHECK_DATA_DIR ${CMAKE_INSTALL_DATADIR}/ssmcheck)

# the plug-in ABI: a header, nothing to link
add_library(ssmcheck_plugin_abi INTERFACE)
target_include_directories(ssmcheck_plugin_abi INTERFACE $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
set_target_properties(ssmcheck_plugin_abi PROPERTIES EXPORT_NAME plugin_abi)
set_target_properties(ssmcheck_capture PROPERTIES EXPORT_NAME capture)
set_target_properties(ssmcheck PROPERTIES EXPORT_NAME ssmcheck)

install(TARGETS ssmcheck ssmcheck-plugin-host EXPORT ssmcheckTargets RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS ssmcheck_capture EXPORT ssmcheckTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} NAMELINK_SKIP
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# the unversioned link (python/ssmcheck/locate.py and -lssmcheck_capture find it)
install(TARGETS ssmcheck_capture LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} NAMELINK_ONLY)
install(TARGETS ssmcheck_plugin_abi EXPORT ssmcheckTargets)
set(ssmcheck_plugins ssmcheck_reference_plugin)
if(TARGET ssmcheck_cuda_plugin)
  list(APPEND ssmcheck_plugins ssmcheck_cuda_plugin)
endif()
install(TARGETS ${ssmcheck_plugins} LIBRARY DESTINATION ${SSMCHECK_PLUGIN_DIR})
install(FILES ${PROJECT_SOURCE_DIR}/plugin/ssmcheck_plugin.h ${PROJECT_SOURCE_DIR}/capture/ssmcheck_capture.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/ssmcheck)

install(DIRECTORY ${PROJECT_SOURCE_DIR}/fixtures/traces ${PROJECT_SOURCE_DIR}/fixtures/configs
  DESTINATION ${SSMCHECK_DATA_DIR})
install(FILES ${PROJECT_SOURCE_DIR}/python/pyproject.toml DESTINATION ${SSMCHECK_DATA_DIR}/python)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/python/ssmcheck ${PROJECT_SOURCE_DIR}/python/examples
  DESTINATION ${SSMCHECK_DATA_DIR}/python
  PATTERN __pycache__ EXCLUDE PATTERN "*.pyc" EXCLUDE PATTERN "*.egg-info" EXCLUDE)
install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs)

# find_package(ssmcheck): relocatable (PACKAGE_PREFIX_DIR is computed from the file's own place)
install(EXPORT ssmcheckTargets NAMESPACE ssmcheck:: DESTINATION ${SSMCHECK_CMAKE_DIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/ssmcheckConfig.cmake.in
  ${PROJECT_BINARY_DIR}/cmake/ssmcheckConfig.cmake INSTALL_DESTINATION ${SSMCHECK_CMAKE_DIR}
  PATH_VARS SSMCHECK_PLUGIN_DIR SSMCHECK_DATA_DIR)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/cmake/ssmcheckConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/cmake/ssmcheckConfig.cmake ${PROJECT_BINARY_DIR}/cmake/ssmcheckConfigVersion.cmake
  DESTINATION ${SSMCHECK_CMAKE_DIR})

# pkg-config: prefix relative to the .pc file itself (${pcfiledir}), so the prefix may move
file(RELATIVE_PATH ssmcheck_pc_up /root/${CMAKE_INSTALL_LIBDIR}/pkgconfig /root)
string(REGEX REPLACE "/$" "" ssmcheck_pc_up "${ssmcheck_pc_up}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/ssmcheck.pc.in ${PROJECT_BINARY_DIR}/cmake/ssmcheck.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/cmake/ssmcheck.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# The Debian package: cpack -G DEB --config BUILD/CPackConfig.cmake (tests/install.cmake unpacks it)
set(CPACK_PACKAGE_NAME ssmcheck)
set(CPACK_PACKAGE_VENDOR "ssmcheck")
set(CPACK_PACKAGE_CONTACT "ssmcheck maintainers <ssmcheck@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "reference-and-verification harness for the recurrent state of hybrid LLMs")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)  # the build's debug info stays in the build tree
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
if(SSMCHECK_HAVE_CUDA)
  # libcudart comes from NVIDIA's CUDA installation, which no Debian package provides, so
  # dpkg-shlibdeps refuses it: the Debian libraries are named instead (bookworm's), and the
  # binaries find libcudart through their RPATH or the loader's cache.
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS OFF)
  set(CPACK_DEBIAN_PACKAGE_DEPENDS "libc6, libgcc-s1, libstdc++6, libgomp1, libhdf5-103-1, libfmt9")
else()
  find_program(SSMCHECK_DPKG_SHLIBDEPS dpkg-shlibdeps)
  if(SSMCHECK_DPKG_SHLIBDEPS)
    set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)  # what the binaries link, as the Debian packages providing it
  else()
    set(CPACK_DEBIAN_PACKAGE_DEPENDS "libc6, libgcc-s1, libstdc++6, libgomp1, libhdf5-103-1, libfmt9")
  endif()
endif()
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "python3-numpy, cmake")
set(CPACK_GENERATOR DEB)
include(CPack)

# ssmcheck_numerics_digest(TARGET NAME [SOURCES_OF other targets...]): adds to TARGET a source,
# generated at build time by cmake/numerics_digest.cmake, defining `const char* ssm::numerics::NAME()`:
# the digest of what determines the numerics of TARGET (its sources, those of the targets named
# after SOURCES_OF, every repository header they include, the compilers, the flags and definitions
# TARGET compiles with, the Eigen and CUDA versions). Backends name themselves by it
# (Backend::numerics_id), and replay promises bits for a trace recorded by the same numerics.
# Call it after the target's options are set (it reads them when called).
function(ssmcheck_numerics_digest target name)
  cmake_parse_arguments(PARSE_ARGV 2 arg "" "" "SOURCES_OF")
  set(sources "")
  foreach(t ${target} ${arg_SOURCES_OF})
    get_target_property(srcs ${t} SOURCES)
    get_target_property(dir ${t} SOURCE_DIR)
    foreach(s IN LISTS srcs)
      if(s MATCHES "^numerics_.*\\.cpp$" OR s MATCHES "/numerics_[^/]*\\.cpp$")
        # neither a generated digest nor numerics_id.cpp, which prints it with what it runs on: neither
        # computes anything, and the id states the run-time part itself
        continue()
      endif()
      get_filename_component(s "${s}" ABSOLUTE BASE_DIR "${dir}")
      list(APPEND sources "${s}")
    endforeach()
  endforeach()
  # how TARGET compiles: its own options and definitions and those its libraries pass on
  set(how "")
  foreach(t ${target})
    foreach(p COMPILE_OPTIONS COMPILE_DEFINITIONS COMPILE_FEATURES)
      get_target_property(v ${t} ${p})
      if(v)
        string(APPEND how " ${p}=${v}")
      endif()
    endforeach()
    get_target_property(libs ${t} LINK_LIBRARIES)
    foreach(l IN LISTS libs)
      if(TARGET ${l})
        foreach(p INTERFACE_COMPILE_OPTIONS INTERFACE_COMPILE_DEFINITIONS)
          get_target_property(v ${l} ${p})
          if(v)
            string(APPEND how " ${l}:${p}=${v}")
          endif()
        endforeach()
      endif()
    endforeach()
  endforeach()
  string(TOUPPER "${CMAKE_BUILD_TYPE}" config)
  set(extra "CXX ${CMAKE_CXX_COMPILER_ID} ${CMAKE_CXX_COMPILER_VERSION} ${CMAKE_CXX_FLAGS} ${CMAKE_CXX_FLAGS_${config}}")
  if(SSMCHECK_HAVE_CUDA)
    string(APPEND extra " | CUDA ${CMAKE_CUDA_COMPILER_ID} ${CMAKE_CUDA_COMPILER_VERSION} ${CMAKE_CUDA_FLAGS}"
                        " ${CMAKE_CUDA_FLAGS_${config}} arch ${CMAKE_CUDA_ARCHITECTURES} toolkit ${CUDAToolkit_VERSION}")
  endif()
  string(APPEND extra " | Eigen ${Eigen3_VERSION} | ${how}")
  string(REPLACE "${PROJECT_SOURCE_DIR}" "<root>" extra "${extra}")  # the clone's path is not numerics
  string(REPLACE "${PROJECT_BINARY_DIR}" "<build>" extra "${extra}")
  string(REPLACE "$<" "$ <" extra "${extra}")  # the properties' generator expressions, as text
  # every repository header may be included: a change to one re-runs the digest, which follows the
  # includes of the sources to decide which of them count
  file(GLOB headers CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/*/*.h ${PROJECT_SOURCE_DIR}/*/*.cuh)
  list(FILTER headers EXCLUDE REGEX "^${PROJECT_BINARY_DIR}/")
  set(out ${CMAKE_CURRENT_BINARY_DIR}/numerics_${target}.cpp)
  add_custom_command(OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -DNAME=${name} -DOUT=${out} -DROOT=${PROJECT_SOURCE_DIR} "-DSOURCES=${sources}"
            "-DEXTRA=${extra}" -P ${PROJECT_SOURCE_DIR}/cmake/numerics_digest.cmake
    DEPENDS ${sources} ${headers} ${PROJECT_SOURCE_DIR}/cmake/numerics_digest.cmake
    COMMENT "Digest of what determines the numerics of ${target}" VERBATIM)
  target_sources(${target} PRIVATE ${out})
endfunction()

# What determines an implementation's numerics, as one digest (docs/trace-format.md, "Bits where
# bits are promised"): the text of its sources and of every repository header they include
# (followed transitively), the compilers and their flags and the versions of the libraries whose
# headers take part. Run at build time by ssmcheck_numerics_digest() (CMakeLists.txt):
#   cmake -DNAME=<function> -DOUT=<generated .cpp> -DROOT=<repository> -DSOURCES=<a;b> -DEXTRA=<text>
#         -P numerics_digest.cmake
# The generated file defines `const char* ssm::numerics::NAME()`, the digest's first 16 hex digits
# (64 bits), and is rewritten only when the digest changes (no needless recompiles). Two builds of
# the same sources with the same compilers and flags give the same digest on any machine; a change
# to any of them, even a comment, gives another (conservative: bits are promised only for code
# known to be the same).
cmake_minimum_required(VERSION 3.20)
foreach(v NAME OUT ROOT SOURCES)
  if(NOT DEFINED ${v} OR "${${v}}" STREQUAL "")
    message(FATAL_ERROR "numerics_digest.cmake: -D${v}=... is required")
  endif()
endforeach()

set(pending ${SOURCES})
set(seen "")
while(pending)
  list(POP_FRONT pending f)
  get_filename_component(f "${f}" ABSOLUTE BASE_DIR "${ROOT}")
  if(f IN_LIST seen)
    continue()
  endif()
  list(APPEND seen "${f}")
  file(STRINGS "${f}" includes REGEX "^[ \t]*#[ \t]*include[ \t]*\"[^\"]+\"")
  get_filename_component(dir "${f}" DIRECTORY)
  foreach(line IN LISTS includes)
    string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([^\"]+)\".*" "\\1" inc "${line}")
    # resolved as the compiler does: next to the including file, then from the repository root
    if(EXISTS "${dir}/${inc}")
      list(APPEND pending "${dir}/${inc}")
    elseif(EXISTS "${ROOT}/${inc}")
      list(APPEND pending "${ROOT}/${inc}")
    endif()
  endforeach()
endwhile()

list(SORT seen)
set(text "")
foreach(f IN LISTS seen)
  file(RELATIVE_PATH rel "${ROOT}" "${f}")
  file(SHA256 "${f}" h)
  string(APPEND text "${rel} ${h}\n")
endforeach()
string(APPEND text "${EXTRA}\n")
string(SHA256 digest "${text}")
string(SUBSTRING "${digest}" 0 16 digest)
list(LENGTH seen count)

string(CONCAT content "// Generated at build time by cmake/numerics_digest.cmake: do not edit.\n"
                      "// ${count} files and the compilers' identity and flags.\n"
                      "namespace ssm::numerics {\n"
                      "const char* ${NAME}() { return \"${digest}\"; }\n"
                      "}  // namespace ssm::numerics\n")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
  if(old STREQUAL content)
    return()
  endif()
endif()
file(WRITE "${OUT}" "${content}")

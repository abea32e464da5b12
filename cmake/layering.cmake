# The layering as the compiler sees it (README.md, "Layout"): a folder's target sees the headers of
# its own folder and of the folders it links, nothing else of the repository, so an upward
# `#include "reference/..."` in compare/ fails to build. Each folder gets a view directory in the
# build tree holding one link, FOLDER -> the source folder; its targets put that view on their
# PUBLIC include path, and linking a target passes its views on. tests/layering_test.py checks
# the include arrows of every source file against the same table.

# ssmcheck_folder_view(FOLDER OUT): the view directory of FOLDER (made on first use) in OUT.
function(ssmcheck_folder_view folder out)
  set(view ${PROJECT_BINARY_DIR}/include_views/${folder})
  if(NOT EXISTS ${view}/${folder})
    file(MAKE_DIRECTORY ${view})
    file(CREATE_LINK ${PROJECT_SOURCE_DIR}/${folder} ${view}/${folder} SYMBOLIC)
  endif()
  set(${out} ${view} PARENT_SCOPE)
endfunction()

# ssmcheck_folder_includes(TARGET FOLDER [SEES FOLDER...]): TARGET's sources, and every target
# linking it, include FOLDER's headers as "FOLDER/..."; SEES: folders TARGET itself may include
# without linking their target (the CLI names the CUDA backend; the mutant build links its own copy).
function(ssmcheck_folder_includes target folder)
  cmake_parse_arguments(A "" "" "SEES" ${ARGN})
  ssmcheck_folder_view(${folder} view)
  target_include_directories(${target} PUBLIC $<BUILD_INTERFACE:${view}>)
  foreach(seen ${A_SEES})
    ssmcheck_folder_view(${seen} view)
    target_include_directories(${target} PRIVATE ${view})
  endforeach()
endfunction()

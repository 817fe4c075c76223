# slapo_find_c_library(<target> HEADER <file> [SUFFIXES <dirs>] NAMES <libs>): an imported target
# for a plain C library, found through CMAKE_PREFIX_PATH and the system paths. No pkg-config:
# the GPU machines have none, and there the libraries come from a carried prefix (scripts/device-kit).
function(slapo_find_c_library target)
  cmake_parse_arguments(ARG "" "HEADER" "SUFFIXES;NAMES" ${ARGN})
  string(MAKE_C_IDENTIFIER "${target}" var)
  find_path(${var}_INCLUDE_DIR ${ARG_HEADER} PATH_SUFFIXES ${ARG_SUFFIXES})
  find_library(${var}_LIBRARY NAMES ${ARG_NAMES})
  if(NOT ${var}_INCLUDE_DIR OR NOT ${var}_LIBRARY)
    message(FATAL_ERROR "${target}: ${ARG_HEADER} or lib${ARG_NAMES} not found (scripts/setup installs it; "
                        "elsewhere put its prefix in CMAKE_PREFIX_PATH)")
  endif()
  add_library(${target} UNKNOWN IMPORTED)
  set_target_properties(${target} PROPERTIES IMPORTED_LOCATION "${${var}_LIBRARY}"
                                             INTERFACE_INCLUDE_DIRECTORIES "${${var}_INCLUDE_DIR}")
  message(STATUS "${target}: ${${var}_LIBRARY}")
endfunction()

# cmake/FindPCRE2.cmake: PCRE2's 8-bit library (the tokenizer's split regex) as the imported
# target PCRE2::pcre2-8. Through pkg-config where it knows libpcre2-8 (Debian's libpcre2-dev);
# otherwise the header and library are looked for directly, so a machine without pkg-config,
# or with PCRE2 unpacked into a private prefix named in CMAKE_PREFIX_PATH (scripts/gpu.sh and
# scripts/gpu_bundle.sh), finds it too. Installed beside brrrConfig.cmake for find_package(brrr).
find_package(PkgConfig QUIET)
if(PKG_CONFIG_FOUND)
  pkg_check_modules(PC_PCRE2 QUIET libpcre2-8)
endif()
find_path(PCRE2_INCLUDE_DIR pcre2.h HINTS ${PC_PCRE2_INCLUDE_DIRS})
find_library(PCRE2_LIBRARY NAMES pcre2-8 HINTS ${PC_PCRE2_LIBRARY_DIRS})
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(PCRE2 REQUIRED_VARS PCRE2_LIBRARY PCRE2_INCLUDE_DIR
                                  VERSION_VAR PC_PCRE2_VERSION)
if(PCRE2_FOUND AND NOT TARGET PCRE2::pcre2-8)
  add_library(PCRE2::pcre2-8 UNKNOWN IMPORTED)
  set_target_properties(PCRE2::pcre2-8 PROPERTIES
    IMPORTED_LOCATION "${PCRE2_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${PCRE2_INCLUDE_DIR}")
endif()
mark_as_advanced(PCRE2_INCLUDE_DIR PCRE2_LIBRARY)

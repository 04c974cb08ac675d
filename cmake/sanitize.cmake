# Sanitizer builds (`make sanitize`: VT_SANITIZE="address;undefined"). Included by the top-level
# CMakeLists.txt and by the probe project of tests/sanitize_link (ctest `sanitize_links`), so that
# the check and the build use one set of flags.
#
# UBSan's `vptr` check reads the type information of every polymorphic class whose members a
# file calls. Debian's LibTorch does not export that of some classes its JIT headers reach
# (`typeinfo for c10::DynamicType`), so a file that includes LibTorch cannot link with `vptr` on:
# vt_torch_sources turns it off for the files that include LibTorch, and only for them
# (docs/reliability.md, "Sanitizers").

set(VT_SANITIZE "" CACHE STRING "Sanitizers to build with, e.g. address;undefined")

function(vt_enable_sanitizers)
  foreach(san IN LISTS VT_SANITIZE)
    add_compile_options(-fsanitize=${san} -fno-omit-frame-pointer -fno-sanitize-recover=all)
    add_link_options(-fsanitize=${san})
  endforeach()
endfunction()

# vt_torch_sources(FILE...): FILE includes LibTorch's headers.
function(vt_torch_sources)
  if("undefined" IN_LIST VT_SANITIZE)
    set_property(SOURCE ${ARGN} DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR} APPEND PROPERTY COMPILE_OPTIONS -fno-sanitize=vptr)
  endif()
endfunction()

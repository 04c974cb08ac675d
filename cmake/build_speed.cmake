# What keeps a build on the 2-core machines short (docs/development.md, "Build time"). None of it
# changes a compiled instruction of the kernels or the trainer: the same sources and flags,
# linked and compiled in fewer, larger steps.
#
# - A faster linker. GNU ld spends 1.5 s linking one test against LibTorch, lld 0.25 s; an edit to
#   one kernels/ file relinks some forty programs.
# - Unity builds for the targets whose files spend their time in the same third-party templates
#   (CLI11, spdlog, nlohmann_json, Boost.Asio, GoogleTest): compiled in batches, each template is
#   instantiated and optimised once per batch, not once per file; training/'s LibTorch files, whose
#   time is mostly LibTorch's headers, likewise; and every other module's libraries, the
#   torch-free `_core` ones the light `veritrain` links included. Not kernels/ (whose files take
#   per-file ISA flags).
#   Precompiled headers were measured and left out: GCC's were 100-630 MB here, and loading one
#   cost about what parsing the headers did (docs/development.md).
# - The tests' own code at -Og in a Release build: assertions, fixtures and command lines, half
#   of a fresh build's compile time at -O3. What they test (every library, kernels/ with its own
#   flags, the programs they start) is compiled as it ships.

option(VT_FAST_LINKER "Link with lld (or gold) when the compiler can" ON)
option(VT_UNITY "Compile the template-heavy targets in batches (unity builds)" ON)
set(VT_TEST_CODE_OPTIMIZE "-Og" CACHE STRING "Optimisation of the tests' own code in a Release build")
set(VT_UNITY_BATCH 8 CACHE STRING "Files per unity batch")

if(VT_FAST_LINKER)
  include(CheckLinkerFlag)
  foreach(linker IN ITEMS lld gold)
    check_linker_flag(CXX -fuse-ld=${linker} VT_HAVE_LINKER_${linker})
    if(VT_HAVE_LINKER_${linker})
      add_link_options(-fuse-ld=${linker})
      break()
    endif()
  endforeach()
endif()

# vt_unity(TARGET): TARGET's files compiled VT_UNITY_BATCH at a time. Its files keep their
# file-local names apart (no two define one in an anonymous namespace).
function(vt_unity target)
  if(VT_UNITY)
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE ${VT_UNITY_BATCH})
  endif()
endfunction()

# vt_test_code(TARGET): TARGET is test code (a test program or a library only tests link).
function(vt_test_code target)
  if(VT_TEST_CODE_OPTIMIZE)
    target_compile_options(${target} PRIVATE $<$<CONFIG:Release>:${VT_TEST_CODE_OPTIMIZE}>)
  endif()
endfunction()

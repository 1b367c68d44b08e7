# Compiler flags of a URNIC_FUZZ build (included by the top-level CMakeLists.txt before any
# target is defined, so the libraries are instrumented too).
#
# Every object gets libFuzzer's coverage instrumentation (fuzzer-no-link) plus ASan and UBSan,
# so the fuzzer sees edges inside the dataplane and a memory error anywhere is a crash. Only the
# fuzz executables link libFuzzer's main (-fsanitize=fuzzer, in tests/fuzz/CMakeLists.txt).
if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  message(FATAL_ERROR "URNIC_FUZZ needs clang (-fsanitize=fuzzer): configure with CXX=clang++")
endif()
if(URNIC_SANITIZE)
  message(FATAL_ERROR "URNIC_FUZZ sets its own sanitizers; leave URNIC_SANITIZE empty")
endif()
add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all
                    -fno-omit-frame-pointer)
add_link_options(-fsanitize=address,undefined)

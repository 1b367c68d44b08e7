# CMake generated Testfile for 
# Source directory: /work/main/tests
# Build directory: /work/main/build/tests
# 
# This file includes the relevant testing commands required for 
# testing this directory and lists subdirectories to be tested as well.
include("/work/main/build/tests/test_wire_headers[1]_include.cmake")
include("/work/main/build/tests/test_opcode_table[1]_include.cmake")
include("/work/main/build/tests/test_psn[1]_include.cmake")
include("/work/main/build/tests/test_vectors[1]_include.cmake")
include("/work/main/build/tests/test_malformed[1]_include.cmake")
include("/work/main/build/tests/test_port_loopback[1]_include.cmake")
add_test([=[check_style]=] "/work/main/scripts/check-style.sh")
set_tests_properties([=[check_style]=] PROPERTIES  LABELS "style" _BACKTRACE_TRIPLES "/work/main/tests/CMakeLists.txt;24;add_test;/work/main/tests/CMakeLists.txt;0;")

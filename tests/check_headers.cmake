# ctest check_headers: no public header (include/urnic/) includes a private one (control/,
# dataplane/), and each compiles on its own: the object library urnic_check_headers (one
# generated translation unit per header, only include/ on its include path) is up to date.
# Run with -DSOURCE_DIR=... -DBUILD_DIR=... -P.
file(GLOB headers ${SOURCE_DIR}/include/urnic/*.h)
set(bad "")
foreach(h ${headers})
  file(STRINGS ${h} lines REGEX "^[ \t]*#[ \t]*include[ \t]*[<\"](control|dataplane)/")
  if(lines)
    list(APPEND bad "${h}: ${lines}")
  endif()
endforeach()
if(bad)
  message(FATAL_ERROR "public headers include private ones:\n${bad}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${BUILD_DIR} --target urnic_check_headers
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "a public header does not compile on its own (see above)")
endif()
list(LENGTH headers n)
message(STATUS "check_headers: ${n} public headers, each compiles on its own")

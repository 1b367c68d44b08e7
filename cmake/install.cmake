# `cmake --install`: the public headers (include/urnic/ only), the static libraries of the
# public API with the internal libraries they need, a CMake package (find_package(urnic) gives
# the one imported target urnic::urnic, carrying DPDK, TBB and threads) and urnic.pc.
# Both are relocatable: they find the prefix from their own location.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/urnic DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.h")

# In link order: each library needs only the ones after it.
set(URNIC_INSTALL_LIBS urnic urnic_ipc urnic_cm urnic_control urnic_route urnic_dataplane
  urnic_wire)
install(TARGETS ${URNIC_INSTALL_LIBS} ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})

set(_urnic_archives "")
set(_urnic_pc_libs "")
foreach(lib ${URNIC_INSTALL_LIBS})
  list(APPEND _urnic_archives
    "\${_urnic_libdir}/${CMAKE_STATIC_LIBRARY_PREFIX}${lib}${CMAKE_STATIC_LIBRARY_SUFFIX}")
  string(APPEND _urnic_pc_libs " -l${lib}")
endforeach()
set(URNIC_CONFIG_ARCHIVES "${_urnic_archives}")
set(URNIC_PC_LIBS "${_urnic_pc_libs}")

set(_urnic_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/urnic)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/urnic-config.cmake.in
  ${PROJECT_BINARY_DIR}/generated/urnic-config.cmake
  INSTALL_DESTINATION ${_urnic_cmake_dir}
  PATH_VARS CMAKE_INSTALL_INCLUDEDIR CMAKE_INSTALL_LIBDIR)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/generated/urnic-config-version.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/generated/urnic-config.cmake
  ${PROJECT_BINARY_DIR}/generated/urnic-config-version.cmake
  DESTINATION ${_urnic_cmake_dir})

# urnic.pc: the prefix is found from the .pc file's own directory (pkg-config's ${pcfiledir}).
file(RELATIVE_PATH URNIC_PC_TO_PREFIX /p/${CMAKE_INSTALL_LIBDIR}/pkgconfig /p)
string(REGEX REPLACE "/$" "" URNIC_PC_TO_PREFIX "${URNIC_PC_TO_PREFIX}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/urnic.pc.in ${PROJECT_BINARY_DIR}/generated/urnic.pc
  @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/generated/urnic.pc
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# Finds DPDK through pkg-config (libdpdk) and exports the imported target DPDK::dpdk.
# Its include directories are SYSTEM so that DPDK's own headers, which warn under C++20 with
# -Wall -Wextra, do not break our zero-warning rule. The target names live only in this file.
find_package(PkgConfig REQUIRED)
pkg_check_modules(LIBDPDK REQUIRED IMPORTED_TARGET libdpdk)

if(NOT TARGET DPDK::dpdk)
  add_library(DPDK::dpdk INTERFACE IMPORTED)
  # pkg-config's cflags carry -include rte_config.h and -march; keep them, but route the include
  # directories through SYSTEM.
  set(_dpdk_opts ${LIBDPDK_CFLAGS_OTHER})
  target_compile_options(DPDK::dpdk INTERFACE ${_dpdk_opts})
  # Experimental symbols we use (rte_vect_*_max_simd_bitwidth) are part of 22.11 as shipped.
  target_compile_definitions(DPDK::dpdk INTERFACE ALLOW_EXPERIMENTAL_API)
  target_include_directories(DPDK::dpdk SYSTEM INTERFACE ${LIBDPDK_INCLUDE_DIRS})
  # net_ring is linked directly for rte_eth_from_rings() (back-to-back loopback ports); the other
  # PMDs (net_tap, net_af_packet, PCI drivers) are loaded by EAL from its plugin directory.
  target_link_libraries(DPDK::dpdk INTERFACE ${LIBDPDK_LINK_LIBRARIES} rte_net_ring)
  target_link_directories(DPDK::dpdk INTERFACE ${LIBDPDK_LIBRARY_DIRS})
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(DPDK REQUIRED_VARS LIBDPDK_FOUND VERSION_VAR LIBDPDK_VERSION)

// urnicd's configuration (docs/daemon.md "Configuration"): an INI-style file, every key of which
// may be overridden from the command line (`--set SECTION.KEY=VALUE`). Sections:
//
//   [daemon]           socket, socket_mode, socket_group, lock_dir, lcores, engines, memory,
//                      memory_mb, log_level, file_prefix, max_clients, idle_sleep_us
//   [port NAME]        one adapter the daemon serves, named NAME (what clients open): exactly
//                      one of devargs (a DPDK vdev), pci (a NIC bound to a DPDK driver) or ring
//                      (PAIR:a or PAIR:b, one side of an in-process net_ring pair); then ipv4,
//                      ipv6, mac, engines, mbufs, max_qps
//
// With no port at all the daemon serves the in-memory default: a net_ring pair as urnic0
// (192.0.2.1) and urnic1 (192.0.2.2), wired back to back, as the quick start's main job does.
// No DPDK here: parsing and checking only, so the tests and urnicd --check use it alone.
#pragma once

#include "urnic/route.h"

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace urnic::daemon {

struct PortConfig {
  std::string name;     // the adapter's name: 1 .. 31 of [A-Za-z0-9_.-]
  std::string devargs;  // net_af_packet0,iface=veth0 ...
  std::string pci;      // 0000:03:00.0
  std::string ring;     // PAIR:a or PAIR:b
  uint32_t ipv4 = 0;    // host order
  std::optional<std::array<uint8_t, 16>> ipv6;
  uint8_t ipv4_len = 0, ipv6_len = 0;  // ipv4 = A.B.C.D/LEN: the subnet (urnic/route.h)
  std::vector<Route> routes;           // each `route = DEST/LEN via GW` line adds one
  std::optional<std::array<uint8_t, 6>> mac;
  uint32_t engines = 1;  // the daemon's engines 0 .. engines-1 serve it
  uint32_t mbufs = 16383;
  uint32_t max_qps = 1024;
};

struct Config {
  std::string socket = "/run/urnic/urnicd.sock";
  uint32_t socket_mode = 0660;
  std::string socket_group;  // a group name or number; empty: the daemon's own group
  std::string lock_dir = "/run/urnic/locks";
  std::string lcores = "0-1";   // the first is the daemon's main thread, the rest run engines
  uint32_t engines = 1;         // engines launched, one per worker lcore
  std::string memory = "auto";  // auto, nohuge or huge
  uint32_t memory_mb = 512;
  std::string log_level = "*:notice";
  std::string file_prefix = "urnicd";  // DPDK runtime directory: /var/run/dpdk/<file_prefix>/
  uint32_t max_clients = 256;
  // A directory (absolute) where the daemon makes uverbs-<adapter> for each adapter while it runs
  // (a symlink to /dev/null: no kernel device is behind it), for programs that look for
  // /dev/infiniband/<dev_name> before they use a device (UCX). Empty: none.
  std::string device_nodes;
  // An engine idle for a few milliseconds sleeps this long between polls (0: it never sleeps,
  // for a dedicated core); see EngineConfig::idle_sleep_us.
  uint32_t idle_sleep_us = 1000;
  // Per client (docs/daemon.md "Quotas"): more is refused with STATUS_INSUFFICIENT_RESOURCES.
  uint32_t quota_pds = 64, quota_cqs = 256, quota_qps = 1024, quota_mrs = 4096;
  uint32_t quota_shared_mb = 4096;
  std::vector<PortConfig> ports;
};

// Applies one `key = value` of `section` ("daemon" or "port NAME") to `c`; false with *err set
// for an unknown section or key, or a value out of its range.
bool apply(Config* c, std::string_view section, std::string_view key, std::string_view value,
           std::string* err);
// Reads a configuration file; false with *err ("FILE:LINE: why") on the first bad line.
bool load_file(const std::string& path, Config* c, std::string* err);
// Applies a `--set SECTION.KEY=VALUE` (SECTION is "daemon" or "port.NAME").
bool apply_override(Config* c, std::string_view set, std::string* err);
// The checks across keys: each port has exactly one source, names are unique, ring sides pair
// up, engines fit; adds the in-memory default when there is no port. false with *err.
bool finish(Config* c, std::string* err);

// What a port's lock is named after: the interface (with the network namespace it is in) or
// the PCI device it drives; empty for a ring side (nothing outside the process).
std::string port_identity(const PortConfig& p, uint64_t netns_inode);

}  // namespace urnic::daemon

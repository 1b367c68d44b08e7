// include/urnic/runtime.h over control/eal.h: argument checks, the PCI port lookup, and a
// one-line reason for every failure.
#include "urnic/runtime.h"

#include <rte_dev.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_pci.h>
#include <rte_ring.h>

#include <linux/ethtool.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <numeric>
#include <string>

#include "control/eal.h"
#include "control/last_error.h"
#include "control/xdp.h"
#include "dataplane/log.h"

namespace urnic {
namespace {

thread_local std::string t_last_error;
// Set when rte_eal_init failed: DPDK cannot be brought up again in the process (after a late
// failure it answers EALREADY for an EAL that is not up; after an argument error it keeps some
// of the parsed options and refuses the next set).
std::atomic<bool> g_eal_broken{false};

Status fail(Status s, std::string why) noexcept {
  try {
    t_last_error = std::move(why);
  } catch (...) {
    t_last_error.clear();
  }
  return s;
}
Status ok() noexcept {
  t_last_error.clear();
  return Status::kSuccess;
}
}  // namespace

namespace detail {
Status fail_with(Status s, std::string why) noexcept { return fail(s, std::move(why)); }
Status succeed() noexcept { return ok(); }
}  // namespace detail

namespace {

std::string errno_text(int e) { return std::string(rte_strerror(e)); }

ctl::EalOptions to_eal(const RuntimeConfig& c) {
  ctl::EalOptions o;
  o.program = c.program.empty() ? "urnic" : c.program;
  switch (c.memory) {
    case RuntimeConfig::Memory::kNoHuge:
      o.memory = ctl::EalOptions::Memory::kNoHuge;
      break;
    case RuntimeConfig::Memory::kHugepages:
      o.memory = ctl::EalOptions::Memory::kHuge;
      break;
    default:
      o.memory = ctl::EalOptions::Memory::kAuto;
      break;
  }
  o.memory_mb = c.memory_mb;
  o.no_pci = !c.pci && c.pci_allow.empty();
  o.pci_allow = c.pci_allow;
  o.lcores = c.lcores;
  o.log_level = c.log_level;
  o.telemetry = c.telemetry;
  o.file_prefix = c.file_prefix;
  o.extra = c.extra_args;
  return o;
}

Status need_eal() noexcept {
  if (ctl::eal_running()) return Status::kSuccess;
  return fail(Status::kInvalidDeviceState, "EAL is not running: call urnic::runtime_init first");
}

// EAL's --log-level: LEVEL or PATTERN:LEVEL, LEVEL a name or 1 .. 8. EAL 22.11 only warns about
// a bad one and carries on, so it is checked here.
bool valid_log_level(std::string_view v) {
  if (v.empty()) return true;
  const size_t colon = v.rfind(':');
  if (colon == 0) return false;
  const std::string_view level = colon == std::string_view::npos ? v : v.substr(colon + 1);
  for (std::string_view name : {"emergency", "alert", "critical", "error", "warning", "notice",
                                "info", "debug", "1", "2", "3", "4", "5", "6", "7", "8"})
    if (level == name) return true;
  return false;
}

bool valid_ring_name(std::string_view n) {
  if (n.empty() || n.size() > 16) return false;
  return std::all_of(n.begin(), n.end(), [](char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '_' || ch == '-';
  });
}

}  // namespace

std::vector<std::string> runtime_args(const RuntimeConfig& config) noexcept {
  try {
    return ctl::eal_args(to_eal(config));
  } catch (...) {
    return {};
  }
}

Status runtime_init(const RuntimeConfig& config) noexcept {
  if (ctl::eal_running()) return ok();
  if (config.memory_mb == 0 || config.memory_mb > (1u << 20))
    return fail(Status::kInvalidParameter, "RuntimeConfig::memory_mb must be 1 .. 1048576, not " +
                                               std::to_string(config.memory_mb));
  if (config.memory != RuntimeConfig::Memory::kAuto &&
      config.memory != RuntimeConfig::Memory::kNoHuge &&
      config.memory != RuntimeConfig::Memory::kHugepages)
    return fail(Status::kInvalidParameter, "RuntimeConfig::memory is not a Memory value");
  if (!valid_log_level(config.log_level))
    return fail(Status::kInvalidParameter,
                "RuntimeConfig::log_level '" + config.log_level +
                    "': want LEVEL or PATTERN:LEVEL, LEVEL one of emergency alert critical error "
                    "warning notice info debug or 1 .. 8");
  if (config.memory == RuntimeConfig::Memory::kHugepages && !ctl::hugepages_available())
    return fail(Status::kInsufficientResources,
                "RuntimeConfig::Memory::kHugepages: no hugetlbfs mount with free hugepages "
                "(use kNoHuge or kAuto)");
  if (g_eal_broken.load())
    return fail(Status::kInvalidDeviceState,
                "an earlier runtime_init failed in EAL; DPDK cannot be brought up again in this "
                "process (restart it with corrected options)");
  try {
    const ctl::EalOptions o = to_eal(config);
    rte_errno = 0;
    const Status s = ctl::eal_init(o);
    if (s == Status::kSuccess) return ok();
    const int e = rte_errno;
    g_eal_broken.store(true);
    std::string args;
    for (const auto& a : ctl::eal_args(o)) args += " " + a;
    return fail(s, "EAL bring-up failed (" + errno_text(e) + ") with arguments:" + args);
  } catch (const std::exception& ex) {
    return fail(Status::kInsufficientResources, std::string("runtime_init: ") + ex.what());
  }
}

bool runtime_running() noexcept { return ctl::eal_running(); }

unsigned main_lcore() noexcept { return ctl::eal_running() ? rte_get_main_lcore() : 0; }

std::vector<unsigned> worker_lcores() noexcept {
  std::vector<unsigned> out;
  if (!ctl::eal_running()) return out;
  try {
    unsigned lc;
    RTE_LCORE_FOREACH_WORKER(lc) { out.push_back(lc); }
  } catch (...) {
    out.clear();
  }
  return out;
}

Status create_ring_port_pair(std::string_view name, uint16_t queues, uint16_t* a,
                             uint16_t* b) noexcept {
  if (Status s = need_eal(); s != Status::kSuccess) return s;
  if (a == nullptr || b == nullptr)
    return fail(Status::kInvalidParameter, "create_ring_port_pair: null port output");
  if (queues == 0 || queues > 16)
    return fail(Status::kInvalidParameter,
                "create_ring_port_pair: queues must be 1 .. 16, not " + std::to_string(queues));
  if (!valid_ring_name(name))
    return fail(Status::kInvalidParameter,
                "create_ring_port_pair: the name must be 1 .. 16 characters of [A-Za-z0-9_-]");
  try {
    const std::string base(name);
    uint16_t existing = 0;
    if (rte_ring_lookup((base + "_ab0").c_str()) != nullptr ||
        rte_eth_dev_get_port_by_name((base + "_a").c_str(), &existing) == 0 ||
        rte_eth_dev_get_port_by_name((base + "_b").c_str(), &existing) == 0)
      return fail(Status::kAddressAlreadyExists,
                  "create_ring_port_pair: a ring pair named '" + base + "' exists already");
    rte_errno = 0;
    if (Status s = ctl::create_ring_pair(name, queues, a, b); s != Status::kSuccess)
      return fail(s, "create_ring_port_pair('" + base + "'): " + errno_text(rte_errno));
    return ok();
  } catch (const std::exception& ex) {
    return fail(Status::kInsufficientResources, std::string("create_ring_port_pair: ") + ex.what());
  }
}

namespace {

// net_af_packet's default ring slots (2048 bytes) cannot hold a frame of path MTU 4096. Unless the
// devargs give a geometry, slots of 4352 bytes (a 4096-byte payload with every header, plus the
// 66-byte TPACKET_V2 header room, rounded up to 17 x 256), blocks of whole pages holding whole
// slots (lcm with the page size), 512 slots, and one queue pair.
std::string with_af_packet_geometry(std::string d) {
  if (d.rfind("net_af_packet", 0) != 0) return d;
  if (d.find("qpairs=") == std::string::npos) d += ",qpairs=1";
  if (d.find("framesz=") != std::string::npos || d.find("blocksz=") != std::string::npos) return d;
  constexpr uint32_t kFrame = 4352, kSlots = 512;
  const uint32_t block = std::lcm(kFrame, static_cast<uint32_t>(::getpagesize()));
  const uint32_t per_block = block / kFrame;
  const uint32_t frames = (kSlots + per_block - 1) / per_block * per_block;
  return d + ",framesz=" + std::to_string(kFrame) + ",blocksz=" + std::to_string(block) +
         ",framecnt=" + std::to_string(frames);
}

// net_af_xdp without xdp_prog= would load libxdp's default program, which sends every frame on
// the queue to urnic and none to the kernel: urnic's program (bpf/urnic_xdp.c) sends only
// urnic's. An explicit xdp_prog= is left as given.
std::string with_xdp_program(std::string d) {
  if (d.rfind("net_af_xdp", 0) != 0 || d.find("xdp_prog=") != std::string::npos) return d;
  const std::string prog = xdp_program_path();
  return prog.empty() ? d : d + ",xdp_prog=" + prog;
}

// The iface= of a kernel-interface PMD (net_af_packet, net_af_xdp), when the devargs name one.
std::string iface_of(std::string_view d) {
  if (d.rfind("net_af_packet", 0) != 0 && d.rfind("net_af_xdp", 0) != 0) return {};
  const size_t at = d.find(",iface=");
  if (at == std::string_view::npos) return {};
  const std::string_view rest = d.substr(at + 7);
  return std::string(rest.substr(0, rest.find(',')));
}

// The combined channels (queues) of a kernel interface as ethtool -l counts them; 1 for one that
// has none (veth, whose separate rx/tx channels net_af_xdp does not use).
unsigned combined_channels(const std::string& ifname) {
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 1;
  ethtool_channels ch{};
  ch.cmd = ETHTOOL_GCHANNELS;
  ifreq ifr{};
  std::snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", ifname.c_str());
  ifr.ifr_data = reinterpret_cast<char*>(&ch);
  const int rc = ::ioctl(fd, SIOCETHTOOL, &ifr);
  ::close(fd);
  return rc != 0 || ch.max_combined == 0 ? 1 : std::max(ch.combined_count, 1u);
}

// net_af_xdp's queue_count=N (default 1).
unsigned xdp_queue_count(std::string_view d) {
  const size_t at = d.find("queue_count=");
  if (at == std::string_view::npos) return 1;
  return static_cast<unsigned>(std::strtoul(std::string(d.substr(at + 12)).c_str(), nullptr, 10));
}

}  // namespace

Status open_vdev_port(std::string_view devargs, uint16_t* port_id) noexcept {
  if (Status s = need_eal(); s != Status::kSuccess) return s;
  if (port_id == nullptr) return fail(Status::kInvalidParameter, "open_vdev_port: null port_id");
  const std::string_view name = devargs.substr(0, devargs.find(','));
  if (name.empty() || devargs.find('\0') != std::string_view::npos)
    return fail(Status::kInvalidParameter,
                "open_vdev_port: devargs must start with a device name, e.g. "
                "net_af_packet0,iface=veth0");
  try {
    // The drivers' own failures name no cause (EPERM for a missing interface): say it first.
    const std::string ifname = iface_of(devargs);
    if (!ifname.empty() && ::if_nametoindex(ifname.c_str()) == 0)
      return fail(Status::kDeviceNotReady, "open_vdev_port('" + std::string(devargs) +
                                               "'): no interface '" + ifname +
                                               "' in this network namespace");
    // One AF_XDP socket per queue needs as many combined channels (DPDK 22.11 refuses more,
    // naming no cause).
    if (devargs.rfind("net_af_xdp", 0) == 0 && !ifname.empty()) {
      const unsigned want = xdp_queue_count(devargs), have = combined_channels(ifname);
      if (want > have)
        return fail(Status::kDeviceNotReady,
                    "open_vdev_port('" + std::string(devargs) + "'): " + std::to_string(want) +
                        " AF_XDP queues, but interface '" + ifname + "' has " +
                        std::to_string(have) + " combined channel(s) (ethtool -L " + ifname +
                        " combined N; veth has none: one queue)");
      bool removed = false;
      std::string why;
      if (Status s = xdp_claim_interface(ifname, &removed, &why); s != Status::kSuccess)
        return fail(s, "open_vdev_port('" + std::string(devargs) + "'): " + why);
      if (removed)
        dp::log_line(dp::LogType::kCtl, RTE_LOG_WARNING,
                     "open_vdev_port: removed urnic's XDP program that an ended process left "
                     "on '%s'",
                     ifname.c_str());
    }
    const std::string args = with_xdp_program(with_af_packet_geometry(std::string(devargs)));
    if (args.rfind("net_af_xdp", 0) == 0 && args.find("xdp_prog=") == std::string::npos)
      return fail(Status::kDeviceNotReady,
                  "open_vdev_port('" + args +
                      "'): urnic's XDP program is missing (build bpf/, or set URNIC_XDP_PROG or "
                      "xdp_prog=)");
    const int rc = rte_dev_probe(args.c_str());
    if (rc != 0)
      return fail(Status::kDeviceNotReady,
                  "open_vdev_port('" + args + "'): probe failed: " + errno_text(-rc));
    if (rte_eth_dev_get_port_by_name(std::string(name).c_str(), port_id) != 0)
      return fail(Status::kNotSupported,
                  "open_vdev_port('" + args + "'): the device is not an Ethernet port");
    return ok();
  } catch (const std::exception& ex) {
    return fail(Status::kInsufficientResources, std::string("open_vdev_port: ") + ex.what());
  }
}

Status open_pci_port(std::string_view pci_address, uint16_t* port_id) noexcept {
  if (Status s = need_eal(); s != Status::kSuccess) return s;
  if (port_id == nullptr) return fail(Status::kInvalidParameter, "open_pci_port: null port_id");
  try {
    const std::string given(pci_address);
    rte_pci_addr addr{};
    if (given.empty() || given.size() > 32 || given.find('\0') != std::string::npos ||
        rte_pci_addr_parse(given.c_str(), &addr) != 0)
      return fail(Status::kInvalidParameter,
                  "open_pci_port: '" + given +
                      "' is not a PCI address (domain:bus:device.function, e.g. 0000:03:00.0)");
    if (!rte_eal_has_pci())
      return fail(Status::kInvalidDeviceState,
                  "open_pci_port: EAL runs without PCI; set RuntimeConfig::pci (or pci_allow)");
    char canon[PCI_PRI_STR_SIZE];
    rte_pci_device_name(&addr, canon, sizeof(canon));
    // Already probed by EAL (-a, or a scan of every bound device)?
    auto find = [&]() -> bool {
      uint16_t p = 0;
      RTE_ETH_FOREACH_DEV(p) {
        rte_eth_dev_info info{};
        if (rte_eth_dev_info_get(p, &info) != 0 || info.device == nullptr) continue;
        if (std::string_view(rte_dev_name(info.device)) == canon) {
          *port_id = p;
          return true;
        }
      }
      return false;
    };
    if (find()) return ok();
    const int rc = rte_dev_probe(canon);
    if (rc != 0)
      return fail(Status::kDeviceNotReady,
                  std::string("open_pci_port(") + canon + "): probe failed (" + errno_text(-rc) +
                      "): no such device, not bound to a DPDK driver (vfio-pci, "
                      "uio_pci_generic, mlx5), or not in RuntimeConfig::pci_allow");
    if (find()) return ok();
    return fail(Status::kNotSupported,
                std::string("open_pci_port(") + canon + "): the device is not an Ethernet port");
  } catch (const std::exception& ex) {
    return fail(Status::kInsufficientResources, std::string("open_pci_port: ") + ex.what());
  }
}

Status port_mtu(uint16_t port_id, uint32_t* mtu) noexcept {
  if (Status s = need_eal(); s != Status::kSuccess) return s;
  if (mtu == nullptr) return fail(Status::kInvalidParameter, "port_mtu: null mtu");
  rte_eth_dev_info info{};
  if (!rte_eth_dev_is_valid_port(port_id) || rte_eth_dev_info_get(port_id, &info) != 0)
    return fail(Status::kInvalidParameter, "port_mtu: no port " + std::to_string(port_id));
  uint16_t m = 0;
  uint32_t v = rte_eth_dev_get_mtu(port_id, &m) == 0 ? m : RTE_ETHER_MTU;
  // A kernel interface behind the port (af_packet reports its ifindex) drops what its own MTU
  // does not allow.
  char ifname[IF_NAMESIZE] = {};
  if (info.if_index != 0 && ::if_indextoname(info.if_index, ifname) != nullptr) {
    std::ifstream f(std::string("/sys/class/net/") + ifname + "/mtu");
    uint32_t k = 0;
    if (f >> k && k != 0) v = k;
  }
  if (info.max_mtu != 0 && info.max_mtu < v) v = info.max_mtu;
  *mtu = v;
  return ok();
}

Status port_xdp_counters(uint16_t port_id, XdpCounters* out) noexcept {
  if (Status s = need_eal(); s != Status::kSuccess) return s;
  if (out == nullptr) return fail(Status::kInvalidParameter, "port_xdp_counters: null output");
  try {
    if (xdp_counters(port_id, out) != Status::kSuccess)
      return fail(Status::kNotSupported, "port_xdp_counters: port " + std::to_string(port_id) +
                                             " does not run urnic's XDP program");
    return ok();
  } catch (const std::exception& ex) {
    return fail(Status::kInsufficientResources, std::string("port_xdp_counters: ") + ex.what());
  }
}

const char* last_error() noexcept { return t_last_error.c_str(); }

}  // namespace urnic

// urnic's XDP program on a net_af_xdp port (bpf/urnic_xdp.c; issue 39): which frames the kernel
// hands to urnic's AF_XDP sockets. The program is attached by DPDK's net_af_xdp when the port is
// probed (devargs xdp_prog=, added by open_vdev_port); the adapter then names its addresses in
// the program's `urnic_addrs` map here, and reads the program's frame counts.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>

#include "urnic/runtime.h"
#include "urnic/status.h"

namespace urnic {

// Flags of an address in urnic_addrs (the same values as bpf/urnic_xdp.c).
namespace xdp_addr {
inline constexpr uint32_t kRoce = 1;   // RoCEv2 (UDP 4791) to this address is urnic's
inline constexpr uint32_t kNeigh = 2;  // ARP / ND for it is urnic's: urnic answers for it
}  // namespace xdp_addr

struct XdpAddress {
  std::array<uint8_t, 16> addr{};  // IPv6, or IPv4-mapped (::ffff:a.b.c.d)
  uint32_t flags = 0;
};

// The kernel interface behind a net_af_xdp port; 0 for any other port.
int xdp_port_ifindex(uint16_t port_id);

// Before a net_af_xdp port is probed on interface `ifname`: claims the interface for this
// process (an flock on a file named after the network namespace and the interface, under
// /run/urnic, held until the process ends, however it ends), and removes urnic's XDP program
// when one is attached all the same: a process that held the interface ended without closing
// its port (the kernel keeps an XDP program attached after its process), and DPDK would refuse
// to attach another. kDeviceBusy, with the reason in `*why`, when another live process holds the
// interface; kDeviceNotReady when the stale program cannot be removed. *removed tells whether one
// was. A program other than urnic's is left alone (DPDK then reports it).
Status xdp_claim_interface(const std::string& ifname, bool* removed, std::string* why);

// The path of urnic's XDP object: $URNIC_XDP_PROG, else the build tree's, else the installed
// one. Empty when none exists.
std::string xdp_program_path();

// On a net_af_xdp port (ifindex from the ethdev) whose interface runs urnic's program: adds
// (`add`) or removes the addresses. Returns kSuccess without doing anything when the port is not
// AF_XDP or runs another program (DPDK's default sends every frame to the socket), and
// kDeviceNotReady, with the reason in `*why`, when the program's map cannot be reached.
Status xdp_publish_addresses(uint16_t port_id, std::span<const XdpAddress> addrs, bool add,
                             std::string* why);

// The counts of urnic's program on the port's interface; kNotSupported when it runs none.
Status xdp_counters(uint16_t port_id, XdpCounters* out);

}  // namespace urnic

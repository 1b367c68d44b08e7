// The kernel's view of an interface urnic shares with it (issue 39 item 2): on a net_af_xdp
// port the kernel keeps the interface, its addresses, its routes and its neighbour table, and
// urnic asks it over rtnetlink instead of running ARP / ND and a route table of its own, as
// rxe follows the kernel's routing. Control side only: each call is a netlink round trip (a
// few microseconds), bounded by a receive timeout.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "dataplane/wire/headers.h"

namespace urnic::ctl {

using Gid = wire::Ipv6Addr;  // as control_plane.h

struct KernelAddress {
  Gid addr{};          // IPv6, or IPv4-mapped
  uint8_t prefix = 0;  // in the address's own family
};

// The interface's addresses (IPv4, then global IPv6), as `ip addr show dev` lists them.
std::vector<KernelAddress> kernel_addresses(int ifindex);

struct KernelRoute {
  Gid next_hop{};  // the gateway, or the destination itself when it is on link
  int oif = 0;     // the interface the kernel sends through
};
// The kernel's route to `dst` (RTM_GETROUTE, as `ip route get`); nullopt when it has none
// (unreachable), with the reason in *why.
std::optional<KernelRoute> kernel_route(const Gid& dst, std::string* why = nullptr);

// The kernel's neighbour entry for `ip` on `ifindex` when it holds a usable MAC (reachable,
// stale, delay, probe, permanent); nullopt otherwise (none, incomplete, failed).
std::optional<wire::MacAddr> kernel_neighbour(int ifindex, const Gid& ip);

// Asks the kernel to resolve `ip` on `ifindex` (`ip neigh replace IP dev IF use nud none`: the
// kernel sends its ARP request / neighbour solicitation and fills its table). False when the
// request was refused.
bool kernel_probe_neighbour(int ifindex, const Gid& ip);

}  // namespace urnic::ctl

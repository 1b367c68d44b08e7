// The adapter's route table (urnic/route.h): which neighbour a destination's frames go to.
// Built once when the adapter opens; lookups are read-only and need no lock.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "dataplane/wire/headers.h"
#include "urnic/route.h"

namespace urnic::ctl {

using Gid = wire::Ipv6Addr;  // as control_plane.h

class RouteTable {
 public:
  RouteTable() = default;
  // The adapter's subnets (prefix length 0: none) and its static routes.
  RouteTable(uint32_t ipv4, uint8_t ipv4_len, const std::optional<Gid>& ipv6, uint8_t ipv6_len,
             const std::vector<Route>& routes);

  // The neighbour whose MAC frames to `dst` carry: `dst` itself when it is on link, its route's
  // gateway otherwise; nullopt when the destination's family is routed and no route matches.
  std::optional<Gid> next_hop(const Gid& dst) const noexcept;

  // kInvalidParameter for a route the table cannot use: lengths out of range, a gateway of the
  // other family, one outside every subnet of the adapter's (when it has one).
  static Status check(uint32_t ipv4, uint8_t ipv4_len, const std::optional<Gid>& ipv6,
                      uint8_t ipv6_len, const std::vector<Route>& routes, std::string* why);

 private:
  struct Entry {
    Gid prefix{};
    uint16_t bits = 0;  // over the 128 bits of the GID (IPv4: 96 + the prefix length)
    Gid gateway{};
    bool on_link = true;
  };
  std::vector<Entry> entries_;
  bool routed_v4_ = false, routed_v6_ = false;
};

}  // namespace urnic::ctl

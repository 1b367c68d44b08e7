#include "control/route.h"

#include <algorithm>
#include <string>
#include <vector>

#include "control/control_plane.h"  // gid_from_ipv4
#include "control/route_bits.h"

namespace urnic::ctl {
namespace {

using namespace route_bits;

bool fail(std::string* why, std::string text) {
  if (why != nullptr) *why = std::move(text);
  return false;
}

}  // namespace

RouteTable::RouteTable(uint32_t ipv4, uint8_t ipv4_len, const std::optional<Gid>& ipv6,
                       uint8_t ipv6_len, const std::vector<Route>& routes) {
  if (ipv4 != 0 && ipv4_len != 0) {
    Entry e;
    e.prefix = gid_from_ipv4(ipv4);
    e.bits = static_cast<uint16_t>(gid_bits(true, ipv4_len));
    entries_.push_back(e);
    routed_v4_ = true;
  }
  if (ipv6 && ipv6_len != 0) {
    Entry e;
    e.prefix = *ipv6;
    e.bits = ipv6_len;
    entries_.push_back(e);
    routed_v6_ = true;
  }
  for (const Route& r : routes) {
    const bool v4 = is_mapped(r.destination);
    Entry e;
    e.prefix = r.destination;
    e.bits = static_cast<uint16_t>(gid_bits(v4, r.prefix_len));
    e.gateway = r.gateway;
    e.on_link = is_zero(r.gateway);
    entries_.push_back(e);
    (v4 ? routed_v4_ : routed_v6_) = true;
  }
  // Longest prefix first: the first match wins.
  std::stable_sort(entries_.begin(), entries_.end(),
                   [](const Entry& a, const Entry& b) { return a.bits > b.bits; });
}

std::optional<Gid> RouteTable::next_hop(const Gid& dst) const noexcept {
  const bool v4 = is_mapped(dst);
  // IPv6 link-local destinations (fe80::/10) are on link by definition (RFC 4291 §2.5.6).
  if (!v4 && dst[0] == 0xfe && (dst[1] & 0xc0) == 0x80) return dst;
  if (!(v4 ? routed_v4_ : routed_v6_)) return dst;
  for (const Entry& e : entries_)
    if (is_mapped(e.prefix) == v4 && same_prefix(e.prefix, dst, e.bits))
      return e.on_link ? dst : e.gateway;
  return std::nullopt;
}

Status RouteTable::check(uint32_t ipv4, uint8_t ipv4_len, const std::optional<Gid>& ipv6,
                         uint8_t ipv6_len, const std::vector<Route>& routes, std::string* why) {
  if (ipv4_len > 32 || ipv6_len > 128)
    return fail(why, "prefix length out of range"), Status::kInvalidParameter;
  const RouteTable subnets(ipv4, ipv4_len, ipv6, ipv6_len, {});
  for (const Route& r : routes) {
    const bool v4 = is_mapped(r.destination);
    if (r.prefix_len > (v4 ? 32 : 128))
      return fail(why, to_string(r) + ": prefix length out of range"), Status::kInvalidParameter;
    if (is_zero(r.gateway)) continue;
    if (is_mapped(r.gateway) != v4)
      return fail(why, to_string(r) + ": the gateway is of the other IP version"),
             Status::kInvalidParameter;
    // A gateway must be a neighbour: inside one of the adapter's subnets when it has one.
    const bool has_subnet = v4 ? (ipv4 != 0 && ipv4_len != 0) : (ipv6 && ipv6_len != 0);
    if (has_subnet && subnets.next_hop(r.gateway) != r.gateway)
      return fail(why, to_string(r) + ": the gateway is not in the adapter's subnet"),
             Status::kInvalidParameter;
  }
  return Status::kSuccess;
}

}  // namespace urnic::ctl

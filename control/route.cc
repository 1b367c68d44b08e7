#include "control/route.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

namespace urnic {
namespace {

constexpr std::array<uint8_t, 12> kMappedPrefix = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

bool is_mapped(const std::array<uint8_t, 16>& a) noexcept {
  return std::equal(kMappedPrefix.begin(), kMappedPrefix.end(), a.begin());
}

bool is_zero(const std::array<uint8_t, 16>& a) noexcept {
  return std::all_of(a.begin(), a.end(), [](uint8_t b) { return b == 0; });
}

// True when the first `bits` bits of a and b are equal.
bool same_prefix(const std::array<uint8_t, 16>& a, const std::array<uint8_t, 16>& b,
                 unsigned bits) noexcept {
  const unsigned whole = bits / 8, rest = bits % 8;
  if (!std::equal(a.begin(), a.begin() + whole, b.begin())) return false;
  if (rest == 0) return true;
  const auto mask = static_cast<uint8_t>(0xff << (8 - rest));
  return (a[whole] & mask) == (b[whole] & mask);
}

// Bits of the GID a prefix of `len` bits of its own family covers.
unsigned gid_bits(bool ipv4, uint8_t len) noexcept { return ipv4 ? 96u + len : len; }

bool fail(std::string* why, std::string text) {
  if (why != nullptr) *why = std::move(text);
  return false;
}

}  // namespace

Status parse_address(std::string_view text, std::array<uint8_t, 16>* addr, uint8_t* prefix_len,
                     bool* ipv4) noexcept {
  if (addr == nullptr || prefix_len == nullptr || ipv4 == nullptr) return Status::kInvalidParameter;
  try {
    const size_t slash = text.find('/');
    const std::string host(text.substr(0, slash));
    std::array<uint8_t, 16> a{};
    in_addr v4{};
    bool is4 = false;
    if (::inet_pton(AF_INET, host.c_str(), &v4) == 1) {
      std::copy(kMappedPrefix.begin(), kMappedPrefix.end(), a.begin());
      std::memcpy(&a[12], &v4, 4);
      is4 = true;
    } else if (::inet_pton(AF_INET6, host.c_str(), a.data()) != 1) {
      return Status::kInvalidParameter;
    }
    unsigned len = 0;
    if (slash != std::string_view::npos) {
      const std::string_view l = text.substr(slash + 1);
      if (l.empty() || l.size() > 3) return Status::kInvalidParameter;
      for (char c : l) {
        if (c < '0' || c > '9') return Status::kInvalidParameter;
        len = len * 10 + static_cast<unsigned>(c - '0');
      }
      if (len > (is4 ? 32u : 128u)) return Status::kInvalidParameter;
    }
    *addr = a;
    *prefix_len = static_cast<uint8_t>(len);
    *ipv4 = is4;
    return Status::kSuccess;
  } catch (const std::exception&) {
    return Status::kInsufficientResources;
  }
}

Status parse_route(std::string_view text, Route* out, std::string* why) noexcept {
  if (out == nullptr) return Status::kInvalidParameter;
  try {
    auto bad = [&](std::string reason) {
      if (why != nullptr) *why = "route '" + std::string(text) + "': " + reason;
      return Status::kInvalidParameter;
    };
    // Words separated by blanks: DEST [via GW].
    std::vector<std::string_view> w;
    for (size_t i = 0; i < text.size();) {
      if (text[i] == ' ' || text[i] == '\t') {
        ++i;
        continue;
      }
      const size_t j = std::min(text.find_first_of(" \t", i), text.size());
      w.push_back(text.substr(i, j - i));
      i = j;
    }
    if (w.size() != 1 && !(w.size() == 3 && w[1] == "via"))
      return bad("expected DEST[/LEN] [via GATEWAY] or default via GATEWAY");
    Route r;
    bool gw4 = false;
    if (w.size() == 3) {
      uint8_t glen = 0;
      if (parse_address(w[2], &r.gateway, &glen, &gw4) != Status::kSuccess ||
          w[2].find('/') != std::string_view::npos)
        return bad("bad gateway address '" + std::string(w[2]) + "'");
      if (is_zero(r.gateway) || (gw4 && r.gateway[12] == 0 && r.gateway[13] == 0 &&
                                 r.gateway[14] == 0 && r.gateway[15] == 0))
        return bad("the gateway cannot be the unspecified address");
    }
    bool d4 = false;
    if (w[0] == "default") {
      if (w.size() != 3) return bad("a default route needs a gateway (default via GATEWAY)");
      d4 = gw4;
      if (d4) std::copy(kMappedPrefix.begin(), kMappedPrefix.end(), r.destination.begin());
      r.prefix_len = 0;
    } else {
      uint8_t len = 0;
      if (parse_address(w[0], &r.destination, &len, &d4) != Status::kSuccess)
        return bad("bad destination '" + std::string(w[0]) + "'");
      r.prefix_len = w[0].find('/') == std::string_view::npos ? (d4 ? 32 : 128) : len;
      // As `ip route` refuses 10.0.0.1/8: the host bits must be zero.
      std::array<uint8_t, 16> masked{};
      const unsigned bits = gid_bits(d4, r.prefix_len);
      for (unsigned b = 0; b < 128; ++b)
        if (b < bits && (r.destination[b / 8] & (0x80 >> (b % 8))))
          masked[b / 8] |= static_cast<uint8_t>(0x80 >> (b % 8));
      if (masked != r.destination) return bad("the destination has bits set beyond its prefix");
      if (w.size() == 3 && gw4 != d4)
        return bad("the gateway is not of the destination's IP version");
    }
    *out = r;
    return Status::kSuccess;
  } catch (const std::exception&) {
    return Status::kInsufficientResources;
  }
}

std::string to_string(const Route& r) {
  char buf[INET6_ADDRSTRLEN] = {};
  const bool v4 = is_mapped(r.destination);
  auto text = [&](const std::array<uint8_t, 16>& a) {
    if (v4)
      ::inet_ntop(AF_INET, &a[12], buf, sizeof buf);
    else
      ::inet_ntop(AF_INET6, a.data(), buf, sizeof buf);
    return std::string(buf);
  };
  std::string s = r.prefix_len == 0 && !is_zero(r.gateway)
                      ? std::string("default")
                      : text(r.destination) + "/" + std::to_string(r.prefix_len);
  if (!is_zero(r.gateway)) s += " via " + text(r.gateway);
  return s;
}

namespace ctl {

RouteTable::RouteTable(uint32_t ipv4, uint8_t ipv4_len, const std::optional<Gid>& ipv6,
                       uint8_t ipv6_len, const std::vector<Route>& routes) {
  if (ipv4 != 0 && ipv4_len != 0) {
    Entry e;
    std::copy(kMappedPrefix.begin(), kMappedPrefix.end(), e.prefix.begin());
    for (int i = 0; i < 4; ++i) e.prefix[12 + i] = static_cast<uint8_t>(ipv4 >> (24 - 8 * i));
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

}  // namespace ctl
}  // namespace urnic

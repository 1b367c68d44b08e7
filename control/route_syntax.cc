// The route syntax of urnic/route.h. No DPDK here: urnicd's configuration parses routes too.
#include "urnic/route.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "control/route_bits.h"

namespace urnic {
using namespace route_bits;

Status parse_mac(std::string_view text, std::array<uint8_t, 6>* mac) noexcept {
  // (sscanf's %x took "0x1ff" and dropped the high bits, and ignored anything after the sixth.)
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::array<uint8_t, 6> m{};
  size_t at = 0;
  for (size_t i = 0; i < m.size(); ++i) {
    if (i > 0 && (at >= text.size() || text[at++] != ':')) return Status::kInvalidParameter;
    unsigned v = 0, digits = 0;
    for (; at < text.size() && digits < 2 && hex(text[at]) >= 0; ++at, ++digits)
      v = v * 16 + static_cast<unsigned>(hex(text[at]));
    if (digits == 0) return Status::kInvalidParameter;
    m[i] = static_cast<uint8_t>(v);
  }
  if (at != text.size()) return Status::kInvalidParameter;
  *mac = m;
  return Status::kSuccess;
}

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

}  // namespace urnic

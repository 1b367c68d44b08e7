// Address bit helpers shared by the route syntax (route_syntax.cc, no DPDK) and the route table
// (route.cc). Addresses are 16 bytes: IPv6, or IPv4-mapped (::ffff:a.b.c.d) as GIDs are.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>

namespace urnic::route_bits {

inline constexpr std::array<uint8_t, 12> kMappedPrefix = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

inline bool is_mapped(const std::array<uint8_t, 16>& a) noexcept {
  return std::equal(kMappedPrefix.begin(), kMappedPrefix.end(), a.begin());
}

inline bool is_zero(const std::array<uint8_t, 16>& a) noexcept {
  return std::all_of(a.begin(), a.end(), [](uint8_t b) { return b == 0; });
}

// True when the first `bits` bits of a and b are equal.
inline bool same_prefix(const std::array<uint8_t, 16>& a, const std::array<uint8_t, 16>& b,
                        unsigned bits) noexcept {
  const unsigned whole = bits / 8, rest = bits % 8;
  if (!std::equal(a.begin(), a.begin() + whole, b.begin())) return false;
  if (rest == 0) return true;
  const auto mask = static_cast<uint8_t>(0xff << (8 - rest));
  return (a[whole] & mask) == (b[whole] & mask);
}

// Bits of the 128-bit address that a prefix of `len` bits of its own family covers.
inline unsigned gid_bits(bool ipv4, uint8_t len) noexcept { return ipv4 ? 96u + len : len; }

}  // namespace urnic::route_bits

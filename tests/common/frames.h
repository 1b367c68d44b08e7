// Frame bytes for the tests and the fuzz corpus generator (no gtest, no EAL): hex text to bytes,
// and an ARP request written in place.
#pragma once

#include <cctype>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "dataplane/wire/headers.h"

namespace urnic::test {

// The bytes of the hex digits in `hex` (anything else, such as spaces and newlines, is skipped).
inline std::vector<uint8_t> from_hex(const std::string& hex) {
  std::vector<uint8_t> out;
  std::string digits;
  for (char c : hex)
    if (std::isxdigit(static_cast<unsigned char>(c))) digits.push_back(c);
  for (size_t i = 0; i + 1 < digits.size(); i += 2)
    out.push_back(static_cast<uint8_t>(std::stoul(digits.substr(i, 2), nullptr, 16)));
  return out;
}

// An Ethernet broadcast ARP request (RFC 826) from `sha` at `spa` for `tpa` (host order), written
// at `f`, which has room for kArpFrameLen bytes.
inline constexpr size_t kArpFrameLen = sizeof(wire::EthHdr) + sizeof(wire::ArpHdr);
inline void write_arp_request(uint8_t* f, const wire::MacAddr& sha, uint32_t spa, uint32_t tpa) {
  auto& eth = *reinterpret_cast<wire::EthHdr*>(f);
  auto& arp = *reinterpret_cast<wire::ArpHdr*>(f + sizeof(wire::EthHdr));
  eth.dst = wire::MacAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  eth.src = sha;
  eth.ether_type = wire::Be16::of(wire::kEtherTypeArp);
  arp.htype = wire::Be16::of(1);
  arp.ptype = wire::Be16::of(wire::kEtherTypeIpv4);
  arp.hlen = 6;
  arp.plen = 4;
  arp.oper = wire::Be16::of(wire::kArpRequest);
  arp.sha = sha;
  arp.spa = wire::Be32::of(spa);
  arp.tha = wire::MacAddr{};
  arp.tpa = wire::Be32::of(tpa);
}

}  // namespace urnic::test

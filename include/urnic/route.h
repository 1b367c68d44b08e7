// Routed RoCEv2 (issue 39). RoCEv2 is RoCE over UDP/IP precisely so that it can be routed (IBTA
// Annex A17): a destination outside the adapter's own subnets is reached through a gateway, whose
// MAC the frames carry while their IP destination stays the peer's (the router forwards them; the
// ICRC leaves out the TTL, the ECN bits and the IP checksum that it changes, A17.3.3).
//
// An adapter's routes: its own subnets (AdapterConfig::ipv4_prefix_len / ipv6_prefix_len) are on
// link, and AdapterConfig::routes add others, the longest matching prefix winning, as the
// kernel's table does. An IP family that has neither a prefix length nor a route keeps the
// unrouted behaviour: every destination of that family is taken to be on link (ARP / ND for the
// destination itself). A family that has some routing but no route to a destination makes it
// unreachable: address resolution fails with kHostUnreachable (a connector's connect, an
// address handle's creation, a QP's modify to RTR), as it does when no neighbour answers.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "urnic/status.h"

namespace urnic {

struct Route {
  // The destination prefix: an IPv6 address, or an IPv4 one IPv4-mapped (::ffff:a.b.c.d), as
  // GIDs are. prefix_len counts bits of the address in its own family: 0 .. 32 for IPv4 (0: the
  // default route), 0 .. 128 for IPv6.
  std::array<uint8_t, 16> destination{};
  uint8_t prefix_len = 0;
  // The next hop, of the destination's family and on link (inside one of the adapter's subnets
  // when it has one); all zero: the prefix itself is on link (no gateway).
  std::array<uint8_t, 16> gateway{};
};

// Parses the route syntax of the tools (urnic-perf --route, URNIC_ROUTES, urnicd's route key),
// as `ip route` writes it: "DEST/LEN via GW", "DEST/LEN" (on link), "default via GW" (IPv4 or
// IPv6, by the gateway). A DEST without /LEN is a host route. kSuccess with *out set;
// kInvalidParameter (with the reason in *why when given) for anything else: a bad address or
// length, a gateway of the other family, set host bits in DEST.
Status parse_route(std::string_view text, Route* out, std::string* why = nullptr) noexcept;

// Parses "ADDR" or "ADDR/LEN" (IPv4 or IPv6): the address (IPv4-mapped for IPv4) and the prefix
// length (0 when none was given). kInvalidParameter for anything else.
Status parse_address(std::string_view text, std::array<uint8_t, 16>* addr, uint8_t* prefix_len,
                     bool* ipv4) noexcept;

// Parses a MAC address as the tools take one ("02:00:00:00:00:01"): exactly six bytes of one or
// two hex digits separated by ':'. kInvalidParameter for anything else (a third digit, a
// missing or extra byte, trailing text). The one parser of the tools, the daemon and the
// examples.
Status parse_mac(std::string_view text, std::array<uint8_t, 6>* mac) noexcept;

// The route as parse_route reads it ("198.51.100.0/24 via 192.0.2.1").
std::string to_string(const Route& r);

}  // namespace urnic

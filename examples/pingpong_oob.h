// The out-of-band TCP exchange of the libibverbs examples (ibv_rc_pingpong, ibv_uc_pingpong,
// ...; rdma-core libibverbs/examples/rc_pingpong.c; rocev2.md §4.1; rxe-peer README):
//
//   client -> server  52 bytes  "%04x:%06x:%06x:%s\0" = LID : QPN : PSN : GID
//   server            moves its QP to RTR / RTS with the client's values
//   server -> client  52 bytes  the same format
//   client -> server   5 bytes  "done\0"
//
// The GID is 32 lowercase hex digits of the 16 GID bytes in wire order
// (::ffff:10.99.0.2 -> 00000000000000000000ffff0a630002). The PSN a side advertises is its own
// *send* PSN; the peer loads it as rq_psn (the opposite of the IB CM convention, rocev2.md §4.3).
//
// Blocking socket code for tools and tests: it runs on an application thread, never on an engine
// or the control thread.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>

#include "urnic/status.h"

namespace urnic::tools::oob {

using Gid = std::array<uint8_t, 16>;  // a GID as rc_pingpong prints it

inline constexpr uint16_t kPingpongPort = 18515;
// sizeof "0000:000000:000000:00000000000000000000000000000000" (including the NUL).
inline constexpr size_t kPingpongMsgSize = 52;
inline constexpr char kDone[] = "done";  // sent with its NUL: 5 bytes

struct PingpongDest {
  uint16_t lid = 0;  // 0 on Ethernet
  uint32_t qpn = 0;
  uint32_t psn = 0;  // the advertiser's first send PSN
  Gid gid{};
  friend bool operator==(const PingpongDest&, const PingpongDest&) = default;
};

// gid_to_wire_gid(): 4 x "%08x" of each big-endian 32-bit word, i.e. the bytes in order.
std::string gid_to_wire(const Gid& g);
bool gid_from_wire(std::string_view hex, Gid* g);

std::array<char, kPingpongMsgSize> format_dest(const PingpongDest& d);
// Parses a received message (NUL-terminated or not); false if it is not "lid:qpn:psn:gid".
bool parse_dest(std::span<const char> msg, PingpongDest* d);

// Client side: connects to host:port, sends `mine`, reads the server's destination into
// `*peer`, then sends "done". kSuccess; kHostUnreachable when the TCP connection fails;
// kIoTimeout when the server does not answer within `timeout`; kInvalidParameter for an
// unparsable answer.
Status pingpong_client_exchange(const std::string& host, uint16_t port, const PingpongDest& mine,
                                PingpongDest* peer,
                                std::chrono::milliseconds timeout = std::chrono::seconds(30));

// Server side: listens on `port` (all addresses), accepts one client, reads its destination,
// calls `connect_qp(peer)` (which moves the QP to RTR / RTS; returning false aborts), sends
// `mine` and waits for "done". Same statuses as the client (kIoTimeout also when no client came
// within `timeout`).
Status pingpong_server_exchange(uint16_t port, const PingpongDest& mine,
                                const std::function<bool(const PingpongDest&)>& connect_qp,
                                PingpongDest* peer,
                                std::chrono::milliseconds timeout = std::chrono::seconds(60));

}  // namespace urnic::tools::oob

// The ibv_rc_pingpong out-of-band exchange (control/oob/rc_pingpong.*): the 52-byte message
// format byte for byte (rocev2.md §4.1 example), parsing, and the TCP exchange between a client
// and a server thread over the loopback interface.
#include <gtest/gtest.h>

#include <cstring>
#include <thread>

#include "examples/pingpong_oob.h"

namespace urnic::tools::oob {
namespace {

Gid v4(uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
  return Gid{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, a, b, c, d};
}

TEST(PingpongOob, FormatMatchesRcPingpong) {
  // rocev2.md §4.1: QPN 0x11, PSN 0x123456, GID ::ffff:192.0.2.1.
  const auto m = format_dest({0, 0x11, 0x123456, v4(192, 0, 2, 1)});
  const char expected[] = "0000:000011:123456:00000000000000000000ffffc0000201";
  static_assert(sizeof(expected) == kPingpongMsgSize);
  EXPECT_EQ(std::memcmp(m.data(), expected, kPingpongMsgSize), 0);
  EXPECT_EQ(gid_to_wire(v4(10, 99, 0, 2)), "00000000000000000000ffff0a630002");
}

TEST(PingpongOob, ParsesAndRejectsGarbage) {
  PingpongDest d;
  const char msg[] = "0000:0000aa:abcdef:fe800000000000005054000000000002";
  ASSERT_TRUE(parse_dest(std::span<const char>(msg, sizeof(msg)), &d));
  EXPECT_EQ(d.lid, 0);
  EXPECT_EQ(d.qpn, 0xAAu);
  EXPECT_EQ(d.psn, 0xABCDEFu);
  EXPECT_EQ(d.gid[0], 0xFE);
  EXPECT_EQ(d.gid[15], 0x02);
  const PingpongDest e{0x12, 0xFFFFFF, 0, v4(1, 2, 3, 4)};
  ASSERT_TRUE(parse_dest(format_dest(e), &d));
  EXPECT_EQ(d, e);
  for (const char* bad :
       {"", "0000:000011:123456", "0000-000011:123456:00000000000000000000ffffc0000201",
        "0000:00001g:123456:00000000000000000000ffffc0000201",
        "0000:000011:123456:00000000000000000000ffffc00002"}) {
    EXPECT_FALSE(parse_dest(std::span<const char>(bad, std::strlen(bad) + 1), &d)) << bad;
  }
}

TEST(PingpongOob, ClientAndServerExchangeOverTcp) {
  const PingpongDest srv{0, 0x22, 0x654321, v4(127, 0, 0, 1)};
  const PingpongDest cli{0, 0x11, 0x123456, v4(127, 0, 0, 2)};
  constexpr uint16_t kPort = 18599;
  PingpongDest seen_by_server, seen_by_client;
  bool connected = false;
  Status server_status = Status::kPending;
  std::thread server([&] {
    server_status = pingpong_server_exchange(
        kPort, srv,
        [&](const PingpongDest& d) {
          connected = d == cli;
          return true;
        },
        &seen_by_server, std::chrono::seconds(10));
  });
  // The client retries until the server listens.
  EXPECT_EQ(
      pingpong_client_exchange("127.0.0.1", kPort, cli, &seen_by_client, std::chrono::seconds(10)),
      Status::kSuccess);
  server.join();
  EXPECT_EQ(server_status, Status::kSuccess);
  EXPECT_TRUE(connected);
  EXPECT_EQ(seen_by_server, cli);
  EXPECT_EQ(seen_by_client, srv);
  // Nobody listening: the client gives up when its time is over.
  EXPECT_EQ(pingpong_client_exchange("127.0.0.1", kPort, cli, &seen_by_client,
                                     std::chrono::milliseconds(200)),
            Status::kHostUnreachable);
}

}  // namespace
}  // namespace urnic::tools::oob

// Port layer over real DPDK ethdevs (issue: foundation, item 6): EAL comes up without
// hugepages, two net_ring ports are wired back to back, and RoCEv2 frames built by the wire
// library cross in both directions, IPv4 and IPv6, and arrive intact (parse + ICRC + payload).
#include <gtest/gtest.h>
#include <rte_mbuf.h>

#include <cstring>
#include <vector>

#include "control/eal.h"
#include "dataplane/port.h"
#include "dataplane/wire/frame.h"
#include "dataplane/wire/icrc.h"

namespace urnic {
namespace {

class PortLoopback : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ctl::EalOptions o;
    o.memory = ctl::EalOptions::Memory::kNoHuge;
    o.lcores = "0";
    ASSERT_EQ(ctl::eal_init(o), Status::kSuccess);
  }
};

wire::NetHeaders net_for(bool v6, uint8_t from) {
  wire::NetHeaders n;
  n.src_mac = {2, 0, 0, 0, 0, from};
  n.dst_mac = {2, 0, 0, 0, 0, static_cast<uint8_t>(3 - from)};
  n.ipv6 = v6;
  n.src_ip4 = 0xC0000200u | from;
  n.dst_ip4 = 0xC0000200u | (3u - from);
  n.src_ip6 = {0x20, 0x01, 0x0d, 0xb8};
  n.src_ip6[15] = from;
  n.dst_ip6 = {0x20, 0x01, 0x0d, 0xb8};
  n.dst_ip6[15] = static_cast<uint8_t>(3 - from);
  n.udp_sport = wire::udp_sport_for(0x11, 0x12);
  return n;
}

// Sends `count` SEND ONLY frames with distinct PSNs and payloads from `tx` to `rx` and checks
// each one on arrival.
void exchange(dp::Port& tx, dp::Port& rx, bool v6, uint8_t from, uint32_t count) {
  const wire::NetHeaders net = net_for(v6, from);
  std::vector<rte_mbuf*> out;
  for (uint32_t i = 0; i < count; ++i) {
    wire::TransportHeaders th;
    th.bth.opcode = wire::opc::kSendOnly;
    th.bth.pkey = wire::Be16::of(wire::kDefaultPkey);
    wire::Bth::DestQp::set(th.bth, 0x12u);
    wire::Bth::Psn::set(th.bth, i);
    wire::Bth::AckReq::set(th.bth, 1u);
    std::vector<uint8_t> payload(1 + i % 300);
    for (size_t k = 0; k < payload.size(); ++k) payload[k] = static_cast<uint8_t>(i + k);
    rte_mbuf* m = rte_pktmbuf_alloc(tx.pool());
    ASSERT_NE(m, nullptr);
    const uint32_t len =
        wire::frame_length(net, th.bth.opcode, static_cast<uint32_t>(payload.size()));
    auto* p = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, static_cast<uint16_t>(len)));
    ASSERT_NE(p, nullptr);
    ASSERT_EQ(wire::build_frame({p, len}, net, th, payload), len);
    out.push_back(m);
  }
  uint32_t sent = 0;
  while (sent < count) {
    const uint16_t n = tx.tx_burst(0, out.data() + sent,
                                   static_cast<uint16_t>(std::min<uint32_t>(32, count - sent)));
    ASSERT_GT(n, 0) << "ring full";  // the 4096-slot ring holds every frame of this test
    sent += n;
  }
  uint32_t got = 0;
  rte_mbuf* in[32];
  uint32_t empty_polls = 0;
  while (got < count && empty_polls < 1000) {
    const uint16_t n = rx.rx_burst(0, in, 32);
    empty_polls = n == 0 ? empty_polls + 1 : 0;
    for (uint16_t k = 0; k < n; ++k, ++got) {
      uint8_t* d = rte_pktmbuf_mtod(in[k], uint8_t*);
      wire::ParsedFrame f;
      ASSERT_EQ(wire::parse(d, rte_pktmbuf_data_len(in[k]), f), wire::ParseError::kOk);
      EXPECT_TRUE(wire::icrc_check(d, f.l));
      EXPECT_EQ(f.l.ipv6, v6);
      EXPECT_EQ(wire::Bth::Psn::get(f.bth()), got);  // in order
      ASSERT_EQ(f.l.payload_len, 1 + got % 300);
      for (uint32_t b = 0; b < f.l.payload_len; ++b)
        ASSERT_EQ(f.payload()[b], static_cast<uint8_t>(got + b));
      rte_pktmbuf_free(in[k]);
    }
  }
  EXPECT_EQ(got, count);
}

TEST_F(PortLoopback, RingPairCarriesRoceFramesBothWays) {
  uint16_t a = 0, b = 0;
  ASSERT_EQ(ctl::create_ring_pair("lb0", 1, &a, &b), Status::kSuccess);
  dp::Port pa, pb;
  dp::PortConfig ca, cb;
  ca.port_id = a;
  cb.port_id = b;
  ca.mbufs = cb.mbufs = 4095;
  ASSERT_EQ(pa.open(ca), Status::kSuccess);
  ASSERT_EQ(pb.open(cb), Status::kSuccess);
  exchange(pa, pb, false, 1, 1000);
  exchange(pb, pa, false, 2, 1000);
  exchange(pa, pb, true, 1, 1000);
  exchange(pb, pa, true, 2, 1000);
  EXPECT_EQ(pa.stats().tx_packets, 2000u);
  EXPECT_EQ(pb.stats().rx_packets, 2000u);
  // Every mbuf came back to its pool.
  EXPECT_EQ(rte_mempool_in_use_count(pa.pool()), 0u);
  EXPECT_EQ(rte_mempool_in_use_count(pb.pool()), 0u);
}

TEST_F(PortLoopback, EalInitIsIdempotentAndRejectsBadPort) {
  ctl::EalOptions o;
  EXPECT_EQ(ctl::eal_init(o), Status::kSuccess);
  dp::Port p;
  dp::PortConfig c;
  c.port_id = RTE_MAX_ETHPORTS - 1;
  EXPECT_EQ(p.open(c), Status::kInvalidParameter);
  uint16_t id = 0;
  EXPECT_EQ(ctl::probe_vdev("net_nonexistent0", &id), Status::kInvalidParameter);
}

TEST_F(PortLoopback, EalArgsForNoHugeAndHuge) {
  ctl::EalOptions o;
  o.memory = ctl::EalOptions::Memory::kNoHuge;
  o.vdevs = {"net_ring0"};
  auto a = ctl::eal_args(o);
  auto has = [&](const std::string& s) { return std::find(a.begin(), a.end(), s) != a.end(); };
  EXPECT_TRUE(has("--no-huge"));
  EXPECT_TRUE(has("--no-shconf"));
  EXPECT_TRUE(has("--no-pci"));
  EXPECT_TRUE(has("--vdev=net_ring0"));
  EXPECT_FALSE(has("--in-memory"));
  o.memory = ctl::EalOptions::Memory::kHuge;
  a = ctl::eal_args(o);
  EXPECT_TRUE(has("--in-memory"));
  EXPECT_FALSE(has("--no-huge"));  // --in-memory cannot be combined with --no-huge
}

}  // namespace
}  // namespace urnic

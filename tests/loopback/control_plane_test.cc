// Control plane over the loopback pair: ARP and IPv6 neighbour discovery between two adapters,
// resolution failure, the GID table, management datagrams on QP1 (Q_Key check) and the headers
// our MADs carry (those of rxe's, AckReq included).
#include <gtest/gtest.h>

#include <rte_mbuf.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>

#include "../common/frames.h"
#include "rc_fixture.h"

namespace urnic::test {
namespace {

class ControlPlaneTest : public EalTest {
 protected:
  void SetUp() override {
    dp::EngineConfig ec;
    ec.idle_yield_after = 256;
    static int n = 0;  // ring names are short (DPDK limits them)
    p = std::make_unique<RcPair>("cp" + std::to_string(n++), ec);
    ASSERT_TRUE(p->engine().launch(1));
  }
  void TearDown() override { p.reset(); }
  std::unique_ptr<RcPair> p;
};

TEST_F(ControlPlaneTest, ArpResolvesBothWaysAndAnswersForOwnAddressOnly) {
  auto& ca = RcPair::internal(p->a).control();
  auto& cb = RcPair::internal(p->b).control();
  wire::MacAddr mac{};
  ASSERT_EQ(ca.resolve(ctl::gid_from_ipv4(RcPair::internal(p->b).ipv4()), &mac), Status::kSuccess);
  EXPECT_EQ(mac, RcPair::internal(p->b).mac());
  // B learns A from the request that targeted it (RFC 826 merge rule). A may have learnt B
  // from B's gratuitous ARP before its own request reached B, so wait for B (bounded).
  const auto ga = ctl::gid_from_ipv4(RcPair::internal(p->a).ipv4());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!cb.lookup(ga) && std::chrono::steady_clock::now() < deadline) {
  }
  ASSERT_TRUE(cb.lookup(ga).has_value());
  EXPECT_EQ(*cb.lookup(ctl::gid_from_ipv4(RcPair::internal(p->a).ipv4())),
            RcPair::internal(p->a).mac());
  EXPECT_GE(cb.counters().arp_replies_out, 1u);
  EXPECT_GE(cb.counters().arp_requests_in, 1u);
  // Our own address is no neighbour: it resolves to our own MAC, with no ARP sent for it (the
  // engines loop frames to it back).
  const uint64_t asked = ca.counters().arp_requests_out;
  EXPECT_EQ(ca.resolve(ctl::gid_from_ipv4(RcPair::internal(p->a).ipv4()), &mac), Status::kSuccess);
  EXPECT_EQ(mac, RcPair::internal(p->a).mac());
  EXPECT_EQ(ca.counters().arp_requests_out, asked);
}

TEST_F(ControlPlaneTest, UnansweredResolutionTimesOutAfterRetries) {
  auto& ca = RcPair::internal(p->a).control();
  wire::MacAddr mac{};
  const auto before = ca.counters().arp_requests_out;
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(ca.resolve(ctl::gid_from_ipv4(0xC0000263), &mac, std::chrono::milliseconds(1500)),
            Status::kHostUnreachable);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(1500));
  // One request per retry interval: at least 5 within 1.5 s at 200 ms apart.
  EXPECT_GE(ca.counters().arp_requests_out - before, 5u);
}

TEST_F(ControlPlaneTest, NeighbourDiscoveryForIpv6Gids) {
  auto& ca = RcPair::internal(p->a).control();
  wire::MacAddr mac{};
  ASSERT_EQ(ca.resolve(*RcPair::internal(p->b).ipv6(), &mac), Status::kSuccess);
  EXPECT_EQ(mac, RcPair::internal(p->b).mac());
  EXPECT_GE(RcPair::internal(p->b).control().counters().nd_adverts_out, 1u);
  // Link-local GID (derived from the MAC) resolves too.
  ASSERT_EQ(ca.resolve(ctl::link_local_gid(RcPair::internal(p->b).mac()), &mac), Status::kSuccess);
  EXPECT_EQ(mac, RcPair::internal(p->b).mac());
}

TEST_F(ControlPlaneTest, GidTableHasLinkLocalIpv4MappedAndIpv6) {
  const auto g = RcPair::internal(p->a).control().gids();
  ASSERT_EQ(g.size(), 3u);
  EXPECT_EQ(g[0], ctl::link_local_gid(RcPair::internal(p->a).mac()));
  EXPECT_EQ(g[1], ctl::gid_from_ipv4(0xC0000201));
  EXPECT_TRUE(ctl::gid_is_ipv4(g[1]));
  EXPECT_EQ(ctl::gid_to_ipv4(g[1]), 0xC0000201u);
  EXPECT_EQ(g[2], *RcPair::internal(p->a).ipv6());
  // fe80::ff:fe00:1 with the U/L bit flipped: 02:00:00:.. -> 00:00:00:ff:fe:..
  EXPECT_EQ(g[0][8], 0x00);
  EXPECT_EQ(g[0][11], 0xFF);
  EXPECT_EQ(g[0][12], 0xFE);
}

TEST_F(ControlPlaneTest, MadsReachQp1AndWrongQkeyIsDropped) {
  auto& ca = RcPair::internal(p->a).control();
  auto& cb = RcPair::internal(p->b).control();
  std::mutex mu;
  std::vector<std::vector<uint8_t>> got;
  std::vector<ctl::MadIn> meta;
  cb.set_mad_handler([&](const ctl::MadIn& in) {
    std::lock_guard lock(mu);
    got.emplace_back(in.mad.begin(), in.mad.end());
    meta.push_back(in);
  });
  wire::MacAddr mac{};
  const auto gb = ctl::gid_from_ipv4(RcPair::internal(p->b).ipv4());
  ASSERT_EQ(ca.resolve(gb, &mac), Status::kSuccess);
  std::vector<uint8_t> mad(256);
  for (size_t i = 0; i < mad.size(); ++i) mad[i] = static_cast<uint8_t>(i ^ 0x5A);
  ASSERT_EQ(ca.send_mad(gb, 1, ctl::ControlPlane::kGsiQkey, mad), Status::kSuccess);
  ASSERT_EQ(ca.send_mad(gb, 1, 0x12345678, mad), Status::kSuccess);  // wrong Q_Key
  // Not QP1: a datagram for a QP the adapter does not have; the engine drops it before the
  // control plane (datagram QPs are the engine's, dataplane/datagram.cc).
  ASSERT_EQ(ca.send_mad(gb, 7, ctl::ControlPlane::kGsiQkey, mad), Status::kSuccess);
  auto no_qp = [&] {
    return RcPair::internal(p->b).endpoint_counters().rx_drops[static_cast<size_t>(RxDrop::kNoQp)];
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    const auto c = cb.counters();
    if (c.mads_in + c.mads_bad_qkey + no_qp() >= 3) break;
  }
  const auto c = cb.counters();
  EXPECT_EQ(c.mads_in, 1u);
  EXPECT_EQ(c.mads_bad_qkey, 1u);
  EXPECT_EQ(no_qp(), 1u);
  EXPECT_EQ(c.mads_not_qp1, 0u);
  std::lock_guard lock(mu);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0], mad);
  EXPECT_EQ(meta[0].src_gid, ctl::gid_from_ipv4(RcPair::internal(p->a).ipv4()));
  EXPECT_EQ(meta[0].src_qp, 1u);
  EXPECT_EQ(meta[0].src_mac, RcPair::internal(p->a).mac());
  // Unresolved destination: refused, nothing sent.
  EXPECT_EQ(ca.send_mad(ctl::gid_from_ipv4(0xC0000299), 1, ctl::ControlPlane::kGsiQkey, mad),
            Status::kHostUnreachable);
}

// The headers send_mad() puts on a MAD are, byte for byte, the BTH and DETH of rxe's CM REQ in
// rdmacm_rping_c3.pcap (frame 3, PSN 31): UD SEND ONLY, P_Key 0xFFFF, DestQP 1, AckReq set,
// GSI Q_Key, source QP 1. rxe sets AckReq on its QP1 MADs (see ControlPlane::mad_headers).
TEST(ControlPlaneMad, MadHeadersMatchRxeQp1) {
  eal_up_once();
  const uint8_t rxe_req[] = {0x64, 0x00, 0xff, 0xff, 0x00, 0x00, 0x00, 0x01, 0x80, 0x00,
                             0x00, 0x1f, 0x80, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01};
  const wire::TransportHeaders th =
      ctl::ControlPlane::mad_headers(1, ctl::ControlPlane::kGsiQkey, 31);
  wire::NetHeaders net;
  net.udp_sport = wire::udp_sport_for(1, 1);
  const std::vector<uint8_t> mad(256, 0x5A);
  std::vector<uint8_t> frame(wire::frame_length(net, th.bth.opcode, 256));
  ASSERT_EQ(wire::build_frame(frame, net, th, mad), frame.size());
  wire::ParsedFrame f;
  ASSERT_EQ(wire::parse(frame.data(), frame.size(), f), wire::ParseError::kOk);
  EXPECT_EQ(wire::Bth::AckReq::get(f.bth()), 1u);
  EXPECT_TRUE(std::equal(std::begin(rxe_req), std::end(rxe_req), frame.begin() + f.l.bth_off));
  EXPECT_TRUE(std::ranges::equal(f.payload(), mad));
}

// A peer flooding ARP requests for our address from thousands of source addresses (each one a
// neighbour the RFC 826 merge rule would learn): the table stops at ControlPlane::kMaxLearnt, the
// refusals are counted, every request is still answered, and a resolution of our own still
// succeeds afterwards. The engine is not running while the test thread plays the wire (it is
// then the only producer of the control plane's ring); it is launched for the resolution.
TEST(ControlPlaneFlood, LearntNeighboursAreBoundedAndResolutionStillWorks) {
  eal_up_once();
  RcPair p("cpflood");
  auto& cb = RcPair::internal(p.b).control();
  rte_mempool* pool =
      rte_pktmbuf_pool_create("cpflood_pool", 1023, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE, SOCKET_ID_ANY);
  ASSERT_NE(pool, nullptr);
  constexpr uint32_t kFlood = ctl::ControlPlane::kMaxLearnt + 2000;
  const size_t before = cb.neighbours();
  const uint64_t req_before = cb.counters().arp_requests_in;
  for (uint32_t i = 0; i < kFlood; ++i) {
    rte_mbuf* m = nullptr;
    while ((m = rte_pktmbuf_alloc(pool)) == nullptr) std::this_thread::yield();
    const wire::MacAddr sha{2,
                            0x66,
                            0,
                            static_cast<uint8_t>(i >> 16),
                            static_cast<uint8_t>(i >> 8),
                            static_cast<uint8_t>(i)};
    write_arp_request(rte_pktmbuf_mtod(m, uint8_t*), sha, 0x0A400000u + i,  // 10.64.x.y
                      RcPair::internal(p.b).ipv4());
    m->data_len = m->pkt_len = kArpFrameLen;
    while (!cb.take(m)) std::this_thread::yield();  // ring full: the control thread drains it
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (cb.counters().arp_requests_in - req_before < kFlood &&
         std::chrono::steady_clock::now() < deadline) {
  }
  const auto c = cb.counters();
  ASSERT_EQ(c.arp_requests_in - req_before, kFlood);
  const size_t after = cb.neighbours();
  EXPECT_LE(after, ctl::ControlPlane::kMaxLearnt);
  EXPECT_EQ(c.neighbours_refused + (after - before), kFlood);
  EXPECT_GE(c.neighbours_refused, kFlood - ctl::ControlPlane::kMaxLearnt);
  // Every mbuf comes back to the test's pool (the control plane frees each frame after
  // handling it, so the last one may still be on its way).
  while (rte_mempool_avail_count(pool) != 1023u && std::chrono::steady_clock::now() < deadline) {
  }
  EXPECT_EQ(rte_mempool_avail_count(pool), 1023u);
  rte_mempool_free(pool);

  // Our own resolution gets an entry although the table is full of live learnt ones.
  ASSERT_TRUE(p.engine().launch(1));
  wire::MacAddr mac{};
  ASSERT_EQ(cb.resolve(ctl::gid_from_ipv4(RcPair::internal(p.a).ipv4()), &mac), Status::kSuccess);
  EXPECT_EQ(mac, RcPair::internal(p.a).mac());
}

}  // namespace
}  // namespace urnic::test

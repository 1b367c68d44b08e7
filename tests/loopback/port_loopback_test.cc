// Port layer over real DPDK ethdevs (issue: foundation, item 6): EAL comes up without
// hugepages, two net_ring ports are wired back to back, and RoCEv2 frames built by the wire
// library cross in both directions, IPv4 and IPv6, and arrive intact (parse + ICRC + payload).
#include <gtest/gtest.h>
#include <rte_mbuf.h>

#include <algorithm>
#include <string>

#include "control/eal.h"
#include "dataplane/port.h"
#include "frame_exchange.h"

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
  for (const bool v6 : {false, true}) {
    loopback::exchange(pa, pb, {.ipv6 = v6, .from = 1});
    loopback::exchange(pb, pa, {.ipv6 = v6, .from = 2});
  }
  EXPECT_EQ(pa.stats().tx_packets, 2000u);
  EXPECT_EQ(pb.stats().rx_packets, 2000u);
  // Every mbuf came back to its pool.
  EXPECT_EQ(rte_mempool_in_use_count(pa.pool()), 0u);
  EXPECT_EQ(rte_mempool_in_use_count(pb.pool()), 0u);
}

// A port over several queues (one per engine, issue 14): a pool per queue, the mbufs split over
// them, and the steering the port offers: net_ring has no RSS and takes no rte_flow rule by
// destination QP (qpn_flow.cc), so frames stay on the queue they were sent to and the engines
// hand them over (dataplane/steering.h).
TEST_F(PortLoopback, TwoQueuePortHasAPoolPerQueueAndSoftwareSteering) {
  uint16_t a = 0, b = 0;
  ASSERT_EQ(ctl::create_ring_pair("lb2q", 2, &a, &b), Status::kSuccess);
  dp::Port pa;
  dp::PortConfig ca;
  ca.port_id = a;
  ca.queues = 2;
  ca.mbufs = 8191;
  ASSERT_EQ(pa.open(ca), Status::kSuccess);
  ASSERT_NE(pa.pool(0), nullptr);
  ASSERT_NE(pa.pool(1), nullptr);
  EXPECT_NE(pa.pool(0), pa.pool(1));
  EXPECT_EQ(pa.pool(0)->size, 4095u);
  EXPECT_EQ(pa.pool(1)->size, 4095u);
  EXPECT_EQ(pa.pool(2), nullptr);
  EXPECT_FALSE(pa.rss());
  EXPECT_FALSE(pa.qpn_flow());
  dp::Port::QpnRules r = pa.steer_qpn(2, 1);
  EXPECT_EQ(r.v4, nullptr);
  EXPECT_EQ(r.v6, nullptr);
  // More queues than the device has is refused with a reason, not a crash.
  dp::Port pb;
  dp::PortConfig cb;
  cb.port_id = b;
  cb.queues = 3;
  EXPECT_EQ(pb.open(cb), Status::kInsufficientResources);
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

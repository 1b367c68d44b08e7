// The software switch (switch/soft_switch.h) on its own: two hosts on net_ring pairs, frames
// built by the wire layer, and a synthetic clock passed to step(), so queueing, marking and the
// line rate are deterministic. Checks: RED marks ECN-capable frames CE by queue depth (never at
// or below Kmin, always at or above Kmax) without breaking their ICRC; Not-ECT frames are
// dropped where they would be marked; a full buffer tail-drops; the output line carries no more
// than its rate; the delay holds frames back.
#include "switch/soft_switch.h"

#include <gtest/gtest.h>
#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_ip.h>

#include <vector>

#include "../common/eal.h"
#include "dataplane/wire/frame.h"
#include "dataplane/wire/icrc.h"
#include "urnic/runtime.h"

namespace urnic::test {
namespace {

rte_mempool* g_pool = nullptr;

// A host end of a ring pair: configured and started with the test pool.
bool start_host(uint16_t port) {
  rte_eth_conf conf{};
  return rte_eth_dev_configure(port, 1, 1, &conf) == 0 &&
         rte_eth_rx_queue_setup(port, 0, 1024, 0, nullptr, g_pool) == 0 &&
         rte_eth_tx_queue_setup(port, 0, 1024, 0, nullptr) == 0 && rte_eth_dev_start(port) == 0;
}

constexpr uint32_t kFrame = 998;  // bytes per test frame (a 924-byte payload, no pad)

class SoftSwitchTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_EQ(eal_up("0", 256), Status::kSuccess);
    if (g_pool == nullptr)
      g_pool =
          rte_pktmbuf_pool_create("sw_test", 4095, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE, SOCKET_ID_ANY);
    ASSERT_NE(g_pool, nullptr);
  }

  // Host A and host B, each on a ring pair whose other end is a switch port.
  void make(const sw::SwitchConfig& cfg) {
    static int serial = 0;
    const std::string n = "sw" + std::to_string(serial++);
    uint16_t sa = 0, sb = 0;
    ASSERT_EQ(create_ring_port_pair(n + "a", 1, &host_a_, &sa), Status::kSuccess);
    ASSERT_EQ(create_ring_port_pair(n + "b", 1, &host_b_, &sb), Status::kSuccess);
    ASSERT_TRUE(start_host(host_a_));
    ASSERT_TRUE(start_host(host_b_));
    sw_ = std::make_unique<sw::SoftSwitch>(cfg);
    ASSERT_EQ(sw_->add_port(sa), 0);
    ASSERT_EQ(sw_->add_port(sb), 1);
  }
  void TearDown() override {
    sw_.reset();
    for (uint16_t p : {host_a_, host_b_}) {
      rte_mbuf* m[32];
      while (uint16_t n = rte_eth_rx_burst(p, 0, m, 32)) rte_pktmbuf_free_bulk(m, n);
      rte_eth_dev_stop(p);
    }
  }

  // `count` RoCEv2 WRITE ONLY frames of kFrame bytes from A to B with ECN field `ecn`.
  void send_from_a(uint32_t count, uint8_t ecn) {
    wire::NetHeaders net;
    net.src_mac = {2, 0, 0, 0, 0, 0xA};
    net.dst_mac = {2, 0, 0, 0, 0, 0xB};
    net.src_ip4 = 0x0A000001;
    net.dst_ip4 = 0x0A000002;
    net.traffic_class = static_cast<uint8_t>(26 << 2 | ecn);
    wire::TransportHeaders th;
    th.bth.opcode = wire::opc::kWriteOnly;
    th.bth.pkey = wire::Be16::of(wire::kDefaultPkey);
    std::vector<uint8_t> data(924, 0x5A);
    ASSERT_EQ(wire::frame_length(net, th.bth.opcode, 924), kFrame);
    for (uint32_t i = 0; i < count; ++i) {
      wire::Bth::Psn::set(th.bth, i);
      rte_mbuf* m = rte_pktmbuf_alloc(g_pool);
      ASSERT_NE(m, nullptr);
      auto* p = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, kFrame));
      ASSERT_EQ(wire::build_frame({p, kFrame}, net, th, data), kFrame);
      ASSERT_EQ(rte_eth_tx_burst(host_a_, 0, &m, 1), 1);
    }
  }
  struct Got {
    uint32_t psn;
    uint8_t ecn;
  };
  // What B received so far; each frame must parse with a valid ICRC and IPv4 checksum.
  std::vector<Got> receive_b() {
    std::vector<Got> out;
    rte_mbuf* m[32];
    while (uint16_t n = rte_eth_rx_burst(host_b_, 0, m, 32)) {
      for (uint16_t i = 0; i < n; ++i) {
        auto* d = rte_pktmbuf_mtod(m[i], uint8_t*);
        wire::ParsedFrame f;
        EXPECT_EQ(wire::parse(d, rte_pktmbuf_data_len(m[i]), f), wire::ParseError::kOk);
        EXPECT_TRUE(wire::icrc_check(d, f.l));
        const auto* ip = reinterpret_cast<const rte_ipv4_hdr*>(d + f.l.l3_off);
        EXPECT_EQ(rte_ipv4_cksum(ip), 0) << "IPv4 checksum";  // a valid header sums to 0
        EXPECT_EQ(ip->type_of_service >> 2, 26) << "the DSCP is kept";
        out.push_back({wire::Bth::Psn::get(f.bth()), uint8_t(ip->type_of_service & 3)});
      }
      rte_pktmbuf_free_bulk(m, n);
    }
    return out;
  }
  // Steps the switch every 100 us from `t0` for `span_us` and returns what B received.
  std::vector<Got> drain_b(uint64_t t0, uint64_t span_us) {
    std::vector<Got> got;
    for (uint64_t t = 0; t <= span_us; t += 100) {
      sw_->step(t0 + us(t));
      for (const Got& g : receive_b()) got.push_back(g);
    }
    return got;
  }
  static uint64_t us(uint64_t n) { return n * rte_get_tsc_hz() / 1'000'000; }

  uint16_t host_a_ = 0, host_b_ = 0;
  std::unique_ptr<sw::SoftSwitch> sw_;
};

// 8 Mb/s: one byte per microsecond, a 1000-byte frame per millisecond.
sw::SwitchConfig red_config() {
  sw::SwitchConfig c;
  c.rate_mbps = 8;
  c.buffer_bytes = 10'000;
  c.kmin_bytes = 2'000;
  c.kmax_bytes = 5'900;
  c.pmax = 1.0;
  return c;
}

TEST_F(SoftSwitchTest, RedMarksByDepthKeepsIcrcAndTailDrops) {
  make(red_config());
  send_from_a(20, 2);  // ECT(0)
  const uint64_t t0 = us(1'000'000);
  sw_->step(t0);  // all 20 arrive at once: depths 0, 998, ... until the buffer is full
  const auto& c = sw_->counters(1);
  EXPECT_EQ(c.tail_drops, 10u);  // frames 10..19: 9 980 bytes queued, no room for 998 more
  // Depth <= Kmin (frames 0..2) never marked, >= Kmax (frames 6..9) always, between at random.
  EXPECT_GE(c.ce_marked, 4u);
  EXPECT_LE(c.ce_marked, 7u);
  EXPECT_EQ(c.red_drops, 0u);
  const std::vector<Got> got = drain_b(t0, 10'000);
  ASSERT_EQ(got.size(), 10u);
  for (uint32_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].psn, i);
    if (i <= 2) {
      EXPECT_EQ(got[i].ecn, 2) << i;
    } else if (i >= 6) {
      EXPECT_EQ(got[i].ecn, 3) << i;
    }
  }
  EXPECT_EQ(c.tx_frames, 10u);
  EXPECT_EQ(sw_->queued_bytes(1), 0u);
  EXPECT_EQ(c.max_depth, 10 * kFrame);
}

TEST_F(SoftSwitchTest, NotEctIsDroppedWhereEctWouldBeMarked) {
  make(red_config());
  send_from_a(10, 0);  // Not-ECT
  const uint64_t t0 = us(1'000'000);
  sw_->step(t0);
  const auto& c = sw_->counters(1);
  EXPECT_EQ(c.ce_marked, 0u);
  // Depths from Kmax on always drop, and drops keep the queue at that depth: frames 6..9.
  EXPECT_GE(c.red_drops, 4u);
  const std::vector<Got> got = drain_b(t0, 10'000);
  EXPECT_EQ(got.size() + c.red_drops, 10u);
  for (const Got& g : got) EXPECT_EQ(g.ecn, 0);
}

TEST_F(SoftSwitchTest, LineRateAndDelayHoldFramesBack) {
  sw::SwitchConfig cfg = red_config();
  cfg.kmin_bytes = cfg.kmax_bytes = cfg.buffer_bytes;  // no marking
  cfg.delay_us = 300;
  make(cfg);
  send_from_a(8, 2);
  const uint64_t t0 = us(1'000'000);
  sw_->step(t0);
  EXPECT_TRUE(receive_b().empty());  // the delay: nothing before 300 us
  sw_->step(t0 + us(299));
  EXPECT_TRUE(receive_b().empty());
  // From 300 us on, one frame per 998 us (8 Mb/s), never ahead of the line.
  size_t total = 0;
  for (uint64_t t = 300; t <= 300 + 7'500; t += 50) {
    sw_->step(t0 + us(t));
    total += receive_b().size();
    const uint64_t allowed = 1 + (t - 300) / 998;
    EXPECT_LE(total, allowed) << "at " << t << " us";
  }
  EXPECT_EQ(total, 8u);
}

TEST_F(SoftSwitchTest, IngressImpairmentsDropDuplicateAndCorrupt) {
  // Every frame entering the switch goes through the fault injector: with a fixed seed the
  // counts are reproducible, and what reaches B is what the injector let through (duplicates
  // included), corrupted frames with a failing ICRC.
  sw::SwitchConfig cfg;
  cfg.impair.drop_ppm = 200'000;
  cfg.impair.duplicate_ppm = 100'000;
  cfg.impair.corrupt_ppm = 100'000;
  cfg.impair.seed = 7;
  make(cfg);
  send_from_a(200, 2);
  const uint64_t t0 = us(1'000'000);
  for (uint64_t t = 0; t < 100; ++t) sw_->step(t0 + us(t));
  const FaultCounters* f = sw_->impair_counters();
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->seen, 200u);
  EXPECT_GT(f->dropped, 20u);  // 20 % of 200, give or take
  EXPECT_LT(f->dropped, 60u);
  EXPECT_GT(f->duplicated, 5u);
  EXPECT_GT(f->corrupted, 5u);
  // What B received: every frame the injector passed on, duplicates twice; the corrupted ones
  // fail their ICRC at B.
  uint32_t good = 0, bad = 0;
  rte_mbuf* m[32];
  while (uint16_t n = rte_eth_rx_burst(host_b_, 0, m, 32)) {
    for (uint16_t i = 0; i < n; ++i) {
      auto* d = rte_pktmbuf_mtod(m[i], uint8_t*);
      wire::ParsedFrame pf;
      const bool ok = wire::parse(d, rte_pktmbuf_data_len(m[i]), pf) == wire::ParseError::kOk &&
                      wire::icrc_check(d, pf.l);
      (ok ? good : bad) += 1;
    }
    rte_pktmbuf_free_bulk(m, n);
  }
  EXPECT_EQ(good + bad, 200u - f->dropped + f->duplicated);
  EXPECT_EQ(sw_->counters(1).tx_frames, good + bad);
  EXPECT_GE(bad, 1u);
  EXPECT_LE(bad, f->corrupted * 2);  // a corrupted frame may also be duplicated
}

}  // namespace
}  // namespace urnic::test

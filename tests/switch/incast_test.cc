// Incast through the software switch (switch/incast.h, issue 15): 8 senders RDMA WRITE 64 KiB
// messages to one receiver through a 1 Gb/s bottleneck with a 1 MiB buffer and RED/ECN marking.
// With DCQCN the senders share the bottleneck: at least 90 % of it in every measured second,
// Jain's fairness index at least 0.95, no drop after the first second (convergence), the queue's
// 99th percentile below Kmax, and every byte where it belongs. Without congestion control the
// same run drops frames at the bottleneck every second and loses most of its goodput to go-back-N
// (or a QP runs out of retries altogether), which is what shows that the first test can fail.
#include "switch/incast.h"

#include <gtest/gtest.h>

#include "../common/eal.h"

namespace urnic::test {
namespace {

class Incast : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { ASSERT_EQ(eal_up("0", 1024), Status::kSuccess); }
};

TEST_F(Incast, DcqcnSharesTheBottleneckFairlyWithoutDrops) {
  sw::IncastConfig c;
  c.name = "in_on";
  const sw::IncastResult r = sw::run_incast(c);
  ASSERT_EQ(r.error, "");
  ASSERT_EQ(r.windows.size(), c.windows);
  for (size_t w = 0; w < r.windows.size(); ++w) {
    const auto& x = r.windows[w];
    EXPECT_GE(x.aggregate_mbps, 0.9 * c.fabric.rate_mbps) << "window " << w;
    EXPECT_GE(x.jain, 0.95) << "window " << w;
    EXPECT_EQ(x.drops, 0u) << "window " << w;
    EXPECT_GT(x.marks, 0u) << "window " << w << ": the queue never reached Kmin";
  }
  EXPECT_LT(r.depth_p99, c.fabric.kmax_bytes);
  EXPECT_GT(r.cnps_sent, 0u);
  EXPECT_EQ(r.cnps_sent, r.cnps_received);  // every CNP reached its QP (no loss on the way back)
  EXPECT_TRUE(r.data_ok);
}

TEST_F(Incast, WithoutCongestionControlTheBottleneckDrops) {
  sw::IncastConfig c;
  c.name = "in_off";
  c.congestion.enabled = false;
  const sw::IncastResult r = sw::run_incast(c);
  if (!r.error.empty()) {
    // Go-back-N into a bottleneck that drops whatever passes Kmax: some QP's retransmissions
    // met a full queue seven times in a row and it failed with "retry counter exceeded".
    EXPECT_TRUE(r.transport_failed) << r.error;
    EXPECT_NE(r.error.find("STATUS_IO_TIMEOUT"), std::string::npos) << r.error;
    return;
  }
  ASSERT_EQ(r.windows.size(), c.windows);
  for (const auto& x : r.windows) {
    EXPECT_GT(x.drops, 0u);
    EXPECT_LT(x.aggregate_mbps, 0.5 * c.fabric.rate_mbps);
    EXPECT_EQ(x.marks, 0u);  // Not-ECT: RED drops what it would mark
  }
  EXPECT_EQ(r.cnps_sent, 0u);
  EXPECT_TRUE(r.data_ok);  // go-back-N still delivers every byte exactly
}

}  // namespace
}  // namespace urnic::test

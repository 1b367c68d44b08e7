// Traffic to the device's own address (issue 40): an RC QP connected to another QP of the same
// device, and a UD datagram to the device's own GID, as rxe and a hardware RNIC deliver them
// (the frame never reaches the wire: urnic's engine loops it back, PortCounters::looped_back).
// Test programs, intra-host MPI and UCX over the NIC, and many self-tests rely on it. Data is
// checked byte for byte, every completion counted.
#include <infiniband/verbs.h>

#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <vector>

#include "verbs_helpers.h"

namespace {

using verbs_test::poll_n;

class Self : public ::testing::Test {
 protected:
  void SetUp() override {
    int n = 0;
    devs_ = ibv_get_device_list(&n);
    ASSERT_NE(devs_, nullptr);
    ASSERT_GE(n, 1);
    ctx_ = ibv_open_device(devs_[0]);
    ASSERT_NE(ctx_, nullptr);
    pd_ = ibv_alloc_pd(ctx_);
    cq_ = ibv_create_cq(ctx_, 256, nullptr, nullptr, 0);
    ASSERT_TRUE(pd_ && cq_);
    mr_ = ibv_reg_mr(pd_, buf_.data(), buf_.size(),
                     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
    ASSERT_NE(mr_, nullptr);
  }
  void TearDown() override {
    for (ibv_qp* q : qps_) EXPECT_EQ(ibv_destroy_qp(q), 0);
    if (ah_) {
      EXPECT_EQ(ibv_destroy_ah(ah_), 0);
    }
    if (mr_) {
      EXPECT_EQ(ibv_dereg_mr(mr_), 0);
    }
    if (cq_) {
      EXPECT_EQ(ibv_destroy_cq(cq_), 0);
    }
    if (pd_) {
      EXPECT_EQ(ibv_dealloc_pd(pd_), 0);
    }
    if (ctx_) {
      EXPECT_EQ(ibv_close_device(ctx_), 0);
    }
    if (devs_) ibv_free_device_list(devs_);
  }
  ibv_qp* qp(ibv_qp_type t) {
    ibv_qp_init_attr a{};
    a.send_cq = a.recv_cq = cq_;
    a.qp_type = t;
    a.sq_sig_all = 1;
    a.cap.max_send_wr = a.cap.max_recv_wr = 16;
    a.cap.max_send_sge = a.cap.max_recv_sge = 1;
    ibv_qp* q = ibv_create_qp(pd_, &a);
    if (q != nullptr) qps_.push_back(q);
    return q;
  }
  ibv_sge sge(size_t off, uint32_t len) {
    return ibv_sge{reinterpret_cast<uintptr_t>(buf_.data() + off), len, mr_->lkey};
  }

  ibv_device** devs_ = nullptr;
  ibv_context* ctx_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_cq* cq_ = nullptr;
  ibv_mr* mr_ = nullptr;
  ibv_ah* ah_ = nullptr;
  std::vector<ibv_qp*> qps_;
  std::vector<uint8_t> buf_ = std::vector<uint8_t>(1 << 16);
};

TEST_F(Self, RcQpConnectedToAQpOfTheSameDevice) {
  ibv_qp* a = qp(IBV_QPT_RC);
  ibv_qp* b = qp(IBV_QPT_RC);
  ASSERT_TRUE(a && b);
  ASSERT_NO_FATAL_FAILURE(verbs_test::connect_rc(a, ctx_, b->qp_num));
  ASSERT_NO_FATAL_FAILURE(verbs_test::connect_rc(b, ctx_, a->qp_num));
  std::iota(buf_.begin(), buf_.begin() + 8192, uint8_t{1});
  // WRITE 5000 bytes (five packets) from [0, 5000) to [10000, 15000), READ them back to
  // [20000, 25000), then a SEND into a receive at [30000, 31000).
  ibv_sge s = sge(0, 5000);
  ibv_send_wr w{};
  ibv_send_wr* bad = nullptr;
  w.wr_id = 1;
  w.sg_list = &s;
  w.num_sge = 1;
  w.opcode = IBV_WR_RDMA_WRITE;
  w.wr.rdma.remote_addr = reinterpret_cast<uintptr_t>(buf_.data() + 10000);
  w.wr.rdma.rkey = mr_->rkey;
  ASSERT_EQ(ibv_post_send(a, &w, &bad), 0);
  auto wc = poll_n(cq_, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(std::memcmp(buf_.data() + 10000, buf_.data(), 5000), 0);
  s = sge(20000, 5000);
  w.wr_id = 2;
  w.opcode = IBV_WR_RDMA_READ;
  ASSERT_EQ(ibv_post_send(a, &w, &bad), 0);
  wc = poll_n(cq_, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(std::memcmp(buf_.data() + 20000, buf_.data(), 5000), 0);
  ibv_sge rs = sge(30000, 1000);
  ibv_recv_wr r{};
  ibv_recv_wr* rbad = nullptr;
  r.wr_id = 3;
  r.sg_list = &rs;
  r.num_sge = 1;
  ASSERT_EQ(ibv_post_recv(b, &r, &rbad), 0);
  s = sge(100, 1000);
  w.wr_id = 4;
  w.opcode = IBV_WR_SEND;
  ASSERT_EQ(ibv_post_send(a, &w, &bad), 0);
  wc = poll_n(cq_, 2);
  ASSERT_EQ(wc.size(), 2u);
  for (const ibv_wc& c : wc) EXPECT_EQ(c.status, IBV_WC_SUCCESS);
  EXPECT_EQ(std::memcmp(buf_.data() + 30000, buf_.data() + 100, 1000), 0);
}

TEST_F(Self, UdDatagramToTheDevicesOwnGid) {
  ibv_qp* a = qp(IBV_QPT_UD);
  ibv_qp* b = qp(IBV_QPT_UD);
  ASSERT_TRUE(a && b);
  for (ibv_qp* q : {a, b}) {
    ibv_qp_attr at{};
    at.qp_state = IBV_QPS_INIT;
    at.port_num = 1;
    at.qkey = 0x11111111;
    ASSERT_EQ(ibv_modify_qp(q, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY),
              0);
    at = {};
    at.qp_state = IBV_QPS_RTR;
    ASSERT_EQ(ibv_modify_qp(q, &at, IBV_QP_STATE), 0);
    at.qp_state = IBV_QPS_RTS;
    at.sq_psn = 1;
    ASSERT_EQ(ibv_modify_qp(q, &at, IBV_QP_STATE | IBV_QP_SQ_PSN), 0);
  }
  // GID 0 (the link-local address) and GID 1 (IPv4), each its own datagram.
  for (int gid = 0; gid < 2; ++gid) {
    ibv_ah_attr ah{};
    ah.is_global = 1;
    ah.port_num = 1;
    ah.grh.sgid_index = static_cast<uint8_t>(gid);
    ah.grh.hop_limit = 64;
    // UCX passes a flow label wider than the GRH's 20 bits: only those are used (IPv6 GID 0).
    ah.grh.flow_label = 0xFFFFFFFFu;
    ASSERT_EQ(ibv_query_gid(ctx_, 1, gid, &ah.grh.dgid), 0);
    if (ah_) {
      ASSERT_EQ(ibv_destroy_ah(ah_), 0);
    }
    ah_ = ibv_create_ah(pd_, &ah);
    ASSERT_NE(ah_, nullptr) << "GID " << gid << ": errno " << errno;
    std::iota(buf_.begin(), buf_.begin() + 512, static_cast<uint8_t>(gid * 50));
    ibv_sge rs = sge(40000, 40 + 512);  // the GRH's 40 bytes, then the payload
    ibv_recv_wr r{};
    ibv_recv_wr* rbad = nullptr;
    r.wr_id = 10 + gid;
    r.sg_list = &rs;
    r.num_sge = 1;
    ASSERT_EQ(ibv_post_recv(b, &r, &rbad), 0);
    ibv_sge s = sge(0, 512);
    ibv_send_wr w{};
    ibv_send_wr* bad = nullptr;
    w.wr_id = 20 + gid;
    w.sg_list = &s;
    w.num_sge = 1;
    w.opcode = IBV_WR_SEND;
    w.wr.ud.ah = ah_;
    w.wr.ud.remote_qpn = b->qp_num;
    w.wr.ud.remote_qkey = 0x11111111;
    ASSERT_EQ(ibv_post_send(a, &w, &bad), 0);
    const auto wc = poll_n(cq_, 2);
    ASSERT_EQ(wc.size(), 2u) << "GID " << gid;
    for (const ibv_wc& c : wc) {
      EXPECT_EQ(c.status, IBV_WC_SUCCESS);
      if (c.opcode == IBV_WC_RECV) {
        EXPECT_EQ(c.byte_len, 40u + 512);
        EXPECT_EQ(c.src_qp, a->qp_num);
      }
    }
    EXPECT_EQ(std::memcmp(buf_.data() + 40040, buf_.data(), 512), 0) << "GID " << gid;
    if (gid == 0) {  // the GRH area holds the IPv6 header: version 6, the flow label's 20 bits
      const uint8_t* h = buf_.data() + 40000;
      EXPECT_EQ(h[0] >> 4, 6);
      EXPECT_EQ(((h[1] & 0xFu) << 16) | (h[2] << 8) | h[3], 0xFFFFFu);
    }
  }
}

}  // namespace

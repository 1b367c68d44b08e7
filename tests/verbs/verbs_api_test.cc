// The verbs layer through libibverbs' own API, as an application sees it (issue 16 items 1-2):
// this test is linked against urnic's libibverbs.so.1, never rdma-core's, and runs on the two
// in-memory devices (urnic0 and urnic1, wired back to back) that the library offers when no port
// is configured. Data is checked byte for byte and every completion is counted; bad arguments
// must fail with the errno rdma-core documents.
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <poll.h>

#include <gtest/gtest.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <numeric>
#include <vector>

#include "urnic/types.h"  // urnic::describe: the table ibv_wc_status_str reads

#include "verbs_helpers.h"

namespace {

using verbs_test::poll_n;

constexpr int kDepth = 64;

struct Side {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  ibv_qp* qp = nullptr;
  std::vector<uint8_t> buf = std::vector<uint8_t>(1 << 16);
  ibv_mr* mr = nullptr;
};

class Verbs : public ::testing::Test {
 protected:
  void SetUp() override {
    int n = 0;
    devs_ = ibv_get_device_list(&n);
    ASSERT_NE(devs_, nullptr);
    ASSERT_EQ(n, 2);
    for (int i = 0; i < 2; ++i) {
      Side& s = side_[i];
      s.ctx = ibv_open_device(devs_[i]);
      ASSERT_NE(s.ctx, nullptr) << "errno " << errno;
      s.pd = ibv_alloc_pd(s.ctx);
      ASSERT_NE(s.pd, nullptr);
      s.cq = ibv_create_cq(s.ctx, 4 * kDepth, nullptr, nullptr, 0);
      ASSERT_NE(s.cq, nullptr);
      s.mr = ibv_reg_mr(s.pd, s.buf.data(), s.buf.size(),
                        IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                            IBV_ACCESS_REMOTE_ATOMIC);
      ASSERT_NE(s.mr, nullptr) << "errno " << errno;
    }
  }
  void TearDown() override {
    for (Side& s : side_) {
      if (s.qp) {
        EXPECT_EQ(ibv_destroy_qp(s.qp), 0);
      }
      if (s.mr) {
        EXPECT_EQ(ibv_dereg_mr(s.mr), 0);
      }
      if (s.cq) {
        EXPECT_EQ(ibv_destroy_cq(s.cq), 0);
      }
      if (s.pd) {
        EXPECT_EQ(ibv_dealloc_pd(s.pd), 0);
      }
      if (s.ctx) {
        EXPECT_EQ(ibv_close_device(s.ctx), 0);
      }
    }
    if (devs_) ibv_free_device_list(devs_);
  }

  ibv_qp* make_qp(Side& s, int sig_all = 1) {
    ibv_qp_init_attr a{};
    a.send_cq = a.recv_cq = s.cq;
    a.qp_type = IBV_QPT_RC;
    a.sq_sig_all = sig_all;
    a.cap.max_send_wr = a.cap.max_recv_wr = kDepth;
    a.cap.max_send_sge = a.cap.max_recv_sge = 4;
    a.cap.max_inline_data = 128;
    return ibv_create_qp(s.pd, &a);
  }

  // RESET -> INIT -> RTR -> RTS towards the other side's QP (verbs_helpers.h).
  void connect(Side& s, const Side& peer) {
    verbs_test::connect_rc(s.qp, peer.ctx, peer.qp->qp_num);
  }

  void connect_pair(int sig_all = 1) {
    for (Side& s : side_) {
      s.qp = make_qp(s, sig_all);
      ASSERT_NE(s.qp, nullptr) << "errno " << errno;
    }
    connect(side_[0], side_[1]);
    connect(side_[1], side_[0]);
  }

  ibv_sge sge(Side& s, size_t off, uint32_t len) {
    return ibv_sge{reinterpret_cast<uintptr_t>(s.buf.data() + off), len, s.mr->lkey};
  }

  ibv_device** devs_ = nullptr;
  std::array<Side, 2> side_;
};

TEST_F(Verbs, DevicesPortsAndGids) {
  EXPECT_STREQ(ibv_get_device_name(devs_[0]), "urnic0");
  EXPECT_STREQ(ibv_get_device_name(devs_[1]), "urnic1");
  ibv_device_attr da{};
  ASSERT_EQ(ibv_query_device(side_[0].ctx, &da), 0);
  EXPECT_EQ(da.phys_port_cnt, 1);
  EXPECT_GT(da.max_qp_wr, kDepth);
  EXPECT_EQ(da.atomic_cap, IBV_ATOMIC_HCA);
  EXPECT_NE(da.node_guid, 0u);
  ibv_port_attr pa{};
  ASSERT_EQ(ibv_query_port(side_[0].ctx, 1, &pa), 0);
  EXPECT_EQ(pa.state, IBV_PORT_ACTIVE);
  EXPECT_EQ(pa.link_layer, IBV_LINK_LAYER_ETHERNET);
  EXPECT_EQ(ibv_query_port(side_[0].ctx, 2, &pa), EINVAL);
  ibv_gid g{};
  ASSERT_EQ(ibv_query_gid(side_[0].ctx, 1, 1, &g), 0);
  const uint8_t want[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 198, 18, 100, 1};
  EXPECT_EQ(std::memcmp(g.raw, want, 16), 0);
  EXPECT_EQ(ibv_query_gid(side_[0].ctx, 1, 99, &g), -1);
  ibv_gid_entry e{};
  ASSERT_EQ(ibv_query_gid_ex(side_[1].ctx, 1, 1, &e, 0), 0);
  EXPECT_EQ(e.gid_type, IBV_GID_TYPE_ROCE_V2);
  EXPECT_EQ(e.gid.raw[15], 2);
  __be16 pkey = 0;
  ASSERT_EQ(ibv_query_pkey(side_[0].ctx, 1, 0, &pkey), 0);
  EXPECT_EQ(be16toh(pkey), 0xFFFF);
  EXPECT_EQ(ibv_query_pkey(side_[0].ctx, 1, 1, &pkey), -1);
}

// What programs probe and rely on (issue 40): the node type's name, a vendor id that is set,
// create flags named with none set, and a second resize of an empty CQ.
TEST_F(Verbs, WhatProgramsProbe) {
  EXPECT_STREQ(ibv_node_type_str(IBV_NODE_CA), "InfiniBand channel adapter");
  EXPECT_STREQ(ibv_node_type_str(IBV_NODE_SWITCH), "InfiniBand switch");
  EXPECT_STREQ(ibv_node_type_str(IBV_NODE_UNSPECIFIED), "unspecified");
  EXPECT_STREQ(ibv_node_type_str(IBV_NODE_UNKNOWN), "unknown");
  EXPECT_STREQ(ibv_node_type_str(static_cast<ibv_node_type>(99)), "unknown");
  EXPECT_EQ(devs_[0]->node_type, IBV_NODE_CA);
  ibv_device_attr da{};
  ASSERT_EQ(ibv_query_device(side_[0].ctx, &da), 0);
  EXPECT_EQ(da.vendor_id, 0xFFFFFFu);  // a software RNIC's, as rxe's (docs/verbs.md)

  Side& a = side_[0];
  ibv_qp_init_attr_ex x{};
  x.qp_type = IBV_QPT_RC;
  x.send_cq = x.recv_cq = a.cq;
  x.cap.max_send_wr = x.cap.max_recv_wr = 4;
  x.cap.max_send_sge = x.cap.max_recv_sge = 1;
  x.pd = a.pd;
  x.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS;
  x.create_flags = 0;
  ibv_qp* q = ibv_create_qp_ex(a.ctx, &x);
  ASSERT_NE(q, nullptr) << "errno " << errno;
  EXPECT_EQ(ibv_destroy_qp(q), 0);
  x.create_flags = IBV_QP_CREATE_SCATTER_FCS;  // a flag: not offered
  errno = 0;
  EXPECT_EQ(ibv_create_qp_ex(a.ctx, &x), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);

  // An address handle with no GRH (qperf's ud tests build one from a LID): EINVAL, as the
  // kernel's rdma_check_ah_attr answers for every RoCE port.
  ibv_ah_attr lid_only{};
  lid_only.dlid = 1;
  lid_only.port_num = 1;
  errno = 0;
  EXPECT_EQ(ibv_create_ah(a.pd, &lid_only), nullptr);
  EXPECT_EQ(errno, EINVAL);

  // Resized twice (and a third time) with no poll between: the CQ is empty each time.
  ibv_cq* cq = ibv_create_cq(a.ctx, 16, nullptr, nullptr, 0);
  ASSERT_NE(cq, nullptr);
  EXPECT_EQ(ibv_resize_cq(cq, 64), 0);
  EXPECT_EQ(ibv_resize_cq(cq, 128), 0);
  EXPECT_EQ(ibv_resize_cq(cq, 32), 0);
  EXPECT_GE(cq->cqe, 32);
  ibv_wc wc{};
  EXPECT_EQ(ibv_poll_cq(cq, 1, &wc), 0);
  EXPECT_EQ(ibv_destroy_cq(cq), 0);
}

// Extended CQs (ibv_create_cq_ex) read by field: b's QP completes into one; a SEND with
// immediate and a WRITE with immediate arrive, each read with ibv_start_poll / ibv_next_poll and
// the ibv_wc_read_* accessors; ibv_poll_cq works on the same CQ. Fields urnic cannot give are
// refused at creation.
TEST_F(Verbs, ExtendedCqReadByField) {
  Side& a = side_[0];
  Side& b = side_[1];
  ibv_cq_init_attr_ex ca{};
  ca.cqe = 4 * kDepth;
  ca.wc_flags =
      IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM | IBV_WC_EX_WITH_SRC_QP;
  ca.comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS;
  ca.flags = IBV_CREATE_CQ_ATTR_SINGLE_THREADED;
  ibv_cq_ex* x = ibv_create_cq_ex(b.ctx, &ca);
  ASSERT_NE(x, nullptr) << "errno " << errno;
  ASSERT_EQ(ibv_destroy_cq(b.cq), 0);
  b.cq = ibv_cq_ex_to_cq(x);  // the fixture's QP and teardown use it from here
  ibv_cq_init_attr_ex ts = ca;
  ts.wc_flags |= IBV_WC_EX_WITH_COMPLETION_TIMESTAMP;
  errno = 0;
  EXPECT_EQ(ibv_create_cq_ex(b.ctx, &ts), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
  ibv_poll_cq_attr pa{};
  EXPECT_EQ(ibv_start_poll(x, &pa), ENOENT);  // empty: no ibv_end_poll follows
  connect_pair();

  std::iota(a.buf.begin(), a.buf.begin() + 4096, uint8_t{3});
  ibv_sge rs[2] = {sge(b, 30000, 3000), sge(b, 40000, 16)};
  ibv_recv_wr rw[2]{};
  ibv_recv_wr* rbad = nullptr;
  for (int i = 0; i < 2; ++i) {
    rw[i].wr_id = 200 + i;
    rw[i].sg_list = &rs[i];
    rw[i].num_sge = 1;
    rw[i].next = i == 0 ? &rw[1] : nullptr;
  }
  ASSERT_EQ(ibv_post_recv(b.qp, rw, &rbad), 0);
  ibv_send_wr w[2]{};
  ibv_sge s[2] = {sge(a, 0, 3000), sge(a, 0, 64)};
  for (int i = 0; i < 2; ++i) {
    w[i].wr_id = 31 + i;
    w[i].sg_list = &s[i];
    w[i].num_sge = 1;
    w[i].imm_data = htobe32(0xBEEF0000u + i);
  }
  w[0].opcode = IBV_WR_SEND_WITH_IMM;
  w[0].next = &w[1];
  w[1].opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  w[1].wr.rdma.remote_addr = reinterpret_cast<uintptr_t>(b.buf.data() + 50000);
  w[1].wr.rdma.rkey = b.mr->rkey;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(a.qp, w, &bad), 0);
  EXPECT_EQ(poll_n(a.cq, 2).size(), 2u);

  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  int rc = ENOENT;
  while (rc == ENOENT && std::chrono::steady_clock::now() < end) rc = ibv_start_poll(x, &pa);
  ASSERT_EQ(rc, 0);
  EXPECT_EQ(x->status, IBV_WC_SUCCESS);
  EXPECT_EQ(x->wr_id, 200u);
  EXPECT_EQ(ibv_wc_read_opcode(x), IBV_WC_RECV);
  EXPECT_EQ(ibv_wc_read_byte_len(x), 3000u);
  EXPECT_TRUE(ibv_wc_read_wc_flags(x) & IBV_WC_WITH_IMM);
  EXPECT_EQ(be32toh(ibv_wc_read_imm_data(x)), 0xBEEF0000u);
  EXPECT_EQ(ibv_wc_read_qp_num(x), b.qp->qp_num);
  rc = ENOENT;
  while (rc == ENOENT && std::chrono::steady_clock::now() < end) rc = ibv_next_poll(x);
  ASSERT_EQ(rc, 0);
  EXPECT_EQ(x->wr_id, 201u);
  EXPECT_EQ(ibv_wc_read_opcode(x), IBV_WC_RECV_RDMA_WITH_IMM);
  EXPECT_EQ(ibv_wc_read_byte_len(x), 64u);
  EXPECT_EQ(be32toh(ibv_wc_read_imm_data(x)), 0xBEEF0001u);
  EXPECT_EQ(ibv_next_poll(x), ENOENT);
  ibv_end_poll(x);
  EXPECT_EQ(std::memcmp(b.buf.data() + 30000, a.buf.data(), 3000), 0);
  EXPECT_EQ(std::memcmp(b.buf.data() + 50000, a.buf.data(), 64), 0);

  // The same CQ through ibv_poll_cq.
  ASSERT_EQ(ibv_post_recv(b.qp, rw, &rbad), 0);
  ASSERT_EQ(ibv_post_send(a.qp, w, &bad), 0);
  EXPECT_EQ(poll_n(a.cq, 2).size(), 2u);
  const auto got = poll_n(b.cq, 2);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[1].opcode, IBV_WC_RECV_RDMA_WITH_IMM);
}

TEST_F(Verbs, WriteReadSendImmediateAndAtomics) {
  connect_pair();
  Side& a = side_[0];
  Side& b = side_[1];
  std::iota(a.buf.begin(), a.buf.begin() + 8192, uint8_t{7});
  // RDMA WRITE of 5000 bytes (several packets at MTU 1024) from a to b.
  ibv_sge s = sge(a, 0, 5000);
  ibv_send_wr wr{};
  ibv_send_wr* bad = nullptr;
  wr.wr_id = 11;
  wr.sg_list = &s;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.wr.rdma.remote_addr = reinterpret_cast<uintptr_t>(b.buf.data() + 100);
  wr.wr.rdma.rkey = b.mr->rkey;
  ASSERT_EQ(ibv_post_send(a.qp, &wr, &bad), 0);
  auto wc = poll_n(a.cq, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc[0].opcode, IBV_WC_RDMA_WRITE);
  EXPECT_EQ(wc[0].wr_id, 11u);
  EXPECT_EQ(wc[0].qp_num, a.qp->qp_num);
  EXPECT_EQ(std::memcmp(b.buf.data() + 100, a.buf.data(), 5000), 0);

  // RDMA READ of it back into a's second half.
  s = sge(a, 20000, 5000);
  wr.wr_id = 12;
  wr.opcode = IBV_WR_RDMA_READ;
  ASSERT_EQ(ibv_post_send(a.qp, &wr, &bad), 0);
  wc = poll_n(a.cq, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc[0].opcode, IBV_WC_RDMA_READ);
  EXPECT_EQ(std::memcmp(a.buf.data() + 20000, a.buf.data(), 5000), 0);

  // SEND with immediate and WRITE with immediate, each consuming one receive at b.
  ibv_sge rs[2] = {sge(b, 30000, 3000), sge(b, 40000, 16)};
  ibv_recv_wr rw[2]{};
  ibv_recv_wr* rbad = nullptr;
  for (int i = 0; i < 2; ++i) {
    rw[i].wr_id = 100 + i;
    rw[i].sg_list = &rs[i];
    rw[i].num_sge = 1;
    rw[i].next = i == 0 ? &rw[1] : nullptr;
  }
  ASSERT_EQ(ibv_post_recv(b.qp, rw, &rbad), 0);
  ibv_send_wr w2[2]{};
  ibv_sge s2[2] = {sge(a, 0, 3000), sge(a, 0, 64)};
  w2[0].wr_id = 21;
  w2[0].sg_list = &s2[0];
  w2[0].num_sge = 1;
  w2[0].opcode = IBV_WR_SEND_WITH_IMM;
  w2[0].imm_data = htobe32(0xCAFE0001);
  w2[0].next = &w2[1];
  w2[1].wr_id = 22;
  w2[1].sg_list = &s2[1];
  w2[1].num_sge = 1;
  w2[1].opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  w2[1].imm_data = htobe32(0xCAFE0002);
  w2[1].wr.rdma.remote_addr = reinterpret_cast<uintptr_t>(b.buf.data() + 50000);
  w2[1].wr.rdma.rkey = b.mr->rkey;
  ASSERT_EQ(ibv_post_send(a.qp, w2, &bad), 0);
  EXPECT_EQ(poll_n(a.cq, 2).size(), 2u);
  wc = poll_n(b.cq, 2);
  ASSERT_EQ(wc.size(), 2u);
  EXPECT_EQ(wc[0].wr_id, 100u);
  EXPECT_EQ(wc[0].opcode, IBV_WC_RECV);
  EXPECT_EQ(wc[0].byte_len, 3000u);
  EXPECT_TRUE(wc[0].wc_flags & IBV_WC_WITH_IMM);
  EXPECT_EQ(be32toh(wc[0].imm_data), 0xCAFE0001u);
  EXPECT_EQ(wc[1].wr_id, 101u);
  EXPECT_EQ(wc[1].opcode, IBV_WC_RECV_RDMA_WITH_IMM);
  EXPECT_EQ(wc[1].byte_len, 64u);
  EXPECT_EQ(be32toh(wc[1].imm_data), 0xCAFE0002u);
  EXPECT_EQ(std::memcmp(b.buf.data() + 30000, a.buf.data(), 3000), 0);
  EXPECT_EQ(std::memcmp(b.buf.data() + 50000, a.buf.data(), 64), 0);

  // FETCH_ADD then COMPARE_SWAP on an 8-byte word at b.
  uint64_t* word = reinterpret_cast<uint64_t*>(b.buf.data() + 60000);
  *word = 1000;
  s = sge(a, 60000, 8);
  wr = {};
  wr.wr_id = 31;
  wr.sg_list = &s;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
  wr.wr.atomic.remote_addr = reinterpret_cast<uintptr_t>(word);
  wr.wr.atomic.rkey = b.mr->rkey;
  wr.wr.atomic.compare_add = 5;
  ASSERT_EQ(ibv_post_send(a.qp, &wr, &bad), 0);
  wc = poll_n(a.cq, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].opcode, IBV_WC_FETCH_ADD);
  uint64_t got = 0;
  std::memcpy(&got, a.buf.data() + 60000, 8);
  EXPECT_EQ(got, 1000u);
  EXPECT_EQ(*word, 1005u);
  wr.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
  wr.wr.atomic.compare_add = 1005;
  wr.wr.atomic.swap = 77;
  ASSERT_EQ(ibv_post_send(a.qp, &wr, &bad), 0);
  wc = poll_n(a.cq, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].opcode, IBV_WC_COMP_SWAP);
  EXPECT_EQ(*word, 77u);
}

// ibv_wr_* (the extended API perftest uses by default): one batch, one doorbell, inline data
// included; unsignalled requests complete silently.
TEST_F(Verbs, ExtendedWorkRequestsAndUnsignalled) {
  connect_pair(/*sig_all=*/0);
  Side& a = side_[0];
  Side& b = side_[1];
  std::iota(a.buf.begin(), a.buf.begin() + 4096, uint8_t{1});
  ibv_qp_ex* x = ibv_qp_to_qp_ex(a.qp);
  ASSERT_NE(x, nullptr);
  const uintptr_t rb = reinterpret_cast<uintptr_t>(b.buf.data());
  ibv_wr_start(x);
  for (int i = 0; i < 3; ++i) {
    x->wr_id = 40 + i;
    x->wr_flags = 0;  // unsignalled
    ibv_wr_rdma_write(x, b.mr->rkey, rb + 1000 * i);
    ibv_wr_set_sge(x, a.mr->lkey, reinterpret_cast<uintptr_t>(a.buf.data() + 100 * i), 500);
  }
  char text[] = "inline bytes through ibv_wr_set_inline_data";
  x->wr_id = 43;
  x->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_rdma_write(x, b.mr->rkey, rb + 8000);
  ibv_wr_set_inline_data(x, text, sizeof text);
  std::memset(text, 0, sizeof text);  // the buffer is ours again once the call returned
  ASSERT_EQ(ibv_wr_complete(x), 0);
  // Completions of a send queue come in posting order: a completion for any of the three
  // unsignalled writes would come first.
  const auto wc = poll_n(a.cq, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].wr_id, 43u);
  ibv_wc extra{};
  EXPECT_EQ(ibv_poll_cq(a.cq, 1, &extra), 0);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(std::memcmp(b.buf.data() + 1000 * i, a.buf.data() + 100 * i, 500), 0) << i;
  EXPECT_STREQ(reinterpret_cast<const char*>(b.buf.data() + 8000),
               "inline bytes through ibv_wr_set_inline_data");
}

TEST_F(Verbs, CompletionChannelWakesPollAndNonBlockingReturnsEagain) {
  ibv_comp_channel* ch = ibv_create_comp_channel(side_[1].ctx);
  ASSERT_NE(ch, nullptr);
  ibv_cq* rcq = ibv_create_cq(side_[1].ctx, kDepth, this, ch, 0);
  ASSERT_NE(rcq, nullptr);
  EXPECT_EQ(ibv_destroy_comp_channel(ch), EBUSY);  // a CQ still uses it
  Side& a = side_[0];
  Side& b = side_[1];
  a.qp = make_qp(a);
  ibv_qp_init_attr qa{};
  qa.send_cq = b.cq;
  qa.recv_cq = rcq;
  qa.qp_type = IBV_QPT_RC;
  qa.cap.max_send_wr = qa.cap.max_recv_wr = 8;
  qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
  b.qp = ibv_create_qp(b.pd, &qa);
  ASSERT_NE(b.qp, nullptr);
  connect(a, b);
  connect(b, a);
  ASSERT_EQ(fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK), 0);
  ibv_cq* ev_cq = nullptr;
  void* ev_ctx = nullptr;
  EXPECT_EQ(ibv_get_cq_event(ch, &ev_cq, &ev_ctx), -1);
  EXPECT_EQ(errno, EAGAIN);
  ibv_sge rs = sge(b, 0, 64);
  ibv_recv_wr rw{};
  ibv_recv_wr* rbad = nullptr;
  rw.wr_id = 5;
  rw.sg_list = &rs;
  rw.num_sge = 1;
  ASSERT_EQ(ibv_post_recv(b.qp, &rw, &rbad), 0);
  ASSERT_EQ(ibv_req_notify_cq(rcq, 0), 0);
  ibv_sge s = sge(a, 0, 64);
  ibv_send_wr wr{};
  ibv_send_wr* bad = nullptr;
  wr.sg_list = &s;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  ASSERT_EQ(ibv_post_send(a.qp, &wr, &bad), 0);
  // Nobody polls b's CQ: the progress thread must drive the engine, and the channel's fd must
  // become readable for poll(2).
  pollfd p{ch->fd, POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 10000), 1);
  ASSERT_EQ(ibv_get_cq_event(ch, &ev_cq, &ev_ctx), 0);
  EXPECT_EQ(ev_cq, rcq);
  EXPECT_EQ(ev_ctx, this);
  ibv_ack_cq_events(rcq, 1);
  const auto wc = poll_n(rcq, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].wr_id, 5u);
  EXPECT_EQ(poll_n(a.cq, 1).size(), 1u);
  EXPECT_EQ(ibv_destroy_cq(rcq), EBUSY);  // b's QP still completes into it
  ASSERT_EQ(ibv_destroy_qp(b.qp), 0);
  b.qp = nullptr;
  EXPECT_EQ(ibv_destroy_cq(rcq), 0);
  EXPECT_EQ(ibv_destroy_comp_channel(ch), 0);
}

TEST_F(Verbs, BadArgumentsGetTheDocumentedErrno) {
  Side& a = side_[0];
  ibv_qp_init_attr qa{};
  qa.send_cq = qa.recv_cq = a.cq;
  qa.cap.max_send_wr = qa.cap.max_recv_wr = 2;
  qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
  qa.qp_type = IBV_QPT_UC;
  errno = 0;
  EXPECT_EQ(ibv_create_qp(a.pd, &qa), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
  qa.qp_type = IBV_QPT_RC;
  qa.cap.max_send_sge = 1000;
  errno = 0;
  EXPECT_EQ(ibv_create_qp(a.pd, &qa), nullptr);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(ibv_reg_mr(a.pd, a.buf.data(), 64, IBV_ACCESS_REMOTE_WRITE), nullptr);
  EXPECT_EQ(errno, EINVAL);  // remote write needs local write
  errno = 0;
  EXPECT_EQ(ibv_reg_mr_iova(a.pd, a.buf.data(), 64, 4096, IBV_ACCESS_LOCAL_WRITE), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
  errno = 0;
  EXPECT_EQ(ibv_create_cq(a.ctx, 0, nullptr, nullptr, 0), nullptr);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(ibv_dealloc_pd(a.pd), EBUSY);  // the MR is registered in it

  a.qp = make_qp(a);
  ASSERT_NE(a.qp, nullptr);
  EXPECT_EQ(ibv_destroy_cq(a.cq), EBUSY);
  ibv_qp_attr at{};
  at.qp_state = IBV_QPS_RTR;
  EXPECT_EQ(ibv_modify_qp(a.qp, &at, IBV_QP_STATE), EINVAL);  // RESET -> RTR
  at.qp_state = IBV_QPS_INIT;
  at.pkey_index = 3;
  EXPECT_EQ(ibv_modify_qp(a.qp, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX), EINVAL);
  ibv_recv_wr rw{};
  ibv_recv_wr* rbad = nullptr;
  EXPECT_EQ(ibv_post_recv(a.qp, &rw, &rbad), EINVAL);  // no receives in RESET
  EXPECT_EQ(rbad, &rw);
  at = {};
  at.qp_state = IBV_QPS_INIT;
  at.port_num = 1;
  at.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
  ASSERT_EQ(ibv_modify_qp(a.qp, &at, IBV_QP_STATE | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS), 0);
  ibv_qp_attr q{};
  ibv_qp_init_attr qi{};
  ASSERT_EQ(ibv_query_qp(a.qp, &q, IBV_QP_STATE, &qi), 0);
  EXPECT_EQ(q.qp_state, IBV_QPS_INIT);
  EXPECT_EQ(q.qp_access_flags, static_cast<unsigned>(IBV_ACCESS_REMOTE_WRITE));
  ibv_send_wr wr{};
  ibv_send_wr* bad = nullptr;
  wr.opcode = IBV_WR_SEND;
  EXPECT_EQ(ibv_post_send(a.qp, &wr, &bad), EINVAL);  // not RTS
  EXPECT_EQ(bad, &wr);
  // Receives beyond the queue's depth: ENOMEM at the first one that does not fit.
  ibv_sge s = sge(a, 0, 8);
  std::vector<ibv_recv_wr> rws(kDepth + 1);
  for (size_t i = 0; i < rws.size(); ++i) {
    rws[i].wr_id = i;
    rws[i].sg_list = &s;
    rws[i].num_sge = 1;
    rws[i].next = i + 1 < rws.size() ? &rws[i + 1] : nullptr;
  }
  EXPECT_EQ(ibv_post_recv(a.qp, rws.data(), &rbad), ENOMEM);
  EXPECT_EQ(rbad, &rws[kDepth]);
}

// A type 1 window: bound, written through by the peer; a zero-length bind then invalidates it
// (IBTA §10.6.7.2.1) and a WRITE through it fails with a remote access error.
TEST_F(Verbs, Type1WindowBoundThenInvalidatedByAZeroLengthBind) {
  connect_pair();
  Side& a = side_[0];
  Side& b = side_[1];
  ibv_mw* mw = ibv_alloc_mw(b.pd, IBV_MW_TYPE_1);
  ASSERT_NE(mw, nullptr) << "errno " << errno;
  ibv_mw_bind mb{};
  mb.wr_id = 7;
  mb.send_flags = IBV_SEND_SIGNALED;
  mb.bind_info.mr = b.mr;
  mb.bind_info.addr = reinterpret_cast<uintptr_t>(b.buf.data() + 4096);
  mb.bind_info.length = 4096;
  mb.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_WRITE;
  ASSERT_EQ(ibv_bind_mw(b.qp, mw, &mb), 0);
  auto wc = poll_n(b.cq, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc[0].opcode, IBV_WC_BIND_MW);
  const uint32_t bound_rkey = mw->rkey;
  std::iota(a.buf.begin(), a.buf.begin() + 256, uint8_t{9});
  ibv_sge s = sge(a, 0, 256);
  ibv_send_wr w{};
  ibv_send_wr* bad = nullptr;
  w.wr_id = 8;
  w.sg_list = &s;
  w.num_sge = 1;
  w.opcode = IBV_WR_RDMA_WRITE;
  w.wr.rdma.remote_addr = mb.bind_info.addr + 100;
  w.wr.rdma.rkey = bound_rkey;
  ASSERT_EQ(ibv_post_send(a.qp, &w, &bad), 0);
  wc = poll_n(a.cq, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(std::memcmp(b.buf.data() + 4096 + 100, a.buf.data(), 256), 0);

  mb.wr_id = 9;
  mb.bind_info.length = 0;  // invalidates
  ASSERT_EQ(ibv_bind_mw(b.qp, mw, &mb), 0);
  wc = poll_n(b.cq, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc[0].status);
  EXPECT_EQ(wc[0].opcode, IBV_WC_BIND_MW);
  w.wr_id = 10;
  ASSERT_EQ(ibv_post_send(a.qp, &w, &bad), 0);  // the old rkey
  wc = poll_n(a.cq, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(ibv_dealloc_mw(mw), 0);
}

// A WRITE with a wrong rkey fails at the responder: the requester completes it with
// IBV_WC_REM_ACCESS_ERR, and what was posted after it is flushed.
TEST_F(Verbs, RemoteAccessErrorThenFlush) {
  connect_pair();
  Side& a = side_[0];
  Side& b = side_[1];
  ibv_sge s = sge(a, 0, 64);
  ibv_send_wr wr[2]{};
  ibv_send_wr* bad = nullptr;
  for (int i = 0; i < 2; ++i) {
    wr[i].wr_id = 70 + i;
    wr[i].sg_list = &s;
    wr[i].num_sge = 1;
    wr[i].opcode = IBV_WR_RDMA_WRITE;
    wr[i].wr.rdma.remote_addr = reinterpret_cast<uintptr_t>(b.buf.data());
    wr[i].wr.rdma.rkey = b.mr->rkey ^ 0x5a5a00;
    wr[i].next = i == 0 ? &wr[1] : nullptr;
  }
  ASSERT_EQ(ibv_post_send(a.qp, wr, &bad), 0);
  const auto wc = poll_n(a.cq, 2);
  ASSERT_EQ(wc.size(), 2u);
  EXPECT_EQ(wc[0].wr_id, 70u);
  EXPECT_EQ(wc[0].status, IBV_WC_REM_ACCESS_ERR) << ibv_wc_status_str(wc[0].status);
  EXPECT_EQ(wc[1].wr_id, 71u);
  EXPECT_EQ(wc[1].status, IBV_WC_WR_FLUSH_ERR);
  EXPECT_STREQ(ibv_wc_status_str(IBV_WC_WR_FLUSH_ERR), "Work Request Flushed Error");
}

// The completion statuses' text is rdma-core's (libibverbs enum_strs.c) and is the public
// API's (urnic::describe, which urnic-perf prints): one table, so the two cannot disagree
// (issue 43: they did, "operation aborted" against "aborted error").
TEST(VerbsStrings, CompletionStatusTextIsRdmaCoresAndTheApis) {
  EXPECT_STREQ(ibv_wc_status_str(IBV_WC_SUCCESS), "success");
  EXPECT_STREQ(ibv_wc_status_str(IBV_WC_REM_ABORT_ERR), "aborted error");
  EXPECT_STREQ(ibv_wc_status_str(IBV_WC_GENERAL_ERR), "general error");
  EXPECT_STREQ(ibv_wc_status_str(IBV_WC_TM_ERR), "TM error");
  EXPECT_STREQ(ibv_wc_status_str(static_cast<ibv_wc_status>(999)), "unknown");
  for (int s = IBV_WC_SUCCESS; s <= IBV_WC_GENERAL_ERR; ++s)
    EXPECT_STREQ(ibv_wc_status_str(static_cast<ibv_wc_status>(s)),
                 urnic::describe(static_cast<urnic::WcStatus>(s)))
        << s;
  EXPECT_STREQ(urnic::to_string(urnic::WcStatus::kRemAbortErr), "REM_ABORT_ERR");
  EXPECT_STREQ(urnic::describe(static_cast<urnic::WcStatus>(22)), "unknown");
}

// UD through verbs (issue 16 item 5): RESET -> INIT (Q_Key) -> RTR -> RTS, an address handle from
// the peer's GID, SEND and SEND with immediate (one through ibv_wr_*), the GRH in front of the
// payload, the sender's QPN in the completion, and a reply through ibv_create_ah_from_wc.
TEST_F(Verbs, DatagramsWithAddressHandles) {
  constexpr uint32_t kQkey = 0x11111111;
  for (Side& s : side_) {
    ibv_qp_init_attr_ex a{};
    a.send_cq = a.recv_cq = s.cq;
    a.qp_type = IBV_QPT_UD;
    a.sq_sig_all = 1;
    a.cap.max_send_wr = a.cap.max_recv_wr = kDepth;
    a.cap.max_send_sge = a.cap.max_recv_sge = 2;
    a.cap.max_inline_data = 64;
    a.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    a.pd = s.pd;
    a.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE;
    EXPECT_EQ(ibv_create_qp_ex(s.ctx, &a), nullptr);  // no RDMA on UD
    EXPECT_EQ(errno, EOPNOTSUPP);
    a.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM;
    s.qp = ibv_create_qp_ex(s.ctx, &a);
    ASSERT_NE(s.qp, nullptr) << "errno " << errno;
    ibv_qp_attr m{};
    m.qp_state = IBV_QPS_INIT;
    m.port_num = 1;
    m.qkey = kQkey;
    // RC's RESET -> INIT mask is not UD's: the Q_Key is required, access flags are not UD's.
    EXPECT_EQ(ibv_modify_qp(s.qp, &m, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT), EINVAL);
    ASSERT_EQ(ibv_modify_qp(s.qp, &m, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY),
              0);
    m.qp_state = IBV_QPS_RTR;
    ASSERT_EQ(ibv_modify_qp(s.qp, &m, IBV_QP_STATE), 0);
    m.qp_state = IBV_QPS_RTS;
    m.sq_psn = 7;
    ASSERT_EQ(ibv_modify_qp(s.qp, &m, IBV_QP_STATE | IBV_QP_SQ_PSN), 0);
    ibv_qp_attr q{};
    ibv_qp_init_attr qi{};
    ASSERT_EQ(ibv_query_qp(s.qp, &q, IBV_QP_QKEY, &qi), 0);
    EXPECT_EQ(q.qkey, kQkey);
    EXPECT_EQ(qi.qp_type, IBV_QPT_UD);
  }
  Side& a = side_[0];
  Side& b = side_[1];
  ibv_ah_attr aa{};
  aa.is_global = 1;
  aa.port_num = 1;
  aa.grh.sgid_index = 1;
  aa.grh.hop_limit = 64;
  ASSERT_EQ(ibv_query_gid(b.ctx, 1, 1, &aa.grh.dgid), 0);
  ibv_ah* to_b = ibv_create_ah(a.pd, &aa);
  ASSERT_NE(to_b, nullptr) << "errno " << errno;
  constexpr uint32_t kLen = 300, kSlot = 2048;
  for (uint32_t i = 0; i < 2; ++i) {
    ibv_sge sg{reinterpret_cast<uintptr_t>(b.buf.data() + i * kSlot), kSlot, b.mr->lkey};
    ibv_recv_wr r{};
    r.wr_id = 10 + i;
    r.sg_list = &sg;
    r.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    ASSERT_EQ(ibv_post_recv(b.qp, &r, &bad), 0);
  }
  std::iota(a.buf.begin(), a.buf.begin() + kLen, uint8_t{3});
  ibv_sge sg{reinterpret_cast<uintptr_t>(a.buf.data()), kLen, a.mr->lkey};
  ibv_send_wr w{};
  w.wr_id = 1;
  w.opcode = IBV_WR_SEND;
  w.sg_list = &sg;
  w.num_sge = 1;
  w.wr.ud = {to_b, b.qp->qp_num, kQkey};
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(a.qp, &w, &bad), 0);
  ibv_qp_ex* x = ibv_qp_to_qp_ex(a.qp);
  ibv_wr_start(x);
  x->wr_id = 2;
  ibv_wr_send_imm(x, htobe32(0xFEEDu));
  ibv_wr_set_ud_addr(x, to_b, b.qp->qp_num, kQkey);
  ibv_wr_set_sge(x, a.mr->lkey, reinterpret_cast<uintptr_t>(a.buf.data()), kLen);
  ASSERT_EQ(ibv_wr_complete(x), 0);
  const auto sent = poll_n(a.cq, 2);
  ASSERT_EQ(sent.size(), 2u);
  for (const ibv_wc& c : sent) {
    EXPECT_EQ(c.status, IBV_WC_SUCCESS);
    EXPECT_EQ(c.opcode, IBV_WC_SEND);
  }
  const auto got = poll_n(b.cq, 2);
  ASSERT_EQ(got.size(), 2u);
  for (uint32_t i = 0; i < 2; ++i) {
    const ibv_wc& c = got[i];
    ASSERT_EQ(c.status, IBV_WC_SUCCESS) << i;
    EXPECT_EQ(c.wr_id, 10u + i);
    EXPECT_EQ(c.opcode, IBV_WC_RECV);
    EXPECT_EQ(c.byte_len, 40 + kLen);
    EXPECT_EQ(c.src_qp, a.qp->qp_num);
    EXPECT_TRUE(c.wc_flags & IBV_WC_GRH);
    EXPECT_EQ((c.wc_flags & IBV_WC_WITH_IMM) != 0, i == 1);
    if (i == 1) {
      EXPECT_EQ(be32toh(c.imm_data), 0xFEEDu);
    }
    EXPECT_EQ(0, std::memcmp(b.buf.data() + i * kSlot + 40, a.buf.data(), kLen)) << i;
  }
  // ibv_resize_cq: the CQ keeps its completions and grows (cqe follows); 0 is EINVAL.
  EXPECT_EQ(ibv_resize_cq(a.cq, 0), EINVAL);
  ASSERT_EQ(ibv_resize_cq(a.cq, 8 * kDepth), 0);
  EXPECT_EQ(a.cq->cqe, 8 * kDepth);
  // The reply's address from the first datagram's GRH: b's handle to a, a's GID as destination.
  ibv_wc first = got[0];
  ibv_ah_attr back{};
  ASSERT_EQ(ibv_init_ah_from_wc(b.ctx, 1, &first, reinterpret_cast<ibv_grh*>(b.buf.data()), &back),
            0);
  ibv_gid ga{};
  ASSERT_EQ(ibv_query_gid(a.ctx, 1, 1, &ga), 0);
  EXPECT_EQ(0, std::memcmp(back.grh.dgid.raw, ga.raw, 16));
  EXPECT_EQ(back.grh.sgid_index, 1);
  ibv_ah* to_a = ibv_create_ah_from_wc(b.pd, &first, reinterpret_cast<ibv_grh*>(b.buf.data()), 1);
  ASSERT_NE(to_a, nullptr) << "errno " << errno;
  ibv_sge rs{reinterpret_cast<uintptr_t>(a.buf.data() + kSlot), kSlot, a.mr->lkey};
  ibv_recv_wr r{};
  r.wr_id = 20;
  r.sg_list = &rs;
  r.num_sge = 1;
  ibv_recv_wr* rbad = nullptr;
  ASSERT_EQ(ibv_post_recv(a.qp, &r, &rbad), 0);
  char msg[] = "reply";
  ibv_sge ms{reinterpret_cast<uintptr_t>(msg), sizeof msg, 0};
  w = {};
  w.wr_id = 3;
  w.opcode = IBV_WR_SEND;
  w.send_flags = IBV_SEND_INLINE;
  w.sg_list = &ms;
  w.num_sge = 1;
  w.wr.ud = {to_a, first.src_qp, kQkey};
  ASSERT_EQ(ibv_post_send(b.qp, &w, &bad), 0);
  const auto reply = poll_n(a.cq, 1);
  ASSERT_EQ(reply.size(), 1u);
  EXPECT_EQ(reply[0].wr_id, 20u);
  EXPECT_EQ(reply[0].byte_len, 40 + sizeof msg);
  EXPECT_EQ(0, std::memcmp(a.buf.data() + kSlot + 40, msg, sizeof msg));
  ASSERT_EQ(poll_n(b.cq, 1).size(), 1u);
  // RDMA on a UD QP, and a datagram without a handle: EINVAL, nothing posted.
  w.opcode = IBV_WR_RDMA_WRITE;
  EXPECT_EQ(ibv_post_send(b.qp, &w, &bad), EINVAL);
  w.opcode = IBV_WR_SEND;
  w.wr.ud.ah = nullptr;
  EXPECT_EQ(ibv_post_send(b.qp, &w, &bad), EINVAL);
  EXPECT_EQ(ibv_destroy_ah(to_a), 0);
  EXPECT_EQ(ibv_destroy_ah(to_b), 0);
}

}  // namespace

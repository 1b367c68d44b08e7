// urnic's librdmacm through its own API, in one process on the in-memory device pair (urnic0
// 198.18.100.1, urnic1 198.18.100.2), for what real programs rely on (issue 40): the port of a
// bind to port 0 picked at the bind (qperf sends it to its client before rdma_listen), the
// loopback address taken as the wildcard (libfabric's verbs provider binds "localhost"), and
// rdma_getaddrinfo with no name, only the hints' addresses (libfabric's client).
#include <arpa/inet.h>
#include <rdma/rdma_cma.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <numeric>
#include <tuple>
#include <vector>

#include "verbs_helpers.h"

namespace {

sockaddr_in v4(const char* ip, uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  EXPECT_EQ(inet_pton(AF_INET, ip, &a.sin_addr), 1);
  return a;
}

sockaddr* sa(sockaddr_in& a) { return reinterpret_cast<sockaddr*>(&a); }

class RdmaCm : public ::testing::Test {
 protected:
  void SetUp() override {
    ch_ = rdma_create_event_channel();
    ASSERT_NE(ch_, nullptr);
  }
  void TearDown() override {
    for (rdma_cm_id* id : ids_) EXPECT_EQ(rdma_destroy_id(id), 0);
    rdma_destroy_event_channel(ch_);
  }
  rdma_cm_id* make_id() {
    rdma_cm_id* id = nullptr;
    EXPECT_EQ(rdma_create_id(ch_, &id, nullptr, RDMA_PS_TCP), 0);
    if (id != nullptr) ids_.push_back(id);
    return id;
  }
  rdma_event_channel* ch_ = nullptr;
  std::vector<rdma_cm_id*> ids_;
};

TEST_F(RdmaCm, BindToPortZeroPicksThePortAtTheBind) {
  rdma_cm_id* a = make_id();
  rdma_cm_id* b = make_id();
  ASSERT_TRUE(a && b);
  sockaddr_in any = v4("0.0.0.0", 0);
  ASSERT_EQ(rdma_bind_addr(a, sa(any)), 0);
  ASSERT_EQ(rdma_bind_addr(b, sa(any)), 0);
  const uint16_t pa = ntohs(rdma_get_src_port(a)), pb = ntohs(rdma_get_src_port(b));
  EXPECT_GE(pa, 49152);  // the CM's ephemeral range
  EXPECT_GE(pb, 49152);
  EXPECT_NE(pa, pb);
  EXPECT_EQ(a->verbs, nullptr);  // a wildcard bind names no device yet
  // Listening keeps the port the bind announced.
  ASSERT_EQ(rdma_listen(a, 4), 0);
  EXPECT_EQ(ntohs(rdma_get_src_port(a)), pa);
  // Bound once: rdma_cm refuses a second bind.
  errno = 0;
  EXPECT_EQ(rdma_bind_addr(b, sa(any)), -1);
  EXPECT_EQ(errno, EINVAL);
  // A named address: its device, and still a port.
  rdma_cm_id* c = make_id();
  sockaddr_in own = v4("198.18.100.2", 0);
  ASSERT_EQ(rdma_bind_addr(c, sa(own)), 0);
  EXPECT_NE(c->verbs, nullptr);
  EXPECT_GE(ntohs(rdma_get_src_port(c)), 49152);
  // An address no device has.
  rdma_cm_id* d = make_id();
  sockaddr_in other = v4("192.0.2.77", 0);
  errno = 0;
  EXPECT_EQ(rdma_bind_addr(d, sa(other)), -1);
  EXPECT_EQ(errno, EADDRNOTAVAIL);
}

TEST_F(RdmaCm, ListenWithoutBindTakesTheWildcardAndAPort) {
  rdma_cm_id* a = make_id();
  ASSERT_NE(a, nullptr);
  ASSERT_EQ(rdma_listen(a, 4), 0);
  EXPECT_GE(ntohs(rdma_get_src_port(a)), 49152);
  EXPECT_EQ(rdma_get_local_addr(a)->sa_family, AF_INET);
}

TEST_F(RdmaCm, LoopbackIsTakenAsTheWildcard) {
  rdma_cm_id* a = make_id();
  ASSERT_NE(a, nullptr);
  sockaddr_in lo = v4("127.0.0.1", 0);
  ASSERT_EQ(rdma_bind_addr(a, sa(lo)), 0);
  EXPECT_EQ(a->verbs, nullptr);
  const auto* src = reinterpret_cast<const sockaddr_in*>(rdma_get_local_addr(a));
  EXPECT_EQ(src->sin_addr.s_addr, htonl(INADDR_LOOPBACK));  // kept as given
  EXPECT_GE(ntohs(src->sin_port), 49152);
  ASSERT_EQ(rdma_listen(a, 4), 0);
}

TEST_F(RdmaCm, GetaddrinfoFromTheHintsAlone) {
  sockaddr_in dst = v4("198.18.100.2", 7471);
  rdma_addrinfo hints{};
  hints.ai_port_space = RDMA_PS_TCP;
  hints.ai_dst_addr = sa(dst);
  hints.ai_dst_len = sizeof dst;
  rdma_addrinfo* res = nullptr;
  ASSERT_EQ(rdma_getaddrinfo(nullptr, nullptr, &hints, &res), 0);
  ASSERT_NE(res, nullptr);
  EXPECT_EQ(res->ai_family, AF_INET);
  EXPECT_EQ(res->ai_port_space, RDMA_PS_TCP);
  ASSERT_EQ(res->ai_dst_len, sizeof dst);
  EXPECT_EQ(std::memcmp(res->ai_dst_addr, &dst, sizeof dst), 0);
  EXPECT_EQ(res->ai_next, nullptr);
  rdma_freeaddrinfo(res);
  // Neither a name nor an address: EINVAL, as librdmacm.
  rdma_addrinfo none{};
  errno = 0;
  EXPECT_NE(rdma_getaddrinfo(nullptr, nullptr, &none, &res), 0);
  EXPECT_EQ(errno, EINVAL);
}

// A connection to the device's own address (issue 40): listener and client on urnic0, through
// the CM on QP1 (its MADs and the data looped back by the engine); a SEND each way, data checked.
TEST_F(RdmaCm, ConnectionToTheDevicesOwnAddress) {
  rdma_cm_id* lid = make_id();
  rdma_cm_id* cid = make_id();
  ASSERT_TRUE(lid && cid);
  sockaddr_in own = v4("198.18.100.1", 0);
  ASSERT_EQ(rdma_bind_addr(lid, sa(own)), 0);
  ASSERT_EQ(rdma_listen(lid, 4), 0);
  sockaddr_in dst = v4("198.18.100.1", ntohs(rdma_get_src_port(lid)));
  ASSERT_EQ(rdma_resolve_addr(cid, nullptr, sa(dst), 2000), 0);
  rdma_cm_id* sid = nullptr;  // the passive side's id, from the connection request
  ibv_qp_init_attr qa{};
  qa.qp_type = IBV_QPT_RC;
  qa.cap.max_send_wr = qa.cap.max_recv_wr = 4;
  qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
  std::vector<uint8_t> cbuf(4096), sbuf(4096);
  std::iota(cbuf.begin(), cbuf.begin() + 1000, uint8_t{5});
  std::iota(sbuf.begin(), sbuf.begin() + 1000, uint8_t{77});
  ibv_mr* cmr = nullptr;
  ibv_mr* smr = nullptr;
  int established = 0;
  // Drives both ends from the one channel until both are established (or 10 s pass).
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (established < 2 && std::chrono::steady_clock::now() < end) {
    rdma_cm_event* e = nullptr;
    ASSERT_EQ(rdma_get_cm_event(ch_, &e), 0);
    const rdma_cm_event_type t = e->event;
    rdma_cm_id* id = e->id;
    ASSERT_EQ(rdma_ack_cm_event(e), 0);
    switch (t) {
      case RDMA_CM_EVENT_ADDR_RESOLVED:
        ASSERT_EQ(rdma_resolve_route(cid, 2000), 0);
        break;
      case RDMA_CM_EVENT_ROUTE_RESOLVED: {
        ibv_qp_init_attr ca = qa;  // rdma_create_qp fills in the CQs it makes
        ASSERT_EQ(rdma_create_qp(cid, nullptr, &ca), 0) << "errno " << errno;
        cmr = ibv_reg_mr(cid->pd, cbuf.data(), cbuf.size(), IBV_ACCESS_LOCAL_WRITE);
        ASSERT_NE(cmr, nullptr);
        ibv_sge g{reinterpret_cast<uintptr_t>(cbuf.data() + 2048), 1000, cmr->lkey};
        ibv_recv_wr r{};
        ibv_recv_wr* rb = nullptr;
        r.sg_list = &g;
        r.num_sge = 1;
        ASSERT_EQ(ibv_post_recv(cid->qp, &r, &rb), 0);
        rdma_conn_param cp{};
        cp.responder_resources = cp.initiator_depth = 1;
        cp.retry_count = 7;
        cp.rnr_retry_count = 7;
        ASSERT_EQ(rdma_connect(cid, &cp), 0) << "errno " << errno;
        break;
      }
      case RDMA_CM_EVENT_CONNECT_REQUEST: {
        sid = id;
        ibv_qp_init_attr ca = qa;
        ASSERT_EQ(rdma_create_qp(sid, nullptr, &ca), 0) << "errno " << errno;
        smr = ibv_reg_mr(sid->pd, sbuf.data(), sbuf.size(), IBV_ACCESS_LOCAL_WRITE);
        ASSERT_NE(smr, nullptr);
        ibv_sge g{reinterpret_cast<uintptr_t>(sbuf.data() + 2048), 1000, smr->lkey};
        ibv_recv_wr r{};
        ibv_recv_wr* rb = nullptr;
        r.sg_list = &g;
        r.num_sge = 1;
        ASSERT_EQ(ibv_post_recv(sid->qp, &r, &rb), 0);
        rdma_conn_param cp{};
        cp.responder_resources = cp.initiator_depth = 1;
        ASSERT_EQ(rdma_accept(sid, &cp), 0) << "errno " << errno;
        break;
      }
      case RDMA_CM_EVENT_ESTABLISHED:
        ++established;
        break;
      default:
        FAIL() << "unexpected event " << rdma_event_str(t);
    }
  }
  ASSERT_EQ(established, 2);
  ASSERT_NE(sid, nullptr);
  // A SEND each way.
  for (auto [from, mr, buf] : {std::tuple{cid, cmr, &cbuf}, std::tuple{sid, smr, &sbuf}}) {
    ibv_sge g{reinterpret_cast<uintptr_t>(buf->data()), 1000, mr->lkey};
    ibv_send_wr w{};
    ibv_send_wr* bad = nullptr;
    w.sg_list = &g;
    w.num_sge = 1;
    w.opcode = IBV_WR_SEND;
    w.send_flags = IBV_SEND_SIGNALED;
    ASSERT_EQ(ibv_post_send(from->qp, &w, &bad), 0);
  }
  for (rdma_cm_id* id : {cid, sid}) {
    // One send completion and one receive completion on each end (rdma_create_qp made a CQ
    // for each queue).
    for (ibv_cq* cq : {id->send_cq, id->recv_cq}) {
      ASSERT_NE(cq, nullptr);
      const auto wc = verbs_test::poll_n(cq, 1);
      ASSERT_EQ(wc.size(), 1u);
      EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
    }
  }
  EXPECT_EQ(std::memcmp(sbuf.data() + 2048, cbuf.data(), 1000), 0);
  EXPECT_EQ(std::memcmp(cbuf.data() + 2048, sbuf.data(), 1000), 0);
  ASSERT_EQ(rdma_disconnect(cid), 0);
  rdma_destroy_qp(cid);
  rdma_destroy_qp(sid);
  EXPECT_EQ(ibv_dereg_mr(cmr), 0);
  EXPECT_EQ(ibv_dereg_mr(smr), 0);
  EXPECT_EQ(rdma_destroy_id(sid), 0);
}

}  // namespace

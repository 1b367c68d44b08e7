// urnic's librdmacm through its own API, in one process on the in-memory device pair (urnic0
// 198.18.100.1, urnic1 198.18.100.2), for what real programs rely on (issue 40): the port of a
// bind to port 0 picked at the bind (qperf sends it to its client before rdma_listen), the
// loopback address taken as the wildcard (libfabric's verbs provider binds "localhost"), and
// rdma_getaddrinfo with no name, only the hints' addresses (libfabric's client).
#include <arpa/inet.h>
#include <rdma/rdma_cma.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>

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

}  // namespace

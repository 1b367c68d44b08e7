// SIDR (IBTA §12.11) through the public Connector and Listener (include/urnic/connector.h,
// listener.h) between two adapters of the public API over a net_ring pair
// (tests/api/api_fixture.h), the engine on lcore 1: resolve_datagram reaches a datagram
// listener, whose connector sees the private data byte for byte and the requester's address;
// accept_datagram's QPN, Q_Key and private data reach the active side byte for byte; reject,
// no listener, a paused listener and a TCP-only port give kConnectionRefused; Q_Key 0 means
// rdma_cm's default; a close while the answer is outstanding gives kCancelled; bad arguments.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>

#include <atomic>
#include <cstring>
#include <vector>

#include "../api/api_fixture.h"
#include "urnic/connector.h"
#include "urnic/listener.h"

namespace urnic::test {
namespace {

// A datagram listener's consumer: keeps the connectors its connect events hand over.
struct DatagramConsumer {
  std::atomic<int> events{0};
  std::atomic<Connector*> last{nullptr};
  static void on_connect(void* ctx, Connector* c) {
    auto* self = static_cast<DatagramConsumer*>(ctx);
    self->last.store(c);
    self->events.fetch_add(1);
  }
  // The next connector (owned by the caller from then on), or null if none came.
  Connector* take() {
    if (!eventually([&] { return last.load() != nullptr; })) return nullptr;
    return last.exchange(nullptr);
  }
};

sockaddr_in address(Connector& c, bool peer) {
  sockaddr_in s{};
  uint32_t len = sizeof(s);
  auto* sa_ = reinterpret_cast<sockaddr*>(&s);
  EXPECT_EQ(peer ? c.get_peer_address(sa_, &len) : c.get_local_address(sa_, &len),
            Status::kSuccess);
  EXPECT_EQ(len, sizeof(sockaddr_in));
  return s;
}

std::vector<uint8_t> connection_data(Connector& c) {
  uint32_t len = 0, in = 9, out = 9;
  EXPECT_EQ(c.get_connection_data(nullptr, nullptr, nullptr, &len), Status::kSuccess);
  std::vector<uint8_t> v(len);
  EXPECT_EQ(c.get_connection_data(&in, &out, v.data(), &len), Status::kSuccess);
  EXPECT_EQ(in, 0u);  // no connection: no read limits
  EXPECT_EQ(out, 0u);
  return v;
}

class CmSidr : public EalTest {
 protected:
  static constexpr uint16_t kPort = 7471;  // udaddy's default port
  void SetUp() override {
    static int n = 0;
    EngineConfig ec;
    ec.idle_yield_after = 256;
    p = std::make_unique<ApiPair>("cmsidr" + std::to_string(n++), ec);
    ASSERT_TRUE(p->engine().launch(1));
    ASSERT_EQ(create_listener(*p->b.adapter, &DatagramConsumer::on_connect, &consumer, nullptr,
                              nullptr, &listener),
              Status::kSuccess);
    ASSERT_EQ(listener->listen_datagram(sa(v4(0, kPort)), sizeof(sockaddr_in), nullptr, nullptr),
              Status::kSuccess);
  }
  void TearDown() override {
    listener.reset();
    p.reset();
  }
  Handle<Connector> connector() {
    Handle<Connector> c;
    EXPECT_EQ(create_connector(*p->a.adapter, nullptr, nullptr, &c), Status::kSuccess);
    return c;
  }
  // resolve_datagram to B's `port` with `pdata`; kPending expected.
  void resolve(Connector& c, uint16_t port, const std::vector<uint8_t>& pdata, Completion* done) {
    const auto dst = v4(0xC0000202, port);
    ASSERT_EQ(
        c.resolve_datagram(nullptr, 0, sa(dst), sizeof(dst), pdata.data(),
                           static_cast<uint32_t>(pdata.size()), &Completion::on_request, done),
        Status::kPending);
  }

  std::unique_ptr<ApiPair> p;
  DatagramConsumer consumer;
  Handle<Listener> listener;
};

TEST_F(CmSidr, ResolveReachesTheListenerAndTheAnswerComesBack) {
  sockaddr_in la{};
  uint32_t len = sizeof(la);
  ASSERT_EQ(listener->get_local_address(reinterpret_cast<sockaddr*>(&la), &len), Status::kSuccess);
  EXPECT_EQ(ntohs(la.sin_port), kPort);
  // rdma_cm's TCP and UDP port spaces are separate: a TCP listener may take the same port.
  DatagramConsumer tcp_consumer;
  Handle<Listener> tcp;
  ASSERT_EQ(create_listener(*p->b.adapter, &DatagramConsumer::on_connect, &tcp_consumer, nullptr,
                            nullptr, &tcp),
            Status::kSuccess);
  EXPECT_EQ(tcp->listen(sa(v4(0, kPort)), sizeof(sockaddr_in), nullptr, nullptr), Status::kSuccess);

  std::vector<uint8_t> request(kMaxDatagramRequestData), reply(kMaxDatagramReplyData);
  fill(request, 31);
  fill(reply, 47);
  Handle<Connector> c = connector();
  EXPECT_FALSE(c->is_datagram());
  Completion done;
  resolve(*c, kPort, request, &done);
  EXPECT_TRUE(c->is_datagram());
  Handle<Connector> bc(consumer.take());
  ASSERT_TRUE(bc);
  EXPECT_TRUE(bc->is_datagram());
  // The consumer's 180 bytes, after rdma_cm's IP CM header, byte for byte.
  EXPECT_EQ(connection_data(*bc), request);
  // The requester's address: A's address and the source port its SIDR_REQ's IP CM header named.
  const sockaddr_in a_local = address(*c, false), b_peer = address(*bc, true);
  EXPECT_EQ(ntohl(b_peer.sin_addr.s_addr), 0xC0000201u);
  EXPECT_EQ(ntohl(a_local.sin_addr.s_addr), 0xC0000201u);
  EXPECT_GE(ntohs(a_local.sin_port), 49152);
  EXPECT_EQ(b_peer.sin_port, a_local.sin_port);
  const sockaddr_in b_local = address(*bc, false);
  EXPECT_EQ(ntohl(b_local.sin_addr.s_addr), 0xC0000202u);
  EXPECT_EQ(ntohs(b_local.sin_port), kPort);

  uint32_t qpn = 0, qkey = 0;
  EXPECT_EQ(done.count(), 0);  // nothing before the answer
  EXPECT_EQ(c->get_datagram_peer(&qpn, &qkey), Status::kConnectionInvalid);
  ASSERT_EQ(bc->accept_datagram(0xABCDEF, 0x11223344, reply.data(), kMaxDatagramReplyData),
            Status::kSuccess);
  // Answered once: no second answer, no reject after it.
  EXPECT_EQ(bc->accept_datagram(0x42, 0, nullptr, 0), Status::kConnectionInvalid);
  EXPECT_EQ(bc->reject(nullptr, 0), Status::kConnectionInvalid);
  EXPECT_EQ(bc->get_datagram_peer(&qpn, &qkey), Status::kConnectionInvalid);  // passive side
  ASSERT_TRUE(eventually([&] { return done.count() == 1; }));
  EXPECT_EQ(done.status, Status::kSuccess);
  ASSERT_EQ(c->get_datagram_peer(&qpn, &qkey), Status::kSuccess);
  EXPECT_EQ(qpn, 0xABCDEFu);
  EXPECT_EQ(qkey, 0x11223344u);
  EXPECT_EQ(connection_data(*c), reply);
  const sockaddr_in a_peer = address(*c, true);
  EXPECT_EQ(ntohl(a_peer.sin_addr.s_addr), 0xC0000202u);
  EXPECT_EQ(ntohs(a_peer.sin_port), kPort);
  // Nothing is connected: no disconnect; a connector is used once.
  EXPECT_EQ(c->disconnect(nullptr, nullptr), Status::kConnectionInvalid);
  const auto dst = v4(0xC0000202, kPort);
  EXPECT_EQ(c->resolve_datagram(nullptr, 0, sa(dst), sizeof(dst), nullptr, 0, nullptr, nullptr),
            Status::kConnectionActive);
  EXPECT_EQ(consumer.events.load(), 1);
  EXPECT_EQ(tcp_consumer.events.load(), 0);
}

TEST_F(CmSidr, RejectNoListenerPausedAndDefaultQkey) {
  // Rejected by the consumer, with private data.
  {
    Handle<Connector> c = connector();
    Completion done;
    resolve(*c, kPort, {1, 2, 3}, &done);
    Handle<Connector> bc(consumer.take());
    ASSERT_TRUE(bc);
    const char no[] = "no room";
    ASSERT_EQ(bc->reject(no, sizeof(no)), Status::kSuccess);
    EXPECT_EQ(bc->accept_datagram(0x42, 0, nullptr, 0), Status::kConnectionInvalid);
    ASSERT_TRUE(eventually([&] { return done.count() == 1; }));
    EXPECT_EQ(done.status, Status::kConnectionRefused);
    const auto why = connection_data(*c);
    ASSERT_EQ(why.size(), kMaxDatagramReplyData);
    EXPECT_STREQ(reinterpret_cast<const char*>(why.data()), "no room");
    EXPECT_EQ(c->get_datagram_peer(nullptr, nullptr), Status::kConnectionInvalid);
    uint16_t status = 0;
    EXPECT_EQ(c->get_reject_reason(&status), Status::kSuccess);
    EXPECT_EQ(status, 2u);  // IBTA §12.11.2: rejected
  }
  // Q_Key 0: rdma_cm's default for its UDP port space (RDMA_UDP_QKEY).
  {
    Handle<Connector> c = connector();
    Completion done;
    resolve(*c, kPort, {}, &done);
    Handle<Connector> bc(consumer.take());
    ASSERT_TRUE(bc);
    EXPECT_EQ(connection_data(*bc), std::vector<uint8_t>(kMaxDatagramRequestData, 0));
    ASSERT_EQ(bc->accept_datagram(0x42, 0, nullptr, 0), Status::kSuccess);
    ASSERT_TRUE(eventually([&] { return done.count() == 1; }));
    ASSERT_EQ(done.status, Status::kSuccess);
    uint32_t qpn = 0, qkey = 0;
    ASSERT_EQ(c->get_datagram_peer(&qpn, &qkey), Status::kSuccess);
    EXPECT_EQ(qpn, 0x42u);
    EXPECT_EQ(qkey, 0x01234567u);
  }
  // Nobody on the port; a port with only a TCP listener; a paused listener: all refused (SIDR
  // status 1), synchronously here (no completion: the call waits).
  Handle<Listener> tcp;
  ASSERT_EQ(create_listener(*p->b.adapter, &DatagramConsumer::on_connect, &consumer, nullptr,
                            nullptr, &tcp),
            Status::kSuccess);
  ASSERT_EQ(tcp->listen(sa(v4(0, 7000)), sizeof(sockaddr_in), nullptr, nullptr), Status::kSuccess);
  for (uint16_t port : {uint16_t{9999}, uint16_t{7000}, kPort}) {
    if (port == kPort) listener->control_connect_events(true);
    Handle<Connector> c = connector();
    const auto dst = v4(0xC0000202, port);
    EXPECT_EQ(c->resolve_datagram(nullptr, 0, sa(dst), sizeof(dst), nullptr, 0, nullptr, nullptr),
              Status::kConnectionRefused)
        << port;
    uint16_t status = 0;
    EXPECT_EQ(c->get_reject_reason(&status), Status::kSuccess);
    EXPECT_EQ(status, 1u) << port;  // IBTA §12.11.2: service ID not supported
  }
  EXPECT_EQ(consumer.events.load(), 2);
}

TEST_F(CmSidr, CloseWhileWaitingForTheAnswerCancels) {
  Handle<Connector> c = connector();
  struct Order {
    std::atomic<int> seq{0};
    int resolve_at = -1, close_at = -1;
    Status status = Status::kPending;
  } order;
  const auto dst = v4(0xC0000202, kPort);
  ASSERT_EQ(c->resolve_datagram(
                nullptr, 0, sa(dst), sizeof(dst), nullptr, 0,
                [](void* x, Status s) {
                  auto* o = static_cast<Order*>(x);
                  o->status = s;
                  o->resolve_at = o->seq.fetch_add(1);
                },
                &order),
            Status::kPending);
  // The listener's consumer holds the request undecided: the active side waits for the answer.
  Handle<Connector> bc(consumer.take());
  ASSERT_TRUE(bc);
  (void)c.release()->close(
      [](void* x) {
        auto* o = static_cast<Order*>(x);
        o->close_at = o->seq.fetch_add(1);
      },
      &order);
  ASSERT_TRUE(eventually([&] { return order.seq.load() == 2; }));
  EXPECT_EQ(order.status, Status::kCancelled);
  EXPECT_EQ(order.resolve_at, 0);
  EXPECT_EQ(order.close_at, 1);
  // The passive connector may still answer (no one hears it).
  EXPECT_EQ(bc->accept_datagram(0x42, 7, nullptr, 0), Status::kSuccess);
}

TEST_F(CmSidr, BadArguments) {
  Handle<Connector> c = connector();
  const auto dst = v4(0xC0000202, kPort);
  std::vector<uint8_t> big(kMaxDatagramRequestData + 1);
  EXPECT_EQ(c->resolve_datagram(nullptr, 0, nullptr, 0, nullptr, 0, nullptr, nullptr),
            Status::kInvalidParameter);
  const auto port0 = v4(0xC0000202, 0);
  EXPECT_EQ(c->resolve_datagram(nullptr, 0, sa(port0), sizeof(port0), nullptr, 0, nullptr, nullptr),
            Status::kInvalidParameter);
  EXPECT_EQ(c->resolve_datagram(nullptr, 0, sa(dst), sizeof(dst), nullptr, 5, nullptr, nullptr),
            Status::kInvalidParameter);
  EXPECT_EQ(c->resolve_datagram(nullptr, 0, sa(dst), sizeof(dst), big.data(),
                                static_cast<uint32_t>(big.size()), nullptr, nullptr),
            Status::kInvalidBufferSize);
  const auto not_ours = v4(0xC0000209, 0);
  EXPECT_EQ(c->resolve_datagram(sa(not_ours), sizeof(not_ours), sa(dst), sizeof(dst), nullptr, 0,
                                nullptr, nullptr),
            Status::kInvalidAddress);
  const auto ourselves = v4(0xC0000201, kPort);
  EXPECT_EQ(c->resolve_datagram(nullptr, 0, sa(ourselves), sizeof(ourselves), nullptr, 0,
                                &Completion::on_request, nullptr),
            Status::kInvalidAddress);
  // Not a datagram request: nothing to answer.
  EXPECT_EQ(c->accept_datagram(0x42, 0, nullptr, 0), Status::kConnectionInvalid);
  EXPECT_FALSE(c->is_datagram());
  // A listener listens once; a UDP port is taken once.
  EXPECT_EQ(listener->listen_datagram(sa(v4(0, 1)), sizeof(sockaddr_in), nullptr, nullptr),
            Status::kInvalidParameter);
  Handle<Listener> l2;
  ASSERT_EQ(create_listener(*p->b.adapter, &DatagramConsumer::on_connect, &consumer, nullptr,
                            nullptr, &l2),
            Status::kSuccess);
  EXPECT_EQ(l2->listen_datagram(sa(v4(0, kPort)), sizeof(sockaddr_in), nullptr, nullptr),
            Status::kAddressAlreadyAssociated);

  // The answer's arguments, on a real request.
  Completion done;
  resolve(*c, kPort, {9}, &done);
  Handle<Connector> bc(consumer.take());
  ASSERT_TRUE(bc);
  std::vector<uint8_t> reply(kMaxDatagramReplyData + 1, 0x55);
  for (uint32_t qpn : {0u, 1u, 0x1000000u})
    EXPECT_EQ(bc->accept_datagram(qpn, 1, nullptr, 0), Status::kInvalidParameter) << qpn;
  EXPECT_EQ(bc->accept_datagram(0x42, 1, nullptr, 3), Status::kInvalidParameter);
  EXPECT_EQ(bc->accept_datagram(0x42, 1, reply.data(), kMaxDatagramReplyData + 1),
            Status::kInvalidBufferSize);
  // A REJ could carry 148 bytes; a SIDR_REP 136.
  EXPECT_EQ(bc->reject(reply.data(), kMaxDatagramReplyData + 1), Status::kInvalidBufferSize);
  EXPECT_EQ(done.count(), 0);
  ASSERT_EQ(bc->accept_datagram(0xFFFFFF, 0x80000001, reply.data(), kMaxDatagramReplyData),
            Status::kSuccess);
  ASSERT_TRUE(eventually([&] { return done.count() == 1; }));
  EXPECT_EQ(done.status, Status::kSuccess);
  uint32_t qpn = 0, qkey = 0;
  ASSERT_EQ(c->get_datagram_peer(&qpn, &qkey), Status::kSuccess);
  EXPECT_EQ(qpn, 0xFFFFFFu);
  EXPECT_EQ(qkey, 0x80000001u);
  EXPECT_EQ(connection_data(*c), std::vector<uint8_t>(kMaxDatagramReplyData, 0x55));
}

}  // namespace
}  // namespace urnic::test

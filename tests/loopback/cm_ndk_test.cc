// The public Connector and Listener (include/urnic/connector.h, listener.h) between two adapters
// of the public API over a net_ring pair (tests/api/api_fixture.h), the engine on lcore 1:
// listen / connect / accept / complete_connect with private data and read limits, SEND and WRITE
// checked byte for byte, disconnect with the peer's disconnect event, the QP as the connector's
// antecedent, reject, no listener, paused listener, addresses, a close that cancels a pending
// connect, and the same with one application thread driving the engine (run_once).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>

#include "../api/api_fixture.h"
#include "urnic/connector.h"
#include "urnic/listener.h"

namespace urnic::test {
namespace {

using namespace std::chrono_literals;

// What the passive side's connect event saw and did.
struct Passive {
  ApiPair* p = nullptr;
  std::atomic<Connector*> conn{nullptr};
  Completion accepted;
  std::atomic<int> disconnects{0};
  bool accept_now = true;
  std::vector<uint8_t> got_pdata;
  uint32_t in = 0, out = 0;
  static void on_connect(void* ctx, Connector* c) {
    auto* self = static_cast<Passive*>(ctx);
    uint32_t len = 0;
    EXPECT_EQ(c->get_connection_data(nullptr, nullptr, nullptr, &len), Status::kSuccess);
    self->got_pdata.resize(len);
    EXPECT_EQ(c->get_connection_data(&self->in, &self->out, self->got_pdata.data(), &len),
              Status::kSuccess);
    self->conn.store(c);
    if (!self->accept_now) return;
    const char reply[] = "welcome";
    EXPECT_EQ(c->accept(*self->p->b.qp, 4, 2, reply, sizeof(reply), &Passive::on_disconnect, self,
                        &Completion::on_request, &self->accepted),
              Status::kPending);
  }
  static void on_disconnect(void* ctx) { static_cast<Passive*>(ctx)->disconnects.fetch_add(1); }
};

class CmNdk : public EalTest {
 protected:
  void SetUp() override {
    static int n = 0;
    EngineConfig ec;
    ec.idle_yield_after = 256;
    p = std::make_unique<ApiPair>("cmndk" + std::to_string(n++), ec);
    ASSERT_TRUE(p->engine().launch(1));
    for (Side* s : {&p->a, &p->b})
      ASSERT_EQ(s->pd->create_qp(*s->cq, *s->cq, s, 64, 64, 4, 4, 64, nullptr, nullptr, &s->qp),
                Status::kSuccess);
  }
  void TearDown() override { p.reset(); }
  std::unique_ptr<ApiPair> p;
};

TEST_F(CmNdk, ListenConnectAcceptDataDisconnect) {
  Passive pas;
  pas.p = p.get();
  Handle<Listener> l;
  ASSERT_EQ(create_listener(*p->b.adapter, &Passive::on_connect, &pas, nullptr, nullptr, &l),
            Status::kSuccess);
  EXPECT_EQ(l->object_type(), ObjectType::kListener);
  ASSERT_EQ(l->listen(sa(v4(0, 18515)), sizeof(sockaddr_in), nullptr, nullptr), Status::kSuccess);
  sockaddr_in la{};
  uint32_t len = sizeof(la);
  ASSERT_EQ(l->get_local_address(reinterpret_cast<sockaddr*>(&la), &len), Status::kSuccess);
  EXPECT_EQ(ntohs(la.sin_port), 18515);
  EXPECT_EQ(ntohl(la.sin_addr.s_addr), 0xC0000202u);

  // Receives first (ND2 rule: the passive side has a receive posted for the active's first
  // message), and a window each for WRITEs.
  std::vector<uint8_t> a_src(2000), b_src(2000), a_dst(2000, 0), b_dst(2000, 0), b_win(2000, 0);
  fill(a_src, 1);
  fill(b_src, 2);
  auto ma = p->a.reg(a_src.data(), a_src.size(), mr_flag::kAllowLocalWrite);
  auto mad = p->a.reg(a_dst.data(), a_dst.size(), mr_flag::kAllowLocalWrite);
  auto mb = p->b.reg(b_src.data(), b_src.size(), mr_flag::kAllowLocalWrite);
  auto mbd = p->b.reg(b_dst.data(), b_dst.size(), mr_flag::kAllowLocalWrite);
  auto mbw = p->b.reg(b_win.data(), b_win.size(), mr_flag::kAllowRemoteWrite);
  const Sge ra{addr(a_dst.data()), 2000, mad->get_local_token()};
  const Sge rb{addr(b_dst.data()), 2000, mbd->get_local_token()};
  ASSERT_EQ(p->a.qp->receive(ctx(1), {&ra, 1}), Status::kSuccess);
  ASSERT_EQ(p->b.qp->receive(ctx(2), {&rb, 1}), Status::kSuccess);

  Handle<Connector> c;
  ASSERT_EQ(create_connector(*p->a.adapter, nullptr, nullptr, &c), Status::kSuccess);
  EXPECT_EQ(c->object_type(), ObjectType::kConnector);
  Completion connected;
  const char hello[] = "hello";
  const auto dst = v4(0xC0000202, 18515);
  ASSERT_EQ(c->connect(*p->a.qp, nullptr, 0, sa(dst), sizeof(dst), 2, 3, hello, sizeof(hello),
                       &Completion::on_request, &connected),
            Status::kPending);
  ASSERT_TRUE(eventually([&] { return connected.count() == 1; }));
  EXPECT_EQ(connected.status, Status::kSuccess);
  // The passive side saw the REQ's 56 application bytes and A's limits seen from B.
  ASSERT_EQ(pas.got_pdata.size(), 56u);
  EXPECT_STREQ(reinterpret_cast<const char*>(pas.got_pdata.data()), "hello");
  // Past the caller's bytes the consumer sees zeros: the selective-repeat mark was taken out.
  EXPECT_EQ(std::count(pas.got_pdata.begin() + sizeof(hello), pas.got_pdata.end(), 0),
            static_cast<long>(56 - sizeof(hello)));
  EXPECT_EQ(pas.in, 3u);
  EXPECT_EQ(pas.out, 2u);
  // The active side: the REP's data and the negotiated limits (B offered 4 / 2).
  uint32_t in = 0, out = 0, plen = 0;
  ASSERT_EQ(c->get_connection_data(&in, &out, nullptr, &plen), Status::kSuccess);
  EXPECT_EQ(plen, 196u);
  std::vector<uint8_t> rep(plen);
  ASSERT_EQ(c->get_connection_data(&in, &out, rep.data(), &plen), Status::kSuccess);
  EXPECT_STREQ(reinterpret_cast<const char*>(rep.data()), "welcome");
  EXPECT_EQ(std::count(rep.begin() + 8, rep.end(), 0), 196 - 8);  // no mark left
  EXPECT_EQ(in, 2u);
  EXPECT_EQ(out, 3u);
  EXPECT_EQ(pas.accepted.count(), 0);  // not before the RTU
  std::atomic<int> a_disc{0};
  ASSERT_EQ(c->complete_connect([](void* x) { static_cast<std::atomic<int>*>(x)->fetch_add(1); },
                                &a_disc, nullptr, nullptr),
            Status::kSuccess);
  ASSERT_TRUE(eventually([&] { return pas.accepted.count() == 1; }));
  EXPECT_EQ(pas.accepted.status, Status::kSuccess);
  // Both QPs negotiated selective repeat, and say so (QpConnectExtension::query).
  for (Side* s : {&p->a, &p->b}) {
    QpAttributes at;
    ASSERT_EQ(s->qp->query_extension<QpConnectExtension>()->query(&at), Status::kSuccess);
    EXPECT_TRUE(at.selective_repeat);
  }
  Connector* bc = pas.conn.load();
  ASSERT_NE(bc, nullptr);
  Handle<Connector> b_conn(bc);  // the consumer owns connectors from connect events

  sockaddr_in6 big{};
  len = sizeof(big);
  ASSERT_EQ(c->get_peer_address(reinterpret_cast<sockaddr*>(&big), &len), Status::kSuccess);
  EXPECT_EQ(len, sizeof(sockaddr_in));
  const auto* peer = reinterpret_cast<const sockaddr_in*>(&big);
  EXPECT_EQ(ntohl(peer->sin_addr.s_addr), 0xC0000202u);
  EXPECT_EQ(ntohs(peer->sin_port), 18515);
  sockaddr_in small{};
  len = 4;
  EXPECT_EQ(b_conn->get_local_address(reinterpret_cast<sockaddr*>(&small), &len),
            Status::kBufferTooSmall);
  EXPECT_EQ(len, sizeof(sockaddr_in));

  // SEND both ways; WRITE A -> B's window.
  const Sge sa_{addr(a_src.data()), 2000, ma->get_local_token()};
  const Sge sb_{addr(b_src.data()), 2000, mb->get_local_token()};
  ASSERT_EQ(p->a.qp->write(ctx(3), {&sa_, 1}, addr(b_win.data()), mbw->get_remote_token(), 0),
            Status::kSuccess);
  ASSERT_EQ(p->a.qp->send(ctx(4), {&sa_, 1}, 0), Status::kSuccess);
  ASSERT_EQ(p->b.qp->send(ctx(5), {&sb_, 1}, 0), Status::kSuccess);
  ASSERT_TRUE(p->wait_done(3, 2));
  for (const auto& r : p->a.done) EXPECT_EQ(r.status, Status::kSuccess);
  for (const auto& r : p->b.done) EXPECT_EQ(r.status, Status::kSuccess);
  EXPECT_EQ(b_dst, a_src);
  EXPECT_EQ(a_dst, b_src);
  EXPECT_EQ(b_win, a_src);

  // A disconnects; B hears of it; B's own disconnect is done at once.
  Completion disc;
  ASSERT_EQ(c->disconnect(&Completion::on_request, &disc), Status::kPending);
  ASSERT_TRUE(eventually([&] { return disc.count() == 1 && pas.disconnects.load() == 1; }));
  EXPECT_EQ(disc.status, Status::kSuccess);
  EXPECT_EQ(a_disc.load(), 0);
  EXPECT_EQ(b_conn->disconnect(nullptr, nullptr), Status::kSuccess);

  // The QP is the connector's antecedent: its close pends until the connector is closed.
  Completion qp_closed;
  EXPECT_EQ(p->a.qp.release()->close(&Completion::on_close, &qp_closed), Status::kPending);
  p->run_for(50ms);
  EXPECT_EQ(qp_closed.count(), 0);
  Completion c_closed;
  (void)c.release()->close(&Completion::on_close, &c_closed);
  ASSERT_TRUE(eventually([&] { return c_closed.count() == 1 && qp_closed.count() == 1; }));
}

// An adapter with no connector or listener at all still answers on QP1, as a host's CM does: a
// REQ for a service nobody listens on is refused with REJ 8 (invalid service ID, IBTA table
// 195), not left to the requester's timeout; its CM counters show the REJ.
TEST_F(CmNdk, AnAdapterWithoutListenersRefuses) {
  Handle<Connector> c;
  ASSERT_EQ(create_connector(*p->a.adapter, nullptr, nullptr, &c), Status::kSuccess);
  const auto dst = v4(0xC0000202, 9999);
  Completion done;
  ASSERT_EQ(c->connect(*p->a.qp, nullptr, 0, sa(dst), sizeof(dst), 1, 1, nullptr, 0,
                       &Completion::on_request, &done),
            Status::kPending);
  ASSERT_TRUE(eventually([&] { return done.count() == 1; }, 30s));
  // Unanswered, the REQ would end in its timeout (kIoTimeout) after its retries.
  EXPECT_EQ(done.status, Status::kConnectionRefused);
  uint16_t reason = 0;
  EXPECT_EQ(c->get_reject_reason(&reason), Status::kSuccess);
  EXPECT_EQ(reason, 8u);
  AdapterCounters bc;
  ASSERT_EQ(p->b.adapter->query_counters(&bc), Status::kSuccess);
  EXPECT_EQ(bc.cm.rej_sent, 1u);
}

TEST_F(CmNdk, RejectNoListenerPauseAndCancel) {
  Passive pas;
  pas.p = p.get();
  pas.accept_now = false;
  Handle<Listener> l;
  ASSERT_EQ(create_listener(*p->b.adapter, &Passive::on_connect, &pas, nullptr, nullptr, &l),
            Status::kSuccess);
  ASSERT_EQ(l->listen(sa(v4(0xC0000202, 7174)), sizeof(sockaddr_in), nullptr, nullptr),
            Status::kSuccess);
  // A listener on an address that is not the adapter's.
  Handle<Listener> l2;
  ASSERT_EQ(create_listener(*p->b.adapter, &Passive::on_connect, &pas, nullptr, nullptr, &l2),
            Status::kSuccess);
  EXPECT_EQ(l2->listen(sa(v4(0xC0000209, 1)), sizeof(sockaddr_in), nullptr, nullptr),
            Status::kInvalidAddress);
  EXPECT_EQ(l2->listen(sa(v4(0, 7174)), sizeof(sockaddr_in), nullptr, nullptr),
            Status::kAddressAlreadyAssociated);

  // Rejected by the consumer, with private data.
  {
    Handle<Connector> c;
    ASSERT_EQ(create_connector(*p->a.adapter, nullptr, nullptr, &c), Status::kSuccess);
    const auto dst = v4(0xC0000202, 7174);
    Completion done;
    ASSERT_EQ(c->connect(*p->a.qp, nullptr, 0, sa(dst), sizeof(dst), 1, 1, nullptr, 0,
                         &Completion::on_request, &done),
              Status::kPending);
    ASSERT_TRUE(eventually([&] { return pas.conn.load() != nullptr; }));
    Handle<Connector> bc(pas.conn.exchange(nullptr));
    const char no[] = "busy";
    EXPECT_EQ(bc->reject(no, sizeof(no)), Status::kSuccess);
    ASSERT_TRUE(eventually([&] { return done.count() == 1; }));
    EXPECT_EQ(done.status, Status::kConnectionRefused);
    uint32_t len = 0;
    ASSERT_EQ(c->get_connection_data(nullptr, nullptr, nullptr, &len), Status::kSuccess);
    EXPECT_EQ(len, 148u);
    std::vector<char> why(len);
    ASSERT_EQ(c->get_connection_data(nullptr, nullptr, why.data(), &len), Status::kSuccess);
    EXPECT_STREQ(why.data(), "busy");
    uint16_t reason = 0;
    EXPECT_EQ(c->get_reject_reason(&reason), Status::kSuccess);
    EXPECT_EQ(reason, 28u);  // IBTA table 195: consumer defined
    EXPECT_EQ(bc->get_reject_reason(&reason), Status::kConnectionInvalid);  // it rejected
    EXPECT_EQ(c->get_reject_reason(nullptr), Status::kInvalidParameter);
    // A connector is used once.
    EXPECT_EQ(c->connect(*p->a.qp, nullptr, 0, sa(dst), sizeof(dst), 1, 1, nullptr, 0,
                         &Completion::on_request, &done),
              Status::kConnectionActive);
  }
  // Nobody on that port; then a paused listener: both refused.
  for (uint16_t port : {uint16_t{9999}, uint16_t{7174}}) {
    if (port == 7174) l->control_connect_events(true);
    Handle<Connector> c;
    ASSERT_EQ(create_connector(*p->a.adapter, nullptr, nullptr, &c), Status::kSuccess);
    const auto dst = v4(0xC0000202, port);
    EXPECT_EQ(
        c->connect(*p->a.qp, nullptr, 0, sa(dst), sizeof(dst), 1, 1, nullptr, 0, nullptr, nullptr),
        Status::kConnectionRefused)
        << port;
    // IBTA table 195: 8 (invalid service ID) for nobody listening, a paused listener alike.
    uint16_t reason = 0;
    EXPECT_EQ(c->get_reject_reason(&reason), Status::kSuccess);
    EXPECT_EQ(reason, 8u) << port;
  }
  EXPECT_EQ(pas.conn.load(), nullptr);
  // Too much private data; an address that is not ours as the source.
  Handle<Connector> c;
  ASSERT_EQ(create_connector(*p->a.adapter, nullptr, nullptr, &c), Status::kSuccess);
  const auto dst = v4(0xC0000202, 7174);
  std::vector<uint8_t> big(57);
  EXPECT_EQ(c->connect(*p->a.qp, nullptr, 0, sa(dst), sizeof(dst), 1, 1, big.data(), 57, nullptr,
                       nullptr),
            Status::kInvalidBufferSize);
  const auto bad_src = v4(0xC0000209, 0);
  EXPECT_EQ(c->connect(*p->a.qp, sa(bad_src), sizeof(bad_src), sa(dst), sizeof(dst), 1, 1, nullptr,
                       0, nullptr, nullptr),
            Status::kInvalidAddress);
  // A connect to an address nobody answers ARP for, closed while pending: the completion comes
  // with kCancelled, before the close completion.
  const auto nowhere = v4(0xC0000263, 1);
  struct Order {
    std::atomic<int> seq{0};
    int connect_at = -1, close_at = -1;
    Status status = Status::kPending;
  } order;
  ASSERT_EQ(c->connect(
                *p->a.qp, nullptr, 0, sa(nowhere), sizeof(nowhere), 1, 1, nullptr, 0,
                [](void* x, Status s) {
                  auto* o = static_cast<Order*>(x);
                  o->status = s;
                  o->connect_at = o->seq.fetch_add(1);
                },
                &order),
            Status::kPending);
  (void)c.release()->close(
      [](void* x) {
        auto* o = static_cast<Order*>(x);
        o->close_at = o->seq.fetch_add(1);
      },
      &order);
  ASSERT_TRUE(eventually([&] { return order.seq.load() == 2; }));
  EXPECT_EQ(order.status, Status::kCancelled);
  EXPECT_EQ(order.connect_at, 0);
  EXPECT_EQ(order.close_at, 1);
}

// Issue 14 item 6: the connection manager with an engine that one application thread drives
// with run_once() (before, connect / accept / disconnect returned kInvalidDeviceState unless the
// engine ran on an lcore). The control threads apply the QP transitions between two of this
// thread's steps; every wait below drives the engine (AdapterPair::run_until).
TEST(CmNdkManual, ConnectAcceptDataAndDisconnectWithOneThreadDrivingTheEngine) {
  eal_up_once();
  ApiPair p("cmndkm");
  for (Side* s : {&p.a, &p.b})
    ASSERT_EQ(s->pd->create_qp(*s->cq, *s->cq, s, 64, 64, 4, 4, 64, nullptr, nullptr, &s->qp),
              Status::kSuccess);
  Passive pas;
  pas.p = &p;
  Handle<Listener> l;
  ASSERT_EQ(create_listener(*p.b.adapter, &Passive::on_connect, &pas, nullptr, nullptr, &l),
            Status::kSuccess);
  ASSERT_EQ(l->listen(sa(v4(0, 18516)), sizeof(sockaddr_in), nullptr, nullptr), Status::kSuccess);
  std::vector<uint8_t> src(3000), dst(3000, 0), win(3000, 0);
  fill(src, 9);
  auto ms = p.a.reg(src.data(), src.size(), 0);
  auto md = p.b.reg(dst.data(), dst.size(), mr_flag::kAllowLocalWrite);
  auto mw = p.b.reg(win.data(), win.size(), mr_flag::kAllowRemoteWrite);
  const Sge rb{addr(dst.data()), 3000, md->get_local_token()};
  ASSERT_EQ(p.b.qp->receive(ctx(2), {&rb, 1}), Status::kSuccess);

  Handle<Connector> c;
  ASSERT_EQ(create_connector(*p.a.adapter, nullptr, nullptr, &c), Status::kSuccess);
  Completion connected;
  const auto dst_addr = v4(0xC0000202, 18516);
  ASSERT_EQ(c->connect(*p.a.qp, nullptr, 0, sa(dst_addr), sizeof(dst_addr), 1, 1, nullptr, 0,
                       &Completion::on_request, &connected),
            Status::kPending);
  ASSERT_TRUE(p.run_until([&] { return connected.count() == 1; }));
  ASSERT_EQ(connected.status, Status::kSuccess);
  ASSERT_EQ(c->complete_connect(nullptr, nullptr, nullptr, nullptr), Status::kSuccess);
  ASSERT_TRUE(p.run_until([&] { return pas.accepted.count() == 1; }));
  ASSERT_EQ(pas.accepted.status, Status::kSuccess);
  Handle<Connector> b_conn(pas.conn.load());
  ASSERT_TRUE(b_conn);

  const Sge sa_{addr(src.data()), 3000, ms->get_local_token()};
  ASSERT_EQ(p.a.qp->write(ctx(3), {&sa_, 1}, addr(win.data()), mw->get_remote_token(), 0),
            Status::kSuccess);
  ASSERT_EQ(p.a.qp->send(ctx(4), {&sa_, 1}, 0), Status::kSuccess);
  ASSERT_TRUE(p.wait_done(2, 1));
  ASSERT_EQ(p.a.done.size(), 2u);
  ASSERT_EQ(p.b.done.size(), 1u);
  for (const auto& r : p.a.done) EXPECT_EQ(r.status, Status::kSuccess);
  EXPECT_EQ(p.b.done[0].status, Status::kSuccess);
  EXPECT_EQ(p.b.done[0].bytes_transferred, 3000u);
  EXPECT_EQ(win, src);
  EXPECT_EQ(dst, src);

  Completion disc;
  ASSERT_EQ(c->disconnect(&Completion::on_request, &disc), Status::kPending);
  ASSERT_TRUE(p.run_until([&] { return disc.count() == 1 && pas.disconnects.load() == 1; }));
  EXPECT_EQ(disc.status, Status::kSuccess);
  EXPECT_EQ(b_conn->disconnect(nullptr, nullptr), Status::kSuccess);
}

}  // namespace
}  // namespace urnic::test

// Handles that outlive their adapter (issue 12, deliverable 8; include/urnic/adapter.h): closing
// an Adapter tears down every object the consumer has not closed, but the objects stay valid
// until the consumer closes them. Afterwards every call on such an object fails harmlessly
// (kInvalidDeviceState, an empty poll, an ignored arm) and its close (Handle::reset,
// Handle::close, Object::close) is a no-op that frees it, with no callback.
//
// For each object kind on its own, for the full set (PD, CQ, MRs, MW, SRQ, QPs, a connected QP
// with work outstanding, a connector, a listener) and for a pair connected through the CM: the
// adapter (or the whole pair, engine included) goes first, every call is made on what is left,
// then the handles are released in creation order, in reverse order, or with a completion.
// Run under AddressSanitizer (scripts/sanitize.sh) this is where a use after free would show.
#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <iterator>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "api_fixture.h"

namespace urnic::test {
namespace {

using namespace std::chrono_literals;

// What a case creates on side A (with what it needs): one kind, or everything.
enum class Kind { kPd, kCq, kMr, kFastMr, kMw, kSrq, kQp, kSrqQp, kConnector, kListener, kAll };
// How the handles are let go after the adapter: creation order, reverse order, or creation order
// with Handle::close and a completion (which must not be called).
enum class Order { kForward, kReverse, kCloseWithCompletion };
// What is destroyed first: side A's adapter alone, or the whole pair with its engine.
enum class Gone { kAdapter, kPairAndEngine };

// Names in enum order (test names, traces).
constexpr const char* kKindNames[] = {"Pd", "Cq",    "Mr",        "FastMr",   "Mw", "Srq",
                                      "Qp", "SrqQp", "Connector", "Listener", "All"};
constexpr const char* kOrderNames[] = {"Forward", "Reverse", "CloseWithCompletion"};
static_assert(std::size(kKindNames) == static_cast<size_t>(Kind::kAll) + 1);
static_assert(std::size(kOrderNames) == static_cast<size_t>(Order::kCloseWithCompletion) + 1);
const char* name(Kind k) { return kKindNames[static_cast<size_t>(k)]; }
const char* name(Order o) { return kOrderNames[static_cast<size_t>(o)]; }

struct Unexpected {
  std::atomic<int> calls{0};
  static void on_close(void* c) { static_cast<Unexpected*>(c)->calls.fetch_add(1); }
  static void on_request(void* c, Status) { static_cast<Unexpected*>(c)->calls.fetch_add(1); }
  static void on_connect(void* c, Connector*) { static_cast<Unexpected*>(c)->calls.fetch_add(1); }
};

// Side A's objects of one case, in creation order.
struct Objects {
  Handle<Pd> pd;
  Handle<Cq> cq;
  Handle<Mr> mr;
  Handle<Mr> fmr;
  Handle<Mw> mw;
  Handle<Srq> srq;
  Handle<Qp> qp;      // connected to side B, with work outstanding (kQp, kAll)
  Handle<Qp> srq_qp;  // receives from `srq`
  Handle<Connector> conn;
  Handle<Listener> listener;
  std::vector<uint8_t> buf = std::vector<uint8_t>(4096);

  static bool needs_pd(Kind k) {
    return k != Kind::kCq && k != Kind::kConnector && k != Kind::kListener;
  }
  static bool listens(Kind k) { return k == Kind::kListener || k == Kind::kAll; }

  // Creates what `k` asks for on side A of `p` (a QP is connected to a new QP of side B, which
  // `peer` keeps).
  void create(ApiPair& p, Kind k, Handle<Qp>* peer, Unexpected* events) {
    Adapter& a = *p.a.adapter;
    const bool all = k == Kind::kAll;
    if (needs_pd(k)) {
      ASSERT_EQ(a.create_pd(nullptr, nullptr, &pd), Status::kSuccess);
    }
    if (all || k == Kind::kCq || k == Kind::kQp || k == Kind::kSrqQp) {
      ASSERT_EQ(a.create_cq(64, nullptr, nullptr, nullptr, nullptr, &cq), Status::kSuccess);
    }
    if (all || k == Kind::kMr || k == Kind::kQp) {
      ASSERT_EQ(pd->create_mr(false, nullptr, nullptr, &mr), Status::kSuccess);
      ASSERT_EQ(
          mr->register_mr(buf.data(), buf.size(),
                          mr_flag::kAllowLocalWrite | mr_flag::kAllowRemoteWrite, nullptr, nullptr),
          Status::kSuccess);
    }
    if (all || k == Kind::kFastMr) {
      ASSERT_EQ(pd->create_mr(true, nullptr, nullptr, &fmr), Status::kSuccess);
      ASSERT_EQ(fmr->initialize_fast_register_mr(2, true, nullptr, nullptr), Status::kSuccess);
    }
    if (all || k == Kind::kMw) {
      ASSERT_EQ(pd->create_mw(nullptr, nullptr, &mw), Status::kSuccess);
    }
    if (all || k == Kind::kSrq || k == Kind::kSrqQp) {
      ASSERT_EQ(pd->create_srq(16, 1, 0, nullptr, nullptr, nullptr, nullptr, &srq),
                Status::kSuccess);
    }
    if (all || k == Kind::kQp) {
      ASSERT_EQ(pd->create_qp(*cq, *cq, nullptr, 16, 16, 1, 1, 64, nullptr, nullptr, &qp),
                Status::kSuccess);
      ASSERT_EQ(
          p.b.pd->create_qp(*p.b.cq, *p.b.cq, nullptr, 16, 16, 1, 1, 64, nullptr, nullptr, peer),
          Status::kSuccess);
      ApiPair::connect_qps(p.a, *qp, p.b, **peer);
    }
    if (all || k == Kind::kSrqQp) {
      ASSERT_EQ(
          pd->create_qp_with_srq(*cq, *cq, *srq, nullptr, 16, 1, 0, nullptr, nullptr, &srq_qp),
          Status::kSuccess);
    }
    if (all || k == Kind::kConnector) {
      ASSERT_EQ(create_connector(a, nullptr, nullptr, &conn), Status::kSuccess);
    }
    if (listens(k)) {
      ASSERT_EQ(create_listener(a, &Unexpected::on_connect, events, nullptr, nullptr, &listener),
                Status::kSuccess);
      const auto at = v4(0, 0);
      ASSERT_EQ(listener->listen(sa(at), sizeof(at), nullptr, nullptr), Status::kSuccess);
    }
  }

  // Leaves work outstanding on the connected QP: receives nobody sends to, SENDs that side B
  // has no receive for (RNR, retried for ever), a WRITE and a READ behind them. `remote` is the
  // region of side B they name.
  void post_outstanding(ApiPair& p, Handle<Mr>* remote) {
    if (!qp) return;
    const Sge s{addr(buf.data()), 64, mr->get_local_token()};
    *remote = p.b.reg(buf.data() + 2048, 1024, mr_flag::kAllowRemoteWrite);
    for (uintptr_t i = 0; i < 4; ++i) ASSERT_EQ(qp->receive(ctx(i), {&s, 1}), Status::kSuccess);
    for (uintptr_t i = 0; i < 4; ++i)
      ASSERT_EQ(qp->send(ctx(10 + i), {&s, 1}, 0), Status::kSuccess);
    ASSERT_EQ(
        qp->write(ctx(20), {&s, 1}, addr(buf.data() + 2048), (*remote)->get_remote_token(), 0),
        Status::kSuccess);
    ASSERT_EQ(qp->read(ctx(21), {&s, 1}, addr(buf.data() + 2048), (*remote)->get_remote_token(), 0),
              Status::kSuccess);
    p.run_for(5ms);
  }

  // Every call on what is left, once the adapter is gone.
  void expect_inert() {
    const Status kDead = Status::kInvalidDeviceState;
    const Sge s{addr(buf.data()), 8, 0};
    const ExtensionId unknown{1, 2};
    void* iface = nullptr;
    Unexpected cb;
    if (pd) {
      SCOPED_TRACE("pd");
      EXPECT_EQ(pd->object_type(), ObjectType::kPd);
      EXPECT_EQ(pd->query_extension(unknown, {1, 0}, &iface), Status::kNotSupported);
      Handle<Mr> m;
      Handle<Mw> w;
      Handle<Srq> q;
      Handle<Qp> x;
      EXPECT_EQ(pd->create_mr(false, nullptr, nullptr, &m), kDead);
      EXPECT_EQ(pd->create_mr(true, nullptr, nullptr, &m), kDead);
      EXPECT_EQ(pd->create_mw(nullptr, nullptr, &w), kDead);
      EXPECT_EQ(pd->create_srq(16, 1, 0, nullptr, nullptr, nullptr, nullptr, &q), kDead);
      if (cq) {
        EXPECT_EQ(pd->create_qp(*cq, *cq, nullptr, 4, 4, 1, 1, 0, nullptr, nullptr, &x), kDead);
        EXPECT_EQ(
            pd->create_qp(*cq, *cq, nullptr, 4, 4, 1, 1, 0, &Completion::on_create, nullptr, &x),
            kDead);
        if (srq) {
          EXPECT_EQ(pd->create_qp_with_srq(*cq, *cq, *srq, nullptr, 4, 1, 0, nullptr, nullptr, &x),
                    kDead);
        }
      }
      uint32_t token = 0;
      EXPECT_EQ(pd->get_privileged_memory_region_token(&token), kDead);
      EXPECT_FALSE(m || w || q || x);
    }
    if (cq) {
      SCOPED_TRACE("cq");
      EXPECT_EQ(cq->object_type(), ObjectType::kCq);
      Result r[4];
      ResultEx rx[4];
      EXPECT_EQ(cq->get_results(r), 0u);
      EXPECT_EQ(cq->get_results_ex(rx), 0u);
      cq->arm(CqNotify::kAny);
      cq->arm(CqNotify::kErrors);
      EXPECT_EQ(cq->control_interrupt_moderation(10, 4), kDead);
      EXPECT_EQ(cq->resize(8, nullptr, nullptr), kDead);
      auto* ext = cq->query_extension<CqExtension>();
      ASSERT_NE(ext, nullptr);
      EXPECT_FALSE(ext->cancel_notification());
    }
    for (Handle<Mr>* h : {&mr, &fmr}) {
      if (!*h) continue;
      SCOPED_TRACE(h == &mr ? "mr" : "fast mr");
      Mr& m = **h;
      EXPECT_EQ(m.object_type(), ObjectType::kMr);
      (void)m.get_local_token();
      (void)m.get_remote_token();
      EXPECT_EQ(m.register_mr(buf.data(), buf.size(), mr_flag::kAllowLocalWrite, nullptr, nullptr),
                kDead);
      EXPECT_EQ(m.deregister_mr(nullptr, nullptr), kDead);
      EXPECT_EQ(m.initialize_fast_register_mr(1, false, nullptr, nullptr), kDead);
    }
    if (mw) {
      SCOPED_TRACE("mw");
      EXPECT_EQ(mw->object_type(), ObjectType::kMw);
      (void)mw->get_remote_token();
    }
    if (srq) {
      SCOPED_TRACE("srq");
      EXPECT_EQ(srq->object_type(), ObjectType::kSrq);
      EXPECT_EQ(srq->receive(ctx(1), {&s, 1}), kDead);
      EXPECT_EQ(srq->modify(0, 4, nullptr, nullptr), kDead);
      EXPECT_EQ(srq->modify(8, 0, &Unexpected::on_request, &cb), kDead);
    }
    for (Handle<Qp>* h : {&qp, &srq_qp}) {
      if (!*h) continue;
      SCOPED_TRACE(h == &qp ? "qp" : "srq qp");
      Qp& q = **h;
      EXPECT_EQ(q.object_type(), ObjectType::kQp);
      EXPECT_EQ(q.send(ctx(1), {&s, 1}, 0), kDead);
      EXPECT_EQ(q.send(ctx(1), {&s, 1}, op_flag::kInline), kDead);
      EXPECT_EQ(q.send_and_invalidate(ctx(1), {&s, 1}, 0, 5), kDead);
      EXPECT_EQ(q.write(ctx(1), {&s, 1}, 0x1000, 5, 0), kDead);
      EXPECT_EQ(q.read(ctx(1), {&s, 1}, 0x1000, 5, 0), kDead);
      EXPECT_EQ(q.receive(ctx(1), {&s, 1}), kDead);
      if (fmr) {
        const uint64_t page = addr(buf.data()) & ~uint64_t{kPageSize - 1};
        EXPECT_EQ(q.fast_register(ctx(1), *fmr, {&page, 1}, 0, 64, page, 0), kDead);
      }
      EXPECT_EQ(q.invalidate(ctx(1), q, 0), kDead);
      if (mr && mw) {
        EXPECT_EQ(q.bind(ctx(1), *mr, *mw, buf.data(), 64, 0), kDead);
      }
      q.flush();
      auto* ext = q.query_extension<QpExtension>();
      ASSERT_NE(ext, nullptr);
      EXPECT_EQ(ext->send_with_immediate(ctx(1), {&s, 1}, 0, 7), kDead);
      EXPECT_EQ(ext->write_with_immediate(ctx(1), {&s, 1}, 0x1000, 5, 0, 7), kDead);
      const Sge r{addr(buf.data()), 8, 0};
      EXPECT_EQ(ext->compare_swap(ctx(1), r, 0x1000, 5, 1, 2, 0), kDead);
      EXPECT_EQ(ext->fetch_add(ctx(1), r, 0x1000, 5, 1, 0), kDead);
      (void)ext->counters();
      auto* conn_ext = q.query_extension<QpConnectExtension>();
      ASSERT_NE(conn_ext, nullptr);
      (void)conn_ext->qpn();
      (void)conn_ext->state();
      QpAttributes at;
      at.state = QpState::kErr;
      EXPECT_EQ(conn_ext->modify(at, qp_attr_mask::kState, nullptr, nullptr), kDead);
      EXPECT_EQ(conn_ext->modify(at, qp_attr_mask::kState, &Unexpected::on_request, &cb), kDead);
      at.state = QpState::kRtr;
      at.av.dst_ipv4 = 0xC0000202;
      EXPECT_EQ(conn_ext->modify(at, qp_attr_mask::kState | qp_attr_mask::kAv,
                                 &Unexpected::on_request, &cb),
                kDead);
    }
    if (conn) {
      SCOPED_TRACE("connector");
      EXPECT_EQ(conn->object_type(), ObjectType::kConnector);
      const auto dst = v4(0xC0000202, 4791);
      const auto src = v4(0xC0000201, 0);
      if (qp) {
        EXPECT_EQ(conn->connect(*qp, sa(src), sizeof(src), sa(dst), sizeof(dst), 1, 1, nullptr, 0,
                                &Unexpected::on_request, &cb),
                  kDead);
        EXPECT_EQ(conn->connect(*qp, nullptr, 0, sa(dst), sizeof(dst), 1, 1, nullptr, 0, nullptr,
                                nullptr),
                  kDead);
        EXPECT_EQ(
            conn->accept(*qp, 1, 1, nullptr, 0, nullptr, nullptr, &Unexpected::on_request, &cb),
            kDead);
      }
      EXPECT_EQ(conn->complete_connect(nullptr, nullptr, nullptr, nullptr), kDead);
      EXPECT_EQ(conn->reject(nullptr, 0), kDead);
      uint32_t in = 0, out = 0, len = 0;
      EXPECT_EQ(conn->get_connection_data(&in, &out, nullptr, &len), kDead);
      sockaddr_in6 addr6{};
      len = sizeof(addr6);
      EXPECT_EQ(conn->get_local_address(reinterpret_cast<sockaddr*>(&addr6), &len), kDead);
      EXPECT_EQ(conn->get_peer_address(reinterpret_cast<sockaddr*>(&addr6), &len), kDead);
      EXPECT_EQ(conn->disconnect(&Unexpected::on_request, &cb), kDead);
      EXPECT_EQ(conn->disconnect(nullptr, nullptr), kDead);
    }
    if (listener) {
      SCOPED_TRACE("listener");
      EXPECT_EQ(listener->object_type(), ObjectType::kListener);
      const auto at = v4(0xC0000201, 0);
      EXPECT_EQ(listener->listen(sa(at), sizeof(at), nullptr, nullptr), kDead);
      sockaddr_in la{};
      uint32_t len = sizeof(la);
      EXPECT_EQ(listener->get_local_address(reinterpret_cast<sockaddr*>(&la), &len), kDead);
      listener->control_connect_events(true);
      listener->control_connect_events(false);
    }
    EXPECT_EQ(cb.calls.load(), 0);
  }

  // Lets every handle go in `order`.
  void release(Order order) {
    std::vector<std::function<Status(Unexpected*)>> closes;
    auto add = [&](auto& h) {
      closes.push_back([&h, order](Unexpected* cb) {
        if (order != Order::kCloseWithCompletion) {
          h.reset();
          return Status::kSuccess;
        }
        return h.close(&Unexpected::on_close, cb);
      });
    };
    add(pd);
    add(cq);
    add(mr);
    add(fmr);
    add(mw);
    add(srq);
    add(qp);
    add(srq_qp);
    add(conn);
    add(listener);
    if (order == Order::kReverse) std::reverse(closes.begin(), closes.end());
    Unexpected cb;
    for (auto& c : closes) EXPECT_EQ(c(&cb), Status::kSuccess);
    EXPECT_EQ(cb.calls.load(), 0);
    EXPECT_FALSE(pd || cq || mr || fmr || mw || srq || qp || srq_qp || conn || listener);
  }
};

struct Case {
  Kind kind;
  Order order;
  Gone gone;
};

std::string to_string(const Case& c) {
  return std::string(name(c.kind)) + name(c.order) +
         (c.gone == Gone::kAdapter ? "AdapterFirst" : "PairFirst");
}
void PrintTo(const Case& c, std::ostream* os) { *os << to_string(c); }
std::string case_name(const ::testing::TestParamInfo<Case>& i) { return to_string(i.param); }

std::vector<Case> all_cases() {
  std::vector<Case> v;
  for (Kind k : {Kind::kPd, Kind::kCq, Kind::kMr, Kind::kFastMr, Kind::kMw, Kind::kSrq, Kind::kQp,
                 Kind::kSrqQp, Kind::kConnector, Kind::kListener, Kind::kAll}) {
    for (Order o : {Order::kForward, Order::kReverse, Order::kCloseWithCompletion})
      v.push_back({k, o, Gone::kAdapter});
  }
  // The engine and the other adapter go too: nothing left may reach them.
  for (Order o : {Order::kForward, Order::kReverse})
    v.push_back({Kind::kAll, o, Gone::kPairAndEngine});
  return v;
}

class ApiAdapterClose : public EalTestWithParam<Case> {};

TEST_P(ApiAdapterClose, HandlesOutliveTheAdapter) {
  static int n = 0;
  const Case c = GetParam();
  Unexpected events;
  Objects o;
  // Side B's end of the connected QP and the region it names; they outlive B's adapter too.
  Handle<Qp> peer;
  Handle<Mr> peer_mr;
  auto p = std::make_unique<ApiPair>("aclose" + std::to_string(n++));
  ASSERT_NO_FATAL_FAILURE(o.create(*p, c.kind, &peer, &events));
  ASSERT_NO_FATAL_FAILURE(o.post_outstanding(*p, &peer_mr));
  if (c.gone == Gone::kAdapter) {
    p->a.adapter.reset();  // blocks until every object of A is closed (not freed)
    // Side B (same engine) still works, and its own objects are untouched.
    p->run_for(5ms);
    Handle<Pd> pd;
    EXPECT_EQ(p->b.adapter->create_pd(nullptr, nullptr, &pd), Status::kSuccess);
    // A CQ left from A is another adapter's for B: refused, not used.
    if (o.cq) {
      Handle<Qp> q;
      EXPECT_EQ(p->b.pd->create_qp(*o.cq, *p->b.cq, nullptr, 4, 4, 1, 1, 0, nullptr, nullptr, &q),
                Status::kInvalidParameter);
    }
    // B's QP may use A's leftovers only as the closed objects they are.
    if (o.mr && o.mw) {
      Handle<Qp> q;
      ASSERT_EQ(
          p->b.pd->create_qp(*p->b.cq, *p->b.cq, nullptr, 4, 4, 1, 1, 0, nullptr, nullptr, &q),
          Status::kSuccess);
      EXPECT_EQ(q->bind(ctx(1), *o.mr, *o.mw, o.buf.data(), 64, 0), Status::kInvalidDeviceState);
      EXPECT_EQ(q->invalidate(ctx(1), *o.mw, 0), Status::kInvalidDeviceState);
    }
  } else {
    p.reset();  // both adapters, then the engine
  }
  o.expect_inert();
  o.release(c.order);
  EXPECT_EQ(events.calls.load(), 0);
}

INSTANTIATE_TEST_SUITE_P(Kinds, ApiAdapterClose, ::testing::ValuesIn(all_cases()), case_name);

// A connection made through the CM (listener on B, connector on A, engine on lcore 1), then both
// adapters and the engine go before any handle: connectors, listener and QPs on both sides.
class ApiAdapterCloseCm : public EalTest {};

struct Passive {
  Qp* qp = nullptr;
  std::atomic<Connector*> conn{nullptr};
  Completion accepted;
  static void on_connect(void* ctx, Connector* c) {
    auto* self = static_cast<Passive*>(ctx);
    self->conn.store(c);
    EXPECT_EQ(c->accept(*self->qp, 1, 1, nullptr, 0, nullptr, nullptr, &Completion::on_request,
                        &self->accepted),
              Status::kPending);
  }
};

TEST_F(ApiAdapterCloseCm, ConnectedThroughTheCmThenEverythingGoes) {
  for (Order order : {Order::kForward, Order::kReverse}) {
    SCOPED_TRACE(name(order));
    static int n = 0;
    Objects oa, ob;  // A's and B's leftovers
    Handle<Connector> b_conn;
    Passive pas;
    Completion connected;
    {
      EngineConfig ec;
      ec.idle_yield_after = 256;
      ApiPair p("acm" + std::to_string(n++), ec);
      ASSERT_TRUE(p.engine().launch(1));
      for (auto [s, o] : {std::pair{&p.a, &oa}, std::pair{&p.b, &ob}}) {
        ASSERT_EQ(s->adapter->create_pd(nullptr, nullptr, &o->pd), Status::kSuccess);
        ASSERT_EQ(s->adapter->create_cq(64, nullptr, nullptr, nullptr, nullptr, &o->cq),
                  Status::kSuccess);
        ASSERT_EQ(
            o->pd->create_qp(*o->cq, *o->cq, nullptr, 16, 16, 1, 1, 64, nullptr, nullptr, &o->qp),
            Status::kSuccess);
        o->mr = s->reg(o->buf.data(), o->buf.size(), mr_flag::kAllowLocalWrite);
      }
      pas.qp = ob.qp.get();
      ASSERT_EQ(
          create_listener(*p.b.adapter, &Passive::on_connect, &pas, nullptr, nullptr, &ob.listener),
          Status::kSuccess);
      const auto at = v4(0, 18600);
      ASSERT_EQ(ob.listener->listen(sa(at), sizeof(at), nullptr, nullptr), Status::kSuccess);
      ASSERT_EQ(create_connector(*p.a.adapter, nullptr, nullptr, &oa.conn), Status::kSuccess);
      const auto dst = v4(0xC0000202, 18600);
      ASSERT_EQ(oa.conn->connect(*oa.qp, nullptr, 0, sa(dst), sizeof(dst), 1, 1, nullptr, 0,
                                 &Completion::on_request, &connected),
                Status::kPending);
      ASSERT_TRUE(eventually([&] { return connected.count() == 1; }));
      ASSERT_EQ(connected.status, Status::kSuccess);
      ASSERT_EQ(oa.conn->complete_connect(nullptr, nullptr, nullptr, nullptr), Status::kSuccess);
      ASSERT_TRUE(eventually([&] { return pas.accepted.count() == 1; }));
      ASSERT_EQ(pas.accepted.status, Status::kSuccess);
      b_conn = Handle<Connector>(pas.conn.load());
      // Work outstanding on both: receives, and a SEND each way (the receives are too short
      // for nothing; they match).
      const Sge sa_{addr(oa.buf.data()), 64, oa.mr->get_local_token()};
      const Sge sb_{addr(ob.buf.data()), 64, ob.mr->get_local_token()};
      ASSERT_EQ(oa.qp->receive(ctx(1), {&sa_, 1}), Status::kSuccess);
      ASSERT_EQ(oa.qp->send(ctx(2), {&sa_, 1}, 0), Status::kSuccess);
      ASSERT_EQ(oa.qp->send(ctx(3), {&sa_, 1}, 0), Status::kSuccess);
      ASSERT_EQ(ob.qp->send(ctx(4), {&sb_, 1}, 0), Status::kSuccess);
    }  // both adapters close with the connection up, then the engine stops
    oa.expect_inert();
    ob.conn = std::move(b_conn);
    ob.expect_inert();
    oa.release(order);
    ob.release(order);
  }
}

}  // namespace
}  // namespace urnic::test

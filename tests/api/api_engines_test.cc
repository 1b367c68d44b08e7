// One adapter spread over several engines (issue 14 items 1, 2 and 9): two adapters, each over
// the same two engines, wired back to back over a two-queue net_ring pair (A's queue i sends to
// B's queue i). Each engine is driven by its own thread with run_once(), as two cores would run
// it; the test thread posts and polls. QPs go to an engine through their CQ's affinity. A QP
// talking to a peer on the other engine has every frame land on the wrong queue (net_ring has no
// RSS: a frame arrives on the queue its sender used), so each is handed off and counted; data is
// checked byte for byte and every completion counted, also with loss injected.
#include <atomic>
#include <thread>

#include "api_fixture.h"
#include "urnic/connector.h"
#include "urnic/listener.h"

namespace urnic::test {
namespace {

class ApiEngines : public EalTest {};

constexpr uint32_t kEngines = 2;

// Two adapters over two engines, each engine stepped by its own thread.
struct EnginePair {
  explicit EnginePair(const std::string& name) {
    for (auto& e : engines) e = std::make_unique<Engine>(EngineConfig{});
    uint16_t pa = 0, pb = 0;
    EXPECT_EQ(create_ring_port_pair(name, kEngines, &pa, &pb), Status::kSuccess);
    AdapterConfig ca, cb;
    ca.port_id = pa;
    cb.port_id = pb;
    ca.ipv4 = 0xC0000201;
    cb.ipv4 = 0xC0000202;
    ca.mac = std::array<uint8_t, 6>{2, 0, 0, 0, 0, 1};
    cb.mac = std::array<uint8_t, 6>{2, 0, 0, 0, 0, 2};
    Engine* const es[] = {engines[0].get(), engines[1].get()};
    EXPECT_EQ(Adapter::open(ca, es, &a), Status::kSuccess);
    EXPECT_EQ(Adapter::open(cb, es, &b), Status::kSuccess);
    if (a) {
      EXPECT_EQ(a->create_pd(nullptr, nullptr, &pda), Status::kSuccess);
    }
    if (b) {
      EXPECT_EQ(b->create_pd(nullptr, nullptr, &pdb), Status::kSuccess);
    }
    for (uint32_t i = 0; i < kEngines; ++i) {
      drivers[i] = std::thread([this, i] {
        while (!stop.load(std::memory_order_relaxed))
          if (!engines[i]->run_once()) std::this_thread::yield();
      });
    }
  }
  ~EnginePair() {
    pda.reset();
    pdb.reset();
    a.reset();
    b.reset();
    stop_drivers();
  }
  void stop_drivers() {
    stop.store(true);
    for (auto& t : drivers)
      if (t.joinable()) t.join();
  }
  // Stops the driver threads and steps both engines from this thread until three rounds in a
  // row find nothing to do: every frame delivered, nothing left in a hand-off ring, and the
  // engines' counters still (they are plain fields the engine writes: read them only now). The
  // adapters' synchronous calls step the engines themselves from here on (AdapterImpl::wait).
  void quiesce() {
    stop_drivers();
    for (int idle = 0; idle < 3;) {
      bool any = false;
      for (auto& e : engines) any |= e->run_once();
      idle = any ? 0 : idle + 1;
    }
  }
  bool ok() const { return a && b && pda && pdb; }

  std::array<std::unique_ptr<Engine>, kEngines> engines;
  std::unique_ptr<Adapter> a, b;
  Handle<Pd> pda, pdb;
  std::atomic<bool> stop{false};
  std::array<std::thread, kEngines> drivers;
};

// A connected QP pair: A's QP on engine `ea`, B's on `eb`, each with its own CQ.
struct Flow {
  uint32_t ea = 0, eb = 0;
  Handle<Cq> cqa, cqb;
  Handle<Qp> qa, qb;
  Handle<Mr> src, dst, rcv;
  std::vector<uint8_t> sbuf, dbuf, rbuf;
  std::vector<ResultEx> done_a, done_b;

  void reset() {
    qa.reset();
    qb.reset();
    src.reset();
    dst.reset();
    rcv.reset();
    cqa.reset();
    cqb.reset();
  }
};

Handle<Mr> reg(Pd& pd, void* p, size_t n, uint32_t flags) {
  Handle<Mr> mr;
  EXPECT_EQ(pd.create_mr(false, nullptr, nullptr, &mr), Status::kSuccess);
  EXPECT_EQ(mr->register_mr(p, n, flags, nullptr, nullptr), Status::kSuccess);
  return mr;
}

constexpr uint32_t kMsgs = 64;     // WRITEs and SENDs per flow
constexpr uint32_t kWrite = 3000;  // three frames at path MTU 1024
constexpr uint32_t kSend = 256;

void open_flow(EnginePair& p, Flow& f, uint32_t ea, uint32_t eb) {
  f.ea = ea;
  f.eb = eb;
  ASSERT_EQ(p.a->create_cq(1024, nullptr, nullptr, uint64_t{1} << ea, nullptr, nullptr, &f.cqa),
            Status::kSuccess);
  ASSERT_EQ(p.b->create_cq(1024, nullptr, nullptr, uint64_t{1} << eb, nullptr, nullptr, &f.cqb),
            Status::kSuccess);
  EXPECT_EQ(f.cqa->query_extension<CqExtension>()->engine(), ea);
  EXPECT_EQ(f.cqb->query_extension<CqExtension>()->engine(), eb);
  ASSERT_EQ(p.pda->create_qp(*f.cqa, *f.cqa, nullptr, 256, 256, 1, 1, 0, nullptr, nullptr, &f.qa),
            Status::kSuccess);
  ASSERT_EQ(p.pdb->create_qp(*f.cqb, *f.cqb, nullptr, 256, 256, 1, 1, 0, nullptr, nullptr, &f.qb),
            Status::kSuccess);
  connect_qps(*f.qa, *p.a, *f.qb, *p.b);
  f.sbuf.resize(kMsgs * kWrite);
  fill(f.sbuf, ea * 2 + eb + 1);
  f.dbuf.assign(kMsgs * kWrite, 0);
  f.rbuf.assign(kMsgs * kSend, 0);
  f.src = reg(*p.pda, f.sbuf.data(), f.sbuf.size(), 0);
  f.dst = reg(*p.pdb, f.dbuf.data(), f.dbuf.size(), mr_flag::kAllowRemoteWrite);
  f.rcv = reg(*p.pdb, f.rbuf.data(), f.rbuf.size(), mr_flag::kAllowLocalWrite);
}

// kMsgs WRITEs of kWrite bytes, then kMsgs SENDs of kSend bytes into posted receives.
void post_flow(Flow& f) {
  for (uint32_t i = 0; i < kMsgs; ++i) {
    const Sge r{addr(&f.rbuf[i * kSend]), kSend, f.rcv->get_local_token()};
    ASSERT_EQ(f.qb->receive(ctx(i), {&r, 1}), Status::kSuccess);
  }
  for (uint32_t i = 0; i < kMsgs; ++i) {
    const Sge s{addr(&f.sbuf[i * kWrite]), kWrite, f.src->get_local_token()};
    ASSERT_EQ(f.qa->write(ctx(i), {&s, 1}, addr(&f.dbuf[i * kWrite]), f.dst->get_remote_token(), 0),
              Status::kSuccess);
  }
  for (uint32_t i = 0; i < kMsgs; ++i) {
    const Sge s{addr(&f.sbuf[i * kSend]), kSend, f.src->get_local_token()};
    ASSERT_EQ(f.qa->send(ctx(kMsgs + i), {&s, 1}, 0), Status::kSuccess);
  }
}

// Polls every flow's CQs (the engines run on their threads) until each has all its completions
// or 30 s pass.
bool wait_flows(std::vector<Flow>& flows) {
  return eventually(
      [&] {
        bool all = true;
        ResultEx r[32];
        for (Flow& f : flows) {
          for (size_t n; (n = f.cqa->get_results_ex(r)) != 0;)
            f.done_a.insert(f.done_a.end(), r, r + n);
          for (size_t n; (n = f.cqb->get_results_ex(r)) != 0;)
            f.done_b.insert(f.done_b.end(), r, r + n);
          all &= f.done_a.size() >= 2 * kMsgs && f.done_b.size() >= kMsgs;
        }
        return all;
      },
      std::chrono::seconds(30));
}

void check_flow(Flow& f) {
  SCOPED_TRACE("flow A engine " + std::to_string(f.ea) + " -> B engine " + std::to_string(f.eb));
  ASSERT_EQ(f.done_a.size(), 2 * kMsgs);
  ASSERT_EQ(f.done_b.size(), kMsgs);
  // In order: the WRITEs, then the SENDs; the receives in posting order.
  for (uint32_t i = 0; i < 2 * kMsgs; ++i) {
    EXPECT_EQ(f.done_a[i].status, Status::kSuccess) << i;
    EXPECT_EQ(f.done_a[i].request_context, ctx(i)) << i;
  }
  for (uint32_t i = 0; i < kMsgs; ++i) {
    EXPECT_EQ(f.done_b[i].status, Status::kSuccess) << i;
    EXPECT_EQ(f.done_b[i].request_context, ctx(i)) << i;
    EXPECT_EQ(f.done_b[i].bytes_transferred, kSend) << i;
  }
  EXPECT_EQ(f.dbuf, f.sbuf);
  EXPECT_TRUE(std::equal(f.rbuf.begin(), f.rbuf.end(), f.sbuf.begin()));
}

QpCounters qp_counters(Qp& q) { return q.query_extension<QpExtension>()->counters(); }

PortCounters engine_counters(Adapter& a, uint32_t e) {
  PortCounters c;
  EXPECT_EQ(a.query_engine_counters(e, &c), Status::kSuccess);
  return c;
}

// Every combination of engines, all four flows at once. A frame for a QP of the other engine
// arrives on the sender's queue, so the receiving adapter hands it over: its hand-offs are
// exactly what its cross-engine QPs received.
void run_all_pairs(EnginePair& p, const FaultConfig& faults) {
  std::vector<Flow> flows(4);
  for (uint32_t i = 0; i < 4; ++i) ASSERT_NO_FATAL_FAILURE(open_flow(p, flows[i], i / 2, i % 2));
  if (faults.active()) {
    FaultConfig fb = faults;
    fb.seed = faults.seed + 100;
    ASSERT_EQ(p.a->query_extension<AdapterExtension>()->set_faults(faults, {}), Status::kSuccess);
    ASSERT_EQ(p.b->query_extension<AdapterExtension>()->set_faults(fb, {}), Status::kSuccess);
  }
  for (Flow& f : flows) ASSERT_NO_FATAL_FAILURE(post_flow(f));
  ASSERT_TRUE(wait_flows(flows));
  for (Flow& f : flows) check_flow(f);
  p.quiesce();

  uint64_t cross_rx_a = 0, cross_rx_b = 0, retransmits = 0;
  for (Flow& f : flows) {
    const QpCounters ca = qp_counters(*f.qa), cb = qp_counters(*f.qb);
    retransmits += ca.retransmits + cb.retransmits;
    if (f.ea != f.eb) {
      cross_rx_a += ca.rx_packets;
      cross_rx_b += cb.rx_packets;
    }
  }
  for (auto [ad, cross] : {std::pair{p.a.get(), cross_rx_a}, std::pair{p.b.get(), cross_rx_b}}) {
    AdapterCounters c;
    ASSERT_EQ(ad->query_counters(&c), Status::kSuccess);
    EXPECT_EQ(c.engines, kEngines);
    EXPECT_GT(cross, 0u);
    EXPECT_EQ(c.port.handoffs_in, cross);
    EXPECT_EQ(c.port.handoffs_out, cross);
    EXPECT_EQ(c.port.rx_drops[static_cast<size_t>(RxDrop::kHandoffFull)], 0u);
    // Each engine received the other's QPs' frames on its own queue and handed them over.
    const PortCounters e0 = engine_counters(*ad, 0), e1 = engine_counters(*ad, 1);
    EXPECT_GT(e0.handoffs_out, 0u);
    EXPECT_GT(e1.handoffs_out, 0u);
    EXPECT_EQ(e0.handoffs_out, e1.handoffs_in);
    EXPECT_EQ(e1.handoffs_out, e0.handoffs_in);
    EXPECT_EQ(e0.rx_packets + e1.rx_packets, c.port.rx_packets);
  }
  if (faults.drop_ppm != 0) {
    EXPECT_GT(retransmits, 0u) << "the injected loss was repaired";
  }
  if (faults.active()) {
    (void)p.a->query_extension<AdapterExtension>()->set_faults({}, {});
    (void)p.b->query_extension<AdapterExtension>()->set_faults({}, {});
  }
  for (Flow& f : flows) f.reset();
}

TEST_F(ApiEngines, QpsOnEitherEngineTalkAcrossAdaptersAndWrongQueueFramesAreHandedOff) {
  EnginePair p("eng2");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p.a->engines(), kEngines);
  run_all_pairs(p, {});
}

TEST_F(ApiEngines, LossOnCrossEngineQpsIsRepaired) {
  EnginePair p("eng2loss");
  ASSERT_TRUE(p.ok());
  FaultConfig f;
  f.drop_ppm = 20000;  // 2 % of each direction's frames
  f.seed = 0xE2;
  run_all_pairs(p, f);
}

// QPs of one engine may share a CQ: both complete into it, in their own order.
TEST_F(ApiEngines, QpsOfOneEngineShareACq) {
  EnginePair p("eng2cq");
  ASSERT_TRUE(p.ok());
  Handle<Cq> cqa, cqb;
  ASSERT_EQ(p.a->create_cq(1024, nullptr, nullptr, 2, nullptr, nullptr, &cqa), Status::kSuccess);
  ASSERT_EQ(p.b->create_cq(1024, nullptr, nullptr, 1, nullptr, nullptr, &cqb), Status::kSuccess);
  std::array<Handle<Qp>, 2> qa, qb;
  std::vector<uint64_t> src{0x1111111111111111ull, 0x2222222222222222ull}, dst(2, 0);
  Handle<Mr> smr = reg(*p.pda, src.data(), 16, 0);
  Handle<Mr> dmr = reg(*p.pdb, dst.data(), 16, mr_flag::kAllowRemoteWrite);
  for (uint32_t i = 0; i < 2; ++i) {
    ASSERT_EQ(p.pda->create_qp(*cqa, *cqa, nullptr, 4, 4, 1, 1, 0, nullptr, nullptr, &qa[i]),
              Status::kSuccess);
    ASSERT_EQ(p.pdb->create_qp(*cqb, *cqb, nullptr, 4, 4, 1, 1, 0, nullptr, nullptr, &qb[i]),
              Status::kSuccess);
    connect_qps(*qa[i], *p.a, *qb[i], *p.b);
    const Sge s{addr(&src[i]), 8, smr->get_local_token()};
    ASSERT_EQ(qa[i]->write(ctx(i), {&s, 1}, addr(&dst[i]), dmr->get_remote_token(), 0),
              Status::kSuccess);
  }
  std::vector<ResultEx> done;
  ASSERT_TRUE(eventually([&] {
    ResultEx r[4];
    const size_t n = cqa->get_results_ex(r);
    done.insert(done.end(), r, r + n);
    return done.size() >= 2;
  }));
  ASSERT_EQ(done.size(), 2u);
  EXPECT_NE(done[0].request_context, done[1].request_context);
  for (const ResultEx& r : done) EXPECT_EQ(r.status, Status::kSuccess);
  EXPECT_EQ(dst, src);
  for (auto& q : qa) q.reset();
  for (auto& q : qb) q.reset();
}

// Placement rules: the default spreads CQs (and so QPs) over the engines; an affinity naming
// none of the adapter's engines is refused; a QP whose CQs, or CQ and SRQ, sit on different
// engines cannot be created (NdkCreateQp: STATUS_INVALID_PARAMETER_MIX).
TEST_F(ApiEngines, PlacementFollowsCqAffinityAndRefusesAMixOfEngines) {
  EnginePair p("eng2mix");
  ASSERT_TRUE(p.ok());
  std::array<Handle<Cq>, 4> spread;
  for (uint32_t i = 0; i < 4; ++i) {
    ASSERT_EQ(p.a->create_cq(16, nullptr, nullptr, nullptr, nullptr, &spread[i]), Status::kSuccess);
    EXPECT_EQ(spread[i]->query_extension<CqExtension>()->engine(), i % 2) << "CQ " << i;
  }
  Handle<Cq> none, c0, c1;
  EXPECT_EQ(p.a->create_cq(16, nullptr, nullptr, 4, nullptr, nullptr, &none),
            Status::kInvalidParameter);
  ASSERT_EQ(p.a->create_cq(16, nullptr, nullptr, 1, nullptr, nullptr, &c0), Status::kSuccess);
  ASSERT_EQ(p.a->create_cq(16, nullptr, nullptr, 2, nullptr, nullptr, &c1), Status::kSuccess);
  Handle<Qp> q;
  EXPECT_EQ(p.pda->create_qp(*c0, *c1, nullptr, 4, 4, 1, 1, 0, nullptr, nullptr, &q),
            Status::kInvalidParameterMix);
  Handle<Srq> srq1;
  ASSERT_EQ(p.pda->create_srq(16, 1, 0, nullptr, nullptr, 2, nullptr, nullptr, &srq1),
            Status::kSuccess);
  EXPECT_EQ(p.pda->create_qp_with_srq(*c0, *c0, *srq1, nullptr, 4, 1, 0, nullptr, nullptr, &q),
            Status::kInvalidParameterMix);
  EXPECT_EQ(p.pda->create_qp_with_srq(*c1, *c1, *srq1, nullptr, 4, 1, 0, nullptr, nullptr, &q),
            Status::kSuccess);
  q.reset();
  PortCounters pc;
  EXPECT_EQ(p.a->query_engine_counters(2, &pc), Status::kInvalidParameter);
  EXPECT_EQ(p.a->query_engine_counters(0, nullptr), Status::kInvalidParameter);
  srq1.reset();
  for (auto& c : spread) c.reset();
}

// The connection manager with QPs off engine 0: its MADs travel on engine 0's queue (the other
// engine hands them there), its QP transitions go to each QP's own engine. A's QP on engine 1,
// B's on engine 0: a connection across engines, then data both ways.
struct Accepting {
  Qp* qp = nullptr;
  std::atomic<Connector*> conn{nullptr};
  Completion accepted;
  static void on_connect(void* ctx, Connector* c) {
    auto* self = static_cast<Accepting*>(ctx);
    self->conn.store(c);
    EXPECT_EQ(c->accept(*self->qp, 4, 4, nullptr, 0, nullptr, nullptr, &Completion::on_request,
                        &self->accepted),
              Status::kPending);
  }
};

TEST_F(ApiEngines, ConnectionManagerConnectsQpsOnEitherEngine) {
  EnginePair p("eng2cm");
  ASSERT_TRUE(p.ok());
  Handle<Cq> cqa, cqb;
  ASSERT_EQ(p.a->create_cq(64, nullptr, nullptr, 2, nullptr, nullptr, &cqa), Status::kSuccess);
  ASSERT_EQ(p.b->create_cq(64, nullptr, nullptr, 1, nullptr, nullptr, &cqb), Status::kSuccess);
  Handle<Qp> qa, qb;
  ASSERT_EQ(p.pda->create_qp(*cqa, *cqa, nullptr, 16, 16, 1, 1, 0, nullptr, nullptr, &qa),
            Status::kSuccess);
  ASSERT_EQ(p.pdb->create_qp(*cqb, *cqb, nullptr, 16, 16, 1, 1, 0, nullptr, nullptr, &qb),
            Status::kSuccess);
  std::vector<uint8_t> src(3000), dst(3000, 0);
  fill(src, 7);
  Handle<Mr> ms = reg(*p.pda, src.data(), src.size(), 0);
  Handle<Mr> md = reg(*p.pdb, dst.data(), dst.size(), mr_flag::kAllowLocalWrite);
  const Sge r{addr(dst.data()), 3000, md->get_local_token()};
  ASSERT_EQ(qb->receive(ctx(1), {&r, 1}), Status::kSuccess);

  Accepting acc;
  acc.qp = qb.get();
  Handle<Listener> l;
  ASSERT_EQ(create_listener(*p.b, &Accepting::on_connect, &acc, nullptr, nullptr, &l),
            Status::kSuccess);
  ASSERT_EQ(l->listen(sa(v4(0, 18600)), sizeof(sockaddr_in), nullptr, nullptr), Status::kSuccess);
  Handle<Connector> c;
  ASSERT_EQ(create_connector(*p.a, nullptr, nullptr, &c), Status::kSuccess);
  Completion connected;
  const auto dst_addr = v4(0xC0000202, 18600);
  ASSERT_EQ(c->connect(*qa, nullptr, 0, sa(dst_addr), sizeof(dst_addr), 4, 4, nullptr, 0,
                       &Completion::on_request, &connected),
            Status::kPending);
  ASSERT_TRUE(eventually([&] { return connected.count() == 1; }));
  ASSERT_EQ(connected.status, Status::kSuccess);
  ASSERT_EQ(c->complete_connect(nullptr, nullptr, nullptr, nullptr), Status::kSuccess);
  ASSERT_TRUE(eventually([&] { return acc.accepted.count() == 1; }));
  ASSERT_EQ(acc.accepted.status, Status::kSuccess);
  Handle<Connector> bc(acc.conn.load());

  const Sge s{addr(src.data()), 3000, ms->get_local_token()};
  ASSERT_EQ(qa->send(ctx(2), {&s, 1}, 0), Status::kSuccess);
  std::vector<ResultEx> da, db;
  ASSERT_TRUE(eventually([&] {
    ResultEx x[4];
    size_t n = cqa->get_results_ex(x);
    da.insert(da.end(), x, x + n);
    n = cqb->get_results_ex(x);
    db.insert(db.end(), x, x + n);
    return da.size() >= 1 && db.size() >= 1;
  }));
  ASSERT_EQ(da.size(), 1u);
  ASSERT_EQ(db.size(), 1u);
  EXPECT_EQ(da[0].status, Status::kSuccess);
  EXPECT_EQ(db[0].status, Status::kSuccess);
  EXPECT_EQ(db[0].bytes_transferred, 3000u);
  EXPECT_EQ(dst, src);
  Completion disc;
  ASSERT_EQ(c->disconnect(&Completion::on_request, &disc), Status::kPending);
  ASSERT_TRUE(eventually([&] { return disc.count() == 1; }));
  EXPECT_EQ(disc.status, Status::kSuccess);
  p.quiesce();
  // The data frames crossed engines: A's QP sends on A's queue 1, which is B's queue 1, whose
  // engine hands them to engine 0.
  EXPECT_GT(engine_counters(*p.b, 1).handoffs_out, 0u);
  EXPECT_GT(engine_counters(*p.a, 0).handoffs_out, 0u);  // B's ACKs, from queue 0 to engine 1

  c.reset();
  bc.reset();
  l.reset();
  qa.reset();
  qb.reset();
}

}  // namespace
}  // namespace urnic::test

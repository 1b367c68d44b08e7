// NDK's asynchronous protocol and object lifetime through the public API (ndkpi.md §1.3-§1.4):
// kPending creates and closes complete exactly once on the control thread; an antecedent closed
// before its successors pends until the last one is closed and its close callback comes after
// theirs; the close callback is the last callback of an object (also when the close is called
// from inside the object's own notification callback); adapter close cleans up what the consumer
// left open; adapters open and close while their engine runs.
#include <algorithm>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "api_fixture.h"

namespace urnic::test {
namespace {

class ApiLifetime : public EalTest {};

// An ordered log of callbacks ("close:cq", "notify:cq", ...).
struct Log {
  std::mutex mu;
  std::vector<std::string> events;
  std::vector<std::thread::id> threads;
  void add(std::string e) {
    std::lock_guard lk(mu);
    events.push_back(std::move(e));
    threads.push_back(std::this_thread::get_id());
  }
  size_t size() {
    std::lock_guard lk(mu);
    return events.size();
  }
  std::vector<std::string> snapshot() {
    std::lock_guard lk(mu);
    return events;
  }
};

struct Tagged {
  Log* log;
  std::string tag;
  static void on_close(void* c) {
    auto* t = static_cast<Tagged*>(c);
    t->log->add("close:" + t->tag);
  }
};

// A 4 KiB WRITE from p.a to p.b, checked byte for byte, its completion counted (the n-th of
// p.a's); `seed` varies the bytes.
void write_through(ApiPair& p, uint8_t seed, size_t n) {
  std::vector<uint8_t> src(4096), dst(4096, 0);
  fill(src, seed);
  auto ms = p.a.reg(src.data(), src.size(), 0);
  auto md = p.b.reg(dst.data(), dst.size(), mr_flag::kAllowRemoteWrite);
  const Sge s{addr(src.data()), 4096, ms->get_local_token()};
  ASSERT_EQ(p.a.qp->write(ctx(n), {&s, 1}, addr(dst.data()), md->get_remote_token(), 0),
            Status::kSuccess);
  ASSERT_TRUE(p.wait_done(n, 0));
  ASSERT_EQ(p.a.done.size(), n);
  EXPECT_EQ(p.a.done[n - 1].status, Status::kSuccess);
  EXPECT_EQ(p.a.done[n - 1].request_context, ctx(n));
  EXPECT_EQ(dst, src);
}

// Issue 14 item 6: adapters open on an engine that runs already (Adapter::open refused a
// launched engine with kInvalidParameter before) and close while it keeps running; the
// adapters it serves besides carry on, and a new one opens after the others closed.
TEST_F(ApiLifetime, AdaptersOpenAndCloseWhileTheirEngineRuns) {
  EngineConfig ec;
  ec.idle_yield_after = 256;
  ApiPair first("lt_run0", ec);
  ASSERT_TRUE(first.engine().launch(1));
  first.connect();
  write_through(first, 1, 1);
  {
    ApiPair second("lt_run1", first.engine());
    ASSERT_TRUE(second.a.adapter && second.b.adapter && second.a.cq && second.b.cq);
    second.connect();
    write_through(second, 2, 1);
    write_through(first, 3, 2);
    write_through(second, 4, 2);
  }  // second's objects and adapters close here, the engine running
  ASSERT_TRUE(first.engine().running());
  write_through(first, 5, 3);
  ApiPair third("lt_run2", first.engine());
  ASSERT_TRUE(third.a.adapter && third.b.adapter);
  third.connect();
  write_through(third, 6, 1);
  write_through(first, 7, 4);
}

// An engine serves up to 8 adapters: a ninth is refused with kInsufficientResources (it used to
// be taken and never served), and opens once another has closed.
TEST_F(ApiLifetime, AnEngineServesEightAdaptersAndRefusesANinth) {
  ApiPair p0("lt_max0");
  ApiPair p1("lt_max1", p0.engine());
  ApiPair p2("lt_max2", p0.engine());
  auto p3 = std::make_unique<ApiPair>("lt_max3", p0.engine());
  ASSERT_TRUE(p3->a.adapter && p3->b.adapter);
  uint16_t pa = 0, pb = 0;
  ASSERT_EQ(create_ring_port_pair("lt_max4", 1, &pa, &pb), Status::kSuccess);
  AdapterConfig c;
  c.port_id = pa;
  c.ipv4 = 0xC0000209;
  std::unique_ptr<Adapter> ninth;
  EXPECT_EQ(Adapter::open(c, p0.engine(), &ninth), Status::kInsufficientResources);
  EXPECT_FALSE(ninth);
  p3.reset();  // two adapters close
  ASSERT_EQ(Adapter::open(c, p0.engine(), &ninth), Status::kSuccess);
  p0.connect();
  write_through(p0, 8, 1);  // the first adapters still served
}

TEST_F(ApiLifetime, PendingCreateCompletesExactlyOnceOnTheControlThread) {
  ApiPair p("life_create");
  Completion c;
  Handle<Qp> unused;
  ASSERT_EQ(p.a.pd->create_qp(*p.a.cq, *p.a.cq, nullptr, 4, 4, 1, 1, 0, &Completion::on_create, &c,
                              &unused),
            Status::kPending);
  EXPECT_FALSE(unused);  // *out is not written when the create pends
  ASSERT_TRUE(p.run_until([&] { return c.count() == 1; }));
  p.run_for(kQuiet);
  EXPECT_EQ(c.count(), 1);
  ASSERT_EQ(c.status, Status::kSuccess);
  ASSERT_NE(c.object, nullptr);
  EXPECT_EQ(c.object->object_type(), ObjectType::kQp);
  Handle<Qp> q(static_cast<Qp*>(c.object));
  const LocalBuffer buf(p.a, 8);
  EXPECT_EQ(q->receive(nullptr, {&buf.sge, 1}), Status::kSuccess);
  // Object types of the others.
  EXPECT_EQ(p.a.cq->object_type(), ObjectType::kCq);
  EXPECT_EQ(p.a.pd->object_type(), ObjectType::kPd);
  EXPECT_EQ(buf.mr->object_type(), ObjectType::kMr);
}

TEST_F(ApiLifetime, CloseReturnsSuccessOrPendingWithOneCallback) {
  ApiPair p("life_close");
  Log log;
  Handle<Mr> mr;
  Handle<Mw> mw;
  Handle<Pd> pd;
  ASSERT_EQ(p.a.adapter->create_pd(nullptr, nullptr, &pd), Status::kSuccess);
  ASSERT_EQ(pd->create_mr(false, nullptr, nullptr, &mr), Status::kSuccess);
  ASSERT_EQ(pd->create_mw(nullptr, nullptr, &mw), Status::kSuccess);
  Tagged tmr{&log, "mr"}, tmw{&log, "mw"}, tpd{&log, "pd"}, tqp{&log, "qp"};
  // No successors, nothing in flight: closed now, and the callback is not called.
  EXPECT_EQ(mr.close(&Tagged::on_close, &tmr), Status::kSuccess);
  EXPECT_EQ(mw.close(&Tagged::on_close, &tmw), Status::kSuccess);
  Handle<Qp> q;
  ASSERT_EQ(pd->create_qp(*p.a.cq, *p.a.cq, nullptr, 4, 4, 1, 1, 0, nullptr, nullptr, &q),
            Status::kSuccess);
  // A QP close needs the engine: pending, one callback.
  EXPECT_EQ(q.close(&Tagged::on_close, &tqp), Status::kPending);
  ASSERT_TRUE(p.run_until([&] { return log.size() == 1; }));
  EXPECT_EQ(pd.close(&Tagged::on_close, &tpd), Status::kSuccess);
  p.run_for(kQuiet);
  EXPECT_EQ(log.snapshot(), std::vector<std::string>{"close:qp"});
  EXPECT_NE(log.threads[0], std::this_thread::get_id());
  // Closing through a raw pointer twice: the second is ignored.
  Handle<Pd> pd2;
  ASSERT_EQ(p.a.adapter->create_pd(nullptr, nullptr, &pd2), Status::kSuccess);
  Pd* raw = pd2.release();
  EXPECT_EQ(raw->close(), Status::kSuccess);
}

// ndkpi.md §1.4: antecedents (PD, CQ, SRQ) closed before their successors pend; their close
// callbacks come after the successors' and never before the last one is closed.
TEST_F(ApiLifetime, AntecedentsClosedFirstPendUntilTheirSuccessorsAreGone) {
  ApiPair p("life_order");
  Log log;
  Handle<Pd> pd;
  Handle<Cq> cq;
  Handle<Srq> srq;
  Handle<Qp> q1, q2;
  Handle<Mr> mr;
  ASSERT_EQ(p.a.adapter->create_pd(nullptr, nullptr, &pd), Status::kSuccess);
  ASSERT_EQ(p.a.adapter->create_cq(64, nullptr, nullptr, nullptr, nullptr, &cq), Status::kSuccess);
  ASSERT_EQ(pd->create_srq(8, 1, 0, nullptr, nullptr, nullptr, nullptr, &srq), Status::kSuccess);
  ASSERT_EQ(pd->create_qp(*cq, *cq, nullptr, 4, 4, 1, 1, 0, nullptr, nullptr, &q1),
            Status::kSuccess);
  ASSERT_EQ(pd->create_qp_with_srq(*cq, *cq, *srq, nullptr, 4, 1, 0, nullptr, nullptr, &q2),
            Status::kSuccess);
  ASSERT_EQ(pd->create_mr(false, nullptr, nullptr, &mr), Status::kSuccess);
  Tagged tpd{&log, "pd"}, tcq{&log, "cq"}, tsrq{&log, "srq"}, tq1{&log, "q1"}, tq2{&log, "q2"},
      tmr{&log, "mr"};
  Pd* pd_raw = pd.get();
  Cq* cq_raw = cq.get();
  EXPECT_EQ(pd.close(&Tagged::on_close, &tpd), Status::kPending);
  EXPECT_EQ(cq.close(&Tagged::on_close, &tcq), Status::kPending);
  EXPECT_EQ(srq.close(&Tagged::on_close, &tsrq), Status::kPending);
  p.run_for(kQuiet);
  EXPECT_EQ(log.size(), 0u);
  // The consumer promised not to use a closed object; the provider refuses if it does.
  Handle<Qp> late;
  EXPECT_EQ(pd_raw->create_qp(*p.a.cq, *p.a.cq, nullptr, 4, 4, 1, 1, 0, nullptr, nullptr, &late),
            Status::kInvalidDeviceState);
  EXPECT_EQ(p.a.pd->create_qp(*cq_raw, *p.a.cq, nullptr, 4, 4, 1, 1, 0, nullptr, nullptr, &late),
            Status::kInvalidDeviceState);
  Handle<Mr> late_mr;
  EXPECT_EQ(pd_raw->create_mr(false, nullptr, nullptr, &late_mr), Status::kInvalidDeviceState);
  EXPECT_EQ(q1.close(&Tagged::on_close, &tq1), Status::kPending);
  ASSERT_TRUE(p.run_until([&] { return log.size() == 1; }));
  p.run_for(kQuiet);
  EXPECT_EQ(log.snapshot(), std::vector<std::string>{"close:q1"});  // q2 still holds all three
  EXPECT_EQ(mr.close(&Tagged::on_close, &tmr), Status::kSuccess);
  EXPECT_EQ(q2.close(&Tagged::on_close, &tq2), Status::kPending);
  ASSERT_TRUE(p.run_until([&] { return log.size() == 5; }));
  const auto ev = log.snapshot();
  EXPECT_EQ(ev[0], "close:q1");
  EXPECT_EQ(ev[1], "close:q2");
  // The three antecedents, after q2, in any order.
  std::vector<std::string> rest(ev.begin() + 2, ev.end());
  std::sort(rest.begin(), rest.end());
  EXPECT_EQ(rest, (std::vector<std::string>{"close:cq", "close:pd", "close:srq"}));
}

struct CloseFromCallback {
  explicit CloseFromCallback(Log* l) : log(l), tcq{l, "cq"}, tqp{l, "qp"} {}
  Log* log;
  Cq* cq = nullptr;
  Qp* qp = nullptr;
  std::atomic<int> notes{0};
  Tagged tcq, tqp;
  static void notify(void* c, Status) {
    auto* self = static_cast<CloseFromCallback*>(c);
    self->log->add("notify:cq");
    if (self->notes.fetch_add(1) == 0) {
      // Close the CQ from inside its own callback (it still has a QP: pending), then the QP.
      EXPECT_EQ(self->cq->close(&Tagged::on_close, &self->tcq), Status::kPending);
      EXPECT_EQ(self->qp->close(&Tagged::on_close, &self->tqp), Status::kPending);
    }
  }
};

// A QP of A's PD on `cq` (both queues) with `n` 8-byte receives posted (contexts 1 to n) into a
// registered buffer that this object keeps.
struct Receives {
  std::unique_ptr<LocalBuffer> buf;
  void post(ApiPair& p, Cq& cq, uintptr_t n, Handle<Qp>* q) {
    ASSERT_EQ(p.a.pd->create_qp(cq, cq, nullptr, 4, 4, 1, 1, 0, nullptr, nullptr, q),
              Status::kSuccess);
    buf = std::make_unique<LocalBuffer>(p.a, 8);
    for (uintptr_t i = 1; i <= n; ++i)
      ASSERT_EQ((*q)->receive(ctx(i), {&buf->sge, 1}), Status::kSuccess);
  }
};

TEST_F(ApiLifetime, CloseFromInsideANotificationIsTheLastCallback) {
  ConnectedPair p("life_cb");
  Log log;
  CloseFromCallback cfc(&log);
  Handle<Cq> cq;
  ASSERT_EQ(p.a.adapter->create_cq(64, &CloseFromCallback::notify, &cfc, nullptr, nullptr, &cq),
            Status::kSuccess);
  Handle<Qp> q;
  Receives r;
  ASSERT_NO_FATAL_FAILURE(r.post(p, *cq, 2, &q));
  cfc.cq = cq.release();
  cfc.qp = q.release();
  cfc.cq->arm(CqNotify::kAny);
  cfc.qp->flush();  // two flushed receives: the first satisfies the arm
  ASSERT_TRUE(p.run_until([&] { return log.size() == 3; }));
  p.run_for(kQuiet);
  EXPECT_EQ(log.snapshot(), (std::vector<std::string>{"notify:cq", "close:qp", "close:cq"}));
}

TEST_F(ApiLifetime, SynchronousRequestsAreRefusedInsideCallbacks) {
  ApiPair p("life_sync");
  struct Ctx {
    Pd* pd;
    Cq* cq;
    std::atomic<int> done{0};
    Status create = Status::kPending;
  } c{p.a.pd.get(), p.a.cq.get()};
  Handle<Cq> cq;
  ASSERT_EQ(p.a.adapter->create_cq(
                64,
                [](void* v, Status) {
                  auto* x = static_cast<Ctx*>(v);
                  Handle<Qp> q;
                  x->create = x->pd->create_qp(*x->cq, *x->cq, nullptr, 4, 4, 1, 1, 0, nullptr,
                                               nullptr, &q);
                  x->done.store(1);
                },
                &c, nullptr, nullptr, &cq),
            Status::kSuccess);
  Handle<Qp> q;
  Receives r;
  ASSERT_NO_FATAL_FAILURE(r.post(p, *cq, 1, &q));
  cq->arm(CqNotify::kAny);
  q->flush();
  ASSERT_TRUE(p.run_until([&] { return c.done.load() == 1; }));
  EXPECT_EQ(c.create, Status::kInvalidDeviceState);
}

// The consumer leaves objects open (and even pending work): closing the adapter closes them
// (flushes the QP, deregisters the MR, ...). What the consumer holds stays valid, inert, until it
// closes it (tests/api/api_adapter_close_test.cc has every call on such objects).
TEST_F(ApiLifetime, AdapterCloseCleansUpWhatTheConsumerLeftOpen) {
  ConnectedPair p("life_leak");
  LocalBuffer buf(p.a, 8);
  ASSERT_EQ(p.a.qp->receive(ctx(1), {&buf.sge, 1}), Status::kSuccess);
  Handle<Mw> mw;
  ASSERT_EQ(p.a.pd->create_mw(nullptr, nullptr, &mw), Status::kSuccess);
  Completion pending;
  Handle<Qp> ignored;
  ASSERT_EQ(p.a.pd->create_qp(*p.a.cq, *p.a.cq, nullptr, 4, 4, 1, 1, 0, &Completion::on_create,
                              &pending, &ignored),
            Status::kPending);
  // Leave everything of a's side open; the adapter close must not hang or crash.
  std::vector<Object*> left = {buf.mr.release(), mw.release(), p.a.qp.release(), p.a.cq.release(),
                               p.a.pd.release()};
  p.a.adapter.reset();
  EXPECT_EQ(pending.count(), 1);  // the pending create completed before the adapter closed
  ASSERT_EQ(pending.status, Status::kSuccess);
  left.push_back(pending.object);
  // Torn down: the QP takes no work and its flushed receive went with its CQ.
  Qp* q = static_cast<Qp*>(left[2]);
  EXPECT_EQ(q->receive(ctx(2), {&buf.sge, 1}), Status::kInvalidDeviceState);
  ResultEx r;
  EXPECT_EQ(static_cast<Cq*>(left[3])->get_results_ex({&r, 1}), 0u);
  // Closing each frees it, now, without a callback.
  Completion closed;
  for (Object* o : left) EXPECT_EQ(o->close(&Completion::on_close, &closed), Status::kSuccess);
  EXPECT_EQ(closed.count(), 0);
}

}  // namespace
}  // namespace urnic::test

// Multi-threaded stress of the public API with the engine on its own lcore (EAL lcores 0-1,
// EngineConfig::idle_yield_after set, as on a 2-core CI machine): several application threads,
// each with its own QPs and CQs, post (writes, sends with receives, reads, deferred chains) and
// poll concurrently, one of them sleeping on CQ notifications when idle; meanwhile a control
// thread keeps creating and closing PDs, CQs, MRs, MWs, SRQs and connected QP pairs (antecedents
// first or last, synchronously and asynchronously, with traffic on the temporary pairs). Every
// completion, every byte and every close callback is accounted for.
#include <cstring>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "api_fixture.h"

namespace urnic::test {
namespace {

class ApiStress : public EalTest {};

constexpr int kWorkers = 3;
constexpr uint32_t kOpsPerWorker = 20000;
constexpr uint32_t kSlot = 256;
constexpr uint32_t kSlots = 32;
constexpr uint32_t kDepth = 64;
constexpr auto kDeadline = std::chrono::seconds(120);

struct Wake {
  std::atomic<int> n{0};
  static void cb(void* c, Status) { static_cast<Wake*>(c)->n.fetch_add(1); }
};

struct Worker {
  int id = 0;
  Wake wake;
  Handle<Cq> acq, bcq;
  Handle<Qp> qa, qb;
  std::vector<uint8_t> src, dst, back, rbuf;
  Handle<Mr> msrc, mdst, mback, mrbuf;
  uint64_t posted = 0, completed = 0, recv_posted = 0, received = 0;
  std::atomic<int> errors{0};
  std::string first_error;
};

void setup(ApiPair& p, Worker& w) {
  ASSERT_EQ(p.a.adapter->create_cq(4 * kDepth, w.id == 0 ? &Wake::cb : nullptr, &w.wake, nullptr,
                                   nullptr, &w.acq),
            Status::kSuccess);
  ASSERT_EQ(p.b.adapter->create_cq(4 * kDepth, nullptr, nullptr, nullptr, nullptr, &w.bcq),
            Status::kSuccess);
  ASSERT_EQ(
      p.a.pd->create_qp(*w.acq, *w.acq, &w, kDepth, kDepth, 2, 2, 64, nullptr, nullptr, &w.qa),
      Status::kSuccess);
  ASSERT_EQ(
      p.b.pd->create_qp(*w.bcq, *w.bcq, &w, kDepth, kDepth, 2, 2, 64, nullptr, nullptr, &w.qb),
      Status::kSuccess);
  ApiPair::connect_qps(p.a, *w.qa, p.b, *w.qb);
  w.src.resize(kSlot * kSlots);
  fill(w.src, 100 + w.id);
  w.dst.assign(kSlot * kSlots, 0);
  w.back.assign(kSlot * kSlots, 0);
  w.rbuf.assign(kSlot * kSlots, 0);
  w.msrc = p.a.reg(w.src.data(), w.src.size(), 0);
  w.mback = p.a.reg(w.back.data(), w.back.size(), mr_flag::kAllowLocalWrite);
  w.mdst =
      p.b.reg(w.dst.data(), w.dst.size(), mr_flag::kAllowRemoteWrite | mr_flag::kAllowRemoteRead);
  w.mrbuf = p.b.reg(w.rbuf.data(), w.rbuf.size(), mr_flag::kAllowLocalWrite);
}

void note(Worker& w, const std::string& what) {
  if (w.errors.fetch_add(1) == 0) w.first_error = what;
}

void poll(Worker& w) {
  ResultEx r[16];
  for (size_t n; (n = w.acq->get_results_ex(r)) != 0;) {
    for (size_t i = 0; i < n; ++i) {
      if (r[i].status != Status::kSuccess)
        note(w, "initiator completion " + std::string(to_string(r[i].status)));
      if (r[i].qp_context != &w) note(w, "wrong QP context");
    }
    w.completed += n;
  }
  for (size_t n; (n = w.bcq->get_results_ex(r)) != 0;) {
    for (size_t i = 0; i < n; ++i) {
      if (r[i].status != Status::kSuccess || r[i].bytes_transferred != kSlot)
        note(w, "receive completion " + std::string(to_string(r[i].status)));
    }
    w.received += n;
  }
}

// Posts requests in groups of four for one slot: a write of the slot, a send of it (with a
// receive posted at the peer), a read of it back, and a deferred chain of four 8-byte inline
// writes onto the slot's tail whose last post rings the doorbell. The worker keeps its own count
// of outstanding requests (posted - polled, never below the real number) under the queue
// depth, so no post may fail. Worker 0 sleeps on a CQ notification whenever a poll finds
// nothing.
size_t poll_counted(Worker& w) {
  const uint64_t before = w.completed + w.received;
  poll(w);
  return static_cast<size_t>(w.completed + w.received - before);
}

void run_worker(Worker& w) {
  const auto deadline = std::chrono::steady_clock::now() + kDeadline;
  uint32_t i = 0;
  while (i < kOpsPerWorker && std::chrono::steady_clock::now() < deadline) {
    const uint32_t slot = (i / 4) % kSlots;
    const Sge s{addr(w.src.data() + slot * kSlot), kSlot, w.msrc->get_local_token()};
    const uint64_t remote = addr(w.dst.data() + slot * kSlot);
    const uint32_t rt = w.mdst->get_remote_token();
    const uint32_t kind = i % 4;
    const uint32_t n = kind == 3 ? 4 : 1;
    const bool room =
        w.posted - w.completed + n <= kDepth && (kind != 1 || w.recv_posted - w.received < kDepth);
    if (!room) {
      if (poll_counted(w) == 0 && w.id == 0) {
        // Arm, look once more (a completion may have slipped in), then sleep on the callback.
        const int before = w.wake.n.load();
        w.acq->arm(CqNotify::kAny);
        if (poll_counted(w) == 0) {
          const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
          while (w.wake.n.load() == before && std::chrono::steady_clock::now() < until)
            std::this_thread::yield();
        }
      }
      continue;
    }
    Status st = Status::kSuccess;
    switch (kind) {
      case 0:
        st = w.qa->write(nullptr, {&s, 1}, remote, rt, 0);
        break;
      case 1: {
        const Sge r{addr(w.rbuf.data() + slot * kSlot), kSlot, w.mrbuf->get_local_token()};
        st = w.qb->receive(nullptr, {&r, 1});
        if (st == Status::kSuccess) {
          ++w.recv_posted;
          st = w.qa->send(nullptr, {&s, 1}, 0);
        }
        break;
      }
      case 2: {
        const Sge b{addr(w.back.data() + slot * kSlot), kSlot, w.mback->get_local_token()};
        st = w.qa->read(nullptr, {&b, 1}, remote, rt, 0);
        break;
      }
      default:
        for (uint32_t k = 0; k < 4 && st == Status::kSuccess; ++k) {
          const uint64_t v = 0x5A5A000000000000ull | uint64_t{i} << 8 | k;
          const Sge in{addr(&v), 8, 0};
          // The fence keeps the chain behind the read of the same bytes: a responder may read
          // them for its response after later writes landed (IBTA; NDK_OP_FLAG_READ_FENCE).
          st = w.qa->write(nullptr, {&in, 1}, remote + kSlot - 8, rt,
                           op_flag::kInline | (k < 3 ? op_flag::kDefer : 0) |
                               (k == 0 ? op_flag::kReadFence : 0));
        }
        break;
    }
    if (st != Status::kSuccess) {
      note(w, "post " + std::string(to_string(st)));
      break;
    }
    w.posted += n;
    ++i;
    poll(w);
  }
  while ((w.completed < w.posted || w.received < w.recv_posted) &&
         std::chrono::steady_clock::now() < deadline) {
    poll(w);
    std::this_thread::yield();
  }
}

// The churn thread: objects created and closed while the workers run.
struct Churn {
  std::atomic<int> closes_expected{0}, closes_done{0}, creates{0};
  std::atomic<int> errors{0};
  std::string first_error;
  static void on_close(void* c) { static_cast<Churn*>(c)->closes_done.fetch_add(1); }
  void expect_close(Status s) {
    if (s == Status::kPending) closes_expected.fetch_add(1);
  }
  void check(Status s, Status want, const char* what) {
    if (s != want && errors.fetch_add(1) == 0)
      first_error = std::string(what) + ": " + std::string(to_string(s));
  }
};

void run_churn(ApiPair& p, Churn& c, const std::atomic<bool>& stop) {
  std::mt19937 rng(7);
  std::vector<uint8_t> mem(1 << 16, 0);
  while (!stop.load()) {
    Side& s = (rng() & 1) ? p.a : p.b;
    Handle<Pd> pd;
    Handle<Cq> cq;
    Handle<Mr> mr;
    Handle<Mw> mw;
    Handle<Srq> srq;
    c.check(s.adapter->create_pd(nullptr, nullptr, &pd), Status::kSuccess, "pd");
    c.check(s.adapter->create_cq(64, nullptr, nullptr, nullptr, nullptr, &cq), Status::kSuccess,
            "cq");
    c.check(pd->create_mr(false, nullptr, nullptr, &mr), Status::kSuccess, "mr");
    c.check(mr->register_mr(mem.data(), mem.size(), mr_flag::kAllowLocalWrite, nullptr, nullptr),
            Status::kSuccess, "register");
    c.check(pd->create_mw(nullptr, nullptr, &mw), Status::kSuccess, "mw");
    c.check(pd->create_srq(16, 1, 4, nullptr, nullptr, nullptr, nullptr, &srq), Status::kSuccess,
            "srq");
    // An asynchronous QP create, and a synchronous one on the SRQ.
    Completion made;
    Handle<Qp> unused, q2;
    c.check(pd->create_qp(*cq, *cq, nullptr, 8, 8, 1, 1, 0, &Completion::on_create, &made, &unused),
            Status::kPending, "qp async");
    c.check(pd->create_qp_with_srq(*cq, *cq, *srq, nullptr, 8, 1, 0, nullptr, nullptr, &q2),
            Status::kSuccess, "qp sync");
    while (made.count() == 0) std::this_thread::yield();
    c.check(made.status, Status::kSuccess, "qp async completion");
    Handle<Qp> q1(static_cast<Qp*>(made.object));
    const Sge r{addr(mem.data()), 64, mr->get_local_token()};
    c.check(q1->receive(nullptr, {&r, 1}), Status::kSuccess, "receive");
    c.check(srq->receive(nullptr, {&r, 1}), Status::kSuccess, "srq receive");
    c.creates.fetch_add(1);
    // Close in an order that varies: antecedents first (they pend) or last.
    if (rng() & 1) {
      c.expect_close(pd.close(&Churn::on_close, &c));
      c.expect_close(cq.close(&Churn::on_close, &c));
      c.expect_close(srq.close(&Churn::on_close, &c));
    }
    c.expect_close(q1.close(&Churn::on_close, &c));
    c.expect_close(q2.close(&Churn::on_close, &c));
    c.expect_close(mw.close(&Churn::on_close, &c));
    c.expect_close(mr.close(&Churn::on_close, &c));
    c.expect_close(srq.close(&Churn::on_close, &c));
    c.expect_close(cq.close(&Churn::on_close, &c));
    c.expect_close(pd.close(&Churn::on_close, &c));
  }
}

TEST_F(ApiStress, WorkersPostAndPollWhileObjectsComeAndGo) {
  EngineConfig ec;
  ec.idle_yield_after = 256;  // CI: 2 cores shared by the engine, workers and control threads
  ApiPair p("stress", ec);
  std::vector<std::unique_ptr<Worker>> workers;
  for (int i = 0; i < kWorkers; ++i) {
    workers.push_back(std::make_unique<Worker>());
    workers.back()->id = i;
  }
  // The adapters are attached while the engine is stopped; the objects can come later.
  ASSERT_TRUE(p.engine().launch(1));
  for (auto& w : workers) {
    setup(p, *w);
    ASSERT_FALSE(::testing::Test::HasFatalFailure());
  }
  std::atomic<bool> stop{false};
  Churn churn;
  std::thread ct([&] { run_churn(p, churn, stop); });
  std::vector<std::thread> threads;
  for (auto& w : workers) threads.emplace_back([&w] { run_worker(*w); });
  for (auto& t : threads) t.join();
  stop.store(true);
  ct.join();
  for (auto& w : workers) {
    SCOPED_TRACE("worker " + std::to_string(w->id));
    EXPECT_EQ(w->errors.load(), 0) << w->first_error;
    EXPECT_EQ(w->posted, kOpsPerWorker / 4 * 7);  // 1 + 1 + 1 + 4 per group of four
    EXPECT_EQ(w->completed, w->posted);
    EXPECT_EQ(w->recv_posted, kOpsPerWorker / 4);
    EXPECT_EQ(w->received, w->recv_posted);
    // Every slot holds the source (its tail overwritten by the deferred writes' marker), was
    // read back whole after its write, and arrived whole with the sends.
    for (uint32_t k = 0; k < kSlots; ++k) {
      const size_t o = k * kSlot;
      ASSERT_EQ(std::memcmp(w->dst.data() + o, w->src.data() + o, kSlot - 8), 0) << "slot " << k;
      ASSERT_EQ(w->dst[o + kSlot - 1], 0x5A) << "slot " << k;
      ASSERT_EQ(std::memcmp(w->back.data() + o, w->src.data() + o, kSlot), 0) << "slot " << k;
      ASSERT_EQ(std::memcmp(w->rbuf.data() + o, w->src.data() + o, kSlot), 0) << "slot " << k;
    }
  }
  EXPECT_GT(workers[0]->wake.n.load(), 0);  // worker 0 did sleep on notifications
  EXPECT_EQ(churn.errors.load(), 0) << churn.first_error;
  EXPECT_GT(churn.creates.load(), 0);
  RecordProperty("churn_cycles", churn.creates.load());
  RecordProperty("notifications", workers[0]->wake.n.load());
  ASSERT_TRUE(p.run_until([&] { return churn.closes_done.load() == churn.closes_expected.load(); },
                          std::chrono::seconds(30)));
  for (auto& w : workers) {
    w->qa.reset();
    w->qb.reset();
    w->acq.reset();
    w->bcq.reset();
  }
  workers.clear();
}

}  // namespace
}  // namespace urnic::test

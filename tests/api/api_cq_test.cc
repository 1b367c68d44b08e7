// Completion queues through the public API: ArmCq with ANY / SOLICITED / ERRORS and NDK's merge
// rules (ndkpi.md §3.4), at most one callback per arm, arming a non-empty CQ, cancelling an arm
// (ND2 ndcq: Notify + CancelOverlappedRequests, ordering across CQs), overrun with
// STATUS_BUFFER_OVERFLOW, interrupt moderation, and NDK_RESULT vs NDK_RESULT_EX.
#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "api_fixture.h"

namespace urnic::test {
namespace {

// Records notification callbacks (they run on the adapter's control thread).
struct Notes {
  std::mutex mu;
  std::vector<Status> statuses;
  std::vector<std::thread::id> threads;
  std::atomic<int> n{0};
  static void cb(void* c, Status s) {
    auto* self = static_cast<Notes*>(c);
    {
      std::lock_guard lk(self->mu);
      self->statuses.push_back(s);
      self->threads.push_back(std::this_thread::get_id());
    }
    self->n.fetch_add(1, std::memory_order_release);
  }
  int count() const { return n.load(std::memory_order_acquire); }
  Status last() {
    std::lock_guard lk(mu);
    return statuses.empty() ? Status::kPending : statuses.back();
  }
};

size_t drain(Cq& cq, std::vector<ResultEx>* out) {
  ResultEx r[16];
  size_t total = 0;
  for (size_t n; (n = cq.get_results_ex(r)) != 0; total += n) out->insert(out->end(), r, r + n);
  return total;
}

class ApiCq : public EalTest {
 protected:
  // QPs on both sides whose CQs have notification callbacks: a's initiator CQ `acq` (with
  // `an`), b's receive CQ `bcq` (with `bn`).
  void SetUpPair(ApiPair& p, uint32_t depth = 64) {
    ASSERT_EQ(p.a.adapter->create_cq(depth, &Notes::cb, &an, nullptr, nullptr, &acq),
              Status::kSuccess);
    ASSERT_EQ(p.b.adapter->create_cq(depth, &Notes::cb, &bn, nullptr, nullptr, &bcq),
              Status::kSuccess);
    ASSERT_EQ(p.a.pd->create_qp(*p.a.cq, *acq, nullptr, 8, 8, 1, 1, 64, nullptr, nullptr, &qa),
              Status::kSuccess);
    ASSERT_EQ(p.b.pd->create_qp(*bcq, *p.b.cq, nullptr, 8, 8, 1, 1, 64, nullptr, nullptr, &qb),
              Status::kSuccess);
    ApiPair::connect_qps(p.a, *qa, p.b, *qb);
    dst.assign(4096, 0);
    mr = p.b.reg(dst.data(), dst.size(), mr_flag::kAllowRemoteWrite);
  }
  // Runs the engine for kQuiet: `n` has then fired `count` times, no more.
  static void expect_quiet(ApiPair& p, const Notes& n, int count) {
    p.run_for(kQuiet);
    EXPECT_EQ(n.count(), count);
  }
  void TearDownPair() {
    qa.reset();
    qb.reset();
    acq.reset();
    bcq.reset();
    mr.reset();
  }
  Status write(void* c) {
    uint64_t v = 1;
    const Sge s{addr(&v), 8, 0};
    return qa->write(c, {&s, 1}, addr(dst.data()), mr->get_remote_token(), op_flag::kInline);
  }
  Status send(void* c, uint32_t flags = 0) {
    uint64_t v = 2;
    const Sge s{addr(&v), 8, 0};
    return qa->send(c, {&s, 1}, op_flag::kInline | flags);
  }
  Status recv(void* c) {
    const Sge s{addr(dst.data()), 64, mr->get_local_token()};
    return qb->receive(c, {&s, 1});
  }

  Notes an, bn;
  Handle<Cq> acq, bcq;
  Handle<Qp> qa, qb;
  std::vector<uint8_t> dst;
  Handle<Mr> mr;
  std::vector<ResultEx> ares, bres;
};

TEST_F(ApiCq, AnyArmFiresOncePerArmOnTheControlThread) {
  ApiPair p("cq_any");
  SetUpPair(p);
  acq->arm(CqNotify::kAny);
  expect_quiet(p, an, 0);  // armed, nothing arrived
  ASSERT_EQ(write(ctx(1)), Status::kSuccess);
  ASSERT_TRUE(p.run_until([&] { return an.count() == 1; }));
  EXPECT_EQ(an.last(), Status::kSuccess);
  EXPECT_NE(an.threads[0], std::this_thread::get_id());
  ASSERT_TRUE(p.run_until([&] { return drain(*acq, &ares) == 1; }));
  // Not re-armed: a second completion notifies nobody.
  ASSERT_EQ(write(ctx(2)), Status::kSuccess);
  ASSERT_TRUE(p.run_until([&] { return drain(*acq, &ares) == 1; }));
  expect_quiet(p, an, 1);
  // Re-arming after a completion arrived since the last callback fires at once.
  acq->arm(CqNotify::kAny);
  ASSERT_TRUE(p.run_until([&] { return an.count() == 2; }));
  // Re-arming with nothing new waits for the next completion.
  acq->arm(CqNotify::kAny);
  expect_quiet(p, an, 2);
  ASSERT_EQ(write(ctx(3)), Status::kSuccess);
  ASSERT_TRUE(p.run_until([&] { return an.count() == 3; }));
  expect_quiet(p, an, 3);
  TearDownPair();
}

TEST_F(ApiCq, ArmingANonEmptyCqFiresAtOnce) {
  ApiPair p("cq_nonempty");
  SetUpPair(p);
  // The consumer polled 0, then the completion arrived, then it arms: not lost.
  ASSERT_EQ(drain(*acq, &ares), 0u);
  ASSERT_EQ(write(ctx(1)), Status::kSuccess);
  // The completion is in the CQ now, unread.
  expect_quiet(p, an, 0);
  acq->arm(CqNotify::kAny);
  ASSERT_TRUE(p.run_until([&] { return an.count() == 1; }));
  EXPECT_EQ(drain(*acq, &ares), 1u);
  TearDownPair();
}

TEST_F(ApiCq, SolicitedFiresForSolicitedReceivesAndMergesOverErrors) {
  ApiPair p("cq_solicited");
  SetUpPair(p);
  for (int i = 0; i < 6; ++i) ASSERT_EQ(recv(ctx(10 + i)), Status::kSuccess);
  // ERRORS ignores successful completions.
  bcq->arm(CqNotify::kErrors);
  ASSERT_EQ(send(ctx(1)), Status::kSuccess);
  ASSERT_TRUE(p.run_until([&] { return drain(*bcq, &bres) == 1; }));
  expect_quiet(p, bn, 0);
  // ERRORS + SOLICITED = SOLICITED: an unsolicited send still notifies nobody ...
  bcq->arm(CqNotify::kSolicited);
  ASSERT_EQ(send(ctx(2)), Status::kSuccess);
  ASSERT_TRUE(p.run_until([&] { return drain(*bcq, &bres) == 1; }));
  expect_quiet(p, bn, 0);
  EXPECT_FALSE(bres.back().flags & kResultSolicited);
  // ... a solicited one does.
  ASSERT_EQ(send(ctx(3), op_flag::kSendAndSolicitEvent), Status::kSuccess);
  ASSERT_TRUE(p.run_until([&] { return bn.count() == 1; }));
  ASSERT_TRUE(p.run_until([&] { return drain(*bcq, &bres) == 1; }));
  EXPECT_TRUE(bres.back().flags & kResultSolicited);
  // SOLICITED + ERRORS = SOLICITED (the later ERRORS does not narrow it).
  bcq->arm(CqNotify::kSolicited);
  bcq->arm(CqNotify::kErrors);
  ASSERT_EQ(send(ctx(4), op_flag::kSendAndSolicitEvent), Status::kSuccess);
  ASSERT_TRUE(p.run_until([&] { return bn.count() == 2; }));
  ASSERT_TRUE(p.run_until([&] { return drain(*bcq, &bres) == 1; }));
  // ERRORS + ANY = ANY: a plain send fires.
  bcq->arm(CqNotify::kErrors);
  bcq->arm(CqNotify::kAny);
  ASSERT_EQ(send(ctx(5)), Status::kSuccess);
  ASSERT_TRUE(p.run_until([&] { return bn.count() == 3; }));
  ASSERT_TRUE(p.run_until([&] { return drain(*bcq, &bres) == 1; }));
  // Error completions satisfy SOLICITED: the flushed receive fires it.
  bcq->arm(CqNotify::kSolicited);
  expect_quiet(p, bn, 3);
  qb->flush();
  ASSERT_TRUE(p.run_until([&] { return bn.count() == 4; }));
  ASSERT_TRUE(p.run_until([&] { return drain(*bcq, &bres) == 1; }));
  EXPECT_EQ(bres.back().status, Status::kCancelled);
  expect_quiet(p, bn, 4);
  TearDownPair();
}

TEST_F(ApiCq, ErrorsArmFiresOnAnErrorCompletion) {
  ApiPair p("cq_errors");
  SetUpPair(p);
  acq->arm(CqNotify::kErrors);
  ASSERT_EQ(write(ctx(1)), Status::kSuccess);
  ASSERT_TRUE(p.run_until([&] { return drain(*acq, &ares) == 1; }));
  expect_quiet(p, an, 0);
  // One byte past the region: remote access error.
  uint64_t v = 1;
  const Sge s{addr(&v), 8, 0};
  ASSERT_EQ(qa->write(ctx(2), {&s, 1}, addr(dst.data()) + dst.size() - 7, mr->get_remote_token(),
                      op_flag::kInline),
            Status::kSuccess);
  ASSERT_TRUE(p.run_until([&] { return an.count() == 1; }));
  ASSERT_TRUE(p.run_until([&] { return drain(*acq, &ares) == 1; }));
  EXPECT_EQ(ares.back().status, Status::kAccessViolation);
  TearDownPair();
}

// CqExtension::notification_fd: an eventfd readable once per delivered notification, besides the
// callback; not readable while nothing fired; one fd per CQ whoever asks.
TEST_F(ApiCq, NotificationFdIsReadableOncePerNotification) {
  ApiPair p("cq_evfd");
  SetUpPair(p);
  auto* ext = acq->query_extension<CqExtension>();
  ASSERT_NE(ext, nullptr);
  const int fd = ext->notification_fd();
  ASSERT_GE(fd, 0);
  EXPECT_EQ(ext->notification_fd(), fd);
  auto readable = [&] {
    pollfd pf{fd, POLLIN, 0};
    return ::poll(&pf, 1, 0) == 1;
  };
  acq->arm(CqNotify::kAny);
  expect_quiet(p, an, 0);  // armed, nothing arrived
  EXPECT_FALSE(readable());
  ASSERT_EQ(write(ctx(1)), Status::kSuccess);
  ASSERT_TRUE(p.run_until([&] { return an.count() == 1; }));
  EXPECT_TRUE(readable());
  uint64_t v = 0;
  ASSERT_EQ(::read(fd, &v, sizeof(v)), static_cast<ssize_t>(sizeof(v)));
  EXPECT_EQ(v, 1u);
  EXPECT_FALSE(readable());  // reset by the read
  ASSERT_TRUE(p.run_until([&] { return drain(*acq, &ares) == 1; }));
  // A cancelled arm is a delivered notification too (kCancelled).
  acq->arm(CqNotify::kAny);
  EXPECT_TRUE(ext->cancel_notification());
  ASSERT_TRUE(p.run_until([&] { return an.count() == 2; }));
  EXPECT_TRUE(readable());
  ASSERT_EQ(::read(fd, &v, sizeof(v)), static_cast<ssize_t>(sizeof(v)));
  // No arm, no notification: a completion leaves the fd quiet.
  ASSERT_EQ(write(ctx(2)), Status::kSuccess);
  ASSERT_TRUE(p.run_until([&] { return drain(*acq, &ares) == 1; }));
  expect_quiet(p, an, 2);
  EXPECT_FALSE(readable());
  TearDownPair();
}

// Whether `fd` is readable within `timeout_ms` (0: now).
bool readable(int fd, int timeout_ms = 0) {
  pollfd pf{fd, POLLIN, 0};
  return ::poll(&pf, 1, timeout_ms) == 1;
}

// Reads (and so resets) an eventfd: the count of writes since the last read, 0 if none.
uint64_t read_count(int fd) {
  uint64_t v = 0;
  return ::read(fd, &v, sizeof(v)) == static_cast<ssize_t>(sizeof(v)) ? v : 0;
}

// The fd is written by whoever fires the arm (issue 16 item 3): one readable event per satisfied
// arm, none without an arm, and the callback still once per arm, on the control thread.
TEST_F(ApiCq, NotificationFdIsReadableOncePerSatisfiedArm) {
  ApiPair p("cq_evfd_arms");
  SetUpPair(p);
  const int fd = acq->query_extension<CqExtension>()->notification_fd();
  ASSERT_GE(fd, 0);
  for (int i = 1; i <= 3; ++i) {
    acq->arm(CqNotify::kAny);
    ASSERT_EQ(write(ctx(i)), Status::kSuccess);
    ASSERT_TRUE(p.run_until([&] { return readable(fd); }));
    EXPECT_EQ(read_count(fd), 1u) << "arm " << i;
    ASSERT_TRUE(p.run_until([&] { return an.count() == i; }));
    ASSERT_TRUE(p.run_until([&] { return drain(*acq, &ares) == 1; }));
  }
  // No arm: a completion leaves the fd quiet and calls nobody.
  ASSERT_EQ(write(ctx(4)), Status::kSuccess);
  ASSERT_TRUE(p.run_until([&] { return drain(*acq, &ares) == 1; }));
  expect_quiet(p, an, 3);
  EXPECT_FALSE(readable(fd));
  // Arming a CQ with a completion since the last notification fires inside arm(): the fd is
  // readable when arm() returns, before the engine (driven by this thread) runs again.
  ASSERT_EQ(write(ctx(5)), Status::kSuccess);
  p.run_for(kQuiet);
  acq->arm(CqNotify::kAny);
  EXPECT_TRUE(readable(fd));
  EXPECT_EQ(read_count(fd), 1u);
  ASSERT_TRUE(p.run_until([&] { return an.count() == 4; }));
  expect_quiet(p, an, 4);
  EXPECT_FALSE(readable(fd));
  std::lock_guard lk(an.mu);
  for (const Status s : an.statuses) EXPECT_EQ(s, Status::kSuccess);
  for (const std::thread::id t : an.threads) {
    EXPECT_EQ(t, an.threads[0]);  // the adapter's control thread, one for all
    EXPECT_NE(t, std::this_thread::get_id());
  }
  TearDownPair();
}

// A notification callback that holds the control thread until released (or 30 s pass, so that
// a failing test does not hang).
struct Gate {
  std::atomic<bool> entered{false};
  std::atomic<bool> open{false};
  std::thread::id thread;
  static void cb(void* c, Status) {
    auto* self = static_cast<Gate*>(c);
    self->thread = std::this_thread::get_id();
    self->entered.store(true, std::memory_order_release);
    (void)eventually([&] { return self->open.load(std::memory_order_acquire); },
                     std::chrono::seconds(30));
  }
};

// The fd wakes a thread blocked in poll() without the control thread: here that thread is stuck
// in another CQ's callback, and the wake-ups (two arms in a row) still arrive, each with its
// completion in the CQ; the callbacks follow, one per arm, once the control thread is free.
TEST_F(ApiCq, NotificationFdWakesWithoutTheControlThread) {
  EngineConfig ec;
  ec.idle_yield_after = 256;  // the engine's lcore may share a core with this thread
  ApiPair p("cq_evfd_engine", ec);
  ASSERT_TRUE(p.engine().launch(1));
  SetUpPair(p);
  const int fd = bcq->query_extension<CqExtension>()->notification_fd();
  ASSERT_GE(fd, 0);
  // Block b's control thread (which delivers bcq's notifications) in the gate CQ's callback.
  Gate gate;
  Handle<Cq> gcq;
  ASSERT_EQ(p.b.adapter->create_cq(4, &Gate::cb, &gate, nullptr, nullptr, &gcq), Status::kSuccess);
  gcq->arm(CqNotify::kAny);
  ASSERT_TRUE(gcq->query_extension<CqExtension>()->cancel_notification());
  ASSERT_TRUE(eventually([&] { return gate.entered.load(std::memory_order_acquire); }));
  for (int i = 1; i <= 2; ++i) {
    ASSERT_EQ(recv(ctx(10 + i)), Status::kSuccess);
    bcq->arm(CqNotify::kAny);
    ASSERT_EQ(send(ctx(i)), Status::kSuccess);
    // A generous bound: on a loaded machine the engine may be slow, never this slow.
    const bool woke = readable(fd, 10000);
    if (!woke) gate.open.store(true, std::memory_order_release);  // let the teardown run
    ASSERT_TRUE(woke) << "arm " << i << ": no wake-up while the control thread is busy";
    EXPECT_EQ(read_count(fd), 1u);
    ResultEx r[4];
    ASSERT_EQ(bcq->get_results_ex(r), 1u);  // there when the fd said so
    EXPECT_EQ(r[0].request_context, ctx(10 + i));
    EXPECT_EQ(bn.count(), 0);  // no callback can have run yet
  }
  gate.open.store(true, std::memory_order_release);
  ASSERT_TRUE(p.run_until([&] { return bn.count() == 2; }));
  expect_quiet(p, bn, 2);
  EXPECT_FALSE(readable(fd));
  {
    std::lock_guard lk(bn.mu);
    for (const Status s : bn.statuses) EXPECT_EQ(s, Status::kSuccess);
    for (const std::thread::id t : bn.threads) EXPECT_EQ(t, gate.thread);
  }
  gcq.reset();
  TearDownPair();
}

TEST_F(ApiCq, CancelDeliversCancelledOnceAndNothingAfter) {
  ApiPair p("cq_cancel");
  SetUpPair(p);
  auto* ext = acq->query_extension<CqExtension>();
  ASSERT_NE(ext, nullptr);
  EXPECT_FALSE(ext->cancel_notification());  // nothing armed: no callback
  acq->arm(CqNotify::kAny);
  acq->arm(CqNotify::kAny);  // two arms merge into one
  EXPECT_TRUE(ext->cancel_notification());
  ASSERT_TRUE(p.run_until([&] { return an.count() == 1; }));
  EXPECT_EQ(an.last(), Status::kCancelled);
  ASSERT_EQ(write(ctx(1)), Status::kSuccess);
  ASSERT_TRUE(p.run_until([&] { return drain(*acq, &ares) == 1; }));
  expect_quiet(p, an, 1);
  EXPECT_FALSE(ext->cancel_notification());
  TearDownPair();
}

// ndcq: notifications are per CQ: with two CQs armed, a completion on the second notifies only
// the second.
TEST_F(ApiCq, ArmsOnTwoCqsAreIndependent) {
  ApiPair p("cq_two");
  SetUpPair(p);
  for (int i = 0; i < 2; ++i) ASSERT_EQ(recv(ctx(i)), Status::kSuccess);
  acq->arm(CqNotify::kAny);  // a's initiator CQ
  bcq->arm(CqNotify::kAny);  // b's receive CQ
  // A write completes on a's initiator CQ only (it consumes no receive at b).
  ASSERT_EQ(write(ctx(9)), Status::kSuccess);
  ASSERT_TRUE(p.run_until([&] { return an.count() == 1; }));
  expect_quiet(p, bn, 0);
  // Flushing b's QP completes its receives on bcq only (its initiator CQ is another one).
  acq->arm(CqNotify::kAny);
  qb->flush();
  ASSERT_TRUE(p.run_until([&] { return bn.count() == 1; }));
  expect_quiet(p, an, 1);
  TearDownPair();
}

TEST_F(ApiCq, OverrunNotifiesBufferOverflowAndKillsTheQps) {
  ApiPair p("cq_overrun");
  SetUpPair(p, 4);  // 4 entries
  for (int i = 0; i < 6; ++i) ASSERT_EQ(write(ctx(i)), Status::kSuccess);
  ASSERT_TRUE(p.run_until([&] { return an.count() == 1; }));
  EXPECT_EQ(an.last(), Status::kBufferOverflow);
  ASSERT_TRUE(p.run_until(
      [&] { return qa->query_extension<QpConnectExtension>()->state() == QpState::kErr; }));
  EXPECT_EQ(drain(*acq, &ares), 4u);
  expect_quiet(p, an, 1);
  TearDownPair();
}

TEST_F(ApiCq, InterruptModerationByCountAndByInterval) {
  ApiPair p("cq_moderation");
  SetUpPair(p, 64);
  EXPECT_EQ(acq->control_interrupt_moderation(UINT32_MAX, UINT32_MAX),
            Status::kInvalidParameterMix);
  EXPECT_EQ(acq->control_interrupt_moderation(UINT32_MAX, 65), Status::kInvalidParameterMix);
  // Count only: the callback waits for the third completion.
  ASSERT_EQ(acq->control_interrupt_moderation(UINT32_MAX, 3), Status::kSuccess);
  acq->arm(CqNotify::kAny);
  ASSERT_EQ(write(ctx(1)), Status::kSuccess);
  ASSERT_TRUE(p.run_until([&] { return drain(*acq, &ares) == 1; }));
  expect_quiet(p, an, 0);
  ASSERT_EQ(write(ctx(2)), Status::kSuccess);
  ASSERT_EQ(write(ctx(3)), Status::kSuccess);
  ASSERT_TRUE(p.run_until([&] { return an.count() == 1; }));
  ASSERT_TRUE(p.run_until([&] { return drain(*acq, &ares) == 2; }));
  // Interval only: the callback comes about 50 ms after the completion.
  ASSERT_EQ(acq->control_interrupt_moderation(50000, UINT32_MAX), Status::kSuccess);
  acq->arm(CqNotify::kAny);
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(write(ctx(4)), Status::kSuccess);
  ASSERT_TRUE(p.run_until([&] { return an.count() == 2; }));
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(40));
  // Off again: immediate.
  ASSERT_EQ(acq->control_interrupt_moderation(0, 0), Status::kSuccess);
  ASSERT_TRUE(p.run_until([&] { return drain(*acq, &ares) == 1; }));
  acq->arm(CqNotify::kAny);
  ASSERT_EQ(write(ctx(5)), Status::kSuccess);
  ASSERT_TRUE(p.run_until([&] { return an.count() == 3; }));
  TearDownPair();
}

// NdkResizeCq (dataplane/cq.h, Resize): completions written before the switch are taken first,
// then the new ring's, in order; a depth below what waits in the CQ is refused; a second resize
// before the consumer left the old ring is busy; the new depth is the one enforced (overrun).
TEST_F(ApiCq, ResizeKeepsEveryCompletionInOrderAndEnforcesTheNewDepth) {
  ApiPair p("cq_resize");
  SetUpPair(p, 16);
  uintptr_t next = 0;
  auto post_and_land = [&](uint32_t n) {
    for (uint32_t i = 0; i < n; ++i) ASSERT_EQ(write(ctx(next++)), Status::kSuccess);
    // Landed: the QP's send queue is empty again (every completion written).
    ASSERT_TRUE(p.run_until(
        [&] { return qa->query_extension<QpExtension>()->counters().completions_ok == next; }));
  };
  ASSERT_NO_FATAL_FAILURE(post_and_land(8));
  EXPECT_EQ(acq->resize(4, nullptr, nullptr), Status::kInvalidParameter);  // 8 wait in it
  EXPECT_EQ(acq->resize(0, nullptr, nullptr), Status::kInvalidParameter);
  ASSERT_EQ(acq->resize(64, nullptr, nullptr), Status::kSuccess);
  // The consumer has not left the old ring yet: a second resize must wait for that.
  EXPECT_EQ(acq->resize(128, nullptr, nullptr), Status::kDeviceBusy);
  // 8 old + 40 new: more than the old 16 slots could have held.
  for (int k = 0; k < 5; ++k) ASSERT_NO_FATAL_FAILURE(post_and_land(8));
  ASSERT_EQ(drain(*acq, &ares), 48u);
  for (size_t i = 0; i < ares.size(); ++i) {
    EXPECT_EQ(ares[i].request_context, ctx(i)) << i;
    EXPECT_EQ(ares[i].status, Status::kSuccess) << i;
  }
  // Smaller again (the old ring is drained now), and the 8 slots are what holds: the ninth
  // completion without a poll overruns the CQ (ndkpi.md §3.3).
  ASSERT_EQ(acq->resize(8, nullptr, nullptr), Status::kSuccess);
  ASSERT_NO_FATAL_FAILURE(post_and_land(8));
  ASSERT_EQ(write(ctx(next++)), Status::kSuccess);
  ASSERT_TRUE(p.run_until(
      [&] { return qa->query_extension<QpExtension>()->counters().cq_overrun_errors == 1; }));
  EXPECT_EQ(acq->resize(64, nullptr, nullptr), Status::kInvalidDeviceState);  // dead for good
  TearDownPair();
}

TEST_F(ApiCq, ResultAndResultExCarryTheSameCompletion) {
  ApiPair p("cq_results");
  SetUpPair(p);
  ASSERT_EQ(recv(ctx(5)), Status::kSuccess);
  ASSERT_EQ(send(ctx(6)), Status::kSuccess);
  ASSERT_TRUE(p.run_until([&] { return drain(*acq, &ares) == 1; }));
  Result r[4];
  ASSERT_TRUE(p.run_until([&] { return bcq->get_results(r) == 1; }));
  EXPECT_EQ(r[0].status, Status::kSuccess);
  EXPECT_EQ(r[0].bytes_transferred, 8u);
  EXPECT_EQ(r[0].request_context, ctx(5));
  EXPECT_EQ(r[0].qp_context, nullptr);
  EXPECT_EQ(bcq->get_results(r), 0u);
  EXPECT_EQ(ares[0].type, OperationType::kSend);
  EXPECT_EQ(ares[0].request_context, ctx(6));
  TearDownPair();
}

}  // namespace
}  // namespace urnic::test

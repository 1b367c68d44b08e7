// Scripted recovery tests of RC reliability (issue 4 (a) and (b)): one test per recovery path,
// each on a fresh loopback RcPair with a scripted FaultConfig ("drop the 1st SEND MIDDLE
// from A", "drop the 2nd ACKNOWLEDGE from B", ...) on the two transmit directions, and peer
// failure (a peer that stops answering, a peer that restarts with a new QP).
//
// Every test checks every byte placed (with guard bytes around each region), every completion
// (count, order, status, verbs status, context) and the recovery counters the path must move,
// with exact values derived from the protocol: which packets the go-back-N pass resends
// (rocev2.md §3.2, §3.6), which requests the responder sees as duplicates (§3.5), how many
// (RNR) NAKs and timer expiries there are. Each test also checks that its scripted fault fired,
// so a rule that never matches cannot make a test pass vacuously.
//
// Time: the engine reads the TSC, and the test thread drives it with run_once() in bounded
// loops; nothing sleeps. Paths that recover through the local ACK timer use timeout 8
// (4.096 us * 2^8 = 1.05 ms, IBTA §9.7.6.1.3) so they stay fast. Paths that must recover
// without the timer (NAKs, implied NAKs, RNR waits) use timeout 16 (268 ms): the timer is armed
// there too, but only a broken path ever waits for it.
//
// Exact counts on a loaded machine: if the test thread is descheduled for a good part of an ACK
// timeout, the timer may expire legitimately where the scenario expects it not to, and the
// recovery counters change for reasons outside the engine (data and completions must still be
// exact, and are always checked). So each run (class Attempt) records the longest gap between two
// engine steps the test drove and collects the exact counter expectations; they are checked
// together at the end, and only when they do not all match *and* a gap of at least a quarter of
// the ACK timeout was seen (every response the scenarios wait for arrives within three steps),
// the scenario runs again on a fresh pair, at most kAttempts times. On an idle machine nothing
// is ever rerun; a mismatch without such a gap fails at once.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "../loopback/rc_fixture.h"
#include "dataplane/fault.h"
#include "dataplane/wire/opcode.h"

namespace urnic::test {
namespace {

using dp::WrOpcode;
using Action = FaultConfig::Action;
namespace opc = wire::opc;

void* ctx(uintptr_t i) { return reinterpret_cast<void*>(0x1000 + i); }

constexpr uint32_t kMtu = 1024;
// A multi-packet message: FIRST, MIDDLE, MIDDLE, LAST, the LAST one short (100 bytes).
constexpr uint32_t kLen = 3 * kMtu + 100;
constexpr uint32_t kPkts = 4;
// Local ACK timeouts (IBTA §9.7.6.1.3: 4.096 us * 2^timeout); see the file comment.
constexpr uint8_t kTimerRecovery = 8;  // 1.05 ms
constexpr uint8_t kNoTimer = 16;       // 268 ms
// Consecutive idle engine steps after which nothing is in flight: a frame sent in one step is
// received in the next (net_ring delivers at once), so two would do; eight leave a margin.
constexpr uint32_t kIdleSteps = 8;
constexpr uint64_t kMaxSettleSteps = 1'000'000;

std::vector<uint8_t> pattern(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  fill(v, seed);
  return v;
}

void expect_ok(const ResultEx& r, OperationType type, const void* context) {
  expect_result(r, Status::kSuccess, WcStatus::kSuccess, type, context);
}

// Nominal local ACK timeout, from the spec's formula (IBTA §9.7.6.1.3), not the engine's.
constexpr std::chrono::nanoseconds ibta_timeout(uint8_t timeout) {
  return std::chrono::nanoseconds(4096ull << timeout);
}

// One run of a scenario: drives the engine, watches the test thread's own progress (the gaps
// between consecutive engine steps) and collects the exact counter expectations, which
// undisturbed() checks at the end (see the file comment).
class Attempt {
 public:
  explicit Attempt(uint8_t timeout) : tolerance_(ibta_timeout(timeout) / 4) {}

  // Drives the engine until `done()` holds (bounded: RcPair::run_until's step limit).
  bool until(RcPair& p, const std::function<bool()>& done) {
    return p.run_until([&] {
      tick();
      return done();
    });
  }
  // Until each side has at least the given number of send / receive completions.
  bool wait(RcPair& p, size_t a_send, size_t b_recv = 0) {
    return until(p,
                 [&] { return p.a.send_done.size() >= a_send && p.b.recv_done.size() >= b_recv; });
  }
  // Drives the engine until it has been idle for kIdleSteps steps, then collects completions, so
  // that any completion that should not exist has had every chance to appear.
  void settle(RcPair& p) {
    uint32_t idle = 0;
    for (uint64_t i = 0; i < kMaxSettleSteps && idle < kIdleSteps; ++i) {
      idle = p.engine().run_once() ? 0 : idle + 1;
      tick();
    }
    p.collect();
    EXPECT_EQ(idle, kIdleSteps) << "engine never went idle";
  }

  // An exact expectation on a recovery counter, checked by undisturbed().
  void count(const char* what, uint64_t actual, uint64_t expected) {
    counts_.push_back({what, actual, expected});
  }
  bool counts_match() const {
    for (const auto& c : counts_)
      if (c.actual != c.expected) return false;
    return true;
  }
  void report_counts() const {
    for (const auto& c : counts_)
      EXPECT_EQ(c.actual, c.expected)
          << c.what << " (longest step gap " << gap_ms(max_gap_) << " ms)";
  }
  // The thread was descheduled long enough for a timer to expire where none was expected.
  bool disturbed() const { return max_gap_ >= tolerance_; }
  std::chrono::nanoseconds max_gap() const { return max_gap_; }
  // Time during which the test thread did not step the engine: the sum of the gaps of at least
  // kStallGap (an engine step takes microseconds).
  std::chrono::nanoseconds stalled() const { return stalled_; }
  static double gap_ms(std::chrono::nanoseconds d) {
    return std::chrono::duration<double, std::milli>(d).count();
  }

 private:
  static constexpr auto kStallGap = std::chrono::microseconds(200);
  void tick() {
    const auto now = std::chrono::steady_clock::now();
    if (started_) {
      const auto gap = now - last_;
      if (gap > max_gap_) max_gap_ = gap;
      if (gap >= kStallGap) stalled_ += gap;
    }
    started_ = true;
    last_ = now;
  }
  struct Count {
    const char* what;
    uint64_t actual, expected;
  };
  std::chrono::nanoseconds tolerance_;
  std::chrono::nanoseconds max_gap_{0}, stalled_{0};
  std::chrono::steady_clock::time_point last_{};
  bool started_ = false;
  std::vector<Count> counts_;
};

constexpr int kAttempts = 5;

// Runs `scenario(run)` (which builds its own pair) and checks its counter expectations; reruns
// it on a fresh pair when they do not match and the run was disturbed (file comment).
void undisturbed(uint8_t timeout, const std::function<void(Attempt&)>& scenario) {
  for (int attempt = 1;; ++attempt) {
    Attempt run(timeout);
    scenario(run);
    if (::testing::Test::HasFatalFailure() || run.counts_match()) return;
    if (!run.disturbed() || attempt == kAttempts) {
      run.report_counts();
      return;
    }
    std::printf(
        "[ rerun    ] test thread descheduled for %.2f ms (ACK timeout %.2f ms): counts "
        "not meaningful, attempt %d\n",
        Attempt::gap_ms(run.max_gap()), Attempt::gap_ms(ibta_timeout(timeout)), attempt + 1);
  }
}

FaultConfig script(std::initializer_list<FaultConfig::Rule> rules) {
  FaultConfig c;
  for (const auto& r : rules) EXPECT_TRUE(c.add_rule(r.opcode, r.nth, r.action));
  return c;
}

// Fault injectors on A's transmit side (requests) and B's (ACKs, READ responses, ATOMIC ACKs),
// installed through AdapterExtension::set_faults for the life of this object.
class Faults {
 public:
  Faults(RcPair& p, const FaultConfig& a_tx, const FaultConfig& b_tx = {}) : p_(p) {
    EXPECT_EQ(p.set_faults(p.a, a_tx, {}), Status::kSuccess);
    EXPECT_EQ(p.set_faults(p.b, b_tx, {}), Status::kSuccess);
  }
  ~Faults() {
    for (Side* s : {&p_.a, &p_.b}) EXPECT_EQ(p_.set_faults(*s, {}, {}), Status::kSuccess);
  }
  Faults(const Faults&) = delete;
  Faults& operator=(const Faults&) = delete;

  FaultCounters a() const { return RcPair::counters(p_.a).tx_faults; }
  FaultCounters b() const { return RcPair::counters(p_.b).tx_faults; }
  uint64_t scripted() const { return a().scripted + b().scripted; }

 private:
  RcPair& p_;
};

// The counters of both QPs at the end of a scripted exchange.
struct Snapshot {
  QpCounters a, b;
};

class RcScripted : public EalTest {
 protected:
  // B's QP goes away and A's WRITE + SEND run out of retries (`adaptive`:
  // AdapterConfig::adaptive_retransmit).
  static void peer_stops_answering(bool adaptive);
  // A connected pair with the given requester attributes (applied at RTR -> RTS).
  // Plain go-back-N unless `adaptive` (AdapterConfig::adaptive_retransmit): the exact resend
  // counts below are go-back-N's.
  static std::unique_ptr<RcPair> make_pair(uint8_t timeout, uint8_t retry_cnt = 7,
                                           uint8_t rnr_retry = 7, bool adaptive = false) {
    // Ring names must be unique in the process and short (rte_ring names).
    static std::atomic<int> n{0};
    auto p = std::make_unique<RcPair>("scr" + std::to_string(n++), EngineConfig{}, adaptive);
    p->timeout = timeout;
    p->retry_cnt = retry_cnt;
    p->rnr_retry = rnr_retry;
    p->connect(kMtu);
    return p;
  }

  // Drives the exchange of one request from A (and `b_recv` receive completions on B) to its
  // end: the `faults` scripted rules must have fired; `out` gets the counters of both QPs.
  static void finish(RcPair& p, Attempt& run, const Faults& f, size_t b_recv, uint64_t faults,
                     Snapshot* out) {
    ASSERT_TRUE(run.wait(p, 1, b_recv));
    run.settle(p);
    EXPECT_EQ(f.scripted(), faults) << "scripted fault did not fire";
    *out = Snapshot{p.a.qp->counters(), p.b.qp->counters()};
  }

  // One kLen SEND from A into the first of two receives posted on B, with `f` installed;
  // `faults` scripted rules must have fired. Checks one successful completion on each side, the
  // message placed exactly in the first receive buffer and nothing else written. Then a short
  // second SEND must land in the second receive: the recovery consumed exactly one receive.
  // `out` gets the counters of the first exchange.
  static void send_message(RcPair& p, Attempt& run, const Faults& f, uint64_t faults,
                           Snapshot* out) {
    const auto src = pattern(kLen, 1), src2 = pattern(200, 2);
    const uint32_t ksrc = p.a.reg(src.data(), src.size(), 0);
    const uint32_t ksrc2 = p.a.reg(src2.data(), src2.size(), 0);
    Guarded r1(kLen, 3), r2(kLen, 4);
    const uint32_t k1 = p.b.reg(r1.region(), r1.size(), mr_flag::kAllowLocalWrite);
    const uint32_t k2 = p.b.reg(r2.region(), r2.size(), mr_flag::kAllowLocalWrite);
    const auto r1_before = r1.snapshot(), r2_before = r2.snapshot();
    ASSERT_EQ(p.b.qp->post_recv(recv_wr(ctx(101), r1.region(), kLen, k1)), Status::kSuccess);
    ASSERT_EQ(p.b.qp->post_recv(recv_wr(ctx(102), r2.region(), kLen, k2)), Status::kSuccess);
    ASSERT_EQ(p.a.qp->post_send(data_wr(WrOpcode::kSend, ctx(1), src.data(), kLen, ksrc)),
              Status::kSuccess);
    ASSERT_NO_FATAL_FAILURE(finish(p, run, f, 1, faults, out));
    ASSERT_EQ(p.a.send_done.size(), 1u);
    ASSERT_EQ(p.b.recv_done.size(), 1u);
    EXPECT_EQ(p.a.recv_done.size(), 0u);
    EXPECT_EQ(p.b.send_done.size(), 0u);
    expect_ok(p.a.send_done[0], OperationType::kSend, ctx(1));
    expect_ok(p.b.recv_done[0], OperationType::kReceive, ctx(101));
    EXPECT_EQ(p.b.recv_done[0].bytes_transferred, kLen);
    EXPECT_EQ(first_diff(r1.bytes, with(r1_before, 0, src)), -1);
    EXPECT_EQ(first_diff(r2.bytes, r2_before), -1);

    ASSERT_EQ(p.a.qp->post_send(data_wr(WrOpcode::kSend, ctx(2), src2.data(), 200, ksrc2)),
              Status::kSuccess);
    ASSERT_TRUE(run.wait(p, 2, 2));
    run.settle(p);
    ASSERT_EQ(p.a.send_done.size(), 2u);
    ASSERT_EQ(p.b.recv_done.size(), 2u);
    expect_ok(p.a.send_done[1], OperationType::kSend, ctx(2));
    expect_ok(p.b.recv_done[1], OperationType::kReceive, ctx(102));
    EXPECT_EQ(p.b.recv_done[1].bytes_transferred, 200u);
    EXPECT_EQ(first_diff(r1.bytes, with(r1_before, 0, src)), -1);
    EXPECT_EQ(first_diff(r2.bytes, with(r2_before, 0, src2)), -1);
  }

  // One kLen RDMA WRITE from A into a guarded region on B, with `f` installed.
  static void write_message(RcPair& p, Attempt& run, const Faults& f, uint64_t faults,
                            Snapshot* out) {
    const auto src = pattern(kLen, 5);
    const uint32_t ksrc = p.a.reg(src.data(), src.size(), 0);
    Guarded dst(kLen + 256, 6);
    const uint32_t kdst = p.b.reg(dst.region(), dst.size(), kRemoteAll);
    const auto before = dst.snapshot();
    ASSERT_EQ(p.a.qp->post_send(
                  data_wr(WrOpcode::kWrite, ctx(1), src.data(), kLen, ksrc, dst.va() + 128, kdst)),
              Status::kSuccess);
    ASSERT_NO_FATAL_FAILURE(finish(p, run, f, 0, faults, out));
    ASSERT_EQ(p.a.send_done.size(), 1u);
    EXPECT_EQ(p.b.recv_done.size() + p.a.recv_done.size() + p.b.send_done.size(), 0u);
    expect_ok(p.a.send_done[0], OperationType::kWrite, ctx(1));
    EXPECT_EQ(first_diff(dst.bytes, with(before, 128, src)), -1);
  }

  // One RDMA READ of `len` bytes from a guarded region on B into a guarded sink on A.
  static void read_message(RcPair& p, Attempt& run, const Faults& f, uint32_t len, uint64_t faults,
                           Snapshot* out) {
    Guarded remote(len + 256, 7), sink(len, 8);
    const uint32_t krem = p.b.reg(remote.region(), remote.size(), kRemoteAll);
    const uint32_t ksink = p.a.reg(sink.region(), sink.size(), mr_flag::kAllowLocalWrite);
    const auto remote_before = remote.snapshot(), sink_before = sink.snapshot();
    ASSERT_EQ(p.a.qp->post_send(data_wr(WrOpcode::kRead, ctx(1), sink.region(), len, ksink,
                                        remote.va() + 64, krem)),
              Status::kSuccess);
    ASSERT_NO_FATAL_FAILURE(finish(p, run, f, 0, faults, out));
    ASSERT_EQ(p.a.send_done.size(), 1u);
    EXPECT_EQ(p.b.recv_done.size() + p.a.recv_done.size() + p.b.send_done.size(), 0u);
    expect_ok(p.a.send_done[0], OperationType::kRead, ctx(1));
    EXPECT_EQ(p.a.send_done[0].bytes_transferred, len);
    EXPECT_EQ(first_diff(sink.bytes, with(sink_before, 0, remote.part(64, len))), -1);
    EXPECT_EQ(first_diff(remote.bytes, remote_before), -1);
  }
};

// ---- 1-4. One message with one scripted fault ----------------------------------------------
//
// Lost request packets of a multi-packet SEND / WRITE. A lost FIRST or MIDDLE is found by the
// responder: the next packet is out of sequence, it sends one NAK PSN sequence error carrying its
// expected PSN and drops the rest of the burst quietly; the requester goes back to that PSN and
// resends from there (go-back-N, rocev2.md §3.6). A lost LAST leaves no later packet to notice
// the gap (only LAST asks for an ACK): the local ACK timer expires and the requester resends the
// whole message from the oldest unacknowledged PSN (IBTA §9.7.6.1.3); the responder sees the
// first three again as duplicates (IBTA §9.7.5.1.1).
//
// Duplicated and reordered frames: a duplicate is re-ACKed, not placed again, and a receive is
// not consumed twice (rocev2.md §3.5). A READ response gap is answered at once with a re-request
// (rocev2.md §3.6).
//
// Lost ACKs: the data arrived, the retransmission must not execute again.
//
// Lost READ responses and READ requests: a gap before the LAST is an implied NAK and A
// re-requests only the rest (rxe req_retry(), rocev2.md §3.2), which B replays from its responder
// resources (rocev2.md §3.5); a lost LAST or ONLY leaves the timer; a lost request is new to B.

enum class Msg : uint8_t { kSend, kWrite, kRead };
// A recovery counter of A's or B's QP.
enum class Field : uint8_t {
  kAOutOfSeq,
  kBOutOfSeq,
  kBSeqNaksSent,
  kASeqNaksReceived,
  kARetransmits,
  kATimeouts,
  kAImpliedNaks,
  kAAcksReceived,
  kBDuplicates,
  kBAcksSent,
  kBTxPackets,
  kBRxPackets,
};

uint64_t value(const Snapshot& s, Field f) {
  switch (f) {
    case Field::kAOutOfSeq:
      return s.a.out_of_sequence;
    case Field::kBOutOfSeq:
      return s.b.out_of_sequence;
    case Field::kBSeqNaksSent:
      return s.b.naks_sent[0];
    case Field::kASeqNaksReceived:
      return s.a.naks_received[0];
    case Field::kARetransmits:
      return s.a.retransmits;
    case Field::kATimeouts:
      return s.a.timeouts;
    case Field::kAImpliedNaks:
      return s.a.implied_naks;
    case Field::kAAcksReceived:
      return s.a.acks_received;
    case Field::kBDuplicates:
      return s.b.duplicate_requests;
    case Field::kBAcksSent:
      return s.b.acks_sent;
    case Field::kBTxPackets:
      return s.b.tx_packets;
    case Field::kBRxPackets:
      return s.b.rx_packets;
  }
  return 0;
}

struct Expect {
  const char* what = nullptr;  // null: no more expectations
  Field field = Field::kATimeouts;
  uint64_t value = 0;
};

struct OneFault {
  const char* name;
  uint8_t timeout;  // kNoTimer: recovery must not need the ACK timer; kTimerRecovery: it does
  Msg msg;
  uint32_t len;  // READ length (SEND and WRITE move kLen)
  bool on_b;     // the rule acts on B's transmit side (responses, ACKs), else on A's (requests)
  FaultConfig::Rule rule;
  std::array<Expect, 6> expect;
};

void PrintTo(const OneFault& c, std::ostream* os) { *os << c.name; }

using F = Field;
const OneFault kOneFault[] = {
    {"SendLostFirstPacket",
     kNoTimer,
     Msg::kSend,
     0,
     false,
     {opc::kSendFirst, 1, Action::kDrop},
     {{{"B out_of_sequence (MIDDLE, MIDDLE, LAST)", F::kBOutOfSeq, 3},
       {"B sequence NAKs sent", F::kBSeqNaksSent, 1},
       {"A sequence NAKs received", F::kASeqNaksReceived, 1},
       {"A retransmits (all four, from the NAK's PSN)", F::kARetransmits, kPkts},
       {"A timeouts", F::kATimeouts, 0},
       {"B duplicates", F::kBDuplicates, 0}}}},
    {"SendLostMiddlePacket",
     kNoTimer,
     Msg::kSend,
     0,
     false,
     {opc::kSendMiddle, 1, Action::kDrop},
     {{{"B out_of_sequence (second MIDDLE, LAST)", F::kBOutOfSeq, 2},
       {"B sequence NAKs sent", F::kBSeqNaksSent, 1},
       {"A sequence NAKs received", F::kASeqNaksReceived, 1},
       {"A retransmits (from the lost MIDDLE; FIRST acknowledged by the NAK)", F::kARetransmits,
        kPkts - 1},
       {"A timeouts", F::kATimeouts, 0},
       {"B duplicates", F::kBDuplicates, 0}}}},
    {"SendLostLastPacket",
     kTimerRecovery,
     Msg::kSend,
     0,
     false,
     {opc::kSendLast, 1, Action::kDrop},
     {{{"A timeouts", F::kATimeouts, 1},
       {"A retransmits", F::kARetransmits, kPkts},
       {"B duplicates (FIRST, MIDDLE, MIDDLE: not placed again)", F::kBDuplicates, kPkts - 1},
       {"B out_of_sequence", F::kBOutOfSeq, 0},
       {"A sequence NAKs received", F::kASeqNaksReceived, 0},
       {"B ACKs sent (nothing before the LAST asks for one)", F::kBAcksSent, 1}}}},
    {"WriteLostFirstPacket",
     kNoTimer,
     Msg::kWrite,
     0,
     false,
     {opc::kWriteFirst, 1, Action::kDrop},
     {{{"B out_of_sequence", F::kBOutOfSeq, 3},
       {"B sequence NAKs sent", F::kBSeqNaksSent, 1},
       {"A sequence NAKs received", F::kASeqNaksReceived, 1},
       {"A retransmits", F::kARetransmits, kPkts},
       {"A timeouts", F::kATimeouts, 0},
       {"B duplicates", F::kBDuplicates, 0}}}},
    {"WriteLostMiddlePacket",
     kNoTimer,
     Msg::kWrite,
     0,
     false,
     {opc::kWriteMiddle, 2, Action::kDrop},  // the second MIDDLE
     {{{"B out_of_sequence (the LAST)", F::kBOutOfSeq, 1},
       {"B sequence NAKs sent", F::kBSeqNaksSent, 1},
       {"A sequence NAKs received", F::kASeqNaksReceived, 1},
       {"A retransmits (second MIDDLE, LAST)", F::kARetransmits, 2},
       {"A timeouts", F::kATimeouts, 0},
       {"B duplicates", F::kBDuplicates, 0}}}},
    {"WriteLostLastPacket",
     kTimerRecovery,
     Msg::kWrite,
     0,
     false,
     {opc::kWriteLast, 1, Action::kDrop},
     {{{"A timeouts", F::kATimeouts, 1},
       {"A retransmits", F::kARetransmits, kPkts},
       {"B duplicates", F::kBDuplicates, kPkts - 1},
       {"B out_of_sequence", F::kBOutOfSeq, 0},
       {"A sequence NAKs received", F::kASeqNaksReceived, 0},
       {"B ACKs sent", F::kBAcksSent, 1}}}},
    // The copy arrives first and is placed; the original is a duplicate.
    {"SendFirstPacketDuplicated",
     kNoTimer,
     Msg::kSend,
     0,
     false,
     {opc::kSendFirst, 1, Action::kDuplicate},
     {{{"B duplicates", F::kBDuplicates, 1},
       {"A retransmits", F::kARetransmits, 0},
       {"A timeouts", F::kATimeouts, 0},
       {"A sequence NAKs received", F::kASeqNaksReceived, 0}}}},
    // Six responses p0..p5; the first MIDDLE (p1) is held back behind three later frames, so A
    // receives p0 p2 p3 p1 p4 p5. p2 shows a gap: implied NAK, re-request from p1. p1 then
    // arrives and is placed; p4 shows the gap at p2: a second implied NAK, and the re-request
    // finally sent starts at p2 (both rewinds happen within one RX burst, so only one READ
    // request goes out).
    {"ReadResponseMiddleReordered",
     kNoTimer,
     Msg::kRead,
     5 * kMtu + 100,
     true,
     {opc::kReadRespMiddle, 1, Action::kDelay},
     {{{"A implied NAKs", F::kAImpliedNaks, 2},
       {"A retransmits (one READ request)", F::kARetransmits, 1},
       {"B duplicates (the re-request, answered from the saved resource)", F::kBDuplicates, 1},
       {"A timeouts", F::kATimeouts, 0}}}},
    // B placed all four packets and completed the receive; its ACK is lost. A's timer expires
    // and it resends the message; B sees four duplicates, re-ACKs with its last PSN and neither
    // places them again nor consumes the second receive.
    {"SendLostAck",
     kTimerRecovery,
     Msg::kSend,
     0,
     true,
     {opc::kAcknowledge, 1, Action::kDrop},
     {{{"A timeouts", F::kATimeouts, 1},
       {"A retransmits", F::kARetransmits, kPkts},
       {"B duplicates", F::kBDuplicates, kPkts},
       {"B ACKs sent (the lost one and the re-ACK)", F::kBAcksSent, 2},
       {"A ACKs received", F::kAAcksReceived, 1}}}},
    // MIDDLE p1 arrives while p0 is expected: implied NAK, the whole READ is requested again.
    {"ReadLostFirstResponse",
     kNoTimer,
     Msg::kRead,
     kLen,
     true,
     {opc::kReadRespFirst, 1, Action::kDrop},
     {{{"A implied NAKs", F::kAImpliedNaks, 1},
       {"A retransmits", F::kARetransmits, 1},
       {"B duplicates", F::kBDuplicates, 1},
       {"A timeouts", F::kATimeouts, 0},
       {"B frames sent", F::kBTxPackets, 2 * kPkts}}}},
    // p0..p2 are placed; p4 shows the gap and A re-requests p3.. (RETH VA + 3 MTU).
    {"ReadLostThirdMiddleResponse",
     kNoTimer,
     Msg::kRead,
     5 * kMtu + 100,
     true,
     {opc::kReadRespMiddle, 3, Action::kDrop},
     {{{"A implied NAKs", F::kAImpliedNaks, 1},
       {"A retransmits", F::kARetransmits, 1},
       {"B duplicates", F::kBDuplicates, 1},
       {"A timeouts", F::kATimeouts, 0},
       {"B frames sent (six, then the last three again)", F::kBTxPackets, 6 + 3}}}},
    // Nothing follows the lost LAST: the timer expires and A re-requests the last 100 bytes.
    {"ReadLostLastResponse",
     kTimerRecovery,
     Msg::kRead,
     kLen,
     true,
     {opc::kReadRespLast, 1, Action::kDrop},
     {{{"A timeouts", F::kATimeouts, 1},
       {"A retransmits", F::kARetransmits, 1},
       {"B duplicates", F::kBDuplicates, 1},
       {"A implied NAKs", F::kAImpliedNaks, 0},
       {"B frames sent", F::kBTxPackets, kPkts + 1}}}},
    {"ReadLostOnlyResponse",
     kTimerRecovery,
     Msg::kRead,
     512,
     true,
     {opc::kReadRespOnly, 1, Action::kDrop},
     {{{"A timeouts", F::kATimeouts, 1},
       {"A retransmits", F::kARetransmits, 1},
       {"B duplicates", F::kBDuplicates, 1},
       {"A implied NAKs", F::kAImpliedNaks, 0},
       {"B frames sent", F::kBTxPackets, 2}}}},
    // B never saw the request: the retransmitted request is new to B, executed once.
    {"ReadLostRequest",
     kTimerRecovery,
     Msg::kRead,
     kLen,
     false,
     {opc::kReadRequest, 1, Action::kDrop},
     {{{"A timeouts", F::kATimeouts, 1},
       {"A retransmits", F::kARetransmits, 1},
       {"B duplicates", F::kBDuplicates, 0},
       {"B frames received", F::kBRxPackets, 1},
       {"B frames sent", F::kBTxPackets, kPkts}}}},
};

class RcOneFault : public RcScripted, public ::testing::WithParamInterface<OneFault> {};

TEST_P(RcOneFault, RecoversExactlyOnce) {
  const OneFault& c = GetParam();
  undisturbed(c.timeout, [&](Attempt& run) {
    auto p = make_pair(c.timeout);
    const FaultConfig rule = script({c.rule});
    Faults f(*p, c.on_b ? FaultConfig{} : rule, c.on_b ? rule : FaultConfig{});
    Snapshot s;
    switch (c.msg) {
      case Msg::kSend:
        ASSERT_NO_FATAL_FAILURE(send_message(*p, run, f, 1, &s));
        break;
      case Msg::kWrite:
        ASSERT_NO_FATAL_FAILURE(write_message(*p, run, f, 1, &s));
        break;
      case Msg::kRead:
        ASSERT_NO_FATAL_FAILURE(read_message(*p, run, f, c.len, 1, &s));
        break;
    }
    const FaultCounters injected = c.on_b ? f.b() : f.a();
    if (c.rule.action == Action::kDuplicate) {
      EXPECT_EQ(injected.duplicated, 1u);
    }
    if (c.rule.action == Action::kDelay) {
      EXPECT_EQ(injected.reordered, 1u);
    }
    for (const Expect& e : c.expect)
      if (e.what != nullptr) run.count(e.what, value(s, e.field), e.value);
  });
}

INSTANTIATE_TEST_SUITE_P(Cases, RcOneFault, ::testing::ValuesIn(kOneFault),
                         [](const auto& info) { return std::string(info.param.name); });

// ---- 3. Lost ACKs (continued) ----------------------------------------------------------------

TEST_F(RcScripted, WriteLostSecondAck) {
  // WRITE 1 completes normally (ACK 1). WRITE 2 is placed, its ACK (the 2nd ACKNOWLEDGE from B)
  // is lost. Between placement and retransmission the test changes two bytes of the target:
  // the duplicates must not write them back (a duplicate WRITE is never re-executed, rocev2.md
  // §3.5).
  undisturbed(kTimerRecovery, [](Attempt& run) {
    auto p = make_pair(kTimerRecovery);
    Faults f(*p, {}, script({{opc::kAcknowledge, 2, Action::kDrop}}));
    const auto src1 = pattern(256, 9), src2 = pattern(kLen, 10);
    const uint32_t k1 = p->a.reg(src1.data(), src1.size(), 0);
    const uint32_t k2 = p->a.reg(src2.data(), src2.size(), 0);
    Guarded dst(kLen + 512, 11);
    const uint32_t kdst = p->b.reg(dst.region(), dst.size(), kRemoteAll);
    const auto before = dst.snapshot();

    ASSERT_EQ(p->a.qp->post_send(
                  data_wr(WrOpcode::kWrite, ctx(1), src1.data(), 256, k1, dst.va() + kLen, kdst)),
              Status::kSuccess);
    ASSERT_TRUE(run.wait(*p, 1));
    ASSERT_EQ(f.scripted(), 0u);
    const uint64_t b_rx = p->b.qp->counters().rx_packets;
    ASSERT_EQ(p->a.qp->post_send(
                  data_wr(WrOpcode::kWrite, ctx(2), src2.data(), kLen, k2, dst.va(), kdst)),
              Status::kSuccess);
    // Attempt until B has received (and placed) the four packets of WRITE 2.
    ASSERT_TRUE(run.until(*p, [&] { return p->b.qp->counters().rx_packets >= b_rx + kPkts; }));
    ASSERT_EQ(p->a.send_done.size(), 1u);
    auto expected = with(with(before, kLen, src1), 0, src2);
    ASSERT_EQ(first_diff(dst.bytes, expected), -1);
    dst.bytes[kGuard] ^= 0xFF;
    dst.bytes[kGuard + kLen - 1] ^= 0xFF;
    expected = dst.snapshot();

    ASSERT_TRUE(run.wait(*p, 2));
    run.settle(*p);
    EXPECT_EQ(f.scripted(), 1u);
    ASSERT_EQ(p->a.send_done.size(), 2u);
    expect_ok(p->a.send_done[0], OperationType::kWrite, ctx(1));
    expect_ok(p->a.send_done[1], OperationType::kWrite, ctx(2));
    EXPECT_EQ(first_diff(dst.bytes, expected), -1) << "duplicate WRITE placed again";
    const QpCounters& ca = p->a.qp->live_counters();
    const QpCounters& cb = p->b.qp->live_counters();
    run.count("A timeouts", ca.timeouts, 1);
    run.count("A retransmits", ca.retransmits, kPkts);
    run.count("B duplicates", cb.duplicate_requests, kPkts);
    run.count("B ACKs sent", cb.acks_sent, 3);
  });
}

// ---- 4. Lost READ responses (continued) ---------------------------------------------------

TEST_F(RcScripted, ReadResponseLostFoundByLaterAck) {
  // READ (one response) followed by a WRITE. The READ's response is lost, the WRITE's ACK
  // arrives: it covers the READ's PSN, so the response was lost (implied NAK, rocev2.md §3.6) and
  // A goes back to the READ without waiting for the timer, resending READ and WRITE. B replays
  // the READ from its resources and re-ACKs the duplicate WRITE without placing it again.
  undisturbed(kNoTimer, [](Attempt& run) {
    auto p = make_pair(kNoTimer);
    Faults f(*p, {}, script({{opc::kReadRespOnly, 1, Action::kDrop}}));
    Guarded remote(1024, 12), sink(512, 13);
    const uint32_t krem = p->b.reg(remote.region(), remote.size(), kRemoteAll);
    const uint32_t ksink = p->a.reg(sink.region(), sink.size(), mr_flag::kAllowLocalWrite);
    const auto src = pattern(256, 14);
    const uint32_t ksrc = p->a.reg(src.data(), src.size(), 0);
    const auto remote_before = remote.snapshot(), sink_before = sink.snapshot();
    ASSERT_EQ(p->a.qp->post_send(
                  data_wr(WrOpcode::kRead, ctx(1), sink.region(), 512, ksink, remote.va(), krem)),
              Status::kSuccess);
    ASSERT_EQ(p->a.qp->post_send(data_wr(WrOpcode::kWrite, ctx(2), src.data(), 256, ksrc,
                                         remote.va() + 768, krem)),
              Status::kSuccess);
    ASSERT_TRUE(run.wait(*p, 2));
    run.settle(*p);
    EXPECT_EQ(f.scripted(), 1u);
    ASSERT_EQ(p->a.send_done.size(), 2u);
    expect_ok(p->a.send_done[0], OperationType::kRead, ctx(1));
    expect_ok(p->a.send_done[1], OperationType::kWrite, ctx(2));
    EXPECT_EQ(first_diff(sink.bytes, with(sink_before, 0, remote.part(0, 512))), -1);
    EXPECT_EQ(first_diff(remote.bytes, with(remote_before, 768, src)), -1);
    const QpCounters& ca = p->a.qp->live_counters();
    const QpCounters& cb = p->b.qp->live_counters();
    run.count("A implied NAKs", ca.implied_naks, 1);
    run.count("A retransmits (READ and WRITE)", ca.retransmits, 2);
    run.count("B duplicates", cb.duplicate_requests, 2);
    run.count("A timeouts", ca.timeouts, 0);
  });
}

// ---- 5. Lost ATOMIC ACKs: the atomic must not execute twice ---------------------------------
//
// B executes the atomic, saves the original value in a responder resource and its ATOMIC
// ACKNOWLEDGE is lost. The test then changes the target word, as another agent could. The
// retransmitted request is a duplicate: B must answer from the saved original value and leave
// the word alone (rocev2.md §3.5; IBTA §9.7.5.1.1). A re-execution would return and modify the
// word the test wrote.

struct AtomicCase {
  WrOpcode op;
  uint64_t compare_add, swap;
  uint64_t initial, after;  // the word before and after one execution
  uint64_t meddled;         // what the test writes after the execution
};

void atomic_lost_ack(RcPair& p, Attempt& run, const Faults& f, const AtomicCase& c,
                     bool with_write) {
  Guarded remote(1024, 15);
  const uint32_t krem = p.b.reg(remote.region(), remote.size(), kRemoteAll);
  Guarded orig(8, 16);
  const uint32_t korig = p.a.reg(orig.region(), 8, mr_flag::kAllowLocalWrite);
  const auto src = pattern(128, 17);
  const uint32_t ksrc = p.a.reg(src.data(), src.size(), 0);
  remote.set_word(64, c.initial);
  const auto orig_before = orig.snapshot();
  auto w = data_wr(c.op, ctx(1), orig.region(), 8, korig, remote.va() + 64, krem);
  w.compare_add = c.compare_add;
  w.swap = c.swap;
  ASSERT_EQ(p.a.qp->post_send(w), Status::kSuccess);
  uint64_t posted = 1;
  if (with_write) {
    ASSERT_EQ(p.a.qp->post_send(data_wr(WrOpcode::kWrite, ctx(2), src.data(), 128, ksrc,
                                        remote.va() + 512, krem)),
              Status::kSuccess);
    ++posted;
  }
  // Attempt until B has received (and executed) everything posted.
  ASSERT_TRUE(run.until(p, [&] { return p.b.qp->counters().rx_packets >= posted; }));
  ASSERT_EQ(p.a.send_done.size(), 0u);
  ASSERT_EQ(remote.word(64), c.after) << "atomic not executed";
  remote.set_word(64, c.meddled);
  auto remote_expected = remote.snapshot();
  if (with_write) remote_expected = with(remote_expected, 512, src);

  ASSERT_TRUE(run.wait(p, posted));
  run.settle(p);
  EXPECT_EQ(f.scripted(), 1u);
  ASSERT_EQ(p.a.send_done.size(), posted);
  expect_ok(p.a.send_done[0],
            c.op == WrOpcode::kFetchAdd ? OperationType::kFetchAdd : OperationType::kCompareSwap,
            ctx(1));
  if (with_write) expect_ok(p.a.send_done[1], OperationType::kWrite, ctx(2));
  EXPECT_EQ(remote.word(64), c.meddled) << "atomic executed twice";
  EXPECT_EQ(first_diff(remote.bytes, remote_expected), -1);
  std::vector<uint8_t> orig_bytes(8);
  std::memcpy(orig_bytes.data(), &c.initial, 8);
  EXPECT_EQ(first_diff(orig.bytes, with(orig_before, 0, orig_bytes)), -1)
      << "requester did not get the saved original value";
  run.count("B duplicates", p.b.qp->counters().duplicate_requests, posted);
  run.count("A retransmits", p.a.qp->counters().retransmits, posted);
}

constexpr AtomicCase kFetchAdd{WrOpcode::kFetchAdd, 5, 0, 1000, 1005, 7777};
// CAS 1000 -> 2000; the test puts 1000 back, so a second execution would swap again.
constexpr AtomicCase kCompareSwap{WrOpcode::kCompareSwap, 1000, 2000, 1000, 2000, 1000};

// The atomic alone: only the timer finds the loss. Followed by a WRITE: its ACK implies the
// ATOMIC ACK was lost (rocev2.md §3.6), and A goes back without the timer; B answers the
// duplicate atomic from the saved resource and re-ACKs the duplicate WRITE.
struct AtomicLoss {
  const char* name;
  AtomicCase atomic;
  bool with_write;
  uint64_t timeouts, implied_naks;
};

void PrintTo(const AtomicLoss& c, std::ostream* os) { *os << c.name; }

const AtomicLoss kAtomicLoss[] = {
    {"FetchAddLostAtomicAck", kFetchAdd, false, 1, 0},
    {"CompareSwapLostAtomicAck", kCompareSwap, false, 1, 0},
    {"FetchAddLostAtomicAckFoundByLaterAck", kFetchAdd, true, 0, 1},
};

class RcAtomicLoss : public RcScripted, public ::testing::WithParamInterface<AtomicLoss> {};

TEST_P(RcAtomicLoss, AnsweredFromTheSavedResultNeverExecutedTwice) {
  const AtomicLoss& c = GetParam();
  const uint8_t timeout = c.with_write ? kNoTimer : kTimerRecovery;
  undisturbed(timeout, [&](Attempt& run) {
    auto p = make_pair(timeout);
    Faults f(*p, {}, script({{opc::kAtomicAcknowledge, 1, Action::kDrop}}));
    ASSERT_NO_FATAL_FAILURE(atomic_lost_ack(*p, run, f, c.atomic, c.with_write));
    run.count("A timeouts", p->a.qp->counters().timeouts, c.timeouts);
    run.count("A implied NAKs", p->a.qp->counters().implied_naks, c.implied_naks);
  });
}

INSTANTIATE_TEST_SUITE_P(Cases, RcAtomicLoss, ::testing::ValuesIn(kAtomicLoss),
                         [](const auto& info) { return std::string(info.param.name); });

TEST_F(RcScripted, AtomicAckLostBeforeOthersRewindsOncePerGap) {
  // Four FETCH_ADDs outstanding; B's first ATOMIC ACKNOWLEDGE is lost. The three responses
  // behind it each show the gap (an implied NAK), but the requester goes back once per gap, as
  // for READ responses: before, every one of them rewound again, and with 128 atomics
  // outstanding per QP one lost response resent the window once per response behind it (64 QPs
  // of atomic_bw at 5 % loss ran out of retries, issue 18). Each atomic executes once, and each
  // gets its own original value from B's saved results.
  constexpr uint32_t kN = 4;
  undisturbed(kNoTimer, [&](Attempt& run) {
    auto p = make_pair(kNoTimer);
    Faults f(*p, {}, script({{opc::kAtomicAcknowledge, 1, Action::kDrop}}));
    Guarded remote(1024, 40);
    const uint32_t krem = p->b.reg(remote.region(), remote.size(), kRemoteAll);
    Guarded orig(8 * kN, 41);
    const uint32_t korig = p->a.reg(orig.region(), 8 * kN, mr_flag::kAllowLocalWrite);
    for (uint32_t i = 0; i < kN; ++i) remote.set_word(64 + 8 * i, 1000 * (i + 1));
    for (uint32_t i = 0; i < kN; ++i) {
      auto w = data_wr(WrOpcode::kFetchAdd, ctx(1 + i), orig.region() + 8 * i, 8, korig,
                       remote.va() + 64 + 8 * i, krem);
      w.compare_add = 7;
      ASSERT_EQ(p->a.qp->post_send(w), Status::kSuccess);
    }
    ASSERT_TRUE(run.wait(*p, kN));
    run.settle(*p);
    EXPECT_EQ(f.scripted(), 1u);
    ASSERT_EQ(p->a.send_done.size(), kN);
    for (uint32_t i = 0; i < kN; ++i) {
      expect_ok(p->a.send_done[i], OperationType::kFetchAdd, ctx(1 + i));
      EXPECT_EQ(remote.word(64 + 8 * i), 1000 * (i + 1) + 7) << "atomic " << i;
      uint64_t got = 0;
      std::memcpy(&got, orig.region() + 8 * i, 8);
      EXPECT_EQ(got, 1000 * (i + 1)) << "original value of atomic " << i;
    }
    run.count("A implied NAKs", p->a.qp->counters().implied_naks, 1);
    run.count("A retransmits", p->a.qp->counters().retransmits, kN);
    run.count("B duplicates", p->b.qp->counters().duplicate_requests, kN);
  });
}

// ---- 6. RNR: receive not ready ----------------------------------------------------------------
//
// A SEND (or the LAST of a WRITE with immediate) finding no receive WQE is refused with an RNR
// NAK carrying B's min_rnr_timer (10 us here); the PSN is not consumed (rocev2.md §3.4). A waits
// that long and resends from the NAKed PSN, at most rnr_retry times; 7 means forever
// (IBTA §9.7.5.2.8). Exhaustion fails the WQE with RNR_RETRY_EXC_ERR and the QP enters ERR
// (rocev2.md §3.7). The receive is posted from the test thread between engine steps.

TEST_F(RcScripted, RnrThenReceivePostedLater) {
  // rnr_retry 3 allows exactly three retries: the receive is posted after the third RNR NAK,
  // and the fourth attempt must be accepted. Each attempt sends all four packets; B NAKs the
  // FIRST and drops the other three quietly.
  undisturbed(kNoTimer, [](Attempt& run) {
    auto p = make_pair(kNoTimer, 7, 3);
    const auto src = pattern(kLen, 18);
    const uint32_t ksrc = p->a.reg(src.data(), src.size(), 0);
    Guarded buf(kLen, 19);
    const uint32_t kbuf = p->b.reg(buf.region(), buf.size(), mr_flag::kAllowLocalWrite);
    const auto before = buf.snapshot();
    ASSERT_EQ(p->a.qp->post_send(data_wr(WrOpcode::kSend, ctx(1), src.data(), kLen, ksrc)),
              Status::kSuccess);
    ASSERT_TRUE(run.until(*p, [&] { return p->a.qp->counters().rnr_naks_received >= 3; }));
    ASSERT_EQ(p->a.send_done.size(), 0u);
    ASSERT_EQ(p->b.qp->post_recv(recv_wr(ctx(101), buf.region(), kLen, kbuf)), Status::kSuccess);
    ASSERT_TRUE(run.wait(*p, 1, 1));
    run.settle(*p);
    ASSERT_EQ(p->a.send_done.size(), 1u);
    ASSERT_EQ(p->b.recv_done.size(), 1u);
    expect_ok(p->a.send_done[0], OperationType::kSend, ctx(1));
    expect_ok(p->b.recv_done[0], OperationType::kReceive, ctx(101));
    EXPECT_EQ(p->b.recv_done[0].bytes_transferred, kLen);
    EXPECT_EQ(first_diff(buf.bytes, with(before, 0, src)), -1);
    EXPECT_EQ(p->a.qp->state(), dp::QpState::kRts);
    const QpCounters& ca = p->a.qp->live_counters();
    const QpCounters& cb = p->b.qp->live_counters();
    run.count("A RNR NAKs received", ca.rnr_naks_received, 3);
    run.count("B RNR NAKs sent", cb.rnr_naks_sent, 3);
    run.count("B out_of_sequence", cb.out_of_sequence, 3 * (kPkts - 1));
    run.count("B sequence NAKs (an RNR NAK silences them for the burst)", cb.naks_sent[0], 0);
    run.count("A retransmits", ca.retransmits, 3 * kPkts);
    run.count("A timeouts", ca.timeouts, 0);
  });
}

TEST_F(RcScripted, WriteWithImmRnrAtLastPacket) {
  // A WRITE with immediate takes its receive at the LAST packet: FIRST and MIDDLEs are placed,
  // the LAST is refused. The NAK acknowledges the three packets before it, so A resends only
  // the LAST.
  undisturbed(kNoTimer, [](Attempt& run) {
    auto p = make_pair(kNoTimer);
    const auto src = pattern(kLen, 20);
    const uint32_t ksrc = p->a.reg(src.data(), src.size(), 0);
    Guarded dst(kLen, 21), rbuf(64, 22);
    const uint32_t kdst = p->b.reg(dst.region(), dst.size(), kRemoteAll);
    const uint32_t krbuf = p->b.reg(rbuf.region(), rbuf.size(), mr_flag::kAllowLocalWrite);
    const auto dst_before = dst.snapshot(), rbuf_before = rbuf.snapshot();
    auto w = data_wr(WrOpcode::kWriteWithImm, ctx(1), src.data(), kLen, ksrc, dst.va(), kdst);
    w.imm_or_inv = 0xC0DE;
    ASSERT_EQ(p->a.qp->post_send(w), Status::kSuccess);
    ASSERT_TRUE(run.until(*p, [&] { return p->a.qp->counters().rnr_naks_received >= 2; }));
    ASSERT_EQ(p->a.send_done.size(), 0u);
    ASSERT_EQ(p->b.qp->post_recv(recv_wr(ctx(101), rbuf.region(), 64, krbuf)), Status::kSuccess);
    ASSERT_TRUE(run.wait(*p, 1, 1));
    run.settle(*p);
    ASSERT_EQ(p->a.send_done.size(), 1u);
    ASSERT_EQ(p->b.recv_done.size(), 1u);
    expect_ok(p->a.send_done[0], OperationType::kWrite, ctx(1));
    const ResultEx& r = p->b.recv_done[0];
    expect_ok(r, OperationType::kReceive, ctx(101));
    EXPECT_EQ(r.bytes_transferred, kLen);
    EXPECT_TRUE(r.flags & kResultHasImmediate);
    EXPECT_EQ(r.type_specific_completion_output, 0xC0DEu);
    EXPECT_EQ(first_diff(dst.bytes, with(dst_before, 0, src)), -1);
    EXPECT_EQ(first_diff(rbuf.bytes, rbuf_before), -1);  // WRITE with immediate places no data
    const QpCounters& ca = p->a.qp->live_counters();
    run.count("A RNR NAKs received", ca.rnr_naks_received, 2);
    run.count("B RNR NAKs sent", p->b.qp->counters().rnr_naks_sent, 2);
    run.count("A retransmits (the LAST, twice)", ca.retransmits, 2);
    run.count("B duplicates", p->b.qp->counters().duplicate_requests, 0);
    run.count("A timeouts", ca.timeouts, 0);
  });
}

class RcRnrExhausted : public RcScripted, public ::testing::WithParamInterface<int> {};

TEST_P(RcRnrExhausted, SendNeverReceivedFailsAfterRnrRetryRetries) {
  // rnr_retry n: n + 1 RNR NAKs, the last one fails the SEND. The WRITE behind it (resent with
  // it each time, dropped by B as out of sequence) is flushed and never placed; a WR posted to
  // the QP in ERR is flushed too. B's QP is unaffected.
  const auto n = static_cast<uint8_t>(GetParam());
  undisturbed(kNoTimer, [n](Attempt& run) {
    auto p = make_pair(kNoTimer, 7, n);
    const auto src = pattern(64, 23);
    const uint32_t ksrc = p->a.reg(src.data(), src.size(), 0);
    Guarded dst(256, 24);
    const uint32_t kdst = p->b.reg(dst.region(), dst.size(), kRemoteAll);
    const auto before = dst.snapshot();
    ASSERT_EQ(p->a.qp->post_send(data_wr(WrOpcode::kSend, ctx(1), src.data(), 64, ksrc)),
              Status::kSuccess);
    ASSERT_EQ(p->a.qp->post_send(
                  data_wr(WrOpcode::kWrite, ctx(2), src.data(), 64, ksrc, dst.va() + 64, kdst)),
              Status::kSuccess);
    ASSERT_TRUE(run.wait(*p, 2));
    ASSERT_EQ(p->a.qp->state(), dp::QpState::kErr);
    ASSERT_EQ(p->a.qp->post_send(
                  data_wr(WrOpcode::kWrite, ctx(3), src.data(), 64, ksrc, dst.va() + 64, kdst)),
              Status::kSuccess);
    ASSERT_TRUE(run.wait(*p, 3));
    run.settle(*p);
    ASSERT_EQ(p->a.send_done.size(), 3u);
    expect_result(p->a.send_done[0], Status::kIoTimeout, WcStatus::kRnrRetryExcErr,
                  OperationType::kSend, ctx(1));
    expect_flushed(p->a.send_done[1], OperationType::kWrite, ctx(2));
    expect_flushed(p->a.send_done[2], OperationType::kWrite, ctx(3));
    EXPECT_EQ(p->b.recv_done.size() + p->b.send_done.size() + p->a.recv_done.size(), 0u);
    EXPECT_EQ(first_diff(dst.bytes, before), -1);
    EXPECT_EQ(p->b.qp->state(), dp::QpState::kRts);
    const QpCounters& ca = p->a.qp->live_counters();
    const QpCounters& cb = p->b.qp->live_counters();
    run.count("A RNR NAKs received", ca.rnr_naks_received, n + 1u);
    run.count("B RNR NAKs sent", cb.rnr_naks_sent, n + 1u);
    run.count("B out_of_sequence (the WRITE, every time)", cb.out_of_sequence, n + 1u);
    run.count("A retransmits (SEND and WRITE per retry)", ca.retransmits, 2u * n);
    run.count("A timeouts", ca.timeouts, 0);
  });
}

INSTANTIATE_TEST_SUITE_P(RnrRetry, RcRnrExhausted, ::testing::Range(0, 7));

TEST_F(RcScripted, RnrRetrySevenRetriesForever) {
  // rnr_retry 7: after 100 RNR NAKs the SEND is still pending and the QP in RTS; a receive
  // posted then is used by the next attempt.
  constexpr uint64_t kNaks = 100;
  undisturbed(kNoTimer, [](Attempt& run) {
    auto p = make_pair(kNoTimer, 7, 7);
    const auto src = pattern(64, 25);
    const uint32_t ksrc = p->a.reg(src.data(), src.size(), 0);
    Guarded buf(64, 26);
    const uint32_t kbuf = p->b.reg(buf.region(), buf.size(), mr_flag::kAllowLocalWrite);
    const auto before = buf.snapshot();
    ASSERT_EQ(p->a.qp->post_send(data_wr(WrOpcode::kSend, ctx(1), src.data(), 64, ksrc)),
              Status::kSuccess);
    ASSERT_TRUE(run.until(*p, [&] {
      return p->a.qp->counters().rnr_naks_received >= kNaks || !p->a.send_done.empty();
    }));
    ASSERT_EQ(p->a.send_done.size(), 0u);
    ASSERT_EQ(p->a.qp->state(), dp::QpState::kRts);
    ASSERT_EQ(p->b.qp->post_recv(recv_wr(ctx(101), buf.region(), 64, kbuf)), Status::kSuccess);
    ASSERT_TRUE(run.wait(*p, 1, 1));
    run.settle(*p);
    ASSERT_EQ(p->a.send_done.size(), 1u);
    expect_ok(p->a.send_done[0], OperationType::kSend, ctx(1));
    ASSERT_EQ(p->b.recv_done.size(), 1u);
    expect_ok(p->b.recv_done[0], OperationType::kReceive, ctx(101));
    EXPECT_EQ(first_diff(buf.bytes, with(before, 0, src)), -1);
    run.count("A RNR NAKs received", p->a.qp->counters().rnr_naks_received, kNaks);
    run.count("B RNR NAKs sent", p->b.qp->counters().rnr_naks_sent, kNaks);
    run.count("A retransmits", p->a.qp->counters().retransmits, kNaks);
  });
}

// ---- 7. Transport retry exhaustion ------------------------------------------------------------

TEST_F(RcScripted, RetryExhaustedWhenEveryResponseIsLost) {
  // Everything B sends is lost. retry_cnt 3: the timer expires four times, three of them resend
  // both outstanding WRITEs; the fourth fails the oldest with RETRY_EXC_ERR (IBTA §9.7.6.1.3,
  // C9-142), the QP enters ERR and the rest flushes, including a WR posted afterwards. B did
  // receive and place both WRITEs (once); it saw every resend as a duplicate. Nothing ever comes
  // back, so no scheduling delay can change these counts.
  constexpr uint8_t kRetry = 3;
  undisturbed(kTimerRecovery, [](Attempt& run) {
    auto p = make_pair(kTimerRecovery, kRetry);
    FaultConfig all;
    all.drop_ppm = 1'000'000;
    Faults f(*p, {}, all);
    const auto src1 = pattern(kLen, 27), src2 = pattern(64, 28);
    const uint32_t k1 = p->a.reg(src1.data(), src1.size(), 0);
    const uint32_t k2 = p->a.reg(src2.data(), src2.size(), 0);
    Guarded dst(kLen + 256, 29);
    const uint32_t kdst = p->b.reg(dst.region(), dst.size(), kRemoteAll);
    const auto before = dst.snapshot();
    ASSERT_EQ(p->a.qp->post_send(
                  data_wr(WrOpcode::kWrite, ctx(1), src1.data(), kLen, k1, dst.va(), kdst)),
              Status::kSuccess);
    ASSERT_EQ(p->a.qp->post_send(
                  data_wr(WrOpcode::kWrite, ctx(2), src2.data(), 64, k2, dst.va() + kLen, kdst)),
              Status::kSuccess);
    ASSERT_TRUE(run.wait(*p, 2));
    ASSERT_EQ(p->a.qp->state(), dp::QpState::kErr);
    ASSERT_EQ(p->a.qp->post_send(
                  data_wr(WrOpcode::kWrite, ctx(3), src2.data(), 64, k2, dst.va() + kLen, kdst)),
              Status::kSuccess);
    ASSERT_TRUE(run.wait(*p, 3));
    run.settle(*p);
    ASSERT_EQ(p->a.send_done.size(), 3u);
    expect_result(p->a.send_done[0], Status::kIoTimeout, WcStatus::kRetryExcErr,
                  OperationType::kWrite, ctx(1));
    expect_flushed(p->a.send_done[1], OperationType::kWrite, ctx(2));
    expect_flushed(p->a.send_done[2], OperationType::kWrite, ctx(3));
    EXPECT_EQ(first_diff(dst.bytes, with(with(before, 0, src1), kLen, src2)), -1);
    EXPECT_EQ(p->b.qp->state(), dp::QpState::kRts);
    const QpCounters& ca = p->a.qp->live_counters();
    const QpCounters& cb = p->b.qp->live_counters();
    EXPECT_GT(cb.tx_packets, 0u);
    EXPECT_EQ(f.b().dropped, cb.tx_packets);  // every frame B sent was lost
    run.count("A timeouts", ca.timeouts, kRetry + 1u);
    run.count("A retransmits", ca.retransmits, kRetry * (kPkts + 1));
    run.count("B duplicates", cb.duplicate_requests, kRetry * (kPkts + 1));
    run.count("A ACKs received", ca.acks_received, 0);
  });
}

// ---- 8. Peer failure ------------------------------------------------------------------------

// Slack on the time bound below, for the work between the steps (a few microseconds each).
constexpr auto kBoundSlack = std::chrono::milliseconds(5);

TEST_F(RcScripted, PeerStopsAnsweringRetryExceededWithinBound) { peer_stops_answering(false); }

// Adaptive retransmission stays inside the same IBTA allowance (each wait at most 4x nominal),
// and from the second timeout in a row resends at most the restart window of four packets
// instead of all five outstanding (requester.cc retry_wait_lc).
TEST_F(RcScripted, AdaptivePeerStopsAnsweringRestartsWindowRetryExceededWithinBound) {
  peer_stops_answering(true);
}

void RcScripted::peer_stops_answering(bool adaptive) {
  // B's QP is destroyed: its frames hit "no QP" at B and are dropped, nothing comes back. From
  // post to RETRY_EXC_ERR there are retry_cnt + 1 expiries of the local ACK timer, each at most
  // 4x its nominal 4.096 us * 2^timeout (the spec's allowance, rocev2.md §3.2) and at least the
  // nominal value. The engine can only notice an expiry when the test thread steps it, so time
  // the thread spent descheduled (gaps between steps, measured) is not charged to the engine.
  constexpr uint8_t kTimeout = 10;  // 4.19 ms
  constexpr uint8_t kRetry = 3;
  const auto nominal = ibta_timeout(kTimeout) * (kRetry + 1);
  const auto bound = 4 * nominal + kBoundSlack;
  Attempt run(kTimeout);
  auto p = RcScripted::make_pair(kTimeout, kRetry, 7, adaptive);
  const auto src = pattern(kLen, 30);
  const uint32_t ksrc = p->a.reg(src.data(), src.size(), 0);
  Guarded dst(kLen, 31);
  const uint32_t kdst = p->b.reg(dst.region(), dst.size(), kRemoteAll);
  const auto before = dst.snapshot();
  ASSERT_TRUE(p->destroy_qp(p->b, p->b.qp));

  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(
      p->a.qp->post_send(data_wr(WrOpcode::kWrite, ctx(1), src.data(), kLen, ksrc, dst.va(), kdst)),
      Status::kSuccess);
  ASSERT_EQ(p->a.qp->post_send(data_wr(WrOpcode::kSend, ctx(2), src.data(), 64, ksrc)),
            Status::kSuccess);
  ASSERT_TRUE(run.until(*p, [&] { return !p->a.send_done.empty(); }));
  const auto elapsed = std::chrono::steady_clock::now() - t0;
  const auto stalled = run.stalled();
  ASSERT_TRUE(run.wait(*p, 2));
  run.settle(*p);

  ASSERT_EQ(p->a.send_done.size(), 2u);
  expect_result(p->a.send_done[0], Status::kIoTimeout, WcStatus::kRetryExcErr,
                OperationType::kWrite, ctx(1));
  expect_flushed(p->a.send_done[1], OperationType::kSend, ctx(2));
  EXPECT_EQ(p->a.qp->state(), dp::QpState::kErr);
  EXPECT_LE(elapsed - stalled, bound)
      << Attempt::gap_ms(elapsed) << " ms, of which " << Attempt::gap_ms(stalled)
      << " ms descheduled; bound " << Attempt::gap_ms(bound) << " ms";
  // And not before the retries were spent: the timer never expires early (5% for the TSC
  // frequency estimate).
  EXPECT_GE(elapsed, nominal * 95 / 100)
      << Attempt::gap_ms(elapsed) << " ms, nominal " << Attempt::gap_ms(nominal) << " ms";
  // Nothing comes back, so these counts do not depend on scheduling.
  const QpCounters& ca = p->a.qp->live_counters();
  EXPECT_EQ(ca.timeouts, kRetry + 1u);
  // Plain: every retry resends the WRITE's packets and the SEND. Adaptive: the first retry too,
  // then four packets per retry; and probes, the oldest packet alone, T/32 after each send or
  // timeout (no round trip measured), each unanswered one doubling the next wait: at 1, 3, 7,
  // 15, 31 T/32, so 5 in a wait of T (the last may meet the timer in the same step: then the
  // timer wins), 6 in the backed-off [T, 2T] and 7 in [2T, 4T]. The waits are T, T, [T, 2T],
  // [2T, 4T].
  if (adaptive) {
    EXPECT_GE(ca.sr_probes, 4u * (kRetry + 1));
    EXPECT_LE(ca.sr_probes, 5u + 5u + 6u + 7u);
  } else {
    EXPECT_EQ(ca.sr_probes, 0u);
  }
  EXPECT_EQ(ca.retransmits - ca.sr_probes,
            adaptive ? (kPkts + 1) + (kRetry - 1) * 4u : kRetry * (kPkts + 1));
  EXPECT_EQ(ca.acks_received, 0u);
  EXPECT_EQ(p->counters(p->b).port.rx_drops[static_cast<size_t>(RxDrop::kNoQp)], ca.tx_packets);
  EXPECT_EQ(first_diff(dst.bytes, before), -1);
}

TEST_F(RcScripted, PeerRestartsWithNewQpOldQpFailsMemoryIntact) {
  // B "restarts": its QP is destroyed and a new one created (a new QPN), connected to a new QP
  // on A. A's old QP still has a WRITE outstanding to B's old QPN and keeps resending it into
  // B's region, whose R_Key is still valid. The new connection deliberately starts at the PSN the
  // old QP is resending, so only the QPN keeps the two apart (IBTA §9.6: the BTH DestQP selects
  // the QP): the old QP must fail with RETRY_EXC_ERR, not one byte of the old WRITE may land,
  // and the new pair must work.
  constexpr uint8_t kRetry = 3;
  undisturbed(kTimerRecovery, [](Attempt& run) {
    auto p = make_pair(kTimerRecovery, kRetry);
    const auto src0 = pattern(256, 32), src_old = pattern(kLen, 33), src_new = pattern(kLen, 34);
    const uint32_t k0 = p->a.reg(src0.data(), src0.size(), 0);
    const uint32_t kold = p->a.reg(src_old.data(), src_old.size(), 0);
    const uint32_t knew = p->a.reg(src_new.data(), src_new.size(), 0);
    Guarded dst(2 * kLen + 256, 35);
    const uint32_t kdst = p->b.reg(dst.region(), dst.size(), kRemoteAll);
    const auto initial = dst.snapshot();

    // The old connection works: WRITE 0 lands at the end of the region.
    ASSERT_EQ(p->a.qp->post_send(data_wr(WrOpcode::kWrite, ctx(1), src0.data(), 256, k0,
                                         dst.va() + 2 * kLen, kdst)),
              Status::kSuccess);
    ASSERT_TRUE(run.wait(*p, 1));
    expect_ok(p->a.send_done[0], OperationType::kWrite, ctx(1));
    const auto before = with(initial, 2 * kLen, src0);
    ASSERT_EQ(first_diff(dst.bytes, before), -1);

    // The old QP's next request PSN: 0x10000 (RcPair::connect) + WRITE 0's one packet.
    constexpr uint32_t kOldNextPsn = 0x10000 + 1;
    TestQp* const old_a = p->a.qp;
    const uint32_t old_b_qpn = p->b.qp->qpn();
    // B restarts before the WRITE reaches it (closing a QP takes engine steps, which would send
    // the WRITE, so B's QP goes first and the WRITE is posted right after).
    ASSERT_TRUE(p->destroy_qp(p->b, p->b.qp));
    ASSERT_EQ(p->a.qp->post_send(
                  data_wr(WrOpcode::kWrite, ctx(2), src_old.data(), kLen, kold, dst.va(), kdst)),
              Status::kSuccess);
    for (Side* s : {&p->a, &p->b}) ASSERT_EQ(s->create_qp(s, 256, 256, &s->qp), Status::kSuccess);
    ASSERT_NE(p->b.qp->qpn(), old_b_qpn);
    const uint32_t access =
        dp::access::kRemoteRead | dp::access::kRemoteWrite | dp::access::kRemoteAtomic;
    p->bring_up(p->a, p->b, kMtu, false, access, kOldNextPsn, 0x20000);
    p->bring_up(p->b, p->a, kMtu, false, access, 0x20000, kOldNextPsn);
    ASSERT_FALSE(::testing::Test::HasFatalFailure());

    ASSERT_EQ(p->a.qp->post_send(data_wr(WrOpcode::kWrite, ctx(3), src_new.data(), kLen, knew,
                                         dst.va() + kLen, kdst)),
              Status::kSuccess);
    ASSERT_TRUE(run.wait(*p, 3));
    run.settle(*p);

    // Which of the two finishes first depends on the clock (the new WRITE needs a few steps,
    // the old QP four ACK timeouts); each is identified by its context and QPN.
    ASSERT_EQ(p->a.send_done.size(), 3u);
    const bool new_first = p->a.send_done[1].request_context == ctx(3);
    const ResultEx& r_new = p->a.send_done[new_first ? 1 : 2];
    const ResultEx& r_old = p->a.send_done[new_first ? 2 : 1];
    expect_ok(r_new, OperationType::kWrite, ctx(3));
    EXPECT_EQ(r_new.qpn, p->a.qp->qpn());
    expect_result(r_old, Status::kIoTimeout, WcStatus::kRetryExcErr, OperationType::kWrite, ctx(2));
    EXPECT_EQ(r_old.qpn, old_a->qpn());
    EXPECT_EQ(old_a->state(), dp::QpState::kErr);
    EXPECT_EQ(p->a.qp->state(), dp::QpState::kRts);
    EXPECT_EQ(p->b.qp->state(), dp::QpState::kRts);
    // Exactly the new WRITE landed; the old one left no byte anywhere.
    EXPECT_EQ(first_diff(dst.bytes, with(before, kLen, src_new)), -1);
    // Every frame the old QP sent after the restart (four times the WRITE's four packets) was
    // dropped at B for naming no QP.
    EXPECT_EQ(p->counters(p->b).port.rx_drops[static_cast<size_t>(RxDrop::kNoQp)],
              (kRetry + 1u) * kPkts);
    const QpCounters& old_c = old_a->live_counters();
    EXPECT_EQ(old_c.timeouts, kRetry + 1u);
    run.count("old A QP retransmits", old_c.retransmits, kRetry * kPkts);
    // The new responder never saw them (no duplicates, no sequence errors).
    run.count("new B QP frames received", p->b.qp->counters().rx_packets, kPkts);
    run.count("new B QP duplicates", p->b.qp->counters().duplicate_requests, 0);
    run.count("new B QP out_of_sequence", p->b.qp->counters().out_of_sequence, 0);

    // The new connection keeps working after the old QP is gone.
    ASSERT_EQ(p->a.qp->post_send(
                  data_wr(WrOpcode::kWrite, ctx(4), src0.data(), 256, k0, dst.va() + kLen, kdst)),
              Status::kSuccess);
    ASSERT_TRUE(run.wait(*p, 4));
    expect_ok(p->a.send_done[3], OperationType::kWrite, ctx(4));
    EXPECT_EQ(first_diff(dst.bytes, with(with(before, kLen, src_new), kLen, src0)), -1);
  });
}

}  // namespace
}  // namespace urnic::test

// Resource exhaustion (issue 8 item 4): each exhausted resource degrades with a defined status or
// NAK, counters show it, nothing leaks (every mbuf back in its pool; the binary also runs under
// ASan + LeakSanitizer) and the system recovers where recovery is defined. docs/design.md
// "Resource exhaustion" lists the behaviours checked here:
//   1. requests flooding a QP with no receive posted (RNR, IBTA §9.7.5.2.8);
//   2. an empty mempool at the sender and at the receiver;
//   3. a CQ that overruns (ndkpi.md §3.3);
//   4. huge message lengths from a peer (IBTA §9.4, §9.7.5.1) and in local posts;
//   5. thousands of QPs, up to the adapter's and the engine's limits.
//
// Two fixtures. RcPair (tests/loopback/rc_fixture.h): two adapters of the public API over a
// net_ring pair and one engine. These tests measure internal stages on purpose: the engine is
// stepped here with run_once(now) at a synthetic TSC that advances 1 us per step (so every timer
// path, ACK timeout and RNR wait, is deterministic and the counters are exact), and the mempools
// are emptied and counted directly (RcPair::internal). Objects are created and closed through
// the public API before and after the synthetic-clock phases (those calls step the engine at
// the real TSC, so each test starts its Clock after them).
// RawQp (tests/protocol/protocol_fixture.h, as tests/protocol/rc_protocol_test.cc): one QP on an
// Endpoint without a port, fed synthetic frames through Engine::deliver_lc, for floods and
// malformed lengths no conforming requester would send; what the stages emit stays in the TX
// buffer and is parsed back.
#include <gtest/gtest.h>
#include <malloc.h>
#include <rte_cycles.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <new>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "../loopback/rc_fixture.h"
#include "../protocol/protocol_fixture.h"
#include "dataplane/cq.h"
#include "dataplane/fault.h"
#include "dataplane/internal.h"
#include "dataplane/wire/frame.h"
#include "dataplane/wire/icrc.h"
#include "dataplane/wire/opcode.h"

// ---- Heap accounting ----------------------------------------------------------------------------
//
// Without a sanitizer, global operator new is replaced by a counting one, so a test can check
// that a flood of frames allocates nothing (the hot path must not allocate). It allocates with
// malloc / aligned_alloc, which libstdc++'s operator delete releases with free. Sanitizers
// replace operator new themselves (and ASan checks new/delete pairing), so there only the bytes
// in use are compared.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define EXHAUSTION_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define EXHAUSTION_SANITIZED 1
#endif
#endif

#ifdef EXHAUSTION_SANITIZED
extern "C" size_t __sanitizer_get_current_allocated_bytes();
#else
namespace {
std::atomic<uint64_t> g_news{0};
}  // namespace
[[gnu::noinline]] void* operator new(std::size_t n) {
  g_news.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n != 0 ? n : 1)) return p;
  throw std::bad_alloc();
}
[[gnu::noinline]] void* operator new(std::size_t n, std::align_val_t a) {
  g_news.fetch_add(1, std::memory_order_relaxed);
  const auto al = static_cast<std::size_t>(a);
  if (void* p = std::aligned_alloc(al, (n + al - 1) / al * al)) return p;
  throw std::bad_alloc();
}
#endif

namespace urnic::test {
namespace {

using dp::WrOpcode;

// Heap bytes in use (malloc'd and not freed).
uint64_t heap_in_use() {
#ifdef EXHAUSTION_SANITIZED
  return __sanitizer_get_current_allocated_bytes();
#else
  const struct mallinfo2 mi = mallinfo2();
  return mi.uordblks + mi.hblkhd;
#endif
}

// operator new calls so far (0 under a sanitizer: not counted there).
uint64_t news() {
#ifdef EXHAUSTION_SANITIZED
  return 0;
#else
  return g_news.load(std::memory_order_relaxed);
#endif
}

constexpr uint32_t kIdleSteps = 8;  // idle engine steps after which nothing is in flight

// This file's request contexts are never null, ctx(0) neither. (This ctx() and pattern() below
// hide protocol_fixture.h's in this file.)
void* ctx(uintptr_t i) { return reinterpret_cast<void*>(0x1000 + i); }
uint64_t addr(const void* p) { return reinterpret_cast<uint64_t>(p); }

std::vector<uint8_t> pattern(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  fill(v, seed);
  return v;
}

// ---- RcPair driven at a synthetic TSC -----------------------------------------------------------

// The engine's clock: 1 us of TSC per step, starting at the real TSC (a step must never go
// back behind one the engine already saw).
struct Clock {
  uint64_t now = rte_get_tsc_cycles();
  uint64_t tick = dp::tsc_from_ns(1000);
  uint64_t next() { return now += tick; }
};

bool step(RcPair& p, Clock& c, bool collect = true) {
  const bool busy = p.dp_engine().run_once(c.next());
  if (collect) p.collect();
  return busy;
}

void steps(RcPair& p, Clock& c, uint64_t n, bool collect = true) {
  for (uint64_t i = 0; i < n; ++i) step(p, c, collect);
}

bool drive(RcPair& p, Clock& c, const std::function<bool()>& done, uint64_t max_steps = 200'000,
           bool collect = true) {
  for (uint64_t i = 0; i < max_steps; ++i) {
    step(p, c, collect);
    if (done()) return true;
  }
  return false;
}

// Steps until kIdleSteps idle steps in a row (a frame sent in one step is received in the next).
void settle(RcPair& p, Clock& c, bool collect = true) {
  uint32_t idle = 0;
  for (uint64_t i = 0; i < 1'000'000 && idle < kIdleSteps; ++i)
    idle = step(p, c, collect) ? 0 : idle + 1;
}

rte_mempool* pool_of(Side& s) { return RcPair::internal(s).endpoint().pool(); }
uint64_t alloc_failures(Side& s) {
  return RcPair::internal(s).endpoint_counters().mbuf_alloc_failures;
}

// Lets everything in flight arrive and checks that every mbuf of both pools is back. The
// control threads free the slow-path frames they took (the start-up ARP / NA) on their own
// time, so the check waits for that, bounded by 10 s of real time.
void expect_pools_full(RcPair& p, Clock& c, bool collect = true) {
  const auto full = [&] {
    for (Side* s : {&p.a, &p.b}) {
      rte_mempool* mp = pool_of(*s);
      if (rte_mempool_avail_count(mp) != mp->size) return false;
    }
    return true;
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  do settle(p, c, collect);
  while (!full() && std::chrono::steady_clock::now() < deadline);
  for (Side* s : {&p.a, &p.b}) {
    rte_mempool* mp = pool_of(*s);
    EXPECT_EQ(rte_mempool_avail_count(mp), mp->size) << "mbufs leaked from " << mp->name;
  }
}

// Takes every free mbuf of `mp` (per-lcore cache included).
std::vector<rte_mbuf*> take_all(rte_mempool* mp) {
  std::vector<rte_mbuf*> held;
  held.reserve(mp->size);
  while (rte_mbuf* m = rte_pktmbuf_alloc(mp)) held.push_back(m);
  return held;
}

void give_back(std::vector<rte_mbuf*>& held, size_t keep = 0) {
  while (held.size() > keep) {
    rte_pktmbuf_free(held.back());
    held.pop_back();
  }
}

std::vector<ResultEx> drain(Cq& cq) {
  std::vector<ResultEx> out;
  ResultEx r[64];
  for (size_t n; (n = cq.get_results_ex(r)) != 0;) out.insert(out.end(), r, r + n);
  return out;
}

class Exhaustion : public EalTest {};

// =============================================================================================
// 1. Requests flooding a QP with no receive posted
// =============================================================================================

TEST_F(Exhaustion, RnrFloodWithFiniteRetryFailsTheFirstSendAndFlushesTheRest) {
  // 200 SENDs to a peer that never posts a receive, rnr_retry 2. Each round B answers the first
  // SEND with one RNR NAK and drops the 199 behind it as out of sequence (they are in flight
  // behind the NAKed PSN, rocev2.md §3.4); A waits the RNR timer and resends all 200. The third
  // RNR NAK exhausts rnr_retry (IBTA §9.7.5.2.8): the first SEND fails with RNR_RETRY_EXC_ERR,
  // which NDK reports as STATUS_IO_TIMEOUT (ndkpi.md §7.6 NdSendNoReceive), and the other 199
  // flush with STATUS_CANCELLED.
  constexpr uint32_t kMsgs = 200, kLen = 64;
  RcPair p("ex_rnr_exc");
  p.rnr_retry = 2;
  p.connect(1024, false, 256, 256);
  const auto src = pattern(kMsgs * kLen, 1);
  const uint32_t ksrc = p.a.reg(src.data(), src.size(), 0);
  for (uint32_t i = 0; i < kMsgs; ++i)
    ASSERT_EQ(p.a.qp->post_send(data_wr(WrOpcode::kSend, ctx(i), &src[i * kLen], kLen, ksrc)),
              Status::kSuccess);
  Clock c;
  ASSERT_TRUE(drive(p, c, [&] { return p.a.send_done.size() == kMsgs; }));
  expect_pools_full(p, c);

  ASSERT_EQ(p.a.send_done.size(), kMsgs);
  expect_result(p.a.send_done[0], Status::kIoTimeout, WcStatus::kRnrRetryExcErr,
                OperationType::kSend, ctx(0));
  for (uint32_t i = 1; i < kMsgs; ++i)
    expect_result(p.a.send_done[i], Status::kCancelled, WcStatus::kWrFlushErr, OperationType::kSend,
                  ctx(i));
  EXPECT_TRUE(p.b.recv_done.empty());
  EXPECT_TRUE(p.b.send_done.empty());
  EXPECT_EQ(p.a.qp->state(), QpState::kErr);
  EXPECT_EQ(p.b.qp->state(), QpState::kRts);  // the responder is not at fault
  const QpCounters& ca = p.a.qp->live_counters();
  const QpCounters& cb = p.b.qp->live_counters();
  EXPECT_EQ(cb.rnr_naks_sent, 3u);  // rnr_retry + 1
  EXPECT_EQ(ca.rnr_naks_received, cb.rnr_naks_sent);
  EXPECT_EQ(cb.rnr_naks_coalesced, 0u);
  EXPECT_EQ(cb.out_of_sequence, 3u * (kMsgs - 1));
  EXPECT_EQ(cb.rx_packets, 3u * kMsgs);
  EXPECT_EQ(ca.tx_packets, 3u * kMsgs);
  EXPECT_EQ(ca.retransmits, 2u * kMsgs);
  EXPECT_EQ(ca.timeouts, 0u);
  EXPECT_EQ(cb.completions_ok + cb.completions_error + cb.completions_flushed, 0u);
  EXPECT_EQ(ca.completions_by_status[static_cast<size_t>(WcStatus::kRnrRetryExcErr)], 1u);
  EXPECT_EQ(ca.completions_flushed, kMsgs - 1);
}

TEST_F(Exhaustion, RnrFloodWithInfiniteRetryDeliversEveryMessageOnceAsReceivesArrive) {
  // rnr_retry 7 retries forever (IBTA §9.7.5.2.8). 128 SENDs of varying length wait 2 ms with
  // no receive (far more RNR rounds than any finite rnr_retry allows), then receives arrive in
  // four batches of 32: each batch lets exactly 32 more messages through, and in the end every
  // message has arrived exactly once, in order, with its bytes.
  constexpr uint32_t kMsgs = 128, kBatch = 32, kBuf = 1024;
  RcPair p("ex_rnr_inf");
  p.rnr_retry = 7;
  p.connect(1024, false, 256, 256);
  auto len = [](uint32_t i) { return 1 + (i * 397) % kBuf; };
  const auto src = pattern(kMsgs * kBuf, 2);
  std::vector<uint8_t> rbuf(kMsgs * kBuf, 0xEE);
  const uint32_t ksrc = p.a.reg(src.data(), src.size(), 0);
  const uint32_t krbuf = p.b.reg(rbuf.data(), rbuf.size(), mr_flag::kAllowLocalWrite);
  for (uint32_t i = 0; i < kMsgs; ++i)
    ASSERT_EQ(p.a.qp->post_send(data_wr(WrOpcode::kSend, ctx(i), &src[i * kBuf], len(i), ksrc)),
              Status::kSuccess);
  Clock c;
  steps(p, c, 2000);
  EXPECT_TRUE(p.a.send_done.empty());
  EXPECT_TRUE(p.b.recv_done.empty());
  EXPECT_EQ(p.a.qp->state(), QpState::kRts);
  // One RNR NAK per round (NAK, RNR wait, resend): far more than the 7 a finite rnr_retry
  // would survive.
  EXPECT_GT(p.b.qp->counters().rnr_naks_sent, 7u * 10);
  EXPECT_EQ(p.a.qp->counters().rnr_naks_received, p.b.qp->counters().rnr_naks_sent);

  for (uint32_t b = 0; b < kMsgs / kBatch; ++b) {
    for (uint32_t i = b * kBatch; i < (b + 1) * kBatch; ++i)
      ASSERT_EQ(p.b.qp->post_recv(recv_wr(ctx(1000 + i), &rbuf[i * kBuf], kBuf, krbuf)),
                Status::kSuccess);
    const size_t want = (b + 1) * kBatch;
    ASSERT_TRUE(
        drive(p, c, [&] { return p.b.recv_done.size() >= want && p.a.send_done.size() >= want; }))
        << "batch " << b;
    steps(p, c, 200);  // the next message is RNR NAKed again, and nothing more arrives
    EXPECT_EQ(p.b.recv_done.size(), want);
    EXPECT_EQ(p.a.send_done.size(), want);
  }
  expect_pools_full(p, c);
  ASSERT_EQ(p.b.recv_done.size(), kMsgs);
  ASSERT_EQ(p.a.send_done.size(), kMsgs);
  for (uint32_t i = 0; i < kMsgs; ++i) {
    expect_result(p.a.send_done[i], Status::kSuccess, WcStatus::kSuccess, OperationType::kSend,
                  ctx(i));
    const ResultEx& r = p.b.recv_done[i];
    expect_result(r, Status::kSuccess, WcStatus::kSuccess, OperationType::kReceive, ctx(1000 + i));
    EXPECT_EQ(r.bytes_transferred, len(i)) << i;
    EXPECT_EQ(std::memcmp(&rbuf[i * kBuf], &src[i * kBuf], len(i)), 0) << i;
    if (len(i) < kBuf) {
      EXPECT_EQ(rbuf[i * kBuf + len(i)], 0xEE) << "byte after message " << i;
    }
  }
  const QpCounters& ca = p.a.qp->live_counters();
  const QpCounters& cb = p.b.qp->live_counters();
  EXPECT_EQ(ca.rnr_naks_received, cb.rnr_naks_sent);
  EXPECT_EQ(cb.duplicate_requests, 0u);  // nothing was executed twice
  EXPECT_EQ(cb.completions_ok, kMsgs);
  EXPECT_EQ(ca.completions_ok, kMsgs);
  EXPECT_EQ(ca.timeouts, 0u);
  EXPECT_EQ(p.a.qp->state(), QpState::kRts);
  EXPECT_EQ(p.b.qp->state(), QpState::kRts);
}

// ---- RawQp: one QP fed synthetic frames ---------------------------------------------------------

constexpr uint8_t kRnrNak = wire::aeth::kRnrNak | kRnrTimerCode;
constexpr uint32_t kWriteOff = 8192;  // responder WRITE target in the test region
constexpr uint32_t kFloodFrames = 20'000;
// The responder's first PSN is rq(0) = 0xFFFF00: the floods cross the 24-bit wrap.
constexpr QpOptions kRawQpOptions{.rq_psn = 0xFFFF00, .sq_psn = 0x100};

class RawQp : public RcProtocol {
 protected:
  static void SetUpTestSuite() {
    eal_up_once();  // the EAL the RcPair tests need, whichever suite runs first
    RcProtocol::SetUpTestSuite();
  }

  void SetUp() override {
    RcProtocol::SetUp();
    for (uint32_t i = 0; i < kMemSize; ++i) mem_[i] = static_cast<uint8_t>(i * 13 + 5);
    payload_.assign(4096, 0);
    for (uint32_t i = 0; i < payload_.size(); ++i) payload_[i] = static_cast<uint8_t>(i * 7 + 1);
  }

  // The peer's frame carrying the first `len` bytes of payload_: no allocation but the mbuf (the
  // floods check that the whole path allocates nothing).
  using RcProtocol::receive;
  void receive(const wire::TransportHeaders& th, uint32_t len) {
    RcProtocol::receive(th, std::span<const uint8_t>(payload_).first(len));
  }

  // A receive with this file's ctx(context).
  void post_recv(uintptr_t context, uint32_t off, uint32_t len) {
    ASSERT_EQ(qp_->post_recv(recv_wr(ctx(context), mem_.data() + off, len, key_)),
              Status::kSuccess);
  }

  uint32_t queued_jobs() const { return qp_->responder().jobs_count; }

  std::vector<uint8_t> payload_;
};

TEST_F(RawQp, SendFloodAtOnePsnIsAnsweredByOneRnrNak) {
  // 20 000 copies of SEND ONLY at the expected PSN, no receive posted, before the responder
  // sends anything: one RNR NAK answers them all (the others find it still queued). Nothing
  // executes, the output queue holds one job, and the flood allocates nothing.
  bring_up(kRawQpOptions);
  const uint64_t heap0 = heap_in_use(), news0 = news();
  for (uint32_t i = 0; i < kFloodFrames; ++i) receive(hdr(opc::kSendOnly, rq(0), true), 64);
  EXPECT_EQ(news(), news0) << "the RX path allocated";
  EXPECT_EQ(heap_in_use(), heap0);
  EXPECT_EQ(queued_jobs(), 1u);
  EXPECT_EQ(responder_tx(), 1u);
  auto tx = take_tx();
  ASSERT_EQ(tx.size(), 1u);
  expect_ack(tx[0], rq(0), kRnrNak, 0);
  const auto& c = qp_->counters();
  EXPECT_EQ(c.rx_packets, kFloodFrames);
  EXPECT_EQ(c.rnr_naks_sent, 1u);
  EXPECT_EQ(c.rnr_naks_coalesced, kFloodFrames - 1);
  EXPECT_EQ(c.rnr_naks_sent + c.rnr_naks_coalesced, c.rx_packets);
  EXPECT_EQ(c.resp_queue_full + c.out_of_sequence + c.duplicate_requests, 0u);
  EXPECT_EQ(total_rx_drops(), 0u);
  EXPECT_TRUE(poll(rcq_).empty());
  EXPECT_EQ(qp_->responder().epsn, Psn(rq(0)));

  // The requester's next retry, after the NAK went out, gets a NAK of its own.
  receive(hdr(opc::kSendOnly, rq(0), true), 64);
  EXPECT_EQ(responder_tx(), 1u);
  tx = take_tx();
  ASSERT_EQ(tx.size(), 1u);
  expect_ack(tx[0], rq(0), kRnrNak, 0);
  EXPECT_EQ(c.rnr_naks_sent, 2u);

  // A receive arrives: the next copy executes once and is ACKed.
  post_recv(1, kRecvOff, 1024);
  receive(hdr(opc::kSendOnly, rq(0), true), 64);
  EXPECT_EQ(responder_tx(), 1u);
  tx = take_tx();
  ASSERT_EQ(tx.size(), 1u);
  expect_ack(tx[0], rq(0), kAckNoCredit, 1);
  const auto rc = poll(rcq_);
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].status, Status::kSuccess);
  EXPECT_EQ(rc[0].bytes_transferred, 64u);
  EXPECT_EQ(std::memcmp(mem_.data() + kRecvOff, payload_.data(), 64), 0);
  EXPECT_EQ(qp_->state(), QpState::kRts);
}

TEST_F(RawQp, SendFloodAtNewPsnsGetsOneRnrNakAndOutOfSequenceDrops) {
  // 20 000 SEND ONLY at consecutive PSNs (across the 24-bit wrap): the first is RNR NAKed, the
  // rest are in flight behind it and are dropped without a sequence NAK (rocev2.md §3.4).
  bring_up(kRawQpOptions);
  const uint64_t heap0 = heap_in_use(), news0 = news();
  for (uint32_t i = 0; i < kFloodFrames; ++i)
    receive(hdr(opc::kSendOnly, rq(static_cast<int32_t>(i)), true), 64);
  EXPECT_EQ(news(), news0) << "the RX path allocated";
  EXPECT_EQ(heap_in_use(), heap0);
  EXPECT_EQ(queued_jobs(), 1u);
  EXPECT_EQ(responder_tx(), 1u);
  const auto tx = take_tx();
  ASSERT_EQ(tx.size(), 1u);
  expect_ack(tx[0], rq(0), kRnrNak, 0);
  const auto& c = qp_->counters();
  EXPECT_EQ(c.rnr_naks_sent, 1u);
  EXPECT_EQ(c.out_of_sequence, kFloodFrames - 1);
  EXPECT_EQ(c.naks_sent[wire::aeth::kNakPsnSeqError], 0u);
  EXPECT_EQ(c.rnr_naks_sent + c.out_of_sequence, c.rx_packets);
  EXPECT_EQ(c.rx_packets, kFloodFrames);
  EXPECT_TRUE(poll(rcq_).empty());
}

TEST_F(RawQp, DuplicatesInterleavedWithRetriesDoNotMultiplyNaks) {
  // One SEND executed (ePSN = rq(1)), then, with no receive left, 10 000 pairs of (retry of
  // rq(1), duplicate of rq(0)). The RNR NAK for rq(1) acknowledges rq(0) as well, so the
  // duplicates add no ACK behind it, and every retry finds the NAK still queued: one frame.
  bring_up(kRawQpOptions);
  post_recv(1, kRecvOff, 1024);
  receive(hdr(opc::kSendOnly, rq(0), true), 64);
  EXPECT_EQ(responder_tx(), 1u);
  auto tx = take_tx();
  ASSERT_EQ(tx.size(), 1u);
  expect_ack(tx[0], rq(0), kAckNoCredit, 1);
  ASSERT_EQ(poll(rcq_).size(), 1u);

  const uint64_t news0 = news();
  for (uint32_t i = 0; i < kFloodFrames / 2; ++i) {
    receive(hdr(opc::kSendOnly, rq(1), true), 64);
    receive(hdr(opc::kSendOnly, rq(0), true), 64);
  }
  EXPECT_EQ(news(), news0) << "the RX path allocated";
  EXPECT_EQ(queued_jobs(), 1u);
  EXPECT_EQ(responder_tx(), 1u);
  tx = take_tx();
  ASSERT_EQ(tx.size(), 1u);
  expect_ack(tx[0], rq(1), kRnrNak, 1);
  const auto& c = qp_->counters();
  EXPECT_EQ(c.rnr_naks_sent, 1u);
  EXPECT_EQ(c.rnr_naks_coalesced, kFloodFrames / 2 - 1);
  EXPECT_EQ(c.duplicate_requests, kFloodFrames / 2);
  EXPECT_EQ(c.acks_sent, 1u);  // the one for rq(0) before the flood
  EXPECT_EQ(c.rx_packets, kFloodFrames + 1);
  EXPECT_TRUE(poll(rcq_).empty());  // the duplicates executed nothing
}

TEST_F(RawQp, RequestFloodBeyondTheOutputQueueIsDroppedAndCounted) {
  // 20 000 READ requests (8 bytes each, consecutive PSNs) before the responder sends anything:
  // as many as the output queue holds (sized from max_dest_rd_atomic: dp::resp_jobs_for) are
  // accepted and queued, the rest find it full and are dropped (counted; a requester retransmits
  // them). Then exactly that many READ responses go out, in PSN order, with the right bytes.
  bring_up(kRawQpOptions);
  const uint32_t kJobs = qp_->responder().jobs_cap;
  ASSERT_EQ(kJobs, dp::resp_jobs_for(dp::resp_resources_for(qp_->attr().max_dest_rd_atomic)));
  const uint64_t heap0 = heap_in_use(), news0 = news();
  for (uint32_t i = 0; i < kFloodFrames; ++i)
    receive(reth(opc::kReadRequest, rq(static_cast<int32_t>(i)), addr(kReadSrcOff + (i % 64) * 8),
                 key_, 8));
  EXPECT_EQ(news(), news0) << "the RX path allocated";
  EXPECT_EQ(heap_in_use(), heap0);
  const auto& c = qp_->counters();
  EXPECT_EQ(queued_jobs(), kJobs);
  EXPECT_EQ(c.resp_queue_full, kFloodFrames - kJobs);
  EXPECT_EQ(c.rx_packets, kFloodFrames);
  EXPECT_EQ(qp_->responder().epsn, Psn(rq(static_cast<int32_t>(kJobs))));
  uint32_t n = 0;
  while (responder_tx() != 0) {
    for (const TxFrame& t : take_tx()) {
      EXPECT_EQ(t.opcode, opc::kReadRespOnly);
      EXPECT_EQ(t.psn, rq(static_cast<int32_t>(n)));
      ASSERT_EQ(t.payload.size(), 8u);
      EXPECT_EQ(std::memcmp(t.payload.data(), mem_.data() + kReadSrcOff + (n % 64) * 8, 8), 0);
      ++n;
    }
  }
  EXPECT_EQ(n, kJobs);
  EXPECT_EQ(queued_jobs(), 0u);
  EXPECT_EQ(qp_->state(), QpState::kRts);
}

TEST_F(RawQp, OutputQueueWrapsAroundAndKeepsPsnOrder) {
  // The output queue is a circle of resp_jobs_for() entries, not a power of two: fill it, send a
  // few, queue as many more (they go into the slots just freed, at the start of the array), and
  // every READ response still leaves once, in PSN order, with its bytes.
  bring_up(kRawQpOptions);
  const uint32_t kJobs = qp_->responder().jobs_cap;
  constexpr uint32_t kMore = 5;
  auto read = [&](uint32_t i) {
    receive(reth(opc::kReadRequest, rq(static_cast<int32_t>(i)), addr(kReadSrcOff + (i % 64) * 8),
                 key_, 8));
  };
  for (uint32_t i = 0; i < kJobs; ++i) read(i);
  ASSERT_EQ(queued_jobs(), kJobs);
  uint32_t n = 0;
  auto check = [&](uint32_t budget) {
    const uint32_t sent = responder_tx(budget);
    for (const TxFrame& t : take_tx()) {
      EXPECT_EQ(t.opcode, opc::kReadRespOnly);
      EXPECT_EQ(t.psn, rq(static_cast<int32_t>(n)));
      EXPECT_EQ(std::memcmp(t.payload.data(), mem_.data() + kReadSrcOff + (n % 64) * 8, 8), 0);
      ++n;
    }
    return sent;
  };
  EXPECT_EQ(check(kMore), kMore);
  for (uint32_t i = kJobs; i < kJobs + kMore; ++i) read(i);
  EXPECT_EQ(queued_jobs(), kJobs);
  EXPECT_EQ(qp_->counters().resp_queue_full, 0u);
  while (check(kBudget) != 0) {
  }
  EXPECT_EQ(n, kJobs + kMore);
  EXPECT_EQ(queued_jobs(), 0u);
}

// =============================================================================================
// 2. Mempool exhaustion
// =============================================================================================

TEST_F(Exhaustion, SenderPoolEmptyStallsWithoutLossThenCompletes) {
  // A's pool is empty: for 1000 steps the requester fails one allocation per step (counted),
  // sends nothing and consumes no PSN. With a single mbuf it trickles (each frame's mbuf comes
  // back when B has received it), and with its pool back everything completes: exact bytes, no
  // retransmission, nothing out of sequence or duplicated at B.
  constexpr uint32_t kMsgs = 16, kWriteLen = 4096, kSendLen = 2048, kStall = 1000;
  RcPair p("ex_pool_tx");
  p.connect(1024, false, 64, 64);
  const auto src = pattern(kMsgs * kWriteLen, 3);
  std::vector<uint8_t> dst(kMsgs * kWriteLen, 0), rbuf(kMsgs * kSendLen, 0);
  const uint32_t ksrc = p.a.reg(src.data(), src.size(), 0);
  const uint32_t kdst = p.b.reg(dst.data(), dst.size(), kRemoteAll);
  const uint32_t krbuf = p.b.reg(rbuf.data(), rbuf.size(), mr_flag::kAllowLocalWrite);
  for (uint32_t i = 0; i < kMsgs; ++i)
    ASSERT_EQ(p.b.qp->post_recv(recv_wr(ctx(500 + i), &rbuf[i * kSendLen], kSendLen, krbuf)),
              Status::kSuccess);
  Clock c;
  settle(p, c);  // the control planes' start-up frames cross
  auto held = take_all(pool_of(p.a));
  ASSERT_EQ(rte_mempool_avail_count(pool_of(p.a)), 0u);
  for (uint32_t i = 0; i < kMsgs; ++i) {
    ASSERT_EQ(p.a.qp->post_send(data_wr(WrOpcode::kWrite, ctx(2 * i), &src[i * kWriteLen],
                                        kWriteLen, ksrc, addr(&dst[i * kWriteLen]), kdst)),
              Status::kSuccess);
    ASSERT_EQ(p.a.qp->post_send(
                  data_wr(WrOpcode::kSend, ctx(2 * i + 1), &src[i * kWriteLen], kSendLen, ksrc)),
              Status::kSuccess);
  }
  const uint64_t fail0 = alloc_failures(p.a);
  steps(p, c, kStall);
  EXPECT_EQ(alloc_failures(p.a) - fail0, kStall);
  EXPECT_EQ(alloc_failures(p.b), 0u);
  EXPECT_EQ(p.a.qp->counters().tx_packets, 0u);
  EXPECT_EQ(p.b.qp->counters().rx_packets, 0u);
  EXPECT_EQ(p.a.qp->internal().requester().psn, Psn(0x10000));  // no PSN consumed
  EXPECT_TRUE(p.a.send_done.empty());
  EXPECT_EQ(p.a.qp->state(), QpState::kRts);

  give_back(held, held.size() - 1);  // one mbuf
  ASSERT_TRUE(drive(p, c, [&] { return p.a.send_done.size() == 2 * kMsgs; }));
  EXPECT_GT(alloc_failures(p.a) - fail0, kStall);
  give_back(held);
  expect_pools_full(p, c);

  ASSERT_EQ(p.a.send_done.size(), 2 * kMsgs);
  for (uint32_t i = 0; i < 2 * kMsgs; ++i)
    expect_result(p.a.send_done[i], Status::kSuccess, WcStatus::kSuccess,
                  i % 2 == 0 ? OperationType::kWrite : OperationType::kSend, ctx(i));
  ASSERT_EQ(p.b.recv_done.size(), kMsgs);
  for (uint32_t i = 0; i < kMsgs; ++i) {
    expect_result(p.b.recv_done[i], Status::kSuccess, WcStatus::kSuccess, OperationType::kReceive,
                  ctx(500 + i));
    EXPECT_EQ(p.b.recv_done[i].bytes_transferred, kSendLen);
    EXPECT_EQ(std::memcmp(&rbuf[i * kSendLen], &src[i * kWriteLen], kSendLen), 0) << i;
  }
  EXPECT_EQ(dst, src);
  const QpCounters& ca = p.a.qp->live_counters();
  const QpCounters& cb = p.b.qp->live_counters();
  EXPECT_EQ(ca.tx_packets, kMsgs * (kWriteLen / 1024 + kSendLen / 1024));
  EXPECT_EQ(ca.retransmits, 0u);
  EXPECT_EQ(ca.timeouts, 0u);
  EXPECT_EQ(cb.out_of_sequence + cb.duplicate_requests, 0u);
}

// Traffic for the receiver-side tests: 4 WRITEs and 4 SENDs of 512 bytes (one packet each) and
// one READ of 3000 bytes (three response packets) from A to B.
struct SmallTraffic {
  static constexpr uint32_t kN = 4, kLen = 512, kReadLen = 3000;
  std::vector<uint8_t> src = pattern(2 * kN * kLen, 7);
  std::vector<uint8_t> dst = std::vector<uint8_t>(kN * kLen, 0);
  std::vector<uint8_t> rbuf = std::vector<uint8_t>(kN * kLen, 0);
  std::vector<uint8_t> rsrc = pattern(kReadLen, 8);
  std::vector<uint8_t> rdst = std::vector<uint8_t>(kReadLen, 0);
  uint32_t ksrc = 0, kdst = 0, krbuf = 0, krsrc = 0, krdst = 0;

  // Connects `p` as these tests want it (control threads stopped, ACK timeout 4: 65.5 us, queues
  // of 64) and lets the control planes' start-up frames cross; returns the clock to go on with.
  static Clock connect(RcPair& p) {
    p.timeout = 4;
    p.connect(1024, false, 64, 64);
    Clock c;
    settle(p, c);
    return c;
  }

  // Empties B's pool, posts the traffic and runs `n` steps; returns B's mbufs (held).
  std::vector<rte_mbuf*> post_with_b_pool_empty(RcPair& p, Clock& c, bool with_read, uint64_t n) {
    auto held = take_all(pool_of(p.b));
    post(p, with_read);
    if (!::testing::Test::HasFatalFailure()) steps(p, c, n);
    return held;
  }

  void post(RcPair& p, bool with_read) {
    ksrc = p.a.reg(src.data(), src.size(), 0);
    krdst = p.a.reg(rdst.data(), rdst.size(), mr_flag::kAllowLocalWrite);
    kdst = p.b.reg(dst.data(), dst.size(), kRemoteAll);
    krsrc = p.b.reg(rsrc.data(), rsrc.size(), kRemoteAll);
    krbuf = p.b.reg(rbuf.data(), rbuf.size(), mr_flag::kAllowLocalWrite);
    for (uint32_t i = 0; i < kN; ++i)
      ASSERT_EQ(p.b.qp->post_recv(recv_wr(ctx(500 + i), &rbuf[i * kLen], kLen, krbuf)),
                Status::kSuccess);
    for (uint32_t i = 0; i < kN; ++i) {
      ASSERT_EQ(p.a.qp->post_send(data_wr(WrOpcode::kWrite, ctx(2 * i), &src[i * kLen], kLen, ksrc,
                                          addr(&dst[i * kLen]), kdst)),
                Status::kSuccess);
      ASSERT_EQ(p.a.qp->post_send(
                    data_wr(WrOpcode::kSend, ctx(2 * i + 1), &src[(kN + i) * kLen], kLen, ksrc)),
                Status::kSuccess);
    }
    if (with_read) {
      ASSERT_EQ(p.a.qp->post_send(data_wr(WrOpcode::kRead, ctx(2 * kN), rdst.data(), kReadLen,
                                          krdst, addr(rsrc.data()), krsrc)),
                Status::kSuccess);
    }
  }

  void expect_done(RcPair& p, bool with_read) {
    const uint32_t sends = 2 * kN + (with_read ? 1 : 0);
    ASSERT_EQ(p.a.send_done.size(), sends);
    for (uint32_t i = 0; i < 2 * kN; ++i)
      expect_result(p.a.send_done[i], Status::kSuccess, WcStatus::kSuccess,
                    i % 2 == 0 ? OperationType::kWrite : OperationType::kSend, ctx(i));
    if (with_read) {
      expect_result(p.a.send_done[2 * kN], Status::kSuccess, WcStatus::kSuccess,
                    OperationType::kRead, ctx(2 * kN));
      EXPECT_EQ(rdst, rsrc);
    }
    ASSERT_EQ(p.b.recv_done.size(), kN);  // each SEND executed exactly once
    for (uint32_t i = 0; i < kN; ++i) {
      expect_result(p.b.recv_done[i], Status::kSuccess, WcStatus::kSuccess, OperationType::kReceive,
                    ctx(500 + i));
      EXPECT_EQ(p.b.recv_done[i].bytes_transferred, kLen);
      EXPECT_EQ(std::memcmp(&rbuf[i * kLen], &src[(kN + i) * kLen], kLen), 0) << i;
      EXPECT_EQ(std::memcmp(&dst[i * kLen], &src[i * kLen], kLen), 0) << i;
    }
  }
};

TEST_F(Exhaustion, ReceiverPoolEmptyExecutesButCannotAnswerUntilMbufsReturn) {
  // B's pool is empty. Over net_ring B receives into A's mbufs, so it still executes every
  // request (WRITEs placed, SENDs completed, the READ accepted), but it cannot build one ACK or
  // READ response: one failed allocation per step, the output kept. A's ACK timer (timeout 4:
  // 65.5 us) expires three times in 230 us and each time resends all 9 request packets, which B
  // sees as duplicates (re-ACK owed, READ replay queued; nothing executed twice). With its pool
  // back B answers, and everything completes exactly once.
  constexpr uint64_t kStall = 230;
  RcPair p("ex_pool_rx", {}, false);  // plain go-back-N: the resend counts below are its
  Clock c = SmallTraffic::connect(p);
  SmallTraffic t;
  auto held = t.post_with_b_pool_empty(p, c, true, kStall);
  if (HasFatalFailure()) return;
  const QpCounters& ca = p.a.qp->live_counters();
  const QpCounters& cb = p.b.qp->live_counters();
  EXPECT_TRUE(p.a.send_done.empty());
  EXPECT_EQ(p.b.recv_done.size(), SmallTraffic::kN);  // executed, completions need no mbuf
  EXPECT_EQ(ca.timeouts, 3u);
  EXPECT_EQ(ca.retransmits, 3u * 9);
  EXPECT_EQ(cb.duplicate_requests, 3u * 9);
  EXPECT_EQ(cb.tx_packets, 0u);
  // From the step after A's first transmission, B's responder tried once per step.
  EXPECT_EQ(alloc_failures(p.b), kStall - 1);
  EXPECT_EQ(p.a.qp->state(), QpState::kRts);
  EXPECT_EQ(p.b.qp->state(), QpState::kRts);

  give_back(held);
  ASSERT_TRUE(drive(p, c, [&] { return p.a.send_done.size() == 2 * SmallTraffic::kN + 1; }));
  expect_pools_full(p, c);
  t.expect_done(p, true);
  EXPECT_EQ(ca.timeouts, 3u);  // the answers came before the fourth expiry
  EXPECT_EQ(cb.duplicate_requests, 3u * 9);
  EXPECT_EQ(ca.completions_error + ca.completions_flushed, 0u);
}

TEST_F(Exhaustion, ReceiverDroppingFramesRecoversByRetransmission) {
  // A receiver whose RX ring has no free mbufs drops frames before any software sees them (a
  // NIC counts them as missed). Over net_ring that drop cannot happen (frames arrive in the
  // sender's mbufs; the receiver's pool does not back its RX ring), so while B's pool is empty
  // a fault injector on A's transmit side loses every frame on the way, which is the same thing
  // as far as the protocol can tell. A's timer (timeout 4) resends three times into the void;
  // with B's pool back and frames arriving again, the fourth resend is executed, exactly once.
  constexpr uint64_t kStall = 230;
  RcPair p("ex_pool_drop", {}, false);  // plain go-back-N: the resend counts below are its
  Clock c = SmallTraffic::connect(p);
  SmallTraffic t;
  FaultConfig fc;
  fc.drop_ppm = 1'000'000;
  ASSERT_EQ(p.set_faults(p.a, fc, {}), Status::kSuccess);
  const auto dropped = [&] { return p.counters(p.a).tx_faults.dropped; };
  auto held = t.post_with_b_pool_empty(p, c, false, kStall);
  if (HasFatalFailure()) return;
  EXPECT_TRUE(p.a.send_done.empty());
  EXPECT_TRUE(p.b.recv_done.empty());
  EXPECT_EQ(dropped(), 4u * 8);  // the first send and three resends
  EXPECT_EQ(p.b.qp->counters().rx_packets, 0u);
  EXPECT_EQ(p.a.qp->counters().timeouts, 3u);

  const uint64_t dropped_total = dropped();
  ASSERT_EQ(p.set_faults(p.a, {}, {}), Status::kSuccess);
  give_back(held);
  ASSERT_TRUE(drive(p, c, [&] { return p.a.send_done.size() == 2 * SmallTraffic::kN; }));
  expect_pools_full(p, c);
  t.expect_done(p, false);
  const QpCounters& ca = p.a.qp->live_counters();
  const QpCounters& cb = p.b.qp->live_counters();
  EXPECT_EQ(ca.timeouts, 4u);
  EXPECT_EQ(ca.retransmits, 4u * 8);
  EXPECT_EQ(cb.rx_packets, 8u);
  EXPECT_EQ(cb.duplicate_requests, 0u);
  EXPECT_EQ(dropped_total, 4u * 8);
}

TEST_F(Exhaustion, ReceiverPoolEmptyStillDeliversItsNakCode) {
  // A WRITE with a bad R_Key reaches B while B's pool is empty: the remote access error NAK
  // cannot be built. It stays queued (B drops further requests meanwhile, as in ERR) and goes
  // out when an mbuf is free; only then does B enter ERR. So A fails the WRITE with the NAK's
  // status, REM_ACCESS_ERR / STATUS_ACCESS_VIOLATION (IBTA §9.7.5.2; rocev2.md §3.7), not with
  // a transport timeout, and the WRITE behind it is flushed. Nothing is written at B.
  RcPair p("ex_pool_nak");
  p.connect(1024, false, 64, 64);
  const auto src = pattern(256, 9);
  std::vector<uint8_t> dst(256, 0x5A);
  const auto before = dst;
  const uint32_t ksrc = p.a.reg(src.data(), src.size(), 0);
  const uint32_t kdst = p.b.reg(dst.data(), dst.size(), kRemoteAll);
  Clock c;
  settle(p, c);
  auto held = take_all(pool_of(p.b));
  ASSERT_EQ(p.a.qp->post_send(data_wr(WrOpcode::kWrite, ctx(1), src.data(), 128, ksrc,
                                      addr(dst.data()), kdst ^ 0x80)),
            Status::kSuccess);
  ASSERT_EQ(p.a.qp->post_send(
                data_wr(WrOpcode::kWrite, ctx(2), src.data(), 128, ksrc, addr(dst.data()), kdst)),
            Status::kSuccess);
  steps(p, c, 100);
  const QpCounters& cb = p.b.qp->live_counters();
  EXPECT_EQ(cb.naks_sent[wire::aeth::kNakRemoteAccessError], 1u);
  EXPECT_EQ(cb.tx_packets, 0u);
  EXPECT_EQ(cb.dropped_bad_state, 1u);  // the second WRITE, behind the queued NAK
  // Once when the NAK was due (B's RX, step 2), then once per step from its TX phase on.
  EXPECT_EQ(alloc_failures(p.b), 1u + 99);
  EXPECT_EQ(p.b.qp->state(), QpState::kRts);  // ERR once the NAK is out
  EXPECT_TRUE(p.a.send_done.empty());

  give_back(held);
  ASSERT_TRUE(drive(p, c, [&] { return p.a.send_done.size() == 2; }));
  expect_pools_full(p, c);
  expect_result(p.a.send_done[0], Status::kAccessViolation, WcStatus::kRemAccessErr,
                OperationType::kWrite, ctx(1));
  expect_result(p.a.send_done[1], Status::kCancelled, WcStatus::kWrFlushErr, OperationType::kWrite,
                ctx(2));
  EXPECT_EQ(p.b.qp->state(), QpState::kErr);
  EXPECT_EQ(p.a.qp->state(), QpState::kErr);
  EXPECT_EQ(cb.tx_packets, 1u);
  EXPECT_EQ(p.a.qp->counters().naks_received[wire::aeth::kNakRemoteAccessError], 1u);
  EXPECT_EQ(p.a.qp->counters().timeouts, 0u);
  EXPECT_EQ(dst, before);
}

// =============================================================================================
// 3. CQ overrun
// =============================================================================================

TEST_F(Exhaustion, SendCqOverrunKillsEveryQpOnIt) {
  // A's send CQ holds 8 entries and is never polled; 20 WRITEs complete into it. The ninth
  // completion overruns it (ndkpi.md §3.3): it and every later one are lost (counted), and every
  // QP completing into that CQ enters ERR before it does anything more, the idle second QP too.
  // A's receives, on a healthy CQ, are flushed normally. Work posted afterwards is flushed
  // without reaching the wire, its completions lost as well. B is not affected.
  constexpr uint32_t kCq = 8, kWrites = 20, kLen = 64;
  RcPair p("ex_cq_send");
  p.a.scq.reset();
  ASSERT_EQ(p.a.adapter->create_cq(kCq, nullptr, nullptr, nullptr, nullptr, &p.a.scq),
            Status::kSuccess);
  p.connect(1024, false, 64, 64);
  TestQp *a2 = nullptr, *b2 = nullptr;
  ASSERT_EQ(p.a.create_qp(nullptr, 16, 16, &a2), Status::kSuccess);
  ASSERT_EQ(p.b.create_qp(nullptr, 16, 16, &b2), Status::kSuccess);
  p.bring_up(p.a, *a2, p.b, *b2, 1024, false, kRemoteAccess, 0x300, 0x400);
  p.bring_up(p.b, *b2, p.a, *a2, 1024, false, kRemoteAccess, 0x400, 0x300);
  const auto src = pattern(kWrites * kLen, 10);
  std::vector<uint8_t> dst(kWrites * kLen, 0), arbuf(256, 0);
  const uint32_t ksrc = p.a.reg(src.data(), src.size(), 0);
  const uint32_t kdst = p.b.reg(dst.data(), dst.size(), kRemoteAll);
  const uint32_t karbuf = p.a.reg(arbuf.data(), arbuf.size(), mr_flag::kAllowLocalWrite);
  for (uint32_t i = 0; i < 2; ++i)
    ASSERT_EQ(p.a.qp->post_recv(recv_wr(ctx(900 + i), &arbuf[i * 128], 128, karbuf)),
              Status::kSuccess);
  for (uint32_t i = 0; i < kWrites; ++i)
    ASSERT_EQ(p.a.qp->post_send(data_wr(WrOpcode::kWrite, ctx(i), &src[i * kLen], kLen, ksrc,
                                        addr(&dst[i * kLen]), kdst)),
              Status::kSuccess);
  Clock c;
  ASSERT_TRUE(drive(
      p, c, [&] { return a2->state() == QpState::kErr; }, 1000, false));
  steps(p, c, 100, false);
  dp::Cq& cq = RcPair::internal(*p.a.scq);
  EXPECT_TRUE(cq.overrun());
  EXPECT_EQ(cq.produced(), kCq);
  EXPECT_EQ(cq.dropped(), kWrites - kCq);
  EXPECT_EQ(p.a.qp->state(), QpState::kErr);
  EXPECT_EQ(a2->state(), QpState::kErr);
  EXPECT_EQ(p.b.qp->state(), QpState::kRts);
  EXPECT_EQ(b2->state(), QpState::kRts);
  const QpCounters& ca = p.a.qp->live_counters();
  EXPECT_EQ(ca.completions_dropped, kWrites - kCq);
  EXPECT_EQ(ca.cq_overrun_errors, 1u);
  EXPECT_EQ(ca.completions_ok, kWrites);  // every WRITE did complete; 12 CQEs were lost
  EXPECT_EQ(a2->counters().cq_overrun_errors, 1u);
  EXPECT_EQ(a2->counters().completions_dropped, 0u);
  EXPECT_EQ(dst, src);  // B executed all of them before A's CQ overran

  // Work posted to the dead QPs is flushed without being sent; its completions are lost too.
  const uint64_t b_rx = p.b.qp->counters().rx_packets + b2->counters().rx_packets;
  for (uint32_t i = 0; i < 3; ++i)
    ASSERT_EQ(p.a.qp->post_send(data_wr(WrOpcode::kWrite, ctx(100 + i), src.data(), kLen, ksrc,
                                        addr(dst.data()), kdst)),
              Status::kSuccess);
  ASSERT_EQ(a2->post_send(data_wr(WrOpcode::kWrite, ctx(200), src.data(), kLen, ksrc,
                                  addr(dst.data()), kdst)),
            Status::kSuccess);
  steps(p, c, 100, false);
  EXPECT_EQ(ca.completions_dropped, kWrites - kCq + 3);
  EXPECT_EQ(a2->counters().completions_dropped, 1u);
  EXPECT_EQ(cq.dropped(), kWrites - kCq + 4);
  EXPECT_EQ(cq.produced(), kCq);
  EXPECT_EQ(p.b.qp->counters().rx_packets + b2->counters().rx_packets, b_rx);
  EXPECT_EQ(ca.tx_packets, kWrites);
  EXPECT_EQ(a2->counters().tx_packets, 0u);

  // What the CQ holds: the first 8 completions, successful and in order.
  const auto in_cq = drain(*p.a.scq);
  ASSERT_EQ(in_cq.size(), kCq);
  for (uint32_t i = 0; i < kCq; ++i)
    expect_result(in_cq[i], Status::kSuccess, WcStatus::kSuccess, OperationType::kWrite, ctx(i));
  // A's receives went to its healthy receive CQ, flushed.
  const auto rc = drain(*p.a.rcq);
  ASSERT_EQ(rc.size(), 2u);
  for (uint32_t i = 0; i < 2; ++i)
    expect_result(rc[i], Status::kCancelled, WcStatus::kWrFlushErr, OperationType::kReceive,
                  ctx(900 + i));
  EXPECT_TRUE(drain(*p.b.scq).empty());
  EXPECT_TRUE(drain(*p.b.rcq).empty());
  expect_pools_full(p, c, false);
  EXPECT_TRUE(p.destroy_qp(p.a, a2));
  EXPECT_TRUE(p.destroy_qp(p.b, b2));
}

TEST_F(Exhaustion, RecvCqOverrunStopsTheResponder) {
  // B's receive CQ holds 4 entries and is never polled; A sends 10 SENDs into 10 receives. The
  // fifth SEND executes and its completion overruns the CQ; at the sixth packet B's QP is dead
  // (ERR): the remaining five receives flush into the dead CQ (lost, counted) and every later
  // packet is dropped. The ACK B owed dies with it, so A's timer (timeout 4, retry_cnt 2)
  // expires three times and A fails the first SEND with RETRY_EXC_ERR / STATUS_IO_TIMEOUT and
  // flushes the rest. Receive buffers 6 to 10 are never written.
  constexpr uint32_t kCq = 4, kSends = 10, kLen = 256;
  RcPair p("ex_cq_recv", {}, false);  // plain go-back-N: the resend counts below are its
  p.timeout = 4;
  p.retry_cnt = 2;
  p.b.rcq.reset();
  ASSERT_EQ(p.b.adapter->create_cq(kCq, nullptr, nullptr, nullptr, nullptr, &p.b.rcq),
            Status::kSuccess);
  p.connect(1024, false, 64, 64);
  const auto src = pattern(kSends * kLen, 11);
  std::vector<uint8_t> rbuf(kSends * kLen, 0x33);
  const uint32_t ksrc = p.a.reg(src.data(), src.size(), 0);
  const uint32_t krbuf = p.b.reg(rbuf.data(), rbuf.size(), mr_flag::kAllowLocalWrite);
  for (uint32_t i = 0; i < kSends; ++i)
    ASSERT_EQ(p.b.qp->post_recv(recv_wr(ctx(500 + i), &rbuf[i * kLen], kLen, krbuf)),
              Status::kSuccess);
  for (uint32_t i = 0; i < kSends; ++i)
    ASSERT_EQ(p.a.qp->post_send(data_wr(WrOpcode::kSend, ctx(i), &src[i * kLen], kLen, ksrc)),
              Status::kSuccess);
  Clock c;
  std::vector<ResultEx> a_done;
  ASSERT_TRUE(drive(
      p, c,
      [&] {
        for (const ResultEx& r : drain(*p.a.scq)) a_done.push_back(r);
        return a_done.size() == kSends;
      },
      5000, false));
  expect_pools_full(p, c, false);

  expect_result(a_done[0], Status::kIoTimeout, WcStatus::kRetryExcErr, OperationType::kSend,
                ctx(0));
  for (uint32_t i = 1; i < kSends; ++i)
    expect_result(a_done[i], Status::kCancelled, WcStatus::kWrFlushErr, OperationType::kSend,
                  ctx(i));
  dp::Cq& cq = RcPair::internal(*p.b.rcq);
  EXPECT_TRUE(cq.overrun());
  EXPECT_EQ(cq.produced(), kCq);
  EXPECT_EQ(cq.dropped(), 1u + (kSends - kCq - 1));  // the fifth SEND's, then five flushes
  const auto in_cq = drain(*p.b.rcq);
  ASSERT_EQ(in_cq.size(), kCq);
  for (uint32_t i = 0; i < kCq; ++i) {
    expect_result(in_cq[i], Status::kSuccess, WcStatus::kSuccess, OperationType::kReceive,
                  ctx(500 + i));
    EXPECT_EQ(in_cq[i].bytes_transferred, kLen);
  }
  EXPECT_EQ(std::memcmp(rbuf.data(), src.data(), (kCq + 1) * kLen), 0);
  EXPECT_TRUE(std::all_of(rbuf.begin() + (kCq + 1) * kLen, rbuf.end(),
                          [](uint8_t b) { return b == 0x33; }));
  const QpCounters& ca = p.a.qp->live_counters();
  const QpCounters& cb = p.b.qp->live_counters();
  EXPECT_EQ(p.b.qp->state(), QpState::kErr);
  EXPECT_EQ(p.a.qp->state(), QpState::kErr);
  EXPECT_EQ(cb.cq_overrun_errors, 1u);
  EXPECT_EQ(cb.completions_dropped, kSends - kCq);
  EXPECT_EQ(cb.completions_ok, kCq + 1);
  EXPECT_EQ(cb.completions_flushed, kSends - kCq - 1);
  EXPECT_EQ(cb.tx_packets, 0u);
  EXPECT_EQ(ca.timeouts, 3u);
  EXPECT_EQ(ca.retransmits, 2u * kSends);
  EXPECT_EQ(cb.dropped_bad_state, (kSends - kCq - 1) + 2u * kSends);
}

// =============================================================================================
// 4. Huge message lengths
// =============================================================================================

struct HugeCase {
  const char* name;
  uint8_t opcode;
  uint64_t va_off;  // added to the region's address (wrapping: the region is far below 2^64)
  bool absolute;    // va_off is the absolute address
  uint32_t dma_length;
  uint32_t payload;
  uint8_t nak;
};

class RawQpHuge : public RawQp, public ::testing::WithParamInterface<HugeCase> {};

TEST_P(RawQpHuge, IsNakedAndTouchesNothing) {
  // One request naming a length or range no registration can satisfy. IBTA §9.4 caps a message
  // at 2^31 bytes and §9.7.5.1 makes a larger RETH DMA length an invalid request (NAK 0x61);
  // a legal length or an address range that runs past the region, or wraps 2^64, fails the
  // R_Key check: remote access error (NAK 0x62). Either way the NAK carries the request's PSN,
  // the QP enters ERR (class C/D, rocev2.md §3.4) and not one byte of memory is read into a
  // response or written.
  const HugeCase& h = GetParam();
  bring_up(kRawQpOptions);
  const auto before = mem_;
  const uint64_t v = h.absolute ? h.va_off : addr(0) + h.va_off;
  receive(reth(h.opcode, rq(0), v, key_, h.dma_length), h.payload);
  EXPECT_EQ(total_rx_drops(), 0u);
  EXPECT_EQ(responder_tx(), 0u);  // the NAK went out at once
  auto tx = take_tx();
  ASSERT_EQ(tx.size(), 1u);
  expect_ack(tx[0], rq(0), h.nak, 0);
  EXPECT_TRUE(tx[0].payload.empty());
  EXPECT_EQ(qp_->state(), QpState::kErr);
  EXPECT_EQ(qp_->counters().naks_sent[h.nak & wire::aeth::kValueMask], 1u);
  EXPECT_EQ(mem_, before);
  EXPECT_TRUE(poll(rcq_).empty());
  // Whatever follows is dropped: the QP is in ERR.
  receive(reth(opc::kWriteOnly, rq(1), addr(kWriteOff), key_, 16), 16);
  EXPECT_EQ(responder_tx(), 0u);
  EXPECT_TRUE(take_tx().empty());
  EXPECT_EQ(qp_->counters().dropped_bad_state, 1u);
  EXPECT_EQ(mem_, before);
}

constexpr uint32_t k2g = 1u << 31;
INSTANTIATE_TEST_SUITE_P(
    Lengths, RawQpHuge,
    ::testing::Values(
        HugeCase{"WriteOnly4G", opc::kWriteOnly, kWriteOff, false, 0xFFFFFFFFu, 16, kNakInvReq},
        HugeCase{"WriteFirst2GPlus1", opc::kWriteFirst, kWriteOff, false, k2g + 1, kMtu,
                 kNakInvReq},
        HugeCase{"WriteFirst2G", opc::kWriteFirst, kWriteOff, false, k2g, kMtu, kNakAccess},
        HugeCase{"WriteWrapping", opc::kWriteFirst, ~uint64_t{0} - 127, true, 4096, kMtu,
                 kNakAccess},
        HugeCase{"ReadOf2GPlus1", opc::kReadRequest, kReadSrcOff, false, k2g + 1, 0, kNakInvReq},
        HugeCase{"ReadOf4G", opc::kReadRequest, 0, false, 0xFFFFFFFFu, 0, kNakInvReq},
        HugeCase{"ReadOf2G", opc::kReadRequest, kReadSrcOff, false, k2g, 0, kNakAccess},
        HugeCase{"ReadWrapping", opc::kReadRequest, ~uint64_t{0} - 0xFFF, true, 0x2000, 0,
                 kNakAccess}),
    [](const ::testing::TestParamInfo<HugeCase>& i) { return std::string(i.param.name); });

TEST_F(RawQp, DuplicateReadWithAWrappingRangeIsDropped) {
  // A duplicate READ is replayed only when its RETH names the original range or a tail of it
  // (rocev2.md §3.5). One whose VA lies near 2^64 must not pass that check through wrap-around:
  // it is dropped, the QP stays in RTS, and a proper re-request of the tail is still replayed.
  bring_up(kRawQpOptions);
  receive(reth(opc::kReadRequest, rq(0), addr(kReadSrcOff), key_, 2 * kMtu));
  EXPECT_EQ(responder_tx(), 2u);
  auto tx = take_tx();
  ASSERT_EQ(tx.size(), 2u);
  EXPECT_EQ(tx[0].opcode, opc::kReadRespFirst);
  EXPECT_EQ(tx[1].opcode, opc::kReadRespLast);

  receive(reth(opc::kReadRequest, rq(0), ~uint64_t{0} - 0xFF, key_, kMtu));
  EXPECT_EQ(responder_tx(), 0u);
  EXPECT_TRUE(take_tx().empty());
  EXPECT_EQ(qp_->state(), QpState::kRts);
  EXPECT_EQ(qp_->counters().duplicate_requests, 1u);
  EXPECT_EQ(qp_->counters().naks_sent[wire::aeth::kNakRemoteAccessError], 0u);

  receive(reth(opc::kReadRequest, rq(1), addr(kReadSrcOff + kMtu), key_, kMtu));
  EXPECT_EQ(responder_tx(), 1u);
  tx = take_tx();
  ASSERT_EQ(tx.size(), 1u);
  EXPECT_EQ(tx[0].opcode, opc::kReadRespOnly);
  EXPECT_EQ(tx[0].psn, rq(1));
  ASSERT_EQ(tx[0].payload.size(), kMtu);
  EXPECT_EQ(std::memcmp(tx[0].payload.data(), mem_.data() + kReadSrcOff + kMtu, kMtu), 0);
  EXPECT_EQ(qp_->state(), QpState::kRts);
}

TEST_F(RawQp, SendLongerThanTheReceiveIsRefusedAtTheFirstPacketThatDoesNotFit) {
  // A SEND carries no length: however large the message the peer has in mind, the responder
  // finds out packet by packet. A 100-byte receive and a SEND FIRST of one PMTU (256): the first
  // packet already does not fit, so nothing is written, the receive completes with LOC_LEN_ERR
  // (STATUS_BUFFER_OVERFLOW, ndkpi.md §3.3), the requester gets NAK invalid request (rocev2.md
  // §3.4) and the QP enters ERR; the second receive is flushed.
  bring_up(kRawQpOptions);
  post_recv(1, kRecvOff, 100);
  post_recv(2, kRecvOff + 1024, 1024);
  const auto before = mem_;
  receive(hdr(opc::kSendFirst, rq(0), false), kMtu);
  auto tx = take_tx();
  ASSERT_EQ(tx.size(), 1u);
  expect_ack(tx[0], rq(0), kNakInvReq, 0);
  EXPECT_EQ(qp_->state(), QpState::kErr);
  EXPECT_EQ(mem_, before);
  const auto rc = poll(rcq_);
  ASSERT_EQ(rc.size(), 2u);
  expect_result(rc[0], Status::kBufferOverflow, WcStatus::kLocLenErr, OperationType::kReceive,
                ctx(1));
  EXPECT_EQ(rc[0].bytes_transferred, 0u);
  expect_result(rc[1], Status::kCancelled, WcStatus::kWrFlushErr, OperationType::kReceive, ctx(2));
}

TEST_F(RawQp, SendOverflowingTheReceiveLaterWritesOnlyTheReceive) {
  // A 1000-byte receive and a SEND of FIRST + MIDDLE + MIDDLE + MIDDLE (4 x 256 bytes): the
  // first three packets land (768 bytes), the fourth would pass the end of the receive and is
  // refused: LOC_LEN_ERR with the 768 bytes placed, NAK invalid request for the fourth PSN, ERR.
  // Not a byte after the receive's end is written.
  bring_up(kRawQpOptions);
  post_recv(1, kRecvOff, 1000);
  const auto before = mem_;
  receive(hdr(opc::kSendFirst, rq(0), false), kMtu);
  for (int32_t k = 1; k < 4; ++k) receive(hdr(opc::kSendMiddle, rq(k), false), kMtu);
  auto tx = take_tx();
  ASSERT_EQ(tx.size(), 1u);
  expect_ack(tx[0], rq(3), kNakInvReq, 0);
  EXPECT_EQ(qp_->state(), QpState::kErr);
  for (uint32_t k = 0; k < 3; ++k)
    EXPECT_EQ(std::memcmp(mem_.data() + kRecvOff + k * kMtu, payload_.data(), kMtu), 0) << k;
  EXPECT_TRUE(std::equal(mem_.begin() + kRecvOff + 3 * kMtu, mem_.end(),
                         before.begin() + kRecvOff + 3 * kMtu));
  const auto rc = poll(rcq_);
  ASSERT_EQ(rc.size(), 1u);
  expect_result(rc[0], Status::kBufferOverflow, WcStatus::kLocLenErr, OperationType::kReceive,
                ctx(1));
  EXPECT_EQ(rc[0].bytes_transferred, 3 * kMtu);
}

TEST_F(RawQp, LocalPostsBeyondTheMaxTransferLengthAreRefused) {
  // NDK max_transfer_length is 2^31 (IBTA §9.4). A post of more is refused synchronously with
  // STATUS_BUFFER_OVERFLOW and nothing is queued; exactly 2^31 is accepted. SGE lengths that
  // wrap 32 bits do not sneak past (the sum is taken in 64 bits and must equal the length).
  // Nothing is transferred: the QP is flushed before the engine runs a step. (Posts with too
  // many SGEs or a bad atomic are rc_negative_test.cc PostValidationInRts.)
  bring_up(kRawQpOptions);
  const uint64_t base = addr(0);  // never dereferenced: no frame is ever built
  auto big = [&](WrOpcode op, uint32_t first) {
    dp::SendWqe w = wqe(op, ctx(static_cast<uintptr_t>(op)));
    w.num_sge = 2;
    w.sge[0] = {base, first, key_};
    w.sge[1] = {base, 1, key_};
    w.length = first + 1;
    w.remote_addr = 0x10000;
    w.rkey = 1;
    return w;
  };
  for (WrOpcode op : {WrOpcode::kSend, WrOpcode::kSendWithImm, WrOpcode::kWrite,
                      WrOpcode::kWriteWithImm, WrOpcode::kRead})
    EXPECT_EQ(qp_->post_send(big(op, k2g)), Status::kBufferOverflow) << dp::to_string(op);
  dp::SendWqe wrap = big(WrOpcode::kWrite, 0xFFFFFFFFu);  // 2^32 in total, length field 0
  EXPECT_EQ(qp_->post_send(wrap), Status::kInvalidParameter);
  dp::RecvWqe r = recv_wr(ctx(50), mem_.data(), k2g, key_);
  r.num_sge = 2;
  r.sge[1] = {base, 1, key_};
  r.length = k2g + 1;
  EXPECT_EQ(qp_->post_recv(r), Status::kBufferOverflow);
  EXPECT_EQ(qp_->send_ring().front(), nullptr);
  EXPECT_EQ(qp_->recv_ring().front(), nullptr);

  EXPECT_EQ(qp_->post_send(big(WrOpcode::kWrite, k2g - 1)), Status::kSuccess);
  EXPECT_EQ(qp_->post_recv(recv_wr(ctx(51), mem_.data(), k2g, key_)), Status::kSuccess);
  dp::QpAttr err;
  err.state = QpState::kErr;
  ASSERT_EQ(modify(err, dp::qp_attr::kState), Status::kSuccess);
  const auto sc = poll(scq_);
  ASSERT_EQ(sc.size(), 1u);
  expect_result(sc[0], Status::kCancelled, WcStatus::kWrFlushErr, OperationType::kWrite,
                ctx(static_cast<uintptr_t>(WrOpcode::kWrite)));
  const auto rc = poll(rcq_);
  ASSERT_EQ(rc.size(), 1u);
  expect_result(rc[0], Status::kCancelled, WcStatus::kWrFlushErr, OperationType::kReceive, ctx(51));
  EXPECT_EQ(ep_->tx_count(), 0u);
}

// =============================================================================================
// 5. Thousands of QPs
// =============================================================================================

TEST_F(Exhaustion, QpsUpToTheAdapterLimitEachCarryTrafficAndAllGoAway) {
  // RcPair's adapters take QPNs 2..1023 (AdapterConfig::max_qps 1024; 0 and 1 are reserved,
  // IBTA §10.2.4): 1022 QPs each, on an engine configured for all 2044. The 1023rd on either
  // adapter is refused with STATUS_INSUFFICIENT_RESOURCES. Every pair carries one message (even
  // pairs a WRITE, odd pairs a SEND) and every byte is checked; then all QPs are destroyed, the
  // engine's and the endpoints' QP tables are empty, and a second round gets the same QPNs and
  // does the same without the heap growing.
  constexpr uint32_t kPairs = 1022, kLen = 64;
  EngineConfig ec;
  ec.max_qps = 2 * kPairs;
  ec.rx_burst = 64;
  RcPair p("ex_qps", ec);
  const auto src = pattern(kPairs * kLen, 12);
  std::vector<uint8_t> dst(kPairs * kLen), rbuf(kPairs * kLen);
  const uint32_t ksrc = p.a.reg(src.data(), src.size(), 0);
  const uint32_t kdst = p.b.reg(dst.data(), dst.size(), kRemoteAll);
  const uint32_t krbuf = p.b.reg(rbuf.data(), rbuf.size(), mr_flag::kAllowLocalWrite);
  std::vector<TestQp*> qa(kPairs), qb(kPairs);
  std::set<uint32_t> qpns_first;
  std::vector<int> seen(kPairs);
  p.a.send_done.reserve(kPairs);
  p.b.recv_done.reserve(kPairs);
  uint64_t heap_after_first = 0;
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(round);
    const auto t0 = std::chrono::steady_clock::now();
    std::fill(dst.begin(), dst.end(), 0);
    std::fill(rbuf.begin(), rbuf.end(), 0);
    std::set<uint32_t> qpns;
    for (uint32_t i = 0; i < kPairs; ++i) {
      ASSERT_EQ(p.a.create_qp(ctx(10000 + i), 4, 4, &qa[i]), Status::kSuccess) << i;
      ASSERT_EQ(p.b.create_qp(ctx(20000 + i), 4, 4, &qb[i]), Status::kSuccess) << i;
      qpns.insert(qa[i]->qpn());
    }
    TestQp* extra = nullptr;
    EXPECT_EQ(p.a.create_qp(nullptr, 4, 4, &extra), Status::kInsufficientResources);
    EXPECT_EQ(p.b.create_qp(nullptr, 4, 4, &extra), Status::kInsufficientResources);
    EXPECT_EQ(extra, nullptr);
    EXPECT_EQ(p.dp_engine().active_qps(), 2 * kPairs);
    EXPECT_EQ(qpns.size(), kPairs);
    EXPECT_EQ(*qpns.begin(), 2u);
    EXPECT_EQ(*qpns.rbegin(), kPairs + 1);
    if (round == 0) qpns_first = qpns;
    EXPECT_EQ(qpns, qpns_first);
    for (uint32_t i = 0; i < kPairs; ++i) {
      p.bring_up(p.a, *qa[i], p.b, *qb[i], 1024, false, kRemoteAccess, 0x1000 + i, 0x9000 + i);
      p.bring_up(p.b, *qb[i], p.a, *qa[i], 1024, false, kRemoteAccess, 0x9000 + i, 0x1000 + i);
    }
    Clock c;  // after the public calls, which step the engine at the real TSC
    for (uint32_t i = 0; i < kPairs; ++i) {
      if (i % 2 == 0) {
        ASSERT_EQ(qa[i]->post_send(data_wr(WrOpcode::kWrite, ctx(i), &src[i * kLen], kLen, ksrc,
                                           addr(&dst[i * kLen]), kdst)),
                  Status::kSuccess);
      } else {
        ASSERT_EQ(qb[i]->post_recv(recv_wr(ctx(5000 + i), &rbuf[i * kLen], kLen, krbuf)),
                  Status::kSuccess);
        ASSERT_EQ(qa[i]->post_send(data_wr(WrOpcode::kSend, ctx(i), &src[i * kLen], kLen, ksrc)),
                  Status::kSuccess);
      }
    }
    ASSERT_TRUE(drive(p, c, [&] {
      return p.a.send_done.size() == kPairs && p.b.recv_done.size() == kPairs / 2;
    }));
    settle(p, c);
    ASSERT_EQ(p.a.send_done.size(), kPairs);
    ASSERT_EQ(p.b.recv_done.size(), kPairs / 2);
    std::fill(seen.begin(), seen.end(), 0);
    for (const ResultEx& r : p.a.send_done) {
      const auto i = static_cast<uint32_t>(reinterpret_cast<uintptr_t>(r.request_context) - 0x1000);
      ASSERT_LT(i, kPairs);
      ++seen[i];
      EXPECT_EQ(r.status, Status::kSuccess);
      EXPECT_EQ(r.type, i % 2 == 0 ? OperationType::kWrite : OperationType::kSend);
      EXPECT_EQ(r.qp_context, ctx(10000 + i));
      EXPECT_EQ(r.qpn, qa[i]->qpn());
    }
    for (const ResultEx& r : p.b.recv_done) {
      const auto i =
          static_cast<uint32_t>(reinterpret_cast<uintptr_t>(r.request_context) - 0x1000 - 5000);
      ASSERT_LT(i, kPairs);
      ++seen[i];
      EXPECT_EQ(r.status, Status::kSuccess);
      EXPECT_EQ(r.bytes_transferred, kLen);
      EXPECT_EQ(r.qp_context, ctx(20000 + i));
    }
    for (uint32_t i = 0; i < kPairs; ++i) {
      EXPECT_EQ(seen[i], i % 2 == 0 ? 1 : 2) << i;
      const uint8_t* got = i % 2 == 0 ? &dst[i * kLen] : &rbuf[i * kLen];
      EXPECT_EQ(std::memcmp(got, &src[i * kLen], kLen), 0) << i;
      const uint8_t* other = i % 2 == 0 ? &rbuf[i * kLen] : &dst[i * kLen];
      EXPECT_TRUE(std::all_of(other, other + kLen, [](uint8_t b) { return b == 0; })) << i;
    }
    const QpCounters ta = p.counters(p.a).qps;
    EXPECT_EQ(ta.tx_packets, kPairs);
    EXPECT_EQ(ta.retransmits + ta.timeouts, 0u);

    expect_pools_full(p, c);
    // Closing every QP: each close completes on the control thread once the engine has flushed
    // and detached the QP, and only then is the QP's memory freed (counted for the heap check).
    Completion closed;
    int inline_closes = 0;
    for (uint32_t i = 0; i < kPairs; ++i) {
      for (auto [s, q] : {std::pair{&p.a, qa[i]}, std::pair{&p.b, qb[i]}}) {
        const Status st = q->handle().close(&Completion::on_close, &closed);
        ASSERT_TRUE(st == Status::kSuccess || st == Status::kPending) << i;
        inline_closes += st == Status::kSuccess ? 1 : 0;
        s->destroy_qp(q);
      }
    }
    ASSERT_TRUE(p.run_until([&] { return closed.count() + inline_closes == int{2 * kPairs}; }));
    EXPECT_EQ(p.dp_engine().active_qps(), 0u);
    for (Side* s : {&p.a, &p.b}) {
      const dp::Endpoint& ep = RcPair::internal(*s).endpoint();
      uint32_t left = 0;
      for (uint32_t n = 0; n < ep.max_qps(); ++n) left += ep.qp(n) != nullptr ? 1 : 0;
      EXPECT_EQ(left, 0u);
    }
    p.a.send_done.clear();
    p.b.recv_done.clear();
    std::printf(
        "[          ] round %d: %u QP pairs created, connected, used, destroyed in %.0f ms\n",
        round, kPairs,
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    if (round == 0) heap_after_first = heap_in_use();
  }
  // No growth from one round to the next (a leaked QP would be ~30 KB, all of them ~60 MB).
  EXPECT_LT(heap_in_use(), heap_after_first + 256 * 1024);
}

TEST_F(Exhaustion, EngineQpLimitIsSharedByItsAdapters) {
  // EngineConfig::max_qps (default 1024) counts the QPs of every adapter the engine serves: with
  // two adapters, 1024 QPs in all, then STATUS_INSUFFICIENT_RESOURCES from either; destroying
  // one makes room for exactly one more.
  RcPair p("ex_qps_eng");
  const uint32_t limit = p.dp_engine().config().max_qps;
  std::vector<TestQp*> qps;
  for (uint32_t i = 0; i < limit; ++i) {
    Side& s = i % 2 == 0 ? p.a : p.b;
    TestQp* q = nullptr;
    ASSERT_EQ(s.create_qp(nullptr, 4, 4, &q), Status::kSuccess) << i;
    qps.push_back(q);
  }
  EXPECT_EQ(p.dp_engine().active_qps(), limit);
  TestQp* q = nullptr;
  EXPECT_EQ(p.a.create_qp(nullptr, 4, 4, &q), Status::kInsufficientResources);
  EXPECT_EQ(p.b.create_qp(nullptr, 4, 4, &q), Status::kInsufficientResources);
  ASSERT_TRUE(p.destroy_qp(p.b, qps[1]));
  EXPECT_EQ(p.a.create_qp(nullptr, 4, 4, &q), Status::kSuccess);
  EXPECT_EQ(p.b.create_qp(nullptr, 4, 4, &q), Status::kInsufficientResources);
  EXPECT_EQ(p.dp_engine().active_qps(), limit);
}

}  // namespace
}  // namespace urnic::test

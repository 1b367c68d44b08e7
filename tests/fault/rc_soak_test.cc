// Reliability soak (issue: RC reliability): for SEND, WRITE, READ and ATOMIC, 10 000 messages of
// mixed sizes over a link that drops, reorders, duplicates and corrupts frames in both
// directions. Every byte must arrive exactly, every work request must complete exactly once and
// in order, fetch-and-add totals must be exact (a duplicate execution would show), and the
// counters must show the recovery work.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <string>

#include "../loopback/rc_fixture.h"
#include "dataplane/fault.h"

namespace urnic::test {
namespace {

using dp::WrOpcode;

struct Scenario {
  const char* name;
  uint32_t drop_ppm, reorder_ppm, dup_ppm, corrupt_ppm;
  bool rx_side = false;    // faults on the receiving endpoints instead of the sending ones
  uint32_t delay_ppm = 0;  // held back 300 us (below the 1.05 ms ACK timeout: not a loss)
};

constexpr Scenario kScenarios[] = {
    {"loss1", 10000, 0, 0, 0},
    {"loss5", 50000, 0, 0, 0},
    {"loss20", 200000, 0, 0, 0},
    {"reorder", 0, 50000, 0, 0},
    {"duplicate", 0, 0, 50000, 0},
    {"corrupt", 0, 0, 0, 50000},
    {"combined", 30000, 30000, 30000, 30000},
    {"combined_rx", 30000, 30000, 30000, 30000, true},
    {"delay", 0, 0, 0, 0, false, 20000},
};

enum class Kind { kSend, kWrite, kRead, kAtomic };

// The third parameter: AdapterConfig::adaptive_retransmit (the default), or plain go-back-N.
class RcSoak : public EalTestWithParam<std::tuple<Kind, Scenario, bool>> {};

constexpr uint32_t kMessages = 10000;
constexpr uint32_t kSlots = 512;     // > send queue depth: a slot is reused only after completion
constexpr uint32_t kMaxSize = 6000;  // mixed sizes 0 .. kMaxSize (MTU 1024: up to 6 packets)

uint32_t size_of(uint32_t i) {
  uint32_t x = i * 2654435761u;
  x ^= x >> 15;
  // A third tiny (0..63), a third around one MTU, a third multi-packet.
  switch (i % 3) {
    case 0:
      return x % 64;
    case 1:
      return 900 + x % 300;
    default:
      return x % (kMaxSize + 1);
  }
}

uint8_t byte_of(uint32_t msg, uint32_t off) {
  return static_cast<uint8_t>((msg * 131u) ^ (off * 7u) ^ (off >> 8));
}

TEST_P(RcSoak, EveryByteEveryCompletionExactlyOnce) {
  const auto [kind, sc, adaptive] = GetParam();
  // Ring names are short (rte_ring names): "s", kind, scenario, a(daptive) or g(o-back-N).
  RcPair p(
      std::string("s") + std::to_string(static_cast<int>(kind)) + sc.name + (adaptive ? "a" : "g"),
      {}, adaptive);
  // Short ACK timeout (4.096 us * 2^8 = 1.05 ms) so that tail losses recover quickly, but
  // long enough that a test process descheduled on a loaded 2-core machine does not see a run
  // of spurious timeouts (which would exhaust retry_cnt without any real loss).
  p.timeout = 8;
  p.connect(1024, false, 256, 1024);
  FaultConfig fc;
  fc.drop_ppm = sc.drop_ppm;
  fc.reorder_ppm = sc.reorder_ppm;
  fc.duplicate_ppm = sc.dup_ppm;
  fc.corrupt_ppm = sc.corrupt_ppm;
  fc.delay_ppm = sc.delay_ppm;
  fc.delay_us = 300;
  // Fixed seed for reproducible CI runs; URNIC_SOAK_SEED explores others.
  const char* env_seed = std::getenv("URNIC_SOAK_SEED");
  fc.seed =
      (env_seed ? std::strtoull(env_seed, nullptr, 0) : 0xC0FFEE) + static_cast<uint64_t>(kind);
  const FaultConfig fa = fc;  // requests: on A's transmit side (or B's receive side)
  fc.seed ^= 0x5555;
  const FaultConfig fb = fc;  // ACKs, READ responses, ATOMIC ACKs: B's transmit (A's receive)
  if (sc.rx_side) {
    ASSERT_EQ(p.set_faults(p.b, {}, fa), Status::kSuccess);
    ASSERT_EQ(p.set_faults(p.a, {}, fb), Status::kSuccess);
  } else {
    ASSERT_EQ(p.set_faults(p.a, fa, {}), Status::kSuccess);
    ASSERT_EQ(p.set_faults(p.b, fb, {}), Status::kSuccess);
  }

  std::vector<uint8_t> local(kSlots * kMaxSize), remote(kSlots * kMaxSize);
  const uint32_t lkey = p.a.reg(local.data(), local.size(), mr_flag::kAllowLocalWrite);
  const uint32_t rkey = p.b.reg(remote.data(), remote.size(),
                                mr_flag::kAllowLocalWrite | mr_flag::kAllowRemoteWrite |
                                    mr_flag::kAllowRemoteRead | mr_flag::kAllowRemoteAtomic);
  if (kind == Kind::kRead) {
    // READ source: a fixed pattern per slot, never changed.
    for (uint32_t s = 0; s < kSlots; ++s)
      for (uint32_t o = 0; o < kMaxSize; ++o) remote[s * kMaxSize + o] = byte_of(s, o);
  }
  constexpr uint32_t kCounters = 4;
  auto* counters = reinterpret_cast<uint64_t*>(remote.data());
  if (kind == Kind::kAtomic) std::fill(counters, counters + kCounters, 0);

  uint32_t posted = 0, recv_posted = 0, checked_recv = 0, checked_send = 0;
  std::map<uint32_t, std::vector<bool>> seen_orig;  // counter -> which original values came back
  for (uint32_t c = 0; c < kCounters; ++c) seen_orig[c].assign(kMessages, false);

  auto check_completions = [&] {
    // Requester completions: exactly once, in posting order, all successful.
    while (checked_send < p.a.send_done.size()) {
      const ResultEx& r = p.a.send_done[checked_send];
      ASSERT_EQ(r.status, Status::kSuccess)
          << "message " << checked_send << " " << to_string(r.status) << " wc "
          << r.provider_error_code;
      ASSERT_EQ(r.request_context, reinterpret_cast<void*>(uintptr_t{checked_send}))
          << "completion out of order";
      const uint32_t i = checked_send;
      const uint32_t slot = i % kSlots, size = size_of(i);
      if (kind == Kind::kRead) {
        for (uint32_t o = 0; o < size; ++o)
          ASSERT_EQ(local[slot * kMaxSize + o], byte_of(slot, o)) << "READ " << i << " @" << o;
      } else if (kind == Kind::kWrite) {
        // The slot is not reused before this completion, so it still holds message i.
        for (uint32_t o = 0; o < size; ++o)
          ASSERT_EQ(remote[slot * kMaxSize + o], byte_of(i, o)) << "WRITE " << i << " @" << o;
      } else if (kind == Kind::kAtomic) {
        uint64_t orig = 0;
        std::memcpy(&orig, &local[slot * 8], 8);
        ASSERT_LT(orig, kMessages);
        auto& seen = seen_orig[i % kCounters];
        ASSERT_FALSE(seen[orig]) << "fetch-and-add executed twice: original " << orig;
        seen[orig] = true;
      }
      ++checked_send;
    }
    while (checked_recv < p.b.recv_done.size()) {
      const ResultEx& r = p.b.recv_done[checked_recv];
      ASSERT_EQ(r.status, Status::kSuccess);
      ASSERT_EQ(r.request_context, reinterpret_cast<void*>(uintptr_t{checked_recv}));
      const uint32_t i = checked_recv, slot = i % kSlots, size = size_of(i);
      ASSERT_EQ(r.bytes_transferred, size);
      for (uint32_t o = 0; o < size; ++o)
        ASSERT_EQ(remote[slot * kMaxSize + o], byte_of(i, o)) << "SEND " << i << " @" << o;
      ++checked_recv;
    }
  };

  const uint64_t step_budget = 400'000'000;
  uint64_t steps = 0;
  while (checked_send < kMessages && steps < step_budget) {
    // Keep up to 200 messages in flight; a slot is reused only after its message completed.
    while (posted < kMessages && posted - checked_send < 200) {
      const uint32_t i = posted, slot = i % kSlots, size = size_of(i);
      dp::SendWqe w;
      w.request_context = reinterpret_cast<void*>(uintptr_t{i});
      w.num_sge = 1;
      w.rkey = rkey;
      if (kind == Kind::kAtomic) {
        w.opcode = WrOpcode::kFetchAdd;
        w.length = 8;
        w.sge[0] = {reinterpret_cast<uint64_t>(&local[slot * 8]), 8, lkey};
        w.remote_addr = reinterpret_cast<uint64_t>(&counters[i % kCounters]);
        w.compare_add = 1;
      } else {
        w.opcode = kind == Kind::kSend    ? WrOpcode::kSend
                   : kind == Kind::kWrite ? WrOpcode::kWrite
                                          : WrOpcode::kRead;
        w.length = size;
        w.sge[0] = {reinterpret_cast<uint64_t>(&local[slot * kMaxSize]), size, lkey};
        w.remote_addr = reinterpret_cast<uint64_t>(&remote[slot * kMaxSize]);
        if (kind != Kind::kRead)
          for (uint32_t o = 0; o < size; ++o) local[slot * kMaxSize + o] = byte_of(i, o);
        if (kind == Kind::kSend) {
          ASSERT_EQ(recv_posted, i);
          const dp::RecvWqe rw =
              recv_wr(reinterpret_cast<void*>(uintptr_t{i}), &remote[slot * kMaxSize], size, rkey);
          ASSERT_EQ(p.b.qp->post_recv(rw), Status::kSuccess);
          ++recv_posted;
        }
      }
      ASSERT_EQ(p.a.qp->post_send(w), Status::kSuccess);
      ++posted;
    }
    p.engine().run_once();
    ++steps;
    p.collect();
    check_completions();
    if (HasFatalFailure()) return;
  }
  // Let stragglers (duplicates, late ACKs) settle: nothing more may complete.
  p.run_until([] { return false; }, 20000);
  check_completions();
  ASSERT_EQ(checked_send, kMessages) << "stalled after " << steps << " steps";
  EXPECT_EQ(p.a.send_done.size(), kMessages);
  if (kind == Kind::kSend) {
    EXPECT_EQ(p.b.recv_done.size(), kMessages);
  }
  if (kind == Kind::kAtomic) {
    uint64_t total = 0;
    for (uint32_t c = 0; c < kCounters; ++c) total += counters[c];
    EXPECT_EQ(total, kMessages);
    for (uint32_t c = 0; c < kCounters; ++c) EXPECT_EQ(counters[c], kMessages / kCounters);
  }
  const QpCounters ca = p.a.qp->counters();
  const QpCounters cb = p.b.qp->counters();
  // What the injectors did: A's and B's, whichever direction they sit on.
  const AdapterCounters aa = p.counters(p.a), ab = p.counters(p.b);
  FaultCounters f;
  for (const FaultCounters* c : {&aa.tx_faults, &aa.rx_faults, &ab.tx_faults, &ab.rx_faults})
    f.add(*c);
  const bool lossy = sc.drop_ppm || sc.corrupt_ppm || sc.reorder_ppm || sc.delay_ppm;
  if (lossy) {
    EXPECT_GT(ca.retransmits, 0u) << "no recovery work on a lossy link?";
  }
  if (sc.dup_ppm) {
    EXPECT_GT(f.duplicated, 0u);
    EXPECT_GT(cb.duplicate_requests + ca.dropped_stale, 0u);
  }
  if (sc.delay_ppm) {
    EXPECT_GT(f.delayed, 0u);
  }
  if (sc.corrupt_ppm) {
    EXPECT_GT(ab.port.rx_drops[static_cast<size_t>(RxDrop::kBadIcrc)], 0u);
  }
  RecordProperty("retransmits", std::to_string(ca.retransmits));
  std::printf(
      "[ %s ] retransmits %llu (probes %llu) timeouts %llu seq-naks %llu implied %llu dup-req %llu "
      "injected drop %llu dup %llu reorder %llu corrupt %llu delay %llu steps %llu\n",
      sc.name, static_cast<unsigned long long>(ca.retransmits),
      static_cast<unsigned long long>(ca.sr_probes), static_cast<unsigned long long>(ca.timeouts),
      static_cast<unsigned long long>(ca.naks_received[0]),
      static_cast<unsigned long long>(ca.implied_naks),
      static_cast<unsigned long long>(cb.duplicate_requests),
      static_cast<unsigned long long>(f.dropped), static_cast<unsigned long long>(f.duplicated),
      static_cast<unsigned long long>(f.reordered), static_cast<unsigned long long>(f.corrupted),
      static_cast<unsigned long long>(f.delayed), static_cast<unsigned long long>(steps));
}

std::string soak_name(const ::testing::TestParamInfo<RcSoak::ParamType>& info) {
  const auto [kind, sc, adaptive] = info.param;
  const char* k[] = {"Send", "Write", "Read", "Atomic"};
  return std::string(k[static_cast<int>(kind)]) + "_" + sc.name + (adaptive ? "" : "_gbn");
}

INSTANTIATE_TEST_SUITE_P(AllFaults, RcSoak,
                         ::testing::Combine(::testing::Values(Kind::kSend, Kind::kWrite,
                                                              Kind::kRead, Kind::kAtomic),
                                            ::testing::ValuesIn(kScenarios), ::testing::Bool()),
                         soak_name);

}  // namespace
}  // namespace urnic::test

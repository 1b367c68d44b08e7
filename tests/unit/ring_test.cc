// SpscRing<T> (dataplane/ring.h): single-thread contract tests, the deferred doorbell, and a
// two-thread stress test that checks the consumer sees exactly 0..N-1 with no torn slots.
#include "dataplane/ring.h"

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <ostream>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <vector>

namespace urnic::dp {
namespace {

// A 64-byte slot, like a small work request. The checksum covers every other field, so a slot
// read while the producer is still writing it (a torn read) fails verification.
struct Slot {
  uint64_t seq;
  uint64_t payload[6];
  uint64_t checksum;
};
static_assert(sizeof(Slot) == 64);

constexpr uint64_t mix(uint64_t x) noexcept {  // splitmix64 finaliser
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

constexpr uint64_t checksum_of(const Slot& s) noexcept {
  uint64_t h = mix(s.seq ^ 0x5EED);
  for (uint64_t p : s.payload) h = mix(h ^ p);
  return h;
}

constexpr Slot make_slot(uint64_t seq) noexcept {
  Slot s{};
  s.seq = seq;
  for (uint64_t i = 0; i < 6; ++i) s.payload[i] = mix(seq * 7 + i);
  s.checksum = checksum_of(s);
  return s;
}

// The slot is intact and carries `seq`.
bool slot_ok(const Slot& s, uint64_t seq) noexcept {
  return s.seq == seq && s.checksum == checksum_of(s);
}

using Ring = SpscRing<Slot>;

// ---- Creation -------------------------------------------------------------------------------

TEST(SpscRingInit, RejectsNonPowerOfTwo) {
  for (size_t bad : {size_t{0}, size_t{3}, size_t{6}, size_t{100}, size_t{1023}}) {
    Ring r;
    EXPECT_FALSE(r.init(bad)) << bad;
    EXPECT_EQ(r.capacity(), 0u) << bad;
  }
  for (size_t good : {size_t{1}, size_t{2}, size_t{64}, size_t{4096}}) {
    Ring r;
    EXPECT_TRUE(r.init(good)) << good;
    EXPECT_EQ(r.capacity(), good);
    EXPECT_EQ(r.free_slots(), good);
    EXPECT_TRUE(r.empty());
  }
}

// A ring with no slots (default constructed or rejected capacity) is full and empty; posting to
// it must fail rather than write through the missing slot array.
TEST(SpscRingInit, RingWithoutSlotsIsFullAndEmpty) {
  Ring unset;
  Ring rejected(6);
  for (Ring* r : {&unset, &rejected}) {
    EXPECT_EQ(r->capacity(), 0u);
    EXPECT_EQ(r->free_slots(), 0u);
    EXPECT_FALSE(r->push(make_slot(1)));
    EXPECT_FALSE(r->stage(make_slot(1)));
    EXPECT_EQ(r->stage_slot(), nullptr);
    const std::array<Slot, 2> in{make_slot(1), make_slot(2)};
    EXPECT_EQ(r->push_burst(in), 0u);
    EXPECT_EQ(r->front(), nullptr);
    EXPECT_EQ(r->available(), 0u);
    std::array<Slot, 2> out{};
    EXPECT_EQ(r->pop_burst(out), 0u);
  }
}

TEST(SpscRingInit, ReinitResetsIndices) {
  Ring r(4);
  ASSERT_TRUE(r.push(make_slot(0)));
  ASSERT_TRUE(r.stage(make_slot(1)));
  ASSERT_TRUE(r.init(8));
  EXPECT_EQ(r.capacity(), 8u);
  EXPECT_EQ(r.staged(), 0u);
  EXPECT_EQ(r.available(), 0u);
  EXPECT_EQ(r.free_slots(), 8u);
}

// ---- Single-thread contract ----------------------------------------------------------------

TEST(SpscRing, PushPopKeepsOrder) {
  Ring r(16);
  for (uint64_t i = 0; i < 10; ++i) ASSERT_TRUE(r.push(make_slot(i)));
  EXPECT_EQ(r.available(), 10u);
  for (uint64_t i = 0; i < 10; ++i) {
    Slot s;
    ASSERT_TRUE(r.pop(s));
    EXPECT_TRUE(slot_ok(s, i)) << i;
  }
  Slot s;
  EXPECT_FALSE(r.pop(s));
  EXPECT_TRUE(r.empty());
}

TEST(SpscRing, FrontStaysUntilPop) {
  Ring r(4);
  ASSERT_TRUE(r.push(make_slot(7)));
  ASSERT_TRUE(r.push(make_slot(8)));
  const Slot* f = r.front();
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(slot_ok(*f, 7));
  EXPECT_EQ(r.front(), f);  // front() does not consume
  r.pop();
  f = r.front();
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(slot_ok(*f, 8));
  r.pop();
  EXPECT_EQ(r.front(), nullptr);
}

TEST(SpscRing, FullRingRejectsAndFreeSlotsIsExact) {
  constexpr size_t kCap = 8;
  Ring r(kCap);
  for (size_t i = 0; i < kCap; ++i) {
    EXPECT_EQ(r.free_slots(), kCap - i);
    ASSERT_TRUE(r.push(make_slot(i)));
  }
  EXPECT_EQ(r.free_slots(), 0u);
  EXPECT_FALSE(r.push(make_slot(99)));
  EXPECT_FALSE(r.stage(make_slot(99)));
  EXPECT_EQ(r.stage_slot(), nullptr);
  EXPECT_EQ(r.available(), kCap);  // the rejected posts changed nothing

  Slot s;
  ASSERT_TRUE(r.pop(s));
  EXPECT_TRUE(slot_ok(s, 0));
  EXPECT_EQ(r.free_slots(), 1u);
  ASSERT_TRUE(r.push(make_slot(kCap)));
  EXPECT_FALSE(r.push(make_slot(99)));

  for (uint64_t i = 1; i <= kCap; ++i) {
    ASSERT_TRUE(r.pop(s));
    EXPECT_TRUE(slot_ok(s, i)) << i;
  }
  EXPECT_TRUE(r.empty());
  EXPECT_EQ(r.free_slots(), kCap);
}

TEST(SpscRing, CapacityOne) {
  Ring r(1);
  for (uint64_t i = 0; i < 100; ++i) {
    ASSERT_TRUE(r.push(make_slot(i)));
    EXPECT_FALSE(r.push(make_slot(99)));
    Slot s;
    ASSERT_TRUE(r.pop(s));
    EXPECT_TRUE(slot_ok(s, i));
  }
}

// Indices run far past the capacity; every fill level is visited at every offset.
TEST(SpscRing, WrapsAroundManyTimes) {
  constexpr size_t kCap = 8;
  Ring r(kCap);
  uint64_t next_in = 0, next_out = 0;
  for (int round = 0; round < 20000; ++round) {
    const size_t in = 1 + static_cast<size_t>(round) % kCap;
    for (size_t i = 0; i < in; ++i) ASSERT_TRUE(r.push(make_slot(next_in++)));
    EXPECT_EQ(r.available(), in);
    EXPECT_EQ(r.free_slots(), kCap - in);
    for (size_t i = 0; i < in; ++i) {
      Slot s;
      ASSERT_TRUE(r.pop(s));
      ASSERT_TRUE(slot_ok(s, next_out)) << "round " << round;
      ++next_out;
    }
  }
  EXPECT_GT(next_in, 1000 * kCap);
  EXPECT_TRUE(r.empty());
}

TEST(SpscRing, BurstsReturnPartialCounts) {
  constexpr size_t kCap = 16;
  Ring r(kCap);
  std::vector<Slot> in;
  for (uint64_t i = 0; i < 40; ++i) in.push_back(make_slot(i));
  const std::span<const Slot> all(in);

  EXPECT_EQ(r.push_burst(all.subspan(0, 0)), 0u);
  EXPECT_EQ(r.push_burst(all.subspan(0, 10)), 10u);
  EXPECT_EQ(r.push_burst(all.subspan(10, 10)), 6u);  // only 6 fit
  EXPECT_EQ(r.push_burst(all.subspan(16, 4)), 0u);   // full
  EXPECT_EQ(r.available(), kCap);

  std::array<Slot, 20> out{};
  EXPECT_EQ(r.pop_burst(std::span(out).first(0)), 0u);
  EXPECT_EQ(r.pop_burst(std::span(out).first(4)), 4u);
  for (uint64_t i = 0; i < 4; ++i) EXPECT_TRUE(slot_ok(out[i], i));
  EXPECT_EQ(r.push_burst(all.subspan(16, 10)), 4u);  // 4 freed; wraps
  EXPECT_EQ(r.pop_burst(out), kCap);                 // asks 20, gets 16
  for (uint64_t i = 0; i < kCap; ++i) EXPECT_TRUE(slot_ok(out[i], 4 + i)) << i;
  EXPECT_EQ(r.pop_burst(out), 0u);
  EXPECT_TRUE(r.empty());
}

// ---- Deferred doorbell ---------------------------------------------------------------------

TEST(SpscRingDoorbell, StagedSlotsAreInvisibleUntilPublish) {
  constexpr size_t kCap = 16;
  Ring r(kCap);
  for (uint64_t i = 0; i < 5; ++i) {
    ASSERT_TRUE(r.stage(make_slot(i)));
    EXPECT_EQ(r.staged(), i + 1);
    EXPECT_EQ(r.available(), 0u);
    EXPECT_EQ(r.front(), nullptr);
  }
  EXPECT_TRUE(r.empty());
  Slot s;
  EXPECT_FALSE(r.pop(s));
  std::array<Slot, 8> out{};
  EXPECT_EQ(r.pop_burst(out), 0u);
  EXPECT_EQ(r.free_slots(), kCap - 5);  // staged slots are used slots

  r.publish();
  EXPECT_EQ(r.staged(), 0u);
  EXPECT_EQ(r.available(), 5u);
  ASSERT_EQ(r.pop_burst(out), 5u);
  for (uint64_t i = 0; i < 5; ++i) EXPECT_TRUE(slot_ok(out[i], i)) << i;
  EXPECT_TRUE(r.empty());
}

TEST(SpscRingDoorbell, PublishedPrefixVisibleStagedSuffixNot) {
  Ring r(16);
  ASSERT_TRUE(r.push(make_slot(0)));
  ASSERT_TRUE(r.push(make_slot(1)));
  ASSERT_TRUE(r.stage(make_slot(2)));
  ASSERT_TRUE(r.stage(make_slot(3)));
  EXPECT_EQ(r.staged(), 2u);
  EXPECT_EQ(r.available(), 2u);
  std::array<Slot, 8> out{};
  ASSERT_EQ(r.pop_burst(out), 2u);
  EXPECT_TRUE(slot_ok(out[0], 0));
  EXPECT_TRUE(slot_ok(out[1], 1));
  EXPECT_EQ(r.front(), nullptr);

  // A post without DEFER ends the chain and publishes the deferred posts before it, in order.
  ASSERT_TRUE(r.push(make_slot(4)));
  EXPECT_EQ(r.staged(), 0u);
  ASSERT_EQ(r.pop_burst(out), 3u);
  for (uint64_t i = 0; i < 3; ++i) EXPECT_TRUE(slot_ok(out[i], 2 + i)) << i;
}

TEST(SpscRingDoorbell, PublishWithNothingStagedIsHarmless) {
  Ring r(4);
  r.publish();
  EXPECT_EQ(r.available(), 0u);
  ASSERT_TRUE(r.push(make_slot(0)));
  r.publish();
  EXPECT_EQ(r.available(), 1u);
  EXPECT_EQ(r.staged(), 0u);
}

TEST(SpscRingDoorbell, StageSlotAndCommit) {
  Ring r(4);
  Slot* w = r.stage_slot();
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(r.stage_slot(), w);  // not advanced until commit
  EXPECT_EQ(r.staged(), 0u);
  *w = make_slot(10);
  r.stage_commit();
  EXPECT_EQ(r.staged(), 1u);
  EXPECT_EQ(r.available(), 0u);
  EXPECT_EQ(r.front(), nullptr);

  Slot* w2 = r.stage_slot();
  ASSERT_NE(w2, nullptr);
  EXPECT_NE(w2, w);
  *w2 = make_slot(11);
  r.stage_commit();
  EXPECT_EQ(r.staged(), 2u);

  r.publish();
  EXPECT_EQ(r.available(), 2u);
  const Slot* f = r.front();
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f, w);  // consumed in place
  EXPECT_TRUE(slot_ok(*f, 10));
  r.pop();
  f = r.front();
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(slot_ok(*f, 11));
  r.pop();
  EXPECT_TRUE(r.empty());

  // stage_slot() mixes with stage() in one chain.
  ASSERT_TRUE(r.stage(make_slot(12)));
  w = r.stage_slot();
  ASSERT_NE(w, nullptr);
  *w = make_slot(13);
  r.stage_commit();
  r.publish();
  std::array<Slot, 4> out{};
  ASSERT_EQ(r.pop_burst(out), 2u);
  EXPECT_TRUE(slot_ok(out[0], 12));
  EXPECT_TRUE(slot_ok(out[1], 13));
}

// NDKPI provider duty (ndkpi.md §7.3): when a post fails inline, every earlier deferred post is
// handed over first. Otherwise a ring filled by deferred posts is never seen by the consumer and
// a producer waiting for space waits forever.
TEST(SpscRingDoorbell, InlineFailurePublishesDeferredWork) {
  constexpr size_t kCap = 4;
  enum Post { kPush, kPushBurst, kStage, kStageSlot };
  for (Post failing : {kPush, kPushBurst, kStage, kStageSlot}) {
    SCOPED_TRACE(failing);
    Ring r(kCap);
    for (uint64_t i = 0; i < kCap; ++i) ASSERT_TRUE(r.stage(make_slot(i)));
    ASSERT_EQ(r.staged(), kCap);
    ASSERT_EQ(r.available(), 0u);
    const std::array<Slot, 2> more{make_slot(90), make_slot(91)};
    switch (failing) {
      case kPush:
        EXPECT_FALSE(r.push(more[0]));
        break;
      case kPushBurst:
        EXPECT_EQ(r.push_burst(more), 0u);
        break;
      case kStage:
        EXPECT_FALSE(r.stage(more[0]));
        break;
      case kStageSlot:
        EXPECT_EQ(r.stage_slot(), nullptr);
        break;
    }
    EXPECT_EQ(r.staged(), 0u);
    EXPECT_EQ(r.available(), kCap);
    std::array<Slot, kCap> out{};
    ASSERT_EQ(r.pop_burst(out), kCap);
    for (uint64_t i = 0; i < kCap; ++i) EXPECT_TRUE(slot_ok(out[i], i)) << i;
  }
}

TEST(SpscRingDoorbell, PushBurstPartialFailurePublishesAll) {
  Ring r(4);
  ASSERT_TRUE(r.stage(make_slot(0)));
  const std::array<Slot, 5> in{make_slot(1), make_slot(2), make_slot(3), make_slot(4),
                               make_slot(5)};
  EXPECT_EQ(r.push_burst(in), 3u);
  EXPECT_EQ(r.staged(), 0u);
  EXPECT_EQ(r.available(), 4u);
}

// ---- Two threads ---------------------------------------------------------------------------

struct StressParam {
  size_t capacity;
  uint64_t items;
  friend std::ostream& operator<<(std::ostream& os, const StressParam& p) {
    return os << "capacity " << p.capacity << ", " << p.items << " items";
  }
};

class SpscRingStress : public ::testing::TestWithParam<StressParam> {};

// The producer posts 0..N-1 as single pushes, random-sized bursts, and DEFER chains (stage() /
// stage_slot() then publish() or a closing push()). The consumer drains with pop(), pop_burst()
// and front()+pop() at random and checks every slot is intact and in sequence. Both sides spin
// with yield() when the ring is full or empty; a deadline turns a hang into a failure.
TEST_P(SpscRingStress, ConsumerSeesExactSequence) {
  const auto [capacity, n] = GetParam();
  constexpr size_t kMaxBurst = 64;
  Ring r(capacity);
  ASSERT_EQ(r.capacity(), capacity);

  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  std::atomic<bool> abort{false};  // either side gave up; relaxed is enough for a stop flag
  auto wait = [&] {
    if (std::chrono::steady_clock::now() > deadline) abort.store(true, std::memory_order_relaxed);
    std::this_thread::yield();
    return !abort.load(std::memory_order_relaxed);
  };

  std::thread producer([&] {
    std::mt19937_64 rng(12345);
    std::array<Slot, kMaxBurst> buf;
    uint64_t next = 0;
    while (next < n) {
      const uint64_t left = n - next;
      const auto pick = [&](uint64_t hi) { return 1 + rng() % std::min<uint64_t>(hi, left); };
      switch (rng() % 4) {
        case 0:  // single post
          while (!r.push(make_slot(next)))
            if (!wait()) return;
          ++next;
          break;
        case 1: {  // burst; partial counts are retried
          const size_t k = pick(kMaxBurst);
          for (size_t i = 0; i < k; ++i) buf[i] = make_slot(next + i);
          size_t done = 0;
          while (done < k) {
            done += r.push_burst(std::span<const Slot>(buf).subspan(done, k - done));
            if (done < k && !wait()) return;
          }
          next += k;
          break;
        }
        default: {  // DEFER chain; a full ring publishes what is staged, so waiting is safe
          const uint64_t k = pick(kMaxBurst);
          const bool in_place = rng() & 1;
          for (uint64_t i = 0; i < k; ++i) {
            if (in_place) {
              Slot* w;
              while ((w = r.stage_slot()) == nullptr)
                if (!wait()) return;
              *w = make_slot(next + i);
              r.stage_commit();
            } else {
              while (!r.stage(make_slot(next + i)))
                if (!wait()) return;
            }
          }
          next += k;
          r.publish();
          break;
        }
      }
    }
    r.publish();
  });

  uint64_t expect = 0;
  uint64_t bad_at = UINT64_MAX;  // first sequence number that was torn or out of order
  Slot got{};
  {
    std::mt19937_64 rng(67890);
    std::array<Slot, kMaxBurst> out;
    while (expect < n && bad_at == UINT64_MAX) {
      size_t got_n = 0;
      switch (rng() % 3) {
        case 0: {
          if (r.pop(out[0])) got_n = 1;
          break;
        }
        case 1: {
          const size_t k = 1 + rng() % kMaxBurst;
          got_n = r.pop_burst(std::span(out).first(k));
          break;
        }
        default: {
          const Slot* f = r.front();
          if (f != nullptr) {
            out[0] = *f;  // read in place, before pop() lets the producer reuse the slot
            r.pop();
            got_n = 1;
          }
          break;
        }
      }
      if (got_n == 0) {
        if (!wait()) break;
        continue;
      }
      for (size_t i = 0; i < got_n; ++i, ++expect) {
        if (!slot_ok(out[i], expect)) {
          bad_at = expect;
          got = out[i];
          abort.store(true, std::memory_order_relaxed);
          break;
        }
      }
    }
  }
  producer.join();

  if (abort.load(std::memory_order_relaxed) && bad_at == UINT64_MAX)
    ADD_FAILURE() << "no progress for 60 s (a full ring hiding staged slots?) at " << expect
                  << " of " << n << ", staged " << r.staged();
  ASSERT_EQ(bad_at, UINT64_MAX) << "slot for " << bad_at << " holds seq " << got.seq
                                << (got.checksum == checksum_of(got) ? "" : " (torn)");
  EXPECT_EQ(expect, n);
  EXPECT_EQ(r.staged(), 0u);
  EXPECT_TRUE(r.empty());  // nothing beyond N-1
  EXPECT_EQ(r.free_slots(), capacity);
}

INSTANTIATE_TEST_SUITE_P(Capacities, SpscRingStress,
                         ::testing::Values(StressParam{256, 2'000'000}, StressParam{2, 200'000},
                                           StressParam{4096, 2'000'000}),
                         [](const auto& info) {
                           return "cap" + std::to_string(info.param.capacity);
                         });

}  // namespace
}  // namespace urnic::dp

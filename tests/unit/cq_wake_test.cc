// dp::Cq's wake-up (dataplane/cq.h, "Wake-up"; issue 16 item 3): whoever fires an arm writes the
// wake fd once and counts the firing with whether it woke, so the control side writes the fd
// only for the others. Single-thread contract tests, and a three-thread race (an engine pushing,
// a consumer arming and blocking in poll(), a control thread taking firings) that checks that no
// wake-up is lost or doubled.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <random>
#include <thread>

#include "dataplane/cq.h"

namespace urnic::dp {
namespace {

class CqWake : public ::testing::Test {
 protected:
  void SetUp() override {
    fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    ASSERT_GE(fd_, 0);
    cq_.set_doorbell(&doorbell_);
    cq_.set_wake_fd(fd_);
  }
  void TearDown() override { ::close(fd_); }

  // The count the fd holds (and resets it); 0 if it is not readable.
  uint64_t take_fd() {
    uint64_t v = 0;
    return ::read(fd_, &v, sizeof(v)) == static_cast<ssize_t>(sizeof(v)) ? v : 0;
  }
  bool push() { return cq_.push(ResultEx{}); }
  size_t drain() {
    ResultEx r[16];
    size_t total = 0;
    for (size_t n; (n = cq_.poll(std::span<ResultEx>(r))) != 0;) total += n;
    return total;
  }

  int fd_ = -1;
  std::atomic<uint32_t> doorbell_{0};
  Cq cq_{1024};
};

TEST_F(CqWake, AFiringWritesTheFdOnceAndSaysSo) {
  cq_.arm(Cq::kArmAny);
  EXPECT_EQ(take_fd(), 0u);  // armed, nothing arrived
  ASSERT_TRUE(push());
  ASSERT_TRUE(push());  // the arm fired on the first: one write
  EXPECT_EQ(take_fd(), 1u);
  const Cq::Firings f = cq_.take_firings();
  EXPECT_EQ(f.fired, 1u);
  EXPECT_EQ(f.woken, 1u);
  EXPECT_EQ(doorbell_.exchange(0), 1u);  // the control thread still hears of it
  EXPECT_EQ(drain(), 2u);
}

TEST_F(CqWake, NoArmNoWrite) {
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(push());
  EXPECT_EQ(take_fd(), 0u);
  const Cq::Firings f = cq_.take_firings();
  EXPECT_EQ(f.fired, 0u);
  EXPECT_EQ(doorbell_.load(), 0u);
}

TEST_F(CqWake, AnArmSatisfiedAtOnceWritesInsideArm) {
  ASSERT_TRUE(push());
  cq_.arm(Cq::kArmAny);
  EXPECT_EQ(take_fd(), 1u);
  EXPECT_EQ(cq_.take_firings().woken, 1u);
}

TEST_F(CqWake, TwoFiringsBeforeATakeAreTwo) {
  // The consumer, woken by the fd, re-arms before the control thread took the first firing.
  cq_.arm(Cq::kArmAny);
  ASSERT_TRUE(push());
  cq_.arm(Cq::kArmAny);
  ASSERT_TRUE(push());
  EXPECT_EQ(take_fd(), 2u);
  const Cq::Firings f = cq_.take_firings();
  EXPECT_EQ(f.fired, 2u);
  EXPECT_EQ(f.woken, 2u);
}

TEST_F(CqWake, WithoutAWakeFdTheFiringIsLeftToTheControlSide) {
  cq_.set_wake_fd(-1);  // not asked for, moderated or closing
  cq_.arm(Cq::kArmAny);
  ASSERT_TRUE(push());
  EXPECT_EQ(take_fd(), 0u);
  const Cq::Firings f = cq_.take_firings();
  EXPECT_EQ(f.fired, 1u);
  EXPECT_EQ(f.woken, 0u);  // the control thread writes the fd for this one
}

TEST_F(CqWake, ACancelledArmWritesNothing) {
  cq_.arm(Cq::kArmAny);
  EXPECT_EQ(cq_.disarm(), Cq::kArmAny);
  ASSERT_TRUE(push());
  EXPECT_EQ(take_fd(), 0u);
  EXPECT_EQ(cq_.take_firings().fired, 0u);
}

// The engine pushes kTotal completions at random moments; the consumer drains, arms while more
// are due, blocks in poll() and must be woken (no lost wake-up, also when the push races the
// arm), each time by exactly one write (the fd's count is 1: no doubled wake-up); a control
// thread takes the firings meanwhile. At the end every firing was counted once, and woke once.
TEST_F(CqWake, NoWakeUpIsLostOrDoubledUnderRaces) {
  constexpr size_t kTotal = 20000;
  constexpr size_t kAhead = 512;  // below the ring's 1024: a full ring would be an overrun
  std::atomic<bool> done{false};
  std::atomic<size_t> consumed{0};
  std::thread engine([&] {
    std::mt19937 rng(12345);
    for (size_t i = 0; i < kTotal; ++i) {
      // Spins of 0..255 iterations: pushes land before, during and after the consumer's arm.
      for (uint32_t s = rng() % 256; s > 0; --s)
        std::atomic_signal_fence(std::memory_order_seq_cst);
      while (i - consumed.load(std::memory_order_acquire) >= kAhead) std::this_thread::yield();
      ASSERT_TRUE(push());
    }
  });
  uint64_t taken_fired = 0, taken_woken = 0;
  std::thread control([&] {
    while (!done.load(std::memory_order_acquire)) {
      const Cq::Firings f = cq_.take_firings();
      taken_fired += f.fired;
      taken_woken += f.woken;
      std::this_thread::yield();
    }
  });
  size_t got = 0, waits = 0, doubled = 0, lost = 0;
  while (got < kTotal) {
    got += drain();
    consumed.store(got, std::memory_order_release);
    if (got == kTotal) break;
    cq_.arm(Cq::kArmAny);
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, 10000) != 1) {
      ++lost;
      break;
    }
    ++waits;
    if (take_fd() != 1) ++doubled;
  }
  engine.join();
  done.store(true, std::memory_order_release);
  control.join();
  const Cq::Firings last = cq_.take_firings();
  taken_fired += last.fired;
  taken_woken += last.woken;
  EXPECT_EQ(lost, 0u);
  EXPECT_EQ(doubled, 0u);
  EXPECT_EQ(got, kTotal);
  // Each wait was ended by one firing; an arm that fired after the last wait (none: the
  // consumer arms only while completions are due) would show here too.
  EXPECT_EQ(taken_fired, waits);
  EXPECT_EQ(taken_woken, waits);
  EXPECT_GT(waits, 100u) << "the race was not exercised";
}

}  // namespace
}  // namespace urnic::dp

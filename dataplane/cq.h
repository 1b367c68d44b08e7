// Completion queue as the engine produces it (architecture.md §3, ndkpi.md §3).
//
// One SPSC ring of ResultEx records per CQ: the engine that owns the CQ's QPs produces, the
// application consumes with poll(). A CQ is bound to one engine (all QPs that complete into it
// live on that engine); sharing a CQ across engines would need one sub-ring per engine and is
// refused by the control plane.
//
// Overrun (ndkpi.md §3.3): if the ring is full when the engine must write a completion, the CQ
// is marked overrun; it and its QPs are dead (the notification status becomes
// STATUS_BUFFER_OVERFLOW). A consumer that sizes the CQ for its queues never sees this.
#pragma once

#include <atomic>
#include <cstdint>
#include <span>

#include "dataplane/ring.h"
#include "urnic/types.h"

namespace urnic::dp {

class Cq {
 public:
  explicit Cq(uint32_t depth) { ring_.init(round_up(depth)); }

  // Engine side. Returns false (and marks the CQ overrun) when the ring is full.
  bool push(const ResultEx& r) noexcept {
    if (overrun_.load(std::memory_order_relaxed)) return false;
    if (!ring_.push(r)) {
      overrun_.store(true, std::memory_order_release);
      return false;
    }
    produced_.fetch_add(1, std::memory_order_relaxed);
    return true;
  }

  // Application side (one poller at a time, NDK rule): copies out up to out.size() results.
  size_t poll(std::span<ResultEx> out) noexcept { return ring_.pop_burst(out); }
  bool overrun() const noexcept { return overrun_.load(std::memory_order_acquire); }
  size_t capacity() const noexcept { return ring_.capacity(); }
  uint64_t produced() const noexcept { return produced_.load(std::memory_order_relaxed); }

 private:
  static size_t round_up(uint32_t n) noexcept {
    size_t c = 1;
    while (c < n) c <<= 1;
    return c;
  }
  SpscRing<ResultEx> ring_;
  std::atomic<bool> overrun_{false};
  std::atomic<uint64_t> produced_{0};
};

}  // namespace urnic::dp

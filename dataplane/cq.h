// Completion queue as the engine produces it (architecture.md §3, ndkpi.md §3).
//
// One SPSC ring of ResultEx records per CQ: the engine that owns the CQ's QPs produces, the
// application consumes with poll(). A CQ is bound to one engine (all QPs that complete into it
// live on that engine); sharing a CQ across engines would need one sub-ring per engine and is
// refused by the control plane.
//
// Overrun (ndkpi.md §3.3): if the ring is full when the engine must write a completion, the CQ
// is marked overrun; it and its QPs are dead (the notification status becomes
// STATUS_BUFFER_OVERFLOW). A consumer that sizes the CQ for its queues never sees this. The
// engine moves every QP completing into an overrun CQ to ERR at its next packet or step
// (qp_cq_overrun, internal.h); completions refused from then on are counted in dropped().
//
// Arming (NdkArmCq, ndkpi.md §3.4). The arm is one atomic level: 0 none, then ERRORS < SOLICITED
// < ANY, so NDK's merge table (ANY + x = ANY, ERRORS + SOLICITED = SOLICITED, ...) is max().
// The engine counts what it writes (all, solicited-or-error, error). An arm is satisfied when a
// completion of its kind was written since the last time the CQ fired ("if at least one CQE
// arrived since the last callback, satisfy the arm immediately"): the counters are compared
// with a baseline taken when it fired. Whoever sees an armed CQ satisfied (the engine after a
// push, or the application inside arm()) takes the arm with a compare-exchange to 0, so each arm
// fires at most once, then raises `notify_` and the control plane's doorbell. The engine never
// calls back, blocks or makes a syscall: the control thread polls the doorbell and runs the
// notification callback (control/ndk_cq.cc).
//
// Lost wake-up (the consumer polls 0, then arms, while the engine writes in between): the engine
// stores its counters and then loads the arm; arm() stores the arm and then loads the counters;
// a seq_cst fence on each side between the store and the load (Dekker) guarantees that at least
// one of them sees the other's store, so the completion is never missed.
#pragma once

#include <atomic>
#include <cstdint>
#include <span>

#include "dataplane/ring.h"
#include "urnic/types.h"

namespace urnic::dp {

// Deepest CQ an adapter creates (NDK max_cq_depth).
inline constexpr uint32_t kMaxCqDepth = 1u << 20;

class Cq {
 public:
  // Arm levels, ordered so that merging two arms is max() (ndkpi.md §3.4 merge table).
  static constexpr uint32_t kArmNone = 0;
  static constexpr uint32_t kArmErrors = 1;
  static constexpr uint32_t kArmSolicited = 2;
  static constexpr uint32_t kArmAny = 3;

  explicit Cq(uint32_t depth) { ring_.init(round_up(depth)); }

  // Engine side. Returns false (and marks the CQ overrun) when the ring is full.
  bool push(const ResultEx& r) noexcept {
    if (overrun_.load(std::memory_order_relaxed)) [[unlikely]] {
      count_dropped();
      return false;
    }
    if (!ring_.push(r)) [[unlikely]] {
      overrun_.store(true, std::memory_order_release);  // pairs with overrun()'s acquire
      count_dropped();
      ring_doorbell();
      return false;
    }
    // Single writer (this engine): plain increments published with relaxed stores; readers
    // only compare them with baselines.
    produced_.store(produced_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    const bool error = r.status != Status::kSuccess;
    if (error || (r.flags & kResultSolicited) != 0)
      solicited_.store(solicited_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    if (error)
      errors_.store(errors_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    // Dekker with arm(): our counter stores before our load of the arm (see the file comment).
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (arm_.load(std::memory_order_relaxed) != kArmNone) [[unlikely]]
      try_fire();
    return true;
  }

  // Application side (one poller at a time, NDK rule): copies out up to out.size() results.
  size_t poll(std::span<ResultEx> out) noexcept { return ring_.pop_burst(out); }
  // The same into NDK_RESULT records (NdkGetCqResults), converted straight out of the ring
  // slots: no intermediate buffer to construct, so an empty poll costs one load.
  size_t poll(std::span<Result> out) noexcept {
    size_t n = 0;
    for (; n < out.size(); ++n) {
      const ResultEx* r = ring_.front();
      if (r == nullptr) break;
      out[n] = Result{r->status, r->bytes_transferred, r->qp_context, r->request_context};
      ring_.pop();
    }
    return n;
  }
  bool overrun() const noexcept { return overrun_.load(std::memory_order_acquire); }
  size_t capacity() const noexcept { return ring_.capacity(); }
  uint64_t produced() const noexcept { return produced_.load(std::memory_order_relaxed); }
  // Completions refused since the overrun (the one that found the ring full, and every later
  // one): they are lost, as on hardware.
  uint64_t dropped() const noexcept { return dropped_.load(std::memory_order_relaxed); }

  // ---- Notification (arming) -----------------------------------------------------------------

  // NdkArmCq (application side, serialised with poll() by the consumer). `level` is one of
  // kArmErrors / kArmSolicited / kArmAny; merged with a pending arm by max(). Fires at once if a
  // matching completion arrived since the CQ last fired.
  void arm(uint32_t level) noexcept {
    uint32_t cur = arm_.load(std::memory_order_relaxed);
    while (cur < level && !arm_.compare_exchange_weak(cur, level, std::memory_order_relaxed,
                                                      std::memory_order_relaxed)) {
    }
    // Dekker with push(): our arm store before our loads of the counters.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    try_fire();
  }
  // Takes the arm away without firing; returns the level it had (0: nothing was armed, or the
  // arm already fired). Used by the cancel extension.
  uint32_t disarm() noexcept { return arm_.exchange(kArmNone, std::memory_order_acq_rel); }
  uint32_t armed() const noexcept { return arm_.load(std::memory_order_relaxed); }
  // Control side: true once per firing (an arm that fired, or an overrun).
  bool take_notification() noexcept {
    // Acquire pairs with the release store in try_fire()/ring_doorbell().
    return notify_.exchange(false, std::memory_order_acquire);
  }
  // Where the engine signals the control plane that some CQ needs attention (may be null: no
  // notifications are delivered then, but arming and take_notification() still work).
  void set_doorbell(std::atomic<uint32_t>* d) noexcept { doorbell_ = d; }

 private:
  static size_t round_up(uint32_t n) noexcept {
    size_t c = 1;
    while (c < n) c <<= 1;
    return c;
  }
  bool satisfied(uint32_t level) const noexcept {
    switch (level) {
      case kArmAny:
        return produced_.load(std::memory_order_relaxed) !=
               base_any_.load(std::memory_order_relaxed);
      case kArmSolicited:  // error completions always satisfy SOLICITED (ndkpi.md §3.4)
        return solicited_.load(std::memory_order_relaxed) !=
               base_solicited_.load(std::memory_order_relaxed);
      case kArmErrors:
        return errors_.load(std::memory_order_relaxed) !=
               base_errors_.load(std::memory_order_relaxed);
      default:
        return false;
    }
  }
  // Engine or application: takes the arm if it is satisfied. At most one caller wins the
  // compare-exchange for a given arm, so an arm fires at most once.
  void try_fire() noexcept {
    uint32_t level = arm_.load(std::memory_order_relaxed);
    while (level != kArmNone) {
      if (!satisfied(level)) return;
      if (arm_.compare_exchange_weak(level, kArmNone, std::memory_order_acq_rel,
                                     std::memory_order_relaxed)) {
        // New baseline: completions from here on satisfy the next arm at once.
        base_any_.store(produced_.load(std::memory_order_relaxed), std::memory_order_relaxed);
        base_solicited_.store(solicited_.load(std::memory_order_relaxed),
                              std::memory_order_relaxed);
        base_errors_.store(errors_.load(std::memory_order_relaxed), std::memory_order_relaxed);
        ring_doorbell();
        return;
      }
    }
  }
  void count_dropped() noexcept {
    dropped_.store(dropped_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
  void ring_doorbell() noexcept {
    // Release: the baselines (and the overrun flag) are visible to the control thread that
    // takes the notification.
    notify_.store(true, std::memory_order_release);
    if (doorbell_ != nullptr) doorbell_->store(1, std::memory_order_release);
  }

  SpscRing<ResultEx> ring_;
  std::atomic<bool> overrun_{false};
  // Written by the engine only.
  alignas(kCacheLine) std::atomic<uint64_t> produced_{0};
  std::atomic<uint64_t> solicited_{0};  // solicited receives and errors
  std::atomic<uint64_t> errors_{0};
  std::atomic<uint64_t> dropped_{0};
  // Written by whoever fires an arm; read by arm() and the engine.
  alignas(kCacheLine) std::atomic<uint32_t> arm_{kArmNone};
  std::atomic<uint64_t> base_any_{0};
  std::atomic<uint64_t> base_solicited_{0};
  std::atomic<uint64_t> base_errors_{0};
  std::atomic<bool> notify_{false};
  std::atomic<uint32_t>* doorbell_ = nullptr;
};

}  // namespace urnic::dp

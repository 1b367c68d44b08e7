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
// (qp_cq_overrun, internal.h; an idle one is found through overruns()); completions refused
// from then on are counted in dropped().
//
// Arming (NdkArmCq, ndkpi.md §3.4). The arm is one atomic level: 0 none, then ERRORS < SOLICITED
// < ANY, so NDK's merge table (ANY + x = ANY, ERRORS + SOLICITED = SOLICITED, ...) is max().
// The engine counts what it writes (all, solicited-or-error, error). An arm is satisfied when a
// completion of its kind was written since the last time the CQ fired ("if at least one CQE
// arrived since the last callback, satisfy the arm immediately"): the counters are compared
// with a baseline taken when it fired. Whoever sees an armed CQ satisfied (the engine after a
// push, or the application inside arm()) takes the arm with a compare-exchange to 0, so each arm
// fires at most once, then counts the firing in `fired_` and rings the control plane's doorbell.
// The engine never calls back or blocks: the control thread polls the doorbell and runs one
// notification callback per firing it takes (control/ndk_adapter.cc).
//
// Wake-up (issue 16 item 3, event latency): the control thread naps up to 1 ms when idle, too
// slow for a consumer blocked in poll/epoll on the CQ's eventfd. So the one who fires an arm also
// makes the wake fd readable (wake(): one eventfd write, the software analogue of a NIC's
// interrupt), when the control plane has set one (set_wake_fd: only once the consumer asked for
// the fd). This is the engine's only syscall, made once per fired arm, never per completion, and
// never for a CQ that is not armed or has no fd. The firing is counted together with whether it
// woke (one fetch_add on one word), so the control thread, which takes both at once, writes the
// fd itself exactly for the firings that did not: one readable event per notification, never two.
//
// Resize (NdkResizeCq, ibv_resize_cq): no ring is copied or reallocated under its users. The
// control side prepares a new ring (prepare_resize); the engine switches its writes to it
// between two steps (switch_ring_lc, through the mailbox) and publishes the new ring with a
// release store; the consumer, finding its ring empty and a newer ring published, moves on to it
// (the acquire load makes every completion written to the old ring visible first, so none is
// lost and the order holds). The old ring is freed by the next resize or with the CQ, once the
// consumer has left it; the poll path frees nothing.
//
// Lost wake-up (the consumer polls 0, then arms, while the engine writes in between): the engine
// stores its counters and then loads the arm; arm() stores the arm and then loads the counters;
// a seq_cst fence on each side between the store and the load (Dekker) guarantees that at least
// one of them sees the other's store, so the completion is never missed.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <new>
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

  explicit Cq(uint32_t depth)
      : ring_(std::make_unique<Ring>(round_up(depth))),
        prod_(ring_.get()),
        cons_(ring_.get()),
        published_(ring_.get()) {}

  // Engine side. Returns false (and marks the CQ overrun) when the ring is full.
  bool push(const ResultEx& r) noexcept {
    if (overrun_.load(std::memory_order_relaxed)) [[unlikely]] {
      count_dropped();
      return false;
    }
    if (!prod_->push(r)) [[unlikely]] {
      overrun_.store(true, std::memory_order_release);  // pairs with overrun()'s acquire
      overruns_.fetch_add(1, std::memory_order_relaxed);
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
  size_t poll(std::span<ResultEx> out) noexcept {
    size_t n = cons_->pop_burst(out);
    // Short: the engine may have moved to a resized ring (one load of a line written only then).
    if (n != out.size() && moved()) [[unlikely]]
      n += cons_->pop_burst(out.subspan(n));
    return n;
  }
  // The same into NDK_RESULT records (NdkGetCqResults), converted straight out of the ring
  // slots: no intermediate buffer to construct, so an empty poll costs two loads.
  size_t poll(std::span<Result> out) noexcept {
    size_t n = 0;
    while (n < out.size()) {
      const ResultEx* r = cons_->front();
      if (r == nullptr) {
        if (!moved()) break;
        continue;
      }
      out[n++] = Result{r->status, r->bytes_transferred, r->qp_context, r->request_context};
      cons_->pop();
    }
    return n;
  }
  bool overrun() const noexcept { return overrun_.load(std::memory_order_acquire); }
  // The slots of the ring the engine writes now.
  size_t capacity() const noexcept {
    return published_.load(std::memory_order_acquire)->capacity();
  }

  // ---- Resize (see the file comment) ----------------------------------------------------------

  // Control side, serialised with poll() by the consumer: completions it has not taken yet.
  size_t queued() noexcept {
    Ring* p = published_.load(std::memory_order_acquire);
    return cons_->available() + (p != cons_ ? p->available() : 0);
  }
  // Prepares a ring of `depth` slots (rounded up to a power of two) for the engine to switch
  // to. False when a previous resize is not finished (its switch is queued, or the consumer still
  // drains the ring before it) or memory cannot be had. Frees a ring the consumer has left.
  bool prepare_resize(uint32_t depth) noexcept {
    if (next_ != nullptr) return false;
    // Serialised with poll(): a drained ring before the engine's is left now rather than at the
    // next poll, so that a second resize of an empty CQ with no poll between them succeeds.
    (void)moved();
    if (old_ != nullptr && cons_ == old_.get()) return false;
    old_.reset();
    next_.reset(new (std::nothrow) Ring(round_up(depth)));
    return next_ != nullptr && next_->capacity() != 0;
  }
  // Engine side (the mailbox's kResizeCq): writes go to the prepared ring from now on.
  void switch_ring_lc() noexcept {
    if (next_ == nullptr) return;
    old_ = std::move(ring_);
    ring_ = std::move(next_);
    prod_ = ring_.get();
    published_.store(prod_, std::memory_order_release);  // pairs with moved()'s acquire
  }
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
  // Eventfd writes made by the calling thread so far (wrapping). The engine's loop compares it
  // across steps: a thread it just woke may be waiting for this CPU (engine.cc, lcore_main).
  static uint32_t wakes_written() noexcept { return wakes_written_; }
  // CQs that overran so far, in this process. An engine compares it across steps: when it
  // moves, the QPs of the CQ that overran go to ERR, idle ones too (Engine::phase_tx_build).
  static uint32_t overruns() noexcept { return overruns_.load(std::memory_order_relaxed); }
  // Arms fired since the last take, and how many of those made the wake fd readable already.
  struct Firings {
    uint32_t fired = 0;
    uint32_t woken = 0;  // <= fired
  };
  // Control side: takes the firings counted so far (an overrun rings the doorbell without one:
  // see overrun()).
  Firings take_firings() noexcept {
    // Acquire pairs with the release fetch_add in try_fire(): the baselines are visible.
    const uint64_t v = fired_.exchange(0, std::memory_order_acquire);
    return {static_cast<uint32_t>(v & kFiredMask), static_cast<uint32_t>(v >> kWokenShift)};
  }
  // Where the engine signals the control plane that some CQ needs attention (may be null: no
  // notifications are delivered then, but arming and take_firings() still work).
  void set_doorbell(std::atomic<uint32_t>* d) noexcept { doorbell_ = d; }
  // The eventfd a firing makes readable, or -1 for none (control side; the fd stays open while
  // the engine may use it: it is closed with the CQ, after its QPs).
  void set_wake_fd(int fd) noexcept {
    // Release pairs with the acquire load in try_fire(): the fd exists before it is used.
    wake_fd_.store(fd, std::memory_order_release);
  }

 private:
  using Ring = SpscRing<ResultEx>;
  static size_t round_up(uint32_t n) noexcept {
    size_t c = 1;
    while (c < n) c <<= 1;
    return c;
  }
  // Consumer: whether the engine switched to a newer ring, and if so, with the current one
  // drained, moves the consumer onto it. The acquire load makes every completion the engine
  // wrote to the current ring before the switch visible, so "empty now" means "empty for good".
  bool moved() noexcept {
    Ring* p = published_.load(std::memory_order_acquire);
    if (p == cons_ || !cons_->empty()) return false;
    cons_ = p;
    return true;
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
  // compare-exchange for a given arm, so an arm fires at most once, and only the winner wakes
  // and counts it.
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
        // A dead (overrun) CQ is reported by the control thread, which writes the fd for it.
        const int fd = overrun_.load(std::memory_order_relaxed)
                           ? -1
                           : wake_fd_.load(std::memory_order_acquire);
        const bool woken = fd >= 0 && wake(fd);
        // After the write: the fd is readable before the control thread can see the firing
        // (and run its callback). Release pairs with take_firings()'s acquire. A fetch_add,
        // not a store: a re-arm may fire again before the control thread took this one, and
        // the consumer's arm() may fire while the engine is still here (both are counted).
        fired_.fetch_add(1 | (woken ? uint64_t{1} << kWokenShift : 0), std::memory_order_release);
        ring_doorbell();
        return;
      }
    }
  }
  // One eventfd write (dataplane/cq.cc, out of line: the one syscall, on the rare path).
  // Whether the fd is readable now.
  static bool wake(int fd) noexcept;
  // Eventfd writes made by this thread (wake() counts them; wakes_written() reads them).
  static thread_local uint32_t wakes_written_;
  static std::atomic<uint32_t> overruns_;
  void count_dropped() noexcept {
    dropped_.store(dropped_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
  void ring_doorbell() noexcept {
    // Release: the firing count (and the overrun flag) are visible to the control thread that
    // sees the doorbell.
    if (doorbell_ != nullptr) doorbell_->store(1, std::memory_order_release);
  }
  // fired_: the count of firings in the low half, of those that woke in the high half. Both
  // stay far below 2^32 between two takes (each firing needs an arm by the consumer).
  static constexpr int kWokenShift = 32;
  static constexpr uint64_t kFiredMask = (uint64_t{1} << kWokenShift) - 1;

  // The rings: the one the engine writes (owned by ring_), the one it wrote before a resize
  // (old_, until the consumer has left it) and the one prepared for the next switch (next_).
  std::unique_ptr<Ring> ring_, old_, next_;
  Ring* prod_;                    // engine: where push() writes
  Ring* cons_;                    // consumer: where poll() reads
  std::atomic<Ring*> published_;  // the engine's ring, for the consumer to follow
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
  std::atomic<uint64_t> fired_{0};  // taken (reset) by the control thread
  std::atomic<int> wake_fd_{-1};    // written by the control plane
  std::atomic<uint32_t>* doorbell_ = nullptr;
};

}  // namespace urnic::dp

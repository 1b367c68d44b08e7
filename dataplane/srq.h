// Shared receive queue (NDK SRQ, ndkpi.md §2.5; IBTA §10.2.9.5): one ring of receive WQEs that
// the responders of several QPs take from. All QPs that share an SRQ run on one engine, the
// SRQ's only consumer (the control plane enforces it); the application posts with NdkSrqReceive
// under NDK's rule that posts to one queue are serialised, so the ring is SPSC like an RQ.
//
// Depth. `depth` receives may be outstanding: posted and not yet completed (a receive the engine
// has taken still counts until its completion is written). The poster counts what it posted, the
// engine what it retired; their difference is checked against the depth on every post, so a
// receive CQ sized for the depth never overruns.
//
// Growing (NdkModifySrq with a larger depth). The ring's capacity is fixed, so a larger depth may
// need a larger ring. The control thread allocates it and offers it in `next_`; the poster takes
// it at its next post: it links it behind the ring it was using (`handoff`, release, after every
// slot of the old ring was published) and posts into it from then on. The engine drains the old
// ring, sees the handoff (acquire), checks the old ring once more and moves on; the control thread
// frees rings the engine has left (`engine_ring_`). Posting stays wait-free, with one extra
// relaxed load per post.
//
// Limit notification (the low-water mark). Armed with a threshold, it fires once when the fill
// level (posted and not yet taken by a responder) drops below it, then stays disarmed until armed
// again. The engine checks after each take; the control thread checks when it arms (Modify with a
// non-zero threshold fires at once if the level is already below). The two sides use the same
// Dekker pattern as Cq (a seq_cst fence between each side's store and its load), so a drop below
// the threshold that races with the arm is never missed. The engine only raises flags; the
// control thread runs the callback.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "dataplane/ring.h"
#include "dataplane/wqe.h"
#include "urnic/status.h"

namespace urnic::dp {

class Srq {
 public:
  // Control side. `depth` >= 1, `max_sge` <= kMaxSge (checked by the control plane).
  Srq(uint32_t depth, uint32_t max_sge) : depth_(depth), max_sge_(max_sge) {
    rings_.push_back(std::make_unique<Ring>(round_up(depth), max_sge));
    prod_ = cons_ = rings_.back().get();
    prod_capacity_ = prod_->ring.capacity();
    engine_ring_.store(cons_, std::memory_order_relaxed);
  }
  Srq(const Srq&) = delete;
  Srq& operator=(const Srq&) = delete;

  // ---- Producer (application; one poster at a time) ------------------------------------------

  // NdkSrqReceive. kDataOverrun for more SGEs than max_sge, kInvalidParameter if `length` is not
  // the sum of the SGE lengths, kBufferOverflow above 2^31 bytes (the largest message, IBTA
  // §9.4), kNoMoreEntries when `depth` receives are outstanding.
  Status post(const RecvWqe& wqe) noexcept {
    if (wqe.num_sge > max_sge_ || wqe.num_sge > kMaxSge) return Status::kDataOverrun;
    uint64_t total = 0;
    for (uint32_t i = 0; i < wqe.num_sge; ++i) total += wqe.sge[i].length;
    if (total != wqe.length) return Status::kInvalidParameter;
    if (total > kMaxMessageLength) return Status::kBufferOverflow;
    if (Ring* n = next_.load(std::memory_order_acquire)) [[unlikely]] {
      // Take the larger ring offered by the control thread (acquire: its slots are
      // initialised). Every post so far was published, so the handoff (release) tells the engine
      // that nothing more will appear in the old ring.
      if (next_.compare_exchange_strong(n, nullptr, std::memory_order_acq_rel)) {
        prod_->handoff.store(n, std::memory_order_release);
        prod_ = n;
      }
    }
    // Acquire pairs with the engine's release in retire_lc(): an outstanding receive is done.
    if (posted_.load(std::memory_order_relaxed) - retired_.load(std::memory_order_acquire) >=
        depth_.load(std::memory_order_relaxed))
      return Status::kNoMoreEntries;
    if (!prod_->ring.push(wqe)) return Status::kNoMoreEntries;
    posted_.store(posted_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
    return Status::kSuccess;
  }

  // ---- Engine (the only consumer) ------------------------------------------------------------

  // Takes the oldest receive, following handoffs to larger rings. False when none is posted.
  bool pop_lc(RecvWqe* out) noexcept {
    for (;;) {
      if (cons_->ring.pop(*out)) break;
      Ring* n = cons_->handoff.load(std::memory_order_acquire);  // pairs with post()'s release
      if (n == nullptr) return false;
      if (cons_->ring.pop(*out)) break;  // published before the handoff: still ours to take
      cons_ = n;
      engine_ring_.store(n, std::memory_order_release);  // the old ring may be freed
    }
    const uint64_t c = consumed_.load(std::memory_order_relaxed) + 1;
    consumed_.store(c, std::memory_order_relaxed);
    // Dekker with arm_limit(): our level change before our load of the arm.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (armed_.load(std::memory_order_relaxed)) [[unlikely]]
      try_fire();
    return true;
  }
  // A receive taken from this SRQ completed (or was dropped by a QP reset).
  void retire_lc() noexcept {
    // Release pairs with post()'s acquire.
    retired_.store(retired_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  }

  // ---- Control side ---------------------------------------------------------------------------

  uint32_t depth() const noexcept { return depth_.load(std::memory_order_relaxed); }
  uint32_t max_sge() const noexcept { return max_sge_; }
  // Receives posted and not completed (a snapshot).
  uint64_t outstanding() const noexcept {
    return posted_.load(std::memory_order_acquire) - retired_.load(std::memory_order_acquire);
  }
  // Receives posted and not yet taken by a responder (a snapshot).
  uint64_t level() const noexcept {
    return posted_.load(std::memory_order_acquire) - consumed_.load(std::memory_order_acquire);
  }

  // NdkModifySrq's depth (control thread): a larger ring is allocated when the current one
  // cannot hold `depth` receives. Returns false when `depth` is below the receives outstanding.
  bool set_depth(uint32_t depth) {
    if (depth < outstanding()) return false;
    if (depth > prod_capacity_) {
      auto ring = std::make_unique<Ring>(round_up(depth), max_sge_);
      Ring* r = ring.get();
      rings_.push_back(std::move(ring));
      prod_capacity_ = r->ring.capacity();
      // A ring offered before and not taken yet is dropped (never used: the poster takes a ring
      // only with the compare-exchange that this exchange now makes fail).
      if (Ring* old = next_.exchange(r, std::memory_order_acq_rel)) drop(old);
    }
    depth_.store(depth, std::memory_order_relaxed);
    return true;
  }
  // Frees the rings the engine has left behind (control thread).
  void reclaim() {
    const Ring* cur = engine_ring_.load(std::memory_order_acquire);
    while (rings_.size() > 1 && rings_.front().get() != cur) rings_.erase(rings_.begin());
  }

  // Arms the limit notification with `threshold` > 0 (control thread). With `check_now`, fires
  // at once when the level is already below (NdkModifySrq); at creation it does not.
  void arm_limit(uint32_t threshold, bool check_now) noexcept {
    threshold_.store(threshold, std::memory_order_relaxed);
    armed_.store(true, std::memory_order_relaxed);
    // Dekker with pop_lc(): our arm store before our load of the level.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (check_now) try_fire();
  }
  uint32_t threshold() const noexcept { return threshold_.load(std::memory_order_relaxed); }
  bool armed() const noexcept { return armed_.load(std::memory_order_relaxed); }
  // True once per firing.
  bool take_notification() noexcept {
    return notify_.exchange(false, std::memory_order_acquire);  // pairs with try_fire()
  }
  void set_doorbell(std::atomic<uint32_t>* d) noexcept { doorbell_ = d; }

 private:
  struct Ring {
    // Slots of the SRQ's SGE limit (recv_wqe_slot_bytes; post() checks every receive fits).
    Ring(size_t capacity, uint32_t max_sge) { ring.init(capacity, recv_wqe_slot_bytes(max_sge)); }
    WqeRing<RecvWqe> ring;
    std::atomic<Ring*> handoff{nullptr};  // the ring the poster moved on to
  };
  static size_t round_up(uint32_t n) noexcept {
    size_t c = 1;
    while (c < n) c <<= 1;
    return c;
  }
  void drop(Ring* r) {
    for (auto it = rings_.begin(); it != rings_.end(); ++it) {
      if (it->get() == r) {
        rings_.erase(it);
        return;
      }
    }
  }
  void try_fire() noexcept {
    const uint64_t lvl =
        posted_.load(std::memory_order_relaxed) - consumed_.load(std::memory_order_relaxed);
    if (lvl >= threshold_.load(std::memory_order_relaxed)) return;
    bool armed = true;
    if (armed_.compare_exchange_strong(armed, false, std::memory_order_acq_rel)) {
      notify_.store(true, std::memory_order_release);
      if (doorbell_ != nullptr) doorbell_->store(1, std::memory_order_release);
    }
  }

  // Producer-private.
  alignas(kCacheLine) Ring* prod_ = nullptr;
  std::atomic<uint64_t> posted_{0};  // written by the producer, read by engine and control
  // Engine-private.
  alignas(kCacheLine) Ring* cons_ = nullptr;
  std::atomic<uint64_t> consumed_{0};
  std::atomic<uint64_t> retired_{0};
  std::atomic<Ring*> engine_ring_{nullptr};
  // Shared.
  alignas(kCacheLine) std::atomic<Ring*> next_{nullptr};
  std::atomic<uint32_t> depth_;
  std::atomic<uint32_t> threshold_{0};
  std::atomic<bool> armed_{false};
  std::atomic<bool> notify_{false};
  std::atomic<uint32_t>* doorbell_ = nullptr;
  const uint32_t max_sge_;
  // Control-side: every ring still allocated, in the order the engine uses them.
  std::vector<std::unique_ptr<Ring>> rings_;
  size_t prod_capacity_ = 0;  // capacity of the newest ring (control side)
};

}  // namespace urnic::dp

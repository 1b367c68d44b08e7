// Steering between the engines of one adapter (issue 14 items 1, 2): which engine owns each QP
// number, and the software hand-off rings that carry a frame from the engine whose port queue
// received it to the engine that owns its QP.
//
// An adapter spread over N engines has one port queue per engine (queue i: engine i). A frame
// lands on whichever queue the port chose (RSS over the UDP ports and addresses, a PMD with one
// queue, or net_ring's queue i to queue i), not necessarily its QP's. The receiving engine
// parses it; when its endpoint has no QP of that number and another engine owns it, the frame
// goes, as received, to that engine's inbound ring from this one (one SPSC ring per ordered
// pair of engines: no lock, no shared write). Frames are staged during the receive burst and
// published once at its end (burst-wise), and the owner delivers them in its next receive phase
// as if its own queue had received them. Frames for the control plane (ARP, ND, QP1 MADs) go to
// engine 0, which alone feeds the control thread's SPSC ring.
//
// The owner table is written by the control side (set before the QP's kAddQp, cleared after its
// kDestroyQp) and read by every engine with relaxed loads: a stale answer only hands a frame to
// an engine that then finds no QP and drops it, as a frame for a QP being destroyed is dropped
// anyway. A handed-off frame is never handed off again, so a frame cannot bounce.
#pragma once

#include <rte_mbuf.h>

#include <atomic>
#include <cstdint>
#include <memory>

#include "dataplane/ring.h"

namespace urnic::dp {

class Steering {
 public:
  static constexpr uint32_t kMaxEngines = 8;
  static constexpr uint8_t kNoOwner = 0xFF;
  // Per ordered pair of engines: two receive bursts' worth many times over, so that a ring is
  // full only when its owner stalls.
  static constexpr uint32_t kRingSize = 1024;

  // `engines` 2 .. kMaxEngines; QP numbers below `max_qps`.
  Steering(uint32_t engines, uint32_t max_qps)
      : n_(engines),
        max_qps_(max_qps),
        owner_(std::make_unique<std::atomic<uint8_t>[]>(max_qps)),
        rings_(std::make_unique<SpscRing<rte_mbuf*>[]>(size_t{engines} * engines)) {
    for (uint32_t q = 0; q < max_qps; ++q) owner_[q].store(kNoOwner, std::memory_order_relaxed);
    for (uint32_t i = 0; i < engines * engines; ++i)
      if (i / engines != i % engines) rings_[i].init(kRingSize);
  }
  ~Steering() {
    rte_mbuf* m = nullptr;
    for (uint32_t i = 0; i < n_ * n_; ++i)
      while (rings_[i].pop(m)) rte_pktmbuf_free(m);
  }
  Steering(const Steering&) = delete;
  Steering& operator=(const Steering&) = delete;

  uint32_t engines() const noexcept { return n_; }
  // Control side.
  void set_owner(uint32_t qpn, uint8_t engine) noexcept {
    if (qpn < max_qps_) owner_[qpn].store(engine, std::memory_order_relaxed);
  }
  // Any engine: kNoOwner for a number no QP holds (or out of range).
  uint8_t owner(uint32_t qpn) const noexcept {
    return qpn < max_qps_ ? owner_[qpn].load(std::memory_order_relaxed) : kNoOwner;
  }
  // The ring from engine `from` to engine `to` (from != to): `from` stages and publishes, `to`
  // pops.
  SpscRing<rte_mbuf*>& ring(uint32_t from, uint32_t to) noexcept { return rings_[from * n_ + to]; }
  // Engine `from`, at the end of its receive burst: makes what it staged visible.
  void publish_from(uint32_t from) noexcept {
    for (uint32_t to = 0; to < n_; ++to)
      if (to != from && ring(from, to).staged() != 0) ring(from, to).publish();
  }

 private:
  uint32_t n_;
  uint32_t max_qps_;
  std::unique_ptr<std::atomic<uint8_t>[]> owner_;
  std::unique_ptr<SpscRing<rte_mbuf*>[]> rings_;
};

}  // namespace urnic::dp

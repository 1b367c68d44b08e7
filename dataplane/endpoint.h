// An engine's view of one adapter port queue: its QP table, MR table, TX buffer and control
// frame path (architecture.md §2). Several endpoints may share one engine (engine.h); the RC
// stages (internal.h) see only the endpoint.
#pragma once

#include <rte_mbuf.h>
#include <rte_mempool.h>

#include <array>
#include <cstdint>
#include <memory>

#include "dataplane/fault.h"
#include "dataplane/mailbox.h"
#include "dataplane/qp.h"
#include "dataplane/wire/frame.h"
#include "urnic/config.h"

namespace urnic::dp {

class Port;
class MrTable;
class Steering;

// Why the engine dropped a received frame (house style rule 22), and the per-port-queue
// counters: the public RxDrop and PortCounters (urnic/counters.h), one definition.
using ::urnic::RxDrop;
using EngineCounters = PortCounters;
static_assert(kParseErrorCount == static_cast<size_t>(wire::ParseError::kCount));

// Sink for frames the engine does not handle itself (ARP, IPv6 ND, QP1 MADs): the control plane
// installs one; the engine hands the mbuf over or drops it if the sink refuses.
struct ControlSink {
  virtual ~ControlSink() = default;
  virtual bool take(rte_mbuf* m) noexcept = 0;
};

class Endpoint {
 public:
  static constexpr uint32_t kTxCapacity = 512;

  // `port` may be null (protocol tests): frames then stay in the TX buffer for inspection.
  Endpoint(Port* port, uint16_t queue, rte_mempool* pool, MrTable* mrs, uint32_t max_qps);

  Port* port() const noexcept { return port_; }
  uint16_t queue() const noexcept { return queue_; }
  rte_mempool* pool() const noexcept { return pool_; }
  MrTable& mrs() const noexcept { return *mrs_; }
  uint32_t max_qps() const noexcept { return max_qps_; }
  Qp* qp(uint32_t qpn) const noexcept { return qpn < max_qps_ ? qps_[qpn] : nullptr; }
  void set_control_sink(ControlSink* s) noexcept { control_ = s; }
  // An adapter over several engines: the adapter's steering (queue() is this endpoint's engine
  // index in it); null with one engine. Set before the endpoint is added to its engine.
  void set_steering(Steering* s) noexcept { steering_ = s; }
  Steering* steering() const noexcept { return steering_; }
  ControlSink* control_sink() const noexcept { return control_; }
  // Frames the control plane transmits (ARP, ND, QP1 MADs): any thread may push, the engine
  // moves them into its TX buffer. False when full (the caller frees the mbuf).
  bool control_send(rte_mbuf* m) noexcept { return control_tx_.push(m); }
  // Engine side: moves queued control frames into the TX buffer; returns how many.
  uint32_t drain_control_tx_lc() noexcept;
  bool control_tx_pending() const noexcept { return control_tx_.maybe_nonempty(); }

  // ---- engine-owned --------------------------------------------------------------------------
  void set_qp_lc(uint32_t qpn, Qp* qp) noexcept { qps_[qpn] = qp; }
  // TX buffer: frames built this step, flushed by the engine (or read by a protocol test).
  // With a TX fault injector installed, room is kept for the duplicates and held-back frames
  // it may add.
  uint32_t tx_space() const noexcept {
    const uint32_t reserve = (kTesting && tx_fault_ != nullptr) ? FaultInjector::kMaxHeld + 2 : 0;
    return tx_count_ + reserve >= kTxCapacity ? 0 : kTxCapacity - tx_count_ - reserve;
  }
  void tx_append(rte_mbuf* m) noexcept {
    if constexpr (kTesting) {
      if (tx_fault_ != nullptr) [[unlikely]] {
        tx_append_faulty(m);
        return;
      }
    }
    tx_[tx_count_++] = m;
  }
  // Test hooks (URNIC_TESTING): fault injectors for each direction; null = none. Set while the
  // engine is not running.
  void set_faults(FaultInjector* rx, FaultInjector* tx) noexcept {
    rx_fault_ = rx;
    tx_fault_ = tx;
  }
  FaultInjector* rx_fault() const noexcept { return rx_fault_; }
  FaultInjector* tx_fault() const noexcept { return tx_fault_; }
  void tx_append_faulty(rte_mbuf* m) noexcept;
  // Appends without passing the fault injector (frames it already released).
  void tx_raw_append(rte_mbuf* m) noexcept { tx_[tx_count_++] = m; }
  uint32_t tx_count() const noexcept { return tx_count_; }
  rte_mbuf* tx_at(uint32_t i) const noexcept { return tx_[i]; }
  // Removes the first n frames (sent, or taken by a test).
  void tx_consume(uint32_t n) noexcept;
  // Frames to self (Port::loopback): moved out of the TX buffer by the flush, delivered by the
  // next receive phase.
  uint32_t loop_take_lc() noexcept;
  uint32_t loop_count() const noexcept { return loop_count_; }
  rte_mbuf* loop_at(uint32_t i) const noexcept { return loop_[i]; }
  void loop_clear() noexcept { loop_count_ = 0; }
  // Frees everything still buffered (teardown, tests).
  void tx_drop_all() noexcept;
  EngineCounters& counters() noexcept { return counters_; }
  // Selective repeat (reorder.h): frames the QPs of this endpoint hold out of order. They stay
  // out of the mempool they came from, so at most a quarter of it may be held: the rest keeps
  // the port receiving (and the holes being filled) whatever the held frames wait for.
  bool reorder_acquire() noexcept {
    if (reorder_held_ >= reorder_cap_) return false;
    ++reorder_held_;
    return true;
  }
  void reorder_release() noexcept { --reorder_held_; }
  uint32_t reorder_held() const noexcept { return reorder_held_; }

 private:
  Port* port_;
  uint16_t queue_;
  rte_mempool* pool_;
  MrTable* mrs_;
  uint32_t max_qps_;
  std::unique_ptr<Qp*[]> qps_;
  ControlSink* control_ = nullptr;
  Steering* steering_ = nullptr;
  MpscPtrRing<rte_mbuf> control_tx_{1024};
  FaultInjector* rx_fault_ = nullptr;
  FaultInjector* tx_fault_ = nullptr;
  std::array<rte_mbuf*, kTxCapacity> tx_{};
  uint32_t tx_count_ = 0;
  std::array<rte_mbuf*, kTxCapacity> loop_{};
  uint32_t loop_count_ = 0;
  uint32_t reorder_held_ = 0;
  uint32_t reorder_cap_;
  EngineCounters counters_;
};

}  // namespace urnic::dp

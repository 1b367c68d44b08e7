// The dataplane engine: one per lcore, polling its port queues and running the RC stages
// (architecture.md §2; house style rules 5, 6).
//
// run_once() runs the phases in a fixed order, each returning whether it did work:
//   1. mailbox   control messages (QP added / modified / destroyed) take effect here, at a
//                well-defined point between packet bursts;
//   2. rx        rx burst, parse + ICRC + QP lookup, then dispatch on the opcode table: requests
//                to the responder, responses to the completer (3. runs inline per packet);
//   4. timers    local ACK timeouts and RNR waits of the QPs with armed timers;
//   5. tx build  responder output (READ responses, ACKs, NAKs) first, then requesters segment
//                their send queues, within the free space of the TX buffer;
//   6. tx flush  one rte_eth_tx_burst per endpoint; what did not fit waits for the next step.
// Responder output goes before new requests so that a loopback pair drains rather than fills.
//
// Several adapters may share one engine: each adapter's port queue is an Endpoint with its own
// QP table and MR table.
#pragma once

#include <rte_mbuf.h>
#include <rte_mempool.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>

#include "dataplane/fault.h"
#include "dataplane/mailbox.h"
#include "dataplane/qp.h"
#include "dataplane/wire/frame.h"
#include "urnic/config.h"
#include "urnic/engine.h"

namespace urnic::dp {

class Port;
class MrTable;

// Why the engine dropped a received frame (house style rule 22).
// The per-port-queue counters are the public PortCounters (urnic/counters.h).
using ::urnic::RxDrop;
using EngineCounters = PortCounters;
static_assert(kParseErrorCount == static_cast<size_t>(wire::ParseError::kCount));

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
  // Frees everything still buffered (teardown, tests).
  void tx_drop_all() noexcept;
  EngineCounters& counters() noexcept { return counters_; }

 private:
  Port* port_;
  uint16_t queue_;
  rte_mempool* pool_;
  MrTable* mrs_;
  uint32_t max_qps_;
  std::unique_ptr<Qp*[]> qps_;
  ControlSink* control_ = nullptr;
  MpscPtrRing<rte_mbuf> control_tx_{1024};
  FaultInjector* rx_fault_ = nullptr;
  FaultInjector* tx_fault_ = nullptr;
  std::array<rte_mbuf*, kTxCapacity> tx_{};
  uint32_t tx_count_ = 0;
  EngineCounters counters_;
};

// A control-plane request applied by the engine between bursts.
struct MailboxMsg {
  // kRemoveEndpoint: the engine stops serving `ep` (its adapter is closing; no QP of it left).
  // kSetFaults: `ep` uses the injectors `rx_fault` / `tx_fault` (null: none) from its next
  // burst; frames the old ones held back are freed (a reorder turns into a loss).
  enum class Kind : uint8_t {
    kAddQp,
    kModifyQp,
    kDestroyQp,
    kFlushQp,
    kRemoveEndpoint,
    kSetFaults
  };
  Kind kind = Kind::kAddQp;
  Endpoint* ep = nullptr;
  Qp* qp = nullptr;
  QpAttr attr{};
  uint32_t mask = 0;
  FaultInjector* rx_fault = nullptr;
  FaultInjector* tx_fault = nullptr;
  Status result = Status::kPending;
  std::atomic<bool> done{false};
};

// The engine's configuration is the public one (urnic/engine.h).
using EngineConfig = ::urnic::EngineConfig;

class Engine {
 public:
  explicit Engine(const EngineConfig& cfg = {});
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Control side, before launch() only.
  void add_endpoint(Endpoint* ep);

  // Control side: applies `m` on the engine's lcore and waits for it (or applies it inline when
  // the engine is not running on an lcore: then the caller is the engine's only thread).
  Status call(MailboxMsg& m) noexcept;
  // Control side, non-blocking: queues `m` (which the caller keeps alive until m.done reads
  // true with acquire, then reads m.result). The engine applies it at the top of its next step,
  // whether it runs on an lcore or is driven with run_once(). False when the mailbox is full.
  bool submit(MailboxMsg& m) noexcept;

  // One loop step. Only the engine's owner thread calls it. Returns whether any work was done.
  bool run_once() noexcept;
  // The same step at TSC `now` instead of the current TSC: tests drive the timers (ACK timeout,
  // RNR wait) with a synthetic clock, so timer paths are deterministic. `now` must never go
  // backwards, and must not start below a TSC an earlier step used.
  bool run_once(uint64_t now) noexcept;

  // Validates one received frame and hands it to its QP's responder or completer (the body of
  // the rx phase). Takes ownership of `m`. Public so that protocol tests can feed synthetic
  // frames to the stages without a port.
  void deliver_lc(Endpoint& ep, rte_mbuf* m, uint64_t now) noexcept;

  // Launches the polling loop on DPDK lcore `lcore` (control side). Returns false if the lcore
  // is not available.
  bool launch(unsigned lcore);
  // Stops the loop and waits for the lcore to return. Idempotent.
  void stop();
  bool running() const noexcept { return running_.load(std::memory_order_acquire); }

  const EngineConfig& config() const noexcept { return cfg_; }
  uint32_t endpoints() const noexcept { return nep_; }
  // QPs the engine serves, over all endpoints (owner thread, or a stopped engine).
  uint32_t active_qps() const noexcept { return nactive_; }
  Endpoint* endpoint(uint32_t i) const noexcept { return eps_[i]; }

 private:
  static int lcore_main(void* arg);
  bool phase_mailbox() noexcept;
  bool phase_rx(Endpoint& ep, uint64_t now) noexcept;
  bool phase_timers(uint64_t now) noexcept;
  bool phase_tx_build(uint64_t now) noexcept;
  bool phase_tx_flush(Endpoint& ep) noexcept;
  void apply(MailboxMsg& m) noexcept;

  EngineConfig cfg_;
  static constexpr uint32_t kMaxEndpoints = 8;
  std::array<Endpoint*, kMaxEndpoints> eps_{};
  uint32_t nep_ = 0;
  // QPs owned by this engine, for the timer and tx phases.
  std::unique_ptr<Qp*[]> active_;
  std::unique_ptr<Endpoint*[]> active_ep_;
  uint32_t nactive_ = 0;
  MpscPtrRing<MailboxMsg> mailbox_{64};
  uint64_t last_step_tsc_ = 0;  // TSC of the previous timer phase (stall detection)
  bool rx_backlog_ = false;     // an RX burst this step came back full
  std::atomic<bool> stop_{false};
  std::atomic<bool> running_{false};
  unsigned lcore_ = 0;
};

}  // namespace urnic::dp

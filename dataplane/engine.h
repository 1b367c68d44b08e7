// The dataplane engine: one per lcore, polling its port queues and running the RC stages
// (architecture.md §2; house style rules 5, 6).
//
// run_once() runs the phases in a fixed order, each returning whether it did work:
//   1. mailbox   control messages (QP added / modified / destroyed) take effect here, at a
//                well-defined point between packet bursts;
//   2. rx        rx burst, parse + ICRC + QP lookup, then dispatch on the opcode table: requests
//                to the responder, responses to the completer (3. runs inline per packet);
//   4. timers    local ACK timeouts and RNR waits of the QPs with armed timers;
//   5. tx build  for each QP on the ready list (dataplane/sched.h): responder output (READ
//                responses, ACKs, NAKs) first, then the requester segments its send queue,
//                within the free space of the TX buffer;
//   6. tx flush  one rte_eth_tx_burst per endpoint; what did not fit waits for the next step.
// Responder output goes before new requests so that a loopback pair drains rather than fills.
//
// Several adapters may share one engine: each adapter's port queue is an Endpoint with its own
// QP table and MR table.
#pragma once

#include <rte_mbuf.h>
#include <rte_mempool.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <memory>

#include "dataplane/endpoint.h"
#include "dataplane/mailbox.h"
#include "dataplane/qp.h"
#include "dataplane/sched.h"
#include "urnic/config.h"
#include "urnic/engine.h"

namespace urnic::dp {

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
    kSetFaults,
    kResizeCq,     // `cq` writes to the ring its prepare_resize() made from now on
    kAddEndpoint,  // the engine serves `ep` from now on
    // The QP's frames go to attr.av.dst_mac from now on: the next hop to its peer changed (the
    // kernel's route or neighbour, control/kernel_net.h). Not an IBTA attribute change (the
    // path is the same peer), so it passes no state table: the NIC's own route resolution.
    kSetNextHop
  };
  Kind kind = Kind::kAddQp;
  Endpoint* ep = nullptr;
  Qp* qp = nullptr;
  QpAttr attr{};
  uint32_t mask = 0;
  FaultInjector* rx_fault = nullptr;
  FaultInjector* tx_fault = nullptr;
  Cq* cq = nullptr;
  // kModifyQp setting max_dest_rd_atomic: the responder's arrays for it, made by call() / submit()
  // on the control side; the old ones come back in it and are freed with the message.
  RespArrays resp;
  Status result = Status::kPending;
  std::atomic<bool> done{false};
};

// The engine's configuration is the public one (urnic/engine.h).
using EngineConfig = ::urnic::EngineConfig;

class Engine {
 public:
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;
  explicit Engine(const EngineConfig& cfg = {});
  ~Engine();

  // Control side: the engine serves `ep` from its next step (through the mailbox, so while it
  // runs too: adapters open while their engine runs, issue 14 item 6). kInsufficientResources
  // when it serves kMaxEndpoints already.
  Status add_endpoint(Endpoint* ep) noexcept;

  // Control side: applies `m` on the engine's lcore and waits for it, or, when the engine is not
  // launched, applies it in the calling thread between two steps of the thread(s) driving it.
  Status call(MailboxMsg& m) noexcept;
  // Control side, non-blocking: queues `m` (which the caller keeps alive until m.done reads
  // true with acquire, then reads m.result). The engine applies it at the top of its next step,
  // whether it runs on an lcore or is driven with run_once(). False when the mailbox is full.
  bool submit(MailboxMsg& m) noexcept;

  // One loop step, while the engine is not launched. Returns whether any work was done; false
  // at once, without a step, while another thread is inside one (shared drive) or applies a
  // control message (call()).
  bool run_once() noexcept;
  // The same step at TSC `now` instead of the current TSC: tests drive the timers (ACK timeout,
  // RNR wait) with a synthetic clock, so timer paths are deterministic. `now` must never go
  // backwards, and must not start below a TSC an earlier step used.
  bool run_once(uint64_t now) noexcept;
  // An idle driver's nap (EngineConfig::idle_sleep_us, urnicd's lcore loop): sleeps up to
  // `max_us`, but never past the next timer's deadline, and tells the stall detection of the
  // timer phase that the gap was deliberate (a nap longer than its 200 us would otherwise move
  // every deadline out at each step, and a QP waiting for its ACK timeout would wait forever).
  // Returns at once while another thread is inside a step.
  // With `wake_fd` (an eventfd) >= 0 the nap also ends when the fd becomes readable (drained
  // then); returns whether it did.
  bool nap(uint32_t max_us, int wake_fd = -1) noexcept;

  // Validates one received frame and hands it to its QP's responder or completer (the body of
  // the rx phase). Takes ownership of `m`. Public so that protocol tests can feed synthetic
  // frames to the stages without a port.
  void deliver_lc(Endpoint& ep, rte_mbuf* m, uint64_t now) noexcept;
  void deliver_datagram_lc(Endpoint& ep, const wire::ParsedFrame& f, rte_mbuf* m) noexcept;

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
  // nap()'s body, also the launched loop's (which steps without the driving flag).
  bool nap_launched(uint32_t max_us, int wake_fd = -1) noexcept;
  bool step(uint64_t now) noexcept;  // the phases; run_once() and the launched loop call it
  bool phase_mailbox() noexcept;
  bool phase_rx(Endpoint& ep, uint64_t now) noexcept;
  // deliver_lc's body; `steer` false for a frame another engine handed over (never again).
  void deliver_frame_lc(Endpoint& ep, rte_mbuf* m, uint64_t now, bool steer) noexcept;
  bool drain_handoffs_lc(Endpoint& ep, uint64_t now) noexcept;
  bool phase_timers(uint64_t now) noexcept;
  bool phase_tx_build(uint64_t now) noexcept;
  bool phase_tx_flush(Endpoint& ep) noexcept;
  void apply(MailboxMsg& m) noexcept;

  EngineConfig cfg_;
  std::atomic<bool> driving_{false};  // a thread is inside run_once() or call()'s apply
  static constexpr uint32_t kMaxEndpoints = 8;
  std::array<Endpoint*, kMaxEndpoints> eps_{};
  uint32_t nep_ = 0;
  // QPs owned by this engine (dataplane/sched.h): how many, those with work (the tx phase walks
  // only these), those with a timer armed (the timer phase), and the doorbells of posts to idle
  // ones (twice the QPs: never full).
  uint32_t nactive_ = 0;
  ReadyList ready_;
  TimerList timed_;
  MpscPtrRing<Qp*> doorbell_;
  // The QPs' slots (QpLc::Doorbell::slot): a QP's entry from kAddQp to kDestroyQp, and the free
  // ones (a stack).
  std::unique_ptr<Qp*[]> slots_;
  std::unique_ptr<uint32_t[]> free_slots_;
  uint32_t nfree_ = 0;
  void drain_doorbells_lc() noexcept;
  // After a visit or a frame: `qp` joins the timer list if it has a timer armed, and the
  // earliest deadline moves up to its own.
  void watch_timers_lc(Qp& qp) noexcept {
    if (!qp_timer_armed_lc(qp)) return;
    timed_.push_back(qp);
    const uint64_t d = qp_next_deadline_lc(qp);
    if (d < timers_due_) timers_due_ = d;
  }
  uint64_t timers_due_ = UINT64_MAX;  // no deadline on the timer list is earlier (TSC)
  void ready_overrun_lc() noexcept;
  uint32_t overruns_seen_ = 0;  // Cq::overruns() when last looked at
  void unlink_endpoint_lc(Endpoint& ep) noexcept;
  bool visit_lc(Qp& qp, uint64_t now) noexcept;
  MpscPtrRing<MailboxMsg> mailbox_{64};
  uint64_t last_step_tsc_ = 0;  // TSC of the previous timer phase (stall detection)
  bool rx_backlog_ = false;     // an RX burst this step came back full
  std::atomic<bool> stop_{false};
  std::atomic<bool> running_{false};
  unsigned lcore_ = 0;
};

}  // namespace urnic::dp

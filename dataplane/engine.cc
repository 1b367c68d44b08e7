// Engine loop, mailbox, timers and TX (architecture.md §2). RX demux is in rx_demux.cc.
#include "dataplane/engine.h"

#include <poll.h>
#include <rte_cycles.h>
#include <unistd.h>

#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_pause.h>
#include <ctime>

#include <algorithm>
#include <thread>

#include "dataplane/internal.h"
#include "dataplane/port.h"
#include "dataplane/reorder.h"

namespace urnic::dp {

namespace {
// The doorbell ring's size: a power of two of at least twice the QPs (a QP is queued at most
// twice between two drains: phase_tx_build), and room for the entries of QPs already gone that
// a push in progress still hides (one per posting thread).
size_t doorbell_cells(uint32_t max_qps) noexcept {
  size_t n = 64;
  while (n < 2 * size_t{max_qps} + 256) n <<= 1;
  return n;
}
}  // namespace

Engine::Engine(const EngineConfig& cfg)
    : cfg_(cfg),
      doorbell_(doorbell_cells(cfg.max_qps)),
      slots_(std::make_unique<Qp*[]>(cfg.max_qps)),
      free_slots_(std::make_unique<uint32_t[]>(cfg.max_qps)),
      overruns_seen_(Cq::overruns()) {
  for (uint32_t i = 0; i < cfg.max_qps; ++i) free_slots_[nfree_++] = cfg.max_qps - 1 - i;
}

Engine::~Engine() { stop(); }

Status Engine::add_endpoint(Endpoint* ep) noexcept {
  MailboxMsg m;
  m.kind = MailboxMsg::Kind::kAddEndpoint;
  m.ep = ep;
  return call(m);
}

namespace {
// Control side, before a message goes to the engine: what it needs allocated (the engine never
// allocates). False when memory cannot be had.
bool prepare(MailboxMsg& m) noexcept {
  if (m.kind != MailboxMsg::Kind::kModifyQp || !(m.mask & qp_attr::kMaxDestRdAtomic) ||
      m.attr.max_dest_rd_atomic == 0 || m.attr.max_dest_rd_atomic > kMaxRdAtomicLimit)
    return true;  // nothing to allocate, or out of range (validate_modify rejects it)
  return m.resp.make(m.attr.max_dest_rd_atomic);
}
}  // namespace

Status Engine::call(MailboxMsg& m) noexcept {
  m.done.store(false, std::memory_order_relaxed);
  if (!prepare(m)) return Status::kInsufficientResources;
  if (!running()) {
    // No lcore runs this engine: apply in this thread, between two steps of whichever thread
    // drives it (run_once() holds the step flag for the length of a step). So the control
    // thread's requests work with an engine one application thread drives with run_once().
    while (driving_.exchange(true, std::memory_order_acquire)) std::this_thread::yield();
    apply(m);
    driving_.store(false, std::memory_order_release);
    return m.result;
  }
  while (!mailbox_.push(&m)) std::this_thread::yield();
  // Control side wait: the engine applies the message at the top of its next step and
  // publishes the result with a release store (pairs with this acquire load).
  while (!m.done.load(std::memory_order_acquire)) std::this_thread::yield();
  return m.result;
}

bool Engine::submit(MailboxMsg& m) noexcept {
  m.done.store(false, std::memory_order_relaxed);
  if (!prepare(m)) {
    // Answered here: the submitter reads the result once `done` is true, as for the engine's.
    m.result = Status::kInsufficientResources;
    m.done.store(true, std::memory_order_release);
    return true;
  }
  // The push publishes the message (release in MpscPtrRing::push); the engine's apply() ends
  // with the release store of `done` that the submitter's acquire load pairs with.
  return mailbox_.push(&m);
}

void Engine::apply(MailboxMsg& m) noexcept {
  Status st = Status::kSuccess;
  switch (m.kind) {
    case MailboxMsg::Kind::kAddQp:
      if (m.qp->qpn() >= m.ep->max_qps() || m.ep->qp(m.qp->qpn()) != nullptr || nfree_ == 0) {
        st = Status::kInsufficientResources;
        break;
      }
      m.ep->set_qp_lc(m.qp->qpn(), m.qp);
      lc(*m.qp).ep = m.ep;
      lc(*m.qp).db_.ring = &doorbell_;
      lc(*m.qp).db_.slot = &slots_[free_slots_[--nfree_]];
      *lc(*m.qp).db_.slot = m.qp;
      ++nactive_;
      break;
    case MailboxMsg::Kind::kModifyQp:
      st = qp_modify_lc(*m.ep, *m.qp, m.attr, m.mask, &m.resp);
      break;
    case MailboxMsg::Kind::kSetNextHop:
      qp_set_next_hop_lc(*m.qp, m.attr.av.dst_mac);
      break;
    case MailboxMsg::Kind::kFlushQp:
      // NdkFlush: cancel every pending request (ndkpi.md §2.2); the QP is unusable after.
      qp_to_error_lc(*m.ep, *m.qp);
      break;
    case MailboxMsg::Kind::kDestroyQp:
      // Off the lists, and its slot emptied: a doorbell entry that still names the slot finds
      // nothing (QpLc::Doorbell), so nothing refers to the QP once the control side frees it.
      ready_.remove(*m.qp);
      timed_.remove(*m.qp);
      if (lc(*m.qp).ep != nullptr) {
        lc(*m.qp).ep = nullptr;
        // Rung for good: a post to the inert handle (it may outlive the adapter and the engine,
        // ndkpi.md §7.4) touches nothing of the engine's.
        lc(*m.qp).db_.rung.store(true, std::memory_order_relaxed);
        *lc(*m.qp).db_.slot = nullptr;
        free_slots_[nfree_++] = static_cast<uint32_t>(lc(*m.qp).db_.slot - slots_.get());
        --nactive_;
      }
      m.ep->set_qp_lc(m.qp->qpn(), nullptr);
      // Frames it held go back to their pools from this lcore.
      reorder_clear_lc(*m.ep, lc(*m.qp).resp.held);
      reorder_clear_lc(*m.ep, lc(*m.qp).req.held);
      break;
    case MailboxMsg::Kind::kSetFaults:
      // On the engine's lcore: held frames go back to their pools from the thread that owns
      // the mempool cache.
      for (FaultInjector* f : {m.ep->rx_fault(), m.ep->tx_fault()})
        if (f != nullptr) f->clear();
      m.ep->set_faults(m.rx_fault, m.tx_fault);
      break;
    case MailboxMsg::Kind::kResizeCq:
      // Between two steps: no completion is half written (dataplane/cq.h, Resize).
      m.cq->switch_ring_lc();
      break;
    case MailboxMsg::Kind::kAddEndpoint:
      if (nep_ == kMaxEndpoints) {
        st = Status::kInsufficientResources;
        break;
      }
      eps_[nep_++] = m.ep;
      break;
    case MailboxMsg::Kind::kRemoveEndpoint:
      // No QP of it should be left (each was destroyed through the mailbox); should one be, it
      // leaves the lists before its memory can go.
      unlink_endpoint_lc(*m.ep);
      for (uint32_t i = 0; i < nep_; ++i) {
        if (eps_[i] == m.ep) {
          for (uint32_t j = i + 1; j < nep_; ++j) eps_[j - 1] = eps_[j];
          eps_[--nep_] = nullptr;
          break;
        }
      }
      break;
  }
  // Whatever the message did to a QP (added, modified, flushed) may give it work to do.
  if (st == Status::kSuccess && m.qp != nullptr && m.kind != MailboxMsg::Kind::kDestroyQp &&
      lc(*m.qp).ep != nullptr)
    ready_.push_back(*m.qp);
  m.result = st;
  m.done.store(true, std::memory_order_release);  // pairs with call()'s acquire
}

void Engine::unlink_endpoint_lc(Endpoint& ep) noexcept {
  auto of_ep = [&ep](Qp& q) { return lc(q).ep == &ep; };
  ready_.remove_if(of_ep);
  timed_.remove_if(of_ep);
}

void Engine::ready_overrun_lc() noexcept {
  // A CQ overran (somewhere in the process): every QP completing into it dies before it does
  // anything more (ndkpi.md §3.3), the idle ones too, so each of them gets a turn. Once per
  // overrun, over the QP tables: the rare path, not a per-step cost.
  for (uint32_t i = 0; i < nep_; ++i) {
    for (uint32_t qpn = 0; qpn < eps_[i]->max_qps(); ++qpn) {
      Qp* q = eps_[i]->qp(qpn);
      if (q != nullptr && lc(*q).state != QpState::kErr && qp_cq_overrun(*q)) ready_.push_back(*q);
    }
  }
}

void Engine::drain_doorbells_lc() noexcept {
  // The doorbell flag stays set while the QP is on the ready list: posts then ring nothing.
  while (Qp** slot = doorbell_.pop())
    if (*slot != nullptr) ready_.push_back(**slot);
}

bool Engine::phase_mailbox() noexcept {
  if (!mailbox_.maybe_nonempty()) [[likely]]
    return false;
  bool any = false;
  while (MailboxMsg* m = mailbox_.pop()) {
    apply(*m);
    any = true;
  }
  return any;
}

bool Engine::phase_timers(uint64_t now) noexcept {
  // A timer that expires while the engine itself was not running says nothing about the peer:
  // its answers may be sitting unread in our RX queue. So (1) while an RX queue still has a
  // backlog (the last burst came back full) no timer fires, and (2) when the engine was stalled
  // (descheduled, or a long step) for more than kStallNs, every deadline moves out by the stall.
  // Without this, a loaded machine turns scheduling delays into transport retries and, in the
  // end, RETRY_EXC_ERR on a healthy link.
  constexpr uint64_t kStallNs = 200'000;
  const uint64_t gap = last_step_tsc_ != 0 ? now - last_step_tsc_ : 0;
  last_step_tsc_ = now;
  const bool stalled = gap > tsc_from_ns(kStallNs);
  // Nothing due yet, and nothing to shift: the list is not walked (dataplane/sched.h).
  if (!stalled && (rx_backlog_ || now < timers_due_)) [[likely]]
    return false;
  bool any = false;
  uint64_t due = UINT64_MAX;
  Qp* next = nullptr;
  for (Qp* q = timed_.front(); q != nullptr; q = next) {
    next = TimerList::next(*q);
    Qp& qp = *q;
    if (!qp_timer_armed_lc(qp)) {
      timed_.remove(qp);
      continue;
    }
    if (stalled) [[unlikely]] {
      if (lc(qp).req.ack_deadline != 0) lc(qp).req.ack_deadline += gap;
      if (lc(qp).req.rnr_deadline != 0) lc(qp).req.rnr_deadline += gap;
      if (lc(qp).req.probe_deadline != 0) lc(qp).req.probe_deadline += gap;
    } else if (requester_timers_lc(*lc(qp).ep, qp, now)) {
      any = true;
      ready_.push_back(qp);  // it resends, or it failed and flushes
    }
    if (qp_timer_armed_lc(qp)) due = std::min(due, qp_next_deadline_lc(qp));
  }
  timers_due_ = due;
  return any;
}

// One QP's turn in the tx phase. Returns whether it did any work.
bool Engine::visit_lc(Qp& qp, uint64_t now) noexcept {
  Endpoint& ep = *lc(qp).ep;
  // A CQ of this QP overran (maybe through another QP): the QP is dead before it sends
  // anything more (ndkpi.md §3.3). RESET processes nothing, so it is left alone.
  if (lc(qp).state != QpState::kErr && lc(qp).state != QpState::kReset && qp_cq_overrun(qp))
      [[unlikely]]
    qp_cq_overrun_error_lc(ep, qp);
  if (lc(qp).state == QpState::kErr) [[unlikely]] {
    // Work posted to a QP in ERR completes with a flush status (IBTA §10.3.1).
    if (qp_posted_work_lc(qp)) {
      qp_to_error_lc(ep, qp);
      return true;
    }
    return false;
  }
  // Responder output first (READ responses, ACKs): it completes the peer's work and frees
  // its window, so a loopback pair drains before it fills.
  if (qp.config().ud) [[unlikely]]
    return ep.tx_space() != 0 && datagram_tx_lc(ep, qp, ep.tx_space()) != 0;
  bool any = false;
  if (ep.tx_space() != 0) any |= responder_tx_lc(ep, qp, ep.tx_space(), now) != 0;
  if (ep.tx_space() != 0) any |= requester_tx_lc(ep, qp, ep.tx_space(), now) != 0;
  any |= qp_retire_lc(ep, qp) != 0;
  return any;
}

bool Engine::phase_tx_build(uint64_t now) noexcept {
  bool any = false;
  for (uint32_t i = 0; i < nep_; ++i) {
    if (eps_[i]->control_tx_pending()) [[unlikely]]
      any |= eps_[i]->drain_control_tx_lc() != 0;
  }
  drain_doorbells_lc();
  if (const uint32_t o = Cq::overruns(); o != overruns_seen_) [[unlikely]] {
    overruns_seen_ = o;
    ready_overrun_lc();
  }
  // Each QP that was ready when the phase began gets one turn, in order; one with work left
  // goes to the back, so QPs share a full TX buffer round-robin. While the port is the
  // bottleneck (TX buffer full), a visit that could do nothing for want of space is wasted: after
  // kMaxBlockedVisits of them the step ends its phase, and the QPs not yet visited keep their
  // place at the front for the next step. So a step costs what its frames cost, not one visit per
  // ready QP (with 16 384 QPs each waiting to send, the visits alone took a step ~1.5 ms for 64
  // frames). Visits that did work (ACKs retired, an ERR QP flushed) never count: nothing waits
  // behind an endless run of blocked ones.
  constexpr uint32_t kMaxBlockedVisits = 64;
  uint32_t blocked = 0;
  for (uint32_t n = ready_.size(); n != 0; --n) {
    Qp& qp = *ready_.pop_front();
    const bool did = visit_lc(qp, now);
    any |= did;
    watch_timers_lc(qp);
    if (did || qp_tx_pending_lc(qp)) {
      ready_.push_back(qp);
      if (!did && lc(qp).ep->tx_space() == 0 && ++blocked == kMaxBlockedVisits) [[unlikely]]
        break;
      continue;
    }
    // Idle: clear the doorbell, then look at the rings once more. A post that published before
    // the clear is seen here; one after it finds the flag clear and rings (Qp::ring_doorbell).
    // So the QP can be queued again before the next drain, at most once more: the ring holds
    // twice the QPs.
    lc(qp).db_.rung.store(false, std::memory_order_seq_cst);
    if (qp_posted_work_lc(qp)) ready_.push_back(qp);
  }
  return any;
}

bool Engine::phase_tx_flush(Endpoint& ep) noexcept {
  if constexpr (kTesting) {
    // A reordered frame is released once the direction goes idle, so a reorder never turns
    // into a loss; a delayed one when its time has come.
    if (ep.tx_fault() != nullptr && ep.tx_count() == 0 && ep.tx_fault()->holding()) [[unlikely]] {
      rte_mbuf* out[FaultInjector::kMaxHeld];
      const uint16_t k = ep.tx_fault()->flush(out, FaultInjector::kMaxHeld, rte_rdtsc());
      for (uint16_t i = 0; i < k; ++i) ep.tx_raw_append(out[i]);
    }
  }
  if (ep.port() == nullptr) return false;
  // Frames to the adapter's own addresses stay here (Port::loopback; the next receive phase
  // delivers them). One relaxed load per flush when no QP ever addressed its own adapter.
  bool looped = false;
  if (ep.port()->loopback() && ep.tx_count() != 0) [[unlikely]]
    looped = ep.loop_take_lc() != 0;
  const uint32_t n = ep.tx_count();
  if (n == 0) {
    // Nothing to send: the one place where frames the kernel parked in an af_packet ring after
    // a drop get out without waiting for the next burst (tx_kick.h).
    if (ep.port()->tx_kick(ep.queue())) ++ep.counters().tx_kicks;
    return looped;
  }
  uint32_t sent = 0;
  while (sent < n) {
    const uint16_t chunk = static_cast<uint16_t>(n - sent > 64 ? 64 : n - sent);
    rte_mbuf* burst[64];
    for (uint16_t i = 0; i < chunk; ++i) burst[i] = ep.tx_at(sent + i);
    const uint16_t k = ep.port()->tx_burst(ep.queue(), burst, chunk);
    sent += k;
    if (k < chunk) {
      ++ep.counters().tx_ring_full;
      break;
    }
  }
  for (uint32_t i = 0; i < sent; ++i) {
    ep.counters().tx_bytes += rte_pktmbuf_pkt_len(ep.tx_at(i));
  }
  ep.counters().tx_packets += sent;
  ep.tx_consume(sent);
  return sent != 0 || looped;
}

bool Engine::run_once() noexcept { return run_once(rte_get_tsc_cycles()); }

bool Engine::run_once(uint64_t now) noexcept {
  // A step driven by application threads (not launched) takes the step flag, whose acquire /
  // release orders every access of one step before the next: with shared drive several threads
  // step the engine; in every case the control thread may apply a mailbox message between two
  // steps (call(): the connection manager's QP transitions, issue 14 item 6). The launched
  // loop steps without it (lcore_main): call() never applies inline while it runs.
  if (driving_.exchange(true, std::memory_order_acquire)) return false;
  const bool busy = step(now);
  driving_.store(false, std::memory_order_release);
  return busy;
}

bool Engine::nap(uint32_t max_us, int wake_fd) noexcept {
  if (driving_.exchange(true, std::memory_order_acquire)) return false;
  const bool woken = nap_launched(max_us, wake_fd);
  driving_.store(false, std::memory_order_release);
  return woken;
}

bool Engine::nap_launched(uint32_t max_us, int wake_fd) noexcept {
  const uint64_t now = rte_get_tsc_cycles();
  uint64_t ticks = tsc_from_ns(uint64_t{max_us} * 1000);
  if (timers_due_ != UINT64_MAX) ticks = timers_due_ > now ? std::min(ticks, timers_due_ - now) : 0;
  if (ticks == 0) return false;
  const uint64_t ns = ticks * 1000000000ull / rte_get_tsc_hz() + 1;
  bool woken = false;
  if (wake_fd >= 0) {
    // Idle, not the hot path: a syscall to sleep is the point.
    pollfd p{wake_fd, POLLIN, 0};
    const timespec ts{static_cast<time_t>(ns / 1000000000ull),
                      static_cast<long>(ns % 1000000000ull)};
    if (::ppoll(&p, 1, &ts, nullptr) == 1) {
      uint64_t count = 0;
      woken = ::read(wake_fd, &count, sizeof count) == sizeof count;
    }
  } else {
    rte_delay_us_sleep(static_cast<unsigned>(ns / 1000) + 1);
  }
  // The nap is not a stall: the next timer phase measures its gap from after it.
  if (last_step_tsc_ != 0) last_step_tsc_ += rte_get_tsc_cycles() - now;
  return woken;
}

bool Engine::step(uint64_t now) noexcept {
  bool busy = phase_mailbox();
  rx_backlog_ = false;
  for (uint32_t i = 0; i < nep_; ++i) busy |= phase_rx(*eps_[i], now);
  busy |= phase_timers(now);
  busy |= phase_tx_build(now);
  for (uint32_t i = 0; i < nep_; ++i) busy |= phase_tx_flush(*eps_[i]);
  for (uint32_t i = 0; i < nep_; ++i) {
    ++eps_[i]->counters().steps;
    eps_[i]->counters().busy_steps += busy ? 1 : 0;
  }
  return busy;
}

int Engine::lcore_main(void* arg) {
  auto* e = static_cast<Engine*>(arg);
  uint32_t idle = 0;
  uint32_t wakes = Cq::wakes_written();
  // Idle sleep (EngineConfig::idle_sleep_us): the TSC of the first idle step of this quiet spell.
  const uint64_t sleep_after = rte_get_tsc_hz() / 1000000 * EngineConfig::kIdleSleepAfterUs;
  uint64_t quiet_since = 0;
  uint32_t nap_us = 16;  // doubles per nap up to idle_sleep_us, back to 16 on work
  while (!e->stop_.load(std::memory_order_relaxed)) {
    const uint64_t now = rte_get_tsc_cycles();
    if (e->step(now)) {
      idle = 0;
      quiet_since = 0;
      nap_us = 16;
    } else if (e->cfg_.idle_sleep_us != 0 &&
               (quiet_since == 0 ? (quiet_since = now, false) : now - quiet_since > sleep_after)) {
      // Not a hot path: nothing arrived and nothing was posted for kIdleSleepAfterUs.
      e->nap_launched(std::min(nap_us, e->cfg_.idle_sleep_us));
      nap_us = std::min(nap_us * 2, e->cfg_.idle_sleep_us);
    } else if (e->cfg_.idle_yield_after != 0 &&
               (++idle >= e->cfg_.idle_yield_after || wakes != Cq::wakes_written())) {
      // Shared-core mode only (config): give the CPU to application threads when idle. At the
      // first idle step after a CQ's eventfd was written, not after idle_yield_after of them:
      // a consumer woken on this CPU runs only when the loop yields, and 256 idle steps were
      // ~7 us of its send-to-wakeup latency (bench_notify, waiter on the engine's CPU; issue 16
      // item 3). Only idle steps look at it: no cost on a busy step.
      wakes = Cq::wakes_written();
      std::this_thread::yield();
      idle = 0;
    } else {
      rte_pause();
    }
  }
  // Pairs with the acquire load in stop(): see there.
  e->stop_.store(true, std::memory_order_release);
  return 0;
}

bool Engine::launch(unsigned lcore) {
  if (running()) return false;
  stop_.store(false, std::memory_order_relaxed);
  // running_ is set before the loop starts so that call() never applies a message inline while
  // the lcore may already be polling.
  running_.store(true, std::memory_order_release);
  if (rte_eal_remote_launch(&Engine::lcore_main, this, lcore) != 0) {
    running_.store(false, std::memory_order_release);
    return false;
  }
  lcore_ = lcore;
  return true;
}

void Engine::stop() {
  if (!running()) return;
  stop_.store(true, std::memory_order_relaxed);
  rte_eal_wait_lcore(lcore_);
  // rte_eal_wait_lcore() already orders the lcore's last step before everything the control
  // thread does next (the worker releases its lcore state, the wait acquires it), but inside
  // librte_eal, where ThreadSanitizer cannot see it. This acquire of the worker's final release
  // store of stop_ (lcore_main) states the same edge in our code, so that TSan checks teardown
  // (QP destruction after stop) against the engine's last step instead of reporting a race.
  (void)stop_.load(std::memory_order_acquire);
  running_.store(false, std::memory_order_release);
}

}  // namespace urnic::dp

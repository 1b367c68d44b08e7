// RX demux (architecture.md §2 phase 2; rxe_recv.c): validate each received frame and route it
// by the opcode table: requests to the responder, responses to the completer. Everything else is
// counted under a named reason and dropped (house style rules 21, 22); frames that are not
// RoCEv2 (ARP, IPv6 ND) go to the control plane's sink when one is installed.
#include <rte_cycles.h>

#include <cstring>

#include "dataplane/congestion.h"
#include "dataplane/engine.h"
#include "dataplane/internal.h"
#include "dataplane/port.h"
#include "dataplane/steering.h"
#include "dataplane/wire/icrc.h"

namespace urnic::dp {
namespace {

// The general services QP (IBTA §3.5.5): its MADs go to the control plane's connection manager.
constexpr uint32_t kGsiQpn = 1;

void drop(Endpoint& ep, rte_mbuf* m, RxDrop why) noexcept {
  ++ep.counters().rx_drops[static_cast<size_t>(why)];
  rte_pktmbuf_free(m);
}

// The frame must come from the QP's peer to the QP's own address (rxe check_addr(); IBTA
// A17.4.5: the IP addresses play the role of the GRH GIDs).
bool addresses_match(const Qp& qp, const wire::ParsedFrame& f) noexcept {
  const wire::NetHeaders& av = lc(qp).attr.av;
  if (f.l.ipv6 != av.ipv6) return false;
  if (av.ipv6) return f.ipv6().src == av.dst_ip6 && f.ipv6().dst == av.src_ip6;
  return f.ipv4().src.get() == av.dst_ip4 && f.ipv4().dst.get() == av.src_ip4;
}

// An adapter over several engines (dataplane/steering.h): a frame this endpoint's queue received
// for a QP that another engine owns goes to that engine's inbound ring, staged until the end of
// the burst (or, when the ring is full, dropped and counted). `to` is the owning engine's index.
void hand_off(Endpoint& ep, rte_mbuf* m, uint32_t to) noexcept {
  if (!ep.steering()->ring(ep.queue(), to).stage(m)) {
    drop(ep, m, RxDrop::kHandoffFull);
    return;
  }
  ++ep.counters().handoffs_out;
}

// Frames for the control plane (ARP, ND, QP1): its sink, which only engine 0's endpoint has; the
// other engines of the adapter hand them to engine 0. `why` when nobody takes them.
void to_control(Endpoint& ep, rte_mbuf* m, RxDrop why) noexcept {
  if (ep.control_sink() != nullptr) {
    if (ep.control_sink()->take(m)) return;
  } else if (ep.steering() != nullptr && ep.queue() != 0) {
    hand_off(ep, m, 0);
    return;
  }
  drop(ep, m, why);
}

}  // namespace

// Frames other engines of the adapter received for this endpoint's QPs: delivered as if this
// queue had received them (they were counted as received where they arrived).
bool Engine::drain_handoffs_lc(Endpoint& ep, uint64_t now) noexcept {
  Steering& st = *ep.steering();
  bool any = false;
  for (uint32_t from = 0; from < st.engines(); ++from) {
    if (from == ep.queue()) continue;
    rte_mbuf* burst[64];
    const size_t n = st.ring(from, ep.queue()).pop_burst(burst);
    ep.counters().handoffs_in += n;
    for (size_t i = 0; i < n; ++i) deliver_frame_lc(ep, burst[i], now, false);
    any |= n != 0;
  }
  return any;
}

bool Engine::phase_rx(Endpoint& ep, uint64_t now) noexcept {
  if (ep.port() == nullptr) return false;
  rte_mbuf* burst[64];
  uint16_t n = ep.port()->rx_burst(ep.queue(), burst,
                                   static_cast<uint16_t>(cfg_.rx_burst > 64 ? 64 : cfg_.rx_burst));
  const uint16_t received = n;  // before the fault injector adds or removes frames
  rte_mbuf** pkts = burst;
  if constexpr (kTesting) {
    // Faults on the receive side (docs/design.md, Fault injection): drops, duplicates,
    // corruption, reordering and delays of what the port delivered. A reordered frame is
    // released when the port goes quiet, so a reorder never turns into a loss; a delayed one
    // when its time has come.
    static_assert(2 * 64 + FaultInjector::kMaxHeld <= 0xFFFF);
    if (ep.rx_fault() != nullptr) [[unlikely]] {
      static thread_local rte_mbuf* faulty[2 * 64 + FaultInjector::kMaxHeld];
      constexpr uint16_t kCap = 2 * 64 + FaultInjector::kMaxHeld;
      n = n != 0                     ? ep.rx_fault()->apply(burst, n, faulty, kCap, ep.pool())
          : ep.rx_fault()->holding() ? ep.rx_fault()->flush(faulty, kCap, rte_rdtsc())
                                     : 0;
      pkts = faulty;
    }
  }
  for (uint16_t i = 0; i < n; ++i) {
    rte_mbuf* m = pkts[i];
    ++ep.counters().rx_packets;
    ep.counters().rx_bytes += rte_pktmbuf_pkt_len(m);
    if (m->nb_segs != 1) [[unlikely]] {
      // Frames are received into single mbufs sized for the largest RoCEv2 frame.
      drop(ep, m, RxDrop::kMalformed);
      continue;
    }
    deliver_frame_lc(ep, m, now, true);
  }
  // Frames this adapter sent to itself last step (Port::loopback), as if the port had received
  // them; a QP of another engine gets its frames through the hand-off like any other.
  if (const uint32_t k = ep.loop_count(); k != 0) [[unlikely]] {
    for (uint32_t i = 0; i < k; ++i) deliver_frame_lc(ep, ep.loop_at(i), now, true);
    ep.counters().looped_back += k;
    ep.loop_clear();
    n |= 1;
  }
  if (ep.steering() != nullptr) {
    ep.steering()->publish_from(ep.queue());
    n |= drain_handoffs_lc(ep, now) ? 1 : 0;
  }
  // A full burst means more may be waiting: timers hold off this step (phase_timers).
  if (received == (cfg_.rx_burst > 64 ? 64 : cfg_.rx_burst)) rx_backlog_ = true;
  return n != 0;
}

// A UD datagram: QP1's management datagrams belong to the control plane, the rest to a datagram
// QP (dataplane/datagram.cc). Datagrams have no connection, so the addresses are not checked
// against an address vector.
void Engine::deliver_datagram_lc(Endpoint& ep, const wire::ParsedFrame& f, rte_mbuf* m) noexcept {
  const uint32_t dqpn = wire::Bth::DestQp::get(f.bth());
  if (dqpn == kGsiQpn) {
    to_control(ep, m, RxDrop::kUnsupported);
    return;
  }
  Qp* qp = ep.qp(dqpn);
  if (qp == nullptr) {
    drop(ep, m, RxDrop::kNoQp);
    return;
  }
  if (!qp->config().ud) {
    drop(ep, m, RxDrop::kUnsupported);  // a datagram for a connected QP
    return;
  }
  datagram_rx_lc(ep, *qp, f);
  rte_pktmbuf_free(m);
}

void Engine::deliver_lc(Endpoint& ep, rte_mbuf* m, uint64_t now) noexcept {
  deliver_frame_lc(ep, m, now, true);
}

void Engine::deliver_frame_lc(Endpoint& ep, rte_mbuf* m, uint64_t now, bool steer) noexcept {
  uint8_t* data = rte_pktmbuf_mtod(m, uint8_t*);
  wire::ParsedFrame f;
  const wire::ParseError pe = wire::parse(data, rte_pktmbuf_data_len(m), f);
  if (pe != wire::ParseError::kOk) [[unlikely]] {
    if (pe == wire::ParseError::kNotIp || pe == wire::ParseError::kNotUdp ||
        pe == wire::ParseError::kWrongUdpPort) {
      // Not RoCEv2: ARP / ND / other traffic for the control plane.
      to_control(ep, m, RxDrop::kNotRoce);
      return;
    }
    ++ep.counters().parse_errors[static_cast<size_t>(pe)];
    drop(ep, m, RxDrop::kMalformed);
    return;
  }
  const uint32_t dqpn = wire::Bth::DestQp::get(f.bth());
  Qp* qp = ep.qp(dqpn);
  if (qp == nullptr && steer && ep.steering() != nullptr && dqpn != kGsiQpn) [[unlikely]] {
    // Another engine's QP, maybe: it checks the ICRC (the frame is handed over as received).
    const uint8_t owner = ep.steering()->owner(dqpn);
    if (owner != Steering::kNoOwner && owner != ep.queue()) {
      hand_off(ep, m, owner);
      return;
    }
  }
  if (!wire::icrc_check(data, f.l) && !(qp != nullptr && qp->config().broken.ud_icrc))
      [[unlikely]] {
    ++ep.counters().parse_errors[static_cast<size_t>(wire::ParseError::kBadIcrc)];
    drop(ep, m, RxDrop::kBadIcrc);
    return;
  }
  if (!(f.mask & (wire::op::kRc | wire::op::kCnp))) [[unlikely]] {
    if (f.mask & wire::op::kUd) {
      deliver_datagram_lc(ep, f, m);
      return;
    }
    drop(ep, m, RxDrop::kUnsupported);  // UC is not handled
    return;
  }
  if (qp == nullptr) [[unlikely]] {
    drop(ep, m, RxDrop::kNoQp);
    return;
  }
  if (lc(*qp).state == QpState::kReset || lc(*qp).state == QpState::kInit) [[unlikely]] {
    ++lc(*qp).counters.dropped_bad_state;
    rte_pktmbuf_free(m);
    return;
  }
  if (!addresses_match(*qp, f)) [[unlikely]] {
    drop(ep, m, RxDrop::kBadAddress);
    return;
  }
  ++lc(*qp).counters.rx_packets;
  lc(*qp).counters.rx_bytes += f.l.frame_len();
  // Whatever the frame does (an ACK frees the window, a request owes a response), the QP gets
  // a turn in this step's tx phase (dataplane/sched.h).
  ready_.push_back(*qp);
  if (f.mask & wire::op::kCnp) [[unlikely]] {
    // A CNP (A17.9.3) is for the reaction point only: no PSN, no ACK, no state change.
    cc_on_cnp_lc(*qp, now);
    rte_pktmbuf_free(m);
    return;
  }
  if (frame_ecn(f) == kEcnCe) [[unlikely]]
    cc_on_ce_lc(ep, *qp, now);
  // A QP whose CQ has overrun is dead (ndkpi.md §3.3): in ERR the stages drop the packet rather
  // than execute a request whose completion could not be reported.
  if (lc(*qp).state != QpState::kErr && qp_cq_overrun(*qp)) [[unlikely]]
    qp_cq_overrun_error_lc(ep, *qp);
  // IBTA §9.6: the opcode says which stage owns the packet. True: held for later (selective
  // repeat).
  const bool held = (f.mask & wire::op::kReq) ? responder_rx_lc(ep, *qp, f, m, now)
                                              : completer_rx_lc(ep, *qp, f, m, now);
  // An ACK re-arms the local ACK timer, an RNR NAK starts a wait: the timer phase looks at
  // this QP from the next step (dataplane/sched.h).
  watch_timers_lc(*qp);
  if (!held) rte_pktmbuf_free(m);
}

}  // namespace urnic::dp

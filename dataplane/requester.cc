// Requester stage: send-queue WQEs -> packets (IBTA Vol. 1 §9.7.4 requester; rxe_req.c).
//
// WQEs move from the SQ ring into the slot array in posting order. Local operations
// (fast-register, local invalidate) execute when the requester reaches them, so they are
// ordered with the remote operations around them (IBTA §10.7.3). Messages are segmented by path
// MTU into FIRST / MIDDLE / LAST or ONLY packets (§9.7.4.1), a READ request consumes one PSN per
// response packet (IBTA §9.7.4.1; rocev2.md §3.4), and at most `max_unacked_psns` PSNs are
// outstanding. Retransmission is go-back-N from the slot array: frames are rebuilt from the WQE and
// registered memory, never kept (rocev2.md §3.2).
#include <rte_cycles.h>

#include <algorithm>
#include <array>

#include "dataplane/congestion.h"
#include "dataplane/internal.h"
#include "dataplane/reorder.h"

namespace urnic::dp {
namespace {

using wire::Psn;
namespace opc = wire::opc;

// rxe asks for an ACK every 64 packets inside long messages (RXE_MAX_PKT_PER_ACK), so that the
// requester's window keeps moving without waiting for the end of a message.
constexpr uint32_t kAckReqEvery = 64;

uint32_t packets_for(uint32_t length, uint32_t mtu) noexcept {
  return length == 0 ? 1 : (length + mtu - 1) / mtu;
}

// Executes a local operation in order; returns its completion status.
WcStatus execute_local_lc(Endpoint& ep, Qp& qp, const SendWqe& w) noexcept {
  MrCheck c;
  if (w.opcode == WrOpcode::kFastRegister) {
    c = ep.mrs().fast_register(w.mr_key, qp.config().pd, w.pages, w.npages, w.fbo, w.fr_length,
                               w.base_va, w.access);
  } else if (w.opcode == WrOpcode::kBind) {
    // IBTA §10.6.7.2.2: a type 2 window is bound to this QP.
    c = ep.mrs().bind_window(w.mr_key, qp.config().pd, qp.qpn(), w.rkey, w.base_va, w.fr_length,
                             w.access);
    if (c == MrCheck::kAccessDenied) return WcStatus::kMwBindErr;
  } else {
    c = ep.mrs().invalidate(w.mr_key, qp.config().pd);
  }
  if (c == MrCheck::kOk) return WcStatus::kSuccess;
  // NDK: a malformed local request (e.g. invalidating an invalid region) completes with
  // STATUS_INVALID_DEVICE_REQUEST; asking rights the region cannot grant is an access error.
  return c == MrCheck::kAccessDenied ? WcStatus::kLocAccessErr : WcStatus::kLocQpOpErr;
}

// The packet opcodes of each SEND / WRITE work request, indexed by WrOpcode (kSend..
// kWriteWithImm; IBTA table 38).
struct DataOpcodes {
  uint8_t first, middle, last, only;
};
constexpr std::array<DataOpcodes, 5> kDataOpcodes = {{
    {opc::kSendFirst, opc::kSendMiddle, opc::kSendLast, opc::kSendOnly},
    {opc::kSendFirst, opc::kSendMiddle, opc::kSendLastImm, opc::kSendOnlyImm},
    {opc::kSendFirst, opc::kSendMiddle, opc::kSendLastInv, opc::kSendOnlyInv},
    {opc::kWriteFirst, opc::kWriteMiddle, opc::kWriteLast, opc::kWriteOnly},
    {opc::kWriteFirst, opc::kWriteMiddle, opc::kWriteLastImm, opc::kWriteOnlyImm},
}};
static_assert(static_cast<size_t>(WrOpcode::kWriteWithImm) == kDataOpcodes.size() - 1);

// Opcode of packet `k` of `n` of a SEND or WRITE message.
uint8_t data_opcode(WrOpcode op, uint32_t k, uint32_t n) noexcept {
  const bool first = k == 0, last = k + 1 == n;
  const auto i = static_cast<size_t>(op);
  const DataOpcodes& o = kDataOpcodes[i < kDataOpcodes.size() ? i : kDataOpcodes.size() - 1];
  return first && last ? o.only : first ? o.first : last ? o.last : o.middle;
}

// Builds packet `k` of slot `s`. Returns false on mempool exhaustion (retry next step) and sets
// *err on a local protection error.
// `ack_req` asks for an ACK whatever the packet's place (a selective resend: reorder.h); `single`
// makes a READ (re-)request ask for response packet k alone instead of all from k on.
bool build_packet_lc(Endpoint& ep, Qp& qp, SendSlot& s, uint32_t k, WcStatus* err,
                     bool ack_req = false, bool single = false) noexcept {
  const SendWqe& w = s.wqe;
  const uint32_t mtu = lc(qp).attr.path_mtu;
  const Psn psn = s.first_psn + static_cast<int32_t>(k);
  uint8_t* payload = nullptr;
  if (w.opcode == WrOpcode::kRead) {
    // A (re-)request for the responses from packet k on: RETH names the remaining bytes
    // (rocev2.md §3.2, rxe req_retry()).
    const uint64_t done = static_cast<uint64_t>(k) * mtu;
    auto th = qp_headers(qp, opc::kReadRequest, psn, true);
    th.reth.va = wire::Be64::of(w.remote_addr + done);
    th.reth.rkey = wire::Be32::of(w.rkey);
    const auto rest = static_cast<uint32_t>(w.length - done);
    th.reth.dma_length = wire::Be32::of(single && rest > mtu ? mtu : rest);
    rte_mbuf* m = qp_frame_lc(ep, qp, th, 0, &payload);
    if (m == nullptr) return false;
    qp_send_frame_lc(ep, qp, m, opc::kReadRequest, 0);
    return true;
  }
  if (wr_has(w.opcode, wr_mask::kAtomic)) {
    const uint8_t op = w.opcode == WrOpcode::kCompareSwap ? opc::kCompareSwap : opc::kFetchAdd;
    auto th = qp_headers(qp, op, psn, true);
    th.atomic_eth.va = wire::Be64::of(w.remote_addr);
    th.atomic_eth.rkey = wire::Be32::of(w.rkey);
    // CAS: swap data and compare data; FETCH_ADD: the add operand in swap_add (§9.3.4).
    th.atomic_eth.swap_add =
        wire::Be64::of(w.opcode == WrOpcode::kCompareSwap ? w.swap : w.compare_add);
    th.atomic_eth.compare = wire::Be64::of(w.opcode == WrOpcode::kCompareSwap ? w.compare_add : 0);
    rte_mbuf* m = qp_frame_lc(ep, qp, th, 0, &payload);
    if (m == nullptr) return false;
    qp_send_frame_lc(ep, qp, m, op, 0);
    return true;
  }
  const uint32_t off = k * mtu;
  const uint32_t len = w.length - off < mtu ? w.length - off : mtu;
  const uint8_t op = data_opcode(w.opcode, k, s.npkts);
  const bool last = k + 1 == s.npkts;
  auto th = qp_headers(qp, op, psn, ack_req || last || (k % kAckReqEvery) == kAckReqEvery - 1);
  const uint32_t mask = wire::kOpcodeTable[op].mask;
  if (mask & wire::op::kReth) {
    th.reth.va = wire::Be64::of(w.remote_addr);
    th.reth.rkey = wire::Be32::of(w.rkey);
    th.reth.dma_length = wire::Be32::of(w.length);
  }
  if (mask & wire::op::kImmDt) th.imm.imm = wire::Be32::of(w.imm_or_inv);
  if (mask & wire::op::kIeth) th.ieth.rkey = wire::Be32::of(w.imm_or_inv);
  // Solicited event on the last packet of a SEND or WRITE with immediate (IBTA §9.2.3).
  if (last && (w.flags & op_flag::kSendAndSolicitEvent) && w.opcode != WrOpcode::kWrite)
    wire::Bth::Se::set(th.bth, 1u);
  rte_mbuf* m = qp_frame_lc(ep, qp, th, len, &payload);
  if (m == nullptr) return false;
  // From kFuseMinPayload bytes the payload is read once: gathered into the frame and run through
  // the ICRC in one pass.
  uint32_t state = 0;
  uint32_t* crc = qp_fused_crc_lc(qp, m, op, len, &state);
  const WcStatus g = gather_lc(ep.mrs(), qp.config().pd, w, off, len, payload, crc);
  if (g != WcStatus::kSuccess) {
    rte_pktmbuf_free(m);
    *err = g;
    return true;
  }
  qp_send_frame_lc(ep, qp, m, op, len, crc);
  return true;
}

// PSNs that may be outstanding: the configured PSN limit, capped at 256 KiB of data in flight
// (go-back-N resends the whole window per loss, and at 4 KiB MTU a 256-PSN window (1 MiB) made 1%
// loss cost 4x the goodput that 64 PSNs do (bench_loopback BM_RdmaWriteLossy), with no lossless
// cost on the loopback; 256 KiB still covers 100 Gb/s x 20 us of bandwidth-delay product), and
// by the congestion window after repeated timeouts.
uint32_t base_window_lc(const Qp& qp) noexcept {
  constexpr uint32_t kMaxInFlightBytes = 256 * 1024;
  // Selective repeat: also no more than the peer's reorder buffer can hold (reorder.h). The
  // byte cap applies to it too: it resends only what was lost, but what many QPs keep in flight
  // fills the same buffers (64 QPs of 64 KiB send_bw through urnic-hop, no loss injected: with
  // 256 PSNs of 4 KiB each in flight the sockets overflowed, and the run crawled for minutes).
  const uint32_t w =
      std::min(qp.config().max_unacked_psns, kMaxInFlightBytes / lc(qp).attr.path_mtu);
  return lc(qp).attr.selective_repeat ? std::min(w, kReorderSlots) : w;
}
// Selective repeat: a READ starts only when all of its response PSNs fit the window, or when
// nothing is outstanding (a READ longer than the window). One request packet stands for all its
// PSNs, and a response more than kReorderSlots ahead of the one awaited cannot be held: checking
// only the first PSN let 16 READs of 16 packets run 15 PSNs past the reorder buffer, and every
// response there was dropped and asked for again while the hole before it lasted (64 KiB
// read_bw at 5 % loss through urnic-hop: 452 of them, 0.8 % of the clean goodput).
bool read_fits_lc(const Qp& qp, uint32_t npkts, uint32_t window) noexcept {
  const auto& r = lc(qp).req;
  if (!lc(qp).attr.selective_repeat || r.psn == r.una) return true;
  return static_cast<uint64_t>(Psn::diff(r.psn, r.una)) + npkts <= window;
}

// The window after a retransmission timeout: 4 packets, not TCP's one, so that one lost packet
// or ACK on a lossy path does not cost a whole retry (each retry with one packet in flight needs
// that packet and its ACK through: at 20 % loss both pass only 64 % of the time).
constexpr uint32_t kRestartWindow = 4;
// The floor of a halving after a reported or inferred loss, in bytes in flight (what fills a
// buffer): 4 packets at 4 KiB MTU, 16 at 1 KiB.
constexpr uint32_t kMinLossBytes = 16 * 1024;

uint32_t window_lc(const Qp& qp) noexcept {
  const uint32_t w = base_window_lc(qp);
  const uint32_t cwnd = lc(qp).req.cwnd;
  return cwnd != 0 && cwnd < w ? cwnd : w;
}

// The wait before the next local ACK timeout, after a timeout that found no progress. IBTA
// §9.7.6.1.3 gives the timer (T = 4.096 us * 2^timeout) and leaves open how the requester
// retries. Plain go-back-N (rxe) resends the whole window every T; when the loss came from
// overrun buffers - many QPs bursting through one bottleneck - every QP that lost frames in the
// same burst times out at the same moment and resends its whole window again into the same
// buffer, the same way each time, until one of them runs out of retries (issue 18: 64 QPs of
// 64 KiB READs through a hop with 1 MiB socket buffers). So from the second timeout in a row
// the QP backs off, by a random wait in [T, 2T] and then [2T, 4T] (random, so that the QPs stop
// retrying in step), and restarts its window at four packets, growing it back with the ACKs
// (requester_progress_lc), as TCP does after a retransmission timeout (RFC 5681 §3.1). A single
// timeout (a lost tail) keeps plain go-back-N and the plain timer.
uint64_t retry_wait_lc(Qp& qp, uint64_t t) noexcept {
  auto& r = lc(qp).req;
  if (!qp.config().adaptive_retransmit) return t;
  if (r.timeouts_in_row != UINT8_MAX) ++r.timeouts_in_row;
  if (r.timeouts_in_row < 2) return t;
  if (r.cwnd == 0 || r.cwnd > kRestartWindow)
    r.ssthresh = std::max(window_lc(qp) / 2, kRestartWindow);
  r.cwnd = kRestartWindow;
  r.cwnd_acc = 0;
  r.recover = r.max_sent;
  r.recovering = true;
  r.congested = true;
  // xorshift32, seeded per QP: no shared state between the engine's QPs, no syscall.
  uint32_t x = r.jitter != 0 ? r.jitter : (qp.qpn() * 2654435761u) | 1u;
  x ^= x << 13;
  x ^= x >> 17;
  x ^= x << 5;
  r.jitter = x;
  const uint64_t base = r.timeouts_in_row == 2 ? t : 2 * t;
  return base + x % (base + 1);
}

// The send slot whose PSNs include `p`, among those started and not done; or null.
SendSlot* slot_of_lc(Qp& qp, Psn p) noexcept {
  auto& r = lc(qp).req;
  for (uint64_t i = r.head; i != r.tail; ++i) {
    SendSlot& s = r.at(i);
    if (!s.started) return nullptr;
    if (s.done || wr_has(s.wqe.opcode, wr_mask::kLocalOp)) continue;
    if (!Psn::after(p, s.last_psn)) return Psn::before(p, s.first_psn) ? nullptr : &s;
  }
  return nullptr;
}

enum class Resend : uint8_t { kSent, kSkipped, kStop };
constexpr uint32_t kProbeShift = 5;  // the probe's wait is at most T / 32 (requester_timers_lc)
// The probe's shortest wait, whether timed from progress or from the last arrival (10 us).
uint64_t min_probe_ticks() noexcept {
  static const uint64_t ticks = tsc_from_ns(10'000);  // once: a 128-bit division
  return ticks;
}
// A resend queue entry's mark (PSNs have 24 bits): resend even within a round trip of the last.
constexpr uint32_t kForcedResend = 1u << 31;

// Sends packet `p` again, alone and with AckReq (selective repeat's named holes, and the probe).
// kStop when the step must stop here: the pacer or the mempool says wait, or a local error moved
// the QP to ERR.
Resend resend_one_lc(Endpoint& ep, Qp& qp, Psn p, uint64_t now, bool forced = false) noexcept {
  auto& r = lc(qp).req;
  // Acknowledged meanwhile, or a go-back-N pass is yet to reach it.
  if (Psn::before(p, r.una) || !Psn::before(p, r.psn)) return Resend::kSkipped;
  SendSlot* hit = slot_of_lc(qp, p);
  if (hit == nullptr) return Resend::kSkipped;
  if (!cc_may_send(qp, now)) [[unlikely]]
    return Resend::kStop;
  // A READ's hole is one response packet: while later ones are held, that one alone is asked
  // for again (the responder replays it from its saved request); otherwise everything from the
  // first missing one, except for go-back-N's probe, which asks for that one packet only (the
  // rest is most often still on its way: a probe for all of it doubled the READ traffic of 64
  // QPs through an overrun hop). An atomic's, its only packet.
  uint32_t k = wr_has(hit->wqe.opcode, wr_mask::kAtomic) ? 0 : Psn::diff(p, hit->first_psn);
  bool single = false;
  if (hit->wqe.opcode == WrOpcode::kRead) {
    if (k < hit->resp_pkts) return Resend::kSkipped;  // arrived meanwhile
    // Selective repeat: one packet when later responses of this READ are held (that one was
    // lost on its way); otherwise the responder never sent the rest (the request, or a shorter
    // re-request, was what was lost) and all of it is asked for, once a round trip. Asking for
    // one packet there recovered a READ one packet per probe: 90 % of read_bw's time at 5 %
    // loss through urnic-hop, una moving one PSN per 20 ms probe.
    single = !lc(qp).attr.selective_repeat || reorder_holds_after_lc(r.held, p, hit->last_psn);
    if (!single) {
      // Once per round trip for the NAKs of one lost READ (one per PSN of it); a resend found
      // lost (requester_overtaken_lc) or the probe goes now.
      if (!forced && hit->resent && now - hit->sent_tsc <= r.srtt) return Resend::kSkipped;
      k = hit->resp_pkts;
    }
  }
  const uint64_t bytes_before = lc(qp).counters.tx_bytes;
  WcStatus err = WcStatus::kSuccess;
  if (!build_packet_lc(ep, qp, *hit, k, &err, true, single)) return Resend::kStop;
  if (err != WcStatus::kSuccess) {
    qp_fail_lc(ep, qp, hit, err, "work request failed on resend");
    return Resend::kStop;
  }
  cc_sent(qp, lc(qp).counters.tx_bytes - bytes_before, now);
  ++lc(qp).counters.retransmits;
  ++lc(qp).counters.selective_retransmits;
  r.rtt_pending = false;  // Karn: no sample across a resend
  hit->resent = true;
  hit->sent_tsc = now;
  return Resend::kSent;
}

// Sends the packets NAKs named (requester_selective_nak_lc) and the probe's, one by one, ahead
// of anything new. False when the step must stop here (resend_one_lc).
bool resend_selected_lc(Endpoint& ep, Qp& qp, uint32_t budget, uint64_t now,
                        uint32_t* built) noexcept {
  auto& r = lc(qp).req;
  for (; r.sr_head != r.sr_tail && *built < budget; ++r.sr_head) {
    const uint32_t e = r.sr_queue[r.sr_head % QpLc::Requester::kSrQueue];
    const Resend x = resend_one_lc(ep, qp, Psn(e & ~kForcedResend), now, (e & kForcedResend) != 0);
    if (x == Resend::kStop) return false;
    if (x == Resend::kSent) ++*built;
  }
  return true;
}

// Queues `p` for resend_selected_lc; `force`: even if it was resent already (the probe, a resend
// found lost), marked in the entry's bit 31 (kForcedResend).
void queue_resend_lc(Qp& qp, Psn p, bool force) noexcept {
  auto& r = lc(qp).req;
  uint32_t& last = r.sr_resent[p.value() % kReorderSlots];
  if (last == p.value() && !force) return;  // resent already: a lost resend waits for the probe
  if (r.sr_tail - r.sr_head == QpLc::Requester::kSrQueue)
    return;  // full: the probe covers the rest
  last = p.value();
  r.sr_queue[r.sr_tail++ % QpLc::Requester::kSrQueue] = p.value() | (force ? kForcedResend : 0);
}

}  // namespace

void requester_selective_nak_lc(Qp& qp, Psn hole) noexcept {
  auto& r = lc(qp).req;
  // Only a PSN outstanding and not about to be sent by a go-back-N pass (a timeout, an RNR NAK).
  if (Psn::before(hole, r.una) || !Psn::before(hole, r.psn)) return;
  // The packet being timed may be held behind this hole, and its ACK waits for the resend: no
  // sample across a recovery (Karn), or the probe's wait grows with every loss.
  r.rtt_pending = false;
  queue_resend_lc(qp, hole, false);
  requester_loss_lc(qp);
}

void requester_overtaken_lc(Qp& qp, SendSlot& s, Psn expected, Psn p, uint64_t now) noexcept {
  auto& r = lc(qp).req;
  if (!s.resent || Psn::before(expected, r.una)) return;
  const SendSlot* x = slot_of_lc(qp, p);
  if (x == nullptr || x == &s || x->sent_tsc <= s.sent_tsc) return;
  ++lc(qp).counters.implied_naks;
  s.sent_tsc = now;  // once: the next response of `x` does not find it lost again
  r.rtt_pending = false;
  queue_resend_lc(qp, expected, true);
  requester_loss_lc(qp);
}

void requester_quiet_lc(Qp& qp, uint64_t now) noexcept {
  auto& r = lc(qp).req;
  if (r.probe_deadline == 0 || r.probes_in_row != 0) return;  // no timer, or probing already
  const uint64_t quiet = std::clamp(2 * r.min_rtt, min_probe_ticks(), r.ack_ticks >> kProbeShift);
  r.probe_deadline = now + quiet;
}

uint64_t probe_ticks_lc(const Qp& qp) noexcept;  // below, with the probe

namespace {
// Progress, or a timeout's go-back-N pass (which has a tail of its own to watch): the probe
// waits its first interval again.
void reset_probe_backoff_lc(Qp& qp) noexcept {
  auto& r = lc(qp).req;
  if (r.probes_in_row == 0) [[likely]]
    return;
  r.probes_in_row = 0;
  r.probe_ticks = probe_ticks_lc(qp);
}
}  // namespace

void requester_progress_lc(Qp& qp, uint32_t acked) noexcept {
  auto& r = lc(qp).req;
  // Forward progress resets both retry counters (rxe reset_retry_counters(); IBTA §9.7.6.1).
  r.retry_left = lc(qp).attr.retry_cnt;
  r.rnr_left = lc(qp).attr.rnr_retry;
  r.timeouts_in_row = 0;
  reset_probe_backoff_lc(qp);
  if (r.recovering && !Psn::before(r.una, r.recover)) r.recovering = false;
  if (r.cwnd == 0) return;
  // Slow start up to ssthresh, then one PSN per window's worth of ACKed PSNs (RFC 5681 §3.1);
  // back at the configured window the QP runs unlimited again.
  if (r.cwnd < r.ssthresh) {
    r.cwnd += acked;
  } else {
    r.cwnd_acc += acked;
    while (r.cwnd_acc >= r.cwnd) {
      r.cwnd_acc -= r.cwnd;
      ++r.cwnd;
    }
  }
  if (r.cwnd >= base_window_lc(qp)) {
    r.cwnd = 0;
    r.congested = false;
  }
}

// Once a QP has timed out twice in a row (congested, until its window is whole again), losses
// within one window of PSNs are one congestion event (RFC 6582's "recover"): the window halves
// once, down to 16 KiB in flight, and grows back by one PSN per window ACKed. Without this, 64
// QPs whose windows together hold 16 MiB (64 x 64 PSNs x 4 KiB) kept overrunning a 1 MiB buffer
// after every recovery until one QP lost its responses eight times in a row. Only after timeouts:
// halving on every NAK of random 1 % loss shrank a 64 KiB WRITE's goodput a hundredfold (a small
// window turns every lost tail packet into a whole local ACK timeout).
void requester_loss_lc(Qp& qp) noexcept {
  auto& r = lc(qp).req;
  if (!r.congested || (r.recovering && Psn::before(r.una, r.recover))) return;
  r.ssthresh = std::max({window_lc(qp) / 2, kMinLossBytes / lc(qp).attr.path_mtu, kRestartWindow});
  r.cwnd = r.ssthresh;
  r.cwnd_acc = 0;
  r.recover = r.max_sent;
  r.recovering = true;
}

// Selective repeat's probe: two smoothed round trips after the last progress (at least 10 us; at
// most, and before the first round trip is measured, 1/32 of the local ACK timeout), the oldest
// unacknowledged packet is resent alone (with AckReq), and again every such interval. The
// responder answers it with an ACK (it was the hole, or only the ACK was lost) or a NAK for the
// next hole. A lost NAK or a lost resend shows no other way once the window is full (nothing
// left to send, so nothing more arrives to reveal it). Measured with bench_loopback
// BM_RdmaWriteLossy at 5 % loss (timeout 8, 1 ms): with no probe 14 % of the lossless goodput
// was left (timeouts took 80 % of the time); a fixed 1/8 of the timeout kept 43 %, 1/32 70 %;
// the round-trip probe keeps about the same in that loopback and, between two processes through
// urnic-hop (ctest perf_sr, timeout 14: 1/32 is 2 ms), does not wait milliseconds for a 0.1 ms
// round trip. A probe costs one packet (QpCounters::sr_probes). Probes are not retries: the
// local ACK timer still runs from the last progress, and its expiries count against retry_cnt
// (IBTA §9.7.6.1.3).
//
// Adaptive retransmission (go-back-N) probes the same way, which any responder answers: the
// resend is the PSN it expects (then accepted), or a duplicate (ACKed, a READ re-executed from
// the missing packet on, an atomic's saved result replayed; IBTA §9.7.5.1.4). Its small windows
// need it most: a window of four whose last packet is lost has nothing behind it to reveal the
// loss, and each such tail cost a whole local ACK timeout.
constexpr uint8_t kMaxProbeBackoff = 16;

// Whether the QP probes: selective repeat, or adaptive go-back-N.
bool probes_lc(const Qp& qp) noexcept {
  return lc(qp).attr.selective_repeat || qp.config().adaptive_retransmit;
}

uint64_t probe_ticks_lc(const Qp& qp) noexcept {
  const uint64_t cap = lc(qp).req.ack_ticks >> kProbeShift;
  // Round trips are measured with the queueing in them, so two of them are a safe wait. Each
  // probe that brought no progress doubles the next wait (RFC 6298 §5.5's backoff), up to the
  // cap: unanswered probes mean a congested path more often than one more lost packet, and 64
  // QPs probing every two round trips through an overrun hop sent 100 000 probes a run. The cap
  // stays at T/32, so probes go on until the timer (31 one-packet probes per timeout period at
  // most): stopping them earlier (backing off up to T) let 85-137 tails a run wait for the
  // timer there, against none.
  // Before the first sample, T/32 doubling up to the timer (Karn's backoff): a probe of the
  // packet being timed cancels its sample, and a QP whose round trip was above T/32 probed every
  // T/32 and never got one (64 QPs of 128 atomics through urnic-hop, no loss: srtt stayed 0 on
  // most QPs, 550 000 stale probes and 9 466 timeouts for 409 600 atomics).
  const uint64_t srtt = lc(qp).req.srtt;
  if (srtt == 0) return std::min(lc(qp).req.ack_wait, cap << lc(qp).req.probes_in_row);
  const uint64_t first = std::max(2 * srtt, min_probe_ticks());
  return std::min(cap, first << lc(qp).req.probes_in_row);
}

namespace {
// The local ACK timer's wait: T, or two round trips when that is longer, up to 4T. The spec lets
// the timer run between T and about 4T (rocev2.md §3.2); a timer shorter than the round trip
// only resends what is still on its way, into the queue that made the round trip long (the same
// atomics, once their round trip was measured: 100-200 ms through the hop, against T = 67 ms).
// Only QPs that measure round trips (probes_lc) have srtt; the others keep T.
uint64_t ack_wait_lc(const Qp& qp) noexcept {
  const auto& r = lc(qp).req;
  return std::clamp(2 * r.srtt, r.ack_ticks, 4 * r.ack_ticks);
}
}  // namespace

void requester_retime_lc(Qp& qp) noexcept {
  auto& r = lc(qp).req;
  r.ack_ticks = tsc_from_ns(ack_timeout_ns(lc(qp).attr.timeout));
  r.ack_wait = ack_wait_lc(qp);
  r.probe_ticks = probe_ticks_lc(qp);
}

void requester_rtt_sample_lc(Qp& qp, uint64_t sent, uint64_t now) noexcept {
  auto& r = lc(qp).req;
  // At most four samples a round trip: one per response would redo the derived waits for every
  // READ / atomic (120 instructions a message in bench/cost), and the estimator's gain of 1/8
  // needs no more.
  const uint64_t sample = now - sent;
  if (sample < r.min_rtt || r.min_rtt == 0) r.min_rtt = sample;
  if (now - r.sample_tsc < (r.srtt >> 2) || !probes_lc(qp)) return;
  r.sample_tsc = now;
  r.srtt = r.srtt == 0 ? sample : (7 * r.srtt + sample) / 8;  // RFC 6298: alpha 1/8
  r.ack_wait = ack_wait_lc(qp);
  r.probe_ticks = probe_ticks_lc(qp);
}

void requester_rtt_lc(Qp& qp, uint64_t now) noexcept {
  auto& r = lc(qp).req;
  if (!r.rtt_pending || !Psn::after(r.una, r.rtt_psn)) return;
  r.rtt_pending = false;
  requester_rtt_sample_lc(qp, r.rtt_tsc, now);
}

void requester_update_timer_lc(Qp& qp, uint64_t now) noexcept {
  auto& r = lc(qp).req;
  if (r.una == r.psn || lc(qp).attr.timeout == 0) {
    r.ack_deadline = 0;  // nothing outstanding, or the timer is infinite (timeout 0)
    r.probe_deadline = 0;
  } else {
    r.ack_deadline = now + r.ack_wait;
    r.probe_deadline = probes_lc(qp) ? now + r.probe_ticks : 0;
  }
}

void requester_rewind_lc(Qp& qp, Psn psn) noexcept {
  auto& r = lc(qp).req;
  for (uint64_t i = r.head; i != r.tail; ++i) {
    SendSlot& s = r.at(i);
    if (!s.started) break;
    if (s.done || wr_has(s.wqe.opcode, wr_mask::kLocalOp)) continue;
    if (Psn::diff(s.last_psn, psn) >= 0) {
      const int32_t k = Psn::diff(psn, s.first_psn);
      r.cur = i;
      if (s.wqe.opcode == WrOpcode::kRead) {
        r.cur_pkt = s.resp_pkts;  // re-request what has not arrived
      } else {
        r.cur_pkt = k > 0 ? static_cast<uint32_t>(k) : 0;
      }
      r.psn = s.first_psn + static_cast<int32_t>(r.cur_pkt);
      return;
    }
  }
  // `psn` lies beyond every started message (all of them acknowledged meanwhile): continue
  // with the first message not yet started, at `psn`, never behind it (a PSN must not be
  // reused for a new request).
  uint64_t i = r.head;
  while (i != r.tail && r.at(i).started) ++i;
  r.cur = i;
  r.cur_pkt = 0;
  if (Psn::after(psn, r.psn)) r.psn = psn;
}

uint32_t requester_tx_lc(Endpoint& ep, Qp& qp, uint32_t budget, uint64_t now) noexcept {
  if (lc(qp).state != QpState::kRts && lc(qp).state != QpState::kSqd) return 0;
  auto& r = lc(qp).req;
  const uint64_t cap = static_cast<uint64_t>(r.mask) + 1;
  // SQD: finish what was started, start nothing new (IBTA §10.3.1 send queue drain).
  if (lc(qp).state == QpState::kRts) {
    while (r.tail - r.head < cap) {
      const SendWqe* w = lc(qp).sq.front();
      if (w == nullptr) break;
      SendSlot& s = r.at(r.tail);
      copy_send_wqe(s.wqe, *w);
      s.started = s.done = false;
      s.resp_pkts = 0;
      s.wc = WcStatus::kSuccess;
      lc(qp).sq.pop();
      ++r.tail;
    }
  }
  if (r.rnr_deadline != 0) return 0;  // waiting out an RNR NAK
  cc_advance_lc(qp, now);
  uint32_t built = 0;
  if (r.sr_head != r.sr_tail && !resend_selected_lc(ep, qp, budget, now, &built)) [[unlikely]]
    return built;
  if (r.probe_una && built < budget) [[unlikely]] {
    const Resend x = resend_one_lc(ep, qp, r.una, now);
    if (x == Resend::kStop) return built;  // paced, no mbuf (it goes next step), or ERR
    r.probe_una = false;
    if (x == Resend::kSent) ++built;
  }
  const uint32_t window = window_lc(qp);
  while (built < budget && r.cur != r.tail) {
    SendSlot& s = r.at(r.cur);
    if (!s.started) {
      if (lc(qp).state == QpState::kSqd) break;
      const WrOpcode op = s.wqe.opcode;
      // READ_FENCE: wait for every earlier READ/ATOMIC to complete (NDK_OP_FLAG_READ_FENCE).
      if ((s.wqe.flags & op_flag::kReadFence) && r.rd_atomic_outstanding != 0) break;
      if (wr_has(op, wr_mask::kLocalOp)) {
        s.started = s.done = true;
        s.wc = execute_local_lc(ep, qp, s.wqe);
        ++r.cur;
        if (s.wc != WcStatus::kSuccess) {
          // A failed work request moves the QP to the error state (IBTA §10.8.3.3).
          qp_fail_lc(ep, qp, &s, s.wc, "local work request failed");
          return built;
        }
        continue;
      }
      if (wr_has(op, wr_mask::kReadOrAtomic) &&
          r.rd_atomic_outstanding >= lc(qp).attr.max_rd_atomic)
        break;
      if (Psn::diff(r.psn, r.una) >= static_cast<int32_t>(window)) break;
      const uint32_t npkts =
          wr_has(op, wr_mask::kAtomic) ? 1 : packets_for(s.wqe.length, lc(qp).attr.path_mtu);
      if (op == WrOpcode::kRead && !read_fits_lc(qp, npkts, window)) break;
      s.first_psn = r.psn;
      s.resent = false;
      s.sent_tsc = now;
      s.npkts = npkts;
      s.last_psn = s.first_psn + static_cast<int32_t>(s.npkts - 1);
      s.started = true;
      r.cur_pkt = 0;
      if (wr_has(op, wr_mask::kReadOrAtomic)) ++r.rd_atomic_outstanding;
    }
    if (s.done || wr_has(s.wqe.opcode, wr_mask::kLocalOp)) {
      // Completed while a go-back-N pass was heading for it: skip it, and its PSNs with it,
      // so the next new message never reuses them.
      if (!wr_has(s.wqe.opcode, wr_mask::kLocalOp) && Psn::after(s.last_psn + 1, r.psn))
        r.psn = s.last_psn + 1;
      ++r.cur;
      r.cur_pkt = 0;
      continue;
    }
    if (Psn::diff(r.psn, r.una) >= static_cast<int32_t>(window)) break;
    if (!cc_may_send(qp, now)) [[unlikely]]
      break;  // paced by DCQCN: the next slot is in a later step
    const uint64_t bytes_before = lc(qp).counters.tx_bytes;
    WcStatus err = WcStatus::kSuccess;
    if (!build_packet_lc(ep, qp, s, r.cur_pkt, &err)) break;  // mempool empty: next step
    if (err != WcStatus::kSuccess) {
      qp_fail_lc(ep, qp, &s, err, "work request failed");
      return built;
    }
    ++built;
    cc_sent(qp, lc(qp).counters.tx_bytes - bytes_before, now);
    const Psn sent = s.first_psn + static_cast<int32_t>(r.cur_pkt);
    if (Psn::before(sent, r.max_sent)) {
      ++lc(qp).counters.retransmits;
      r.rtt_pending = false;  // Karn: no sample across a resend
      s.resent = true;
      s.sent_tsc = now;
    } else if (!r.rtt_pending && probes_lc(qp)) {
      r.rtt_pending = true;
      r.rtt_psn = sent;
      r.rtt_tsc = now;
    }
    if (wr_has(s.wqe.opcode, wr_mask::kReadOrAtomic)) {
      // One request packet stands for all remaining PSNs of the READ (or the atomic's one).
      r.psn = s.last_psn + 1;
      ++r.cur;
      r.cur_pkt = 0;
    } else {
      r.psn = sent + 1;
      if (++r.cur_pkt == s.npkts) {
        ++r.cur;
        r.cur_pkt = 0;
      }
    }
    if (Psn::after(r.psn, r.max_sent)) r.max_sent = r.psn;
    if (r.cur != r.tail && r.cur_pkt == 0) {
      SendSlot& n = r.at(r.cur);
      if (n.started && n.wqe.opcode == WrOpcode::kRead) r.cur_pkt = n.resp_pkts;
    }
  }
  if (built != 0 && r.ack_deadline == 0) requester_update_timer_lc(qp, now);
  return built;
}

bool requester_timers_lc(Endpoint& ep, Qp& qp, uint64_t now) noexcept {
  auto& r = lc(qp).req;
  if (r.rnr_deadline != 0 && now >= r.rnr_deadline) {
    // RNR wait over: resend from the NAKed PSN (rewound when the NAK arrived).
    r.rnr_deadline = 0;
    requester_update_timer_lc(qp, now);
    return true;
  }
  if (r.probe_deadline != 0 && now >= r.probe_deadline &&
      (r.ack_deadline == 0 || now < r.ack_deadline)) {
    if (r.probes_in_row == 0 && r.srtt != 0 && r.held.count == 0) {
      // The first probe since progress waits until the oldest message still waiting could have
      // been answered (its last send plus two round trips; RFC 8985's tail loss probe times from
      // the send, not from the last ACK), but no longer than half the timer's wait. In a deep
      // pipeline the next response is for a request sent nearly a round trip ago: a probe T/32
      // after the last progress only raced its own response (64 QPs of 128 atomics through
      // urnic-hop, no loss: 550 000 stale probes for 409 600 atomics). Checked here, when the
      // probe is due, rather than per ACK.
      const SendSlot* oldest = first_pending_lc(qp);
      const uint64_t sent = oldest != nullptr ? oldest->sent_tsc : 0;
      const uint64_t due = std::min(sent + 2 * r.srtt, r.ack_deadline - r.ack_wait / 2);
      if (due > now) {
        r.probe_deadline = due;
        return false;
      }
    }
    if (r.probes_in_row < kMaxProbeBackoff) {
      ++r.probes_in_row;
      r.probe_ticks = probe_ticks_lc(qp);
    }
    r.probe_deadline = now + r.probe_ticks;
    if (Psn::before(r.una, r.psn)) {
      if (lc(qp).attr.selective_repeat)
        queue_resend_lc(qp, r.una, true);
      else
        r.probe_una = true;  // go-back-N has no resend queue (requester_tx_lc sends it)
      ++lc(qp).counters.sr_probes;
    }
    return true;
  }
  if (r.ack_deadline == 0 || now < r.ack_deadline) return false;
  ++lc(qp).counters.timeouts;
  if (r.retry_left == 0) {
    // Transport retries exhausted (IBTA §9.7.6.1.3): the oldest outstanding WQE fails
    // with RETRY_EXC_ERR, the QP enters ERR and everything else flushes.
    qp_fail_lc(ep, qp, first_pending_lc(qp), WcStatus::kRetryExcErr,
               "ACK timeout retries exhausted");
    return true;
  }
  --r.retry_left;
  r.gap_retry = false;
  reset_probe_backoff_lc(qp);
  r.sr_head = r.sr_tail;  // the go-back-N pass resends them
  r.rtt_pending = false;
  requester_rewind_lc(qp, r.una);
  r.ack_deadline = now + retry_wait_lc(qp, r.ack_wait);
  r.probe_deadline = probes_lc(qp) ? now + r.probe_ticks : 0;
  return true;
}

}  // namespace urnic::dp

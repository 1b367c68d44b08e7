// Completer stage: responses -> completions (IBTA Vol. 1 §9.7.5.2 requester side of ACK/NAK
// processing, §9.9 error handling; rxe_comp.c; rocev2.md §3.6-3.7).
//
// ACKs are cumulative: an ACK for PSN p completes every SEND / WRITE whose last PSN is <= p. A
// READ or ATOMIC completes only with its response; an ACK (or later response) that covers a
// READ/ATOMIC whose response has not arrived means the response was lost: an implied NAK, and
// the requester re-requests from there. NAK PSN sequence error and RNR NAK rewind the requester
// (go-back-N); the other NAKs fail the WQE and move the QP to ERR.
#include <atomic>

#include "dataplane/internal.h"
#include "dataplane/reorder.h"

namespace urnic::dp {
namespace {

using wire::Psn;

// Forward progress since `before` (the oldest unacknowledged PSN then).
void progress_lc(Qp& qp, Psn before, uint64_t now) noexcept {
  requester_progress_lc(qp, static_cast<uint32_t>(Psn::diff(lc(qp).req.una, before)));
  if (lc(qp).req.rtt_pending) [[unlikely]]
    requester_rtt_lc(qp, now);
  requester_update_timer_lc(qp, now);
}

// Marks every SEND/WRITE slot wholly at or before `upto` done. Stops at the first READ/ATOMIC
// still waiting for its response: if `upto` reaches past it, that response was lost (implied
// NAK) and the requester rewinds to it. Returns false in that case.
bool ack_through_lc(Qp& qp, Psn upto) noexcept {
  auto& r = lc(qp).req;
  for (uint64_t i = r.head; i != r.tail; ++i) {
    SendSlot& s = r.at(i);
    if (!s.started) break;
    if (s.done) continue;
    const bool waits = wr_has(s.wqe.opcode, wr_mask::kReadOrAtomic);
    if (Psn::diff(s.last_psn, upto) > 0) {
      // Partly acknowledged (or not at all): nothing further is complete. An ACK inside a
      // READ's PSN range cannot come from a conforming responder: a lost response too.
      if (!waits || Psn::before(upto, s.first_psn)) return true;
    }
    if (waits) {
      ++lc(qp).counters.implied_naks;
      requester_loss_lc(qp);
      const Psn from = s.first_psn + static_cast<int32_t>(s.resp_pkts);
      if (lc(qp).attr.selective_repeat) {
        // Selective repeat: ask for the first missing response alone, keep the ACK, and apply
        // it once the READ / atomic completes (apply_sr_ack_lc): nothing behind it is resent.
        if (Psn::after(from, r.una)) r.una = from;
        r.sr_ack = upto;
        r.sr_ack_valid = true;
        requester_selective_nak_lc(qp, from);
        return false;
      }
      r.una = from;
      requester_rewind_lc(qp, from);
      return false;
    }
    s.done = true;
    s.wc = WcStatus::kSuccess;
  }
  return true;
}

// True when `p` is a PSN this requester has sent and not yet seen acknowledged
// (una - 1 <= p < psn): older ones are stale duplicates, newer ones are bogus.
bool acceptable_lc(const Qp& qp, Psn p) noexcept {
  return Psn::diff(p, lc(qp).req.una) >= -1 && Psn::before(p, lc(qp).req.max_sent);
}

WcStatus nak_status(uint8_t code) noexcept {
  switch (code) {
    case wire::aeth::kNakInvalidRequest:
      return WcStatus::kRemInvReqErr;
    case wire::aeth::kNakRemoteAccessError:
      return WcStatus::kRemAccessErr;
    case wire::aeth::kNakRemoteOperationalError:
      return WcStatus::kRemOpErr;
    case wire::aeth::kNakInvalidRdRequest:
      return WcStatus::kRemInvRdReqErr;
    default:
      return WcStatus::kBadRespErr;  // reserved NAK codes
  }
}

void on_ack_lc(Endpoint& ep, Qp& qp, Psn p, uint8_t syndrome, uint32_t msn, uint64_t now) noexcept {
  auto& r = lc(qp).req;
  if (!acceptable_lc(qp, p)) {
    ++lc(qp).counters.dropped_stale;
    return;
  }
  const uint8_t type = syndrome & wire::aeth::kTypeMask;
  const uint8_t value = syndrome & wire::aeth::kValueMask;
  if (type == wire::aeth::kAck) {
    ++lc(qp).counters.acks_received;
    const Psn before = r.una;
    if (ack_through_lc(qp, p) && Psn::after(p + 1, r.una)) r.una = p + 1;
    // The requester may be retransmitting packets this ACK already covers: skip ahead.
    if (Psn::before(r.psn, r.una)) requester_rewind_lc(qp, r.una);
    // Only new PSNs count as progress: a stream of duplicate ACKs must not hold the timer off.
    if (r.una != before) progress_lc(qp, before, now);
    return;
  }
  // NAKs carry the PSN of the request they refuse; everything before it was received.
  const Psn una_before = r.una;
  const bool ok_before = ack_through_lc(qp, p - 1);
  if (ok_before && Psn::after(p, r.una)) r.una = p;
  // A NAK that acknowledges new PSNs is forward progress: the retry counters count retries
  // without progress (rxe reset_retry_counters()), so they start again from here.
  const bool progressed = r.una != una_before;
  if (progressed) requester_progress_lc(qp, static_cast<uint32_t>(Psn::diff(r.una, una_before)));
  if (type == wire::aeth::kRnrNak) {
    ++lc(qp).counters.rnr_naks_received;
    if (!ok_before) return;  // an implied NAK already rewound further back
    SendSlot* s = first_pending_lc(qp);
    if (r.rnr_left == 0) {
      qp_fail_lc(ep, qp, s, WcStatus::kRnrRetryExcErr, "RNR NAK retries exhausted",
                 static_cast<int16_t>(wire::aeth::kRnrNak | value));
      return;
    }
    if (lc(qp).attr.rnr_retry != 7) --r.rnr_left;  // 7 = retry forever (IBTA §9.7.5.2.8)
    requester_rewind_lc(qp, p);
    r.rnr_deadline = now + tsc_from_ns(uint64_t{rnr_timer_us(value)} * 1000);
    r.ack_deadline = r.probe_deadline = 0;
    return;
  }
  if (type != wire::aeth::kNak) {
    ++lc(qp).counters.dropped_stale;  // reserved syndrome type
    return;
  }
  if (value < 4) ++lc(qp).counters.naks_received[value];
  if (value == wire::aeth::kNakPsnSeqError) {
    if (!ok_before) return;
    if (lc(qp).attr.selective_repeat) {
      // The responder holds what followed; its MSN field names a PSN it misses (reorder.h).
      requester_selective_nak_lc(qp, Psn(msn));
      r.gap_retry = false;
      if (progressed) requester_update_timer_lc(qp, now);
      return;
    }
    // Go-back-N from the responder's expected PSN, counted against retry_cnt (rocev2.md §3.6).
    if (!progressed) {
      if (r.retry_left == 0) {
        qp_fail_lc(ep, qp, first_pending_lc(qp), WcStatus::kRetryExcErr,
                   "PSN sequence error NAK retries exhausted");
        return;
      }
      --r.retry_left;
    }
    r.gap_retry = false;
    requester_loss_lc(qp);
    requester_rewind_lc(qp, p);
    requester_update_timer_lc(qp, now);
    return;
  }
  // Invalid request, remote access, remote operational: the WQE holding PSN p fails and the QP
  // enters ERR (IBTA §9.9.3; rocev2.md §3.7).
  qp_fail_lc(ep, qp, first_pending_lc(qp), nak_status(value), "NAK received",
             static_cast<int16_t>(wire::aeth::kNak | value));
}

// The opening shared by READ responses and ATOMIC ACKs. A response acknowledges every request
// before it (IBTA §9.7.5.1.1), so the SEND/WRITE slots ending before `p` complete; the response
// is then for the first slot still pending. Returns that slot, or null when the response is stale
// (a PSN not outstanding, no slot pending, or `p` before the slot: counted as dropped_stale).
SendSlot* response_slot_lc(Qp& qp, Psn p) noexcept {
  if (!acceptable_lc(qp, p)) {
    ++lc(qp).counters.dropped_stale;
    return nullptr;
  }
  SendSlot* s = first_pending_lc(qp);
  while (s != nullptr && !wr_has(s->wqe.opcode, wr_mask::kReadOrAtomic) &&
         Psn::before(s->last_psn, p)) {
    s->done = true;
    s->wc = WcStatus::kSuccess;
    s = first_pending_lc(qp);
  }
  if (s == nullptr || Psn::before(p, s->first_psn)) {
    ++lc(qp).counters.dropped_stale;
    return nullptr;
  }
  return s;
}

// Selective repeat: the ACK an incomplete READ / atomic stopped (ack_through_lc), once it is done.
void apply_sr_ack_lc(Qp& qp) noexcept {
  auto& r = lc(qp).req;
  if (!r.sr_ack_valid) return;
  r.sr_ack_valid = false;
  if (Psn::before(r.sr_ack, r.una)) return;
  if (ack_through_lc(qp, r.sr_ack) && Psn::after(r.sr_ack + 1, r.una)) r.una = r.sr_ack + 1;
}

// Selective repeat: a response ahead of `expected` (the next one the oldest pending READ /
// atomic wants) is held (reorder.h), and each response PSN it shows missing is asked for again
// once, alone (resend_selected_lc re-requests that one READ response packet, or the atomic).
// Returns whether `m` was kept.
bool hold_response_lc(Endpoint& ep, Qp& qp, rte_mbuf* m, const wire::ParsedFrame& f, Psn p,
                      Psn expected) noexcept {
  auto& r = lc(qp).req;
  constexpr int32_t kMaxAsksPerPacket = 16;  // a longer run lost: the probe covers the rest
  const Psn base = reorder_reported_lc(r.held, expected);
  const Hold h = reorder_hold_lc(ep, r.held, m, f, p, expected);
  if (h == Hold::kHeld) ++lc(qp).counters.ooo_held;
  if (h == Hold::kCopy) ++lc(qp).counters.dropped_stale;
  const int32_t gap = Psn::diff(p, base);
  for (int32_t k = 1; k < gap && k <= kMaxAsksPerPacket; ++k)
    requester_selective_nak_lc(qp, base + k);
  if (gap > 0) r.held.high = p;
  if (h == Hold::kNo) {
    ++lc(qp).counters.ooo_dropped;
    requester_selective_nak_lc(qp, p);
  }
  return h != Hold::kNo;
}

// Selective repeat (the caller checked it is on): whether response `p` is ahead of what slot `s`
// (the first pending) waits for; then it is held, and *kept says whether the frame was.
[[gnu::cold]] bool held_early_lc(Endpoint& ep, Qp& qp, SendSlot& s, const wire::ParsedFrame& f,
                                 Psn p, rte_mbuf* m, uint64_t now, bool* kept) noexcept {
  if (m == nullptr || !wr_has(s.wqe.opcode, wr_mask::kReadOrAtomic)) return false;
  const Psn expected = s.first_psn + static_cast<int32_t>(s.resp_pkts);
  if (!Psn::after(p, expected)) return false;
  *kept = hold_response_lc(ep, qp, m, f, p, expected);
  requester_overtaken_lc(qp, s, expected, p, now);
  return true;
}

void on_read_response_lc(Endpoint& ep, Qp& qp, const wire::ParsedFrame& f, Psn p, uint64_t now,
                         rte_mbuf* m, bool* kept) noexcept {
  auto& r = lc(qp).req;
  SendSlot* s = response_slot_lc(qp, p);
  if (s == nullptr) return;
  if (lc(qp).attr.selective_repeat && held_early_lc(ep, qp, *s, f, p, m, now, kept)) [[unlikely]]
    return;
  if (s->wqe.opcode != WrOpcode::kRead || Psn::after(p, s->last_psn)) {
    if (wr_has(s->wqe.opcode, wr_mask::kReadOrAtomic) && Psn::after(p, s->last_psn)) {
      // A response beyond this READ/ATOMIC: its own response was lost (implied NAK).
      if (!r.gap_retry) {
        ++lc(qp).counters.implied_naks;
        r.gap_retry = true;
        requester_loss_lc(qp);
        requester_rewind_lc(qp, s->first_psn + static_cast<int32_t>(s->resp_pkts));
      }
      return;
    }
    // A READ response for a SEND/WRITE: the responder is broken (rocev2.md §3.6).
    qp_fail_lc(ep, qp, s, WcStatus::kBadRespErr, "READ response for a SEND or WRITE");
    return;
  }
  const Psn expected = s->first_psn + static_cast<int32_t>(s->resp_pkts);
  if (p != expected) {
    if (Psn::before(p, expected)) {
      ++lc(qp).counters.dropped_stale;  // duplicate response of a re-requested READ
    } else if (!r.gap_retry) {
      // A missing response packet: re-request the rest right away instead of waiting for the
      // ACK timer (allowed, and faster: rocev2.md §3.6).
      ++lc(qp).counters.implied_naks;
      r.gap_retry = true;
      requester_loss_lc(qp);
      requester_rewind_lc(qp, expected);
    }
    return;
  }
  const uint32_t mtu = lc(qp).attr.path_mtu;
  const uint32_t k = s->resp_pkts;
  const uint32_t off = k * mtu;
  const uint32_t want = s->wqe.length - off < mtu ? s->wqe.length - off : mtu;
  if (f.l.payload_len != want) {
    qp_fail_lc(ep, qp, s, WcStatus::kBadRespErr, "READ response of the wrong length");
    return;
  }
  // The local buffers of a READ must allow local write (IBTA §10.6.3.1).
  const WcStatus w = scatter_lc(ep.mrs(), qp.config().pd, s->wqe.sge, s->wqe.num_sge, off,
                                f.payload().data(), want, access::kLocalWrite);
  if (w != WcStatus::kSuccess) {
    qp_fail_lc(ep, qp, s, WcStatus::kLocProtErr, "READ response into a buffer without local write");
    return;
  }
  r.gap_retry = false;
  // Round trips only from responses that just arrived: one released from the reorder buffer
  // (m null) waited there for a hole to be filled, and its sample took the recovery in with it
  // (srtt grew from 2 ms to 19 ms in one 64 KiB read_bw at 5 % loss, and the probes with it).
  if (k == 0 && !s->resent && m != nullptr) requester_rtt_sample_lc(qp, s->sent_tsc, now);
  ++s->resp_pkts;
  const Psn before = r.una;
  r.una = p + 1;
  if (s->resp_pkts == s->npkts) {
    s->done = true;
    s->wc = WcStatus::kSuccess;
    --r.rd_atomic_outstanding;
    // NDK_OP_FLAG_RDMA_READ_LOCAL_INVALIDATE: invalidate the first local SGE's token on success.
    if ((s->wqe.flags & op_flag::kRdmaReadLocalInvalidate) && s->wqe.num_sge != 0)
      (void)ep.mrs().invalidate(s->wqe.sge[0].token, qp.config().pd);
    apply_sr_ack_lc(qp);
  }
  progress_lc(qp, before, now);
}

void on_atomic_ack_lc(Endpoint& ep, Qp& qp, const wire::ParsedFrame& f, Psn p, uint64_t now,
                      rte_mbuf* m, bool* kept) noexcept {
  auto& r = lc(qp).req;
  SendSlot* s = response_slot_lc(qp, p);
  if (s == nullptr) return;
  if (lc(qp).attr.selective_repeat && held_early_lc(ep, qp, *s, f, p, m, now, kept)) [[unlikely]]
    return;
  if (s->first_psn != p || !wr_has(s->wqe.opcode, wr_mask::kAtomic)) {
    if (wr_has(s->wqe.opcode, wr_mask::kReadOrAtomic) && Psn::after(p, s->last_psn)) {
      // Once per gap, as for READ responses: every later response of the same gap would
      // otherwise rewind again, and with up to 128 atomics outstanding one lost response made
      // the requester resend the rest of its window once per response behind it (64 QPs of
      // atomic_bw at 5 % loss ran out of retries under the load; issue 18).
      if (!r.gap_retry) {
        ++lc(qp).counters.implied_naks;
        r.gap_retry = true;
        requester_rewind_lc(qp, s->first_psn + static_cast<int32_t>(s->resp_pkts));
      }
      return;
    }
    qp_fail_lc(ep, qp, s, WcStatus::kBadRespErr, "ATOMIC ACK for a request that is not atomic");
    return;
  }
  r.gap_retry = false;
  if (!s->resent && m != nullptr) requester_rtt_sample_lc(qp, s->sent_tsc, now);  // as READ's
  const uint64_t orig = f.atomic_ack().orig.get();
  // The original value lands in the local 8-byte buffer in host order (verbs semantics).
  const WcStatus w =
      scatter_lc(ep.mrs(), qp.config().pd, s->wqe.sge, s->wqe.num_sge, 0,
                 reinterpret_cast<const uint8_t*>(&orig), sizeof(orig), access::kLocalWrite);
  s->done = true;
  s->wc = w == WcStatus::kSuccess ? WcStatus::kSuccess : WcStatus::kLocProtErr;
  --r.rd_atomic_outstanding;
  const Psn before = r.una;
  r.una = p + 1;
  if (s->wc != WcStatus::kSuccess) {
    qp_fail_lc(ep, qp, nullptr, s->wc, "ATOMIC result into a buffer without local write");
    return;
  }
  apply_sr_ack_lc(qp);
  progress_lc(qp, before, now);
}

// Selective repeat: the response the first pending READ / atomic waits for, or false.
bool next_response_lc(Qp& qp, Psn* out) noexcept {
  auto& r = lc(qp).req;
  for (uint64_t i = r.head; i != r.tail; ++i) {
    const SendSlot& s = r.at(i);
    if (!s.started) return false;
    if (s.done || !wr_has(s.wqe.opcode, wr_mask::kReadOrAtomic)) continue;
    *out = s.first_psn + static_cast<int32_t>(s.resp_pkts);
    return true;
  }
  return false;
}

// Selective repeat: frames are held and a response arrived in `m` (null: one this released;
// `kept`: held itself). The held responses that are now next run as if they had just arrived;
// those a go-back-N pass made stale (before una) are let go.
[[gnu::cold]] void drain_responses_lc(Endpoint& ep, Qp& qp, const rte_mbuf* m, bool kept,
                                      uint64_t now) noexcept {
  auto& r = lc(qp).req;
  if (m == nullptr || kept) return;
  reorder_skip_lc(ep, r.held, r.una - static_cast<int32_t>(kReorderSlots), r.una);
  Psn next;
  while (r.held.count != 0 && next_response_lc(qp, &next)) {
    wire::ParsedFrame hf;
    rte_mbuf* h = reorder_take_lc(ep, r.held, next, &hf);
    if (h == nullptr) return;
    (void)completer_rx_lc(ep, qp, hf, nullptr, now);  // null: no drain of its own
    rte_pktmbuf_free(h);
    if (lc(qp).state != QpState::kRts && lc(qp).state != QpState::kSqd) return;
  }
}

}  // namespace

bool completer_rx_lc(Endpoint& ep, Qp& qp, const wire::ParsedFrame& f, rte_mbuf* m,
                     uint64_t now) noexcept {
  if (lc(qp).state != QpState::kRts && lc(qp).state != QpState::kSqd) {
    ++lc(qp).counters.dropped_bad_state;
    return false;
  }
  const Psn p(wire::Bth::Psn::get(f.bth()));
  bool kept = false;
  switch (f.opcode) {
    case wire::opc::kAcknowledge:
      on_ack_lc(ep, qp, p, static_cast<uint8_t>(wire::Aeth::Syndrome::get(f.aeth())),
                wire::Aeth::Msn::get(f.aeth()), now);
      break;
    case wire::opc::kAtomicAcknowledge:
      on_atomic_ack_lc(ep, qp, f, p, now, m, &kept);
      break;
    default:  // READ RESPONSE FIRST / MIDDLE / LAST / ONLY
      on_read_response_lc(ep, qp, f, p, now, m, &kept);
      break;
  }
  if (lc(qp).req.held.count != 0) [[unlikely]] {
    drain_responses_lc(ep, qp, m, kept, now);
    if (m != nullptr && lc(qp).req.held.count != 0) requester_quiet_lc(qp, now);
  }
  qp_retire_lc(ep, qp);
  return kept;
}

}  // namespace urnic::dp

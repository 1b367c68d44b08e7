// Selective repeat: the reorder buffer (urnic extension, issue 15 item 5), the responder's for
// requests and the requester's for READ responses and ATOMIC ACKs (completer.cc).
//
// IBTA §9.7.5.1.1 has an RC responder drop every request packet past ePSN and NAK the first
// one (PSN sequence error), so one lost packet costs the requester everything it sent after it
// (go-back-N). Between two urnic QPs that agreed on selective repeat (QpAttr::selective_repeat),
// a packet that arrives ahead of ePSN is held instead - the mbuf itself, no copy - and the
// missing PSN is NAKed; once the hole is filled, the held packets run through the responder's
// checks in PSN order, exactly as if they had just arrived. So every rule of the in-order
// responder (opcode sequence, lengths, R_Key checks at the first packet, exactly-once execution,
// MSN, the receive WQE order, atomics and READ replay) holds unchanged, and the requester resends
// only the holes (requester.cc, resend_selected_lc) - IRN's recovery (Mittal et al., SIGCOMM
// 2018) without its per-packet RETH: standard MIDDLE packets carry no address, so out-of-order
// frames wait in PSN order rather than being placed on arrival.
//
// Each NAK is a PSN sequence error NAK for ePSN (so it acknowledges everything before it) that
// names, in the AETH MSN field, one PSN the responder misses: every PSN an early packet shows
// missing is NAKed once, as IRN's receiver reports each out-of-order arrival, so several holes
// are resent in parallel instead of one per round trip. The requester resends each named PSN once
// (requester.cc); a lost NAK or a lost resend is repaired by the probe (the oldest unacknowledged
// packet resent alone after two round trips without progress), and the timeout itself still
// ends in go-back-N. On the requester, a response ahead of the one expected is held the same way
// and each missing one is asked for again alone (a one-packet READ re-request) while later
// responses of its READ are held; a READ with none held is asked for again from its first
// missing response to its end (requester.cc, resend_one_lc).
#pragma once

#include <rte_mbuf.h>

#include <cstdint>

#include "dataplane/endpoint.h"
#include "dataplane/qp.h"
#include "dataplane/wire/frame.h"
#include "dataplane/wire/psn.h"

namespace urnic::dp {

// Holds `m` (a packet with PSN `psn`, ahead of `expected`, the PSN wanted next): kHeld; kCopy
// when a frame with that PSN is held already (`m` is freed); kNo when it cannot be held - too far
// ahead, or the adapter's share of held frames is used up (Endpoint::reorder_acquire) - and the
// caller frees it.
// `f` is the frame parsed: it is kept in the mbuf's headroom (unused on receive), so that
// releasing the frame costs a 40-byte copy rather than a second parse.
enum class Hold : uint8_t { kNo, kHeld, kCopy };
Hold reorder_hold_lc(Endpoint& ep, ReorderBuf& b, rte_mbuf* m, const wire::ParsedFrame& f,
                     wire::Psn psn, wire::Psn expected) noexcept;
// The last PSN whose absence was reported already: the highest seen ahead while frames are held,
// else the one before `expected`.
inline wire::Psn reorder_reported_lc(const ReorderBuf& b, wire::Psn expected) noexcept {
  return b.count == 0 || wire::Psn::before(b.high, expected) ? expected - 1 : b.high;
}
// Whether a frame with a PSN in (from, to] is held (at most kReorderSlots PSNs are looked at).
inline bool reorder_holds_after_lc(const ReorderBuf& b, wire::Psn from, wire::Psn to) noexcept {
  if (b.count == 0) return false;
  wire::Psn q = from + 1;
  for (uint32_t n = 0; n < kReorderSlots && !wire::Psn::after(q, to); ++n, q = q + 1) {
    const uint32_t i = q.value() % kReorderSlots;
    if (b.frame[i] != nullptr && b.psn[i] == q.value()) return true;
  }
  return false;
}
// The held frame for `expected`, removed from the buffer and parsed into *f (the caller processes
// and frees it), or null.
rte_mbuf* reorder_take_lc(Endpoint& ep, ReorderBuf& b, wire::Psn expected,
                          wire::ParsedFrame* f) noexcept;
// Frees held frames for PSNs in [from, to): PSNs passed without them (a READ's range at the
// responder; responses a go-back-N pass brought again at the requester).
void reorder_skip_lc(Endpoint& ep, ReorderBuf& b, wire::Psn from, wire::Psn to) noexcept;
// Frees every held frame (RESET, ERR, teardown).
void reorder_clear_lc(Endpoint& ep, ReorderBuf& b) noexcept;

}  // namespace urnic::dp

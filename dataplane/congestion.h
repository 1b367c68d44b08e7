// Congestion control glue between the wire and a QP's DCQCN state (urnic/congestion.h;
// rocev2.md §5): the ECN codepoint of what a QP sends, the notification point (a CE-marked
// frame makes the QP send a CNP, rate-limited) and the delivery of received CNPs to the
// reaction point (dcqcn.h). The requester and the READ responder pace through lc(qp).dcqcn.
#pragma once

#include <cstdint>

#include "dataplane/qp.h"
#include "dataplane/wire/frame.h"
#include "urnic/congestion.h"

namespace urnic::dp {

class Endpoint;

// IP ECN codepoints (RFC 3168 §5).
inline constexpr uint8_t kEcnMask = 0x3, kEcnNotEct = 0x0, kEcnEct0 = 0x2, kEcnCe = 0x3;

// The traffic class a QP's frames carry for the one its address vector asks for: the configured
// DSCP (or the address vector's), and ECT(0) with congestion control on, Not-ECT without (a
// sender that cannot react must not claim ECN capability, RFC 3168 §6.1.1).
constexpr uint8_t cc_traffic_class(const CongestionConfig& cc, uint8_t tc) noexcept {
  const uint8_t dscp = cc.dscp >= 0 ? static_cast<uint8_t>(cc.dscp << 2) : (tc & ~kEcnMask);
  return static_cast<uint8_t>(dscp | (cc.enabled ? kEcnEct0 : kEcnNotEct));
}

// The ECN field of a parsed frame.
inline uint8_t frame_ecn(const wire::ParsedFrame& f) noexcept {
  const uint8_t tc =
      f.l.ipv6 ? static_cast<uint8_t>(wire::Ipv6Hdr::TrafficClass::get(f.ipv6())) : f.ipv4().tos;
  return tc & kEcnMask;
}

// Notification point: `f`, for `qp`, arrived CE-marked at `now`. Counts it and, with congestion
// control on, sends a CNP to the peer QP unless one went less than cnp_interval_us ago.
void cc_on_ce_lc(Endpoint& ep, Qp& qp, uint64_t now) noexcept;

// A CNP (BTH opcode 0x81) for `qp` arrived at `now`: the reaction point cuts the QP's rate
// (congestion control on) or only counts it (off).
void cc_on_cnp_lc(Qp& qp, uint64_t now) noexcept;

// Reaction point pacing of a QP's data frames (requests and READ responses; ACKs are not paced):
// whether the next may leave at `now`, and the accounting once one of `bytes` has left. At the
// maximum rate both are a single predictable branch.
inline bool cc_may_send(Qp& qp, uint64_t now) noexcept { return lc(qp).dcqcn.may_send(now); }
inline void cc_sent(Qp& qp, uint64_t bytes, uint64_t now) noexcept {
  lc(qp).dcqcn.on_sent(static_cast<uint32_t>(bytes), now);
}
// QpCounters::cc_paced_mbps from the reaction point's state (0 while unpaced).
inline void cc_publish_rate_lc(Qp& qp) noexcept {
  const Dcqcn& d = lc(qp).dcqcn;
  lc(qp).counters.cc_paced_mbps = d.limited() ? static_cast<uint64_t>(d.rate_mbps()) : 0;
}
// Before a QP sends: apply the DCQCN timers (alpha updates, rate increases) that fell due.
inline void cc_advance_lc(Qp& qp, uint64_t now) noexcept {
  if (!lc(qp).dcqcn.limited()) [[likely]]
    return;
  lc(qp).dcqcn.advance(now);
  cc_publish_rate_lc(qp);
}
// (Re)starts the QP's congestion state from its settings (QpAttr::cc): DCQCN at its maximum
// rate, no CNP sent yet. At creation, at reset, and when a modify gives new settings.
void cc_reset_lc(Qp& qp) noexcept;

}  // namespace urnic::dp

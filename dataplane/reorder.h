// Selective repeat, responder side: the reorder buffer (urnic extension, issue 15 item 5).
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
// Each NAK names the hole (BTH PSN = ePSN, acknowledging everything before it) and, in the AETH
// MSN field, the PSN of the packet that triggered it (IRN's NACK carries the same pair). The
// first early packet of a hole triggers one at once; later ones with AckReq set trigger another,
// so a lost NAK or a lost resend is seen within the next few packets instead of at the local ACK
// timeout.
#pragma once

#include <rte_mbuf.h>

#include <cstdint>

#include "dataplane/endpoint.h"
#include "dataplane/qp.h"
#include "dataplane/wire/psn.h"

namespace urnic::dp {

// Holds `m` (a request packet with PSN `psn`, ahead of ePSN). False when it cannot be held: too
// far ahead, or the adapter's share of held frames is used up (Endpoint::reorder_room); the
// caller frees it. A copy of a frame already held is freed here (and counts as held).
bool reorder_hold_lc(Endpoint& ep, Qp& qp, rte_mbuf* m, wire::Psn psn) noexcept;
// The held frame for ePSN, removed from the buffer (the caller processes and frees it), or null.
rte_mbuf* reorder_take_lc(Endpoint& ep, Qp& qp) noexcept;
// Frees held frames for PSNs in [from, to): PSNs a READ consumed, which no conforming requester
// sends, so they can never be processed.
void reorder_skip_lc(Endpoint& ep, Qp& qp, wire::Psn from, wire::Psn to) noexcept;
// Frees every held frame (RESET, ERR, teardown).
void reorder_clear_lc(Endpoint& ep, Qp& qp) noexcept;

}  // namespace urnic::dp

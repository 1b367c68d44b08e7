// Cross-file internals of the RC stages (like rxe_loc.h). Every function here runs on the
// engine lcore that owns the QP (suffix _lc, house style rule 17), is noexcept and does not
// allocate except mbufs from the endpoint's mempool.
#pragma once

#include <rte_mbuf.h>

#include <cstdint>

#include "dataplane/cq.h"
#include "dataplane/endpoint.h"
#include "dataplane/mr.h"
#include "dataplane/qp.h"
#include "dataplane/wire/frame.h"

namespace urnic::dp {

// ---- qp_datapath.cc: state, completions, frames ---------------------------------------------

// kSetNextHop: the QP's frames carry `mac` as their destination from now on (its net template
// rebuilt); a QP without an address vector yet (before RTR) ignores it.
void qp_set_next_hop_lc(Qp& qp, const wire::MacAddr& mac) noexcept;
// Applies a validated modify on the lcore (the single writer of QP state). `grow`: larger
// responder arrays for a modify that sets max_dest_rd_atomic (kInsufficientResources without
// them when the QP's are too small); the old ones are handed back in it.
Status qp_modify_lc(Endpoint& ep, Qp& qp, const QpAttr& attr, uint32_t mask,
                    RespArrays* grow = nullptr) noexcept;
// Why a QP enters ERR, for the one log line the transition writes (urnic.dp): what happened,
// the completion status that caused it and, for a NAK sent or received, its AETH syndrome.
// `requested`: the consumer or the CM asked for ERR (modify, flush), logged at DEBUG; anything
// else is an error of the connection, logged at INFO.
struct ErrCause {
  const char* what = "flush requested";  // a string literal
  WcStatus wc = WcStatus::kWrFlushErr;
  int16_t syndrome = -1;  // -1: no NAK involved
  bool requested = true;
};
// Moves the QP to ERR: every outstanding and queued WQE completes with WR_FLUSH_ERR (in posting
// order, send queue then receive queue), and the rings are drained (IBTA §10.3.1 error state).
// The transition (not a repeat in ERR) logs `why`. The default is the engine's NdkFlush.
void qp_to_error_lc(Endpoint& ep, Qp& qp, const ErrCause& why = {}) noexcept;
// The oldest send slot started and not yet done (the oldest request still waiting for its ACK
// or response), or nullptr.
// Inline: the completer asks for it on every response.
inline SendSlot* first_pending_lc(Qp& qp) noexcept {
  auto& r = lc(qp).req;
  for (uint64_t i = r.head; i != r.tail; ++i) {
    SendSlot& s = r.at(i);
    if (!s.started) return nullptr;
    if (!s.done) return &s;
  }
  return nullptr;
}
// A failed send queue request (IBTA §9.9.3, §10.8.3.3): slot `s` (when not null) is done with
// `wc`, the done slots retire with their completions, and the QP enters ERR, its log line
// saying `what` (and the NAK `syndrome`, -1 for none).
void qp_fail_lc(Endpoint& ep, Qp& qp, SendSlot* s, WcStatus wc, const char* what,
                int16_t syndrome = -1) noexcept;
// True when a CQ this QP completes into has overrun: the CQ and every QP attached to it are
// dead (ndkpi.md §3.3). Two loads of a flag written once; the engine checks it for each received
// packet and each QP step, so a QP stops at once, not only when it next completes something.
inline bool qp_cq_overrun(const Qp& qp) noexcept {
  const Cq* s = qp.config().send_cq;
  const Cq* r = qp.config().recv_cq;
  return (s != nullptr && s->overrun()) || (r != nullptr && r->overrun());
}
// The QP's CQ has overrun: ERR, with the flush completions refused by the CQ (counted in
// QpCounters::completions_dropped). Counted in QpCounters::cq_overrun_errors.
void qp_cq_overrun_error_lc(Endpoint& ep, Qp& qp) noexcept;
// Retires done send slots from the head in order, writing completions (none for successful
// SILENT_SUCCESS requests, IBTA §10.7.3.1 / NDK_OP_FLAG_SILENT_SUCCESS). Returns slots retired.
uint32_t qp_retire_lc(Endpoint& ep, Qp& qp) noexcept;
// Completes the WQE at the head of the SQ (a datagram's, or one flushed): frees its slot, then
// retires it and writes its completion (none for a successful SILENT_SUCCESS request).
void qp_complete_sq_head_lc(Qp& qp, WcStatus wc) noexcept;
// Writes one receive completion (`src_qpn`: a datagram's sender, kResultDatagram).
void qp_complete_recv_lc(Qp& qp, const RecvWqe& wqe, WcStatus wc, uint32_t bytes,
                         OperationType type, uint32_t imm, uint32_t flags, uint64_t type_specific,
                         uint32_t src_qpn = 0) noexcept;

// Allocates an mbuf and writes the headers of a frame with addresses `net` carrying
// `payload_len` bytes. Returns the mbuf and, in *payload, where the payload goes; null (counted
// in mbuf_alloc_failures) on mempool exhaustion.
rte_mbuf* frame_lc(Endpoint& ep, const wire::NetHeaders& net, const wire::TransportHeaders& th,
                   uint32_t payload_len, uint8_t** payload) noexcept;
// frame_lc with the QP's address vector.
rte_mbuf* qp_frame_lc(Endpoint& ep, Qp& qp, const wire::TransportHeaders& th, uint32_t payload_len,
                      uint8_t** payload) noexcept;
// The fused ICRC (issue 13): payloads from kFuseMinPayload bytes are run through the ICRC while
// they are copied into the frame (gather_lc / MrTable::copy_out_crc); below, one CRC over the
// whole frame after the copy costs fewer instructions (bench/cost, 64 B WRITE: 3 235 separate,
// 3 359 fused). qp_fused_crc_lc() starts the register over the headers qp_frame_lc() wrote, in
// *state, and returns state; or null when the payload is too short to fuse.
inline constexpr uint32_t kFuseMinPayload = 512;
uint32_t* qp_fused_crc_lc(const Qp& qp, const rte_mbuf* m, uint8_t opcode, uint32_t payload_len,
                          uint32_t* state) noexcept;
// Pads, computes the ICRC (or finishes the fused register `crc`, when not null) and queues the
// frame for transmission.
void qp_send_frame_lc(Endpoint& ep, Qp& qp, rte_mbuf* m, uint8_t opcode, uint32_t payload_len,
                      const uint32_t* crc = nullptr) noexcept;
// A BTH for a frame from this QP to its peer.
wire::TransportHeaders qp_headers(const Qp& qp, uint8_t opcode, wire::Psn psn,
                                  bool ack_req) noexcept;

// Copies bytes [off, off + len) of a send WQE's payload (SGE gather list or inline data) to
// `dst`, checking each local key (LocalRead), and (crc non-null) runs the CRC register *crc over
// them in the same pass. kLocProtErr on a bad key or range.
WcStatus gather_lc(const MrTable& mrs, uint32_t pd, const SendWqe& wqe, uint32_t off, uint32_t len,
                   uint8_t* dst, uint32_t* crc) noexcept;
// Copies `len` bytes from `src` into an SGE list at byte offset `off`, checking each key for
// `access` (LocalWrite). kLocProtErr on a bad key or range, kLocLenErr when the list is too
// short.
WcStatus scatter_lc(const MrTable& mrs, uint32_t pd, const Sge* sge, uint32_t nsge, uint32_t off,
                    const uint8_t* src, uint32_t len, uint32_t access) noexcept;

// ---- datagram.cc: unreliable-datagram QPs (QpConfig::ud) ----------------------------------------

// Sends queued datagrams, one frame each, within `budget`; each completes as it is queued.
uint32_t datagram_tx_lc(Endpoint& ep, Qp& qp, uint32_t budget) noexcept;
// Delivers a UD SEND ONLY frame (checked: ICRC, opcode) addressed to the datagram QP `qp`.
void datagram_rx_lc(Endpoint& ep, Qp& qp, const wire::ParsedFrame& f) noexcept;

// ---- requester.cc -----------------------------------------------------------------------------

// Moves WQEs from the SQ ring into the slot array, executes local operations (fast-register,
// local invalidate) in order, and segments messages into frames within `budget`. Returns
// frames built.
uint32_t requester_tx_lc(Endpoint& ep, Qp& qp, uint32_t budget, uint64_t now) noexcept;
// Go-back-N: restart transmission at `psn` (the oldest unacknowledged PSN, or a NAK's PSN).
void requester_rewind_lc(Qp& qp, wire::Psn psn) noexcept;
// Selective repeat: takes a round-trip sample when the progress passed the packet being timed.
void requester_rtt_lc(Qp& qp, uint64_t now) noexcept;
// One round-trip sample (TSC ticks) into the estimator: a READ's first response or an atomic's,
// timed from its request's send when it went out once (Karn). Each such response is one, so a
// deep pipeline of them keeps the estimate current where the one-at-a-time sample below
// (rtt_psn) is mostly cancelled by the resends around it.
void requester_rtt_sample_lc(Qp& qp, uint64_t sent, uint64_t now) noexcept;
// Recomputes the cached timer intervals (the local ACK timeout and the probe's wait, in TSC
// ticks) after what they derive from changed: the timeout attribute, the smoothed round trip,
// the probe backoff. Keeps the conversions off the per-response path.
void requester_retime_lc(Qp& qp) noexcept;
// Arms / re-arms / disarms the local ACK timer after progress.
void requester_update_timer_lc(Qp& qp, uint64_t now) noexcept;
// Forward progress: `acked` PSNs newly acknowledged. Resets the retry counters and regrows a
// send window that repeated timeouts shrank (QpConfig::adaptive_retransmit).
void requester_progress_lc(Qp& qp, uint32_t acked) noexcept;
// A loss the peer reported (sequence-error NAK) or the requester inferred (a READ response gap,
// an implied NAK): with adaptive retransmission, halves the send window once per window of PSNs.
void requester_loss_lc(Qp& qp) noexcept;
// Selective repeat (reorder.h): the peer NAKed `hole` (the AETH MSN field of its sequence-error
// NAK). Queues it to be resent alone, unless it was resent already (then the probe, an eighth of
// the local ACK timeout without progress, resends the oldest packet).
void requester_selective_nak_lc(Qp& qp, wire::Psn hole) noexcept;
// Selective repeat: response `p` arrived ahead of `expected`, the one the first pending READ /
// atomic `s` waits for, which was resent. Responses return in the order requests were sent, so
// when `p` answers a request sent after that resend, the resend or its response was lost: it goes
// again now (RFC 8985's rule, with send times) instead of at the probe, one or more round trips
// later (64 KiB read_bw at 5 % loss through urnic-hop: most of the time went to probes).
void requester_overtaken_lc(Qp& qp, SendSlot& s, wire::Psn expected, wire::Psn p,
                            uint64_t now) noexcept;
// Selective repeat, responses held behind a hole after a response that just arrived: the probe
// goes once nothing more arrives for two idle round trips (QpLc::Requester::min_rtt), rather than
// two smoothed ones after the oldest request's send. When the held responses were the last ones
// on their way, a lost resend (or a lost last packet of a READ) shows no other way, and the
// smoothed round trip of a full pipeline is its queueing: 64 KiB read_bw at 5 % loss through
// urnic-hop waited 2-7 ms per such hole with an idle round trip of well under one.
void requester_quiet_lc(Qp& qp, uint64_t now) noexcept;
// Local ACK timeout and RNR wait; returns whether anything happened.
bool requester_timers_lc(Endpoint& ep, Qp& qp, uint64_t now) noexcept;

// ---- responder.cc -----------------------------------------------------------------------------

// responder_rx_lc runs one packet through the steps below in a short loop: each step returns
// the next one, or a terminal state that names the packet's fate. Every NAK cause is a state of
// its own (kErr*); nak_cause() in responder.cc maps each to its NAK code and receive status.
enum class RespState : uint8_t {
  // Steps, in the IBTA order.
  kChkQpState,     // QP in RTR / RTS / SQD, no fatal NAK queued, room for a response job
  kChkPsn,         // new, duplicate or out of sequence (§9.7.5.1.1)
  kChkOpSeq,       // opcode sequence inside / outside a message (§9.7.5.1.2)
  kChkOpRights,    // operation allowed by the QP's access flags
  kChkLength,      // packet payload and DMA length rules
  kChkResources,   // a receive WQE for SEND and WRITE with immediate (else RNR NAK)
  kChkRecvLength,  // the receive buffer holds the SEND's bytes
  kChkRkey,        // R_Key, bounds and rights of READ / ATOMIC / WRITE
  kExecRead,       // queue the READ responses
  kExecAtomic,     // execute the atomic, queue the ATOMIC ACK
  kExecWrite,      // place the WRITE payload
  kExecSend,       // scatter the SEND payload, complete the receive at the last packet
  kAcknowledge,    // PSN consumed; an ACK is owed when AckReq is set
  // Terminal states.
  kDone,
  kDropBadState,   // QP not receiving, or entering ERR behind a queued NAK
  kDropQueueFull,  // no room for a response: dropped, the requester retransmits
  kDuplicate,      // PSN before ePSN (§9.7.5.1.1; rocev2.md §3.5)
  kErrPsnSeq,      // PSN after ePSN: NAK PSN sequence error, once per gap (class B)
  kHold,           // PSN after ePSN with selective repeat: held, the hole NAKed (reorder.h)
  kErrRnr,         // no receive WQE: RNR NAK, PSN not consumed (§9.7.5.2.8)
  // Class C/D: the NAK goes out, then the QP enters ERR.
  kErrOpSeq,        // invalid request: opcode out of sequence
  kErrOpRights,     // invalid request: operation not enabled on the QP
  kErrPktLength,    // invalid request: payload length against the PMTU rules
  kErrDmaLength,    // invalid request: RETH DMA length above 2^31
  kErrWriteLength,  // invalid request: WRITE payload against its RETH length
  kErrRecvLength,   // invalid request: SEND longer than the receive buffer
  kErrReadRkey,     // remote access error: READ R_Key / bounds / rights
  kErrAtomicAlign,  // invalid request: atomic address not 8-byte aligned
  kErrAtomicRkey,   // remote access error: ATOMIC R_Key / bounds / rights
  kErrWriteRkey,    // remote access error: WRITE R_Key / bounds / rights
  kErrRecvProt,     // remote operational error: the receive WQE's own buffer is bad
  kErrInvalidate,   // invalid request: SEND with invalidate names a key that cannot go
  kCount,
};
const char* to_string(RespState s) noexcept;

// Handles one request packet (IBTA §9.7.5 responder checks, in order), received in `m`. Returns
// true when the responder kept `m` (selective repeat holds early packets, reorder.h); otherwise
// the caller frees it.
bool responder_rx_lc(Endpoint& ep, Qp& qp, const wire::ParsedFrame& f, rte_mbuf* m,
                     uint64_t now) noexcept;
// Emits queued responder output (READ responses, ATOMIC ACKs, NAKs, the coalesced ACK) within
// `budget` frames. Returns frames built.
uint32_t responder_tx_lc(Endpoint& ep, Qp& qp, uint32_t budget, uint64_t now) noexcept;

// ---- completer.cc -----------------------------------------------------------------------------

// Handles one response packet: ACK / NAK / RNR NAK, READ response, ATOMIC ACK, received in `m`.
// True when it kept `m` (selective repeat holds early responses); otherwise the caller frees it.
bool completer_rx_lc(Endpoint& ep, Qp& qp, const wire::ParsedFrame& f, rte_mbuf* m,
                     uint64_t now) noexcept;

// TSC ticks for a duration in nanoseconds.
uint64_t tsc_from_ns(uint64_t ns) noexcept;

}  // namespace urnic::dp

// Responder stage: request packets -> execution, ACK/NAK, READ responses (IBTA Vol. 1 §9.7.5
// responder; rxe_resp.c; rocev2.md §3.4-3.5).
//
// Checks run in the IBTA order, one check_* function per step returning the next RespState
// (internal.h; rxe_resp.c's enum resp_states), and the first failure decides the outcome:
//   PSN (new / duplicate / out of sequence) -> opcode sequence -> operation allowed by the QP's
//   access flags -> packet length rules -> receive WQE available (else RNR NAK) -> receive
//   buffer large enough -> R_Key, address and rights -> execute.
// Each failure class maps to one NAK syndrome: sequence error (class B, once per gap), invalid
// request / remote access error / remote operational error (class C-D: the QP enters ERR after
// the NAK). Nothing is written to memory unless every check for that packet passed.
//
// Output (READ responses, ATOMIC ACKs, NAKs, ACKs) is queued as jobs and emitted in PSN order by
// responder_tx_lc, so an ACK never overtakes an earlier READ response.
#include <array>
#include <atomic>
#include <type_traits>
#include <utility>

#include "dataplane/congestion.h"
#include "dataplane/internal.h"
#include "dataplane/reorder.h"
#include "dataplane/srq.h"

namespace urnic::dp {
namespace {

using wire::Psn;
namespace op = wire::op;
namespace aeth = wire::aeth;
using Kind = RespJob::Kind;
using InMsg = QpLc::Responder::InMsg;

bool jobs_full(const Qp& qp) noexcept { return lc(qp).resp.jobs_count == lc(qp).resp.jobs_cap; }
RespJob* push_job(Qp& qp, Kind kind, Psn psn) noexcept {
  auto& s = lc(qp).resp;
  if (jobs_full(qp)) return nullptr;
  RespJob& j = s.job(s.jobs_count);
  j = RespJob{};
  j.kind = kind;
  j.set_psn(psn);
  j.msn = s.msn;
  ++s.jobs_count;
  return &j;
}

// The job queued last, or null when the queue is empty.
RespJob* last_job(Qp& qp) noexcept {
  auto& s = lc(qp).resp;
  return s.jobs_count == 0 ? nullptr : &s.job(s.jobs_count - 1);
}

// An ACK is owed for `psn` (IBTA §9.7.5.1.6): coalesced with any ACK not yet sent.
void owe_ack(Qp& qp, Psn psn) noexcept {
  auto& s = lc(qp).resp;
  RespJob* const lj = last_job(qp);
  if (lj == nullptr) {
    s.ack_pending = true;
    s.ack_psn = psn;
    return;
  }
  RespJob& last = *lj;
  // An RNR NAK for psn + 1 is still to go out: it acknowledges every PSN before its own (the
  // requester completes through psn first, rocev2.md §3.6), so a duplicate arriving while it
  // waits adds nothing. Without this, duplicates alternating with retries of the NAKed PSN
  // would queue an ACK and a new RNR NAK each.
  if (last.kind == Kind::kRnrNak && last.psn() == psn + 1) return;
  if (last.kind == Kind::kAck) {
    last.set_psn(psn);
    last.msn = s.msn;
  } else if (RespJob* j = push_job(qp, Kind::kAck, psn)) {
    j->syndrome = aeth::kAckNoCredit;
  }
}

rte_mbuf* response_frame(Endpoint& ep, Qp& qp, uint8_t opcode, Psn psn, uint8_t syndrome,
                         uint32_t msn, uint32_t payload_len, uint8_t** payload) noexcept {
  auto th = qp_headers(qp, opcode, psn, false);
  wire::Aeth::Syndrome::set(th.aeth, syndrome);
  wire::Aeth::Msn::set(th.aeth, msn);
  return qp_frame_lc(ep, qp, th, payload_len, payload);
}

// Sends an ACK / NAK frame now. Returns false on mempool exhaustion.
bool send_ack_frame(Endpoint& ep, Qp& qp, Psn psn, uint8_t syndrome, uint32_t msn) noexcept {
  uint8_t* payload = nullptr;
  rte_mbuf* m = response_frame(ep, qp, wire::opc::kAcknowledge, psn, syndrome, msn, 0, &payload);
  if (m == nullptr) return false;
  qp_send_frame_lc(ep, qp, m, wire::opc::kAcknowledge, 0);
  return true;
}

// Class C/D errors: NAK the request now, then the QP enters ERR (rxe do_class_ac_error()).
// Only when no response for an earlier PSN is still owed (see fatal_nak_lc).
// When the NAK frame cannot be built now (mempool empty, TX buffer full), it becomes the only
// job: responder_tx_lc sends it as soon as an mbuf is free and then enters ERR, and requests
// are dropped meanwhile (fatal_nak_queued). Entering ERR without the NAK would leave the
// requester to time out with RETRY_EXC_ERR instead of the error the NAK code names (IBTA
// §9.7.5.2; rocev2.md §3.7). What else was queued is for later PSNs, and ERR would discard it
// anyway (IBTA §10.3.1).
void fatal_nak_now_lc(Endpoint& ep, Qp& qp, Psn psn, uint8_t code) noexcept {
  if (code < 4) ++lc(qp).counters.naks_sent[code];
  const auto syndrome = static_cast<uint8_t>(aeth::kNak | code);
  if (ep.tx_space() != 0 && send_ack_frame(ep, qp, psn, syndrome, lc(qp).resp.msn)) {
    qp_to_error_lc(ep, qp, {"NAK sent", WcStatus::kWrFlushErr, syndrome, false});
    return;
  }
  auto& s = lc(qp).resp;
  s.jobs_count = 0;
  s.ack_pending = false;  // the NAK acknowledges every earlier PSN
  if (RespJob* j = push_job(qp, Kind::kNak, psn)) j->syndrome = syndrome;
}

bool is_fatal_nak(const RespJob& j) noexcept {
  return j.kind == Kind::kNak && (j.syndrome & aeth::kValueMask) != aeth::kNakPsnSeqError;
}

// A class C/D NAK is queued (always as the last job): the QP is on its way to ERR.
bool fatal_nak_queued(const Qp& qp) noexcept {
  const auto& s = lc(qp).resp;
  return s.jobs_count != 0 && is_fatal_nak(s.job(s.jobs_count - 1));
}

// Class C/D error in a request. Responses owed for earlier PSNs (READ responses, ATOMIC ACKs)
// must reach the requester before the NAK: responses go out in PSN order (IBTA §9.7.5.1;
// rocev2.md §3.4), and a requester that sees the NAK first fails those requests although they
// executed here. So the NAK is queued behind them; responder_tx_lc moves the QP to ERR once the
// NAK is sent, and responder_rx_lc drops requests meanwhile, as in ERR.
void fatal_nak_lc(Endpoint& ep, Qp& qp, Psn psn, uint8_t code) noexcept {
  if (lc(qp).resp.jobs_count != 0) {
    // Room is there: responder_rx_lc returns early when the queue is full.
    if (RespJob* j = push_job(qp, Kind::kNak, psn)) {
      if (code < 4) ++lc(qp).counters.naks_sent[code];
      j->syndrome = static_cast<uint8_t>(aeth::kNak | code);
      return;
    }
  }
  fatal_nak_now_lc(ep, qp, psn, code);
}

void fail_recv_lc(Qp& qp, WcStatus wc) noexcept {
  auto& s = lc(qp).resp;
  if (!s.have_recv) return;
  qp_complete_recv_lc(qp, s.recv(), wc, s.recv_off, OperationType::kReceive, 0, 0, 0);
  s.have_recv = false;
}

uint32_t read_packets(uint32_t len, uint32_t mtu) noexcept {
  return len == 0 ? 1 : (len + mtu - 1) / mtu;
}

RespResource& next_resource(Qp& qp) noexcept {
  auto& s = lc(qp).resp;
  RespResource& r = s.res[s.res_next];
  s.res_next = (s.res_next + 1) & (s.res_count - 1);
  return r;
}

// Duplicate requests (rocev2.md §3.5; IBTA §9.7.5.1.1).
void duplicate_lc(Qp& qp, const wire::ParsedFrame& f, Psn p) noexcept {
  auto& s = lc(qp).resp;
  ++lc(qp).counters.duplicate_requests;
  if (f.has(op::kSend) || f.has(op::kWrite)) {
    if constexpr (kTesting)
      if (qp.config().broken.duplicate_ack) [[unlikely]]
        return;
    // Never executed twice: re-ACK the newest PSN received, with the current MSN (C9-105).
    owe_ack(qp, s.epsn - 1);
    return;
  }
  for (uint32_t i = 0; i < s.res_count; ++i) {
    const RespResource& r = s.res[i];
    if (!r.valid) continue;
    if (f.has(op::kRead) && !r.atomic && !Psn::before(p, r.first_psn) &&
        !Psn::after(p, r.last_psn)) {
      // Replay from memory from PSN p. The RETH must be the original or its tail (the
      // requester re-requests the rest: same R_Key, range inside the original).
      const uint64_t va = f.reth().va.get();
      const uint32_t len = f.reth().dma_length.get();
      // [va, va + len) inside [r.va, r.va + r.length), without computing va + len: a peer's
      // va near 2^64 would wrap and pass (the replay would then fail its R_Key check and NAK,
      // killing the QP for a request that should just be dropped).
      if (f.reth().rkey.get() != r.rkey || va < r.va || len > r.length ||
          va - r.va > r.length - len)
        return;
      if (RespJob* j = push_job(qp, Kind::kRead, p)) {
        j->va = va;
        j->rkey = r.rkey;
        j->length = len;
        j->npkts = read_packets(len, lc(qp).attr.path_mtu);
      }
      return;
    }
    if (f.has(op::kAtomic) && r.atomic && r.first_psn == p) {
      // Answer from the saved original value; the atomic is not executed again.
      if (RespJob* j = push_job(qp, Kind::kAtomicAck, p)) j->orig = r.orig;
      return;
    }
  }
  // No saved resource (recycled): drop silently (class D), the requester times out.
}

// What one request packet carries, read once.
struct ReqPkt {
  const wire::ParsedFrame& f;
  Psn psn;
  uint32_t mask;   // wire::op bits of the opcode
  uint32_t plen;   // payload bytes
  uint64_t* word;  // kChkRkey -> kExecAtomic: the target word
  rte_mbuf* m;     // the frame (null: one the reorder buffer released, never held again)
  bool starts() const noexcept { return (mask & op::kFirst) != 0; }
};

RespState check_qp_state(const Qp& qp) noexcept {
  if (lc(qp).state != QpState::kRtr && lc(qp).state != QpState::kRts &&
      lc(qp).state != QpState::kSqd)
    return RespState::kDropBadState;
  // Entering ERR once the NAK is out (fatal_nak_lc).
  if (fatal_nak_queued(qp)) return RespState::kDropBadState;
  // Cannot answer now: drop, the requester retransmits. The queue is a fixed array sized from
  // max_dest_rd_atomic (resp_jobs_for) before the engine sees it, so a flood costs no memory.
  if (jobs_full(qp)) [[unlikely]]
    return RespState::kDropQueueFull;
  return RespState::kChkPsn;
}

RespState check_psn(Qp& qp, const ReqPkt& pkt) noexcept {
  const int32_t d = Psn::diff(pkt.psn, lc(qp).resp.epsn);
  if (d < 0) return RespState::kDuplicate;
  if (d > 0) return lc(qp).attr.selective_repeat ? RespState::kHold : RespState::kErrPsnSeq;
  lc(qp).resp.nak_sent = false;
  return RespState::kChkOpSeq;
}

// Inside a message only MIDDLE/LAST of the same operation may follow; outside, FIRST/ONLY.
RespState check_op_seq(const Qp& qp, const ReqPkt& pkt) noexcept {
  const uint32_t m = pkt.mask;
  const bool starts = pkt.starts();
  const InMsg in = lc(qp).resp.in_msg;
  const bool bad = in == InMsg::kSend    ? !(m & op::kSend) || starts
                   : in == InMsg::kWrite ? !(m & op::kWrite) || starts
                                         : !starts;
  return bad ? RespState::kErrOpSeq : RespState::kChkOpRights;
}

RespState check_op_rights(const Qp& qp, const ReqPkt& pkt) noexcept {
  const uint32_t m = pkt.mask;
  const uint32_t a = lc(qp).attr.access;
  if (((m & op::kWrite) && !(a & access::kRemoteWrite)) ||
      ((m & op::kRead) && !(a & access::kRemoteRead)) ||
      ((m & op::kAtomic) && !(a & access::kRemoteAtomic)))
    return RespState::kErrOpRights;
  return RespState::kChkLength;
}

// FIRST/MIDDLE carry exactly one PMTU, LAST 1..PMTU, ONLY 0..PMTU (IBTA §9.7.4.1); an RDMA DMA
// length above 2^31 is invalid (§9.4); a WRITE's packets add up to its RETH length.
RespState check_length(const Qp& qp, const ReqPkt& pkt) noexcept {
  const uint32_t m = pkt.mask;
  const uint32_t mtu = lc(qp).attr.path_mtu;
  const uint32_t plen = pkt.plen;
  const bool only = (m & op::kOnly) == op::kOnly;
  if ((m & op::kPayload) && (only              ? plen > mtu
                             : (m & op::kLast) ? (plen == 0 || plen > mtu)
                                               : plen != mtu))
    return RespState::kErrPktLength;
  if ((m & op::kReth) && pkt.f.reth().dma_length.get() > kMaxMessageLength)
    return RespState::kErrDmaLength;
  if (m & op::kWrite) {
    if (pkt.starts()) {
      const uint32_t dlen = pkt.f.reth().dma_length.get();
      if (only ? plen != dlen : dlen <= mtu) return RespState::kErrWriteLength;
    } else if ((m & op::kLast) ? plen != lc(qp).resp.write_left : plen >= lc(qp).resp.write_left) {
      return RespState::kErrWriteLength;
    }
  }
  return RespState::kChkResources;
}

// A receive WQE for SEND (taken at its first packet) and WRITE with immediate (at its last).
RespState check_resources(Qp& qp, const ReqPkt& pkt) noexcept {
  auto& s = lc(qp).resp;
  const uint32_t m = pkt.mask;
  const bool needs_recv =
      ((m & op::kSend) && pkt.starts()) || ((m & op::kWrite) && (m & op::kImmDt));
  if (needs_recv && !s.have_recv) {
    // A QP with a shared receive queue takes from it (same engine: the SRQ's only consumer).
    Srq* srq = qp.config().srq;
    if (!(srq != nullptr ? srq->pop_lc(&s.recv()) : lc(qp).rq.pop(s.recv())))
      return RespState::kErrRnr;
    s.have_recv = true;
    s.recv_off = 0;
  }
  return RespState::kChkRecvLength;
}

// The receive buffer is large enough (ND: a receive smaller than the send fails both sides).
RespState check_recv_length(const Qp& qp, const ReqPkt& pkt) noexcept {
  if ((pkt.mask & op::kSend) &&
      uint64_t{lc(qp).resp.recv_off} + pkt.plen > lc(qp).resp.recv().length)
    return RespState::kErrRecvLength;
  return RespState::kChkRkey;
}

// R_Key, bounds and rights (IBTA §9.4 / §10.6.3), before anything is executed.
RespState check_rkey(Endpoint& ep, Qp& qp, ReqPkt& pkt) noexcept {
  const uint32_t m = pkt.mask;
  const uint32_t pd = qp.config().pd;
  MrTable& mrs = ep.mrs();
  if (m & op::kRead) {
    const auto& reth = pkt.f.reth();
    const uint32_t len = reth.dma_length.get();
    // A zero-length READ checks no R_Key (IBTA §9.4.4: nothing is accessed).
    if (len != 0 && mrs.check(reth.rkey.get(), pd, reth.va.get(), len, access::kRemoteRead,
                              qp.qpn()) != MrCheck::kOk)
      return RespState::kErrReadRkey;
    return RespState::kExecRead;
  }
  if (m & op::kAtomic) {
    const auto& a = pkt.f.atomic_eth();
    const uint64_t va = a.va.get();
    if (va & 7) return RespState::kErrAtomicAlign;  // atomics are 8-byte aligned (IBTA §9.4.5)
    if (mrs.atomic_target(a.rkey.get(), pd, va, &pkt.word, qp.qpn()) != MrCheck::kOk)
      return RespState::kErrAtomicRkey;
    return RespState::kExecAtomic;
  }
  if (!(m & op::kWrite)) return RespState::kExecSend;
  if (pkt.starts()) {
    auto& s = lc(qp).resp;
    s.write_va = pkt.f.reth().va.get();
    s.write_rkey = pkt.f.reth().rkey.get();
    s.write_len = s.write_left = pkt.f.reth().dma_length.get();
    // The whole range is checked at the first packet so that a bad WRITE writes nothing; a
    // zero-length WRITE checks no R_Key (IBTA §9.4.3). A WRITE ONLY's copy (execute_write, next)
    // checks that same range before it writes a byte: one lookup, not two (bench/cost: -105).
    if (s.write_len != 0 && (m & op::kOnly) != op::kOnly &&
        mrs.check(s.write_rkey, pd, s.write_va, s.write_len, access::kRemoteWrite, qp.qpn()) !=
            MrCheck::kOk)
      return RespState::kErrWriteRkey;
  }
  return RespState::kExecWrite;
}

// ---- Execution ----------------------------------------------------------------------------

RespState execute_read(Qp& qp, const ReqPkt& pkt) noexcept {
  auto& s = lc(qp).resp;
  const Psn p = pkt.psn;
  const uint64_t va = pkt.f.reth().va.get();
  const uint32_t rkey = pkt.f.reth().rkey.get();
  const uint32_t len = pkt.f.reth().dma_length.get();
  const uint32_t npkts = read_packets(len, lc(qp).attr.path_mtu);
  ++s.msn;  // C9-148: the MSN counts the READ when it is accepted
  RespResource& r = next_resource(qp);
  r = {p, p + static_cast<int32_t>(npkts - 1), {.va = va}, rkey, len, true, false};
  RespJob* j = push_job(qp, Kind::kRead, p);  // room: check_qp_state
  j->va = va;
  j->rkey = rkey;
  j->length = len;
  j->npkts = npkts;
  // A READ request consumes one PSN per response packet (IBTA §9.7.4.1).
  s.epsn = p + static_cast<int32_t>(npkts);
  return RespState::kDone;
}

RespState execute_atomic(Qp& qp, const ReqPkt& pkt) noexcept {
  auto& s = lc(qp).resp;
  const Psn p = pkt.psn;
  const auto& a = pkt.f.atomic_eth();
  // Atomic with respect to every other atomic on this host, whichever engine runs it
  // (IBTA §9.4.5): a locked RMW on the word itself.
  std::atomic_ref<uint64_t> target(*pkt.word);
  uint64_t orig;
  if (pkt.f.opcode == wire::opc::kCompareSwap) {
    orig = a.compare.get();
    target.compare_exchange_strong(orig, a.swap_add.get(), std::memory_order_acq_rel);
  } else {
    orig = target.fetch_add(a.swap_add.get(), std::memory_order_acq_rel);
  }
  ++s.msn;
  RespResource& r = next_resource(qp);
  r = {p, p, {.orig = orig}, 0, 0, true, true};
  RespJob* j = push_job(qp, Kind::kAtomicAck, p);  // room: check_qp_state
  j->orig = orig;
  s.epsn = p + 1;
  return RespState::kDone;
}

RespState execute_write(Endpoint& ep, Qp& qp, const ReqPkt& pkt) noexcept {
  auto& s = lc(qp).resp;
  const uint32_t m = pkt.mask;
  const uint32_t plen = pkt.plen;
  // Re-checked per packet: an invalidation takes effect before the next packet.
  if (plen != 0 &&
      ep.mrs().copy_in(s.write_rkey, qp.config().pd, s.write_va, pkt.f.payload().data(), plen,
                       access::kRemoteWrite, qp.qpn()) != MrCheck::kOk)
    return RespState::kErrWriteRkey;
  s.write_va += plen;
  s.write_left -= plen;
  if (!(m & op::kLast)) {
    s.in_msg = InMsg::kWrite;
    return RespState::kAcknowledge;
  }
  s.in_msg = InMsg::kNone;
  ++s.msn;
  if (m & op::kImmDt) {
    const uint32_t flags = kResultHasImmediate | kResultRdmaWrite |
                           (wire::Bth::Se::get(pkt.f.bth()) ? kResultSolicited : 0u);
    qp_complete_recv_lc(qp, s.recv(), WcStatus::kSuccess, s.write_len, OperationType::kReceive,
                        pkt.f.imm().imm.get(), flags, 0);
    s.have_recv = false;
  }
  return RespState::kAcknowledge;
}

RespState execute_send(Endpoint& ep, Qp& qp, const ReqPkt& pkt) noexcept {
  auto& s = lc(qp).resp;
  const uint32_t m = pkt.mask;
  const uint32_t pd = qp.config().pd;
  // The receive buffer's own registration is bad: a local error at this responder, a remote
  // operational error for the requester.
  if (scatter_lc(ep.mrs(), pd, s.recv().sge, s.recv().num_sge, s.recv_off, pkt.f.payload().data(),
                 pkt.plen, access::kLocalWrite) != WcStatus::kSuccess)
    return RespState::kErrRecvProt;
  s.recv_off += pkt.plen;
  if (!(m & op::kLast)) {
    s.in_msg = InMsg::kSend;
    return RespState::kAcknowledge;
  }
  uint32_t flags = wire::Bth::Se::get(pkt.f.bth()) ? kResultSolicited : 0u;
  OperationType type = OperationType::kReceive;
  uint64_t extra = 0;
  uint32_t imm = 0;
  if (m & op::kIeth) {
    // Remote invalidate (IBTA §9.3.8 / §10.6.6.2): the key must be valid here; a bad one aborts
    // the connection (NDK SendAndInvalidate rule), as rxe does with invalid request.
    const uint32_t key = pkt.f.ieth().rkey.get();
    if (ep.mrs().invalidate(key, pd, qp.qpn()) != MrCheck::kOk) return RespState::kErrInvalidate;
    type = OperationType::kReceiveAndInvalidate;
    extra = key;
    flags |= kResultInvalidated;
  }
  if (m & op::kImmDt) {
    imm = pkt.f.imm().imm.get();
    flags |= kResultHasImmediate;
  }
  qp_complete_recv_lc(qp, s.recv(), WcStatus::kSuccess, s.recv_off, type, imm, flags, extra);
  s.have_recv = false;
  s.in_msg = InMsg::kNone;
  ++s.msn;
  return RespState::kAcknowledge;
}

RespState acknowledge(Qp& qp, const ReqPkt& pkt) noexcept {
  lc(qp).resp.epsn = pkt.psn + 1;
  if (wire::Bth::AckReq::get(pkt.f.bth())) owe_ack(qp, pkt.psn);
  return RespState::kDone;
}

// ---- Outcomes -------------------------------------------------------------------------------

// PSN after ePSN: one NAK per gap; further out-of-order packets are dropped quietly
// (rocev2.md §3.6).
void psn_seq_error_lc(Qp& qp) noexcept {
  auto& s = lc(qp).resp;
  ++lc(qp).counters.out_of_sequence;
  if (s.nak_sent) return;
  s.nak_sent = true;
  ++lc(qp).counters.naks_sent[aeth::kNakPsnSeqError];
  if (RespJob* j = push_job(qp, Kind::kNak, s.epsn)) j->syndrome = aeth::kNak;
}

// Selective repeat: a NAK for ePSN (acknowledging everything before it) that names, in the
// AETH MSN field, the PSN `missing` to resend (reorder.h). None while an RNR NAK for ePSN waits
// to go out (the requester waits the RNR timer first), nor twice in a row for the same PSN.
void selective_nak_lc(Qp& qp, Psn missing) noexcept {
  auto& s = lc(qp).resp;
  s.nak_sent = true;
  if (const RespJob* last = last_job(qp); last != nullptr && last->psn() == s.epsn) {
    if (last->kind == Kind::kRnrNak) return;
    if (last->kind == Kind::kNak && last->syndrome == aeth::kNak && last->msn == missing.value())
      return;
  }
  ++lc(qp).counters.naks_sent[aeth::kNakPsnSeqError];
  if (RespJob* j = push_job(qp, Kind::kNak, s.epsn)) {
    j->syndrome = aeth::kNak;
    j->msn = missing.value();
  }
}

// Selective repeat: a request ahead of ePSN is held (reorder.h), and every PSN it shows missing
// - between the highest seen so far and itself - is NAKed once, as IRN's receiver reports each
// out-of-order arrival, so that several holes are resent in parallel rather than one per round
// trip. One that cannot be held is NAKed itself. Returns whether the frame was kept.
[[gnu::cold]] bool hold_lc(Endpoint& ep, Qp& qp, const ReqPkt& pkt) noexcept {
  auto& s = lc(qp).resp;
  ++lc(qp).counters.out_of_sequence;
  // At most this many NAKs for one arrival (a long burst lost): the probe covers the rest.
  constexpr int32_t kMaxNaksPerPacket = 16;
  const Psn base = reorder_reported_lc(s.held, s.epsn);
  const Hold h =
      pkt.m != nullptr ? reorder_hold_lc(ep, s.held, pkt.m, pkt.f, pkt.psn, s.epsn) : Hold::kNo;
  const bool kept = h != Hold::kNo;
  if (h == Hold::kHeld) ++lc(qp).counters.ooo_held;
  if (h == Hold::kCopy) ++lc(qp).counters.duplicate_requests;
  const int32_t gap = Psn::diff(pkt.psn, base);
  for (int32_t k = 1; k < gap && k <= kMaxNaksPerPacket; ++k) selective_nak_lc(qp, base + k);
  if (gap > 0) s.held.high = pkt.psn;
  if (!kept) {
    ++lc(qp).counters.ooo_dropped;
    selective_nak_lc(qp, pkt.psn);
  }
  return kept;
}

// No receive WQE: RNR NAK, the PSN is not consumed.
void rnr_nak_lc(Qp& qp, Psn p) noexcept {
  // Packets already in flight behind this one are dropped without a sequence NAK: the
  // requester resends from p after the RNR timer anyway.
  lc(qp).resp.nak_sent = true;
  if (const RespJob* last = last_job(qp);
      last != nullptr && last->kind == Kind::kRnrNak && last->psn() == p) {
    // The RNR NAK for this PSN has not gone out yet: it answers this copy too, so a flood of
    // retries costs one NAK, not one job each (IBTA §9.7.5.2.8).
    ++lc(qp).counters.rnr_naks_coalesced;
    return;
  }
  ++lc(qp).counters.rnr_naks_sent;
  uint8_t timer = lc(qp).attr.min_rnr_timer & 0x1f;
  if constexpr (kTesting)
    if (qp.config().broken.rnr_timer) [[unlikely]]
      timer = 0;
  if (RespJob* j = push_job(qp, Kind::kRnrNak, p))
    j->syndrome = static_cast<uint8_t>(aeth::kRnrNak | timer);
}

// The NAK code of a class C/D error state, and how the receive WQE in use (if any) completes:
// kSuccess = left for the flush when the QP enters ERR.
struct NakCause {
  uint8_t code;
  WcStatus recv;
};
constexpr NakCause nak_cause(RespState st) noexcept {
  switch (st) {
    case RespState::kErrReadRkey:
    case RespState::kErrAtomicRkey:
    case RespState::kErrWriteRkey:
      return {aeth::kNakRemoteAccessError, WcStatus::kSuccess};
    case RespState::kErrRecvLength:
      return {aeth::kNakInvalidRequest, WcStatus::kLocLenErr};
    case RespState::kErrRecvProt:
      return {aeth::kNakRemoteOperationalError, WcStatus::kLocProtErr};
    case RespState::kErrInvalidate:
      return {aeth::kNakInvalidRequest, WcStatus::kLocQpOpErr};
    default:  // kErrOpSeq, kErrOpRights, kErr*Length, kErrAtomicAlign
      return {aeth::kNakInvalidRequest, WcStatus::kSuccess};
  }
}

// Class C/D error: the receive WQE in use fails where the cause is local to it, and the NAK
// goes out (behind any response still owed), then the QP enters ERR.
void fatal_error_lc(Endpoint& ep, Qp& qp, Psn p, RespState st) noexcept {
  const NakCause c = nak_cause(st);
  if (c.recv != WcStatus::kSuccess) fail_recv_lc(qp, c.recv);
  fatal_nak_lc(ep, qp, p, c.code);
}

// Each step takes what it needs of (ep, qp, pkt); step<F> is F called with that.
template <auto F>
RespState step([[maybe_unused]] Endpoint& ep, Qp& qp, [[maybe_unused]] ReqPkt& pkt) noexcept {
  if constexpr (std::is_invocable_v<decltype(F), Endpoint&, Qp&, ReqPkt&>) {
    return F(ep, qp, pkt);
  } else if constexpr (std::is_invocable_v<decltype(F), Qp&, ReqPkt&>) {
    return F(qp, pkt);
  } else {
    return F(qp);
  }
}

// The check or execution each non-terminal state names, in RespState order; each returns the
// next state.
using StepFn = RespState (*)(Endpoint&, Qp&, ReqPkt&) noexcept;
constexpr auto kSteps = std::to_array<StepFn>(
    {step<check_qp_state>, step<check_psn>, step<check_op_seq>, step<check_op_rights>,
     step<check_length>, step<check_resources>, step<check_recv_length>, step<check_rkey>,
     step<execute_read>, step<execute_atomic>, step<execute_write>, step<execute_send>,
     step<acknowledge>});
static_assert(kSteps.size() == static_cast<size_t>(RespState::kDone));
constexpr auto kStepIndex = std::make_index_sequence<kSteps.size()>{};

// Calls the step of state `st`. Each kSteps[I] is a constant here, so the compiler inlines the
// steps into one chain of comparisons, as a switch would give; an indexed call through the table
// cost ~150 instructions per packet more (bench/cost, 64 B WRITE: responder 717 -> 868).
template <size_t... I>
RespState run_step(RespState st, Endpoint& ep, Qp& qp, ReqPkt& pkt,
                   std::index_sequence<I...>) noexcept {
  RespState next = st;
  (void)((static_cast<size_t>(st) == I ? (next = kSteps[I](ep, qp, pkt), true) : false) || ...);
  return next;
}

// A terminal state: what becomes of the packet. True when its frame was kept (kHold).
bool finish_lc(Endpoint& ep, Qp& qp, const ReqPkt& pkt, RespState st) noexcept {
  switch (st) {
    case RespState::kDone:
      return false;
    case RespState::kHold:
      return hold_lc(ep, qp, pkt);
    case RespState::kDropBadState:
      ++lc(qp).counters.dropped_bad_state;
      return false;
    case RespState::kDropQueueFull:
      ++lc(qp).counters.resp_queue_full;
      return false;
    case RespState::kDuplicate:
      duplicate_lc(qp, pkt.f, pkt.psn);
      return false;
    case RespState::kErrPsnSeq:
      if constexpr (kTesting)
        if (qp.config().broken.psn_seq_nak) [[unlikely]]
          return false;
      psn_seq_error_lc(qp);
      return false;
    case RespState::kErrRnr:
      rnr_nak_lc(qp, pkt.psn);
      return false;
    default:
      fatal_error_lc(ep, qp, pkt.psn, st);
      return false;
  }
}

}  // namespace

const char* to_string(RespState s) noexcept {
  static constexpr std::array<const char*, static_cast<size_t>(RespState::kCount)> kNames = {
      "CHK_QP_STATE",
      "CHK_PSN",
      "CHK_OP_SEQ",
      "CHK_OP_RIGHTS",
      "CHK_LENGTH",
      "CHK_RESOURCES",
      "CHK_RECV_LENGTH",
      "CHK_RKEY",
      "EXEC_READ",
      "EXEC_ATOMIC",
      "EXEC_WRITE",
      "EXEC_SEND",
      "ACKNOWLEDGE",
      "DONE",
      "DROP_BAD_STATE",
      "DROP_QUEUE_FULL",
      "DUPLICATE",
      "ERR_PSN_SEQ",
      "HOLD",
      "ERR_RNR",
      "ERR_OP_SEQ",
      "ERR_OP_RIGHTS",
      "ERR_PKT_LENGTH",
      "ERR_DMA_LENGTH",
      "ERR_WRITE_LENGTH",
      "ERR_RECV_LENGTH",
      "ERR_READ_RKEY",
      "ERR_ATOMIC_ALIGN",
      "ERR_ATOMIC_RKEY",
      "ERR_WRITE_RKEY",
      "ERR_RECV_PROT",
      "ERR_INVALIDATE"};
  const auto i = static_cast<size_t>(s);
  return i < kNames.size() ? kNames[i] : "?";
}

namespace {

// Selective repeat: frames are held and `psn`, received in `m` (null: a frame this released),
// moved ePSN on; the held frames that now follow run through the checks in PSN order
// (reorder.h). Then the next hole, if frames are held past it, is NAKed at once; or everything
// drained is acknowledged.
[[gnu::cold]] void drain_lc(Endpoint& ep, Qp& qp, Psn psn, const rte_mbuf* m,
                            uint64_t now) noexcept {
  auto& s = lc(qp).resp;
  if (m == nullptr || !Psn::after(s.epsn, psn)) return;
  reorder_skip_lc(ep, s.held, psn + 1, s.epsn);  // PSNs a READ consumed: never to be processed
  bool drained = false;
  wire::ParsedFrame hf;
  while (rte_mbuf* h = reorder_take_lc(ep, s.held, s.epsn, &hf)) {
    const Psn at = s.epsn;
    (void)responder_rx_lc(ep, qp, hf, nullptr, now);  // null: no drain of its own
    rte_pktmbuf_free(h);
    // Not consumed (RNR NAK, response queue full, a fatal error): the requester resends it.
    if (s.epsn == at) break;
    drained = true;
    reorder_skip_lc(ep, s.held, at + 1, s.epsn);
  }
  if (s.held.count != 0) {
    // The next hole, NAKed again: its first NAK may be the one lost (the requester resends a
    // PSN only once; a lost resend waits for its probe).
    selective_nak_lc(qp, s.epsn);
  } else if (drained) {
    owe_ack(qp, s.epsn - 1);
  }
}

}  // namespace

// Checks run in the IBTA order and the first failure decides (see RespState). A frame the
// reorder buffer released comes back through here with `m` null (one copy of the checks: a
// second one cost 340 instructions per packet, the steps no longer inlined, bench/cost).
bool responder_rx_lc(Endpoint& ep, Qp& qp, const wire::ParsedFrame& f, rte_mbuf* m,
                     uint64_t now) noexcept {
  ReqPkt pkt{f, Psn(wire::Bth::Psn::get(f.bth())), f.mask, f.l.payload_len, nullptr, m};
  RespState st = RespState::kChkQpState;
  while (st < RespState::kDone) st = run_step(st, ep, qp, pkt, kStepIndex);
  const bool kept = finish_lc(ep, qp, pkt, st);
  if (lc(qp).resp.held.count != 0) [[unlikely]]
    drain_lc(ep, qp, pkt.psn, m, now);
  return kept;
}

uint32_t responder_tx_lc(Endpoint& ep, Qp& qp, uint32_t budget, uint64_t now) noexcept {
  if (lc(qp).state != QpState::kRtr && lc(qp).state != QpState::kRts &&
      lc(qp).state != QpState::kSqd)
    return 0;
  auto& s = lc(qp).resp;
  uint32_t built = 0;
  const uint32_t mtu = lc(qp).attr.path_mtu;
  while (built < budget && s.jobs_count != 0) {
    RespJob& j = s.job(0);
    uint8_t* payload = nullptr;
    if (j.kind == Kind::kRead) {
      while (built < budget && j.next_pkt < j.npkts && cc_may_send(qp, now)) {
        const uint32_t k = j.next_pkt;
        const bool first = k == 0, last = k + 1 == j.npkts;
        const uint8_t opcode = first && last ? wire::opc::kReadRespOnly
                               : first       ? wire::opc::kReadRespFirst
                               : last        ? wire::opc::kReadRespLast
                                             : wire::opc::kReadRespMiddle;
        const uint32_t off = k * mtu;
        const uint32_t len = j.length - off < mtu ? j.length - off : mtu;
        const Psn psn = j.psn() + static_cast<int32_t>(k);
        // AETH on FIRST / LAST / ONLY only (IBTA table 38); MIDDLE has none.
        rte_mbuf* m = response_frame(ep, qp, opcode, psn, aeth::kAckNoCredit, j.msn, len, &payload);
        if (m == nullptr) return built;
        // Re-validated per packet, so an invalidation or deregistration stops the stream. The
        // copy runs the ICRC over the payload in the same pass.
        uint32_t state = 0;
        uint32_t* crc = qp_fused_crc_lc(qp, m, opcode, len, &state);
        if (len != 0 && ep.mrs().copy_out_crc(j.rkey, qp.config().pd, j.va + off, payload, len,
                                              access::kRemoteRead, crc, qp.qpn()) != MrCheck::kOk) {
          rte_pktmbuf_free(m);
          // This READ is the oldest response owed: nothing must precede the NAK.
          fatal_nak_now_lc(ep, qp, psn, aeth::kNakRemoteAccessError);
          return built;
        }
        const uint64_t bytes_before = lc(qp).counters.tx_bytes;
        qp_send_frame_lc(ep, qp, m, opcode, len, crc);
        cc_sent(qp, lc(qp).counters.tx_bytes - bytes_before, now);
        ++j.next_pkt;
        ++built;
      }
      if (j.next_pkt < j.npkts) break;
    } else if (j.kind == Kind::kAtomicAck) {
      auto th = qp_headers(qp, wire::opc::kAtomicAcknowledge, j.psn(), false);
      wire::Aeth::Syndrome::set(th.aeth, aeth::kAckNoCredit);
      wire::Aeth::Msn::set(th.aeth, j.msn);
      th.atomic_ack.orig = wire::Be64::of(j.orig);
      rte_mbuf* m = qp_frame_lc(ep, qp, th, 0, &payload);
      if (m == nullptr) return built;
      qp_send_frame_lc(ep, qp, m, wire::opc::kAtomicAcknowledge, 0);
      ++built;
    } else {
      // ACK, NAK, RNR NAK. A selective-repeat NAK carries its trigger PSN where the MSN goes.
      const int16_t syndrome = j.syndrome;
      const bool own_msn =
          j.kind == Kind::kAck ||
          (j.kind == Kind::kNak && j.syndrome == aeth::kNak && lc(qp).attr.selective_repeat);
      if (!send_ack_frame(ep, qp, j.psn(), j.kind == Kind::kAck ? aeth::kAckNoCredit : j.syndrome,
                          own_msn ? j.msn : s.msn))
        return built;
      if (j.kind == Kind::kAck) ++lc(qp).counters.acks_sent;
      ++built;
      if (is_fatal_nak(j)) {
        // Every earlier response is out: the deferred half of fatal_nak_lc.
        qp_to_error_lc(ep, qp, {"NAK sent", WcStatus::kWrFlushErr, syndrome, false});
        return built;
      }
    }
    s.jobs_head = s.jobs_head + 1 == s.jobs_cap ? 0 : s.jobs_head + 1;
    --s.jobs_count;
  }
  if (built < budget && s.ack_pending && s.jobs_count == 0) {
    if (!send_ack_frame(ep, qp, s.ack_psn, aeth::kAckNoCredit, s.msn)) return built;
    s.ack_pending = false;
    ++lc(qp).counters.acks_sent;
    ++built;
  }
  return built;
}

}  // namespace urnic::dp

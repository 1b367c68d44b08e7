// QP attributes, the transition table and posting (application side). The engine side of the
// QP is in qp_datapath.cc and the three stage files.
#include "dataplane/qp.h"

#include <array>
#include <iterator>
#include <new>
#include <type_traits>

#include "dataplane/congestion.h"
#include "dataplane/mr.h"
#include "dataplane/srq.h"

namespace urnic {

const char* to_string(QpState s) noexcept {
  static constexpr std::array<const char*, kQpStateCount> kNames = {"RESET", "INIT", "RTR", "RTS",
                                                                    "SQD",   "SQE",  "ERR"};
  const auto i = static_cast<size_t>(s);
  return i < kNames.size() ? kNames[i] : "?";
}

namespace {
// Each completion status's verbs name and the text rdma-core's ibv_wc_status_str() gives it
// (libibverbs enum_strs.c), in WcStatus order: the one table the API, the verbs layer and the
// tools print from.
struct WcStatusName {
  const char* name;
  const char* text;
};
constexpr std::array<WcStatusName, 22> kWcStatusNames = {{
    {"SUCCESS", "success"},
    {"LOC_LEN_ERR", "local length error"},
    {"LOC_QP_OP_ERR", "local QP operation error"},
    {"LOC_EEC_OP_ERR", "local EE context operation error"},
    {"LOC_PROT_ERR", "local protection error"},
    {"WR_FLUSH_ERR", "Work Request Flushed Error"},
    {"MW_BIND_ERR", "memory management operation error"},
    {"BAD_RESP_ERR", "bad response error"},
    {"LOC_ACCESS_ERR", "local access error"},
    {"REM_INV_REQ_ERR", "remote invalid request error"},
    {"REM_ACCESS_ERR", "remote access error"},
    {"REM_OP_ERR", "remote operation error"},
    {"RETRY_EXC_ERR", "transport retry counter exceeded"},
    {"RNR_RETRY_EXC_ERR", "RNR retry counter exceeded"},
    {"LOC_RDD_VIOL_ERR", "local RDD violation error"},
    {"REM_INV_RD_REQ_ERR", "remote invalid RD request"},
    {"REM_ABORT_ERR", "aborted error"},
    {"INV_EECN_ERR", "invalid EE context number"},
    {"INV_EEC_STATE_ERR", "invalid EE context state"},
    {"FATAL_ERR", "fatal error"},
    {"RESP_TIMEOUT_ERR", "response timeout error"},
    {"GENERAL_ERR", "general error"},
}};
static_assert(kWcStatusNames.size() == static_cast<size_t>(WcStatus::kGeneralErr) + 1);
}  // namespace

const char* to_string(WcStatus s) noexcept {
  const auto i = static_cast<size_t>(s);
  return i < kWcStatusNames.size() ? kWcStatusNames[i].name : "?";
}

const char* describe(WcStatus s) noexcept {
  const auto i = static_cast<size_t>(s);
  return i < kWcStatusNames.size() ? kWcStatusNames[i].text : "unknown";
}

void QpCounters::add(const QpCounters& o) noexcept {
  tx_packets += o.tx_packets;
  tx_bytes += o.tx_bytes;
  rx_packets += o.rx_packets;
  rx_bytes += o.rx_bytes;
  retransmits += o.retransmits;
  timeouts += o.timeouts;
  acks_sent += o.acks_sent;
  acks_received += o.acks_received;
  for (size_t i = 0; i < std::size(naks_sent); ++i) {
    naks_sent[i] += o.naks_sent[i];
    naks_received[i] += o.naks_received[i];
  }
  rnr_naks_sent += o.rnr_naks_sent;
  rnr_naks_received += o.rnr_naks_received;
  duplicate_requests += o.duplicate_requests;
  out_of_sequence += o.out_of_sequence;
  implied_naks += o.implied_naks;
  dropped_bad_state += o.dropped_bad_state;
  dropped_stale += o.dropped_stale;
  completions_ok += o.completions_ok;
  completions_error += o.completions_error;
  completions_flushed += o.completions_flushed;
  completions_dropped += o.completions_dropped;
  cq_overrun_errors += o.cq_overrun_errors;
  rnr_naks_coalesced += o.rnr_naks_coalesced;
  resp_queue_full += o.resp_queue_full;
  ce_marked += o.ce_marked;
  cnps_sent += o.cnps_sent;
  cnps_received += o.cnps_received;
  cc_rate_decreases += o.cc_rate_decreases;
  cc_paced_mbps += o.cc_paced_mbps;
  selective_retransmits += o.selective_retransmits;
  ooo_held += o.ooo_held;
  ooo_dropped += o.ooo_dropped;
  sr_probes += o.sr_probes;
  qkey_violations += o.qkey_violations;
  datagrams_too_long += o.datagrams_too_long;
  datagrams_no_receive += o.datagrams_no_receive;
  for (size_t i = 0; i < std::size(completions_by_status); ++i)
    completions_by_status[i] += o.completions_by_status[i];
}

}  // namespace urnic

namespace urnic::dp {

const char* to_string(WrOpcode op) noexcept {
  return op < WrOpcode::kCount ? wr_opcode_info(op).name : "?";
}

namespace {

constexpr bool valid_mtu(uint32_t m) noexcept {
  return m == 256 || m == 512 || m == 1024 || m == 2048 || m == 4096;
}

// Attributes each RC transition requires and allows (rocev2.md §3.8, from IBTA §10.3.1 /
// Linux qp_state_table). Transitions to RESET and ERR are always allowed with any attributes.
struct Transition {
  uint32_t required;
  uint32_t optional;
};

constexpr uint32_t kRtrRequired = qp_attr::kAv | qp_attr::kPathMtu | qp_attr::kDestQpn |
                                  qp_attr::kRqPsn | qp_attr::kMaxDestRdAtomic |
                                  qp_attr::kMinRnrTimer;
constexpr uint32_t kRtsRequired = qp_attr::kTimeout | qp_attr::kRetryCnt | qp_attr::kRnrRetry |
                                  qp_attr::kSqPsn | qp_attr::kMaxRdAtomic;

// The urnic extensions that shape what the QP sends and accepts: settable until RTR.
constexpr uint32_t kUpToRtr = qp_attr::kCongestion | qp_attr::kSelectiveRepeat;

// Returns {required, optional} for cur -> next, or nullopt-like {~0, 0} when illegal.
constexpr Transition transition(QpState cur, QpState next) noexcept {
  using S = QpState;
  using namespace qp_attr;
  constexpr Transition kIllegal{~0u, 0};
  if (next == S::kReset || next == S::kErr) return {0, ~0u};
  switch (cur) {
    case S::kReset:
      return next == S::kInit ? Transition{kAccessFlags, kUpToRtr} : kIllegal;
    case S::kInit:
      if (next == S::kInit) return {0, kAccessFlags | kUpToRtr};
      if (next == S::kRtr) return {kRtrRequired, kAccessFlags | kUpToRtr};
      return kIllegal;
    case S::kRtr:
      return next == S::kRts ? Transition{kRtsRequired, kAccessFlags | kMinRnrTimer} : kIllegal;
    case S::kRts:
      if (next == S::kRts) return {0, kAccessFlags | kMinRnrTimer};
      if (next == S::kSqd) return {0, 0};
      return kIllegal;
    case S::kSqd:
      if (next == S::kRts) return {0, kAccessFlags | kMinRnrTimer};
      if (next == S::kSqd)
        return {0, kAv | kTimeout | kRetryCnt | kRnrRetry | kMaxRdAtomic | kMaxDestRdAtomic |
                       kAccessFlags | kMinRnrTimer};
      return kIllegal;
    case S::kSqe:  // RC never enters SQE (errors go to ERR); UC/UD only.
    case S::kErr:
    default:
      return kIllegal;
  }
}

// The UD column of the same table: a datagram QP has a Q_Key (required when it leaves RESET,
// changeable in every later state) and a send PSN, and nothing of a connection: no address
// vector, path MTU, remote QPN, receive PSN, timers, read limits or remote rights.
constexpr Transition ud_transition(QpState cur, QpState next) noexcept {
  using S = QpState;
  using namespace qp_attr;
  constexpr Transition kIllegal{~0u, 0};
  if (next == S::kReset || next == S::kErr) return {0, ~0u};
  switch (cur) {
    case S::kReset:
      return next == S::kInit ? Transition{kQkey, 0} : kIllegal;
    case S::kInit:
      return next == S::kInit || next == S::kRtr ? Transition{0, kQkey} : kIllegal;
    case S::kRtr:
      return next == S::kRts ? Transition{kSqPsn, kQkey} : kIllegal;
    case S::kRts:
      return next == S::kRts || next == S::kSqd ? Transition{0, kQkey} : kIllegal;
    case S::kSqd:
      return next == S::kRts || next == S::kSqd ? Transition{0, kQkey} : kIllegal;
    case S::kSqe:
    case S::kErr:
    default:
      return kIllegal;
  }
}

}  // namespace

Status validate_modify(QpState cur, const QpAttr& a, uint32_t mask, bool ud) noexcept {
  const QpState next = (mask & qp_attr::kState) ? a.state : cur;
  if (next >= static_cast<QpState>(kQpStateCount)) return Status::kInvalidParameter;
  const Transition t = ud ? ud_transition(cur, next) : transition(cur, next);
  if (t.required == ~0u) return Status::kInvalidDeviceState;
  const uint32_t attrs = mask & ~qp_attr::kState;
  if ((attrs & t.required) != t.required) return Status::kInvalidParameter;
  if (attrs & ~(t.required | t.optional)) return Status::kInvalidParameter;
  // Ranges (IBTA field widths).
  if ((attrs & qp_attr::kPathMtu) && !valid_mtu(a.path_mtu)) return Status::kInvalidParameter;
  if ((attrs & qp_attr::kDestQpn) && (a.dest_qpn == 0 || a.dest_qpn > 0xFFFFFF))
    return Status::kInvalidParameter;
  if ((attrs & qp_attr::kRqPsn) && a.rq_psn > 0xFFFFFF) return Status::kInvalidParameter;
  if ((attrs & qp_attr::kSqPsn) && a.sq_psn > 0xFFFFFF) return Status::kInvalidParameter;
  if ((attrs & qp_attr::kTimeout) && a.timeout > 31) return Status::kInvalidParameter;
  if ((attrs & qp_attr::kRetryCnt) && a.retry_cnt > 7) return Status::kInvalidParameter;
  if ((attrs & qp_attr::kRnrRetry) && a.rnr_retry > 7) return Status::kInvalidParameter;
  if ((attrs & qp_attr::kMinRnrTimer) && a.min_rnr_timer > 31) return Status::kInvalidParameter;
  if ((attrs & qp_attr::kMaxDestRdAtomic) &&
      (a.max_dest_rd_atomic == 0 || a.max_dest_rd_atomic > 128))
    return Status::kInvalidParameter;
  if ((attrs & qp_attr::kMaxRdAtomic) && (a.max_rd_atomic == 0 || a.max_rd_atomic > 128))
    return Status::kInvalidParameter;
  if ((attrs & qp_attr::kAccessFlags) &&
      (a.access & ~(access::kRemoteRead | access::kRemoteWrite | access::kRemoteAtomic)))
    return Status::kInvalidParameter;
  return Status::kSuccess;
}

uint32_t rnr_timer_us(uint8_t code) noexcept {
  // IBTA table 45 (rocev2.md §3.3), microseconds; code 0 is the longest, 655.36 ms.
  static constexpr std::array<uint32_t, 32> kUs = {
      655360, 10,    20,    30,    40,    60,     80,     120,    160,    240,   320,
      480,    640,   960,   1280,  1920,  2560,   3840,   5120,   7680,   10240, 15360,
      20480,  30720, 40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520};
  return kUs[code & 31];
}

Status status_of(WcStatus wc) noexcept {
  switch (wc) {
    case WcStatus::kSuccess:
      return Status::kSuccess;
    case WcStatus::kWrFlushErr:
      return Status::kCancelled;
    case WcStatus::kRetryExcErr:
    case WcStatus::kRnrRetryExcErr:
    case WcStatus::kRespTimeoutErr:
      return Status::kIoTimeout;
    case WcStatus::kRemAccessErr:
    case WcStatus::kLocProtErr:
    case WcStatus::kLocAccessErr:
    case WcStatus::kMwBindErr:
      return Status::kAccessViolation;
    case WcStatus::kRemInvReqErr:
    case WcStatus::kRemOpErr:
    case WcStatus::kRemAbortErr:
    case WcStatus::kRemInvRdReqErr:
      return Status::kRemoteResources;
    case WcStatus::kLocLenErr:
      return Status::kBufferOverflow;
    case WcStatus::kLocQpOpErr:
      return Status::kInvalidDeviceRequest;
    default:
      return Status::kInternalError;
  }
}

Qp::Qp(const QpConfig& cfg) : cfg_(cfg) {
  // Slots as long as the QP's limits need (issue 14 item 3): post_send and post_recv keep
  // every entry within them.
  const size_t wqe_bytes = send_wqe_slot_bytes(cfg.max_send_sge, cfg.max_inline);
  lc_.sq.init(cfg.sq_depth, wqe_bytes);
  lc_.rq.init(cfg.rq_depth, recv_wqe_slot_bytes(cfg.max_recv_sge));
  auto& r = lc_.req;
  r.slot_bytes = send_slot_bytes(wqe_bytes);
  r.slots = std::make_unique<std::byte[]>(size_t{cfg.sq_depth} * r.slot_bytes);
  r.mask = cfg.sq_depth - 1;
  // Each slot's tracking fields and WQE header start out as a SendSlot's defaults; the SGE /
  // inline area, which the constructor leaves alone, is written by each post.
  for (uint32_t i = 0; i < cfg.sq_depth; ++i) new (r.slots.get() + i * r.slot_bytes) SendSlot;
  const uint32_t recv_sge = cfg.srq != nullptr ? cfg.srq->max_sge() : cfg.max_recv_sge;
  lc_.resp.recv_slot = std::make_unique<std::byte[]>(recv_wqe_slot_bytes(recv_sge));
  // Responder resources and output jobs for the default max_dest_rd_atomic (1); a modify that
  // sets a larger one brings larger arrays (RespArrays), so an idle QP costs what it asked for.
  lc_.resp.res_cap = lc_.resp.res_count = resp_resources_for(1);
  lc_.resp.res = std::make_unique<RespResource[]>(lc_.resp.res_cap);
  lc_.resp.jobs_cap = resp_jobs_for(lc_.resp.res_cap);
  lc_.resp.jobs = std::make_unique<RespJob[]>(lc_.resp.jobs_cap);
  lc_.attr.cc = cfg.cc;
  cc_reset_lc(*this);
}

bool RespArrays::make(uint32_t max_dest_rd_atomic) noexcept {
  nres = resp_resources_for(max_dest_rd_atomic);
  njobs = resp_jobs_for(nres);
  res.reset(new (std::nothrow) RespResource[nres]());
  jobs.reset(new (std::nothrow) RespJob[njobs]());
  return res != nullptr && jobs != nullptr;
}

bool Qp::prepare_selective_repeat() noexcept {
  if (selective_repeat_ready()) return true;
  auto array = [](auto& p, size_t n) {
    using T = std::remove_extent_t<typename std::remove_reference_t<decltype(p)>::element_type>;
    p.reset(new (std::nothrow) T[n]());
    return p != nullptr;
  };
  auto& q = lc_.req;
  if (!array(lc_.resp.held.frame, kReorderSlots) || !array(lc_.resp.held.psn, kReorderSlots) ||
      !array(q.held.frame, kReorderSlots) || !array(q.held.psn, kReorderSlots) ||
      !array(q.sr_queue, QpLc::Requester::kSrQueue))
    return false;
  auto resent = std::unique_ptr<uint32_t[]>(new (std::nothrow) uint32_t[kReorderSlots]);
  if (resent == nullptr) return false;
  for (uint32_t i = 0; i < kReorderSlots; ++i) resent[i] = ~0u;  // no PSN
  q.sr_resent = std::move(resent);  // last: selective_repeat_ready() tests it
  return true;
}

Status Qp::validate_send(const SendWqe& wqe) const noexcept {
  if (wqe.opcode >= WrOpcode::kCount) return Status::kInvalidParameter;
  const bool is_inline = (wqe.flags & op_flag::kInline) != 0;
  if (wr_has(wqe.opcode, wr_mask::kData)) {
    if (is_inline) {
      if (wqe.opcode == WrOpcode::kRead) return Status::kInvalidParameter;
      if (wqe.length > cfg_.max_inline) return Status::kInvalidBufferSize;
    } else {
      if (wqe.num_sge > cfg_.max_send_sge || wqe.num_sge > kMaxSge) return Status::kDataOverrun;
      uint64_t total = 0;
      for (uint32_t i = 0; i < wqe.num_sge; ++i) total += wqe.sge[i].length;
      if (total != wqe.length) return Status::kInvalidParameter;
    }
    // IBTA §9.4: DMA length is 32 bits, and RETH lengths above 2^31 are invalid requests.
    if (wqe.length > kMaxMessageLength) return Status::kBufferOverflow;
  }
  if (wr_has(wqe.opcode, wr_mask::kAtomic)) {
    // Atomics: 8-byte aligned remote address, one 8-byte local SGE for the original value.
    if ((wqe.remote_addr & 7) != 0 || wqe.num_sge != 1 || wqe.sge[0].length != 8)
      return Status::kInvalidParameter;
  }
  if (wqe.opcode == WrOpcode::kFastRegister && (wqe.pages == nullptr || wqe.npages == 0))
    return Status::kInvalidParameter;
  // The slot holds the fixed fields and what the QP's limits allow (send_wqe_slot_bytes): the
  // checks above keep a valid WQE within it; this one also bounds what an opcode that carries
  // no data could name (SGEs, or an inline flag with a length).
  if (send_wqe_used_bytes(wqe) > lc_.sq.slot_bytes())
    return is_inline ? Status::kInvalidBufferSize : Status::kDataOverrun;
  return Status::kSuccess;
}

Status Qp::post_send(const SendWqe& wqe) noexcept {
  // A QP that cannot take the request says so (enqueue_send) before its arguments are looked at.
  if (sq_open()) {
    if (const Status s = validate_send(wqe); s != Status::kSuccess) {
      publish_deferred();
      return s;
    }
  }
  return enqueue_send(wqe);
}

Status Qp::enqueue_staged(SendWqe* slot) noexcept {
  // Failures return inline and post nothing; deferred WQEs staged before are handed to the
  // engine first (ndkpi.md §7.3: "when any initiator post returns failure, first hand every
  // previously deferred WR to the hardware").
  auto fail = [this](Status s) {
    publish_deferred();
    return s;
  };
  if (!sq_open()) return fail(Status::kInvalidDeviceState);
  // Acquire pairs with the engine's release of sq_retired_ (qp_datapath.cc).
  if (cfg_.sq_limit != 0 &&
      lc_.posted_.sq - lc_.sq_retired_.load(std::memory_order_acquire) >= cfg_.sq_limit)
    return fail(Status::kNoMoreEntries);
  if (slot == nullptr) return fail(Status::kNoMoreEntries);
  lc_.sq.stage_commit();
  ++lc_.posted_.sq;
  if (!(slot->flags & op_flag::kDefer)) publish_deferred();
  return Status::kSuccess;
}

Status Qp::enqueue_send(const SendWqe& wqe) noexcept {
  // Copied into the slot before the checks: an uncommitted slot is written again next time.
  SendWqe* slot = send_slot();
  if (slot != nullptr)
    std::memcpy(static_cast<void*>(slot), &wqe, send_wqe_used_bytes(wqe));  // copy_send_wqe
  return enqueue_staged(slot);
}

Status Qp::post_recv(const RecvWqe& wqe) noexcept {
  // Receives may be posted from INIT on (IBTA §10.3.1); in ERR they are flushed.
  if (public_state() == QpState::kReset) return Status::kInvalidDeviceState;
  // A QP with a shared receive queue takes its receives from there (post to the SRQ).
  if (cfg_.srq != nullptr) return Status::kInvalidDeviceRequest;
  if (wqe.num_sge > cfg_.max_recv_sge || wqe.num_sge > kMaxSge) return Status::kDataOverrun;
  uint64_t total = 0;
  for (uint32_t i = 0; i < wqe.num_sge; ++i) total += wqe.sge[i].length;
  if (total != wqe.length) return Status::kInvalidParameter;
  // No message is longer than 2^31 bytes (IBTA §9.4; NDK max_transfer_length), so neither is a
  // receive buffer; the responder's offset arithmetic relies on it.
  if (total > kMaxMessageLength) return Status::kBufferOverflow;
  // Acquire pairs with the engine's release of rq_retired_ (qp_datapath.cc).
  if (cfg_.rq_limit != 0 &&
      lc_.posted_.rq - lc_.rq_retired_.load(std::memory_order_acquire) >= cfg_.rq_limit)
    return Status::kNoMoreEntries;
  if (!lc_.rq.push(wqe)) return Status::kNoMoreEntries;
  ++lc_.posted_.rq;
  // The engine needs to see receives only in ERR, where it flushes them; but a poster cannot
  // know the engine's state without a race, so every receive rings (once per idle period).
  ring_doorbell();
  return Status::kSuccess;
}

}  // namespace urnic::dp

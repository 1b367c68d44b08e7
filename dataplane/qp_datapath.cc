// Engine-side QP plumbing shared by the three stages: applying transitions, the error state
// and its flush, retiring completions in order, and building frames from a QP's address vector.
#include <rte_cycles.h>
#include <rte_mbuf.h>

#include <cstring>
#include <iterator>

#include "dataplane/congestion.h"
#include "dataplane/cq.h"
#include "dataplane/internal.h"
#include "dataplane/log.h"
#include "dataplane/port.h"
#include "dataplane/reorder.h"
#include "dataplane/srq.h"
#include "dataplane/wire/crc32.h"

namespace urnic::dp {

uint64_t tsc_from_ns(uint64_t ns) noexcept {
  return static_cast<uint64_t>(static_cast<unsigned __int128>(ns) * rte_get_tsc_hz() / 1000000000u);
}

namespace {

OperationType op_type_of(WrOpcode op) noexcept {
  return op < WrOpcode::kCount ? wr_opcode_info(op).type : OperationType::kSend;
}

void count_completion(Qp& qp, WcStatus wc) noexcept {
  const auto i = static_cast<size_t>(wc);
  if (i < std::size(lc(qp).counters.completions_by_status))
    ++lc(qp).counters.completions_by_status[i];
  if (wc == WcStatus::kSuccess)
    ++lc(qp).counters.completions_ok;
  else if (wc == WcStatus::kWrFlushErr)
    ++lc(qp).counters.completions_flushed;
  else
    ++lc(qp).counters.completions_error;
}

// One send WQE retired (QpConfig::sq_limit accounting). Release pairs with the poster's acquire
// in Qp::post_send; the engine is the only writer.
void retire_send(Qp& qp, uint64_t n = 1) noexcept {
  lc(qp).sq_retired_.store(lc(qp).sq_retired_.load(std::memory_order_relaxed) + n,
                           std::memory_order_release);
}

// One receive retired: counted on the SRQ it came from, else on the QP (rq_limit).
void retire_recv(Qp& qp, uint64_t n = 1) noexcept {
  if (Srq* srq = qp.config().srq) {
    for (uint64_t i = 0; i < n; ++i) srq->retire_lc();
    return;
  }
  lc(qp).rq_retired_.store(lc(qp).rq_retired_.load(std::memory_order_relaxed) + n,
                           std::memory_order_release);
}

// Whether a send completion writes a CQE: IBTA §10.7.3.1, an unsignaled (silent) request
// completes without one unless it fails.
bool writes_cqe(const SendWqe& wqe, WcStatus wc) noexcept {
  return wc != WcStatus::kSuccess || !(wqe.flags & op_flag::kSilentSuccess);
}

// What a send completion reports.
void send_result(const Qp& qp, const SendWqe& wqe, WcStatus wc, ResultEx* r) noexcept {
  r->status = status_of(wc);
  r->bytes_transferred = wqe.opcode == WrOpcode::kRead ? wqe.length : 0;
  r->qp_context = qp.config().context;
  r->request_context = wqe.request_context;
  r->type = op_type_of(wqe.opcode);
  r->provider_error_code = static_cast<uint32_t>(wc);
  r->qpn = qp.qpn();
}

// Retires the request and writes its completion (if any). A refused push means the CQ has
// overrun: the completion is lost (ndkpi.md §3.3), and the engine moves the QP to ERR before
// it does anything else (qp_cq_overrun).
void finish_send(Qp& qp, WcStatus wc, const ResultEx* r) noexcept {
  retire_send(qp);
  count_completion(qp, wc);
  if (r == nullptr) return;
  if (Cq* cq = qp.config().send_cq; cq != nullptr && !cq->push(*r)) [[unlikely]]
    ++lc(qp).counters.completions_dropped;
}

void complete_send(Qp& qp, const SendWqe& wqe, WcStatus wc) noexcept {
  if (!writes_cqe(wqe, wc)) return finish_send(qp, wc, nullptr);
  ResultEx r;
  send_result(qp, wqe, wc, &r);
  finish_send(qp, wc, &r);
}

void reset_requester(Endpoint& ep, Qp& qp) noexcept {
  auto& r = lc(qp).req;
  reorder_clear_lc(ep, r.held);
  r.sr_ack_valid = false;
  r.srtt = r.sample_tsc = 0;
  r.ack_wait = r.ack_ticks;
  r.rtt_pending = false;
  r.head = r.cur = r.tail = 0;
  r.cur_pkt = 0;
  r.rd_atomic_outstanding = 0;
  r.gap_retry = false;
  r.ack_deadline = r.rnr_deadline = r.probe_deadline = 0;
  r.cwnd = r.ssthresh = r.cwnd_acc = 0;
  r.recovering = r.congested = false;
  r.timeouts_in_row = 0;
  r.sr_head = r.sr_tail = 0;
  r.probe_una = false;
  r.probes_in_row = 0;
  cc_reset_lc(qp);
}

void reset_responder(Endpoint& ep, Qp& qp) noexcept {
  auto& s = lc(qp).resp;
  reorder_clear_lc(ep, s.held);
  s.msn = 0;
  s.nak_sent = false;
  s.in_msg = QpLc::Responder::InMsg::kNone;
  s.have_recv = false;
  s.recv_off = 0;
  s.write_left = 0;
  s.res_next = 0;
  for (uint32_t i = 0; i < s.res_count; ++i) s.res[i].valid = false;
  s.jobs_head = s.jobs_count = 0;
  s.ack_pending = false;
}

}  // namespace

void qp_complete_recv_lc(Qp& qp, const RecvWqe& wqe, WcStatus wc, uint32_t bytes,
                         OperationType type, uint32_t imm, uint32_t flags, uint64_t type_specific,
                         uint32_t src_qpn) noexcept {
  retire_recv(qp);
  count_completion(qp, wc);
  ResultEx r;
  r.status = status_of(wc);
  r.bytes_transferred = bytes;
  r.qp_context = qp.config().context;
  r.request_context = wqe.request_context;
  r.type = type;
  r.provider_error_code = static_cast<uint32_t>(wc);
  r.type_specific_completion_output = type_specific;
  r.flags = flags;
  r.qpn = qp.qpn();
  r.src_qpn = src_qpn;
  if (flags & kResultHasImmediate) r.type_specific_completion_output = imm;
  if (Cq* cq = qp.config().recv_cq; cq != nullptr && !cq->push(r)) [[unlikely]]
    ++lc(qp).counters.completions_dropped;  // overrun: see complete_send()
}

void qp_complete_sq_head_lc(Qp& qp, WcStatus wc) noexcept {
  const SendWqe& w = *lc(qp).sq.front();
  // The slot is free before the completion shows: a poster that sees it and posts at once finds
  // the room it stands for (as a NIC frees a descriptor before it writes its CQE). Freed after,
  // the ring could still be full then (stock ib_send_bw -c UD: "Couldn't post send").
  if (!writes_cqe(w, wc)) {
    lc(qp).sq.pop();
    return finish_send(qp, wc, nullptr);
  }
  ResultEx r;
  send_result(qp, w, wc, &r);
  lc(qp).sq.pop();
  finish_send(qp, wc, &r);
}

uint32_t qp_retire_lc(Endpoint&, Qp& qp) noexcept {
  auto& r = lc(qp).req;
  uint32_t n = 0;
  // Completions leave in posting order (IBTA §10.8.6): stop at the first slot still in flight.
  while (r.head != r.tail && r.at(r.head).done) {
    SendSlot& s = r.at(r.head);
    complete_send(qp, s.wqe, s.wc);
    ++r.head;
    ++n;
  }
  return n;
}

namespace {

// The AETH syndrome's meaning (IBTA §9.7.5.2.8, table 44), for the log line.
const char* syndrome_name(int16_t syndrome) noexcept {
  const auto syn = static_cast<uint8_t>(syndrome);
  if ((syn & wire::aeth::kTypeMask) == wire::aeth::kRnrNak) return "RNR NAK";
  if ((syn & wire::aeth::kTypeMask) != wire::aeth::kNak) return "ACK";
  switch (syn & wire::aeth::kValueMask) {
    case wire::aeth::kNakPsnSeqError:
      return "NAK PSN sequence error";
    case wire::aeth::kNakInvalidRequest:
      return "NAK invalid request";
    case wire::aeth::kNakRemoteAccessError:
      return "NAK remote access error";
    case wire::aeth::kNakRemoteOperationalError:
      return "NAK remote operational error";
    case wire::aeth::kNakInvalidRdRequest:
      return "NAK invalid RD request";
    default:
      return "NAK reserved code";
  }
}

// The one line a QP's transition to ERR writes, on the engine lcore. Allowed there because it is
// rare (once per QP life, on a path that already flushes every WQE) and cheap when off (one level
// check, and urnic.dp is below INFO by default): when on, rte_log formats into a stack buffer and
// writes to DPDK's log stream, whose buffer is static (control/eal.cc), so nothing allocates; the
// stream's lock and the write(2) to stderr are the cost.
[[gnu::cold, gnu::noinline]] void log_error_transition(const Endpoint& ep, const Qp& qp,
                                                       QpState from, const ErrCause& why) noexcept {
  const uint32_t level = why.requested ? RTE_LOG_DEBUG : RTE_LOG_INFO;
  // Engines in protocol tests run without a port.
  const int port = ep.port() != nullptr ? ep.port()->port_id() : -1;
  if (why.syndrome < 0)
    log_line(LogType::kDp, level, "QP 0x%06x %s -> ERR on port %d: %s, %s", qp.qpn(),
             to_string(from), port, why.what, to_string(why.wc));
  else
    log_line(LogType::kDp, level, "QP 0x%06x %s -> ERR on port %d: %s, %s, syndrome 0x%02x (%s)",
             qp.qpn(), to_string(from), port, why.what, to_string(why.wc),
             static_cast<unsigned>(why.syndrome), syndrome_name(why.syndrome));
}

}  // namespace

void qp_to_error_lc(Endpoint& ep, Qp& qp, const ErrCause& why) noexcept {
  if (lc(qp).state != QpState::kErr) [[unlikely]]
    log_error_transition(ep, qp, lc(qp).state, why);
  lc(qp).state = QpState::kErr;
  lc(qp).public_state_.store(QpState::kErr, std::memory_order_release);
  auto& r = lc(qp).req;
  // Outstanding WQEs: those not already finished (successfully or with their own error) flush.
  for (uint64_t i = r.head; i != r.tail; ++i) {
    SendSlot& s = r.at(i);
    if (!s.done) {
      s.done = true;
      s.wc = WcStatus::kWrFlushErr;
    }
  }
  qp_retire_lc(ep, qp);
  reset_requester(ep, qp);
  // Queued WQEs never started: flushed in posting order.
  while (lc(qp).sq.front() != nullptr) qp_complete_sq_head_lc(qp, WcStatus::kWrFlushErr);
  if (lc(qp).resp.have_recv) {
    qp_complete_recv_lc(qp, lc(qp).resp.recv(), WcStatus::kWrFlushErr, 0, OperationType::kReceive,
                        0, 0, 0);
    lc(qp).resp.have_recv = false;
  }
  while (const RecvWqe* w = lc(qp).rq.front()) {
    qp_complete_recv_lc(qp, *w, WcStatus::kWrFlushErr, 0, OperationType::kReceive, 0, 0, 0);
    lc(qp).rq.pop();
  }
  reset_responder(ep, qp);
}

void qp_fail_lc(Endpoint& ep, Qp& qp, SendSlot* s, WcStatus wc, const char* what,
                int16_t syndrome) noexcept {
  if (s != nullptr) {
    s->done = true;
    s->wc = wc;
  }
  qp_retire_lc(ep, qp);
  qp_to_error_lc(ep, qp, {what, wc, syndrome, false});
}

void qp_cq_overrun_error_lc(Endpoint& ep, Qp& qp) noexcept {
  ++lc(qp).counters.cq_overrun_errors;
  qp_to_error_lc(ep, qp, {"completion queue overrun", WcStatus::kWrFlushErr, -1, false});
}

namespace {

// Whether the responder's arrays hold what `max_dest_rd_atomic` needs.
bool resp_arrays_fit(const Qp& qp, uint32_t max_dest_rd_atomic) noexcept {
  const uint32_t n = resp_resources_for(max_dest_rd_atomic);
  return n <= lc(qp).resp.res_cap && resp_jobs_for(n) <= lc(qp).resp.jobs_cap;
}

// Moves the responder's saved requests and queued jobs into the larger arrays `g` and hands the
// old ones back in `g` (freed by the control side with the message). Between two steps, so no
// job is half sent; in SQD the saved requests still answer duplicates (IBTA §9.7.5.1.1).
void install_resp_arrays_lc(Qp& qp, RespArrays& g) noexcept {
  auto& s = lc(qp).resp;
  for (uint32_t i = 0; i < s.res_cap && i < g.nres; ++i) g.res[i] = s.res[i];
  for (uint32_t k = 0; k < s.jobs_count; ++k) g.jobs[k] = s.job(k);  // oldest first, from 0
  std::swap(s.res, g.res);
  std::swap(s.jobs, g.jobs);
  const uint32_t old_res = s.res_cap, old_jobs = s.jobs_cap;
  s.res_cap = g.nres;
  s.jobs_cap = g.njobs;
  s.jobs_head = 0;
  g.nres = old_res;
  g.njobs = old_jobs;
}

}  // namespace

void qp_set_next_hop_lc(Qp& qp, const wire::MacAddr& mac) noexcept {
  const QpState st = lc(qp).state;
  if (st != QpState::kRtr && st != QpState::kRts && st != QpState::kSqd) return;
  lc(qp).attr.av.dst_mac = mac;
  lc(qp).net = wire::make_net_template(lc(qp).attr.av);
}

Status qp_modify_lc(Endpoint& ep, Qp& qp, const QpAttr& a, uint32_t mask,
                    RespArrays* grow) noexcept {
  const Status v = validate_modify(lc(qp).state, a, mask, qp.config().ud);
  if (v != Status::kSuccess) return v;
  // Selective repeat needs its buffers, allocated on the control side (Qp::prepare_...).
  if ((mask & qp_attr::kSelectiveRepeat) && a.selective_repeat && !qp.selective_repeat_ready())
    return Status::kInsufficientResources;
  const QpState next = (mask & qp_attr::kState) ? a.state : lc(qp).state;
  // So do more responder resources (RespArrays, made by Engine::call / submit).
  const bool grow_resp = (mask & qp_attr::kMaxDestRdAtomic) != 0 && next != QpState::kReset &&
                         next != QpState::kErr && !resp_arrays_fit(qp, a.max_dest_rd_atomic);
  if (grow_resp && (grow == nullptr || grow->nres < resp_resources_for(a.max_dest_rd_atomic) ||
                    grow->njobs < resp_jobs_for(resp_resources_for(a.max_dest_rd_atomic))))
    return Status::kInsufficientResources;
  if (next == QpState::kErr) {
    qp_to_error_lc(ep, qp, {"modified to ERR", WcStatus::kWrFlushErr, -1, true});
    return Status::kSuccess;
  }
  if (next == QpState::kReset) {
    // RESET empties the queues without completions (IBTA §10.3.1); what it drops still counts
    // as retired for the posting limits.
    retire_send(qp, lc(qp).req.tail - lc(qp).req.head);
    if (lc(qp).resp.have_recv) retire_recv(qp);
    reset_requester(ep, qp);
    reset_responder(ep, qp);
    while (lc(qp).sq.front() != nullptr) {
      lc(qp).sq.pop();
      retire_send(qp);
    }
    while (lc(qp).rq.front() != nullptr) {
      lc(qp).rq.pop();
      retire_recv(qp);
    }
    lc(qp).attr = QpAttr{};
    lc(qp).net = wire::NetTemplate{};
    lc(qp).state = QpState::kReset;
    lc(qp).public_state_.store(QpState::kReset, std::memory_order_release);
    return Status::kSuccess;
  }
  using namespace qp_attr;
  if (mask & kAccessFlags) lc(qp).attr.access = a.access;
  if (mask & kPathMtu) lc(qp).attr.path_mtu = a.path_mtu;
  if (mask & kDestQpn) lc(qp).attr.dest_qpn = a.dest_qpn;
  if (mask & kCongestion) {
    lc(qp).attr.cc = a.cc;
    cc_reset_lc(qp);
  }
  if (mask & kSelectiveRepeat) lc(qp).attr.selective_repeat = a.selective_repeat;
  if (mask & kQkey) lc(qp).attr.qkey = a.qkey;
  if (mask & kAv) {
    lc(qp).attr.av = a.av;
    lc(qp).attr.av.traffic_class = cc_traffic_class(lc(qp).attr.cc, a.av.traffic_class);
  }
  if (mask & (kAv | kDestQpn)) {
    lc(qp).attr.av.udp_sport = wire::udp_sport_for(qp.qpn(), lc(qp).attr.dest_qpn);
    lc(qp).net = wire::make_net_template(lc(qp).attr.av);  // every change of the av is here
  }
  if (mask & kRqPsn) {
    lc(qp).attr.rq_psn = a.rq_psn;
    lc(qp).resp.epsn = wire::Psn(a.rq_psn);
  }
  if (mask & kMaxDestRdAtomic) {
    lc(qp).attr.max_dest_rd_atomic = a.max_dest_rd_atomic;
    // Responder resources: a power of two >= the attribute (rxe does the same), within the
    // arrays, grown first if need be.
    if (grow_resp) install_resp_arrays_lc(qp, *grow);
    lc(qp).resp.res_count = resp_resources_for(a.max_dest_rd_atomic);
    lc(qp).resp.res_next = 0;
  }
  if (mask & kMinRnrTimer) lc(qp).attr.min_rnr_timer = a.min_rnr_timer;
  if (mask & kSqPsn) {
    lc(qp).attr.sq_psn = a.sq_psn;
    lc(qp).req.psn = lc(qp).req.una = lc(qp).req.max_sent = wire::Psn(a.sq_psn);
  }
  if (mask & kMaxRdAtomic) lc(qp).attr.max_rd_atomic = a.max_rd_atomic;
  if (mask & kTimeout) lc(qp).attr.timeout = a.timeout;
  if (mask & kRetryCnt) {
    lc(qp).attr.retry_cnt = a.retry_cnt;
    lc(qp).req.retry_left = a.retry_cnt;
  }
  if (mask & kRnrRetry) {
    lc(qp).attr.rnr_retry = a.rnr_retry;
    lc(qp).req.rnr_left = a.rnr_retry;
  }
  requester_retime_lc(qp);  // the timeout or selective repeat may have changed
  lc(qp).state = next;
  lc(qp).attr.state = next;
  lc(qp).public_state_.store(next, std::memory_order_release);
  return Status::kSuccess;
}

wire::TransportHeaders qp_headers(const Qp& qp, uint8_t opcode, wire::Psn psn,
                                  bool ack_req) noexcept {
  wire::TransportHeaders th;
  th.bth.opcode = opcode;
  th.bth.pkey = wire::Be16::of(wire::kDefaultPkey);
  wire::Bth::DestQp::set(th.bth, lc(qp).attr.dest_qpn);
  wire::Bth::Psn::set(th.bth, psn.value());
  wire::Bth::AckReq::set(th.bth, ack_req ? 1u : 0u);
  return th;
}

namespace {
// An mbuf of the endpoint's pool holding `len` bytes, or null (counted).
rte_mbuf* alloc_frame(Endpoint& ep, uint32_t len, uint8_t** data) noexcept {
  rte_mbuf* m = rte_pktmbuf_alloc(ep.pool());
  if (m == nullptr) [[unlikely]] {
    ++ep.counters().mbuf_alloc_failures;
    return nullptr;
  }
  *data = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, static_cast<uint16_t>(len)));
  if (*data == nullptr) [[unlikely]] {
    rte_pktmbuf_free(m);
    ++ep.counters().mbuf_alloc_failures;
    return nullptr;
  }
  return m;
}
}  // namespace

rte_mbuf* frame_lc(Endpoint& ep, const wire::NetHeaders& net, const wire::TransportHeaders& th,
                   uint32_t payload_len, uint8_t** payload) noexcept {
  uint8_t* p = nullptr;
  rte_mbuf* m = alloc_frame(ep, wire::frame_length(net, th.bth.opcode, payload_len), &p);
  if (m != nullptr) *payload = p + wire::build_headers(p, net, th, payload_len);
  return m;
}

rte_mbuf* qp_frame_lc(Endpoint& ep, Qp& qp, const wire::TransportHeaders& th, uint32_t payload_len,
                      uint8_t** payload) noexcept {
  const wire::NetTemplate& t = lc(qp).net;
  if (!t.valid()) [[unlikely]]
    return frame_lc(ep, lc(qp).attr.av, th, payload_len, payload);
  uint8_t* p = nullptr;
  rte_mbuf* m = alloc_frame(ep, wire::frame_length(t, th.bth.opcode, payload_len), &p);
  if (m != nullptr) *payload = p + wire::build_headers(p, t, th, payload_len);
  return m;
}

void qp_send_frame_lc(Endpoint& ep, Qp& qp, rte_mbuf* m, uint8_t opcode, uint32_t payload_len,
                      const uint32_t* crc) noexcept {
  uint8_t* f = rte_pktmbuf_mtod(m, uint8_t*);
  const uint32_t len = crc != nullptr
                           ? wire::finish_frame_crc(f, lc(qp).attr.av, opcode, payload_len, *crc)
                           : wire::finish_frame(f, lc(qp).attr.av, opcode, payload_len);
  ++lc(qp).counters.tx_packets;
  lc(qp).counters.tx_bytes += len;
  ep.tx_append(m);
}

uint32_t* qp_fused_crc_lc(const Qp& qp, const rte_mbuf* m, uint8_t opcode, uint32_t payload_len,
                          uint32_t* state) noexcept {
  if (payload_len < kFuseMinPayload) return nullptr;
  *state =
      wire::header_crc(rte_pktmbuf_mtod(m, const uint8_t*), lc(qp).attr.av, opcode, payload_len);
  return state;
}

WcStatus gather_lc(const MrTable& mrs, uint32_t pd, const SendWqe& wqe, uint32_t off, uint32_t len,
                   uint8_t* dst, uint32_t* crc) noexcept {
  if (len == 0) return WcStatus::kSuccess;
  if (wqe.flags & op_flag::kInline) {
    // Inline data was copied into the WQE at post time; its SGE tokens are ignored (NDK).
    if (crc != nullptr) {
      *crc = wire::crc32_copy(*crc, dst, wqe.inline_data + off, len);
    } else {
      std::memcpy(dst, wqe.inline_data + off, len);
    }
    return WcStatus::kSuccess;
  }
  for (uint32_t i = 0; i < wqe.num_sge && len != 0; ++i) {
    const Sge& s = wqe.sge[i];
    if (off >= s.length) {
      off -= s.length;
      continue;
    }
    const uint32_t n = s.length - off < len ? s.length - off : len;
    if (mrs.copy_out_crc(s.token, pd, s.addr + off, dst, n, access::kLocalRead, crc) !=
        MrCheck::kOk)
      return WcStatus::kLocProtErr;
    dst += n;
    len -= n;
    off = 0;
  }
  return len == 0 ? WcStatus::kSuccess : WcStatus::kLocLenErr;
}

WcStatus scatter_lc(const MrTable& mrs, uint32_t pd, const Sge* sge, uint32_t nsge, uint32_t off,
                    const uint8_t* src, uint32_t len, uint32_t access) noexcept {
  if (len == 0) return WcStatus::kSuccess;
  for (uint32_t i = 0; i < nsge && len != 0; ++i) {
    const Sge& s = sge[i];
    if (off >= s.length) {
      off -= s.length;
      continue;
    }
    const uint32_t n = s.length - off < len ? s.length - off : len;
    if (mrs.copy_in(s.token, pd, s.addr + off, src, n, access) != MrCheck::kOk)
      return WcStatus::kLocProtErr;
    src += n;
    len -= n;
    off = 0;
  }
  return len == 0 ? WcStatus::kSuccess : WcStatus::kLocLenErr;
}

}  // namespace urnic::dp

// Connection manager (see cm.h): names, helpers, MAD output and QP transitions. Structure,
// following Linux's drivers/infiniband/core/cm.c where behaviour matters for interop:
//   - on_mad() decodes a MAD, finds its connection by comm IDs (or creates one for a new REQ) and
//     feeds it to step(), the switch driver over CmState; each state has one function that takes
//     an Input (a received message or a timer expiry) and returns the next state (rule 11);
//   - the API calls (connect, accept, ...) check the state, do their QP transitions and sends,
//     and set the state directly;
//   - poll() runs the timers: neighbour resolution before a REQ, retransmission of REQ / REP /
//     DREQ every CM response timeout, and TIMEWAIT expiry.
// Everything runs under Core::mu_. Callbacks are queued (post()) and run by the control thread
#include "control/cm/cm_core.h"

#include <rte_cycles.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <unordered_map>

#include "control/cm/cma.h"
#include "urnic/config.h"

namespace urnic::ctl {

const char* to_string(CmState s) noexcept {
  static constexpr const char* kNames[] = {
      "IDLE",      "REQ_SENT",  "REQ_RCVD",     "MRA_REQ_SENT",  "MRA_REQ_RCVD",
      "REP_SENT",  "REP_RCVD",  "MRA_REP_SENT", "MRA_REP_RCVD",  "ESTABLISHED",
      "DREQ_SENT", "DREQ_RCVD", "TIMEWAIT",     "SIDR_REQ_SENT", "SIDR_REQ_RCVD"};
  static_assert(std::size(kNames) == static_cast<size_t>(CmState::kCount));
  const auto i = static_cast<size_t>(s);
  return i < std::size(kNames) ? kNames[i] : "?";
}

std::optional<cm::Gid> local_gid_for(const Adapter& adapter, const cm::Gid& peer) {
  if (gid_is_ipv4(peer)) {
    if (adapter.ipv4() == 0) return std::nullopt;
    return gid_from_ipv4(adapter.ipv4());
  }
  if (peer[0] == 0xFE && (peer[1] & 0xC0) == 0x80) return link_local_gid(adapter.mac());
  if (!adapter.ipv6()) return std::nullopt;
  return *adapter.ipv6();
}

namespace cm_detail {

// ---- Helpers
// --------------------------------------------------------------------------------------

uint32_t Core::new_comm_id() {
  for (;;) {
    const auto id = static_cast<uint32_t>(rng_());
    if (id != 0 && by_local_.count(id) == 0) return id;
  }
}

void Core::register_remote(const std::shared_ptr<Conn>& c) {
  by_remote_[{c->remote_guid, c->remote_id}] = c;
  if (c->remote_qpn != 0) by_qpn_[{c->remote_gid, c->remote_qpn}] = c;
}

void Core::unregister(Conn& c) {
  auto l = by_local_.find(c.local_id);
  if (l != by_local_.end() && l->second.get() == &c) by_local_.erase(l);
  auto r = by_remote_.find({c.remote_guid, c.remote_id});
  if (r != by_remote_.end() && r->second.get() == &c) by_remote_.erase(r);
  auto q = by_qpn_.find({c.remote_gid, c.remote_qpn});
  if (q != by_qpn_.end() && q->second.get() == &c) by_qpn_.erase(q);
  auto sd = by_sidr_.find({c.remote_gid, c.remote_id});
  if (sd != by_sidr_.end() && sd->second.get() == &c) by_sidr_.erase(sd);
  c.timer = Timer::kNone;
}

// A remote QP that is still part of a live connection (IBTA §12.9.8.3.1 stale connections);
// connections in TIMEWAIT do not count, so a peer may reuse a QP number after disconnecting.
bool Core::stale_qpn(const cm::Gid& gid, uint32_t qpn, const Conn* except) const {
  auto q = by_qpn_.find({gid, qpn});
  return q != by_qpn_.end() && q->second.get() != except &&
         q->second->state != CmState::kTimewait && q->second->state != CmState::kIdle;
}

void Core::send_to(const cm::Gid& dst, const Message& m) {
  const size_t idx = attr_slot(cm::attr_id(m));
  if constexpr (kTesting) {
    if (cfg_.testing_drop_tx && cfg_.testing_drop_tx(m)) {
      ++counters_.mads_out;  // sent, then lost on the wire
      ++counters_.out_by_attr[idx];
      return;
    }
  }
  const auto bytes = cm::encode(m);
  const Status s =
      adapter_.control().send_mad(dst, 1, ControlPlane::kGsiQkey, bytes, 0, cfg_.hop_limit);
  if (s == Status::kSuccess) {
    ++counters_.mads_out;
    ++counters_.out_by_attr[idx];
  } else {
    // Neighbour expired (or TX ring full): the retransmission timer, or the peer's, resends.
    ++counters_.send_failures;
    if (s == Status::kHostUnreachable) adapter_.control().request(dst);
  }
}

void Core::send(Conn& c, const Message& m, bool retransmit) {
  if (retransmit) {
    c.last_sent = cm::encode(m);
  } else {
    c.last_reply = cm::encode(m);
    c.have_reply = true;
  }
  send_to(c.remote_gid, m);
}

void Core::send_rej(Conn& c, RejReason reason, MsgResponse msg, std::span<const uint8_t> pdata) {
  cm::Rej r;
  // Linux (cm_format_rej): a REJ of a REQ not yet MRAed carries local comm ID 0.
  r.local_comm_id = c.state == CmState::kReqRcvd ? 0 : c.local_id;
  r.remote_comm_id = c.remote_id;
  r.message_rejected = msg;
  r.reason = reason;
  std::copy_n(pdata.begin(), std::min(pdata.size(), r.private_data.size()), r.private_data.begin());
  ++counters_.rej_sent;
  send(c, Message{c.tid, 0, r}, false);
}

// REJ "timeout" carries our CA GUID as ARI (IBTA §12.6.7.2); Linux finds the connection by it.
void Core::send_timeout_rej(Conn& c, MsgResponse msg) {
  cm::Rej r;
  r.local_comm_id = c.local_id;
  r.remote_comm_id = c.remote_id;
  r.message_rejected = msg;
  r.reason = RejReason::kTimeout;
  r.ari_length = 8;
  for (int i = 0; i < 8; ++i) r.ari[i] = static_cast<uint8_t>(guid_ >> (56 - 8 * i));
  ++counters_.rej_sent;
  send(c, Message{c.tid, 0, r}, false);
}

void Core::rej_unmatched(const MadIn& in, const Message& m, uint32_t their_id, MsgResponse msg,
                         RejReason reason) {
  cm::Rej r;
  r.local_comm_id = 0;
  r.remote_comm_id = their_id;
  r.message_rejected = msg;
  r.reason = reason;
  ++counters_.rej_sent;
  send_to(in.src_gid, Message{m.tid, 0, r});
}

void Core::send_sidr_rep(Conn& c, cm::SidrStatus status, uint32_t qpn, uint32_t qkey,
                         std::span<const uint8_t> pdata) {
  cm::SidrRep r;
  r.request_id = c.remote_id;
  r.status = status;
  r.qpn = qpn;
  r.service_id = cm::service_id_for(c.local_port, cm::kPsUdp);
  r.qkey = qkey;
  std::copy_n(pdata.begin(), std::min(pdata.size(), r.private_data.size()), r.private_data.begin());
  send(c, Message{c.tid, 0, r}, false);
  // Linux forgets a SIDR request once answered, so a late retry reaches the listener again; we
  // hold the answer for a TIMEWAIT and send it again instead (on_timewait).
  enter(c, CmState::kTimewait);
}

void Core::sidr_unmatched(const MadIn& in, const Message& m, cm::SidrStatus status) {
  const auto& req = std::get<cm::SidrReq>(m.body);
  cm::SidrRep r;
  r.request_id = req.request_id;
  r.status = status;
  r.service_id = req.service_id;
  send_to(in.src_gid, Message{m.tid, 0, r});
}

wire::NetHeaders Core::av_for(const Conn& c) const {
  wire::NetHeaders av;
  av.src_mac = adapter_.mac();
  av.dst_mac = c.remote_mac;
  if (gid_is_ipv4(c.remote_gid)) {
    av.src_ip4 = gid_to_ipv4(c.local_gid);
    av.dst_ip4 = gid_to_ipv4(c.remote_gid);
  } else {
    av.ipv6 = true;
    av.src_ip6 = c.local_gid;
    av.dst_ip6 = c.remote_gid;
  }
  av.hop_limit = cfg_.hop_limit;
  return av;
}

// INIT (if needed) -> RTR -> RTS with the negotiated attributes (rocev2.md §3.8 table).
Status Core::qp_to_rts(Conn& c, dp::Qp* qp) {
  using namespace dp::qp_attr;
  dp::QpAttr at;
  if (qp->public_state() == dp::QpState::kReset) {
    at.state = dp::QpState::kInit;
    at.access = cfg_.qp_access;
    if (Status s = adapter_.modify_qp(qp, at, kState | kAccessFlags); s != Status::kSuccess)
      return s;
  }
  at.state = dp::QpState::kRtr;
  at.av = av_for(c);
  at.path_mtu = c.mtu;
  at.dest_qpn = c.remote_qpn;
  at.rq_psn = c.rq_psn;
  // A QP always has at least one responder resource; the advertised limit may be 0.
  at.max_dest_rd_atomic = static_cast<uint8_t>(std::max<uint32_t>(1, c.effective.inbound));
  at.min_rnr_timer = cfg_.min_rnr_timer;
  at.selective_repeat = c.selective_repeat;  // negotiated (cm::kSrMark); else go-back-N
  if (c.selective_repeat && !qp->prepare_selective_repeat()) return Status::kInsufficientResources;
  if (Status s = adapter_.modify_qp(qp, at,
                                    kState | kAv | kPathMtu | kDestQpn | kRqPsn | kMaxDestRdAtomic |
                                        kMinRnrTimer | kSelectiveRepeat);
      s != Status::kSuccess)
    return s;
  at.state = dp::QpState::kRts;
  at.sq_psn = c.sq_psn;
  at.timeout = cfg_.local_ack_timeout;
  at.retry_cnt = c.retry_count;
  at.rnr_retry = c.rnr_retry_count;
  at.max_rd_atomic = static_cast<uint8_t>(std::max<uint32_t>(1, c.effective.outbound));
  return adapter_.modify_qp(qp, at,
                            kState | kSqPsn | kTimeout | kRetryCnt | kRnrRetry | kMaxRdAtomic);
}

}  // namespace cm_detail
}  // namespace urnic::ctl

// The connection manager's API actions (connect, accept, reject, disconnect, close, listen,
// shutdown) on the core (cm_core.h).
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

namespace urnic::ctl::cm_detail {

// ---- API
// ------------------------------------------------------------------------------------------

Status Core::connect(const std::shared_ptr<Conn>& cp, dp::Qp* qp, const cm::Gid& dst, uint16_t port,
                     const ReadLimits& lim, std::span<const uint8_t> pdata, CmCompletion done) {
  Conn& c = *cp;
  if (qp == nullptr || port == 0 || !done) return Status::kInvalidParameter;
  if (pdata.size() > cm::kMaxReqUserData) return Status::kInvalidBufferSize;
  std::lock_guard lock(mu_);
  if (dead_) return Status::kDeviceRemoved;
  if (c.used) return Status::kConnectionActive;
  const auto local = local_gid_for(adapter_, dst);
  // One's own address is a destination like another: the engine loops the MADs and the
  // data back (dp::Port::loopback), and this CM takes both ends (issue 40).
  if (!local) return Status::kInvalidAddress;
  const dp::QpState st = qp->public_state();
  if (st == dp::QpState::kReset) {
    dp::QpAttr at;
    at.state = dp::QpState::kInit;
    at.access = cfg_.qp_access;
    if (Status s = adapter_.modify_qp(qp, at, dp::qp_attr::kState | dp::qp_attr::kAccessFlags);
        s != Status::kSuccess)
      return s;
  } else if (st != dp::QpState::kInit) {
    return Status::kInvalidDeviceState;
  }
  c.qp = qp;
  c.local_qpn = qp->qpn();
  c.requested = {std::min(lim.inbound, cfg_.max_read_limit),
                 std::min(lim.outbound, cfg_.max_read_limit)};
  c.rq_psn = new_psn();
  c.mtu = cfg_.path_mtu;
  c.retry_count = cfg_.retry_count;
  start_active(cp, *local, dst, port, pdata, std::move(done));
  return Status::kPending;
}

Status Core::resolve(const std::shared_ptr<Conn>& cp, const cm::Gid& dst, uint16_t port,
                     std::span<const uint8_t> pdata, CmCompletion done) {
  Conn& c = *cp;
  if (port == 0 || !done) return Status::kInvalidParameter;
  if (pdata.size() > cm::kMaxSidrReqUserData) return Status::kInvalidBufferSize;
  std::lock_guard lock(mu_);
  if (dead_) return Status::kDeviceRemoved;
  if (c.used) return Status::kConnectionActive;
  const auto local = local_gid_for(adapter_, dst);
  // SIDR to one's own address stays refused (UD to one's own GID needs no SIDR exchange: an
  // address handle to it works, the engine loops the datagrams back).
  if (!local || adapter_.control().is_local(dst)) return Status::kInvalidAddress;
  c.datagram = true;
  start_active(cp, *local, dst, port, pdata, std::move(done));
  return Status::kPending;
}

void Core::start_active(const std::shared_ptr<Conn>& cp, const cm::Gid& local, const cm::Gid& dst,
                        uint16_t port, std::span<const uint8_t> pdata, CmCompletion done) {
  Conn& c = *cp;
  c.used = true;
  c.active = true;
  c.local_id = new_comm_id();
  c.tid = new_tid();
  c.local_gid = local;
  c.remote_gid = dst;
  c.local_port = ephemeral_port();
  c.remote_port = port;
  c.resp_timeout = cfg_.cm_response_timeout;
  c.max_retries = cfg_.max_cm_retries;
  c.own_pdata.assign(pdata.begin(), pdata.end());  // carried into the request by send_request()
  c.done = std::move(done);
  register_conn(cp);
  if (auto mac = adapter_.control().lookup(dst)) {
    c.remote_mac = *mac;
    send_request(c);
  } else {
    // Resolve first (ARP / ND with the control plane's retries); poll() sends the request.
    adapter_.control().request(dst);
    c.timer = Timer::kResolve;
    c.deadline = Clock::now() + cfg_.resolve_timeout;
  }
}

Status Core::accept_datagram(Conn& c, uint32_t qpn, uint32_t qkey, std::span<const uint8_t> pdata) {
  // QPN 0 and 1 are the special QPs; a SIDR_REP has 24 bits for it.
  if (qpn <= 1 || qpn > 0xFFFFFF) return Status::kInvalidParameter;
  if (pdata.size() > cm::kSidrRepPrivateData) return Status::kInvalidBufferSize;
  std::lock_guard lock(mu_);
  if (dead_) return Status::kDeviceRemoved;
  if (!c.datagram || c.active || c.state != CmState::kSidrReqRcvd)
    return Status::kConnectionInvalid;
  c.local_qpn = qpn;
  c.qkey = qkey != 0 ? qkey : cm::kRdmaUdpQkey;
  send_sidr_rep(c, cm::SidrStatus::kValid, qpn, c.qkey, pdata);
  return Status::kSuccess;
}

Status Core::datagram_peer(const Conn& c, uint32_t* qpn, uint32_t* qkey) const {
  std::lock_guard lock(mu_);
  if (!c.datagram || !c.active || !c.resolved) return Status::kConnectionInvalid;
  if (qpn != nullptr) *qpn = c.remote_qpn;
  if (qkey != nullptr) *qkey = c.qkey;
  return Status::kSuccess;
}

Status Core::complete_connect(Conn& c, CmDisconnectEvent on_disconnect) {
  std::lock_guard lock(mu_);
  if (dead_) return Status::kDeviceRemoved;
  if (c.aborted) return Status::kConnectionAborted;
  if (!c.active || (c.state != CmState::kRepRcvd && c.state != CmState::kMraRepSent))
    return Status::kConnectionInvalid;
  if (c.qp == nullptr) return Status::kConnectionInvalid;
  if (Status s = qp_to_rts(c, c.qp); s != Status::kSuccess) return s;
  cm::Rtu rtu{c.local_id, c.remote_id, {}};
  send(c, Message{c.tid, 0, rtu}, false);
  c.on_disconnect = std::move(on_disconnect);
  enter(c, CmState::kEstablished);
  c.timer = Timer::kNone;
  return Status::kSuccess;
}

Status Core::accept(Conn& c, dp::Qp* qp, const ReadLimits& lim, std::span<const uint8_t> pdata,
                    CmDisconnectEvent on_disconnect, CmCompletion done) {
  if (qp == nullptr || !done) return Status::kInvalidParameter;
  if (pdata.size() > cm::kRepPrivateData) return Status::kInvalidBufferSize;
  std::lock_guard lock(mu_);
  if (dead_) return Status::kDeviceRemoved;
  if (c.aborted) return Status::kConnectionAborted;
  if (c.active || (c.state != CmState::kReqRcvd && c.state != CmState::kMraReqSent))
    return Status::kConnectionInvalid;
  const dp::QpState st = qp->public_state();
  if (st != dp::QpState::kReset && st != dp::QpState::kInit) return Status::kInvalidDeviceState;
  // NDK read limits (ndkpi.md §5.3): inbound = min(ours, adapter, peer's outbound) and the same
  // the other way round.
  c.requested = {std::min(lim.inbound, cfg_.max_read_limit),
                 std::min(lim.outbound, cfg_.max_read_limit)};
  c.effective = {std::min(c.requested.inbound, c.peer.outbound),
                 std::min(c.requested.outbound, c.peer.inbound)};
  c.rq_psn = new_psn();
  c.local_qpn = qp->qpn();
  // The consumer's REP data ends before the mark (kMaxCalleeData < kRepPrivateData - 8).
  c.selective_repeat = cfg_.selective_repeat && c.sr_peer_offered &&
                       pdata.size() <= cm::kRepPrivateData - cm::kSrMark.size();
  if (Status s = qp_to_rts(c, qp); s != Status::kSuccess) return s;
  c.qp = qp;
  cm::Rep rep;
  rep.local_comm_id = c.local_id;
  rep.remote_comm_id = c.remote_id;
  rep.local_qpn = c.local_qpn;
  rep.starting_psn = c.rq_psn;  // Linux CM: the PSN we expect to receive
  rep.responder_resources =
      static_cast<uint8_t>(c.effective.inbound + (cfg_.broken.cm_rep_resources ? 1 : 0));
  rep.initiator_depth = static_cast<uint8_t>(c.effective.outbound);
  rep.target_ack_delay = cfg_.target_ack_delay;
  rep.failover_accepted = 0;
  rep.e2e_flow_control = cm::kE2eFlowControl;
  rep.rnr_retry_count = cfg_.rnr_retry_count;
  rep.local_ca_guid = guid_;
  std::copy(pdata.begin(), pdata.end(), rep.private_data.begin());
  if (c.selective_repeat) cm::put_sr_mark(rep.private_data);
  send(c, Message{c.tid, 0, rep}, true);
  arm_retransmit(c);
  if (cfg_.broken.cm_rep_retry) c.retries_left = 0;
  c.done = std::move(done);
  c.on_disconnect = std::move(on_disconnect);
  enter(c, CmState::kRepSent);
  return Status::kPending;
}

Status Core::reject(Conn& c, std::span<const uint8_t> pdata) {
  if (pdata.size() > cm::kRejPrivateData) return Status::kInvalidBufferSize;
  std::lock_guard lock(mu_);
  if (dead_) return Status::kDeviceRemoved;
  if (c.aborted) return Status::kConnectionAborted;
  switch (c.state) {
    case CmState::kReqRcvd:
    case CmState::kMraReqSent:
      send_rej(c, RejReason::kConsumerDefined, MsgResponse::kReq, pdata);
      enter(c, CmState::kIdle);
      return Status::kSuccess;
    case CmState::kRepRcvd:
    case CmState::kMraRepSent:
      send_rej(c, RejReason::kConsumerDefined, MsgResponse::kRep, pdata);
      enter(c, CmState::kTimewait);
      return Status::kSuccess;
    case CmState::kSidrReqRcvd:  // SIDR_REP status 2, "rejected by service provider"
      if (pdata.size() > cm::kSidrRepPrivateData) return Status::kInvalidBufferSize;
      send_sidr_rep(c, cm::SidrStatus::kRejected, 0, 0, pdata);
      return Status::kSuccess;
    default:
      return Status::kConnectionInvalid;
  }
}

Status Core::disconnect(Conn& c, CmCompletion done) {
  std::lock_guard lock(mu_);
  if (dead_) return Status::kDeviceRemoved;
  if (c.peer_disconnected && !c.local_disconnect) {
    // The peer went first: nothing to exchange; flush like a graceful disconnect would.
    c.local_disconnect = true;
    c.on_disconnect = nullptr;
    flush_qp(c);
    return Status::kSuccess;
  }
  if (c.state != CmState::kEstablished || !done) return Status::kConnectionInvalid;
  c.local_disconnect = true;
  c.on_disconnect = nullptr;
  cm::Dreq dreq{c.local_id, c.remote_id, c.remote_qpn, {}};
  send(c, Message{new_tid(), 0, dreq}, true);
  arm_retransmit(c);
  c.done = std::move(done);
  enter(c, CmState::kDreqSent);
  return Status::kPending;
}

void Core::close(Conn& c) {
  std::lock_guard lock(mu_);
  if (c.closed) return;
  c.done = nullptr;
  c.on_disconnect = nullptr;
  if (!dead_) {
    switch (c.state) {
      case CmState::kIdle:
        unregister(c);  // possibly still resolving
        break;
      case CmState::kReqSent:
      case CmState::kMraReqRcvd:
        // Linux cm_destroy_id: an abandoned REQ is answered for with REJ "timeout".
        c.timer = Timer::kNone;
        send_timeout_rej(c, MsgResponse::kReq);
        enter(c, CmState::kTimewait);
        break;
      case CmState::kReqRcvd:
      case CmState::kMraReqSent:
        if (!c.aborted) send_rej(c, RejReason::kConsumerDefined, MsgResponse::kReq);
        enter(c, CmState::kIdle);
        break;
      case CmState::kRepSent:
      case CmState::kMraRepRcvd:
        send_rej(c, RejReason::kConsumerDefined, MsgResponse::kRep);
        enter(c, CmState::kTimewait);
        break;
      case CmState::kRepRcvd:
      case CmState::kMraRepSent:
        if (!c.aborted) send_rej(c, RejReason::kConsumerDefined, MsgResponse::kRep);
        enter(c, CmState::kTimewait);
        break;
      case CmState::kSidrReqSent:  // Linux cm_destroy_id: the SIDR_REQ is just cancelled
        enter(c, CmState::kIdle);
        break;
      case CmState::kSidrReqRcvd:  // ... and an undecided one refused (IB_SIDR_REJECT)
        send_sidr_rep(c, cm::SidrStatus::kRejected, 0, 0, {});
        break;
      case CmState::kEstablished: {
        cm::Dreq dreq{c.local_id, c.remote_id, c.remote_qpn, {}};
        c.local_disconnect = true;
        send(c, Message{new_tid(), 0, dreq}, true);
        arm_retransmit(c);
        enter(c, CmState::kDreqSent);
        break;
      }
      default:
        break;
    }
  }
  c.closed = true;
  c.qp = nullptr;
}

Status Core::listen(const std::shared_ptr<Listen>& l, uint16_t port, CmRequestHandler on_request,
                    uint16_t port_space) {
  if (!on_request || (port_space != cm::kPsTcp && port_space != cm::kPsUdp))
    return Status::kInvalidParameter;
  std::lock_guard lock(mu_);
  if (dead_) return Status::kDeviceRemoved;
  if (l->listening || l->closed) return Status::kInvalidParameter;
  const auto taken = [&](uint16_t p) { return listeners_.count({port_space, p}) != 0; };
  if (port == 0) {
    for (int i = 0; i < 65536 && (port == 0 || taken(port)); ++i) port = ephemeral_port();
    if (taken(port)) return Status::kTooManyAddresses;
  } else if (taken(port)) {
    return Status::kAddressAlreadyAssociated;
  }
  l->port = port;
  l->port_space = port_space;
  l->on_request = std::move(on_request);
  l->listening = true;
  listeners_[{port_space, port}] = l;
  return Status::kSuccess;
}

void Core::close_listener(Listen& l) {
  std::lock_guard lock(mu_);
  if (l.closed) return;
  l.closed = true;
  l.on_request = nullptr;
  auto it = listeners_.find({l.port_space, l.port});
  if (l.listening && it != listeners_.end() && it->second.get() == &l) listeners_.erase(it);
}

void Core::shutdown() {
  std::lock_guard lock(mu_);
  dead_ = true;
  pending_.clear();
  for (auto& [id, c] : by_local_) {
    c->done = nullptr;
    c->on_disconnect = nullptr;
    c->timer = Timer::kNone;
  }
  by_local_.clear();
  by_remote_.clear();
  by_qpn_.clear();
  by_sidr_.clear();
  listeners_.clear();
}

}  // namespace urnic::ctl::cm_detail

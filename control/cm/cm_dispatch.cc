// Received MADs (on_mad and the per-message handlers) and the timers (REQ retransmission,
// poll()) of the connection manager (cm_core.h).
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

// ---- Received MADs
// --------------------------------------------------------------------------------

void Core::on_mad(const MadIn& in) {
  Message m;
  const cm::MadError err = cm::decode(in.mad, &m);
  {
    std::lock_guard lock(mu_);
    if (dead_) return;
    ++counters_.mads_in;
    if (err != cm::MadError::kOk) {
      ++counters_.decode_errors[static_cast<size_t>(err)];
    } else {
      ++counters_.in_by_attr[attr_slot(cm::attr_id(m))];
      switch (cm::attr_id(m)) {
        case cm::AttrId::kReq:
          handle_req(in, m);
          break;
        case cm::AttrId::kRep:
          handle_rep(in, m);
          break;
        case cm::AttrId::kRej:
          handle_rej(in, m);
          break;
        case cm::AttrId::kMra:
          handle_mra(in, m);
          break;
        case cm::AttrId::kRtu: {
          const auto& b = std::get<cm::Rtu>(m.body);
          handle_by_ids(in, m, b.remote_comm_id, b.local_comm_id, Input::Kind::kRtu);
          break;
        }
        case cm::AttrId::kDreq: {
          const auto& b = std::get<cm::Dreq>(m.body);
          handle_by_ids(in, m, b.remote_comm_id, b.local_comm_id, Input::Kind::kDreq);
          break;
        }
        case cm::AttrId::kDrep: {
          const auto& b = std::get<cm::Drep>(m.body);
          handle_by_ids(in, m, b.remote_comm_id, b.local_comm_id, Input::Kind::kDrep);
          break;
        }
        case cm::AttrId::kSidrReq:
          handle_sidr_req(in, m);
          break;
        case cm::AttrId::kSidrRep:
          handle_sidr_rep(in, m);
          break;
        default:
          break;
      }
    }
  }
  drain();
}

void Core::handle_req(const MadIn& in, const Message& m) {
  const auto& req = std::get<cm::Req>(m.body);
  // A retransmitted REQ (IBTA §12.9.8.3: same remote comm ID and CA GUID) goes to its connection.
  if (auto it = by_remote_.find({req.local_ca_guid, req.local_comm_id});
      it != by_remote_.end() && !cfg_.broken.cm_dup_req) {
    ++counters_.duplicates;
    drive(it->second, Input{Input::Kind::kReq, &m, &in});
    return;
  }
  // Only RDMA IP CM services over RC (rdma_cm's RDMA_PS_TCP) are offered.
  if (!cm::is_ip_service(req.service_id) || cm::ip_protocol_of(req.service_id) != cm::kIpProtoTcp) {
    ++counters_.no_listener;
    rej_unmatched(in, m, req.local_comm_id, MsgResponse::kReq, RejReason::kInvalidServiceId);
    return;
  }
  if (req.transport_service_type != 0 || req.extended_transport_type != 0) {
    rej_unmatched(in, m, req.local_comm_id, MsgResponse::kReq, RejReason::kInvalidTransportType);
    return;
  }
  const uint32_t mtu = cm::mtu_bytes(req.path_mtu);
  if (mtu == 0 || mtu > cfg_.max_path_mtu) {
    rej_unmatched(in, m, req.local_comm_id, MsgResponse::kReq, RejReason::kInvalidMtu);
    return;
  }
  cm::CmaHdr hdr;
  if (!cm::decode(
          std::span<const uint8_t, cm::kCmaHdrSize>(req.private_data.data(), cm::kCmaHdrSize),
          &hdr)) {
    rej_unmatched(in, m, req.local_comm_id, MsgResponse::kReq, RejReason::kConsumerDefined);
    return;
  }
  auto li = listeners_.find({cm::kPsTcp, cm::port_of(req.service_id)});
  if (li == listeners_.end() || li->second->paused || li->second->closed ||
      !adapter_.control().is_local(hdr.dst)) {
    ++counters_.no_listener;
    rej_unmatched(
        in, m, req.local_comm_id, MsgResponse::kReq,
        cfg_.broken.cm_rej_reason ? RejReason::kConsumerDefined : RejReason::kInvalidServiceId);
    return;
  }
  if (pending_requests(*li->second) >= cfg_.max_pending_requests) {
    ++counters_.backlog_full;
    rej_unmatched(in, m, req.local_comm_id, MsgResponse::kReq, RejReason::kNoResources);
    return;
  }
  if (stale_qpn(in.src_gid, req.local_qpn, nullptr) && !cfg_.broken.cm_stale) {
    ++counters_.stale;
    rej_unmatched(in, m, req.local_comm_id, MsgResponse::kReq, RejReason::kStaleConn);
    return;
  }
  auto c = std::make_shared<Conn>();
  c->used = true;
  enter(*c, CmState::kReqRcvd);
  c->local_id = new_comm_id();
  c->remote_id = req.local_comm_id;
  c->remote_guid = req.local_ca_guid;
  c->tid = m.tid;
  c->local_gid = in.dst_gid;
  c->remote_gid = in.src_gid;  // responses go where the REQ came from (cm_init_av_for_response)
  c->remote_mac = in.src_mac;
  c->local_port = li->second->port;
  c->remote_port = hdr.src_port;
  c->remote_qpn = req.local_qpn;
  c->sq_psn = req.starting_psn;  // Linux CM: the REQ's Starting PSN is what the peer expects
  c->mtu = mtu;
  c->retry_count = req.retry_count;
  c->rnr_retry_count = req.rnr_retry_count;
  c->peer = {req.responder_resources, req.initiator_depth};
  // REP retransmissions follow the active side's wishes (cm_req_handler: its Local CM Response
  // Timeout and Max CM Retries).
  c->resp_timeout = req.local_cm_response_timeout;
  c->max_retries = cfg_.broken.cm_max_retries ? 15 : req.max_cm_retries;
  c->peer_pdata.assign(req.private_data.begin() + cm::kCmaHdrSize, req.private_data.end());
  c->sr_peer_offered = cm::take_sr_mark(c->peer_pdata);
  c->have_peer_data = true;
  register_conn(c);
  register_remote(c);
  offer(c, li->second);
}

void Core::offer(const std::shared_ptr<Conn>& c, const std::shared_ptr<Listen>& l) {
  post([self = shared_from_this(), c, l] {
    CmRequestHandler h;
    {
      std::lock_guard lock(self->mu_);
      if (self->dead_) return;
      if (l->closed || l->paused || !l->on_request) {
        // The listener went away while the request waited for the control thread: answered as
        // if nobody had listened.
        if (c->state == CmState::kReqRcvd || c->state == CmState::kMraReqSent) {
          self->send_rej(*c, RejReason::kInvalidServiceId, MsgResponse::kReq);
          self->enter(*c, CmState::kIdle);
        } else if (c->state == CmState::kSidrReqRcvd) {
          self->send_sidr_rep(*c, cm::SidrStatus::kServiceIdNotSupported, 0, 0, {});
        }
        return;
      }
      h = l->on_request;
    }
    h(c);
  });
}

// SIDR_REQ (IBTA §12.11.1), the way Linux's cm_sidr_req_handler and rdma_cm's UDP port space
// take it: a listener in kPsUdp gets it as a new (datagram) connection; nobody listening is
// answered with status 1 at once.
void Core::handle_sidr_req(const MadIn& in, const Message& m) {
  const auto& req = std::get<cm::SidrReq>(m.body);
  // A retransmitted SIDR_REQ (same request ID from the same GID, as Linux's remote SIDR table
  // keys it) goes to its request: dropped while the consumer decides, answered again after.
  if (auto it = by_sidr_.find({in.src_gid, req.request_id}); it != by_sidr_.end()) {
    ++counters_.duplicates;
    drive(it->second, Input{Input::Kind::kSidrReq, &m, &in});
    return;
  }
  cm::CmaHdr hdr;
  if (!cm::is_ip_service(req.service_id) || cm::ip_protocol_of(req.service_id) != cm::kIpProtoUdp ||
      !cm::decode(
          std::span<const uint8_t, cm::kCmaHdrSize>(req.private_data.data(), cm::kCmaHdrSize),
          &hdr)) {
    ++counters_.no_listener;
    sidr_unmatched(in, m, cm::SidrStatus::kServiceIdNotSupported);
    return;
  }
  auto li = listeners_.find({cm::kPsUdp, cm::port_of(req.service_id)});
  if (li == listeners_.end() || li->second->paused || li->second->closed ||
      !adapter_.control().is_local(hdr.dst)) {
    ++counters_.no_listener;
    sidr_unmatched(in, m, cm::SidrStatus::kServiceIdNotSupported);
    return;
  }
  if (pending_requests(*li->second) >= cfg_.max_pending_requests) {
    ++counters_.backlog_full;
    sidr_unmatched(in, m, cm::SidrStatus::kRejected);
    return;
  }
  auto c = std::make_shared<Conn>();
  c->used = true;
  c->datagram = true;
  enter(*c, CmState::kSidrReqRcvd);
  c->local_id = new_comm_id();
  c->remote_id = req.request_id;
  c->tid = m.tid;
  c->local_gid = in.dst_gid;
  c->remote_gid = in.src_gid;  // the SIDR_REP goes where the SIDR_REQ came from
  c->remote_mac = in.src_mac;
  c->local_port = li->second->port;
  c->remote_port = hdr.src_port;
  c->peer_pdata.assign(req.private_data.begin() + cm::kCmaHdrSize, req.private_data.end());
  c->have_peer_data = true;
  register_conn(c);
  by_sidr_[{c->remote_gid, c->remote_id}] = c;
  offer(c, li->second);
}

// SIDR_REP (IBTA §12.11.2): found by its request ID, which is our local ID (Linux
// cm_sidr_rep_handler), from the GID we asked.
void Core::handle_sidr_rep(const MadIn& in, const Message& m) {
  const auto& rep = std::get<cm::SidrRep>(m.body);
  auto c = find_local(rep.request_id);
  if (c == nullptr || !c->datagram || !c->active || c->remote_gid != in.src_gid) {
    ++counters_.unmatched;
    return;
  }
  drive(c, Input{Input::Kind::kSidrRep, &m, &in});
}

void Core::handle_rep(const MadIn& in, const Message& m) {
  const auto& rep = std::get<cm::Rep>(m.body);
  auto c = find_local(rep.remote_comm_id);
  if (c == nullptr || !c->active || c->remote_gid != in.src_gid) {
    ++counters_.unmatched;
    return;
  }
  if (c->remote_id != 0 && c->remote_id != rep.local_comm_id) {
    ++counters_.unmatched;
    return;
  }
  if (c->state != CmState::kReqSent && c->state != CmState::kMraReqRcvd) ++counters_.duplicates;
  drive(c, Input{Input::Kind::kRep, &m, &in});
}

void Core::handle_rej(const MadIn& in, const Message& m) {
  const auto& rej = std::get<cm::Rej>(m.body);
  ++counters_.rej_received;
  std::shared_ptr<Conn> c;
  if (rej.reason == RejReason::kTimeout && rej.ari_length >= 8) {
    // Linux cm_acquire_rejected_id: a timeout REJ is found by the sender's CA GUID (ARI) and
    // comm ID, since the sender may not know ours yet.
    uint64_t g = 0;
    for (int i = 0; i < 8; ++i) g = g << 8 | rej.ari[i];
    if (auto it = by_remote_.find({g, rej.local_comm_id}); it != by_remote_.end()) c = it->second;
  }
  if (c == nullptr) {
    c = find_local(rej.remote_comm_id);
    if (c != nullptr && rej.message_rejected != MsgResponse::kReq && c->remote_id != 0 &&
        rej.local_comm_id != 0 && c->remote_id != rej.local_comm_id)
      c = nullptr;
  }
  if (c == nullptr || c->remote_gid != in.src_gid) {
    ++counters_.unmatched;
    return;
  }
  drive(c, Input{Input::Kind::kRej, &m, &in});
}

void Core::handle_mra(const MadIn& in, const Message& m) {
  const auto& mra = std::get<cm::Mra>(m.body);
  ++counters_.mra_received;
  auto c = find_local(mra.remote_comm_id);
  if (c == nullptr || c->remote_gid != in.src_gid ||
      (mra.message_mraed != MsgResponse::kReq && c->remote_id != mra.local_comm_id)) {
    ++counters_.unmatched;
    return;
  }
  drive(c, Input{Input::Kind::kMra, &m, &in});
}

void Core::handle_by_ids(const MadIn& in, const Message& m, uint32_t local_id, uint32_t remote_id,
                         Input::Kind kind) {
  auto c = find_local(local_id);
  if (c == nullptr || c->remote_id != remote_id || c->remote_gid != in.src_gid) {
    ++counters_.unmatched;
    if (kind == Input::Kind::kDreq && !cfg_.broken.cm_drep_unknown) {
      // Linux cm_issue_drep: a DREQ for a connection we no longer know still gets its DREP, so
      // the peer can finish.
      const auto& d = std::get<cm::Dreq>(m.body);
      send_to(in.src_gid, Message{m.tid, 0, cm::Drep{d.remote_comm_id, d.local_comm_id, {}}});
    }
    return;
  }
  if (kind == Input::Kind::kDreq && std::get<cm::Dreq>(m.body).remote_qpn != c->local_qpn &&
      !cfg_.broken.cm_dreq_qpn) {
    ++counters_.unmatched;  // Linux drops a DREQ that names another QP
    return;
  }
  if (kind == Input::Kind::kRtu && c->state == CmState::kEstablished) ++counters_.duplicates;
  drive(c, Input{kind, &m, &in});
}

// ---- Timers
// ---------------------------------------------------------------------------------------

void Core::put_cma_hdr(const Conn& c, std::span<uint8_t> pdata) const {
  cm::CmaHdr hdr;
  hdr.ip_version = gid_is_ipv4(c.remote_gid) ? 4 : 6;
  hdr.src_port = c.local_port;
  hdr.src = c.local_gid;
  hdr.dst = c.remote_gid;
  cm::encode(hdr, pdata.first<cm::kCmaHdrSize>());
}

void Core::send_req(Conn& c) {
  cm::Req req;
  req.local_comm_id = c.local_id;
  req.service_id = cm::service_id_for(c.remote_port);
  req.local_ca_guid = guid_;
  req.local_qpn = c.local_qpn;
  req.responder_resources = static_cast<uint8_t>(c.requested.inbound);
  req.initiator_depth = static_cast<uint8_t>(c.requested.outbound);
  req.remote_cm_response_timeout = cfg_.cm_response_timeout;
  req.transport_service_type = 0;  // RC
  req.e2e_flow_control = cm::kE2eFlowControl;
  req.starting_psn = c.rq_psn;  // Linux CM: the PSN we expect to receive
  req.local_cm_response_timeout = cfg_.cm_response_timeout;
  req.retry_count = c.retry_count;
  req.path_mtu = cm::mtu_code(c.mtu);
  req.rnr_retry_count = cfg_.rnr_retry_count;
  req.max_cm_retries = cfg_.max_cm_retries;
  // Routed RoCE (cm_format_req with hop limit > 1): permissive LIDs, not subnet-local.
  req.primary.local_gid = c.local_gid;
  req.primary.remote_gid = c.remote_gid;
  req.primary.hop_limit = cfg_.hop_limit;
  req.primary.subnet_local = cfg_.hop_limit <= 1;
  req.primary.local_ack_timeout = cfg_.local_ack_timeout;
  put_cma_hdr(c, req.private_data);
  std::copy(c.own_pdata.begin(), c.own_pdata.end(), req.private_data.begin() + cm::kCmaHdrSize);
  c.sr_offered = cfg_.selective_repeat && c.own_pdata.size() <= cm::kMaxReqUserDataWithSr;
  if (c.sr_offered) cm::put_sr_mark(req.private_data);
  send(c, Message{c.tid, 0, req}, true);
  arm_retransmit(c);
  enter(c, CmState::kReqSent);
}

// SIDR_REQ as rdma_cm's cma_resolve_ib_udp builds it: the RDMA_PS_UDP service ID of the port, the
// IP CM header, then the consumer's data. Retransmitted like a REQ (the kernel: every 2^12 ms,
// CMA_MAX_CM_RETRIES times).
void Core::send_sidr_req(Conn& c) {
  cm::SidrReq req;
  req.request_id = c.local_id;
  req.service_id = cm::service_id_for(c.remote_port, cm::kPsUdp);
  put_cma_hdr(c, req.private_data);
  std::copy(c.own_pdata.begin(), c.own_pdata.end(), req.private_data.begin() + cm::kCmaHdrSize);
  send(c, Message{c.tid, 0, req}, true);
  arm_retransmit(c);
  enter(c, CmState::kSidrReqSent);
}

bool Core::poll() {
  bool work = false;
  {
    std::lock_guard lock(mu_);
    if (dead_) return false;
    const auto now = Clock::now();
    std::vector<std::shared_ptr<Conn>> due;
    for (auto& [id, c] : by_local_)
      if (c->timer == Timer::kResolve || (c->timer != Timer::kNone && now >= c->deadline))
        due.push_back(c);
    for (auto& c : due) {
      switch (c->timer) {
        case Timer::kResolve:
          if (auto mac = adapter_.control().lookup(c->remote_gid)) {
            c->remote_mac = *mac;
            send_request(*c);
            work = true;
          } else if (now >= c->deadline) {
            drive(c, Input{});
            work = true;
          }
          break;
        case Timer::kRetransmit:
          work = true;
          if (c->retries_left > 0) {
            --c->retries_left;
            ++counters_.retransmits;
            Message m;
            if (cm::decode(c->last_sent, &m) == cm::MadError::kOk) send_to(c->remote_gid, m);
            c->deadline = now + interval(c->resp_timeout);
          } else {
            c->timer = Timer::kNone;
            drive(c, Input{});
          }
          break;
        case Timer::kTimewait:
          work = true;
          drive(c, Input{});
          break;
        default:
          break;
      }
    }
  }
  return drain() || work;
}

}  // namespace urnic::ctl::cm_detail

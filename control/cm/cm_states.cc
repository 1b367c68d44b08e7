// The connection state machine (cm_core.h): step() over CmState, one on_<state> function per
// state (house style rule 11).
#include "control/cm/cm_core.h"

#include <rte_cycles.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <unordered_map>

#include "control/cm/cma.h"
#include "dataplane/log.h"
#include "urnic/config.h"

namespace urnic::ctl::cm_detail {

// ---- The state machine
// ---------------------------------------------------------------------------

CmState Core::step(Conn& c, const Input& in) {
  switch (c.state) {
    case CmState::kIdle:
      return on_idle(c, in);
    case CmState::kReqSent:
    case CmState::kMraReqRcvd:
      return on_req_sent(c, in);
    case CmState::kReqRcvd:
    case CmState::kMraReqSent:
      return on_req_rcvd(c, in);
    case CmState::kRepSent:
    case CmState::kMraRepRcvd:
      return on_rep_sent(c, in);
    case CmState::kRepRcvd:
    case CmState::kMraRepSent:
      return on_rep_rcvd(c, in);
    case CmState::kEstablished:
      return on_established(c, in);
    case CmState::kDreqSent:
      return on_dreq_sent(c, in);
    case CmState::kDreqRcvd:
    case CmState::kTimewait:
      return on_timewait(c, in);
    case CmState::kSidrReqSent:
      return on_sidr_req_sent(c, in);
    case CmState::kSidrReqRcvd:
      return on_sidr_req_rcvd(c, in);
    default:
      return c.state;
  }
}

void Core::enter(Conn& c, CmState s) {
  dp::log_line(dp::LogType::kCm, RTE_LOG_DEBUG, "connection 0x%08x (QP 0x%06x): %s -> %s",
               c.local_id, c.local_qpn, to_string(c.state), to_string(s));
  c.state = s;
  if (s == CmState::kTimewait) {
    c.timer = Timer::kTimewait;
    c.deadline = Clock::now() + cfg_.timewait;
  } else if (s == CmState::kIdle) {
    unregister(c);
  }
}

void Core::drive(const std::shared_ptr<Conn>& c, const Input& in) {
  const CmState next = step(*c, in);
  if (next != c->state) enter(*c, next);
}

// Only an active side that is still resolving its peer's MAC has timers in IDLE.
CmState Core::on_idle(Conn& c, const Input& in) {
  if (in.kind == Input::Kind::kTimeout && c.timer == Timer::kResolve) {
    complete(c, Status::kHostUnreachable);
    c.timer = Timer::kNone;
    unregister(c);
  }
  return CmState::kIdle;
}

// Active, REQ out: REP, REJ, MRA or the response timeout (IBTA §12.9.6.1).
CmState Core::on_req_sent(Conn& c, const Input& in) {
  switch (in.kind) {
    case Input::Kind::kRep: {
      const auto& rep = std::get<cm::Rep>(in.msg->body);
      // IBTA §12.9.8.3.1: a REP naming a remote QP that another connection still uses is stale.
      if (stale_qpn(c.remote_gid, rep.local_qpn, &c)) {
        ++counters_.stale;
        c.remote_id = rep.local_comm_id;
        send_rej(c, RejReason::kStaleConn, MsgResponse::kRep);
        c.reject_reason = static_cast<uint16_t>(RejReason::kStaleConn);
        complete(c, Status::kConnectionRefused);
        return CmState::kTimewait;
      }
      c.remote_id = rep.local_comm_id;
      c.remote_guid = rep.local_ca_guid;
      c.remote_qpn = rep.local_qpn;
      c.sq_psn = rep.starting_psn;  // Linux CM: the REP's Starting PSN is what the peer expects
      c.rnr_retry_count = rep.rnr_retry_count;
      c.peer = {rep.responder_resources, rep.initiator_depth};
      c.effective = {std::min<uint32_t>(c.requested.inbound, rep.initiator_depth),
                     std::min<uint32_t>(c.requested.outbound, rep.responder_resources)};
      c.peer_pdata.assign(rep.private_data.begin(), rep.private_data.end());
      // The peer agreed to the selective repeat our REQ offered (cm::kSrMark).
      c.selective_repeat = cm::take_sr_mark(c.peer_pdata) && c.sr_offered;
      c.have_peer_data = true;
      c.timer = Timer::kNone;
      register_remote(by_local_.at(c.local_id));
      complete(c, Status::kSuccess);
      return CmState::kRepRcvd;
    }
    case Input::Kind::kRej:
      c.timer = Timer::kNone;
      return rejected(c, in) == RejReason::kStaleConn ? CmState::kTimewait : CmState::kIdle;
    case Input::Kind::kMra:
      return more_time(c, in, MsgResponse::kReq, CmState::kReqSent, CmState::kMraReqRcvd);
    case Input::Kind::kTimeout:
      return timed_out(c, MsgResponse::kReq);
    default:
      return c.state;
  }
}

// Passive, REQ handed to the consumer: a retransmitted REQ gets an MRA (Linux sends it for the
// delayed MRA rdma_cm arms, CMA_CM_MRA_SETTING); a REJ means the active side gave up.
CmState Core::on_req_rcvd(Conn& c, const Input& in) {
  switch (in.kind) {
    case Input::Kind::kReq:
      return ask_more_time(c, MsgResponse::kReq, CmState::kMraReqSent);
    case Input::Kind::kRej:
      c.aborted = true;
      c.reject_reason = static_cast<uint16_t>(std::get<cm::Rej>(in.msg->body).reason);
      return CmState::kIdle;
    default:
      return c.state;
  }
}

// Passive, REP out: RTU establishes; REJ or the response timeout fails the accept.
CmState Core::on_rep_sent(Conn& c, const Input& in) {
  switch (in.kind) {
    case Input::Kind::kRtu:
      c.timer = Timer::kNone;
      complete(c, Status::kSuccess);
      return CmState::kEstablished;
    case Input::Kind::kRej:
      if (cfg_.broken.cm_rej) return c.state;
      flush_qp(c);
      rejected(c, in);
      return CmState::kTimewait;
    case Input::Kind::kMra:
      if (cfg_.broken.cm_mra) return c.state;
      return more_time(c, in, MsgResponse::kRep, CmState::kRepSent, CmState::kMraRepRcvd);
    case Input::Kind::kDreq: {
      // The RTU was lost and the peer already tears down (Linux cm_dreq_handler accepts a DREQ
      // in REP_SENT): the connection was established, then disconnected.
      if (cfg_.broken.cm_dreq_rep_sent) return c.state;
      c.timer = Timer::kNone;
      complete(c, Status::kSuccess);
      return on_established(c, in);
    }
    case Input::Kind::kTimeout:
      flush_qp(c);
      return timed_out(c, MsgResponse::kRep);
    default:
      return c.state;
  }
}

// Active, REP handed to the consumer: a retransmitted REP gets an MRA; a REJ aborts.
CmState Core::on_rep_rcvd(Conn& c, const Input& in) {
  switch (in.kind) {
    case Input::Kind::kRep:
      return ask_more_time(c, MsgResponse::kRep, CmState::kMraRepSent);
    case Input::Kind::kRej:
      c.aborted = true;
      c.reject_reason = static_cast<uint16_t>(std::get<cm::Rej>(in.msg->body).reason);
      return CmState::kTimewait;
    default:
      return c.state;
  }
}

CmState Core::on_established(Conn& c, const Input& in) {
  switch (in.kind) {
    case Input::Kind::kRep:  // our RTU was lost: send it again (Linux cm_dup_rep_handler)
      if (c.active) resend_reply(c);
      return c.state;
    case Input::Kind::kDreq: {
      // The peer disconnects: DREP at once (the NDK consumer has no DREP call), then TIMEWAIT.
      // The QP is not flushed here (ndkpi.md §5.5); the consumer's disconnect() does that.
      const uint64_t tid = in.msg->tid;
      enter(c, CmState::kDreqRcvd);
      cm::Drep drep{c.local_id, c.remote_id, {}};
      if (!cfg_.broken.cm_drep) send(c, Message{tid, 0, drep}, false);
      notify_disconnect(c);
      return CmState::kTimewait;
    }
    case Input::Kind::kRej:  // e.g. the peer found the connection stale
      c.reject_reason = static_cast<uint16_t>(std::get<cm::Rej>(in.msg->body).reason);
      notify_disconnect(c);
      return CmState::kTimewait;
    default:
      return c.state;
  }
}

CmState Core::on_dreq_sent(Conn& c, const Input& in) {
  switch (in.kind) {
    case Input::Kind::kDrep:
      flush_qp(c);
      complete(c, Status::kSuccess);
      return CmState::kTimewait;
    case Input::Kind::kDreq: {  // both sides disconnect at once
      cm::Drep drep{c.local_id, c.remote_id, {}};
      send(c, Message{in.msg->tid, 0, drep}, false);
      c.peer_disconnected = true;
      flush_qp(c);
      complete(c, Status::kSuccess);
      return CmState::kTimewait;
    }
    case Input::Kind::kRej:
      flush_qp(c);
      complete(c, Status::kSuccess);
      return CmState::kTimewait;
    case Input::Kind::kTimeout:
      ++counters_.timeouts;
      dp::log_line(dp::LogType::kCm, RTE_LOG_INFO,
                   "connection 0x%08x (QP 0x%06x): no DREP to our DREQ after every retry",
                   c.local_id, c.local_qpn);
      flush_qp(c);
      complete(c, Status::kIoTimeout);
      return CmState::kTimewait;
    default:
      return c.state;
  }
}

// TIMEWAIT: answer a retransmitted DREQ again, refuse a REQ with this comm ID as stale
// (Linux cm_dup_req_handler), and go IDLE when the timer ends.
CmState Core::on_timewait(Conn& c, const Input& in) {
  switch (in.kind) {
    case Input::Kind::kDreq: {
      ++counters_.duplicates;
      cm::Drep drep{c.local_id, c.remote_id, {}};
      if (!cfg_.broken.cm_drep_again) send(c, Message{in.msg->tid, 0, drep}, false);
      return c.state;
    }
    case Input::Kind::kReq:
      ++counters_.stale;
      send_rej(c, RejReason::kStaleConn, MsgResponse::kReq);
      return c.state;
    case Input::Kind::kSidrReq:  // a SIDR_REQ retried after our answer: the same answer
      resend_reply(c);
      return c.state;
    case Input::Kind::kTimeout:
      return CmState::kIdle;
    default:
      return c.state;
  }
}

// Active SIDR, SIDR_REQ out (IBTA §12.11): one SIDR_REP ends it, whatever its status; there is no
// connection to keep, so the request is forgotten (IDLE) and a late duplicate REP is unmatched.
CmState Core::on_sidr_req_sent(Conn& c, const Input& in) {
  switch (in.kind) {
    case Input::Kind::kSidrRep: {
      const auto& rep = std::get<cm::SidrRep>(in.msg->body);
      c.timer = Timer::kNone;
      c.peer_pdata.assign(rep.private_data.begin(), rep.private_data.end());
      c.have_peer_data = true;
      // rdma_cm (cma_sidr_rep_handler) refuses a "valid" answer with Q_Key 0: no UD peer can be
      // addressed with it.
      if (rep.status == cm::SidrStatus::kValid && rep.qkey != 0) {
        c.remote_qpn = rep.qpn;
        c.qkey = rep.qkey;
        c.resolved = true;
        complete(c, Status::kSuccess);
      } else {
        c.reject_reason = static_cast<uint16_t>(rep.status);
        complete(c, Status::kConnectionRefused);
      }
      return CmState::kIdle;
    }
    case Input::Kind::kTimeout:  // every retry unanswered (Linux: IB_CM_SIDR_REQ_ERROR)
      ++counters_.timeouts;
      dp::log_line(dp::LogType::kCm, RTE_LOG_INFO,
                   "SIDR request 0x%08x: no SIDR_REP after every retry", c.local_id);
      complete(c, Status::kIoTimeout);
      return CmState::kIdle;
    default:
      return c.state;
  }
}

// Passive SIDR, request with the consumer: its retries are dropped until it answers (the answer
// goes out once, from accept_datagram / reject / close, and is then repeated in TIMEWAIT).
CmState Core::on_sidr_req_rcvd(Conn& c, const Input& in) {
  (void)in;
  return c.state;
}

// ---- Steps the state functions share ----

// A REJ ended our REQ / REP: the peer's reason and private data are kept for the consumer
// (NdkGetConnectionData), whose request fails. Returns the reason.
RejReason Core::rejected(Conn& c, const Input& in) {
  const auto& rej = std::get<cm::Rej>(in.msg->body);
  dp::log_line(dp::LogType::kCm, RTE_LOG_INFO,
               "connection 0x%08x (QP 0x%06x) rejected by the peer in %s: %s (%u)", c.local_id,
               c.local_qpn, to_string(c.state), to_string(rej.reason),
               static_cast<unsigned>(rej.reason));
  c.reject_reason = static_cast<uint16_t>(rej.reason);
  c.peer_pdata.assign(rej.private_data.begin(), rej.private_data.end());
  c.have_peer_data = true;
  complete(c, rej.reason == RejReason::kTimeout ? Status::kIoTimeout : Status::kConnectionRefused);
  return rej.reason;
}

// The peer needs more time for our `what` (an MRA, IBTA §12.6.6): wait its service timeout plus
// one response time before retransmitting (Linux cm_mra_handler). Heeded once, in `waiting`.
CmState Core::more_time(Conn& c, const Input& in, MsgResponse what, CmState waiting, CmState next) {
  const auto& mra = std::get<cm::Mra>(in.msg->body);
  if (c.state != waiting || mra.message_mraed != what) return c.state;
  c.deadline = Clock::now() + interval(mra.service_timeout) + interval(c.resp_timeout);
  return next;
}

// The peer sent its REQ / REP (`what`) again while our consumer decides: the first time an MRA
// asks for more time (state `mra_sent`), after that the same MRA again.
CmState Core::ask_more_time(Conn& c, MsgResponse what, CmState mra_sent) {
  ++counters_.mra_sent;
  if (c.state == mra_sent) {
    resend_reply(c);
    return c.state;
  }
  cm::Mra mra;
  mra.local_comm_id = c.local_id;
  mra.remote_comm_id = c.remote_id;
  mra.message_mraed = what;
  mra.service_timeout = cfg_.mra_service_timeout;
  send(c, Message{c.tid, 0, mra}, false);
  return mra_sent;
}

// Our REQ / REP (`what`) went unanswered through every retry: REJ "timeout" (IBTA §12.9.6).
CmState Core::timed_out(Conn& c, MsgResponse what) {
  ++counters_.timeouts;
  dp::log_line(dp::LogType::kCm, RTE_LOG_INFO,
               "connection 0x%08x (QP 0x%06x): no answer to our %s after every retry", c.local_id,
               c.local_qpn, what == MsgResponse::kReq ? "REQ" : "REP");
  send_timeout_rej(c, what);
  c.reject_reason = static_cast<uint16_t>(RejReason::kTimeout);
  complete(c, Status::kIoTimeout);
  return CmState::kTimewait;
}

}  // namespace urnic::ctl::cm_detail

// Connection manager state machine (see cm.h). Structure, following Linux's
// drivers/infiniband/core/cm.c where behaviour matters for interop:
//   - on_mad() decodes a MAD, finds its connection by comm IDs (or creates one for a new REQ) and
//     feeds it to step(), the switch driver over CmState; each state has one function that takes
//     an Input (a received message or a timer expiry) and returns the next state (rule 11);
//   - the API calls (connect, accept, ...) check the state, do their QP transitions and sends,
//     and set the state directly;
//   - poll() runs the timers: neighbour resolution before a REQ, retransmission of REQ / REP /
//     DREQ every CM response timeout, and TIMEWAIT expiry.
// Everything runs under Core::mu_. Callbacks are queued (post()) and run by the control thread
// after the lock is released (drain()).
#include "control/cm/cm.h"

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
      "IDLE",      "REQ_SENT",  "REQ_RCVD",     "MRA_REQ_SENT", "MRA_REQ_RCVD",
      "REP_SENT",  "REP_RCVD",  "MRA_REP_SENT", "MRA_REP_RCVD", "ESTABLISHED",
      "DREQ_SENT", "DREQ_RCVD", "TIMEWAIT"};
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

using Clock = std::chrono::steady_clock;
using cm::Message;
using cm::MsgResponse;
using cm::RejReason;

// Ephemeral ports (RFC 6335 §6): listeners on port 0 and active sides' source ports.
constexpr uint16_t kEphemeralFirst = 49152;

struct Listen {
  uint16_t port = 0;
  bool listening = false;
  bool paused = false;
  bool closed = false;
  CmListener::RequestHandler on_request;
};

enum class Timer : uint8_t { kNone, kResolve, kRetransmit, kTimewait };

struct Conn : std::enable_shared_from_this<Conn> {
  CmState state = CmState::kIdle;
  bool used = false;     // connect() or a REQ started it; a connector is used once
  bool active = false;   // we sent the REQ
  bool closed = false;   // the consumer closed the connector: no callbacks, no QP access
  bool aborted = false;  // the peer gave up while the consumer was deciding
  bool peer_disconnected = false;
  bool local_disconnect = false;  // the consumer called disconnect()
  bool have_peer_data = false;

  uint32_t local_id = 0;
  uint32_t remote_id = 0;
  uint64_t remote_guid = 0;
  uint64_t tid = 0;  // of the REQ exchange (REP, RTU, REJ, MRA reuse it); DREQ gets its own
  cm::Gid local_gid{};
  cm::Gid remote_gid{};
  wire::MacAddr remote_mac{};
  uint16_t local_port = 0;
  uint16_t remote_port = 0;

  dp::Qp* qp = nullptr;
  uint32_t local_qpn = 0;
  uint32_t remote_qpn = 0;
  uint32_t sq_psn = 0;  // first PSN we send (the peer's Starting PSN)
  uint32_t rq_psn = 0;  // first PSN we expect (our Starting PSN)
  uint32_t mtu = 0;
  uint8_t retry_count = 7;      // for our QP
  uint8_t rnr_retry_count = 7;  // for our QP (the peer's REP / REQ value)
  ReadLimits requested;         // what the consumer asked for (clamped to the adapter)
  ReadLimits effective;
  ReadLimits peer;            // the peer's: inbound = its responder resources, outbound = depth
  uint8_t resp_timeout = 20;  // our retransmission interval exponent for this connection
  uint8_t max_retries = 15;
  std::vector<uint8_t> peer_pdata;  // the peer's REQ / REP / REJ private data
  std::vector<uint8_t> own_pdata;   // active: the consumer's REQ data until the REQ is built
  uint16_t reject_reason = 0;

  Timer timer = Timer::kNone;
  Clock::time_point deadline{};
  int retries_left = 0;
  std::array<uint8_t, cm::kMadSize> last_sent{};   // REQ / REP / DREQ being retransmitted
  std::array<uint8_t, cm::kMadSize> last_reply{};  // MRA / RTU / DREP answering duplicates
  bool have_reply = false;

  CmConnector::Completion done;
  CmConnector::DisconnectEvent on_disconnect;
};

// What drives a state function: a received message (with where it came from) or a timer.
struct Input {
  enum class Kind : uint8_t { kReq, kMra, kRej, kRep, kRtu, kDreq, kDrep, kTimeout };
  Kind kind = Kind::kTimeout;
  const Message* msg = nullptr;
  const MadIn* in = nullptr;
};

class Core : public std::enable_shared_from_this<Core> {
 public:
  Core(Adapter& adapter, const CmConfig& cfg) : adapter_(adapter), cfg_(cfg) {
    std::random_device rd;
    rng_.seed((static_cast<uint64_t>(rd()) << 32) ^ rd() ^ rte_get_tsc_cycles());
    tid_hi_ = static_cast<uint32_t>(rng_());
    const auto& m = adapter.mac();
    // Modified EUI-64 from the MAC (flip the U/L bit, insert FF:FE), as rxe makes its node GUID.
    guid_ = static_cast<uint64_t>(m[0] ^ 0x02) << 56 | static_cast<uint64_t>(m[1]) << 48 |
            static_cast<uint64_t>(m[2]) << 40 | 0xFFull << 32 | 0xFEull << 24 |
            static_cast<uint64_t>(m[3]) << 16 | static_cast<uint64_t>(m[4]) << 8 | m[5];
  }

  Adapter& adapter_;
  const CmConfig cfg_;
  uint64_t guid_ = 0;

  mutable std::mutex mu_;
  bool dead_ = false;
  CmCounters counters_;

  // ---- Control thread entry points ----
  void on_mad(const MadIn& in);
  bool poll();

  // ---- API (any thread) ----
  Status connect(const std::shared_ptr<Conn>& cp, dp::Qp* qp, const cm::Gid& dst, uint16_t port,
                 const ReadLimits& lim, std::span<const uint8_t> pdata,
                 CmConnector::Completion done);
  Status complete_connect(Conn& c, CmConnector::DisconnectEvent on_disconnect);
  Status accept(Conn& c, dp::Qp* qp, const ReadLimits& lim, std::span<const uint8_t> pdata,
                CmConnector::DisconnectEvent on_disconnect, CmConnector::Completion done);
  Status reject(Conn& c, std::span<const uint8_t> pdata);
  Status disconnect(Conn& c, CmConnector::Completion done);
  void close(Conn& c);
  Status listen(const std::shared_ptr<Listen>& l, uint16_t port,
                CmListener::RequestHandler on_request);
  void close_listener(Listen& l);
  void shutdown();
  size_t connections() const {
    std::lock_guard lock(mu_);
    return by_local_.size();
  }

 private:
  // ---- State functions (rule 11): one per state, returning the next state ----
  CmState step(Conn& c, const Input& in);
  CmState on_idle(Conn& c, const Input& in);
  CmState on_req_sent(Conn& c, const Input& in);  // also MRA_REQ_RCVD
  CmState on_req_rcvd(Conn& c, const Input& in);  // also MRA_REQ_SENT
  CmState on_rep_sent(Conn& c, const Input& in);  // also MRA_REP_RCVD
  CmState on_rep_rcvd(Conn& c, const Input& in);  // also MRA_REP_SENT
  CmState on_established(Conn& c, const Input& in);
  CmState on_dreq_sent(Conn& c, const Input& in);
  CmState on_timewait(Conn& c, const Input& in);  // also DREQ_RCVD (transient)
  void drive(const std::shared_ptr<Conn>& c, const Input& in);
  void enter(Conn& c, CmState s);

  // ---- MAD handlers ----
  void handle_req(const MadIn& in, const Message& m);
  void handle_rep(const MadIn& in, const Message& m);
  void handle_rej(const MadIn& in, const Message& m);
  void handle_mra(const MadIn& in, const Message& m);
  void handle_by_ids(const MadIn& in, const Message& m, uint32_t local_id, uint32_t remote_id,
                     Input::Kind kind);

  // ---- Helpers ----
  std::shared_ptr<Conn> find_local(uint32_t id) const {
    auto it = by_local_.find(id);
    return it == by_local_.end() ? nullptr : it->second;
  }
  uint32_t new_comm_id();
  uint64_t new_tid() { return static_cast<uint64_t>(tid_hi_) << 32 | ++tid_lo_; }
  uint32_t new_psn() { return static_cast<uint32_t>(rng_()) & 0xFFFFFF; }
  uint16_t ephemeral_port() {
    return static_cast<uint16_t>(kEphemeralFirst + rng_() % (65536 - kEphemeralFirst));
  }
  void register_conn(const std::shared_ptr<Conn>& c) { by_local_[c->local_id] = c; }
  // Passive connections on `port` whose request the consumer has not decided yet.
  size_t pending_requests(uint16_t port) const {
    size_t n = 0;
    for (const auto& [id, c] : by_local_)
      n += !c->active && c->local_port == port &&
           (c->state == CmState::kReqRcvd || c->state == CmState::kMraReqSent);
    return n;
  }
  void register_remote(const std::shared_ptr<Conn>& c);
  void unregister(Conn& c);
  bool stale_qpn(const cm::Gid& gid, uint32_t qpn, const Conn* except) const;

  void send(Conn& c, const Message& m, bool retransmit);
  void send_to(const cm::Gid& dst, const Message& m);
  void send_rej(Conn& c, RejReason reason, MsgResponse msg, std::span<const uint8_t> pdata = {});
  void send_timeout_rej(Conn& c, MsgResponse msg);
  void rej_unmatched(const MadIn& in, const Message& m, uint32_t their_id, MsgResponse msg,
                     RejReason reason);
  void arm_retransmit(Conn& c) {
    c.timer = Timer::kRetransmit;
    c.retries_left = c.max_retries;
    c.deadline = Clock::now() + interval(c.resp_timeout);
  }
  static Clock::duration interval(uint8_t t) {
    return std::chrono::nanoseconds(cm::cm_timeout_ns(t));
  }
  void send_req(Conn& c);
  // Sends the last MRA / RTU / DREP again (answer to a duplicate).
  void resend_reply(Conn& c) {
    Message m;
    if (c.have_reply && cm::decode(c.last_reply, &m) == cm::MadError::kOk) send_to(c.remote_gid, m);
  }
  Status qp_to_rts(Conn& c, dp::Qp* qp);
  void flush_qp(Conn& c) {
    if (c.qp != nullptr && !c.closed) (void)adapter_.flush_qp(c.qp);
  }
  wire::NetHeaders av_for(const Conn& c) const;

  void complete(Conn& c, Status s) {
    if (c.closed || !c.done) return;
    auto f = std::move(c.done);
    c.done = nullptr;
    post(c, [f = std::move(f), s] { f(s); });
  }
  void notify_disconnect(Conn& c) {
    c.peer_disconnected = true;
    if (c.closed || c.local_disconnect || !c.on_disconnect) return;
    auto f = std::move(c.on_disconnect);
    c.on_disconnect = nullptr;
    post(c, std::move(f));
  }
  // Queues a callback of `c`'s consumer; it is dropped if the connector is closed before it
  // runs (close() promises no later callbacks).
  void post(Conn& c, std::function<void()> f) {
    pending_.push_back([self = this, conn = c.shared_from_this(), f = std::move(f)] {
      {
        std::lock_guard lock(self->mu_);
        if (conn->closed || self->dead_) return;
      }
      f();
    });
  }
  void post(std::function<void()> f) { pending_.push_back(std::move(f)); }

 public:
  // Runs the queued callbacks; control thread only, without mu_ held.
  bool drain() {
    std::vector<std::function<void()>> run;
    {
      std::lock_guard lock(mu_);
      run.swap(pending_);
    }
    for (auto& f : run) f();
    return !run.empty();
  }

 private:
  std::mt19937_64 rng_;
  uint32_t tid_hi_ = 0;
  uint32_t tid_lo_ = 0;
  std::unordered_map<uint32_t, std::shared_ptr<Conn>> by_local_;
  std::map<std::pair<uint64_t, uint32_t>, std::shared_ptr<Conn>> by_remote_;  // guid, comm ID
  std::map<std::pair<cm::Gid, uint32_t>, std::shared_ptr<Conn>> by_qpn_;      // gid, QPN
  std::map<uint16_t, std::shared_ptr<Listen>> listeners_;
  std::vector<std::function<void()>> pending_;
};

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
  const auto a = static_cast<uint16_t>(cm::attr_id(m));
  const size_t idx = a >= 0x10 && a <= 0x16 ? a - 0x10 : 7;
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
  if (Status s = adapter_.modify_qp(
          qp, at, kState | kAv | kPathMtu | kDestQpn | kRqPsn | kMaxDestRdAtomic | kMinRnrTimer);
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
    default:
      return c.state;
  }
}

void Core::enter(Conn& c, CmState s) {
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
      c.have_peer_data = true;
      c.timer = Timer::kNone;
      register_remote(by_local_.at(c.local_id));
      complete(c, Status::kSuccess);
      return CmState::kRepRcvd;
    }
    case Input::Kind::kRej: {
      const auto& rej = std::get<cm::Rej>(in.msg->body);
      c.reject_reason = static_cast<uint16_t>(rej.reason);
      c.peer_pdata.assign(rej.private_data.begin(), rej.private_data.end());
      c.have_peer_data = true;
      c.timer = Timer::kNone;
      complete(c,
               rej.reason == RejReason::kTimeout ? Status::kIoTimeout : Status::kConnectionRefused);
      return rej.reason == RejReason::kStaleConn ? CmState::kTimewait : CmState::kIdle;
    }
    case Input::Kind::kMra: {
      const auto& mra = std::get<cm::Mra>(in.msg->body);
      if (c.state != CmState::kReqSent || mra.message_mraed != MsgResponse::kReq) return c.state;
      // The passive side needs more time: wait its service timeout plus one response time
      // before retransmitting (Linux cm_mra_handler).
      c.deadline = Clock::now() + interval(mra.service_timeout) + interval(c.resp_timeout);
      return CmState::kMraReqRcvd;
    }
    case Input::Kind::kTimeout:
      ++counters_.timeouts;
      send_timeout_rej(c, MsgResponse::kReq);
      c.reject_reason = static_cast<uint16_t>(RejReason::kTimeout);
      complete(c, Status::kIoTimeout);
      return CmState::kTimewait;
    default:
      return c.state;
  }
}

// Passive, REQ handed to the consumer: a retransmitted REQ gets an MRA (Linux sends it for the
// delayed MRA rdma_cm arms, CMA_CM_MRA_SETTING); a REJ means the active side gave up.
CmState Core::on_req_rcvd(Conn& c, const Input& in) {
  switch (in.kind) {
    case Input::Kind::kReq:
      if (c.state == CmState::kReqRcvd) {
        cm::Mra mra;
        mra.local_comm_id = c.local_id;
        mra.remote_comm_id = c.remote_id;
        mra.message_mraed = MsgResponse::kReq;
        mra.service_timeout = cfg_.mra_service_timeout;
        ++counters_.mra_sent;
        send(c, Message{c.tid, 0, mra}, false);
        return CmState::kMraReqSent;
      }
      ++counters_.mra_sent;
      resend_reply(c);
      return c.state;
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
    case Input::Kind::kRej: {
      const auto& rej = std::get<cm::Rej>(in.msg->body);
      c.reject_reason = static_cast<uint16_t>(rej.reason);
      c.peer_pdata.assign(rej.private_data.begin(), rej.private_data.end());
      c.have_peer_data = true;
      flush_qp(c);
      complete(c,
               rej.reason == RejReason::kTimeout ? Status::kIoTimeout : Status::kConnectionRefused);
      return CmState::kTimewait;
    }
    case Input::Kind::kMra: {
      const auto& mra = std::get<cm::Mra>(in.msg->body);
      if (c.state != CmState::kRepSent || mra.message_mraed != MsgResponse::kRep) return c.state;
      c.deadline = Clock::now() + interval(mra.service_timeout) + interval(c.resp_timeout);
      return CmState::kMraRepRcvd;
    }
    case Input::Kind::kDreq: {
      // The RTU was lost and the peer already tears down (Linux cm_dreq_handler accepts a DREQ
      // in REP_SENT): the connection was established, then disconnected.
      c.timer = Timer::kNone;
      complete(c, Status::kSuccess);
      return on_established(c, in);
    }
    case Input::Kind::kTimeout:
      ++counters_.timeouts;
      send_timeout_rej(c, MsgResponse::kRep);
      c.reject_reason = static_cast<uint16_t>(RejReason::kTimeout);
      flush_qp(c);
      complete(c, Status::kIoTimeout);
      return CmState::kTimewait;
    default:
      return c.state;
  }
}

// Active, REP handed to the consumer: a retransmitted REP gets an MRA; a REJ aborts.
CmState Core::on_rep_rcvd(Conn& c, const Input& in) {
  switch (in.kind) {
    case Input::Kind::kRep: {
      if (c.state == CmState::kRepRcvd) {
        cm::Mra mra;
        mra.local_comm_id = c.local_id;
        mra.remote_comm_id = c.remote_id;
        mra.message_mraed = MsgResponse::kRep;
        mra.service_timeout = cfg_.mra_service_timeout;
        ++counters_.mra_sent;
        send(c, Message{c.tid, 0, mra}, false);
        return CmState::kMraRepSent;
      }
      ++counters_.mra_sent;
      resend_reply(c);
      return c.state;
    }
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
      c.state = CmState::kDreqRcvd;
      cm::Drep drep{c.local_id, c.remote_id, {}};
      send(c, Message{tid, 0, drep}, false);
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
      send(c, Message{in.msg->tid, 0, drep}, false);
      return c.state;
    }
    case Input::Kind::kReq:
      ++counters_.stale;
      send_rej(c, RejReason::kStaleConn, MsgResponse::kReq);
      return c.state;
    case Input::Kind::kTimeout:
      return CmState::kIdle;
    default:
      return c.state;
  }
}

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
      const auto a = static_cast<uint16_t>(cm::attr_id(m));
      ++counters_.in_by_attr[a >= 0x10 && a <= 0x16 ? a - 0x10 : 7];
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
  if (auto it = by_remote_.find({req.local_ca_guid, req.local_comm_id}); it != by_remote_.end()) {
    ++counters_.duplicates;
    drive(it->second, Input{Input::Kind::kReq, &m, &in});
    return;
  }
  // Only RDMA IP CM services over RC (rdma_cm's RDMA_PS_TCP) are offered.
  if (!cm::is_ip_service(req.service_id) || cm::ip_protocol_of(req.service_id) != 0x06) {
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
  auto li = listeners_.find(cm::port_of(req.service_id));
  if (li == listeners_.end() || li->second->paused || li->second->closed ||
      !adapter_.control().is_local(hdr.dst)) {
    ++counters_.no_listener;
    rej_unmatched(in, m, req.local_comm_id, MsgResponse::kReq, RejReason::kInvalidServiceId);
    return;
  }
  if (pending_requests(li->second->port) >= cfg_.max_pending_requests) {
    ++counters_.backlog_full;
    rej_unmatched(in, m, req.local_comm_id, MsgResponse::kReq, RejReason::kNoResources);
    return;
  }
  if (stale_qpn(in.src_gid, req.local_qpn, nullptr)) {
    ++counters_.stale;
    rej_unmatched(in, m, req.local_comm_id, MsgResponse::kReq, RejReason::kStaleConn);
    return;
  }
  auto c = std::make_shared<Conn>();
  c->used = true;
  c->state = CmState::kReqRcvd;
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
  c->max_retries = req.max_cm_retries;
  c->peer_pdata.assign(req.private_data.begin() + cm::kCmaHdrSize, req.private_data.end());
  c->have_peer_data = true;
  register_conn(c);
  register_remote(c);
  auto l = li->second;
  post([self = shared_from_this(), c, l] {
    CmListener::RequestHandler h;
    {
      std::lock_guard lock(self->mu_);
      if (self->dead_) return;
      if (l->closed || l->paused || !l->on_request) {
        // The listener went away while the request waited for the control thread.
        if (c->state == CmState::kReqRcvd || c->state == CmState::kMraReqSent) {
          self->send_rej(*c, RejReason::kInvalidServiceId, MsgResponse::kReq);
          self->enter(*c, CmState::kIdle);
        }
        return;
      }
      h = l->on_request;
    }
    h(std::unique_ptr<CmConnector>(new CmConnector(self, c)));
  });
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
    if (kind == Input::Kind::kDreq) {
      // Linux cm_issue_drep: a DREQ for a connection we no longer know still gets its DREP, so
      // the peer can finish.
      const auto& d = std::get<cm::Dreq>(m.body);
      send_to(in.src_gid, Message{m.tid, 0, cm::Drep{d.remote_comm_id, d.local_comm_id, {}}});
    }
    return;
  }
  if (kind == Input::Kind::kDreq && std::get<cm::Dreq>(m.body).remote_qpn != c->local_qpn) {
    ++counters_.unmatched;  // Linux drops a DREQ that names another QP
    return;
  }
  if (kind == Input::Kind::kRtu && c->state == CmState::kEstablished) ++counters_.duplicates;
  drive(c, Input{kind, &m, &in});
}

// ---- Timers
// ---------------------------------------------------------------------------------------

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
  req.e2e_flow_control = true;     // rdma_cm's default
  req.starting_psn = c.rq_psn;     // Linux CM: the PSN we expect to receive
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
  cm::CmaHdr hdr;
  hdr.ip_version = gid_is_ipv4(c.remote_gid) ? 4 : 6;
  hdr.src_port = c.local_port;
  hdr.src = c.local_gid;
  hdr.dst = c.remote_gid;
  cm::encode(hdr, std::span<uint8_t, cm::kCmaHdrSize>(req.private_data.data(), cm::kCmaHdrSize));
  std::copy(c.own_pdata.begin(), c.own_pdata.end(), req.private_data.begin() + cm::kCmaHdrSize);
  send(c, Message{c.tid, 0, req}, true);
  arm_retransmit(c);
  c.state = CmState::kReqSent;
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
            send_req(*c);
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

// ---- API
// ------------------------------------------------------------------------------------------

Status Core::connect(const std::shared_ptr<Conn>& cp, dp::Qp* qp, const cm::Gid& dst, uint16_t port,
                     const ReadLimits& lim, std::span<const uint8_t> pdata,
                     CmConnector::Completion done) {
  Conn& c = *cp;
  if (qp == nullptr || port == 0 || !done) return Status::kInvalidParameter;
  if (pdata.size() > cm::kMaxReqUserData) return Status::kInvalidBufferSize;
  std::lock_guard lock(mu_);
  if (dead_) return Status::kDeviceRemoved;
  if (c.used) return Status::kConnectionActive;
  const auto local = local_gid_for(adapter_, dst);
  if (!local || adapter_.control().is_local(dst)) return Status::kInvalidAddress;
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
  c.used = true;
  c.active = true;
  c.qp = qp;
  c.local_qpn = qp->qpn();
  c.local_id = new_comm_id();
  c.tid = new_tid();
  c.local_gid = *local;
  c.remote_gid = dst;
  c.local_port = ephemeral_port();
  c.remote_port = port;
  c.requested = {std::min(lim.inbound, cfg_.max_read_limit),
                 std::min(lim.outbound, cfg_.max_read_limit)};
  c.rq_psn = new_psn();
  c.mtu = cfg_.path_mtu;
  c.retry_count = cfg_.retry_count;
  c.resp_timeout = cfg_.cm_response_timeout;
  c.max_retries = cfg_.max_cm_retries;
  c.own_pdata.assign(pdata.begin(), pdata.end());  // carried into the REQ by send_req()
  c.done = std::move(done);
  register_conn(cp);
  if (auto mac = adapter_.control().lookup(dst)) {
    c.remote_mac = *mac;
    send_req(c);
  } else {
    // Resolve first (ARP / ND with the control plane's retries); poll() sends the REQ.
    adapter_.control().request(dst);
    c.timer = Timer::kResolve;
    c.deadline = Clock::now() + cfg_.resolve_timeout;
  }
  return Status::kPending;
}

Status Core::complete_connect(Conn& c, CmConnector::DisconnectEvent on_disconnect) {
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
  c.state = CmState::kEstablished;
  c.timer = Timer::kNone;
  return Status::kSuccess;
}

Status Core::accept(Conn& c, dp::Qp* qp, const ReadLimits& lim, std::span<const uint8_t> pdata,
                    CmConnector::DisconnectEvent on_disconnect, CmConnector::Completion done) {
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
  if (Status s = qp_to_rts(c, qp); s != Status::kSuccess) return s;
  c.qp = qp;
  cm::Rep rep;
  rep.local_comm_id = c.local_id;
  rep.remote_comm_id = c.remote_id;
  rep.local_qpn = c.local_qpn;
  rep.starting_psn = c.rq_psn;  // Linux CM: the PSN we expect to receive
  rep.responder_resources = static_cast<uint8_t>(c.effective.inbound);
  rep.initiator_depth = static_cast<uint8_t>(c.effective.outbound);
  rep.target_ack_delay = cfg_.target_ack_delay;
  rep.failover_accepted = 0;
  rep.e2e_flow_control = true;
  rep.rnr_retry_count = cfg_.rnr_retry_count;
  rep.local_ca_guid = guid_;
  std::copy(pdata.begin(), pdata.end(), rep.private_data.begin());
  send(c, Message{c.tid, 0, rep}, true);
  arm_retransmit(c);
  c.done = std::move(done);
  c.on_disconnect = std::move(on_disconnect);
  c.state = CmState::kRepSent;
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
    default:
      return Status::kConnectionInvalid;
  }
}

Status Core::disconnect(Conn& c, CmConnector::Completion done) {
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
  c.state = CmState::kDreqSent;
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
      case CmState::kEstablished: {
        cm::Dreq dreq{c.local_id, c.remote_id, c.remote_qpn, {}};
        c.local_disconnect = true;
        send(c, Message{new_tid(), 0, dreq}, true);
        arm_retransmit(c);
        c.state = CmState::kDreqSent;
        break;
      }
      default:
        break;
    }
  }
  c.closed = true;
  c.qp = nullptr;
}

Status Core::listen(const std::shared_ptr<Listen>& l, uint16_t port,
                    CmListener::RequestHandler on_request) {
  if (!on_request) return Status::kInvalidParameter;
  std::lock_guard lock(mu_);
  if (dead_) return Status::kDeviceRemoved;
  if (l->listening || l->closed) return Status::kInvalidParameter;
  if (port == 0) {
    for (int i = 0; i < 65536 && (port == 0 || listeners_.count(port)); ++i)
      port = ephemeral_port();
    if (listeners_.count(port)) return Status::kTooManyAddresses;
  } else if (listeners_.count(port)) {
    return Status::kAddressAlreadyAssociated;
  }
  l->port = port;
  l->on_request = std::move(on_request);
  l->listening = true;
  listeners_[port] = l;
  return Status::kSuccess;
}

void Core::close_listener(Listen& l) {
  std::lock_guard lock(mu_);
  if (l.closed) return;
  l.closed = true;
  l.on_request = nullptr;
  auto it = listeners_.find(l.port);
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
  listeners_.clear();
}

}  // namespace cm_detail

// ---- Public objects
// --------------------------------------------------------------------------------

using cm_detail::Conn;
using cm_detail::Core;

CmConnector::CmConnector(std::shared_ptr<Core> core, std::shared_ptr<Conn> conn)
    : core_(std::move(core)), conn_(std::move(conn)) {}

CmConnector::~CmConnector() { close(); }

Status CmConnector::connect(dp::Qp* qp, const cm::Gid& dst, uint16_t port, const ReadLimits& limits,
                            std::span<const uint8_t> private_data, Completion done) {
  return core_->connect(conn_, qp, dst, port, limits, private_data, std::move(done));
}

Status CmConnector::complete_connect(DisconnectEvent on_disconnect) {
  return core_->complete_connect(*conn_, std::move(on_disconnect));
}

Status CmConnector::accept(dp::Qp* qp, const ReadLimits& limits,
                           std::span<const uint8_t> private_data, DisconnectEvent on_disconnect,
                           Completion done) {
  return core_->accept(*conn_, qp, limits, private_data, std::move(on_disconnect), std::move(done));
}

Status CmConnector::reject(std::span<const uint8_t> private_data) {
  return core_->reject(*conn_, private_data);
}

Status CmConnector::get_connection_data(ReadLimits* limits, void* pdata, uint32_t* len) const {
  std::lock_guard lock(core_->mu_);
  const Conn& c = *conn_;
  if (!c.have_peer_data) return Status::kConnectionInvalid;
  if (limits != nullptr) {
    // Before accept(): the peer's request seen from our side (what it wants to read from us is
    // our inbound). After a REP: the negotiated limits.
    *limits = c.active ? c.effective : ReadLimits{c.peer.outbound, c.peer.inbound};
    if (!c.active && (c.state == CmState::kRepSent || c.state == CmState::kEstablished))
      *limits = c.effective;
  }
  if (len == nullptr) return Status::kSuccess;
  const auto rds = static_cast<uint32_t>(c.peer_pdata.size());
  if (pdata == nullptr) {
    if (*len != 0) return Status::kInvalidParameter;
    *len = rds;
    return Status::kSuccess;
  }
  const uint32_t n = std::min(*len, rds);
  std::memcpy(pdata, c.peer_pdata.data(), n);
  const bool enough = *len >= rds;
  *len = rds;
  return enough ? Status::kSuccess : Status::kBufferTooSmall;
}

Status CmConnector::disconnect(Completion done) {
  return core_->disconnect(*conn_, std::move(done));
}

void CmConnector::close() {
  if (conn_) core_->close(*conn_);
}

CmState CmConnector::state() const {
  std::lock_guard lock(core_->mu_);
  return conn_->state;
}
bool CmConnector::is_active() const {
  std::lock_guard lock(core_->mu_);
  return conn_->active;
}
uint32_t CmConnector::local_qpn() const {
  std::lock_guard lock(core_->mu_);
  return conn_->local_qpn;
}
uint32_t CmConnector::remote_qpn() const {
  std::lock_guard lock(core_->mu_);
  return conn_->remote_qpn;
}
cm::Gid CmConnector::local_gid() const {
  std::lock_guard lock(core_->mu_);
  return conn_->local_gid;
}
cm::Gid CmConnector::peer_gid() const {
  std::lock_guard lock(core_->mu_);
  return conn_->remote_gid;
}
uint16_t CmConnector::local_port() const {
  std::lock_guard lock(core_->mu_);
  return conn_->local_port;
}
uint16_t CmConnector::peer_port() const {
  std::lock_guard lock(core_->mu_);
  return conn_->remote_port;
}
uint32_t CmConnector::mtu() const {
  std::lock_guard lock(core_->mu_);
  return conn_->mtu;
}
uint16_t CmConnector::reject_reason() const {
  std::lock_guard lock(core_->mu_);
  return conn_->reject_reason;
}

CmListener::CmListener(std::shared_ptr<Core> core)
    : core_(std::move(core)), l_(std::make_shared<cm_detail::Listen>()) {}

CmListener::~CmListener() { close(); }

Status CmListener::listen(uint16_t port, RequestHandler on_request) {
  return core_->listen(l_, port, std::move(on_request));
}

void CmListener::pause(bool paused) {
  std::lock_guard lock(core_->mu_);
  l_->paused = paused;
}

uint16_t CmListener::port() const {
  std::lock_guard lock(core_->mu_);
  return l_->port;
}

void CmListener::close() { core_->close_listener(*l_); }

CmAgent::CmAgent(Adapter& adapter, const CmConfig& cfg)
    : core_(std::make_shared<Core>(adapter, cfg)) {
  // The handler and the poller keep the core alive; after ~CmAgent they find it dead.
  adapter.control().set_mad_handler([core = core_](const MadIn& in) { core->on_mad(in); });
  poller_ = adapter.control().add_poller([core = core_] { return core->poll(); });
}

CmAgent::~CmAgent() {
  core_->adapter_.control().set_mad_handler(nullptr);
  // Without this an adapter that outlives several agents would keep every dead core alive.
  core_->adapter_.control().remove_poller(poller_);
  core_->shutdown();
}

std::unique_ptr<CmConnector> CmAgent::create_connector() {
  return std::unique_ptr<CmConnector>(new CmConnector(core_, std::make_shared<Conn>()));
}

std::unique_ptr<CmListener> CmAgent::create_listener() {
  return std::unique_ptr<CmListener>(new CmListener(core_));
}

uint64_t CmAgent::ca_guid() const noexcept { return core_->guid_; }
const CmConfig& CmAgent::config() const noexcept { return core_->cfg_; }

CmCounters CmAgent::counters() const {
  std::lock_guard lock(core_->mu_);
  return core_->counters_;
}

size_t CmAgent::connections() const { return core_->connections(); }

}  // namespace urnic::ctl

// Internals of the connection manager (cm.h): the per-connection state (Conn), listeners
// (Listen) and the core that owns them (Core). Private to control/cm/ and to the tests that
// drive the CM directly (tests/common/cm_handles.h); the code is split by
// concern: cm_core.cc (helpers, MAD output, QP transitions), cm_states.cc (the state machine),
// cm_dispatch.cc (received MADs and timers), cm_actions.cc (API actions) and cm_agent.cc (the
// agent, and what a connection's owner reads). See cm_core.cc for the overall structure.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <unordered_map>
#include <vector>

#include "control/cm/cm.h"
#include "control/cm/cma.h"
#include "urnic/config.h"

namespace urnic::ctl::cm_detail {

using Clock = std::chrono::steady_clock;
using cm::Message;
using cm::MsgResponse;
using cm::RejReason;

// Ephemeral ports (RFC 6335 §6): listeners on port 0 and active sides' source ports.
constexpr uint16_t kEphemeralFirst = 49152;

struct Listen {
  uint16_t port = 0;
  uint16_t port_space = cm::kPsTcp;  // kPsTcp: REQs (RC); kPsUdp: SIDR_REQs (UD)
  bool listening = false;
  bool paused = false;
  bool closed = false;
  CmRequestHandler on_request;
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
  // SIDR (IBTA §12.11): a UD service lookup; no QP is touched and no connection follows. The
  // active side learns the peer's QPN (remote_qpn) and Q_Key (qkey) once `resolved`.
  bool datagram = false;
  bool resolved = false;
  uint32_t qkey = 0;
  // Selective repeat (cm::kSrMark): we offered it in our REQ / the peer's REQ offered it; and
  // what both agreed, which qp_to_rts gives the QP.
  bool sr_offered = false;
  bool sr_peer_offered = false;
  bool selective_repeat = false;

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

  CmCompletion done;
  CmDisconnectEvent on_disconnect;
};

// What drives a state function: a received message (with where it came from) or a timer.
struct Input {
  enum class Kind : uint8_t {
    kReq,
    kMra,
    kRej,
    kRep,
    kRtu,
    kDreq,
    kDrep,
    kSidrReq,
    kSidrRep,
    kTimeout
  };
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
  // A connection is a std::shared_ptr<Conn> (std::make_shared<Conn>() for the active side, from
  // the listener's handler for the passive side), a listener a std::shared_ptr<Listen>. Inline
  // kDeviceRemoved once the agent is gone.

  // NdkConnect: sends a REQ for `port` at `dst` (resolving its MAC first) for `qp`, which must
  // be in RESET or INIT (it is moved to INIT, so receives may be posted before the connection
  // completes). `pdata` (at most cm::kMaxReqUserData = 56 bytes) follows the rdma_cm header.
  // Returns kPending, then `done` runs once: kSuccess when the REP arrived (call
  // get_connection_data(), then complete_connect() or reject()); kConnectionRefused on a REJ (no
  // listener, rejected); kIoTimeout when the REQ was never answered or the peer timed out;
  // kHostUnreachable when the destination did not answer ARP / ND; kCancelled when the
  // connection was closed. Inline errors (no callback): kInvalidParameter, kInvalidBufferSize
  // (private data too long), kInvalidAddress (dst is ours, or we have no address of its
  // family), kConnectionActive (already used), kInvalidDeviceState (QP not RESET / INIT).
  Status connect(const std::shared_ptr<Conn>& cp, dp::Qp* qp, const cm::Gid& dst, uint16_t port,
                 const ReadLimits& lim, std::span<const uint8_t> pdata, CmCompletion done);
  // NdkCompleteConnect: after a successful connect(), moves the QP to RTR and RTS with the
  // negotiated attributes and sends the RTU. Synchronous: kSuccess; kConnectionInvalid when not
  // in that state; kConnectionAborted when the peer gave up meanwhile (REJ); a modify_qp error.
  // `on_disconnect` (may be empty) runs once if the peer disconnects first.
  Status complete_connect(Conn& c, CmDisconnectEvent on_disconnect);
  // NdkAccept: for a connection from a listener; moves `qp` (RESET or INIT) through INIT, RTR
  // and RTS and sends the REP with `pdata` (at most 196 bytes). Returns kPending, then `done`
  // runs once: kSuccess on the RTU (or on traffic-free teardown by the peer right after it),
  // kConnectionRefused when the active side rejected, kIoTimeout when it never answered. The QP
  // is flushed on failure. Inline errors: kConnectionInvalid, kConnectionAborted (the active
  // side gave up), kInvalidBufferSize, kInvalidParameter, a modify_qp error.
  Status accept(Conn& c, dp::Qp* qp, const ReadLimits& lim, std::span<const uint8_t> pdata,
                CmDisconnectEvent on_disconnect, CmCompletion done);
  // NdkReject (synchronous): REJ "consumer defined" with `pdata` (at most 148 bytes), for a
  // request not yet accepted or a REP not yet completed. kSuccess, kConnectionInvalid,
  // kConnectionAborted, kInvalidBufferSize.
  Status reject(Conn& c, std::span<const uint8_t> pdata);
  // NdkDisconnect: DREQ, then `done` runs once with kSuccess on the DREP or kIoTimeout when none
  // came; the QP is flushed before it runs. Returns kPending; kSuccess at once (no callback)
  // when the peer already disconnected (the QP is flushed); kConnectionInvalid when not
  // connected.
  Status disconnect(Conn& c, CmCompletion done);
  // Closes the connection for its owner: a pending handshake is rejected (REJ), an established
  // connection is torn down (DREQ, no callbacks), and no callback runs after close() returns
  // except one already running. Idempotent.
  void close(Conn& c);
  // NdkGetConnectionData: read limits (the peer's request before accept(); the negotiated ones
  // after a REP) and the peer's private data: the REQ's 56 application bytes, the REP's 196 or
  // the REJ's 148. NDK protocol: the required size is the field size; `*len` is set to it;
  // pdata == nullptr with *len == 0 asks for it; kBufferTooSmall when *len was smaller (the
  // prefix is copied). kConnectionInvalid before any peer message.
  Status get_connection_data(const Conn& c, ReadLimits* limits, void* pdata, uint32_t* len) const;
  CmConnInfo info(const Conn& c) const;

  // SIDR, active side (IBTA §12.11): sends a SIDR_REQ for rdma_cm's RDMA_PS_UDP service of `port`
  // at `dst` (resolving its MAC first), `pdata` (at most cm::kMaxSidrReqUserData = 180 bytes)
  // after the IP CM header, and retransmits it like a REQ. Returns kPending, then `done` runs
  // once: kSuccess on a SIDR_REP with status 0 (datagram_peer() and get_connection_data() tell
  // the answer); kConnectionRefused on any other status (or a zero Q_Key, which rdma_cm refuses
  // too); kIoTimeout; kHostUnreachable; kCancelled. Inline: kInvalidParameter,
  // kInvalidBufferSize, kInvalidAddress, kConnectionActive (already used).
  Status resolve(const std::shared_ptr<Conn>& cp, const cm::Gid& dst, uint16_t port,
                 std::span<const uint8_t> pdata, CmCompletion done);
  // SIDR, passive side (synchronous): SIDR_REP status 0 with our UD QP's `qpn` and `qkey` (0:
  // rdma_cm's default cm::kRdmaUdpQkey) and `pdata` (at most 136 bytes). kSuccess;
  // kConnectionInvalid (not an undecided SIDR request); kInvalidParameter (QPN 0, 1 or above 24
  // bits); kInvalidBufferSize. reject() answers with status 2 (rejected) instead.
  Status accept_datagram(Conn& c, uint32_t qpn, uint32_t qkey, std::span<const uint8_t> pdata);
  // The peer's UD QPN and Q_Key after a successful resolve(); kConnectionInvalid otherwise.
  Status datagram_peer(const Conn& c, uint32_t* qpn, uint32_t* qkey) const;

  // NdkListen on `port` (0: an ephemeral port from 49152-65535) of the adapter's addresses in
  // rdma_cm port space `port_space`: cm::kPsTcp (REQs) or cm::kPsUdp (SIDR_REQs); the two spaces
  // have separate ports. `on_request` gets each new request. kSuccess;
  // kAddressAlreadyAssociated when another listener has the port; kInvalidParameter when already
  // listening, `on_request` is empty or the port space is neither.
  Status listen(const std::shared_ptr<Listen>& l, uint16_t port, CmRequestHandler on_request,
                uint16_t port_space = cm::kPsTcp);
  // NdkControlConnectEvents: while paused, requests are refused (REJ 8, SIDR_REP status 1) as
  // if nobody listened.
  void pause(Listen& l, bool paused) {
    std::lock_guard lock(mu_);
    l.paused = paused;
  }
  uint16_t port(const Listen& l) const {
    std::lock_guard lock(mu_);
    return l.port;
  }
  // Stops listening; connections already handed out are unaffected. Idempotent.
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
  CmState on_sidr_req_sent(Conn& c, const Input& in);
  CmState on_sidr_req_rcvd(Conn& c, const Input& in);
  RejReason rejected(Conn& c, const Input& in);
  CmState more_time(Conn& c, const Input& in, MsgResponse what, CmState waiting, CmState next);
  CmState ask_more_time(Conn& c, MsgResponse what, CmState mra_sent);
  CmState timed_out(Conn& c, MsgResponse what);
  void drive(const std::shared_ptr<Conn>& c, const Input& in);
  void enter(Conn& c, CmState s);

  // ---- MAD handlers ----
  void handle_req(const MadIn& in, const Message& m);
  void handle_rep(const MadIn& in, const Message& m);
  void handle_rej(const MadIn& in, const Message& m);
  void handle_mra(const MadIn& in, const Message& m);
  void handle_sidr_req(const MadIn& in, const Message& m);
  void handle_sidr_rep(const MadIn& in, const Message& m);
  // Hands a new request to its listener's handler on the control thread (refused if the
  // listener went away meanwhile).
  void offer(const std::shared_ptr<Conn>& c, const std::shared_ptr<Listen>& l);
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
  // Passive requests to listener `l` that the consumer has not decided yet.
  size_t pending_requests(const Listen& l) const {
    size_t n = 0;
    for (const auto& [id, c] : by_local_)
      n += !c->active && c->local_port == l.port && c->datagram == (l.port_space == cm::kPsUdp) &&
           (c->state == CmState::kReqRcvd || c->state == CmState::kMraReqSent ||
            c->state == CmState::kSidrReqRcvd);
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
  // The active side's first message once the peer's MAC is known: REQ, or SIDR_REQ.
  void send_request(Conn& c) { c.datagram ? send_sidr_req(c) : send_req(c); }
  void send_req(Conn& c);
  void send_sidr_req(Conn& c);
  // Fills the IP CM header at the start of an active side's REQ / SIDR_REQ private data.
  void put_cma_hdr(const Conn& c, std::span<uint8_t> pdata) const;
  // Sets up an active side (connect / resolve) and sends its request, or resolves the MAC first.
  void start_active(const std::shared_ptr<Conn>& cp, const cm::Gid& local, const cm::Gid& dst,
                    uint16_t port, std::span<const uint8_t> pdata, CmCompletion done);
  // The passive side's one SIDR_REP (kept to answer duplicates), then TIMEWAIT.
  void send_sidr_rep(Conn& c, cm::SidrStatus status, uint32_t qpn, uint32_t qkey,
                     std::span<const uint8_t> pdata);
  // SIDR_REP for a SIDR_REQ that has no request state (nobody listens): no state is kept.
  void sidr_unmatched(const MadIn& in, const Message& m, cm::SidrStatus status);
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
  std::map<std::pair<cm::Gid, uint32_t>, std::shared_ptr<Conn>> by_sidr_;     // gid, request ID
  // By (port space, port): rdma_cm's TCP and UDP port spaces are separate.
  std::map<std::pair<uint16_t, uint16_t>, std::shared_ptr<Listen>> listeners_;
  std::vector<std::function<void()>> pending_;
};

}  // namespace urnic::ctl::cm_detail

// The connection manager: IB CM over QP1 the way Linux's ib_cm and librdmacm speak it (rocev2.md
// §4.3-4.4), so that urnic connects to rdma_cm peers (rping, ucmatose, ib_write_bw -R) and to
// itself. One CmAgent per adapter owns the adapter's QP1 MAD handler and a control-thread poller.
//
// The objects follow NDK's Connector / Listener (ndkpi.md §5):
//   active:  connector.connect() -> REQ ... REP: the completion fires (kSuccess), the consumer
//            reads get_connection_data() and calls complete_connect() (RTU; the QP goes to RTS)
//            or reject() (REJ).
//   passive: listener.listen(port, on_request) -> REQ: on_request(new connector); the consumer
//            calls accept() (the QP goes to RTS, REP; completes on RTU) or reject() (REJ).
//   both:    disconnect() (DREQ; completes on DREP, then the QP is flushed); a DREQ from the
//            peer is answered with DREP at once and reported through the disconnect callback.
// PSNs follow the Linux CM convention (rocev2.md §4.3): the Starting PSN a side puts in its
// REQ / REP is the PSN it expects to receive; the peer sends from it.
//
// Threading. Every callback (connect / accept / disconnect completions, disconnect events,
// listener requests) runs on the adapter's control thread, never inside the call that caused it,
// and never with a CM lock held, so a callback may call back into the CM. Calls may come from any
// thread; the CM serialises them with one mutex per agent. QP transitions go through
// Adapter::modify_qp, so the adapter's engine must run on its own lcore (Engine::launch), or the
// caller must drive engine and control plane from one thread (start_control = false).
//
// Lifetime. A QP handed to connect() / accept() must stay alive while its connector is open;
// closing the connector (close() or its destructor) detaches it. The agent must outlive its
// connectors and listeners and be destroyed before its adapter.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "control/adapter.h"
#include "control/cm/mad.h"
#include "dataplane/qp.h"
#include "urnic/status.h"

namespace urnic::ctl {

namespace cm_detail {
class Core;
struct Conn;
struct Listen;
}  // namespace cm_detail

// IB CM connection states (IBTA §12.9.6 figure 116; Linux enum ib_cm_state).
enum class CmState : uint8_t {
  kIdle,
  kReqSent,     // active: REQ sent, waiting for REP (retransmitting)
  kReqRcvd,     // passive: REQ handed to the listener, consumer deciding
  kMraReqSent,  // passive: told the active side (MRA) that the decision takes longer
  kMraReqRcvd,  // active: the passive side asked for more time
  kRepSent,     // passive: REP sent, waiting for RTU (retransmitting)
  kRepRcvd,     // active: REP received, consumer deciding (complete_connect / reject)
  kMraRepSent,  // active: told the passive side (MRA) that the decision takes longer
  kMraRepRcvd,  // passive: the active side asked for more time
  kEstablished,
  kDreqSent,  // DREQ sent, waiting for DREP (retransmitting)
  kDreqRcvd,  // DREQ received (DREP goes out at once, then TIMEWAIT)
  kTimewait,  // comm ID held so that stale messages are recognised
  kCount,
};
const char* to_string(CmState s) noexcept;

// NDK read limits: inbound = RDMA READs / ATOMICs the peer may have outstanding against us (IRD,
// the QP's max_dest_rd_atomic); outbound = the ones we may have outstanding (ORD, max_rd_atomic).
struct ReadLimits {
  uint32_t inbound = 1;
  uint32_t outbound = 1;
  friend bool operator==(const ReadLimits&, const ReadLimits&) = default;
};

struct CmConfig {
  // CM response timeout exponent for our REQ / REP / DREQ retransmissions: 4.096 us * 2^t
  // (rdma_cm: CMA_CM_RESPONSE_TIMEOUT 20, ~4.3 s), and how many times to retransmit
  // (CMA_MAX_CM_RETRIES 15). Tests use small values.
  uint8_t cm_response_timeout = 20;
  uint8_t max_cm_retries = 15;
  // Service timeout we ask for in an MRA (CMA_CM_MRA_SETTING's 24, ~69 s).
  uint8_t mra_service_timeout = 24;
  // How long a finished connection keeps its comm ID (Linux: the path's ACK timeout).
  std::chrono::milliseconds timewait{1000};
  // Neighbour resolution of the destination before the REQ goes out.
  std::chrono::milliseconds resolve_timeout{2000};
  // Path MTU offered in our REQs; the passive side takes the REQ's MTU (it must not be above
  // max_path_mtu, else REJ "invalid MTU").
  uint32_t path_mtu = 1024;
  uint32_t max_path_mtu = 4096;
  uint8_t retry_count = 7;         // REQ: transport retries, for both QPs
  uint8_t rnr_retry_count = 7;     // REQ / REP: RNR retries the peer uses against us
  uint8_t local_ack_timeout = 14;  // our QPs' ACK timeout (4.096 us * 2^t), advertised in REQs
  uint8_t min_rnr_timer = 12;      // our QPs' RNR NAK timer code (0.64 ms)
  uint8_t target_ack_delay = 15;   // REP (rxe advertises 15)
  uint8_t hop_limit = 64;
  // Requests a listener may hold undecided (handed to the consumer, not yet accepted or
  // rejected): the listen backlog. A REQ beyond it is refused with REJ "no resources" (IBTA
  // table 195, reason 3), so a peer flooding REQs cannot make the CM hold unbounded state.
  uint32_t max_pending_requests = 1024;
  uint32_t max_read_limit = 16;  // adapter MaxInboundReadLimit / MaxOutboundReadLimit
  // Remote rights our QPs accept (the MRs still check every access).
  uint32_t qp_access =
      dp::access::kRemoteRead | dp::access::kRemoteWrite | dp::access::kRemoteAtomic;
  // Test hook (URNIC_TESTING builds only): called for every MAD about to be sent; returning true
  // loses it on the way (the engine's fault injector does not see control frames). Runs on the
  // sending thread under the CM's lock: it must not call into the CM.
  std::function<bool(const cm::Message&)> testing_drop_tx;
};

// Per-agent counters (house style rule 22).
struct CmCounters {
  uint64_t mads_in = 0, mads_out = 0;
  uint64_t in_by_attr[8] = {};  // REQ MRA REJ REP RTU DREQ DREP other, by AttrId - 0x10
  uint64_t out_by_attr[8] = {};
  uint64_t decode_errors[static_cast<size_t>(cm::MadError::kCount)] = {};
  uint64_t duplicates = 0;   // REQ / REP / RTU / DREQ for a known comm ID in a later state
  uint64_t unmatched = 0;    // no connection for the comm IDs (answered where Linux answers)
  uint64_t retransmits = 0;  // REQ / REP / DREQ sent again on the response timeout
  uint64_t timeouts = 0;     // handshakes abandoned after max_cm_retries
  uint64_t rej_sent = 0, rej_received = 0;
  uint64_t mra_sent = 0, mra_received = 0;
  uint64_t stale = 0;          // REQ / REP for a remote QP already connected (REJ 10)
  uint64_t no_listener = 0;    // REQ for a port nobody listens on (REJ 8)
  uint64_t send_failures = 0;  // neighbour unknown or TX ring full (the retry timer resends)
  uint64_t backlog_full = 0;   // REQs refused because the listener's backlog was full (REJ 3)
};

class CmAgent;

class CmConnector {
 public:
  using Completion = std::function<void(Status)>;
  using DisconnectEvent = std::function<void()>;

  ~CmConnector();
  CmConnector(const CmConnector&) = delete;
  CmConnector& operator=(const CmConnector&) = delete;

  // NdkConnect: sends a REQ for `port` at `dst` (resolving its MAC first) for `qp`, which must
  // be in RESET or INIT (it is moved to INIT, so receives may be posted before the connection
  // completes). `private_data` (at most cm::kMaxReqUserData = 56 bytes) follows the rdma_cm
  // header. Returns kPending, then `done` runs once: kSuccess when the REP arrived (call
  // get_connection_data(), then complete_connect() or reject()); kConnectionRefused on a REJ
  // (no listener, rejected); kIoTimeout when the REQ was never answered or the peer timed out;
  // kHostUnreachable when the destination did not answer ARP / ND; kCancelled when the connector
  // was closed. Inline errors (no callback): kInvalidParameter, kInvalidBufferSize (private
  // data too long), kInvalidAddress (dst is ours, or we have no address of its family),
  // kConnectionActive (already used), kInvalidDeviceState (QP not RESET / INIT).
  Status connect(dp::Qp* qp, const cm::Gid& dst, uint16_t port, const ReadLimits& limits,
                 std::span<const uint8_t> private_data, Completion done);
  // NdkCompleteConnect: after a successful connect(), moves the QP to RTR and RTS with the
  // negotiated attributes and sends the RTU. Synchronous: kSuccess; kConnectionInvalid when not
  // in that state; kConnectionAborted when the peer gave up meanwhile (REJ); a modify_qp error.
  // `on_disconnect` (may be empty) runs once if the peer disconnects first.
  Status complete_connect(DisconnectEvent on_disconnect);
  // NdkAccept: for a connector from a listener; moves `qp` (RESET or INIT) through INIT, RTR and
  // RTS and sends the REP with `private_data` (at most 196 bytes). Returns kPending, then `done`
  // runs once: kSuccess on the RTU (or on traffic-free teardown by the peer right after it),
  // kConnectionRefused when the active side rejected, kIoTimeout when it never answered. The QP
  // is flushed on failure. Inline errors: kConnectionInvalid, kConnectionAborted (the active
  // side gave up), kInvalidBufferSize, kInvalidParameter, a modify_qp error.
  Status accept(dp::Qp* qp, const ReadLimits& limits, std::span<const uint8_t> private_data,
                DisconnectEvent on_disconnect, Completion done);
  // NdkReject (synchronous): REJ "consumer defined" with `private_data` (at most 148 bytes), for
  // a request not yet accepted or a REP not yet completed. kSuccess, kConnectionInvalid,
  // kConnectionAborted, kInvalidBufferSize.
  Status reject(std::span<const uint8_t> private_data);
  // NdkGetConnectionData: read limits (the peer's request before accept(); the negotiated ones
  // after a REP) and the peer's private data: the REQ's 56 application bytes, the REP's 196 or
  // the REJ's 148. NDK protocol: the required size is the field size; `*len` is set to it;
  // pdata == nullptr with *len == 0 asks for it; kBufferTooSmall when *len was smaller (the
  // prefix is copied). kConnectionInvalid before any peer message.
  Status get_connection_data(ReadLimits* limits, void* pdata, uint32_t* len) const;
  // NdkDisconnect: DREQ, then `done` runs once with kSuccess on the DREP or kIoTimeout when none
  // came; the QP is flushed before it runs. Returns kPending; kSuccess at once (no callback)
  // when the peer already disconnected (the QP is flushed); kConnectionInvalid when not
  // connected.
  Status disconnect(Completion done);
  // Closes the connector: a pending handshake is rejected (REJ), an established connection is
  // torn down (DREQ, no callbacks), and no callback runs after close() returns except one
  // already running. Idempotent; the destructor calls it.
  void close();

  CmState state() const;
  bool is_active() const;
  uint32_t local_qpn() const;
  uint32_t remote_qpn() const;
  cm::Gid local_gid() const;
  cm::Gid peer_gid() const;
  uint16_t local_port() const;
  uint16_t peer_port() const;
  uint32_t mtu() const;  // the connection's path MTU
  // The reason of the REJ that ended the handshake (0 when none).
  uint16_t reject_reason() const;

 private:
  friend class cm_detail::Core;
  friend class CmAgent;
  CmConnector(std::shared_ptr<cm_detail::Core> core, std::shared_ptr<cm_detail::Conn> conn);
  std::shared_ptr<cm_detail::Core> core_;
  std::shared_ptr<cm_detail::Conn> conn_;
};

class CmListener {
 public:
  // Called on the control thread for each new connection request. The connector now belongs to
  // the callee: it accepts, rejects, or drops it (which rejects).
  using RequestHandler = std::function<void(std::unique_ptr<CmConnector>)>;

  ~CmListener();
  CmListener(const CmListener&) = delete;
  CmListener& operator=(const CmListener&) = delete;

  // NdkListen on `port` (0: an ephemeral port from 49152-65535) of the adapter's addresses.
  // kSuccess; kAddressAlreadyAssociated when another listener has the port; kInvalidParameter
  // when already listening or `on_request` is empty.
  Status listen(uint16_t port, RequestHandler on_request);
  // NdkControlConnectEvents: while paused, requests are refused (REJ) as if nobody listened.
  void pause(bool paused);
  uint16_t port() const;
  // Stops listening; connectors already handed out are unaffected. Idempotent.
  void close();

 private:
  friend class CmAgent;
  explicit CmListener(std::shared_ptr<cm_detail::Core> core);
  std::shared_ptr<cm_detail::Core> core_;
  std::shared_ptr<cm_detail::Listen> l_;
};

class CmAgent {
 public:
  // Installs the QP1 MAD handler and a poller on `adapter`'s control plane.
  explicit CmAgent(Adapter& adapter, const CmConfig& cfg = {});
  // Stops handling MADs; open connectors and listeners become inert (no more callbacks).
  ~CmAgent();
  CmAgent(const CmAgent&) = delete;
  CmAgent& operator=(const CmAgent&) = delete;

  std::unique_ptr<CmConnector> create_connector();
  std::unique_ptr<CmListener> create_listener();

  // Local CA GUID: the adapter MAC as a modified EUI-64, as rxe derives it.
  uint64_t ca_guid() const noexcept;
  const CmConfig& config() const noexcept;
  CmCounters counters() const;
  // Connections the agent still tracks (including TIMEWAIT).
  size_t connections() const;

 private:
  std::shared_ptr<cm_detail::Core> core_;
  uint64_t poller_ = 0;  // ControlPlane::add_poller id
};

// The adapter's GID for talking to `peer`: its IPv4-mapped GID for an IPv4 peer, else its IPv6
// address (or link-local GID for a link-local peer). nullopt when it has none of that family.
std::optional<cm::Gid> local_gid_for(const Adapter& adapter, const cm::Gid& peer);

}  // namespace urnic::ctl

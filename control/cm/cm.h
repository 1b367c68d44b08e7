// The connection manager: IB CM over QP1 the way Linux's ib_cm and librdmacm speak it (rocev2.md
// §4.3-4.4), so that urnic connects to rdma_cm peers (rping, ucmatose, ib_write_bw -R) and to
// itself. One CmAgent per adapter owns the adapter's QP1 MAD handler and a control-thread poller.
//
// Connections follow NDK's Connector / Listener (ndkpi.md §5); the NDK objects
// (ndk_connector.cc) drive them through the agent's core (cm_core.h), with no layer between:
//   active:  connect() -> REQ ... REP: the completion fires (kSuccess), the consumer reads
//            get_connection_data() and calls complete_connect() (RTU; the QP goes to RTS) or
//            reject() (REJ).
//   passive: listen(port, on_request) -> REQ: on_request(new connection); the consumer calls
//            accept() (the QP goes to RTS, REP; completes on RTU) or reject() (REJ).
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
// Lifetime. A QP handed to connect() / accept() must stay alive while its connection is open;
// closing the connection (Core::close) detaches it. The agent must be destroyed before its
// adapter; connections and listeners outlive it harmlessly (their calls return kDeviceRemoved).
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
#include "urnic/counters.h"
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
  // SIDR (IBTA §12.11; Linux IB_CM_SIDR_REQ_SENT / _RCVD): a UD service lookup, no connection.
  // The passive side answers once and then holds the answer in TIMEWAIT for duplicates.
  kSidrReqSent,  // active: SIDR_REQ sent, waiting for SIDR_REP (retransmitting)
  kSidrReqRcvd,  // passive: SIDR_REQ handed to the listener, consumer deciding
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
  // Offer selective repeat in our REQs and accept it in our REPs (cm::kSrMark, cma.h).
  bool selective_repeat = true;
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
  // AdapterConfig::broken_rules' cm_* rules (testing builds): the CM breaks them on purpose so
  // that urnic-conform's CM scenarios can be shown to fail.
  BrokenRules broken;
};

// Slot of a CM attribute in CmCounters::in_by_attr / out_by_attr: REQ MRA REJ REP RTU DREQ DREP
// SIDR_REQ SIDR_REP (AttrId - 0x10), then one for any other attribute.
inline constexpr size_t kAttrSlots = 10;
constexpr size_t attr_slot(cm::AttrId a) noexcept {
  const auto v = static_cast<uint16_t>(a);
  return v >= 0x10 && v <= 0x18 ? v - 0x10u : kAttrSlots - 1;
}

// Per-agent counters (house style rule 22).
struct CmCounters {
  uint64_t mads_in = 0, mads_out = 0;
  uint64_t in_by_attr[kAttrSlots] = {};  // by attr_slot()
  uint64_t out_by_attr[kAttrSlots] = {};
  uint64_t decode_errors[static_cast<size_t>(cm::MadError::kCount)] = {};
  uint64_t duplicates = 0;   // REQ / REP / RTU / DREQ for a known comm ID in a later state
  uint64_t unmatched = 0;    // no connection for the comm IDs (answered where Linux answers)
  uint64_t retransmits = 0;  // REQ / REP / DREQ sent again on the response timeout
  uint64_t timeouts = 0;     // handshakes abandoned after max_cm_retries
  uint64_t rej_sent = 0, rej_received = 0;
  uint64_t mra_sent = 0, mra_received = 0;
  uint64_t stale = 0;          // REQ / REP for a remote QP already connected (REJ 10)
  uint64_t no_listener = 0;    // REQ / SIDR_REQ for a port nobody listens on (REJ 8, SIDR 1)
  uint64_t send_failures = 0;  // neighbour unknown or TX ring full (the retry timer resends)
  uint64_t backlog_full = 0;   // REQs refused because the listener's backlog was full (REJ 3)
};

// The callbacks of a connection and of a listener. They run on the adapter's control thread,
// never with the CM's lock held (see "Threading" above).
using CmCompletion = std::function<void(Status)>;
using CmDisconnectEvent = std::function<void()>;
// A new connection request. The connection belongs to the callee from then on: it accepts,
// rejects or closes it (Core::accept / reject / close in cm_core.h); one it forgets stays
// undecided until the active side times out.
using CmRequestHandler = std::function<void(std::shared_ptr<cm_detail::Conn>)>;

// A copy of what a connection's owner may read about it (Core::info).
struct CmConnInfo {
  CmState state = CmState::kIdle;
  bool active = false;  // we sent the REQ
  uint32_t local_qpn = 0, remote_qpn = 0;
  cm::Gid local_gid{}, peer_gid{};
  uint16_t local_port = 0, peer_port = 0;
  uint32_t mtu = 0;            // the connection's path MTU
  uint16_t reject_reason = 0;  // of the REJ (or SIDR_REP status) that ended the handshake
  bool datagram = false;       // a SIDR exchange (UD service lookup), not a connection
};

class CmAgent {
 public:
  // Installs the QP1 MAD handler and a poller on `adapter`'s control plane.
  explicit CmAgent(Adapter& adapter, const CmConfig& cfg = {});
  // Stops handling MADs; open connectors and listeners become inert (no more callbacks).
  ~CmAgent();
  CmAgent(const CmAgent&) = delete;
  CmAgent& operator=(const CmAgent&) = delete;

  // The core that runs the agent's connections and listeners (cm_core.h). Connectors and
  // listeners are a std::shared_ptr<cm_detail::Conn> / <Listen> each, driven through it; they
  // keep the core alive, and it turns inert (kDeviceRemoved, no callbacks) once the agent is gone.
  const std::shared_ptr<cm_detail::Core>& core() const noexcept { return core_; }

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

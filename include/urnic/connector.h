// NDK_CONNECTOR (ndkpi.md §5): one connection, over the IB CM the way Linux's rdma_cm speaks it
// (REQ / REP / RTU, REJ, DREQ / DREP, MRA on QP1; rocev2.md §4.3-4.4), so a Connector reaches
// rdma_cm peers (rping, ucmatose, ib_write_bw -R) as well as other urnic adapters.
//
// Active side:  create_connector -> connect (completes when the peer accepts: kSuccess, or
//               kConnectionRefused / kIoTimeout / kHostUnreachable) -> get_connection_data ->
//               complete_connect (or reject).
// Passive side: a Listener's connect event hands over a new Connector -> get_connection_data ->
//               accept (completes when the active side completed the connection) or reject.
// Either side:  disconnect; the peer's disconnect arrives through the disconnect event.
// Datagrams:    SIDR (IBTA §12.11), how rdma_cm's RDMA_PS_UDP ids (udaddy) find a peer's UD QP:
//               resolve_datagram (completes with the peer's answer) -> get_datagram_peer; a
//               Listener's listen_datagram hands each request over as a Connector whose
//               is_datagram() is true -> accept_datagram (the consumer's UD QPN and Q_Key) or
//               reject. No QP is touched and nothing stays connected; disconnect does not apply.
//
// Threading and callbacks follow object.h: any thread may call; every callback runs on the
// adapter's control thread, one at a time. Requests that return kPending call their completion
// exactly once (a close of the connector completes them with kCancelled first). The QP given to
// connect / accept becomes an antecedent of the connector: its close pends until the connector
// is closed (ndkpi.md §1.4).
//
// Limits: private data up to 56 bytes on connect (92 minus rdma_cm's 36-byte IP CM header),
// 148 on accept and reject (AdapterInfo max_caller_data / max_callee_data; larger is
// kInvalidBufferSize). Read limits are clamped to the adapter's and the peer's (ndkpi.md §5.3).
// Datagram requests carry up to kMaxDatagramRequestData bytes, their answers (accept_datagram,
// reject) up to kMaxDatagramReplyData.
// The adapter's engine may run on its own lcore (Engine::launch) or be driven with run_once(),
// by one application thread or several (EngineConfig::shared_drive): the connection manager
// applies its QP transitions from the control thread, between two of the driving thread's steps.
// Driven, it makes progress only while the application keeps calling run_once().
#pragma once

#include <sys/socket.h>

#include <cstdint>

#include "urnic/adapter.h"
#include "urnic/object.h"
#include "urnic/qp.h"
#include "urnic/status.h"

namespace urnic {

class Connector;

// NDK_FN_CONNECT_EVENT_CALLBACK: a connection request reached a listener; `connector` (a new
// object, owned by the consumer, who closes it) carries it: accept or reject it.
using ConnectEventCallback = void (*)(void* context, Connector* connector);
// NDK_FN_DISCONNECT_EVENT_CALLBACK: the peer disconnected (or the connection broke). Called at
// most once, and not after the consumer itself called disconnect().
using DisconnectEventCallback = void (*)(void* context);

// Private data of the datagram calls: a SIDR_REQ has 216 bytes, 36 of them rdma_cm's IP CM
// header; a SIDR_REP has 136.
inline constexpr uint32_t kMaxDatagramRequestData = 180;
inline constexpr uint32_t kMaxDatagramReplyData = 136;

namespace detail {
struct ConnectorImpl;
}  // namespace detail

class Connector final : public detail::ObjectOf<detail::ConnectorImpl> {
 public:
  // NdkConnect. `src` (may be null) must be one of the adapter's addresses (its port is not
  // used: the IP CM source port is ephemeral); `dst` is AF_INET or AF_INET6 with a non-zero
  // port. `qp` must be new (INIT) and of this adapter. kPending, then the completion with
  // kSuccess (the peer accepted), kConnectionRefused (no listener, or rejected; retryable),
  // kIoTimeout (no answer; retryable), kHostUnreachable (no ARP / ND answer; retryable) or
  // kCancelled (connector closed). Inline: kInvalidParameter, kInvalidBufferSize (private data),
  // kInvalidAddress (src not ours, or no address of dst's family), kConnectionActive (the
  // connector was used before), kInvalidDeviceState.
  Status connect(Qp& qp, const sockaddr* src, uint32_t src_length, const sockaddr* dst,
                 uint32_t dst_length, uint32_t inbound_read_limit, uint32_t outbound_read_limit,
                 const void* private_data, uint32_t private_data_length,
                 RequestCompletion completion, void* request_context) noexcept;
  // NdkCompleteConnect: after connect() succeeded; moves the QP to RTS and sends the RTU. Done
  // at once: kSuccess (no completion call), kConnectionInvalid (not in that state),
  // kConnectionAborted (the peer gave up meanwhile), kInvalidDeviceState. `disconnect_event`
  // (may be null) reports the peer's disconnect.
  Status complete_connect(DisconnectEventCallback disconnect_event, void* disconnect_context,
                          RequestCompletion completion, void* request_context) noexcept;
  // NdkAccept: for a connector from a connect event. kPending, then the completion with
  // kSuccess (the active side completed), kConnectionRefused (it rejected) or kIoTimeout (it
  // never answered), or kCancelled. Inline: kConnectionInvalid, kConnectionAborted (the active
  // side gave up), kInvalidParameter, kInvalidBufferSize, kInvalidDeviceState.
  Status accept(Qp& qp, uint32_t inbound_read_limit, uint32_t outbound_read_limit,
                const void* private_data, uint32_t private_data_length,
                DisconnectEventCallback disconnect_event, void* disconnect_context,
                RequestCompletion completion, void* request_context) noexcept;
  // NdkReject (synchronous): kSuccess, kConnectionInvalid, kConnectionAborted,
  // kInvalidBufferSize.
  Status reject(const void* private_data, uint32_t private_data_length) noexcept;
  // SIDR_REQ for rdma_cm's UDP port space (service ID 0x0000000001110000 + dst's port): asks the
  // peer's datagram listener for its UD QP. `src` and `dst` as for connect(); no QP needed.
  // kPending, then the completion with kSuccess (the peer answered with a QPN and Q_Key:
  // get_datagram_peer, get_connection_data), kConnectionRefused (no datagram listener, or rejected;
  // retryable), kIoTimeout (no answer after the CM's retries; retryable), kHostUnreachable, or
  // kCancelled (connector closed). Inline: kInvalidParameter, kInvalidBufferSize (more than
  // kMaxDatagramRequestData), kInvalidAddress, kConnectionActive (the connector was used before),
  // kInvalidDeviceState (closing).
  Status resolve_datagram(const sockaddr* src, uint32_t src_length, const sockaddr* dst,
                          uint32_t dst_length, const void* private_data,
                          uint32_t private_data_length, RequestCompletion completion,
                          void* request_context) noexcept;
  // After resolve_datagram succeeded: the peer's UD QP number and Q_Key (either pointer may be
  // null). kSuccess; kConnectionInvalid before that, or on a passive connector.
  Status get_datagram_peer(uint32_t* qpn, uint32_t* qkey) noexcept;
  // Whether this connector came from a datagram listener's connect event (or resolve_datagram
  // was called on it).
  bool is_datagram() const noexcept;
  // For a datagram request from a connect event (synchronous): answers with the consumer's UD
  // QP number `qpn` and `qkey` (0: rdma_cm's default Q_Key 0x01234567), with private data.
  // kSuccess (a retried request gets the same answer again); kConnectionInvalid (not an
  // undecided datagram request); kInvalidParameter (qpn 0, 1 or above 24 bits, or
  // private_data null with a length); kInvalidBufferSize (more than kMaxDatagramReplyData).
  // reject() refuses a datagram request instead (its private data up to
  // kMaxDatagramReplyData); closing the connector undecided refuses it too.
  Status accept_datagram(uint32_t qpn, uint32_t qkey, const void* private_data,
                         uint32_t private_data_length) noexcept;
  // NdkGetConnectionData: the read limits and the peer's private data (REQ: 56 bytes, REP: 196,
  // REJ: 148; datagrams: SIDR_REQ 180, SIDR_REP 136 with limits 0; the consumer encodes its own
  // lengths). `*length` is set to that size;
  // private_data == null with *length == 0 asks for it; kBufferTooSmall when *length was
  // smaller (a prefix is copied). kConnectionInvalid before any peer data.
  Status get_connection_data(uint32_t* inbound_read_limit, uint32_t* outbound_read_limit,
                             void* private_data, uint32_t* private_data_length) noexcept;
  // NdkGetLocalAddress / NdkGetPeerAddress: kSuccess, or kBufferTooSmall with *length set.
  // kConnectionInvalid before the connection has addresses.
  Status get_local_address(sockaddr* address, uint32_t* length) noexcept;
  Status get_peer_address(sockaddr* address, uint32_t* length) noexcept;
  // urnic's extension (NDKPI reports a refusal only as kConnectionRefused): the reason code that
  // ended the handshake, as rdma_cm's REJECTED event carries it in its status. The peer's REJ
  // reason (IBTA table 195: 8 nobody listens on that service ID, 28 the consumer rejected, 3 no
  // resources, ...), a datagram request's SIDR_REP status (IBTA §12.11.2: 1 nobody serves it,
  // 2 rejected), or the one our own REJ gave (4 the peer never answered, 10 its REP was
  // stale). kSuccess; kConnectionInvalid when no reason ended it (still connecting, connected).
  Status get_reject_reason(uint16_t* reason) noexcept;
  // NdkDisconnect: kPending, then the completion with kSuccess (the peer answered) or
  // kIoTimeout; the QP is flushed before it runs. kSuccess at once when the peer disconnected
  // first (the QP is flushed). kConnectionInvalid when not connected.
  Status disconnect(RequestCompletion completion, void* request_context) noexcept;

 private:
  using ObjectOf::ObjectOf;  // made by the provider only (object.h)
};

// The IBTA table 195 name of a connection's REJ reason (get_reject_reason), e.g. "consumer
// defined" for 28; "other" for a reason it does not name.
const char* reject_reason_name(uint16_t reason) noexcept;

// NdkCreateConnector (an NDK_ADAPTER dispatch slot; a free function here so that the adapter's
// header stays independent of the connection manager). kSuccess with *out set (never pends);
// kInvalidParameter; kInvalidDeviceState when the adapter is closing.
Status create_connector(Adapter& adapter, CreateCompletion completion, void* request_context,
                        Handle<Connector>* out) noexcept;

}  // namespace urnic

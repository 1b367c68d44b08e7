// urnic extension interfaces, reached through NdkQueryExtension (Object::query_extension /
// Adapter::query_extension; ndkpi.md §1.1, §2.3): what RoCE offers beyond NDK, kept out of the
// NDK dispatch tables so that those stay exactly NDK's.
//
//   QpExtension         send / write with immediate data, compare-and-swap, fetch-and-add;
//   QpConnectExtension  "manual connect": ibverbs-style modify_qp through RESET -> INIT -> RTR
//                       -> RTS with explicit attributes, for peers connected out of band
//                       (rc_pingpong, perftest) instead of through a Connector;
//   CqExtension         cancelling an armed notification (ND2 CancelOverlappedRequests);
//   AdapterExtension    the adapter's own addresses (what a peer needs to connect manually).
//
// Each interface is an object owned by the object it extends and lives as long as it; its
// methods follow the threading rules of that object.
#pragma once

#include <array>
#include <cstdint>
#include <span>

#include "urnic/congestion.h"
#include "urnic/counters.h"
#include "urnic/object.h"
#include "urnic/status.h"
#include "urnic/types.h"

namespace urnic {

namespace detail {
struct AdapterImpl;
struct ObjectImpl;
struct RemoteQpImpl;
struct RemoteCqImpl;
}  // namespace detail

class AddressHandle;  // datagram.h

// Operations RoCE has and NDK lacks, on a QP's send queue. Posting rules, buffer ownership and
// the common statuses are those of Qp (qp.h).
class QpExtension {
 public:
  static constexpr ExtensionId kId{0x75726E6963515045ull, 0x0000000000000001ull};  // "urnicQPE"
  static constexpr Version kVersion{1, 0};

  // SEND with immediate data: the receiver's completion has kResultHasImmediate in flags and
  // `immediate` (host order) in type_specific_completion_output (get_results_ex). Flags as
  // Qp::send.
  Status send_with_immediate(void* request_context, std::span<const Sge> sgl, uint32_t flags,
                             uint32_t immediate) noexcept;
  // RDMA WRITE with immediate data: writes like Qp::write and consumes one receive at the peer,
  // which completes (bytes_transferred = the write's length) with the immediate as above.
  // Flags as Qp::write (kSendAndSolicitEvent also allowed: it solicits the peer's receive).
  Status write_with_immediate(void* request_context, std::span<const Sge> sgl,
                              uint64_t remote_address, uint32_t remote_token, uint32_t flags,
                              uint32_t immediate) noexcept;
  // Atomic compare-and-swap of the 8-byte aligned 64-bit word at remote_address (the peer's
  // region needs mr_flag::kAllowRemoteAtomic): if it equals `compare` it becomes `swap`. The
  // original value lands in `result` (8 bytes of local-writable memory, host order).
  // Completion type kCompareSwap. Flags: kSilentSuccess, kReadFence, kDefer. kInvalidParameter
  // for a misaligned remote address or a result SGE that is not 8 bytes (or passes 2^64). The
  // result SGE itself needs no alignment: the value is copied into it like READ data.
  Status compare_swap(void* request_context, const Sge& result, uint64_t remote_address,
                      uint32_t remote_token, uint64_t compare, uint64_t swap,
                      uint32_t flags) noexcept;
  // Atomic fetch-and-add of `add` to the word; the original value lands in `result`.
  // Completion type kFetchAdd. As compare_swap otherwise.
  Status fetch_add(void* request_context, const Sge& result, uint64_t remote_address,
                   uint32_t remote_token, uint64_t add, uint32_t flags) noexcept;
  // Datagram (UD) QPs only (datagram.h): one SEND datagram of the SGEs' bytes to QP
  // `remote_qpn` at `destination`, with Q_Key `remote_qkey` (high-order bit set: the QP's own
  // Q_Key instead, IBTA §10.2.5), and `immediate` if not null. The handle must stay valid until
  // the request completes; the send completes once the frame is handed to the port (nothing
  // acknowledges a datagram). Flags: kSilentSuccess, kSendAndSolicitEvent, kInline, kDefer.
  // Statuses as Qp::send, and: kInvalidDeviceRequest on an RC QP; kBufferOverflow above
  // max_datagram_size() bytes; kInvalidParameter for a handle of another adapter or a QPN that
  // does not fit 24 bits.
  Status send_datagram(void* request_context, std::span<const Sge> sgl, uint32_t flags,
                       const AddressHandle& destination, uint32_t remote_qpn, uint32_t remote_qkey,
                       const uint32_t* immediate = nullptr) noexcept;
  // The largest datagram payload: the path MTU of the port (1024 .. 4096 bytes); 0 on an RC QP.
  uint32_t max_datagram_size() const noexcept;
  // A snapshot of what the engine counted for this QP (urnic/counters.h). Any thread.
  QpCounters counters() const noexcept;

 private:
  friend struct detail::QpImpl;
  friend struct detail::RemoteQpImpl;
  explicit QpExtension(detail::ObjectImpl* qp) noexcept : qp_(qp) {}
  detail::ObjectImpl* qp_;  // a QpImpl, or a RemoteQpImpl (attach mode)
};

// ---- Manual connect ---------------------------------------------------------------------------

// Where the peer is (the address vector; the local side comes from the adapter). A dst_mac of
// all zeros asks the adapter to resolve it (ARP or IPv6 neighbour discovery, up to 2 s).
struct AddressVector {
  bool ipv6 = false;
  uint32_t dst_ipv4 = 0;  // host order
  std::array<uint8_t, 16> dst_ipv6{};
  std::array<uint8_t, 6> dst_mac{};
  uint8_t traffic_class = 0;
  uint8_t hop_limit = 64;
  uint32_t flow_label = 0;  // IPv6
  // The source GID, an index into the adapter's GID table (AdapterExtension::query_gid), as
  // ibv_global_route.sgid_index; its IP version must be the destination's. -1: the adapter's
  // IPv4 address (ipv6 false) or its IPv6 address (ipv6 true).
  int32_t sgid_index = -1;
};

// ibv_qp_attr, the part RoCE RC uses. Ranges as IBTA: path_mtu 256..4096 (powers of two),
// QPN and PSNs 24 bits, timeout 0..31 (4.096 us * 2^timeout, 0 infinite), retry_cnt and
// rnr_retry 0..7 (rnr_retry 7 infinite), min_rnr_timer 0..31, read limits 1 ..
// max_inbound_read_limit / max_outbound_read_limit.
struct QpAttributes {
  QpState state = QpState::kReset;
  uint32_t access = qp_access::kAll;
  uint32_t path_mtu = 1024;
  uint32_t dest_qpn = 0;
  uint32_t rq_psn = 0;
  uint32_t sq_psn = 0;
  uint8_t max_dest_rd_atomic = 1;
  uint8_t max_rd_atomic = 1;
  uint8_t timeout = 14;
  uint8_t retry_cnt = 7;
  uint8_t rnr_retry = 7;
  uint8_t min_rnr_timer = 12;
  AddressVector av;
  // With qp_attr_mask::kCongestion (up to RTR): this QP's congestion control instead of the
  // adapter's AdapterConfig::congestion (the same ranges; max_rate_mbps 0: the adapter's
  // maximum). query() returns the settings in force.
  CongestionConfig congestion{};
  // With qp_attr_mask::kSelectiveRepeat (up to RTR): selective repeat instead of go-back-N
  // (docs/design.md "Selective repeat"). A urnic extension to the wire protocol: set it on both
  // QPs of a connection, never towards another RNIC. A Connector and a Listener negotiate it
  // themselves (ConnectorConfig / AdapterConfig::selective_repeat); query() says what is in force.
  bool selective_repeat = false;
  // Datagram QPs (datagram.h), with qp_attr_mask::kQkey: the Q_Key the QP accepts.
  uint32_t qkey = 0;
};

class QpConnectExtension {
 public:
  static constexpr ExtensionId kId{0x75726E6963515043ull, 0x0000000000000001ull};  // "urnicQPC"
  static constexpr Version kVersion{1, 0};

  // The QP number the peer sends to. Any thread.
  uint32_t qpn() const noexcept;
  // The state as last applied by the engine. Any thread.
  QpState state() const noexcept;
  // ibv_modify_qp: applies the attributes in `mask` on the engine. The RC transition table of
  // IBTA §10.3.1 decides what is required and allowed (RESET->INIT: access; INIT->RTR: av,
  // path_mtu, dest_qpn, rq_psn, max_dest_rd_atomic, min_rnr_timer; RTR->RTS: sq_psn, timeout,
  // retry_cnt, rnr_retry, max_rd_atomic; any state -> RESET or ERR). A new QP is already in
  // INIT, so INIT->INIT (access only) is how to start; RESET goes back to the start.
  // kInvalidParameter (missing, forbidden or out-of-range attribute, inline) or kPending, then
  // the completion with kSuccess, kInvalidDeviceState (illegal transition), kInvalidParameter,
  // or kHostUnreachable (the peer's MAC could not be resolved). With a null completion, the
  // final status. kInvalidDeviceState, inline, for a QP being closed, or for a null completion
  // inside a callback; kInsufficientResources, inline, when the buffers selective repeat needs
  // (about 7 KiB) cannot be allocated. Any thread; modifies of one QP are applied in call order.
  Status modify(const QpAttributes& attributes, uint32_t mask, RequestCompletion completion,
                void* request_context) noexcept;
  // ibv_query_qp: the state and the attributes the last modify applied (a Connector's
  // included: path_mtu, dest_qpn, the read limits, the peer's address). The PSNs are those the
  // modifies set, not the current ones; av.dst_mac is the resolved one. kInvalidParameter for a
  // null `out`. Any thread, not concurrently with a modify of the QP or its connection.
  Status query(QpAttributes* out) const noexcept;

 private:
  friend struct detail::QpImpl;
  friend struct detail::RemoteQpImpl;
  explicit QpConnectExtension(detail::ObjectImpl* qp) noexcept : qp_(qp) {}
  detail::ObjectImpl* qp_;  // a QpImpl, or a RemoteQpImpl (attach mode)
};

// ---- CQ ---------------------------------------------------------------------------------------

class CqExtension {
 public:
  static constexpr ExtensionId kId{0x75726E6963435145ull, 0x0000000000000001ull};  // "urnicCQE"
  static constexpr Version kVersion{1, 1};

  // Cancels the pending arm, if any: its notification callback is then called once with
  // kCancelled (from the control thread) instead of firing later. Returns true if an arm was
  // cancelled; false if none was pending (an arm that fired at the same moment delivers its
  // kSuccess callback as usual: still exactly one callback per arm). Serialised with Cq::arm
  // and get_results by the consumer.
  bool cancel_notification() noexcept;
  // An eventfd that becomes readable once per notification of this CQ (whatever its status),
  // for a consumer that blocks in poll/epoll instead of (or besides) the callback: arm, wait for
  // POLLIN, read its 8 bytes to reset it (they count the notifications since the last read),
  // get_results. A kSuccess notification makes it readable as soon as the arm is satisfied,
  // with the completion already in the CQ: the engine that wrote the completion writes it (or
  // arm() does, if a completion was there already), without waiting for the control thread;
  // the callback still follows, once per arm, on the control thread. Under interrupt moderation
  // it becomes readable when the moderation lets the notification go; kCancelled and
  // kBufferOverflow make it readable from the control thread, with their callback. A closing
  // CQ notifies no more (an arm firing as the close begins may still make it readable).
  // Non-blocking and close-on-exec; created on the first call, owned by the CQ and closed with
  // it. -1 (errno set) if it cannot be created. Any thread.
  int notification_fd() noexcept;
  // The index of the adapter's engine this CQ lives on (Adapter::create_cq's affinity; 0 with
  // one engine): the engine every QP completing into it runs on. Since version 1.1. Any thread.
  uint32_t engine() const noexcept;

 private:
  friend struct detail::CqImpl;
  friend struct detail::RemoteCqImpl;
  explicit CqExtension(detail::ObjectImpl* cq) noexcept : cq_(cq) {}
  detail::ObjectImpl* cq_;  // a CqImpl, or a RemoteCqImpl (attach mode)
};

// ---- Adapter ----------------------------------------------------------------------------------

struct LocalAddress {
  std::array<uint8_t, 6> mac{};
  uint32_t ipv4 = 0;  // host order; 0: none
  bool has_ipv6 = false;
  std::array<uint8_t, 16> ipv6{};
};

class AdapterExtension {
 public:
  static constexpr ExtensionId kId{0x75726E6963414445ull, 0x0000000000000001ull};  // "urnicADE"
  static constexpr Version kVersion{1, 0};

  // The adapter's MAC and IP addresses (its GIDs are these IPs). Any thread.
  LocalAddress local_address() const noexcept;
  // The adapter's id on DPDK's telemetry socket: its counters are /urnic/adapter,<id>, its QPs'
  // /urnic/qp,<id>,<qpn> (docs/api.md "Telemetry"; RuntimeConfig::telemetry). Any thread.
  uint64_t telemetry_id() const noexcept;
  // The GID table (ibv_query_gid; a RoCEv2 GID is an IPv6 address, IPv4 ones IPv4-mapped):
  // index 0 the link-local fe80::/64 address made from the MAC (EUI-64), then the IPv4 address
  // if the adapter has one, then its IPv6 address if it has one. query_gid: kSuccess with *gid
  // set; kInvalidParameter for index >= gid_count() or a null gid. Any thread.
  uint32_t gid_count() const noexcept;
  Status query_gid(uint32_t index, std::array<uint8_t, 16>* gid) const noexcept;
  // Replaces the fault injectors on the adapter's RoCEv2 frames (urnic/counters.h), applied by
  // the engine between two bursts; an inactive config removes that direction's injector. The
  // replaced injectors' counters (Adapter::query_counters) are gone with them, and frames they
  // held back for reordering are dropped. kNotSupported in builds without URNIC_TESTING when a
  // config is active. kInvalidDeviceState inside a callback while the engine is not launched.
  // Control side: not concurrently with another set_faults of the adapter.
  Status set_faults(const FaultConfig& tx, const FaultConfig& rx) noexcept;

 private:
  friend struct detail::AdapterImpl;
  explicit AdapterExtension(detail::AdapterImpl* a) noexcept : a_(a) {}
  detail::AdapterImpl* a_;
};

}  // namespace urnic

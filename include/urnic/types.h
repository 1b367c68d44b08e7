// Public value types of the urnic API, modelled on NDKPI (ndkpi.h; ndkpi.md §2-§4): scatter/
// gather entries, operation flags, memory-region flags, operation types and completion records.
// Names and numeric values follow NDK so that NDK documentation applies as written.
#pragma once

#include <cstddef>
#include <cstdint>

#include "urnic/status.h"

namespace urnic {

// NDK_SGE: a local buffer in a registered region. `addr` is a virtual address of this process
// inside the region named by `token` (the region's local token). For INLINE posts the token is
// ignored. Same layout as NDK_SGE on x64.
struct Sge {
  uint64_t addr = 0;
  uint32_t length = 0;
  uint32_t token = 0;
};
static_assert(sizeof(Sge) == 16);

// NDK_OP_FLAG_* (exact values from ndkpi.h; ndkpi.md §2.1).
namespace op_flag {
inline constexpr uint32_t kSilentSuccess = 0x00000001;
inline constexpr uint32_t kReadFence = 0x00000002;
inline constexpr uint32_t kSendAndSolicitEvent = 0x00000004;
inline constexpr uint32_t kAllowRemoteRead = 0x00000008;
inline constexpr uint32_t kAllowLocalWrite = 0x00000010;
inline constexpr uint32_t kAllowRemoteWrite = 0x00000030;  // includes kAllowLocalWrite
inline constexpr uint32_t kInline = 0x00000040;
inline constexpr uint32_t kRdmaReadSink = 0x00000080;
inline constexpr uint32_t kRdmaReadLocalInvalidate = 0x00000100;
inline constexpr uint32_t kDefer = 0x00000200;
// urnic extension (outside NDK's bits): remote atomics allowed on a fast-registered region.
inline constexpr uint32_t kAllowRemoteAtomic = 0x00010000;
}  // namespace op_flag

// NDK_MR_FLAG_* (ndkpi.md §4.1).
namespace mr_flag {
inline constexpr uint32_t kAllowLocalRead = 0x00000000;
inline constexpr uint32_t kAllowLocalWrite = 0x00000001;
inline constexpr uint32_t kAllowRemoteRead = 0x00000002;
inline constexpr uint32_t kAllowRemoteWrite = 0x00000005;  // includes kAllowLocalWrite
inline constexpr uint32_t kRdmaReadSink = 0x00000008;
// urnic extension: remote atomics (IB's IBV_ACCESS_REMOTE_ATOMIC); NDK has no atomics.
inline constexpr uint32_t kAllowRemoteAtomic = 0x00000100;
}  // namespace mr_flag

// NDK_OPERATION_TYPE (values from ndkpi.h; ndkpi.md §3.2), plus the urnic extension types for
// the operations NDK lacks, outside NDK's bits so that `type & kReceive` stays a receive test.
enum class OperationType : uint32_t {
  kReceive = 1,
  kReceiveAndInvalidate = 0x8001,
  kSend = 2,
  kFastRegister = 4,
  kBind = 8,
  kInvalidate = 16,
  kRead = 32,
  kWrite = 64,
  // Extensions (QueryExtension interface): atomics.
  kCompareSwap = 0x10000,
  kFetchAdd = 0x20000,
};

// NDK_CQ_NOTIFY_* for ArmCq.
enum class CqNotify : uint32_t { kErrors = 0, kAny = 1, kSolicited = 2 };

// The verbs-equivalent completion status (enum ibv_wc_status values), carried in
// ResultEx::provider_error_code next to the NTSTATUS so that RDMA users can map failures exactly
// (house style rule 19b).
enum class WcStatus : uint32_t {
  kSuccess = 0,
  kLocLenErr = 1,
  kLocQpOpErr = 2,
  kLocEecOpErr = 3,
  kLocProtErr = 4,
  kWrFlushErr = 5,
  kMwBindErr = 6,
  kBadRespErr = 7,
  kLocAccessErr = 8,
  kRemInvReqErr = 9,
  kRemAccessErr = 10,
  kRemOpErr = 11,
  kRetryExcErr = 12,
  kRnrRetryExcErr = 13,
  kLocRddViolErr = 14,
  kRemInvRdReqErr = 15,
  kRemAbortErr = 16,
  kInvEecnErr = 17,
  kInvEecStateErr = 18,
  kFatalErr = 19,
  kRespTimeoutErr = 20,
  kGeneralErr = 21,
};
// The verbs name without its IBV_WC_ prefix ("REM_ACCESS_ERR"), for logs and tools.
const char* to_string(WcStatus s) noexcept;
// The text ibv_wc_status_str() gives the same status ("remote access error"), as perftest
// prints it; "unknown" outside the enumeration. One table holds both names (dataplane/qp.cc).
const char* describe(WcStatus s) noexcept;

// NDK_RESULT: one completion. `bytes_transferred` is meaningful only for receives.
struct Result {
  Status status = Status::kSuccess;
  uint32_t bytes_transferred = 0;
  void* qp_context = nullptr;
  void* request_context = nullptr;
};

// NDK_RESULT_EX (2.1 layout) with urnic's extension fields after it.
struct ResultEx {
  Status status = Status::kSuccess;
  uint32_t bytes_transferred = 0;
  void* qp_context = nullptr;
  void* request_context = nullptr;
  OperationType type = OperationType::kReceive;
  uint32_t provider_error_code = 0;  // 0 on success; else the WcStatus value
  // kReceiveAndInvalidate: the invalidated token. Extension: immediate data for receives that
  // carried it (flags has kResultHasImmediate).
  uint64_t type_specific_completion_output = 0;
  uint32_t flags = 0;    // kResultHasImmediate, kResultSolicited, kResultDatagram, ...
  uint32_t qpn = 0;      // local QP number
  uint32_t src_qpn = 0;  // kResultDatagram: the sender's QP number (its DETH, IBTA §9.3.3)
};
inline constexpr uint32_t kResultHasImmediate = 1u << 0;
inline constexpr uint32_t kResultSolicited = 1u << 1;
inline constexpr uint32_t kResultInvalidated = 1u << 2;
// The receive was consumed by an RDMA WRITE with immediate data, not a SEND (ibverbs
// IBV_WC_RECV_RDMA_WITH_IMM); bytes_transferred is the write's length.
inline constexpr uint32_t kResultRdmaWrite = 1u << 3;
// A receive of a datagram (UD) QP: the buffer starts with the 40-byte GRH (datagram.h), then
// the payload; bytes_transferred counts both; src_qpn names the sender's QP.
inline constexpr uint32_t kResultDatagram = 1u << 4;

// NDK_VERSION (ndkinfo.h): an NDKPI version, or an extension interface version.
struct Version {
  uint16_t major = 0;
  uint16_t minor = 0;
};
static_assert(sizeof(Version) == 4);

// NDK_OBJECT_TYPE (values from ndkpi.h; ndkpi.md §1.1).
enum class ObjectType : uint32_t {
  kUndefined = 0,
  kAdapter = 1,
  kQp = 2,
  kCq = 3,
  kMr = 4,
  kMw = 5,
  kPd = 6,
  kSharedEndpoint = 7,
  kConnector = 8,
  kListener = 9,
  kSrq = 10,
};

// NDK_RDMA_TECHNOLOGY (ndkinfo.h).
enum class RdmaTechnology : uint32_t {
  kUndefined = 0,
  kIwarp = 1,
  kInfiniBand = 2,
  kRoce = 3,
  kRocev2 = 4,
};

// NDK_ADAPTER_FLAG_* (exact values from ndkinfo.h; ndkpi.md §6.1).
namespace adapter_flag {
inline constexpr uint32_t kInOrderDmaSupported = 0x00000001;
inline constexpr uint32_t kRdmaReadSinkNotRequired = 0x00000002;
inline constexpr uint32_t kCqInterruptModerationSupported = 0x00000004;
inline constexpr uint32_t kMultiEngineSupported = 0x00000008;
inline constexpr uint32_t kRdmaReadLocalInvalidateSupported = 0x00000010;
inline constexpr uint32_t kCqResizeSupported = 0x00000100;
inline constexpr uint32_t kLoopbackConnectionsSupported = 0x00010000;
}  // namespace adapter_flag

// NDK_ADAPTER_INFO, field for field with the x64 layout of ndkinfo.h (ndkpi.md §6.1). Filled by
// Adapter::query_adapter_info(); every limit in it is enforced (docs/api.md lists where).
struct AdapterInfo {
  Version version;                   // NDKPI version the adapter implements
  uint32_t vendor_id = 0;            // OUI
  uint32_t device_id = 0;            //
  size_t max_registration_size = 0;  // bytes per RegisterMr
  size_t max_window_size = 0;        // bytes per Bind
  uint32_t frmr_page_count = 0;      // pages per InitializeFastRegisterMr (>= 16)
  uint32_t max_initiator_request_sge = 0;
  uint32_t max_receive_request_sge = 0;
  uint32_t max_read_request_sge = 0;     // overrides max_initiator_request_sge for Read
  uint32_t max_transfer_length = 0;      // bytes per send/receive/read/write, all SGEs together
  uint32_t max_inline_data_size = 0;     // bytes per INLINE send/write
  uint32_t max_inbound_read_limit = 0;   // IRD per QP
  uint32_t max_outbound_read_limit = 0;  // ORD per QP
  uint32_t max_receive_queue_depth = 0;
  uint32_t max_initiator_queue_depth = 0;
  uint32_t max_srq_depth = 0;  // 0 would mean: no SRQ
  uint32_t max_cq_depth = 0;
  uint32_t large_request_threshold = 0;  // a hint: above it, read/write beats send/receive
  uint32_t max_caller_data = 0;          // private data bytes on Connect (the CM's)
  uint32_t max_callee_data = 0;          // private data bytes on Accept / Reject (the CM's)
  uint32_t adapter_flags = 0;            // adapter_flag::*
  RdmaTechnology rdma_technology = RdmaTechnology::kUndefined;
};
static_assert(sizeof(AdapterInfo) == 0x68, "NDK_ADAPTER_INFO x64 size");
static_assert(offsetof(AdapterInfo, max_registration_size) == 0x10);
static_assert(offsetof(AdapterInfo, frmr_page_count) == 0x20);
static_assert(offsetof(AdapterInfo, max_transfer_length) == 0x30);
static_assert(offsetof(AdapterInfo, max_receive_queue_depth) == 0x40);
static_assert(offsetof(AdapterInfo, large_request_threshold) == 0x50);
static_assert(offsetof(AdapterInfo, adapter_flags) == 0x5C);
static_assert(offsetof(AdapterInfo, rdma_technology) == 0x60);

// PAGE_SIZE of FastRegister page arrays and logical address mappings (NDK: the host page size).
inline constexpr uint32_t kPageSize = 4096;

// ---- QP states and attributes ------------------------------------------------------------------

// QP states (IBTA §10.3.1; the values of enum ibv_qp_state). The one QP state type: the
// engine's own state machine uses it too.
enum class QpState : uint8_t { kReset = 0, kInit, kRtr, kRts, kSqd, kSqe, kErr };
inline constexpr size_t kQpStateCount = 7;
const char* to_string(QpState s) noexcept;

// Remote rights a QP accepts (ibv_access_flags' remote bits), for QpAttributes::access.
namespace qp_access {
inline constexpr uint32_t kRemoteRead = 1u << 1;
inline constexpr uint32_t kRemoteWrite = 1u << 2;
inline constexpr uint32_t kRemoteAtomic = 1u << 3;
inline constexpr uint32_t kAll = kRemoteRead | kRemoteWrite | kRemoteAtomic;
}  // namespace qp_access

// Which QP attributes a modify carries (the IBV_QP_* masks RoCE RC uses); the engine's modify
// (dp::QpAttr) takes the same masks.
namespace qp_attr_mask {
inline constexpr uint32_t kState = 1u << 0;
inline constexpr uint32_t kAccessFlags = 1u << 1;
inline constexpr uint32_t kPathMtu = 1u << 2;
inline constexpr uint32_t kDestQpn = 1u << 3;
inline constexpr uint32_t kRqPsn = 1u << 4;
inline constexpr uint32_t kSqPsn = 1u << 5;
inline constexpr uint32_t kMaxDestRdAtomic = 1u << 6;  // IRD
inline constexpr uint32_t kMaxRdAtomic = 1u << 7;      // ORD
inline constexpr uint32_t kTimeout = 1u << 8;
inline constexpr uint32_t kRetryCnt = 1u << 9;
inline constexpr uint32_t kRnrRetry = 1u << 10;
inline constexpr uint32_t kMinRnrTimer = 1u << 11;
inline constexpr uint32_t kAv = 1u << 12;
// urnic extension (QpConnectExtension): QpAttributes::congestion, the QP's own congestion-control
// settings instead of the adapter's; allowed up to RTR (RESET->INIT, INIT->INIT, INIT->RTR), as
// the traffic class of what the QP sends is fixed at RTR.
inline constexpr uint32_t kCongestion = 1u << 13;
// urnic extension: QpAttributes::selective_repeat (dataplane/reorder.h), allowed up to RTR like
// kCongestion. Both QPs of a connection must agree: the CM negotiates it between urnic peers.
inline constexpr uint32_t kSelectiveRepeat = 1u << 14;
// Datagram (UD) QPs only: QpAttributes::qkey, the Q_Key the QP accepts (and sends, for a send
// whose Q_Key has the high-order bit set: IBTA §10.2.5). Required from RESET to INIT.
inline constexpr uint32_t kQkey = 1u << 15;
}  // namespace qp_attr_mask

}  // namespace urnic

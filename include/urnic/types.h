// Public value types of the urnic API, modelled on NDKPI (ndkpi.h; ndkpi.md §2-§4): scatter/
// gather entries, operation flags, memory-region flags, operation types and completion records.
// Names and numeric values follow NDK so that NDK documentation applies as written.
#pragma once

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
  uint32_t flags = 0;  // kResultHasImmediate, kResultSolicited
  uint32_t qpn = 0;    // local QP number
};
inline constexpr uint32_t kResultHasImmediate = 1u << 0;
inline constexpr uint32_t kResultSolicited = 1u << 1;
inline constexpr uint32_t kResultInvalidated = 1u << 2;

}  // namespace urnic

// The embedded posting path's shared pieces (control/ndk_qp.cc, ndk_qp_memory.cc): the flags
// each operation accepts, and how a post fails or reaches the engine.
#pragma once

#include <cstddef>
#include <new>

#include "control/ndk_internal.h"

namespace urnic::detail {

// Flags each operation accepts (ndkpi.md §2.1; the urnic extensions' own).
inline constexpr uint32_t kLocalFlags =
    op_flag::kSilentSuccess | op_flag::kReadFence | op_flag::kDefer;
inline constexpr uint32_t kSendFlags =
    kLocalFlags | op_flag::kSendAndSolicitEvent | op_flag::kInline;
inline constexpr uint32_t kWriteFlags = kLocalFlags | op_flag::kInline;
inline constexpr uint32_t kWriteImmFlags = kWriteFlags | op_flag::kSendAndSolicitEvent;
inline constexpr uint32_t kReadFlags = kLocalFlags | op_flag::kRdmaReadLocalInvalidate;
inline constexpr uint32_t kRemoteRightFlags =
    op_flag::kAllowRemoteRead | op_flag::kAllowRemoteWrite | op_flag::kAllowRemoteAtomic;
// The bits of those that grant remote rights: NDK_OP_FLAG_ALLOW_REMOTE_WRITE (0x30) includes
// NDK_OP_FLAG_ALLOW_LOCAL_WRITE (0x10), which alone is a local right.
inline constexpr uint32_t kRemoteRightBits = kRemoteRightFlags & ~op_flag::kAllowLocalWrite;
inline constexpr uint32_t kFastRegisterFlags =
    kLocalFlags | kRemoteRightFlags | op_flag::kAllowLocalWrite | op_flag::kRdmaReadSink;
inline constexpr uint32_t kBindFlags = kLocalFlags | kRemoteRightFlags;

static_assert(qp_access::kRemoteRead == dp::access::kRemoteRead &&
              qp_access::kRemoteWrite == dp::access::kRemoteWrite &&
              qp_access::kRemoteAtomic == dp::access::kRemoteAtomic);

// A failing post hands every earlier deferred request to the engine first (ndkpi.md §7.3,
// provider duty), and posts nothing.
inline Status fail(QpImpl* q, Status s) noexcept {
  q->qp.publish_deferred();
  return s;
}

// The request has passed the calling post's checks, the only ones it gets (issue 42: once, at
// the API's edge; dp::Qp::validate_send states them in the dataplane's terms).
// NDK: posting to a QP that is not connected is STATUS_CONNECTION_INVALID.
inline Status ndk_post_status(Status s) noexcept {
  return s == Status::kInvalidDeviceState ? Status::kConnectionInvalid : s;
}

inline Status post(QpImpl* q, const dp::SendWqe& w) noexcept {
  // enqueue_send publishes deferred requests itself on failure.
  return ndk_post_status(q->qp.enqueue_send(w));
}

// A send WQE written in place: into the QP's next SQ slot, or (the ring full) into storage of
// the caller's that commit() then reports as kNoMoreEntries after the checks that come first.
// The constructor sets the fixed fields, as a WQE built on the stack had them.
struct StagedWqe {
  explicit StagedWqe(QpImpl* q) noexcept
      : slot(q->qp.send_slot()),
        w(*new (slot != nullptr ? static_cast<void*>(slot) : static_cast<void*>(spare))
              dp::SendWqe) {}
  StagedWqe(const StagedWqe&) = delete;
  StagedWqe& operator=(const StagedWqe&) = delete;

  // Posts it (or fails: state, room), with post()'s status mapping.
  Status commit(QpImpl* q) noexcept { return ndk_post_status(q->qp.enqueue_staged(slot)); }

  dp::SendWqe* slot;
  alignas(dp::SendWqe) std::byte spare[sizeof(dp::SendWqe)];
  dp::SendWqe& w;
};

}  // namespace urnic::detail

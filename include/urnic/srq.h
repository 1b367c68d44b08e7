// NDK_SRQ (ndkpi.md §2.5): a shared receive queue. QPs created with Pd::create_qp_with_srq take
// their receives from it; each receive completes on the receive CQ of the QP that consumed it,
// with that QP's context.
//
// Threading: receive() calls on one SRQ are serialised by the consumer (NDK posting rule); they
// never lock, allocate, block or make a system call. modify() may come from any thread.
// Notifications run on the adapter's control thread.
#pragma once

#include <cstdint>
#include <span>

#include "urnic/object.h"
#include "urnic/status.h"
#include "urnic/types.h"

namespace urnic {

class Srq final : public detail::ObjectOf<detail::SrqImpl> {
 public:
  // NdkSrqReceive: posts one receive. The SGE memory is written when a send arrives, until the
  // receive completes. kSuccess; kDataOverrun for more SGEs than the SRQ's
  // max_receive_request_sge; kNoMoreEntries when `depth` receives are outstanding;
  // kBufferOverflow when the SGEs total more than max_transfer_length; kInvalidParameter for a
  // null SGE array with a non-zero count or an SGE passing 2^64; kInvalidDeviceState once
  // close() was requested (the close pends while QPs use the SRQ).
  Status receive(void* request_context, std::span<const Sge> sgl) noexcept;

  // NdkModifySrq: `depth` 0 keeps the depth, else 1 .. max_srq_depth and not below the receives
  // outstanding (kInvalidParameter otherwise); `notify_threshold` 0 keeps the threshold and its
  // arming, else arms the limit notification with it, firing at once if the fill level (posted,
  // not yet consumed) is already below. After firing, the notification stays disarmed until a
  // modify arms it again. kSuccess (applied now; a larger depth takes effect for the poster at
  // its next receive); kInvalidDeviceState once close() was requested. Never pends.
  Status modify(uint32_t depth, uint32_t notify_threshold, RequestCompletion completion,
                void* request_context) noexcept;

 private:
  using ObjectOf::ObjectOf;  // made by the provider only (object.h)
};

}  // namespace urnic

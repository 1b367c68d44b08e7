// NDK_CQ (ndkpi.md §3): a completion queue. QPs write their completions into it; the consumer
// takes them with get_results / get_results_ex (bursts) and asks for a notification with arm().
//
// Threading (NDK completion rules, ndkpi.md §7.2): get_results, get_results_ex and arm on one
// CQ are serialised by the consumer (one at a time, any thread); they never lock, allocate, block
// or make a system call. Notification callbacks run on the adapter's control thread, at most one
// per arm, one at a time per CQ.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "urnic/object.h"
#include "urnic/status.h"
#include "urnic/types.h"

namespace urnic {

class Cq final : public detail::ObjectOf<detail::CqImpl> {
 public:
  // NdkGetCqResults: moves up to results.size() completions, oldest first, into `results`;
  // returns how many (0: none). Completions of one QP's send queue, and of one QP's receive
  // queue, come in posting order. 0, taking nothing, for a null array (with a non-zero size)
  // and for a CQ whose close was requested (the consumer has given it up).
  size_t get_results(std::span<Result> results) noexcept;
  // NdkGetCqResultsEx: the same with NDK_RESULT_EX records (operation type, the verbs status in
  // provider_error_code, immediate data / invalidated token, urnic flags).
  size_t get_results_ex(std::span<ResultEx> results) noexcept;

  // NdkArmCq: requests one notification callback when a completion of the kind arrives:
  // kAny (any completion), kSolicited (a receive of a send with SEND_AND_SOLICIT_EVENT, or any
  // error), kErrors (any error completion). Re-arming before the callback merges (ANY wins,
  // SOLICITED beats ERRORS). If a matching completion arrived since the last notification the
  // arm is satisfied at once. Other values, and any arm of a CQ whose close was requested, are
  // ignored (no notification).
  void arm(CqNotify type) noexcept;

  // NdkResizeCq (kCqResizeSupported): the CQ holds `depth` completions (1 .. max_cq_depth) from
  // when the request completes; nothing queued is lost or reordered (the engine switches to a new
  // ring between two steps, and the consumer takes the old ring's completions first). Serialised
  // with get_results and arm by the consumer. kPending, then the completion with kSuccess; with
  // a null completion, waits and returns the final status (not from a callback). Inline:
  // kInvalidParameter (depth 0, above the maximum, or below the completions waiting in the
  // CQ); kDeviceBusy (the previous resize's old ring still holds completions the consumer has
  // not taken: take them, then retry); kInvalidDeviceState (an overrun CQ, close() requested,
  // or a null completion inside a callback); kInsufficientResources (no memory for the ring).
  Status resize(uint32_t depth, RequestCompletion completion, void* request_context) noexcept;

  // NdkControlCqInterruptModeration: delay notifications by at most `interval_us` microseconds
  // after an arm is satisfied, or until `count` completions accumulated, whichever comes first.
  // interval 0, or count 0 or 1: moderation off; interval 0xFFFFFFFF: count only; count
  // 0xFFFFFFFF or above the depth: interval only. kInvalidParameterMix when both say "the
  // other only"; kInvalidDeviceState once close() was requested. kSuccess otherwise; applied by
  // the control thread from its next notification.
  Status control_interrupt_moderation(uint32_t interval_us, uint32_t count) noexcept;

 private:
  using ObjectOf::ObjectOf;  // made by the provider only (object.h)
};

}  // namespace urnic

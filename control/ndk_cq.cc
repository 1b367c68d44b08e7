// Completion queues of the public API: polling (straight from the dataplane ring), arming,
// interrupt moderation settings and the cancel extension. Notifications are delivered by the
// control thread (AdapterImpl::collect_notifications_locked).
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>

#include "control/ndk_internal.h"
#include "control/ndk_remote.h"

namespace urnic {
namespace detail {

void* CqImpl::extension(const ExtensionId& id, Version v) noexcept {
  if (id == CqExtension::kId && version_ok(v, CqExtension::kVersion)) return &ext_;
  return nullptr;
}

Status CqImpl::teardown_locked() {
  // No QP completes into it any more (they were its successors); no callback can follow once it
  // leaves the notification list.
  std::erase(adapter->cqs, this);
  if (engine < adapter->placed.size()) --adapter->placed[engine];
  return Status::kSuccess;
}

}  // namespace detail

// A closing CQ (its close pends until its QPs are closed) returns nothing and ignores arms: the
// consumer gave it up (ndkpi.md §1.4), and its notifications have stopped. A null result array
// with a non-zero size cannot be written: nothing is taken from the ring.
size_t Cq::get_results(std::span<Result> results) noexcept {
  if (impl_->remote) [[unlikely]]
    return detail::is_closing(impl_) ? 0 : detail::remote_poll(impl_, results);
  if (results.data() == nullptr || detail::is_closing(impl())) return 0;
  return impl()->cq.poll(results);
}

size_t Cq::get_results_ex(std::span<ResultEx> results) noexcept {
  if (impl_->remote) [[unlikely]]
    return detail::is_closing(impl_) ? 0 : detail::remote_poll(impl_, results);
  if (results.data() == nullptr || detail::is_closing(impl())) return 0;
  return impl()->cq.poll(results);
}

void Cq::arm(CqNotify type) noexcept {
  if (impl_->remote) return detail::remote_arm(impl_, type);
  if (detail::is_closing(impl())) return;
  switch (type) {
    case CqNotify::kErrors:
      impl()->cq.arm(dp::Cq::kArmErrors);
      break;
    case CqNotify::kAny:
      impl()->cq.arm(dp::Cq::kArmAny);
      break;
    case CqNotify::kSolicited:
      impl()->cq.arm(dp::Cq::kArmSolicited);
      break;
    default:
      break;  // NdkArmCq is VOID: an unknown type is ignored
  }
}

Status Cq::resize(uint32_t depth, RequestCompletion completion, void* request_context) noexcept {
  if (impl_->remote) {
    if (detail::is_closing(impl_)) return Status::kInvalidDeviceState;
    return detail::remote_resize_cq(impl_, depth, completion, request_context);
  }
  detail::CqImpl* c = impl();
  detail::AdapterImpl* a = c->adapter;
  if (detail::is_closing(c)) return Status::kInvalidDeviceState;
  if (depth == 0 || depth > a->info.max_cq_depth) return Status::kInvalidParameter;
  // A dead (overrun) CQ stays dead (ndkpi.md §3.3); a ring smaller than what waits in the CQ
  // would hold fewer than the consumer has yet to take (verbs: EINVAL).
  if (c->cq.overrun()) return Status::kInvalidDeviceState;
  if (depth < c->cq.queued()) return Status::kInvalidParameter;
  if (completion == nullptr && a->on_control_thread()) return Status::kInvalidDeviceState;
  return detail::guarded([&] {
    // A previous resize still switching, or its old ring not yet drained by the consumer.
    if (!c->cq.prepare_resize(depth)) return Status::kDeviceBusy;
    detail::SyncWait sync;
    const RequestCompletion done =
        completion != nullptr ? completion : &detail::SyncWait::on_request;
    void* const done_ctx = completion != nullptr ? request_context : &sync;
    auto op = std::make_unique<detail::EngineOp>();
    op->msg.kind = dp::MailboxMsg::Kind::kResizeCq;
    op->engine = c->engine;
    op->msg.ep = &a->ctl->endpoint(c->engine);
    op->msg.cq = &c->cq;
    op->then = [a, c, depth, done, done_ctx](Status st) {
      if (st == Status::kSuccess) c->depth.store(depth, std::memory_order_relaxed);
      a->defer_locked([done, done_ctx, st] { done(done_ctx, st); });
    };
    {
      std::lock_guard lk(a->mu);
      if (c->life != detail::Life::kLive) return Status::kInvalidDeviceState;
      a->enqueue_op_locked(std::move(op));
    }
    if (completion != nullptr) return Status::kPending;
    a->wait(sync.done);
    return sync.status;
  });
}

Status Cq::control_interrupt_moderation(uint32_t interval_us, uint32_t count) noexcept {
  if (detail::is_closing(impl_)) return Status::kInvalidDeviceState;
  if (impl_->remote) return detail::remote_moderate_cq(impl_, interval_us, count);
  constexpr uint32_t kMax = UINT32_MAX;  // MAXULONG
  const bool count_off =
      count == kMax || count > impl()->depth.load(std::memory_order_relaxed);  // interval only
  // ndkpi.md §3.4: "count only" with "interval only" is a contradiction.
  if (interval_us == kMax && count_off) return Status::kInvalidParameterMix;
  std::lock_guard lk(impl()->adapter->mu);
  impl()->mod_interval_us = interval_us;
  impl()->mod_count = count_off ? kMax : count;
  impl()->publish_wake_fd_locked();  // a moderated fd is written when the moderation lets go
  return Status::kSuccess;
}

// Attach mode's CQs (control/ndk_remote.cc) have their own; cq_ is a CqImpl below that test.
uint32_t CqExtension::engine() const noexcept {
  if (cq_->remote) return 0;  // the daemon places it; one engine's worth of QPs either way
  return static_cast<detail::CqImpl*>(cq_)->engine;
}

namespace detail {
int lazy_eventfd(std::atomic<int>* slot, bool* made) noexcept {
  *made = false;
  int fd = slot->load(std::memory_order_acquire);
  if (fd >= 0) return fd;
  const int mine = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (mine < 0) return -1;
  if (!slot->compare_exchange_strong(fd, mine, std::memory_order_acq_rel)) {
    ::close(mine);  // the other first call's won
    return fd;
  }
  *made = true;
  return mine;
}
}  // namespace detail

int CqExtension::notification_fd() noexcept {
  if (cq_->remote) return detail::remote_notification_fd(cq_);
  auto* const cq = static_cast<detail::CqImpl*>(cq_);
  bool made = false;
  const int fd = detail::lazy_eventfd(&cq->event_fd, &made);
  if (made) {
    // From here on the arm's firer writes it (an arm already pending that fires before this is
    // published is written by the control thread instead: either way once).
    std::lock_guard lk(cq->adapter->mu);
    cq->publish_wake_fd_locked();
  }
  return fd;
}

bool CqExtension::cancel_notification() noexcept {
  // A closing CQ delivers no notification, hence has none to cancel.
  if (detail::is_closing(cq_)) return false;
  if (cq_->remote) return detail::remote_cancel_notification(cq_);
  auto* const cq = static_cast<detail::CqImpl*>(cq_);
  if (cq->cq.disarm() == dp::Cq::kArmNone) return false;
  // Release: the control thread that sees the doorbell (acquire) sees the flag.
  cq->cancelled_.store(true, std::memory_order_release);
  cq->adapter->doorbell.store(1, std::memory_order_release);
  return true;
}

}  // namespace urnic

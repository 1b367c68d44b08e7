#include "bench/perf/events.h"

namespace urnic::perf {

void EventWaiter::on_notify(void* self, Status cq_status) noexcept {
  (void)cq_status;  // an overrun or cancel wakes the runners too: their next poll sees why
  auto* w = static_cast<EventWaiter*>(self);
  {
    // Under the mutex, so that a waiter between its check of the count and its sleep cannot
    // miss this notification.
    std::lock_guard<std::mutex> lock(w->m_);
    w->count_.fetch_add(1, std::memory_order_release);
  }
  w->cv_.notify_one();
}

void EventWaiter::wait(uint64_t seen, std::chrono::milliseconds max_wait) {
  std::unique_lock<std::mutex> lock(m_);
  if (count_.load(std::memory_order_acquire) != seen) return;
  ++sleeps_;
  cv_.wait_for(lock, max_wait, [&] { return count_.load(std::memory_order_acquire) != seen; });
}

}  // namespace urnic::perf

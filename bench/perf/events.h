// -e (perftest's --events): the application thread sleeps until a CQ notification instead of
// polling. Every CQ of the process is created with EventWaiter::on_notify as its notification
// callback (Adapter::create_cq); a runner whose poll finds nothing arms that CQ (Cq::arm,
// NdkArmCq) and run_all() blocks once every runner still running has armed one.
//
// No lost wake-up: run_all() reads count() before it steps the runners, and wait() returns at
// once when a notification came after that read. An arm made after the last completion was
// taken is satisfied at once (cq.h: "if a matching completion arrived since the last
// notification"), so a completion that lands between the empty poll and the arm still fires it.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>

#include "urnic/status.h"

namespace urnic::perf {

class EventWaiter {
 public:
  // The CQ notification callback: runs on the adapter's control thread.
  static void on_notify(void* self, Status cq_status) noexcept;

  // Notifications so far (acquire: pairs with the release in on_notify, so the completions that
  // satisfied an arm are visible to the poll that follows a wake-up).
  uint64_t count() const noexcept { return count_.load(std::memory_order_acquire); }
  // Sleeps until a notification after `seen`, or `max_wait` (the caller's own checks: the peer's
  // TCP connection, the stall watchdog). Application thread only.
  void wait(uint64_t seen, std::chrono::milliseconds max_wait);

  // What -e cost: times the thread went to sleep, and notifications delivered.
  uint64_t sleeps() const noexcept { return sleeps_; }
  uint64_t notifications() const noexcept { return count(); }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  std::atomic<uint64_t> count_{0};
  uint64_t sleeps_ = 0;  // application thread only
};

}  // namespace urnic::perf

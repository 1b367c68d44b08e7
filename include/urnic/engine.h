// A dataplane engine (architecture.md §1-§2): the software "hardware" of the RNIC. One engine
// polls the port queues of the adapters attached to it and runs their QPs' requesters,
// responders and completers. It either runs on its own DPDK lcore (launch()) or is driven by an
// application thread calling run_once() (tests, benchmarks, single-threaded programs).
//
// Threading: construct, launch and stop from one control-side thread. run_once() only from one
// thread at a time (any thread with shared_drive) and only while the engine is not launched.
// Adapters may be opened on it and closed whether it runs or not; it must outlive every adapter
// attached to it.
#pragma once

#include <cstdint>
#include <memory>

namespace urnic {

struct EngineConfig {
  uint32_t rx_burst = 32;   // frames per RX burst
  uint32_t max_qps = 1024;  // QPs this engine may own, over all its adapters
  // When > 0, the launched loop yields the CPU after this many consecutive idle steps: for
  // machines where the engine shares cores with application threads (tests, CI). 0: pure
  // polling (a dedicated core).
  uint32_t idle_yield_after = 0;
  // When > 0, the launched loop sleeps between steps once it has found nothing to do for
  // kIdleSleepAfterUs in a row, until a step finds work: 16 us, doubling per sleep up to this
  // many microseconds (at most 100 000). An idle daemon (urnicd) then costs almost no CPU, and
  // the first frame or post after a quiet spell waits up to this long. 0: never sleeps.
  uint32_t idle_sleep_us = 0;
  static constexpr uint32_t kIdleSleepAfterUs = 2000;
  // For an engine that is never launched and is driven by whichever thread has time (the verbs
  // layer: application threads polling their CQs, and a progress thread while they do not):
  // run_once() may then be called from several threads at once; a call that finds another
  // thread inside a step returns false at once instead of running one. false: one thread at a
  // time, no lock (the default).
  bool shared_drive = false;
};

class Engine {
 public:
  explicit Engine(const EngineConfig& config = {});
  // Stops the engine if it runs.
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // One loop step (mailbox, RX, timers, TX). Returns whether it did any work. Only while not
  // launched, from the thread that drives the engine (any thread with shared_drive). Returns
  // false without a step while an adapter's control thread applies a request between two
  // steps (a connection manager's QP transition): call it again.
  bool run_once() noexcept;
  // For a driver of run_once() that found nothing to do for a while: sleeps up to `max_us`
  // microseconds, never past the engine's next timer deadline, and without the engine taking
  // the pause for a stall (which would postpone its timers). Returns at once while another
  // thread is inside a step.
  // With `wake_fd` (an eventfd) >= 0 it also ends when that becomes readable (it is drained
  // then: urnicd's doorbell), and returns whether it did.
  bool nap(uint32_t max_us, int wake_fd = -1) noexcept;
  // Runs the loop on DPDK lcore `lcore`, a worker lcore EAL was given (worker_lcores(),
  // urnic/runtime.h). False if the lcore is not available or the engine runs already.
  bool launch(unsigned lcore) noexcept;
  // Stops the loop and waits for the lcore to return. Idempotent.
  void stop() noexcept;
  bool running() const noexcept;

  struct Impl;
  Impl& impl() noexcept { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace urnic

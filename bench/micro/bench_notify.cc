// Send-to-wakeup latency of CQ notifications (issue 16 item 3): a thread that arms its CQ and
// blocks on the CQ's eventfd (CqExtension::notification_fd), in poll() or in epoll_wait(), until
// a SEND from the other adapter of a loopback pair lands in it. Each sample runs from just before
// the SEND is posted to just after the wait returns; the engine runs on its own lcore, the
// adapters' control threads wherever the scheduler puts them.
//
// Issue 16 item 3 sets a median of 10 us as the target, both back to back and after idleness: a
// wake-up that went through the adapter's control thread, which naps when idle (50 us, doubling
// up to 1 ms), would miss it after idleness. Two patterns per wait: back to back, and with 2 ms
// of idleness before each SEND (a control thread has gone to its longest nap by then). Every
// wake-up must find the SEND's completion in the CQ; one that does not fails the run.
//
// Where the waiting thread sleeps matters as much as who wakes it: woken from another CPU, an
// idle CPU needs an inter-processor interrupt, and under a hypervisor a halted vCPU's wake-up
// alone can cost 10-20 us. --consumer-cpu=N pins the waiting thread (after set-up: the control
// threads stay where EAL's main lcore put them) to CPU N, e.g. the engine's, which then yields
// to it (--idle-yield; at once after it wrote a CQ's eventfd) instead of interrupting another CPU.
//
// The last two lines measure the floor in the same run: a bare eventfd written from the engine's
// CPU while the waiting thread blocks in poll(), no urnic code involved; written at once, and
// 20 us after the sample starts (the waiter asleep, its CPU idle, as when a SEND wakes it).

// Run: build/bench/bench_notify [samples per setting, default 2000] [--idle-yield=N]
//                               [--consumer-cpu=N]
//   --idle-yield=N: the engine yields the CPU after N idle steps (EngineConfig::idle_yield_after;
//   default 256, as the tests on 2-core machines); 0 polls without yielding (a dedicated core).
//   --consumer-cpu=N: the waiting thread runs on CPU N (default: the main lcore's, CPU 0).
#include <poll.h>
#include <pthread.h>
#include <rte_cycles.h>
#include <rte_lcore.h>
#include <rte_pause.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "ring_adapters.h"
#include "urnic/urnic.h"

namespace urnic {
namespace {

struct Stats {
  double p50 = 0, p90 = 0, p99 = 0, max = 0;
};

Stats stats_of(std::vector<double> us) {
  std::sort(us.begin(), us.end());
  auto at = [&](double q) {
    return us[static_cast<size_t>(q * static_cast<double>(us.size() - 1))];
  };
  return {at(0.5), at(0.9), at(0.99), us.back()};
}

enum class Wait { kPoll, kEpoll };

// Blocks until `fd` is readable, through poll() or an epoll set `ep` holding it; false after
// 10 s. Generous: on a 2-core machine saturated by other jobs a sample may stall for a second
// (the engine's lcore thread waits for the CPU), and is then measured, not dropped.
bool wait_readable(Wait how, int fd, int ep) {
  constexpr int kTimeoutMs = 10000;
  if (how == Wait::kPoll) {
    pollfd p{fd, POLLIN, 0};
    return ::poll(&p, 1, kTimeoutMs) == 1;
  }
  epoll_event ev{};
  return ::epoll_wait(ep, &ev, 1, kTimeoutMs) == 1;
}

// The loopback pair a setting measures on: SENDs from qa land in cqb.
struct Pair {
  Engine engine;
  std::unique_ptr<Adapter> a, b;
  Handle<Pd> pda, pdb;
  Handle<Cq> cqa, cqb;
  Handle<Qp> qa, qb;

  explicit Pair(const EngineConfig& ec) : engine(ec) {}
  ~Pair() {
    qa.reset();
    qb.reset();
    cqa.reset();
    cqb.reset();
    pda.reset();
    pdb.reset();
    a.reset();
    b.reset();
    engine.stop();
  }
  bool open(int instance) {
    bool ok = open_ring_adapters("ntf" + std::to_string(instance), 8191, engine, &a, &b) &&
              a->create_pd(nullptr, nullptr, &pda) == Status::kSuccess &&
              b->create_pd(nullptr, nullptr, &pdb) == Status::kSuccess &&
              a->create_cq(256, nullptr, nullptr, nullptr, nullptr, &cqa) == Status::kSuccess &&
              b->create_cq(256, nullptr, nullptr, nullptr, nullptr, &cqb) == Status::kSuccess &&
              !worker_lcores().empty() && engine.launch(worker_lcores().front()) &&
              pda->create_qp(*cqa, *cqa, nullptr, 64, 64, 1, 1, 64, nullptr, nullptr, &qa) ==
                  Status::kSuccess &&
              pdb->create_qp(*cqb, *cqb, nullptr, 64, 64, 1, 1, 64, nullptr, nullptr, &qb) ==
                  Status::kSuccess;
    return ok && connect_ring_qp(*qa, *qb, *b, 1, 2) && connect_ring_qp(*qb, *qa, *a, 2, 1);
  }
};

// Runs the calling thread on CPU `cpu` (if >= 0) while it exists, then where it ran before.
class PinnedTo {
 public:
  explicit PinnedTo(int cpu) {
    if (cpu < 0 || pthread_getaffinity_np(pthread_self(), sizeof(saved_), &saved_) != 0) return;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    pinned_ = pthread_setaffinity_np(pthread_self(), sizeof(one), &one) == 0;
    if (!pinned_) std::fprintf(stderr, "bench_notify: cannot run on CPU %d\n", cpu);
  }
  ~PinnedTo() {
    if (pinned_) (void)pthread_setaffinity_np(pthread_self(), sizeof(saved_), &saved_);
  }
  PinnedTo(const PinnedTo&) = delete;
  PinnedTo& operator=(const PinnedTo&) = delete;

 private:
  cpu_set_t saved_{};
  bool pinned_ = false;
};

struct Setting {
  int gap_us = 0;  // idleness before each SEND
  Wait how = Wait::kPoll;
  int consumer_cpu = -1;  // -1: where the main lcore runs
};

// One setting: a fresh engine and adapter pair; `n` samples after 100 unmeasured ones. Empty on
// failure (said on stderr).
std::vector<double> measure(int n, int instance, const Setting& set, const EngineConfig& ec) {
  const int gap_us = set.gap_us;
  const Wait how = set.how;
  std::vector<double> out;
  Pair p(ec);
  const int fd = p.open(instance) ? p.cqb->query_extension<CqExtension>()->notification_fd() : -1;
  const int ep = fd >= 0 ? ::epoll_create1(EPOLL_CLOEXEC) : -1;
  epoll_event ev{};
  ev.events = EPOLLIN;  // level-triggered: readable until the read resets the counter
  if (ep < 0 || ::epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
    std::fprintf(stderr, "bench_notify: setup failed\n");
    if (ep >= 0) ::close(ep);
    return out;
  }
  const double tsc_us = static_cast<double>(rte_get_tsc_hz()) / 1e6;
  const PinnedTo pin(set.consumer_cpu);
  for (int i = 0; i < n + 100; ++i) {
    // Zero-length SENDs into zero-length receives: no memory registration, the same path.
    if (p.qb->receive(nullptr, {}) != Status::kSuccess) break;
    // A consumer that was idle a while: the control thread has had time to nap.
    if (gap_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(gap_us));
    p.cqb->arm(CqNotify::kAny);
    const uint64_t t0 = rte_rdtsc();
    if (p.qa->send(nullptr, {}, 0) != Status::kSuccess) break;
    if (!wait_readable(how, fd, ep)) {
      // A completion already there means a lost wake-up; none, a SEND that took this long.
      std::array<Result, 4> late;
      const size_t there = p.cqb->get_results(late);
      std::fprintf(stderr,
                   "bench_notify: sample %d: no notification within 10 s (%zu completion(s) in "
                   "the CQ, %s)\n",
                   i, there, wait_readable(how, fd, ep) ? "fd readable 10 s later" : "fd quiet");
      break;
    }
    const uint64_t t1 = rte_rdtsc();
    uint64_t cnt = 0;
    (void)!::read(fd, &cnt, sizeof(cnt));
    std::array<Result, 4> res;
    // The wake-up promises the completion is there: no spinning for it.
    if (p.cqb->get_results(res) != 1) {
      std::fprintf(stderr, "bench_notify: woken without the completion in the CQ\n");
      break;
    }
    size_t sent = 0;
    while (sent == 0) sent = p.cqa->get_results(res);
    if (i >= 100) out.push_back(static_cast<double>(t1 - t0) / tsc_us);
  }
  ::close(ep);
  return out;
}

// The floor under every number above, in the same run: a bare eventfd written by a thread on
// the engine's CPU `writer_cpu` while this thread (where the consumer runs) blocks on it in
// poll(). No urnic code at all: what the kernel and the hypervisor charge for the wake-up.
// The writer waits `delay_us` after the sample is released before it writes: with 0 the write
// usually lands while the waiter is still on its way into poll() (no sleeping CPU to wake), which
// is not what a SEND sees - its completion comes ~1.5 us later, when the waiter has gone to sleep
// and, on another CPU, that CPU has gone idle. Each sample runs from the write to the wake-up.
std::vector<double> raw_eventfd(int n, int writer_cpu, int consumer_cpu, int delay_us) {
  std::vector<double> out;
  const int efd = ::eventfd(0, EFD_CLOEXEC);
  if (efd < 0) return out;
  std::atomic<uint64_t> t0{0};
  std::atomic<int> go{0};  // samples released to the writer
  std::atomic<bool> stop{false};
  const uint64_t delay_cycles = rte_get_tsc_hz() / 1000000 * static_cast<uint64_t>(delay_us);
  std::thread writer([&] {
    const PinnedTo pin(writer_cpu);
    for (int done = 0; !stop.load(std::memory_order_acquire);) {
      if (go.load(std::memory_order_acquire) == done) {
        std::this_thread::yield();  // as the engine's lcore yields when idle
        continue;
      }
      ++done;
      const uint64_t until = rte_rdtsc() + delay_cycles;
      while (rte_rdtsc() < until) rte_pause();
      t0.store(rte_rdtsc(), std::memory_order_release);
      const uint64_t one = 1;
      (void)!::write(efd, &one, sizeof one);
    }
  });
  const PinnedTo pin(consumer_cpu);
  const double tsc_us = static_cast<double>(rte_get_tsc_hz()) / 1e6;
  for (int i = 0; i < n + 100; ++i) {
    go.store(i + 1, std::memory_order_release);
    pollfd p{efd, POLLIN, 0};
    if (::poll(&p, 1, 10000) != 1) break;
    const uint64_t t1 = rte_rdtsc();
    uint64_t cnt = 0;
    (void)!::read(efd, &cnt, sizeof cnt);
    if (i >= 100)
      out.push_back(static_cast<double>(t1 - t0.load(std::memory_order_acquire)) / tsc_us);
  }
  stop.store(true, std::memory_order_release);
  writer.join();
  ::close(efd);
  return out;
}

}  // namespace
}  // namespace urnic

int main(int argc, char** argv) {
  using namespace urnic;
  int n = 2000;
  EngineConfig ec;
  ec.idle_yield_after = 256;
  int consumer_cpu = -1;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--idle-yield=", 13) == 0) {
      ec.idle_yield_after = static_cast<uint32_t>(std::strtoul(argv[i] + 13, nullptr, 10));
    } else if (std::strncmp(argv[i], "--consumer-cpu=", 15) == 0) {
      consumer_cpu = std::atoi(argv[i] + 15);
    } else {
      n = std::atoi(argv[i]);
    }
  }
  if (n < 10 || n > 10000000) {
    std::fprintf(stderr,
                 "usage: bench_notify [samples per setting, 10 .. 10^7] [--idle-yield=N] "
                 "[--consumer-cpu=N]\n");
    return 2;
  }
  if (!bench_runtime_init("bench_notify")) return 1;
  if (worker_lcores().empty()) {
    std::fprintf(stderr, "bench_notify: no worker lcore for the engine\n");
    return 1;
  }
  std::printf("engine on lcore %u, idle_yield_after %u, waiting thread on CPU %d\n",
              worker_lcores().front(), ec.idle_yield_after,
              consumer_cpu < 0 ? sched_getcpu() : consumer_cpu);
  int k = 0;
  for (const Wait how : {Wait::kPoll, Wait::kEpoll}) {
    for (const int gap : {0, 2000}) {
      const std::vector<double> v = measure(n, k++, Setting{gap, how, consumer_cpu}, ec);
      if (v.size() != static_cast<size_t>(n)) return 1;
      const Stats st = stats_of(v);
      std::printf("%-10s %-16s send-to-wakeup us p50 %7.2f p90 %7.2f p99 %7.2f max %8.2f (%d)\n",
                  how == Wait::kPoll ? "poll()" : "epoll_wait",
                  gap == 0 ? "back to back" : "after 2 ms idle", st.p50, st.p90, st.p99, st.max, n);
    }
  }
  // The floor: the same wake-up with nothing of urnic's, writer where the engine runs; written
  // at once, and 20 us later (the waiter asleep, as when a SEND's completion wakes it).
  const int writer_cpu =
      static_cast<int>(rte_lcore_to_cpu_id(static_cast<int>(worker_lcores().front())));
  for (const int delay_us : {0, 20}) {
    const std::vector<double> raw = raw_eventfd(n, writer_cpu, consumer_cpu, delay_us);
    if (raw.size() != static_cast<size_t>(n)) return 1;
    const Stats st = stats_of(raw);
    std::printf("%-10s %-16s write-to-wakeup us p50 %7.2f p90 %7.2f p99 %7.2f max %8.2f (%d)\n",
                "poll()", delay_us == 0 ? "bare eventfd" : "bare, waiter asleep", st.p50, st.p90,
                st.p99, st.max, n);
  }
  return 0;
}

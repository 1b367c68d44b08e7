// SpscRing<T> (dataplane/ring.h) next to DPDK's rte_ring in SP/SC mode, in the style of DPDK
// app/test/test_ring_perf.c: cost per element across burst sizes 8..256, for 8-byte and 64-byte
// (work-request-sized) slots.
//
//   BM_SameThread<Ring,T>/burst   one thread: push_burst(burst) then pop_burst(burst)
//   BM_CrossThread<Ring,T>/burst  producer = benchmark thread on CPU 0, consumer = a std::thread
//                                 on CPU 1 spinning on pop_burst(burst); producer throughput
//   BM_Doorbell<Post,where>/k     k posts of a 64-byte slot per doorbell: kDefer = k stage() then
//                                 one publish(); kEach = k push(), each publishing; kRteEach = k
//                                 rte_ring_sp_enqueue_elem(). `where`: consumer on the same
//                                 thread (drains after each chain) or on CPU 1 (spinning)
//
// Counters: ns/elem = time per element; cyc/elem = the same in TSC cycles (the unit of DPDK's
// test_ring_perf; TSC rate from EAL, else measured). Same-thread cases use CPU time, so a preempted
// benchmark thread does not inflate them; cross-thread cases use wall time (two threads work). For
// median and spread (house style rule 26) run:
//   build/bench/bench_ring --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
//
// rte_ring needs EAL: main() brings it up with --no-huge on lcores 0-1 (urnic::ctl::eal_init).
// EAL pins the benchmark thread to CPU 0; cross-thread consumers are pinned to CPU 1. Without
// EAL the rte_ring cases are skipped; without a second CPU the cross-thread cases are.
#include <benchmark/benchmark.h>
#include <pthread.h>
#include <rte_cycles.h>
#include <rte_pause.h>
#include <rte_ring.h>
#include <rte_ring_elem.h>
#include <sched.h>
#include <time.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <thread>

#include "control/eal.h"
#include "dataplane/ring.h"

namespace urnic::dp {
namespace {

constexpr size_t kRingSize = 4096;
constexpr size_t kMaxBurst = 256;

struct Wqe64 {  // a work-request-sized slot
  uint64_t w[8];
};
static_assert(sizeof(Wqe64) == 64);

bool g_eal_up = false;
double g_tsc_hz = 0;  // TSC cycles per second

bool pin_to_cpu(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0;
}

// TSC rate without EAL: rte_rdtsc() against steady_clock over 50 ms of spinning.
double measure_tsc_hz() {
  using Clock = std::chrono::steady_clock;
  const auto w0 = Clock::now();
  const uint64_t c0 = rte_rdtsc();
  while (Clock::now() - w0 < std::chrono::milliseconds(50)) rte_pause();
  const uint64_t c1 = rte_rdtsc();
  return static_cast<double>(c1 - c0) / std::chrono::duration<double>(Clock::now() - w0).count();
}

bool have_two_cpus() { return std::thread::hardware_concurrency() >= 2; }

// Times the benchmark loop: thread CPU time when one thread does all the work (preemption by
// other processes does not count), wall time when a second thread works too.
class Stopwatch {
 public:
  enum Kind { kCpu, kWall };
  explicit Stopwatch(Kind k) : id_(k == kCpu ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC) {
    clock_gettime(id_, &t0_);
  }
  double seconds() const {
    timespec t1;
    clock_gettime(id_, &t1);
    return static_cast<double>(t1.tv_sec - t0_.tv_sec) +
           1e-9 * static_cast<double>(t1.tv_nsec - t0_.tv_nsec);
  }

 private:
  clockid_t id_;
  timespec t0_;
};

void set_counters(benchmark::State& state, uint64_t elems, double seconds) {
  const double n = elems != 0 ? static_cast<double>(elems) : 1;
  state.counters["ns/elem"] = seconds * 1e9 / n;
  state.counters["cyc/elem"] = seconds * g_tsc_hz / n;  // TSC cycles
  state.SetItemsProcessed(static_cast<int64_t>(elems));
}

// ---- The two rings behind one burst interface -------------------------------------------------

template <typename T>
class Spsc {
 public:
  static constexpr const char* kName = "SpscRing";
  bool ok() const { return ring_->capacity() == kRingSize; }
  size_t enq(const T* p, size_t n) noexcept { return ring_->push_burst(std::span(p, n)); }
  size_t deq(T* p, size_t n) noexcept { return ring_->pop_burst(std::span(p, n)); }

 private:
  std::unique_ptr<SpscRing<T>> ring_ = std::make_unique<SpscRing<T>>(kRingSize);
};

template <typename T>
class Rte {
 public:
  static constexpr const char* kName = "rte_ring";
  Rte() {
    if (!g_eal_up) return;
    static std::atomic<int> seq{0};
    const std::string name = "bench" + std::to_string(seq.fetch_add(1));
    // kRingSize slots of which kRingSize - 1 are usable (rte_ring keeps one free).
    ring_ = rte_ring_create_elem(name.c_str(), sizeof(T), kRingSize, SOCKET_ID_ANY,
                                 RING_F_SP_ENQ | RING_F_SC_DEQ);
  }
  ~Rte() { rte_ring_free(ring_); }
  Rte(const Rte&) = delete;
  Rte& operator=(const Rte&) = delete;
  bool ok() const { return ring_ != nullptr; }
  size_t enq(const T* p, size_t n) noexcept {
    return rte_ring_sp_enqueue_burst_elem(ring_, p, sizeof(T), static_cast<unsigned>(n), nullptr);
  }
  size_t deq(T* p, size_t n) noexcept {
    return rte_ring_sc_dequeue_burst_elem(ring_, p, sizeof(T), static_cast<unsigned>(n), nullptr);
  }
  rte_ring* raw() { return ring_; }

 private:
  rte_ring* ring_ = nullptr;
};

template <typename Ring>
bool usable(benchmark::State& state, const Ring& ring) {
  if (!ring.ok()) {
    state.SkipWithError(g_eal_up ? "ring creation failed" : "EAL not initialised");
    return false;
  }
  return true;
}

// A consumer on CPU 1 that spins on deq(burst) until told to stop, then drains the ring.
template <typename Ring, typename T>
class SpinningConsumer {
 public:
  SpinningConsumer(Ring& ring, size_t burst) : ring_(ring), burst_(burst) {
    thread_ = std::thread([this] { run(); });
  }
  // Call after the producer's last post: joins and returns how many elements were consumed.
  uint64_t stop() {
    stop_.store(true, std::memory_order_release);  // pairs with the acquire load in run()
    thread_.join();
    return received_;
  }
  bool pinned() const { return pinned_.load(std::memory_order_relaxed); }

 private:
  void run() {
    pinned_.store(pin_to_cpu(1), std::memory_order_relaxed);
    std::array<T, kMaxBurst> out;
    uint64_t got = 0;
    while (!stop_.load(std::memory_order_acquire)) {  // pairs with the release store in stop()
      const size_t n = ring_.deq(out.data(), burst_);
      benchmark::DoNotOptimize(out.data());
      if (n == 0) rte_pause();
      got += n;
    }
    for (size_t n; (n = ring_.deq(out.data(), burst_)) != 0;) got += n;
    received_ = got;  // read by stop() after join()
  }

  Ring& ring_;
  const size_t burst_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> pinned_{false};
  uint64_t received_ = 0;
  std::thread thread_;
};

// ---- (a) same thread: burst in, burst out ------------------------------------------------------

template <typename Ring, typename T>
void BM_SameThread(benchmark::State& state) {
  const size_t burst = static_cast<size_t>(state.range(0));
  Ring ring;
  if (!usable(state, ring)) return;
  std::array<T, kMaxBurst> in{}, out{};
  uint64_t elems = 0;
  const Stopwatch sw(Stopwatch::kCpu);
  for (auto _ : state) {
    const size_t pushed = ring.enq(in.data(), burst);
    const size_t popped = ring.deq(out.data(), burst);
    benchmark::DoNotOptimize(out.data());
    benchmark::DoNotOptimize(pushed);
    elems += popped;
  }
  if (elems != state.iterations() * burst) state.SkipWithError("lost elements");
  set_counters(state, elems, sw.seconds());
}

// ---- (b) cross thread: producer here, consumer spinning on CPU 1 ------------------------------

template <typename Ring, typename T>
void BM_CrossThread(benchmark::State& state) {
  const size_t burst = static_cast<size_t>(state.range(0));
  if (!have_two_cpus()) {
    state.SkipWithError("needs two CPUs");
    return;
  }
  Ring ring;
  if (!usable(state, ring)) return;
  std::array<T, kMaxBurst> in{};
  SpinningConsumer<Ring, T> consumer(ring, burst);
  uint64_t sent = 0;
  const Stopwatch sw(Stopwatch::kWall);
  for (auto _ : state) {
    size_t done = 0;
    while (done < burst) {
      const size_t n = ring.enq(in.data() + done, burst - done);
      if (n == 0) rte_pause();
      done += n;
    }
    sent += done;
  }
  const double secs = sw.seconds();  // the producer's time; the final drain is not counted
  const uint64_t received = consumer.stop();
  if (received != sent) state.SkipWithError("consumer lost elements");
  if (!consumer.pinned()) state.SetLabel("consumer not pinned");
  set_counters(state, sent, secs);
}

// ---- (c) deferred doorbell: k posts per publish vs k publishing posts --------------------------

enum class Post { kDefer, kEach, kRteEach };
enum class Where { kSameThread, kCrossThread };

// One chain of k posts of `wqe` (k <= kRingSize - 1, so it fits even in rte_ring).
template <Post kPost>
inline void post_chain(SpscRing<Wqe64>* ring, rte_ring* rte, const Wqe64& wqe, size_t k) {
  for (size_t i = 0; i < k; ++i) {
    if constexpr (kPost == Post::kDefer) {
      while (!ring->stage(wqe)) rte_pause();  // a full ring publishes what is staged
    } else if constexpr (kPost == Post::kEach) {
      while (!ring->push(wqe)) rte_pause();
    } else {
      while (rte_ring_sp_enqueue_elem(rte, const_cast<Wqe64*>(&wqe), sizeof(Wqe64)) != 0)
        rte_pause();
    }
  }
  if constexpr (kPost == Post::kDefer) ring->publish();  // the doorbell
}

template <Post kPost, Where kWhere>
void BM_Doorbell(benchmark::State& state) {
  const size_t k = static_cast<size_t>(state.range(0));
  if (kWhere == Where::kCrossThread && !have_two_cpus()) {
    state.SkipWithError("needs two CPUs");
    return;
  }
  // The SpscRing posts go straight to the ring API (stage/publish/push); rte_ring through its
  // single-element enqueue.
  std::unique_ptr<SpscRing<Wqe64>> spsc;
  std::unique_ptr<Rte<Wqe64>> rte;
  if constexpr (kPost == Post::kRteEach) {
    rte = std::make_unique<Rte<Wqe64>>();
    if (!usable(state, *rte)) return;
  } else {
    spsc = std::make_unique<SpscRing<Wqe64>>(kRingSize);
  }
  Wqe64 wqe{};
  std::array<Wqe64, kMaxBurst> out;
  auto drain = [&](size_t n) {
    for (size_t got = 0; got < n;) {
      if constexpr (kPost == Post::kRteEach) {
        got += rte->deq(out.data(), n - got);
      } else {
        got += spsc->pop_burst(std::span(out).first(n - got));
      }
    }
    benchmark::DoNotOptimize(out.data());
  };

  uint64_t sent = 0;
  if constexpr (kWhere == Where::kSameThread) {
    const Stopwatch sw(Stopwatch::kCpu);
    for (auto _ : state) {
      post_chain<kPost>(spsc.get(), rte ? rte->raw() : nullptr, wqe, k);
      drain(k);
      sent += k;
    }
    set_counters(state, sent, sw.seconds());
  } else {
    // The consumer sees the ring through the Spsc/Rte burst interface; wrap the SpscRing.
    struct View {
      SpscRing<Wqe64>* s;
      Rte<Wqe64>* r;
      size_t deq(Wqe64* p, size_t n) noexcept {
        return r != nullptr ? r->deq(p, n) : s->pop_burst(std::span(p, n));
      }
    } view{spsc.get(), rte.get()};
    SpinningConsumer<View, Wqe64> consumer(view, kMaxBurst);
    const Stopwatch sw(Stopwatch::kWall);
    for (auto _ : state) {
      post_chain<kPost>(spsc.get(), rte ? rte->raw() : nullptr, wqe, k);
      benchmark::DoNotOptimize(wqe);
      sent += k;
    }
    const double secs = sw.seconds();
    if (consumer.stop() != sent) state.SkipWithError("consumer lost elements");
    set_counters(state, sent, secs);
  }
}

void bursts(benchmark::internal::Benchmark* b) {
  for (int64_t n : {8, 32, 128, 256}) b->Arg(n);
  b->ArgName("burst");
}

BENCHMARK_TEMPLATE(BM_SameThread, Spsc<uint64_t>, uint64_t)->Apply(bursts);
BENCHMARK_TEMPLATE(BM_SameThread, Rte<uint64_t>, uint64_t)->Apply(bursts);
BENCHMARK_TEMPLATE(BM_SameThread, Spsc<Wqe64>, Wqe64)->Apply(bursts);
BENCHMARK_TEMPLATE(BM_SameThread, Rte<Wqe64>, Wqe64)->Apply(bursts);

BENCHMARK_TEMPLATE(BM_CrossThread, Spsc<uint64_t>, uint64_t)->Apply(bursts)->UseRealTime();
BENCHMARK_TEMPLATE(BM_CrossThread, Rte<uint64_t>, uint64_t)->Apply(bursts)->UseRealTime();
BENCHMARK_TEMPLATE(BM_CrossThread, Spsc<Wqe64>, Wqe64)->Apply(bursts)->UseRealTime();
BENCHMARK_TEMPLATE(BM_CrossThread, Rte<Wqe64>, Wqe64)->Apply(bursts)->UseRealTime();

BENCHMARK_TEMPLATE(BM_Doorbell, Post::kDefer, Where::kSameThread)->Apply(bursts);
BENCHMARK_TEMPLATE(BM_Doorbell, Post::kEach, Where::kSameThread)->Apply(bursts);
BENCHMARK_TEMPLATE(BM_Doorbell, Post::kRteEach, Where::kSameThread)->Apply(bursts);
BENCHMARK_TEMPLATE(BM_Doorbell, Post::kDefer, Where::kCrossThread)->Apply(bursts)->UseRealTime();
BENCHMARK_TEMPLATE(BM_Doorbell, Post::kEach, Where::kCrossThread)->Apply(bursts)->UseRealTime();
BENCHMARK_TEMPLATE(BM_Doorbell, Post::kRteEach, Where::kCrossThread)->Apply(bursts)->UseRealTime();

}  // namespace
}  // namespace urnic::dp

int main(int argc, char** argv) {
  urnic::ctl::EalOptions eal;
  eal.program = "bench_ring";
  eal.memory = urnic::ctl::EalOptions::Memory::kNoHuge;
  eal.memory_mb = 64;
  eal.lcores = "0-1";
  urnic::dp::g_eal_up = urnic::ctl::eal_init(eal) == urnic::Status::kSuccess;
  if (urnic::dp::g_eal_up) {
    urnic::dp::g_tsc_hz = static_cast<double>(rte_get_tsc_hz());
  } else {
    std::fprintf(stderr, "bench_ring: EAL did not come up; rte_ring cases are skipped\n");
    urnic::dp::pin_to_cpu(0);
    urnic::dp::g_tsc_hz = urnic::dp::measure_tsc_hz();
  }
  benchmark::AddCustomContext("tsc_hz", std::to_string(urnic::dp::g_tsc_hz));
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

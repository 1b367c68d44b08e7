// Post + poll cost per work request through the public API (issue 5, Done when): 8-byte INLINE
// RDMA WRITEs on a loopback pair (two adapters over a net_ring pair), posted in batches of 1, 8
// and 32, with every request but the last of a batch deferred (NDK_OP_FLAG_DEFER, one doorbell
// per batch) or not (a doorbell per request), each batch then polled to its last completion
// with get_results.
//
// Two engine placements:
//  - same thread (engine/0): the benchmark thread posts, runs the engine (both adapters'
//    requester, responder and completer, and the net_ring hop) and polls. `post_ns` and
//    `poll_ns` are the time spent inside the API calls alone (TSC around each call), per work
//    request (`post_ns_min`: the fastest batch's, i.e. without preemption); `ns_per_wr` is
//    everything, engine included.
//  - engine on lcore 1 (engine/1): the thread only posts and polls while the engine runs on its
//    own core; `ns_per_wr` is then the application's cost per request at the rate the engine
//    sustains (with 2 cores, the two compete only for memory).
// `cpu_ns_per_wr` is the benchmark thread's CPU time per request (CLOCK_THREAD_CPUTIME_ID): on a
// loaded machine it stays put while the wall-clock figures grow with preemption. With the engine
// on lcore 1 a post without DEFER publishes the producer index the engine is polling (a cache
// line moves between cores per request); with DEFER once per batch: compare post_ns_min.
//
// Run: build/bench/bench_api --benchmark_repetitions=3 --benchmark_report_aggregates_only
#include <benchmark/benchmark.h>
#include <rte_cycles.h>
#include <time.h>

#include <memory>
#include <string>
#include <vector>

#include "ring_adapters.h"
#include "urnic/urnic.h"

namespace urnic {
namespace {

struct Pair {
  explicit Pair(bool lcore) {
    static int instance = 0;
    ok = open_ring_adapters("api" + std::to_string(instance++), 8191, engine, &a, &b);
    if (!ok) return;
    ok = a->create_pd(nullptr, nullptr, &pda) == Status::kSuccess &&
         b->create_pd(nullptr, nullptr, &pdb) == Status::kSuccess &&
         a->create_cq(1024, nullptr, nullptr, nullptr, nullptr, &cqa) == Status::kSuccess &&
         b->create_cq(1024, nullptr, nullptr, nullptr, nullptr, &cqb) == Status::kSuccess;
    if (lcore) ok = ok && !worker_lcores().empty() && engine.launch(worker_lcores().front());
    ok = ok &&
         pda->create_qp(*cqa, *cqa, nullptr, 64, 256, 1, 1, 64, nullptr, nullptr, &qa) ==
             Status::kSuccess &&
         pdb->create_qp(*cqb, *cqb, nullptr, 64, 256, 1, 1, 64, nullptr, nullptr, &qb) ==
             Status::kSuccess;
    if (!ok) return;
    connect(*qa, *qb, *b, 1, 2);
    connect(*qb, *qa, *a, 2, 1);
    dst.assign(4096, 0);
    ok = ok && pdb->create_mr(false, nullptr, nullptr, &mr) == Status::kSuccess &&
         mr->register_mr(dst.data(), dst.size(), mr_flag::kAllowRemoteWrite, nullptr, nullptr) ==
             Status::kSuccess;
  }
  ~Pair() {
    qa.reset();
    qb.reset();
    mr.reset();
    cqa.reset();
    cqb.reset();
    pda.reset();
    pdb.reset();
    a.reset();
    b.reset();
    engine.stop();
  }
  void connect(Qp& q, Qp& peer, Adapter& peer_adapter, uint32_t sq_psn, uint32_t rq_psn) {
    ok = ok && connect_ring_qp(q, peer, peer_adapter, sq_psn, rq_psn);
  }

  bool ok = false;
  Engine engine;
  std::unique_ptr<Adapter> a, b;
  Handle<Pd> pda, pdb;
  Handle<Cq> cqa, cqb;
  Handle<Qp> qa, qb;
  std::vector<uint8_t> dst;
  Handle<Mr> mr;
};

// Args: batch size, DEFER (0/1), engine on lcore 1 (0/1).
void BM_WritePostPoll(benchmark::State& state) {
  const auto batch = static_cast<uint32_t>(state.range(0));
  const bool defer = state.range(1) != 0;
  const bool lcore = state.range(2) != 0;
  if (!bench_runtime_init("bench_api")) {
    state.SkipWithError("EAL");
    return;
  }
  Pair p(lcore);
  if (!p.ok) {
    state.SkipWithError("pair setup");
    return;
  }
  const uint64_t value = 0x0123456789ABCDEFull;
  const Sge sge{reinterpret_cast<uint64_t>(&value), 8, 0};
  const uint64_t remote = reinterpret_cast<uint64_t>(p.dst.data());
  const uint32_t token = p.mr->get_remote_token();
  Qp& qa = *p.qa;
  Cq& cq = *p.cqa;
  Result results[64];
  uint64_t post_cycles = 0, poll_cycles = 0, wrs = 0, polls = 0;
  uint64_t post_min = UINT64_MAX;  // the least disturbed batch (robust to preemption)
  bool failed = false;
  timespec cpu0{}, cpu1{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu0);
  for (auto _ : state) {
    uint64_t t0 = rte_rdtsc();
    for (uint32_t k = 0; k < batch; ++k) {
      const uint32_t flags = op_flag::kInline | (defer && k + 1 < batch ? op_flag::kDefer : 0);
      failed |= qa.write(nullptr, {&sge, 1}, remote, token, flags) != Status::kSuccess;
    }
    const uint64_t dt = rte_rdtsc() - t0;
    post_cycles += dt;
    post_min = dt < post_min ? dt : post_min;
    for (uint32_t got = 0; got < batch;) {
      if (!lcore) p.engine.run_once();
      t0 = rte_rdtsc();
      const size_t n = cq.get_results(results);
      poll_cycles += rte_rdtsc() - t0;
      ++polls;
      for (size_t i = 0; i < n; ++i) failed |= results[i].status != Status::kSuccess;
      got += static_cast<uint32_t>(n);
    }
    wrs += batch;
    if (failed) {
      state.SkipWithError("post or completion failed");
      break;
    }
  }
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu1);
  const double cpu_ns = static_cast<double>(cpu1.tv_sec - cpu0.tv_sec) * 1e9 +
                        static_cast<double>(cpu1.tv_nsec - cpu0.tv_nsec);
  const double ns_per_cycle = 1e9 / static_cast<double>(rte_get_tsc_hz());
  const double n = static_cast<double>(wrs == 0 ? 1 : wrs);
  state.SetItemsProcessed(static_cast<int64_t>(wrs));
  state.counters["ns_per_wr"] = benchmark::Counter(
      static_cast<double>(wrs), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["post_ns"] = static_cast<double>(post_cycles) * ns_per_cycle / n;
  state.counters["poll_ns"] = static_cast<double>(poll_cycles) * ns_per_cycle / n;
  state.counters["polls_per_wr"] = static_cast<double>(polls) / n;
  state.counters["cpu_ns_per_wr"] = cpu_ns / n;
  state.counters["post_ns_min"] = static_cast<double>(post_min) * ns_per_cycle / batch;
}

BENCHMARK(BM_WritePostPoll)
    ->ArgNames({"batch", "defer", "engine"})
    ->Args({1, 0, 0})
    ->Args({8, 0, 0})
    ->Args({8, 1, 0})
    ->Args({32, 0, 0})
    ->Args({32, 1, 0})
    ->Args({1, 0, 1})
    ->Args({8, 0, 1})
    ->Args({8, 1, 1})
    ->Args({32, 0, 1})
    ->Args({32, 1, 1})
    ->UseRealTime()
    ->MinTime(0.5);

}  // namespace
}  // namespace urnic

BENCHMARK_MAIN();

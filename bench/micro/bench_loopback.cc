// Loopback message rate and bandwidth of the RC data path, next to the raw DPDK packet loop over
// the same kind of net_ring pair, in the same run (issue: RC data path, Done when).
//
// One thread does everything: it posts work requests through the public API (urnic::Qp, with
// the deferred doorbell), runs the engine that serves both adapters (requester, responder,
// completer of both sides) with Engine::run_once and polls the CQ, so each figure is "one engine
// lcore" including the application's own cost. The raw loop is the ceiling, and the one place
// that drives an internal stage on purpose (dp::Port, the transport alone): allocate a burst of
// 64-byte frames, tx_burst on port A, rx_burst on port B, free, with no protocol work.
//
// Run: build/bench/bench_loopback --benchmark_repetitions=3 --benchmark_report_aggregates_only
#include <benchmark/benchmark.h>
#include <rte_mbuf.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "dataplane/port.h"
#include "ring_adapters.h"
#include "urnic/urnic.h"

namespace urnic {
namespace {

// The raw DPDK packet loop over a fresh net_ring pair: the per-packet ceiling of the transport.
void BM_RawRingLoop(benchmark::State& state) {
  static int instance = 0;
  uint16_t pa = 0, pb = 0;
  if (create_ring_port_pair("raw" + std::to_string(instance++), 1, &pa, &pb) != Status::kSuccess) {
    state.SkipWithError("ring pair");
    return;
  }
  dp::Port a, b;
  dp::PortConfig ca, cb;
  ca.port_id = pa;
  cb.port_id = pb;
  ca.mbufs = cb.mbufs = 8191;
  if (a.open(ca) != Status::kSuccess || b.open(cb) != Status::kSuccess) {
    state.SkipWithError("port open");
    return;
  }
  constexpr uint16_t kBurst = 32;
  const uint16_t frame = static_cast<uint16_t>(state.range(0));
  rte_mbuf* tx[kBurst];
  rte_mbuf* rx[kBurst];
  uint64_t packets = 0;
  for (auto _ : state) {
    if (rte_pktmbuf_alloc_bulk(a.pool(), tx, kBurst) != 0) {
      state.SkipWithError("alloc");
      break;
    }
    for (auto* m : tx) {
      auto* p = rte_pktmbuf_mtod(m, uint8_t*);
      std::memset(p, 0, 64);  // write the headers a real frame would have
      m->data_len = m->pkt_len = frame;
    }
    const uint16_t sent = a.tx_burst(0, tx, kBurst);
    for (uint16_t i = sent; i < kBurst; ++i) rte_pktmbuf_free(tx[i]);
    const uint16_t got = b.rx_burst(0, rx, kBurst);
    rte_pktmbuf_free_bulk(rx, got);
    packets += got;
  }
  state.counters["pkts_per_s"] =
      benchmark::Counter(static_cast<double>(packets), benchmark::Counter::kIsRate);
  state.SetItemsProcessed(static_cast<int64_t>(packets));
}
BENCHMARK(BM_RawRingLoop)->Arg(64)->Arg(4200)->UseRealTime();

// Two adapters on one manually driven engine, one connected QP each, a source buffer on A and a
// remote-writable target on B, all through the public API.
struct Pair {
  // `max_qps`: QPs on each adapter (and twice that on the engine), for the idle-QP benchmark.
  explicit Pair(uint32_t max_qps = AdapterConfig{}.max_qps)
      : engine(EngineConfig{.max_qps = 2 * max_qps}), max_qps(max_qps) {}
  Engine engine;
  uint32_t max_qps;
  std::unique_ptr<Adapter> a, b;
  Handle<Pd> pda, pdb;
  Handle<Cq> acq, bcq;
  Handle<Mr> mra, mrb;
  Handle<Qp> qa, qb;
  std::vector<uint8_t> src, dst;
  uint32_t lkey = 0, rkey = 0;

  ~Pair() {
    qa.reset();
    qb.reset();
    mra.reset();
    mrb.reset();
    acq.reset();
    bcq.reset();
    pda.reset();
    pdb.reset();
    b.reset();
    a.reset();
  }

  // `timeout`: the QPs' local ACK timeout attribute (4.096 us * 2^timeout; 14 = 67 ms).
  bool open(const std::string& name, uint32_t mtu, size_t buf, uint8_t timeout = 14,
            bool selective_repeat = false) {
    if (!open_ring_adapters(name, 16383, engine, &a, &b, max_qps) ||
        a->create_pd(nullptr, nullptr, &pda) != Status::kSuccess ||
        b->create_pd(nullptr, nullptr, &pdb) != Status::kSuccess ||
        a->create_cq(8192, nullptr, nullptr, nullptr, nullptr, &acq) != Status::kSuccess ||
        b->create_cq(8192, nullptr, nullptr, nullptr, nullptr, &bcq) != Status::kSuccess ||
        pda->create_qp(*acq, *acq, nullptr, 1024, 1024, 1, 1, 0, nullptr, nullptr, &qa) !=
            Status::kSuccess ||
        pdb->create_qp(*bcq, *bcq, nullptr, 1024, 1024, 1, 1, 0, nullptr, nullptr, &qb) !=
            Status::kSuccess)
      return false;
    src.assign(buf, 0x5A);
    dst.assign(buf, 0);
    if (pda->create_mr(false, nullptr, nullptr, &mra) != Status::kSuccess ||
        mra->register_mr(src.data(), buf, 0, nullptr, nullptr) != Status::kSuccess ||
        pdb->create_mr(false, nullptr, nullptr, &mrb) != Status::kSuccess ||
        mrb->register_mr(dst.data(), buf, mr_flag::kAllowRemoteWrite, nullptr, nullptr) !=
            Status::kSuccess)
      return false;
    lkey = mra->get_local_token();
    rkey = mrb->get_remote_token();
    return connect(*qa, *qb, *b, mtu, timeout, selective_repeat) &&
           connect(*qb, *qa, *a, mtu, timeout, selective_repeat);
  }
  static bool connect(Qp& q, Qp& peer, Adapter& peer_adapter, uint32_t mtu, uint8_t timeout,
                      bool selective_repeat) {
    using namespace qp_attr_mask;
    auto* x = q.query_extension<QpConnectExtension>();
    const LocalAddress to = peer_adapter.query_extension<AdapterExtension>()->local_address();
    QpAttributes at;
    at.state = QpState::kInit;
    at.access = qp_access::kRemoteWrite;
    if (x->modify(at, kState | kAccessFlags, nullptr, nullptr) != Status::kSuccess) return false;
    at.state = QpState::kRtr;
    at.av.dst_ipv4 = to.ipv4;
    at.av.dst_mac = to.mac;
    at.path_mtu = mtu;
    at.dest_qpn = peer.query_extension<QpConnectExtension>()->qpn();
    at.rq_psn = 0;
    at.max_dest_rd_atomic = 16;
    at.min_rnr_timer = 12;
    at.selective_repeat = selective_repeat;
    if (x->modify(at,
                  kState | kAv | kPathMtu | kDestQpn | kRqPsn | kMaxDestRdAtomic | kMinRnrTimer |
                      kSelectiveRepeat,
                  nullptr, nullptr) != Status::kSuccess)
      return false;
    at.state = QpState::kRts;
    at.sq_psn = 0;
    at.max_rd_atomic = 16;
    at.timeout = timeout;
    return x->modify(at, kState | kSqPsn | kTimeout | kRetryCnt | kRnrRetry | kMaxRdAtomic, nullptr,
                     nullptr) == Status::kSuccess;
  }
  // Posts `size`-byte WRITEs until the send queue is full, one in kSignalEvery signaled, all
  // deferred: the post that finds the queue full hands them to the engine (ndkpi.md §7.3).
  uint64_t fill_send_queue(uint32_t size, uint64_t* posted, uint32_t signal_every) {
    const Sge sge{reinterpret_cast<uint64_t>(src.data()), size, lkey};
    const uint64_t before = *posted;
    for (;;) {
      const uint32_t flags =
          op_flag::kDefer | ((*posted + 1) % signal_every == 0 ? 0 : op_flag::kSilentSuccess);
      if (qa->write(nullptr, {&sge, 1}, reinterpret_cast<uint64_t>(dst.data()), rkey, flags) !=
          Status::kSuccess)
        break;
      ++*posted;
    }
    return *posted - before;
  }
  QpCounters counters() { return qa->query_extension<QpExtension>()->counters(); }
};

// Keeps the send queue full of `size`-byte WRITEs, signals one WQE in 64 (the others
// SILENT_SUCCESS) and counts completed messages, as perftest's write_bw does.
void write_loop(benchmark::State& state, Pair& p, uint32_t size) {
  constexpr uint32_t kSignalEvery = 64;
  uint64_t posted = 0, completed = 0;
  ResultEx res[32];
  for (auto _ : state) {
    // Post until the send queue is full, run one engine step, reap completions.
    p.fill_send_queue(size, &posted, kSignalEvery);
    p.engine.run_once();
    const size_t n = p.acq->get_results_ex(res);
    for (size_t i = 0; i < n; ++i) {
      if (res[i].status != Status::kSuccess) state.SkipWithError("completion error");
    }
    completed += n * kSignalEvery;
  }
  // Drain so that the count is exact.
  while (completed < posted - posted % kSignalEvery) {
    p.engine.run_once();
    completed += p.acq->get_results_ex(res) * kSignalEvery;
  }
  state.counters["msgs_per_s"] =
      benchmark::Counter(static_cast<double>(completed), benchmark::Counter::kIsRate);
  state.counters["Gbps"] = benchmark::Counter(static_cast<double>(completed) * size * 8 / 1e9,
                                              benchmark::Counter::kIsRate);
  state.SetItemsProcessed(static_cast<int64_t>(completed));
  state.SetBytesProcessed(static_cast<int64_t>(completed * size));
  state.counters["retransmits"] = static_cast<double>(p.counters().retransmits);
}

// RDMA WRITE of `size` bytes over a path MTU of `mtu`.
void BM_RdmaWrite(benchmark::State& state) {
  static int instance = 0;
  const uint32_t size = static_cast<uint32_t>(state.range(0));
  const uint32_t mtu = static_cast<uint32_t>(state.range(1));
  Pair p;
  if (!p.open("bw" + std::to_string(instance++), mtu, std::max<size_t>(size, 64))) {
    state.SkipWithError("setup");
    return;
  }
  write_loop(state, p, size);
}
BENCHMARK(BM_RdmaWrite)
    ->Args({64, 1024})
    ->Args({4096, 4096})
    ->Args({65536, 4096})
    ->Args({65536, 1024})
    ->UseRealTime()
    ->MinTime(1.0);

// Goodput of RDMA WRITEs over a lossy link (issue 4 (c)): BM_RdmaWrite's loop (SQ kept full,
// one engine step per iteration, one WQE in 64 signaled) with a fault injector on each transmit
// direction dropping `drop_ppm` of the frames: requests on A's side, ACKs / NAKs on B's side.
// The injectors are seeded, so every run sees the same loss pattern. Only messages completed
// inside the timed loop count (the QP's completion counter, which includes the SILENT_SUCCESS
// ones), so recovery still in flight at the end is not credited. Compare each drop rate with
// its drop_ppm = 0 line (same code path, injector installed, nothing dropped).
//
// Path MTU 4096 (16 frames per 64 KiB message). Local ACK timeout 8 = 1.05 ms, a realistic
// datacenter value. Most losses are repaired by the NAK PSN sequence error of the next frame
// (rocev2.md §3.6); the timer covers the losses nothing follows (a lost NAK, a lost
// retransmission of the NAKed frame: the responder NAKs a gap only once). 8 is also the
// smallest safe value with the default 256-PSN window: a full window of 4 KiB frames queued in
// front of the retransmission takes about as long as timeout 6 (262 us) to drain in this
// single-core loopback, so shorter timers expire spuriously, each expiry queues another window,
// and the QP fails with RETRY_EXC_ERR (seen at timeouts 5 and 6). `timer_share` reports the
// fraction of the run spent waiting for timers (at most one timeout per expiry).
constexpr uint32_t kLossyMtu = 4096;
constexpr uint8_t kLossyTimeout = 8;

void BM_RdmaWriteLossy(benchmark::State& state) {
  static int instance = 0;
  const uint32_t size = static_cast<uint32_t>(state.range(0));
  const auto drop_ppm = static_cast<uint32_t>(state.range(1));
  const bool selective = state.range(2) != 0;
  Pair p;
  if (!p.open("lossy" + std::to_string(instance++), kLossyMtu, std::max<size_t>(size, 64),
              kLossyTimeout, selective)) {
    state.SkipWithError("setup");
    return;
  }
  FaultConfig fa, fb;
  fa.drop_ppm = fb.drop_ppm = drop_ppm;
  fa.seed = 0x1055;
  fb.seed = 0x1055 ^ 0x5555;
  auto* xa = p.a->query_extension<AdapterExtension>();
  auto* xb = p.b->query_extension<AdapterExtension>();
  if (xa->set_faults(fa, {}) != Status::kSuccess || xb->set_faults(fb, {}) != Status::kSuccess) {
    state.SkipWithError("fault injection needs a URNIC_TESTING build");
    return;
  }

  constexpr uint32_t kSignalEvery = 64;
  uint64_t posted = 0;
  bool failed = false;
  ResultEx res[32];
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) {
    p.fill_send_queue(size, &posted, kSignalEvery);
    p.engine.run_once();
    const size_t n = p.acq->get_results_ex(res);
    for (size_t i = 0; i < n; ++i) failed |= res[i].status != Status::kSuccess;
    if (failed) {
      state.SkipWithError("completion error (retry exhausted?)");
      break;
    }
  }
  // The engine is driven by this thread: nothing changes the counters between here and the end
  // of the timed loop.
  const QpCounters c = p.counters();
  const double elapsed_ns =
      std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
  const uint64_t completed = c.completions_ok;
  // Drain (bounded) so that no frame is left in flight when the ports close.
  for (uint64_t i = 0; i < 100'000'000 && !failed; ++i) {
    if ((i & 1023) == 0) {
      const QpCounters k = p.counters();
      if (k.completions_ok + k.completions_error + k.completions_flushed == posted) break;
    }
    p.engine.run_once();
    (void)p.acq->get_results_ex(res);
  }
  AdapterCounters ca, cb;
  (void)p.a->query_counters(&ca);
  (void)p.b->query_counters(&cb);
  (void)xa->set_faults({}, {});
  (void)xb->set_faults({}, {});
  state.counters["Gbps"] = benchmark::Counter(static_cast<double>(completed) * size * 8 / 1e9,
                                              benchmark::Counter::kIsRate);
  state.counters["msgs_per_s"] =
      benchmark::Counter(static_cast<double>(completed), benchmark::Counter::kIsRate);
  state.counters["retransmits"] = static_cast<double>(c.retransmits);
  state.counters["selective"] = static_cast<double>(c.selective_retransmits);
  state.counters["probes"] = static_cast<double>(c.sr_probes);
  state.counters["timeouts"] = static_cast<double>(c.timeouts);
  state.counters["timer_share"] =
      static_cast<double>(c.timeouts) * static_cast<double>(4096ull << kLossyTimeout) / elapsed_ns;
  state.counters["seq_naks"] = static_cast<double>(c.naks_received[0]);
  state.counters["sent"] = static_cast<double>(c.tx_packets);
  state.counters["dropped"] = static_cast<double>(ca.tx_faults.dropped + cb.tx_faults.dropped);
  state.SetItemsProcessed(static_cast<int64_t>(completed));
  state.SetBytesProcessed(static_cast<int64_t>(completed * size));
}
// 64 B RDMA WRITE on one busy QP while `idle` more QPs are open on the same engine: half on
// each adapter, connected in pairs, with nothing posted (issue 14
// item 3: the rate with 65 536 idle QPs within 5 % of the rate with none, in the same run).
// An engine step looks only at the QPs with work (dataplane/sched.h); before, it walked them all.
void BM_RdmaWriteIdleQps(benchmark::State& state) {
  static int instance = 0;
  const auto idle = static_cast<uint32_t>(state.range(0));
  Pair p(idle / 2 + 8);
  if (!p.open("idle" + std::to_string(instance++), 1024, 64)) {
    state.SkipWithError("setup");
    return;
  }
  std::vector<Handle<Qp>> qs(idle);
  for (uint32_t i = 0; i + 1 < idle; i += 2) {
    if (p.pda->create_qp(*p.acq, *p.acq, nullptr, 1, 1, 1, 1, 0, nullptr, nullptr, &qs[i]) !=
            Status::kSuccess ||
        p.pdb->create_qp(*p.bcq, *p.bcq, nullptr, 1, 1, 1, 1, 0, nullptr, nullptr, &qs[i + 1]) !=
            Status::kSuccess ||
        !connect_ring_qp(*qs[i], *qs[i + 1], *p.b, 0, 0) ||
        !connect_ring_qp(*qs[i + 1], *qs[i], *p.a, 0, 0)) {
      state.SkipWithError("idle QPs");
      return;
    }
  }
  state.counters["idle_qps"] = idle;
  write_loop(state, p, 64);
  for (auto& q : qs) q.reset();
}
BENCHMARK(BM_RdmaWriteIdleQps)->Arg(0)->Arg(1024)->Arg(65536)->UseRealTime();

BENCHMARK(BM_RdmaWriteLossy)
    ->ArgNames({"size", "drop_ppm", "sr"})
    ->Args({65536, 0, 0})
    ->Args({65536, 10000, 0})
    ->Args({65536, 50000, 0})
    ->Args({65536, 0, 1})
    ->Args({65536, 10000, 1})
    ->Args({65536, 50000, 1})
    ->UseRealTime()
    ->MinTime(1.0);

// memcpy of the same 64 KiB, the single-core ceiling for moving the bytes at all.
void BM_Memcpy64K(benchmark::State& state) {
  std::vector<uint8_t> a(65536, 1), b(65536);
  for (auto _ : state) {
    std::memcpy(b.data(), a.data(), a.size());
    benchmark::DoNotOptimize(b.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * 65536);
  state.counters["Gbps"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * 65536 * 8 / 1e9, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Memcpy64K);

}  // namespace
}  // namespace urnic

int main(int argc, char** argv) {
  urnic::RuntimeConfig rc;
  rc.program = "bench_loopback";
  rc.lcores = "0";
  rc.memory_mb = 1024;
  if (urnic::runtime_init(rc) != urnic::Status::kSuccess) {
    std::fprintf(stderr, "bench_loopback: %s\n", urnic::last_error());
    return 1;
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

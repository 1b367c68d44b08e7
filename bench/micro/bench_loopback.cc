// Loopback message rate and bandwidth of the RC data path, next to the raw DPDK packet loop over
// the same kind of net_ring pair, in the same run (issue: RC data path, Done when).
//
// One thread does everything: it posts work requests, runs the engine that serves both adapters
// (requester, responder, completer of both sides) and polls the CQ, so each figure is "one
// engine lcore" including the application's own cost. The raw loop is the ceiling: allocate a
// burst of 64-byte frames, tx_burst on port A, rx_burst on port B, free, with no protocol work.
//
// Run: build/bench/bench_loopback --benchmark_repetitions=3 --benchmark_report_aggregates_only
#include <benchmark/benchmark.h>
#include <rte_mbuf.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <vector>

#include "control/adapter.h"
#include "control/eal.h"
#include "dataplane/engine.h"
#include "dataplane/fault.h"
#include "dataplane/port.h"

namespace urnic {
namespace {

// The raw DPDK packet loop over a fresh net_ring pair: the per-packet ceiling of the transport.
void BM_RawRingLoop(benchmark::State& state) {
  static int instance = 0;
  uint16_t pa = 0, pb = 0;
  if (ctl::create_ring_pair("raw" + std::to_string(instance++), 1, &pa, &pb) != Status::kSuccess) {
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

struct Pair {
  dp::Engine engine;
  std::unique_ptr<ctl::Adapter> a, b;
  std::unique_ptr<dp::Cq> acq, bcq;
  dp::Qp* qa = nullptr;
  dp::Qp* qb = nullptr;
  std::vector<uint8_t> src, dst;
  uint32_t lkey = 0, rkey = 0;

  // `timeout`: the QPs' local ACK timeout attribute (4.096 us * 2^timeout; 14 = 67 ms).
  bool open(const std::string& name, uint32_t mtu, size_t buf, uint8_t timeout = 14) {
    uint16_t pa = 0, pb = 0;
    if (ctl::create_ring_pair(name, 1, &pa, &pb) != Status::kSuccess) return false;
    ctl::AdapterConfig ca, cb;
    ca.port_id = pa;
    cb.port_id = pb;
    ca.port.mbufs = cb.port.mbufs = 16383;
    ca.ipv4 = 0xC0000201;
    cb.ipv4 = 0xC0000202;
    ca.mac = wire::MacAddr{2, 0, 0, 0, 0, 1};
    cb.mac = wire::MacAddr{2, 0, 0, 0, 0, 2};
    if (ctl::Adapter::open(ca, &engine, &a) != Status::kSuccess ||
        ctl::Adapter::open(cb, &engine, &b) != Status::kSuccess)
      return false;
    (void)a->create_cq(8192, &acq);
    (void)b->create_cq(8192, &bcq);
    const uint32_t pda = a->alloc_pd(), pdb = b->alloc_pd();
    ctl::QpInit qi;
    qi.sq_depth = 1024;
    qi.rq_depth = 1024;
    qi.pd = pda;
    qi.send_cq = qi.recv_cq = acq.get();
    if (a->create_qp(qi, &qa) != Status::kSuccess) return false;
    qi.pd = pdb;
    qi.send_cq = qi.recv_cq = bcq.get();
    if (b->create_qp(qi, &qb) != Status::kSuccess) return false;
    src.assign(buf, 0x5A);
    dst.assign(buf, 0);
    (void)a->register_mr(pda, src.data(), buf, 0, &lkey);
    (void)b->register_mr(pdb, dst.data(), buf, mr_flag::kAllowRemoteWrite, &rkey);
    return connect(*a, *b, qa, qb, mtu, timeout) && connect(*b, *a, qb, qa, mtu, timeout);
  }
  static bool connect(ctl::Adapter& self, ctl::Adapter& peer, dp::Qp* q, dp::Qp* pq, uint32_t mtu,
                      uint8_t timeout) {
    using namespace dp::qp_attr;
    dp::QpAttr at;
    at.state = dp::QpState::kInit;
    at.access = dp::access::kRemoteWrite;
    if (self.modify_qp(q, at, kState | kAccessFlags) != Status::kSuccess) return false;
    at.state = dp::QpState::kRtr;
    at.av = self.address_to(peer);
    at.path_mtu = mtu;
    at.dest_qpn = pq->qpn();
    at.rq_psn = 0;
    at.max_dest_rd_atomic = 16;
    at.min_rnr_timer = 12;
    if (self.modify_qp(
            q, at, kState | kAv | kPathMtu | kDestQpn | kRqPsn | kMaxDestRdAtomic | kMinRnrTimer) !=
        Status::kSuccess)
      return false;
    at.state = dp::QpState::kRts;
    at.sq_psn = 0;
    at.max_rd_atomic = 16;
    at.timeout = timeout;
    return self.modify_qp(q, at,
                          kState | kSqPsn | kTimeout | kRetryCnt | kRnrRetry | kMaxRdAtomic) ==
           Status::kSuccess;
  }
};

// RDMA WRITE of `size` bytes, as perftest's write_bw does: keep the send queue full, signal
// one WQE in 64 (the others SILENT_SUCCESS), count completed messages.
void BM_RdmaWrite(benchmark::State& state) {
  static int instance = 0;
  const uint32_t size = static_cast<uint32_t>(state.range(0));
  const uint32_t mtu = static_cast<uint32_t>(state.range(1));
  Pair p;
  if (!p.open("bw" + std::to_string(instance++), mtu, std::max<size_t>(size, 64))) {
    state.SkipWithError("setup");
    return;
  }
  constexpr uint32_t kSignalEvery = 64;
  uint64_t posted = 0, completed = 0;
  ResultEx res[32];
  dp::SendWqe w;
  w.opcode = dp::WrOpcode::kWrite;
  w.num_sge = 1;
  w.length = size;
  w.sge[0] = {reinterpret_cast<uint64_t>(p.src.data()), size, p.lkey};
  w.remote_addr = reinterpret_cast<uint64_t>(p.dst.data());
  w.rkey = p.rkey;
  for (auto _ : state) {
    // Post until the send queue is full, run one engine step, reap completions.
    for (;;) {
      w.flags = (posted + 1) % kSignalEvery == 0 ? 0 : op_flag::kSilentSuccess;
      if (p.qa->post_send(w) != Status::kSuccess) break;
      ++posted;
    }
    p.engine.run_once();
    const size_t n = p.acq->poll(res);
    for (size_t i = 0; i < n; ++i) {
      if (res[i].status != Status::kSuccess) state.SkipWithError("completion error");
    }
    completed += n * kSignalEvery;
  }
  // Drain so that the count is exact.
  while (completed < posted - posted % kSignalEvery) {
    p.engine.run_once();
    completed += p.acq->poll(res) * kSignalEvery;
  }
  state.counters["msgs_per_s"] =
      benchmark::Counter(static_cast<double>(completed), benchmark::Counter::kIsRate);
  state.counters["Gbps"] = benchmark::Counter(static_cast<double>(completed) * size * 8 / 1e9,
                                              benchmark::Counter::kIsRate);
  state.SetItemsProcessed(static_cast<int64_t>(completed));
  state.SetBytesProcessed(static_cast<int64_t>(completed * size));
  state.counters["retransmits"] = static_cast<double>(p.qa->counters.retransmits);
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
  Pair p;
  if (!p.open("lossy" + std::to_string(instance++), kLossyMtu, std::max<size_t>(size, 64),
              kLossyTimeout)) {
    state.SkipWithError("setup");
    return;
  }
  dp::FaultConfig fc;
  fc.drop_ppm = drop_ppm;
  fc.seed = 0x1055;
  dp::FaultInjector fa(fc);
  fc.seed ^= 0x5555;
  dp::FaultInjector fb(fc);
  p.a->endpoint().set_faults(nullptr, &fa);
  p.b->endpoint().set_faults(nullptr, &fb);

  constexpr uint32_t kSignalEvery = 64;
  uint64_t posted = 0;
  bool failed = false;
  ResultEx res[32];
  dp::SendWqe w;
  w.opcode = dp::WrOpcode::kWrite;
  w.num_sge = 1;
  w.length = size;
  w.sge[0] = {reinterpret_cast<uint64_t>(p.src.data()), size, p.lkey};
  w.remote_addr = reinterpret_cast<uint64_t>(p.dst.data());
  w.rkey = p.rkey;
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) {
    for (;;) {
      w.flags = (posted + 1) % kSignalEvery == 0 ? 0 : op_flag::kSilentSuccess;
      if (p.qa->post_send(w) != Status::kSuccess) break;
      ++posted;
    }
    p.engine.run_once();
    const size_t n = p.acq->poll(res);
    for (size_t i = 0; i < n; ++i) failed |= res[i].status != Status::kSuccess;
    if (failed) {
      state.SkipWithError("completion error (retry exhausted?)");
      break;
    }
  }
  // Read on the engine's own thread (this one), right at the end of the timed loop.
  const dp::QpCounters c = p.qa->counters;
  const double elapsed_ns =
      std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
  const uint64_t completed = c.completions_ok;
  // Drain (bounded) so that no frame is left in flight when the ports close.
  for (uint64_t i = 0; i < 100'000'000 && !failed; ++i) {
    const auto& k = p.qa->counters;
    if (k.completions_ok + k.completions_error + k.completions_flushed == posted) break;
    p.engine.run_once();
    (void)p.acq->poll(res);
  }
  p.a->endpoint().set_faults(nullptr, nullptr);
  p.b->endpoint().set_faults(nullptr, nullptr);
  fa.clear();
  fb.clear();
  state.counters["Gbps"] = benchmark::Counter(static_cast<double>(completed) * size * 8 / 1e9,
                                              benchmark::Counter::kIsRate);
  state.counters["msgs_per_s"] =
      benchmark::Counter(static_cast<double>(completed), benchmark::Counter::kIsRate);
  state.counters["retransmits"] = static_cast<double>(c.retransmits);
  state.counters["timeouts"] = static_cast<double>(c.timeouts);
  state.counters["timer_share"] = static_cast<double>(c.timeouts) *
                                  static_cast<double>(dp::ack_timeout_ns(kLossyTimeout)) /
                                  elapsed_ns;
  state.counters["seq_naks"] = static_cast<double>(c.naks_received[0]);
  state.counters["sent"] = static_cast<double>(c.tx_packets);
  state.counters["dropped"] = static_cast<double>(fa.counters().dropped + fb.counters().dropped);
  state.SetItemsProcessed(static_cast<int64_t>(completed));
  state.SetBytesProcessed(static_cast<int64_t>(completed * size));
}
BENCHMARK(BM_RdmaWriteLossy)
    ->Args({65536, 0})
    ->Args({65536, 10000})
    ->Args({65536, 50000})
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
  urnic::ctl::EalOptions o;
  o.program = "bench_loopback";
  o.lcores = "0";
  o.memory_mb = 1024;
  if (urnic::ctl::eal_init(o) != urnic::Status::kSuccess) return 1;
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

// What the verbs layer adds per work request (issue 16, Targets: "the shim's cost per post and
// poll is measured"): bench_api's BM_WritePostPoll with the engine on the benchmark thread,
// through libibverbs' API on urnic's libibverbs.so.1 instead of the NDK-style API. 8-byte INLINE
// RDMA WRITEs between urnic0 and urnic1 (the library's in-memory pair), posted as a chain of
// `batch` work requests (one ibv_post_send: every WR but the last deferred, one doorbell), then
// polled to the last completion with ibv_poll_cq, whose short polls run the engine on this thread.
//   post_ns_min  ibv_post_send per WR, the least disturbed batch (compare bench_api's, defer=1)
//   ns_per_wr    everything per WR, engine steps included (compare bench_api's engine=0 rows)
// Run both in one go: build/bench/bench_api --benchmark_filter='/1/0' and build/bench/bench_verbs.
#include <benchmark/benchmark.h>
#include <infiniband/verbs.h>
#include <x86intrin.h>

#include <chrono>
#include <cstring>
#include <vector>

namespace {

struct Pair {
  Pair() {
    int n = 0;
    devs = ibv_get_device_list(&n);
    if (devs == nullptr || n < 2) return;
    for (int i = 0; i < 2; ++i) {
      ctx[i] = ibv_open_device(devs[i]);
      if (!ctx[i]) return;
      pd[i] = ibv_alloc_pd(ctx[i]);
      cq[i] = ibv_create_cq(ctx[i], 1024, nullptr, nullptr, 0);
      ibv_qp_init_attr a{};
      a.send_cq = a.recv_cq = cq[i];
      a.qp_type = IBV_QPT_RC;
      a.sq_sig_all = 1;
      a.cap.max_send_wr = 256;
      a.cap.max_recv_wr = 64;
      a.cap.max_send_sge = a.cap.max_recv_sge = 1;
      a.cap.max_inline_data = 64;
      if (!pd[i] || !cq[i] || !(qp[i] = ibv_create_qp(pd[i], &a))) return;
    }
    dst.assign(4096, 0);
    mr =
        ibv_reg_mr(pd[1], dst.data(), dst.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    ok = mr != nullptr && connect(0, 1) && connect(1, 0);
  }
  bool connect(int me, int peer) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
    if (ibv_modify_qp(qp[me], &a, IBV_QP_STATE | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) return false;
    a = {};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = IBV_MTU_1024;
    a.dest_qp_num = qp[peer]->qp_num;
    a.rq_psn = 1;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 12;
    a.ah_attr.is_global = 1;
    a.ah_attr.port_num = 1;
    a.ah_attr.grh.sgid_index = 1;
    a.ah_attr.grh.hop_limit = 64;
    if (ibv_query_gid(ctx[peer], 1, 1, &a.ah_attr.grh.dgid)) return false;
    if (ibv_modify_qp(qp[me], &a,
                      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                          IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
      return false;
    a = {};
    a.qp_state = IBV_QPS_RTS;
    a.sq_psn = 1;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 1;
    return ibv_modify_qp(qp[me], &a,
                         IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                             IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC) == 0;
  }
  ~Pair() {
    for (int i = 0; i < 2; ++i)
      if (qp[i]) ibv_destroy_qp(qp[i]);
    if (mr) ibv_dereg_mr(mr);
    for (int i = 0; i < 2; ++i) {
      if (cq[i]) ibv_destroy_cq(cq[i]);
      if (pd[i]) ibv_dealloc_pd(pd[i]);
      if (ctx[i]) ibv_close_device(ctx[i]);
    }
    if (devs) ibv_free_device_list(devs);
  }
  bool ok = false;
  ibv_device** devs = nullptr;
  ibv_context* ctx[2]{};
  ibv_pd* pd[2]{};
  ibv_cq* cq[2]{};
  ibv_qp* qp[2]{};
  ibv_mr* mr = nullptr;
  std::vector<uint8_t> dst;
};

double tsc_ns_per_cycle() {
  const auto t0 = std::chrono::steady_clock::now();
  const uint64_t c0 = __rdtsc();
  while (std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(50)) {
  }
  const uint64_t c1 = __rdtsc();
  const double ns =
      std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
  return ns / static_cast<double>(c1 - c0);
}

void BM_VerbsWritePostPoll(benchmark::State& state) {
  const auto batch = static_cast<int>(state.range(0));
  static Pair* p = new Pair();  // one device pair for the process (the adapters stay up anyway)
  if (!p->ok) {
    state.SkipWithError("verbs pair setup (urnic's libibverbs.so.1?)");
    return;
  }
  static const double ns_per_cycle = tsc_ns_per_cycle();
  uint64_t value = 0x0123456789ABCDEFull;
  ibv_sge sge{reinterpret_cast<uintptr_t>(&value), 8, 0};
  std::vector<ibv_send_wr> wr(batch);
  for (int k = 0; k < batch; ++k) {
    wr[k] = {};
    wr[k].sg_list = &sge;
    wr[k].num_sge = 1;
    wr[k].opcode = IBV_WR_RDMA_WRITE;
    wr[k].send_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED;
    wr[k].wr.rdma.remote_addr = reinterpret_cast<uintptr_t>(p->dst.data());
    wr[k].wr.rdma.rkey = p->mr->rkey;
    wr[k].next = k + 1 < batch ? &wr[k + 1] : nullptr;
  }
  ibv_wc wc[64];
  uint64_t wrs = 0, post_min = UINT64_MAX;
  bool failed = false;
  for (auto _ : state) {
    ibv_send_wr* bad = nullptr;
    const uint64_t t0 = __rdtsc();
    failed |= ibv_post_send(p->qp[0], wr.data(), &bad) != 0;
    const uint64_t dt = __rdtsc() - t0;
    post_min = dt < post_min ? dt : post_min;
    for (int got = 0; got < batch && !failed;) {
      const int n = ibv_poll_cq(p->cq[0], 64, wc);
      failed |= n < 0;
      for (int i = 0; i < n; ++i) failed |= wc[i].status != IBV_WC_SUCCESS;
      got += n;
    }
    wrs += static_cast<uint64_t>(batch);
    if (failed) {
      state.SkipWithError("post or completion failed");
      break;
    }
  }
  state.SetItemsProcessed(static_cast<int64_t>(wrs));
  state.counters["ns_per_wr"] = benchmark::Counter(
      static_cast<double>(wrs), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["post_ns_min"] = static_cast<double>(post_min) * ns_per_cycle / batch;
}

BENCHMARK(BM_VerbsWritePostPoll)->ArgNames({"batch"})->Arg(1)->Arg(8)->Arg(32);

}  // namespace

BENCHMARK_MAIN();

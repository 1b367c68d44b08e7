// Two adapters of the public API (include/urnic/) wired back to back over a net_ring pair in one
// process, served by one engine that the test thread drives with run_once() (deterministic) or
// that runs on lcore 1. Only EAL bring-up and the ring pair come from control/eal.h (NDIS's job
// in NDK); everything else goes through the public API, the way a consumer uses it.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "control/eal.h"
#include "urnic/urnic.h"

namespace urnic {
// gtest prints a Status by its NTSTATUS name.
inline void PrintTo(Status s, std::ostream* os) { *os << to_string(s); }
}  // namespace urnic

namespace urnic::test {

inline void eal_up_once() {
  ctl::EalOptions o;
  o.memory = ctl::EalOptions::Memory::kNoHuge;
  o.lcores = "0-1";
  ASSERT_EQ(ctl::eal_init(o), Status::kSuccess);
}

inline uint64_t addr(const void* p) { return reinterpret_cast<uint64_t>(p); }
inline void* ctx(uintptr_t i) { return reinterpret_cast<void*>(0x1000 + i); }

// One side: adapter, PD, one CQ for both queues, one QP, and the completions collected.
struct Side {
  std::unique_ptr<Adapter> adapter;
  Handle<Pd> pd;
  Handle<Cq> cq;
  Handle<Qp> qp;
  std::vector<ResultEx> done;  // completions of `cq`, in order

  LocalAddress address() { return adapter->query_extension<AdapterExtension>()->local_address(); }
  // Registers `len` bytes at `p`; the MR handle keeps it registered.
  Handle<Mr> reg(const void* p, size_t len, uint32_t flags) {
    Handle<Mr> mr;
    EXPECT_EQ(pd->create_mr(false, nullptr, nullptr, &mr), Status::kSuccess);
    EXPECT_EQ(mr->register_mr(p, len, flags, nullptr, nullptr), Status::kSuccess);
    return mr;
  }
  std::vector<ResultEx> take(OperationType type) {
    std::vector<ResultEx> out;
    for (const auto& r : done)
      if (r.type == type) out.push_back(r);
    return out;
  }
};

// Attributes the pair is connected with (perftest's defaults; a short RNR timer).
struct ConnectParams {
  uint32_t mtu = 1024;
  uint8_t timeout = 14;
  uint8_t retry_cnt = 7;
  uint8_t rnr_retry = 7;
  uint8_t min_rnr_timer = 1;  // 10 us
  uint8_t read_limit = 16;
};

class ApiPair {
 public:
  // `name` must be unique in the process (it names the rings).
  explicit ApiPair(const std::string& name, const EngineConfig& ec = {}, uint32_t cq_depth = 4096)
      : engine_(ec) {
    uint16_t pa = 0, pb = 0;
    EXPECT_EQ(ctl::create_ring_pair(name, 1, &pa, &pb), Status::kSuccess);
    AdapterConfig ca, cb;
    ca.port_id = pa;
    cb.port_id = pb;
    ca.mbufs = cb.mbufs = 8191;
    ca.ipv4 = 0xC0000201;  // 192.0.2.1
    cb.ipv4 = 0xC0000202;
    ca.mac = std::array<uint8_t, 6>{2, 0, 0, 0, 0, 1};
    cb.mac = std::array<uint8_t, 6>{2, 0, 0, 0, 0, 2};
    ca.key_seed = 0x1234;
    cb.key_seed = 0x5678;
    EXPECT_EQ(Adapter::open(ca, engine_, &a.adapter), Status::kSuccess);
    EXPECT_EQ(Adapter::open(cb, engine_, &b.adapter), Status::kSuccess);
    for (Side* s : {&a, &b}) {
      EXPECT_EQ(s->adapter->create_pd(nullptr, nullptr, &s->pd), Status::kSuccess);
      EXPECT_EQ(s->adapter->create_cq(cq_depth, nullptr, nullptr, nullptr, nullptr, &s->cq),
                Status::kSuccess);
    }
  }
  ~ApiPair() {
    // Objects before their adapter: handles close them; the adapter's close waits for that.
    for (Side* s : {&a, &b}) {
      s->qp.reset();
      s->cq.reset();
      s->pd.reset();
    }
    a.adapter.reset();
    b.adapter.reset();
    engine_.stop();
  }

  // Creates a QP on each side (synchronously) and connects them.
  void connect(const ConnectParams& cp = {}, uint32_t depth = 256) {
    for (Side* s : {&a, &b}) {
      ASSERT_EQ(
          s->pd->create_qp(*s->cq, *s->cq, s, depth, depth, 16, 16, 256, nullptr, nullptr, &s->qp),
          Status::kSuccess);
    }
    connect_qps(a, *a.qp, b, *b.qp, cp);
  }

  // Moves two QPs INIT -> RTR -> RTS towards each other with the manual-connect extension.
  static void connect_qps(Side& sa, Qp& qa, Side& sb, Qp& qb, const ConnectParams& cp = {}) {
    bring_up(qa, qb, sb.address(), cp, 0x10000, 0x20000);
    bring_up(qb, qa, sa.address(), cp, 0x20000, 0x10000);
  }
  static void bring_up(Qp& q, Qp& peer, const LocalAddress& peer_addr, const ConnectParams& cp,
                       uint32_t sq_psn, uint32_t rq_psn) {
    auto* ext = q.query_extension<QpConnectExtension>();
    auto* pext = peer.query_extension<QpConnectExtension>();
    ASSERT_NE(ext, nullptr);
    QpAttributes at;
    at.state = QpState::kRtr;
    at.av.dst_ipv4 = peer_addr.ipv4;
    at.av.dst_mac = peer_addr.mac;
    at.path_mtu = cp.mtu;
    at.dest_qpn = pext->qpn();
    at.rq_psn = rq_psn;
    at.max_dest_rd_atomic = cp.read_limit;
    at.min_rnr_timer = cp.min_rnr_timer;
    using namespace qp_attr_mask;
    ASSERT_EQ(ext->modify(
                  at, kState | kAv | kPathMtu | kDestQpn | kRqPsn | kMaxDestRdAtomic | kMinRnrTimer,
                  nullptr, nullptr),
              Status::kSuccess);
    at.state = QpState::kRts;
    at.sq_psn = sq_psn;
    at.timeout = cp.timeout;
    at.retry_cnt = cp.retry_cnt;
    at.rnr_retry = cp.rnr_retry;
    at.max_rd_atomic = cp.read_limit;
    ASSERT_EQ(ext->modify(at, kState | kSqPsn | kTimeout | kRetryCnt | kRnrRetry | kMaxRdAtomic,
                          nullptr, nullptr),
              Status::kSuccess);
  }

  // Drives the engine (or waits for it, when it runs on an lcore) until `pred` holds or
  // `timeout` passes, collecting completions of both CQs. Control-thread callbacks need real
  // time (the thread naps up to 1 ms), so the bound is a time, not a step count.
  bool run_until(const std::function<bool()>& pred,
                 std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      for (int i = 0; i < 64; ++i) {
        if (!engine_.running()) engine_.run_once();
        collect();
        if (pred()) return true;
      }
      if (std::chrono::steady_clock::now() > deadline) return false;
      if (engine_.running()) std::this_thread::yield();
    }
  }
  // Runs for `d` (to show that nothing more happens).
  void run_for(std::chrono::milliseconds d) {
    (void)run_until([] { return false; }, d);
  }
  void collect() {
    ResultEx r[32];
    for (Side* s : {&a, &b}) {
      if (!s->cq) continue;
      for (size_t n; (n = s->cq->get_results_ex(r)) != 0;) s->done.insert(s->done.end(), r, r + n);
    }
  }
  bool wait_done(size_t a_n, size_t b_n) {
    return run_until([&] { return a.done.size() >= a_n && b.done.size() >= b_n; });
  }

  Engine& engine() { return engine_; }

  Engine engine_;  // declared first: destroyed after the sides' adapters
  Side a, b;
};

// A completion callback that records one status (for kPending requests).
struct Completion {
  std::atomic<int> calls{0};
  Status status = Status::kPending;
  Object* object = nullptr;
  static void on_request(void* c, Status s) {
    auto* self = static_cast<Completion*>(c);
    self->status = s;
    self->calls.fetch_add(1, std::memory_order_release);
  }
  static void on_create(void* c, Status s, Object* o) {
    auto* self = static_cast<Completion*>(c);
    self->status = s;
    self->object = o;
    self->calls.fetch_add(1, std::memory_order_release);
  }
  static void on_close(void* c) {
    static_cast<Completion*>(c)->calls.fetch_add(1, std::memory_order_release);
  }
  int count() const { return calls.load(std::memory_order_acquire); }
};

// Deterministic byte pattern.
inline void fill(std::vector<uint8_t>& v, uint32_t seed) {
  uint32_t x = seed * 2654435761u + 1;
  for (auto& b : v) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    b = static_cast<uint8_t>(x);
  }
}

}  // namespace urnic::test

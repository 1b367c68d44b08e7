// Two adapters wired back to back over a net_ring pair in one process, both served by one
// engine that the test thread drives with run_once() (deterministic, no extra core needed), or
// that runs on a DPDK lcore when a test asks for it.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "control/adapter.h"
#include "control/eal.h"
#include "dataplane/cq.h"
#include "dataplane/engine.h"
#include "dataplane/mr.h"
#include "dataplane/qp.h"

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

// The remote rights connect() grants its QPs by default.
constexpr uint32_t kRemoteAccess =
    dp::access::kRemoteRead | dp::access::kRemoteWrite | dp::access::kRemoteAtomic;

// One side of a connection: adapter, PD, CQs and a QP.
struct Side {
  std::unique_ptr<ctl::Adapter> adapter;
  uint32_t pd = 0;
  std::unique_ptr<dp::Cq> scq, rcq;
  dp::Qp* qp = nullptr;
  std::vector<ResultEx> send_done, recv_done;  // completions collected by the fixture

  // Registers a buffer; returns its key.
  uint32_t reg(const void* addr, size_t len, uint32_t mr_flags) {
    uint32_t key = 0;
    EXPECT_EQ(adapter->register_mr(pd, addr, len, mr_flags, &key), Status::kSuccess);
    return key;
  }

  // What create_qp needs for a QP of this side's PD on its two CQs.
  ctl::QpInit qp_init(void* context, uint32_t sq_depth, uint32_t rq_depth) const {
    return {.pd = pd,
            .send_cq = scq.get(),
            .recv_cq = rcq.get(),
            .context = context,
            .sq_depth = sq_depth,
            .rq_depth = rq_depth};
  }
};

class RcPair {
 public:
  // `name` must be unique in the process (it names the rings).
  explicit RcPair(const std::string& name, dp::EngineConfig ecfg = {}) : engine_(ecfg) {
    uint16_t pa = 0, pb = 0;
    EXPECT_EQ(ctl::create_ring_pair(name, 1, &pa, &pb), Status::kSuccess);
    ctl::AdapterConfig ca, cb;
    ca.port_id = pa;
    cb.port_id = pb;
    ca.port.mbufs = cb.port.mbufs = 8191;
    ca.ipv4 = 0xC0000201;  // 192.0.2.1
    cb.ipv4 = 0xC0000202;
    ca.ipv6 = wire::Ipv6Addr{0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    cb.ipv6 = wire::Ipv6Addr{0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
    ca.mac = wire::MacAddr{2, 0, 0, 0, 0, 1};
    cb.mac = wire::MacAddr{2, 0, 0, 0, 0, 2};
    ca.key_seed = 0x1234;
    cb.key_seed = 0x5678;
    EXPECT_EQ(ctl::Adapter::open(ca, &engine_, &a.adapter), Status::kSuccess);
    EXPECT_EQ(ctl::Adapter::open(cb, &engine_, &b.adapter), Status::kSuccess);
    for (Side* s : {&a, &b}) {
      s->pd = s->adapter->alloc_pd();
      EXPECT_EQ(s->adapter->create_cq(4096, &s->scq), Status::kSuccess);
      EXPECT_EQ(s->adapter->create_cq(4096, &s->rcq), Status::kSuccess);
    }
  }
  ~RcPair() {
    engine_.stop();
    // Frames cross over net_ring, so each adapter's control thread handles mbufs of the other
    // adapter's pool: both threads stop (join) before either pool goes (TSan found b's control
    // thread racing the destruction of a's pool).
    for (Side* s : {&a, &b})
      if (s->adapter) s->adapter->control().stop();
    a.adapter.reset();
    b.adapter.reset();
  }

  // Creates a QP on each side and connects them (RESET -> INIT -> RTR -> RTS).
  void connect(uint32_t mtu, bool ipv6 = false, uint32_t sq_depth = 256, uint32_t rq_depth = 256,
               uint32_t access = kRemoteAccess) {
    for (Side* s : {&a, &b})
      ASSERT_EQ(s->adapter->create_qp(s->qp_init(s, sq_depth, rq_depth), &s->qp), Status::kSuccess);
    bring_up(a, b, mtu, ipv6, access, 0x10000, 0x20000);
    bring_up(b, a, mtu, ipv6, access, 0x20000, 0x10000);
  }

  void bring_up(Side& s, Side& peer, uint32_t mtu, bool ipv6, uint32_t access, uint32_t sq_psn,
                uint32_t rq_psn) {
    bring_up(s, s.qp, peer, peer.qp, mtu, ipv6, access, sq_psn, rq_psn);
  }

  // The same for any QP `qp` of side `s` (one connect() did not create, too), towards QP
  // `peer_qp` of side `peer`.
  void bring_up(Side& s, dp::Qp* qp, const Side& peer, const dp::Qp* peer_qp, uint32_t mtu,
                bool ipv6, uint32_t access, uint32_t sq_psn, uint32_t rq_psn) {
    dp::QpAttr at;
    at.state = dp::QpState::kInit;
    at.access = access;
    ASSERT_EQ(s.adapter->modify_qp(qp, at, dp::qp_attr::kState | dp::qp_attr::kAccessFlags),
              Status::kSuccess);
    at.state = dp::QpState::kRtr;
    at.av = s.adapter->address_to(*peer.adapter, ipv6);
    at.path_mtu = mtu;
    at.dest_qpn = peer_qp->qpn();
    at.rq_psn = rq_psn;
    at.max_dest_rd_atomic = max_rd_atomic;
    at.min_rnr_timer = min_rnr_timer;
    using namespace dp::qp_attr;
    ASSERT_EQ(
        s.adapter->modify_qp(
            qp, at, kState | kAv | kPathMtu | kDestQpn | kRqPsn | kMaxDestRdAtomic | kMinRnrTimer),
        Status::kSuccess);
    at.state = dp::QpState::kRts;
    at.sq_psn = sq_psn;
    at.timeout = timeout;
    at.retry_cnt = retry_cnt;
    at.rnr_retry = rnr_retry;
    at.max_rd_atomic = max_rd_atomic;
    ASSERT_EQ(s.adapter->modify_qp(
                  qp, at, kState | kSqPsn | kTimeout | kRetryCnt | kRnrRetry | kMaxRdAtomic),
              Status::kSuccess);
  }

  // Drives the engine until `done()` holds or `max_steps` steps pass; collects completions.
  // When the engine runs on its own lcore, waits (polling the CQs) for at most 60 s instead.
  bool run_until(const std::function<bool()>& done, uint64_t max_steps = 20'000'000) {
    if (engine_.running()) {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      while (std::chrono::steady_clock::now() < deadline) {
        collect();
        if (done()) return true;
      }
      return false;
    }
    for (uint64_t i = 0; i < max_steps; ++i) {
      engine_.run_once();
      collect();
      if (done()) return true;
    }
    return false;
  }
  void collect() {
    ResultEx r[64];
    for (Side* s : {&a, &b}) {
      for (size_t n; (n = s->scq->poll(r)) != 0;) s->send_done.insert(s->send_done.end(), r, r + n);
      for (size_t n; (n = s->rcq->poll(r)) != 0;) s->recv_done.insert(s->recv_done.end(), r, r + n);
    }
  }
  // Runs until each side has at least the given number of send / receive completions.
  bool wait(size_t a_send, size_t b_recv, size_t b_send = 0, size_t a_recv = 0) {
    return run_until([&] {
      return a.send_done.size() >= a_send && b.recv_done.size() >= b_recv &&
             b.send_done.size() >= b_send && a.recv_done.size() >= a_recv;
    });
  }

  dp::Engine& engine() { return engine_; }

  // Requester attributes applied at RTS by connect() (defaults: perftest's).
  uint8_t timeout = 14;
  uint8_t retry_cnt = 7;
  uint8_t rnr_retry = 7;
  uint8_t min_rnr_timer = 1;  // 10 us: RNR tests stay fast
  uint8_t max_rd_atomic = 16;

  Side a, b;

 private:
  dp::Engine engine_;
};

// Deterministic byte pattern for message `seed`.
inline void fill(std::vector<uint8_t>& v, uint32_t seed) {
  uint32_t x = seed * 2654435761u + 1;
  for (auto& b : v) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    b = static_cast<uint8_t>(x);
  }
}

inline dp::SendWqe wqe(dp::WrOpcode op, void* ctx, uint32_t flags = 0) {
  dp::SendWqe w;
  w.opcode = op;
  w.request_context = ctx;
  w.flags = flags;
  return w;
}

// Every right a peer can be granted on a region, and local write.
constexpr uint32_t kRemoteAll = mr_flag::kAllowLocalWrite | mr_flag::kAllowRemoteWrite |
                                mr_flag::kAllowRemoteRead | mr_flag::kAllowRemoteAtomic;

// A work request of one SGE: `len` bytes at `local` (key `lkey`), for a WRITE or READ towards
// `raddr` (key `rkey`).
inline dp::SendWqe data_wr(dp::WrOpcode op, void* context, const void* local, uint32_t len,
                           uint32_t lkey, uint64_t raddr = 0, uint32_t rkey = 0) {
  dp::SendWqe w = wqe(op, context);
  w.num_sge = 1;
  w.length = len;
  w.sge[0] = {reinterpret_cast<uint64_t>(local), len, lkey};
  w.remote_addr = raddr;
  w.rkey = rkey;
  return w;
}

// A receive of one SGE: `len` bytes at `buf`.
inline dp::RecvWqe recv_wr(void* context, const void* buf, uint32_t len, uint32_t key) {
  dp::RecvWqe r;
  r.request_context = context;
  r.num_sge = 1;
  r.length = len;
  r.sge[0] = {reinterpret_cast<uint64_t>(buf), len, key};
  return r;
}

// A completion: its NTSTATUS, the verbs status (in provider_error_code), type and context.
inline void expect_result(const ResultEx& r, Status st, WcStatus wc, OperationType type,
                          const void* context) {
  EXPECT_EQ(r.status, st);
  EXPECT_EQ(r.provider_error_code, static_cast<uint32_t>(wc));
  EXPECT_EQ(r.type, type);
  EXPECT_EQ(r.request_context, context);
}

inline void expect_flushed(const ResultEx& r, OperationType type, const void* context) {
  expect_result(r, Status::kCancelled, WcStatus::kWrFlushErr, type, context);
}

}  // namespace urnic::test

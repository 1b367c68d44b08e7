// The RC loopback and fault suites' fixture: an adapter pair (tests/common/adapter_pair.h) where
// each side has a PD, a send and a receive CQ and, once connect() ran, one QP, all created and
// driven through the public API. Tests describe work requests as the dataplane's SendWqe /
// RecvWqe (one struct for every operation, convenient for tables of cases); TestQp posts them
// through urnic::Qp and its extensions exactly as an application would, so these suites cover
// the public post path. A test that inspects an internal stage on purpose reaches it through
// TestQp::internal() or RcPair::dp_engine() and says so.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "../common/adapter_pair.h"
#include "control/ndk_internal.h"
#include "dataplane/mr.h"
#include "dataplane/qp.h"

namespace urnic::test {

// The remote rights connect() grants its QPs by default.
constexpr uint32_t kRemoteAccess = qp_access::kAll;

// One QP of a side, posted to through the public API.
class TestQp {
 public:
  explicit TestQp(Handle<Qp> h)
      : h_(std::move(h)),
        ext_(h_->query_extension<QpExtension>()),
        conn_(h_->query_extension<QpConnectExtension>()) {}

  // Posts `w` with the public call its opcode names (Qp::send / write / read, QpExtension's
  // immediate and atomic calls). Memory registration work requests (fast register, bind, local
  // invalidate) name MR / MW objects in the public API: post those with public().
  Status post_send(const dp::SendWqe& w) noexcept {
    using dp::WrOpcode;
    Sge inl{};
    std::span<const Sge> sgl(w.sge, w.num_sge);
    if ((w.flags & op_flag::kInline) != 0) {
      inl = Sge{addr(w.inline_data), w.length, 0};
      sgl = std::span<const Sge>(&inl, w.length != 0 ? 1 : 0);
    }
    void* c = w.request_context;
    switch (w.opcode) {
      case WrOpcode::kSend:
        return h_->send(c, sgl, w.flags);
      case WrOpcode::kSendWithImm:
        return ext_->send_with_immediate(c, sgl, w.flags, w.imm_or_inv);
      case WrOpcode::kSendWithInv:
        return h_->send_and_invalidate(c, sgl, w.flags, w.imm_or_inv);
      case WrOpcode::kWrite:
        return h_->write(c, sgl, w.remote_addr, w.rkey, w.flags);
      case WrOpcode::kWriteWithImm:
        return ext_->write_with_immediate(c, sgl, w.remote_addr, w.rkey, w.flags, w.imm_or_inv);
      case WrOpcode::kRead:
        return h_->read(c, sgl, w.remote_addr, w.rkey, w.flags);
      case WrOpcode::kCompareSwap:
        return ext_->compare_swap(c, w.sge[0], w.remote_addr, w.rkey, w.compare_add, w.swap,
                                  w.flags);
      case WrOpcode::kFetchAdd:
        return ext_->fetch_add(c, w.sge[0], w.remote_addr, w.rkey, w.compare_add, w.flags);
      default:
        return Status::kNotSupported;
    }
  }
  Status post_recv(const dp::RecvWqe& r) noexcept {
    return h_->receive(r.request_context, std::span<const Sge>(r.sge, r.num_sge));
  }
  void flush() noexcept { h_->flush(); }

  QpCounters counters() const noexcept { return ext_->counters(); }  // a snapshot
  // The engine's counters themselves, read live (for a test that keeps a reference across
  // engine steps).
  const QpCounters& live_counters() noexcept { return internal().counters(); }
  QpState state() const noexcept { return conn_->state(); }
  uint32_t qpn() const noexcept { return conn_->qpn(); }
  Qp& public_qp() noexcept { return *h_; }
  Handle<Qp>& handle() noexcept { return h_; }
  // The engine's QP behind it: for tests that inspect an internal stage on purpose.
  dp::Qp& internal() noexcept { return detail::dp_qp(*h_); }

 private:
  Handle<Qp> h_;
  QpExtension* ext_;
  QpConnectExtension* conn_;
};

// One side of a connection: adapter, PD, CQs and QPs.
struct Side {
  std::unique_ptr<Adapter> adapter;
  Handle<Pd> pd;
  Handle<Cq> scq, rcq;
  std::vector<Handle<Mr>> mrs;
  std::vector<std::unique_ptr<TestQp>> qps;
  TestQp* qp = nullptr;                        // the QP connect() made
  std::vector<ResultEx> send_done, recv_done;  // completions collected by the fixture

  // Registers a buffer (an MR held until the side goes, or deregister()); returns its token.
  uint32_t reg(const void* p, size_t len, uint32_t mr_flags) {
    Handle<Mr> mr;
    EXPECT_EQ(pd->create_mr(false, nullptr, nullptr, &mr), Status::kSuccess);
    if (!mr) return 0;
    EXPECT_EQ(mr->register_mr(p, len, mr_flags, nullptr, nullptr), Status::kSuccess);
    const uint32_t key = mr->get_local_token();
    mrs.push_back(std::move(mr));
    return key;
  }
  // Deregisters the region registered with token `key`.
  Status deregister(uint32_t key) {
    auto it = std::find_if(mrs.begin(), mrs.end(),
                           [&](const Handle<Mr>& m) { return m->get_local_token() == key; });
    if (it == mrs.end()) return Status::kInvalidParameter;
    const Status s = (*it)->deregister_mr(nullptr, nullptr);
    mrs.erase(it);
    return s;
  }
  // A QP of this side's PD on its two CQs, in INIT (synchronous create).
  Status create_qp(void* context, uint32_t sq_depth, uint32_t rq_depth, TestQp** out) {
    Handle<Qp> h;
    const Status s = pd->create_qp(*rcq, *scq, context, rq_depth, sq_depth, dp::kMaxSge,
                                   dp::kMaxSge, dp::kMaxInline, nullptr, nullptr, &h);
    if (s != Status::kSuccess) return s;
    qps.push_back(std::make_unique<TestQp>(std::move(h)));
    *out = qps.back().get();
    return s;
  }
  // Closes `q` (its close completes on the control thread once the engine flushed and detached
  // it; the caller keeps the engine running until then, e.g. with RcPair::close_qps).
  void destroy_qp(TestQp* q) {
    std::erase_if(qps, [&](const auto& p) { return p.get() == q; });
    if (qp == q) qp = nullptr;
  }
};

class RcPair : public AdapterPair<Side> {
 public:
  // `name` must be unique in the process (it names the rings).
  explicit RcPair(const std::string& name, EngineConfig ecfg = {}, bool adaptive_retransmit = false)
      : AdapterPair(name, ecfg, 8191, adaptive_retransmit) {
    for (Side* s : {&a, &b}) {
      EXPECT_EQ(s->adapter->create_pd(nullptr, nullptr, &s->pd), Status::kSuccess);
      EXPECT_EQ(s->adapter->create_cq(4096, nullptr, nullptr, nullptr, nullptr, &s->scq),
                Status::kSuccess);
      EXPECT_EQ(s->adapter->create_cq(4096, nullptr, nullptr, nullptr, nullptr, &s->rcq),
                Status::kSuccess);
    }
  }
  ~RcPair() override {
    // Objects before their adapter (the adapter's close waits for pending closes).
    for (Side* s : {&a, &b}) {
      s->qp = nullptr;
      s->qps.clear();
      s->mrs.clear();
      s->scq.reset();
      s->rcq.reset();
      s->pd.reset();
    }
  }

  // Creates a QP on each side and connects them (INIT -> RTR -> RTS).
  void connect(uint32_t mtu, bool ipv6 = false, uint32_t sq_depth = 256, uint32_t rq_depth = 256,
               uint32_t access = kRemoteAccess) {
    for (Side* s : {&a, &b})
      ASSERT_EQ(s->create_qp(s, sq_depth, rq_depth, &s->qp), Status::kSuccess);
    bring_up(a, *a.qp, b, *b.qp, mtu, ipv6, access, 0x10000, 0x20000);
    bring_up(b, *b.qp, a, *a.qp, mtu, ipv6, access, 0x20000, 0x10000);
  }

  // The same for the sides' current QPs.
  void bring_up(Side& s, Side& peer, uint32_t mtu, bool ipv6, uint32_t access, uint32_t sq_psn,
                uint32_t rq_psn) {
    bring_up(s, *s.qp, peer, *peer.qp, mtu, ipv6, access, sq_psn, rq_psn);
  }

  // Closes QP `q` of side `s` and drives the engine until the close completed: its work is
  // flushed and it is detached from the engine, so its QPN names no QP from then on. False if
  // that takes longer than `max_steps` engine steps.
  bool destroy_qp(Side& s, TestQp* q, uint64_t max_steps = 20'000'000) {
    Completion done;
    const Status st = q->handle().close(&Completion::on_close, &done);
    s.destroy_qp(q);
    if (st == Status::kSuccess) return true;
    return st == Status::kPending && run_until([&] { return done.count() > 0; }, max_steps);
  }

  // Connects QP `qp` of side `s` (one connect() did not create, too) towards QP `peer_qp` of
  // side `peer`, with the requester attributes below.
  void bring_up(Side&, TestQp& qp, Side& peer, TestQp& peer_qp, uint32_t mtu, bool ipv6,
                uint32_t access, uint32_t sq_psn, uint32_t rq_psn) {
    ConnectParams cp;
    cp.mtu = mtu;
    cp.ipv6 = ipv6;
    cp.access = access;
    cp.timeout = timeout;
    cp.retry_cnt = retry_cnt;
    cp.rnr_retry = rnr_retry;
    cp.min_rnr_timer = min_rnr_timer;
    cp.read_limit = max_rd_atomic;
    test::bring_up(qp.public_qp(), peer_qp.public_qp(), address_of(*peer.adapter), cp, sq_psn,
                   rq_psn);
  }

  // Drives the engine until `done()` holds or `max_steps` steps pass; collects completions.
  // The data path needs no control thread, so a step count (deterministic) bounds it. When the
  // engine runs on its own lcore, waits (polling the CQs) for at most 60 s instead.
  bool run_until(const std::function<bool()>& done, uint64_t max_steps = 20'000'000) {
    if (engine_.running()) return AdapterPair::run_until(done, std::chrono::seconds(60));
    for (uint64_t i = 0; i < max_steps; ++i) {
      engine_.run_once();
      collect();
      if (done()) return true;
    }
    return false;
  }
  void collect() override {
    ResultEx r[64];
    for (Side* s : {&a, &b}) {
      if (s->scq)
        for (size_t n; (n = s->scq->get_results_ex(r)) != 0;)
          s->send_done.insert(s->send_done.end(), r, r + n);
      if (s->rcq)
        for (size_t n; (n = s->rcq->get_results_ex(r)) != 0;)
          s->recv_done.insert(s->recv_done.end(), r, r + n);
    }
  }
  // Runs until each side has at least the given number of send / receive completions.
  bool wait(size_t a_send, size_t b_recv, size_t b_send = 0, size_t a_recv = 0) {
    return run_until([&] {
      return a.send_done.size() >= a_send && b.recv_done.size() >= b_recv &&
             b.send_done.size() >= b_send && a.recv_done.size() >= a_recv;
    });
  }
  // Waits (without stepping the engine) until the control thread has handed every queued
  // engine operation of `s` (flush, modify, destroy) to the engine's mailbox, so that the next
  // engine step applies it before any packet work: for tests that need an asynchronous call
  // such as Qp::flush to take effect at a known point of the packet stream. False after 10 s.
  static bool wait_submitted(Side& s) {
    detail::AdapterImpl& a = s.adapter->impl();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      {
        std::lock_guard lk(a.mu);
        if (std::all_of(a.ops.begin(), a.ops.end(), [](const auto& op) { return op->submitted; }))
          return true;
      }
      std::this_thread::yield();
    }
    return false;
  }

  // The internal adapter behind a side: for tests that inspect its port or pool on purpose.
  static ctl::Adapter& internal(Side& s) { return *s.adapter->impl().ctl; }
  // The engine's CQ behind a public one (overrun, produced and dropped counts).
  static dp::Cq& internal(Cq& cq) { return detail::CqImpl::of(cq)->cq; }
  // The engine itself: for tests that step it with a synthetic clock or inspect it on purpose.
  dp::Engine& dp_engine() { return engine_.impl().dp; }

  // Requester attributes applied at RTS by connect() (defaults: perftest's).
  uint8_t timeout = 14;
  uint8_t retry_cnt = 7;
  uint8_t rnr_retry = 7;
  uint8_t min_rnr_timer = 1;  // 10 us: RNR tests stay fast
  uint8_t max_rd_atomic = 16;
};

// ---- Memory the tests check byte for byte --------------------------------------------------

// Bytes on each side of a registered region that no operation may touch.
constexpr size_t kGuard = 64;

// Host memory with a registered region in the middle and kGuard bytes before and after it, all
// filled with a pattern.
struct Guarded {
  Guarded(size_t n, uint32_t seed) : bytes(n + 2 * kGuard) { fill(bytes, seed); }
  uint8_t* region() { return bytes.data() + kGuard; }
  size_t size() const { return bytes.size() - 2 * kGuard; }
  uint64_t va() { return addr(region()); }
  std::vector<uint8_t> snapshot() const { return bytes; }
  // The region's bytes [off, off + len).
  std::vector<uint8_t> part(size_t off, size_t len) const {
    const auto b = bytes.begin() + static_cast<ptrdiff_t>(kGuard + off);
    return {b, b + static_cast<ptrdiff_t>(len)};
  }
  uint64_t word(size_t off) const {
    uint64_t w = 0;
    std::memcpy(&w, bytes.data() + kGuard + off, sizeof(w));
    return w;
  }
  void set_word(size_t off, uint64_t w) { std::memcpy(bytes.data() + kGuard + off, &w, sizeof(w)); }
  std::vector<uint8_t> bytes;
};

// `before` (a Guarded snapshot) with `data` placed at region offset `off`: what the memory must
// hold after an operation wrote exactly `data` there and nothing else.
inline std::vector<uint8_t> with(std::vector<uint8_t> before, size_t off,
                                 const std::vector<uint8_t>& data) {
  std::copy(data.begin(), data.end(), before.begin() + static_cast<ptrdiff_t>(kGuard + off));
  return before;
}

// Index of the first byte where `a` and `b` differ, or -1.
inline long first_diff(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  if (a.size() != b.size()) return 0;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i]) return static_cast<long>(i);
  return -1;
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

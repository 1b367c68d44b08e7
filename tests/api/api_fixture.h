// The public-API suites' fixture (tests/api/, and the CM suite's cm_ndk_test.cc): an adapter
// pair (tests/common/adapter_pair.h) where each side has a PD, one CQ for both queues and, once
// connect() ran, one QP.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "../common/adapter_pair.h"

namespace urnic::test {

inline void* ctx(uintptr_t i) { return reinterpret_cast<void*>(0x1000 + i); }

// How long a test runs the engine to show that nothing more happens.
constexpr auto kQuiet = std::chrono::milliseconds(30);

// An IPv4 address and port (host byte order) as the CM's sockaddr_in, and as a sockaddr.
inline sockaddr_in v4(uint32_t ip, uint16_t port) {
  sockaddr_in s{};
  s.sin_family = AF_INET;
  s.sin_addr.s_addr = htonl(ip);
  s.sin_port = htons(port);
  return s;
}
inline const sockaddr* sa(const sockaddr_in& s) { return reinterpret_cast<const sockaddr*>(&s); }

// Polls `f` every millisecond (from a thread other than the engine's) until it holds or `t` has
// passed; whether it held.
template <typename F>
bool eventually(F f, std::chrono::milliseconds t = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + t;
  while (!f()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// One side: adapter, PD, one CQ for both queues, one QP, and the completions collected.
struct Side {
  std::unique_ptr<Adapter> adapter;
  Handle<Pd> pd;
  Handle<Cq> cq;
  Handle<Qp> qp;
  std::vector<ResultEx> done;  // completions of `cq`, in order

  LocalAddress address() { return address_of(*adapter); }
  // Registers `len` bytes at `p`; the MR handle keeps it registered.
  Handle<Mr> reg(const void* p, size_t len, uint32_t flags) {
    Handle<Mr> mr;
    EXPECT_EQ(pd->create_mr(false, nullptr, nullptr, &mr), Status::kSuccess);
    EXPECT_EQ(mr->register_mr(p, len, flags, nullptr, nullptr), Status::kSuccess);
    return mr;
  }
  // A fast-register MR of this side's PD, initialised for `npages` pages (with remote access
  // unless `remote` is false); the handle keeps it.
  Handle<Mr> fast_mr(uint32_t npages, bool remote = true) {
    Handle<Mr> mr;
    EXPECT_EQ(pd->create_mr(true, nullptr, nullptr, &mr), Status::kSuccess);
    if (mr) {
      EXPECT_EQ(mr->initialize_fast_register_mr(npages, remote, nullptr, nullptr),
                Status::kSuccess);
    }
    return mr;
  }
  std::vector<ResultEx> take(OperationType type) {
    std::vector<ResultEx> out;
    for (const auto& r : done)
      if (r.type == type) out.push_back(r);
    return out;
  }
};

// 64 bytes registered on one side for local writes (receives, READ sinks), and an SGE over the
// first `len` of them.
struct LocalBuffer {
  LocalBuffer(Side& side, uint32_t len)
      : mr(side.reg(bytes.data(), bytes.size(), mr_flag::kAllowLocalWrite)),
        sge{addr(bytes.data()), len, mr->get_local_token()} {}
  std::vector<uint8_t> bytes = std::vector<uint8_t>(64);
  Handle<Mr> mr;
  Sge sge;
};

class ApiPair : public AdapterPair<Side> {
 public:
  // `name` must be unique in the process (it names the rings).
  explicit ApiPair(const std::string& name, const EngineConfig& ec = {}, uint32_t cq_depth = 4096,
                   uint32_t max_qps = AdapterConfig{}.max_qps)
      : AdapterPair(name, ec, 8191, false, max_qps) {
    make_pd_cq(cq_depth);
  }
  // On another pair's engine, which may be running (AdapterPair's second constructor).
  ApiPair(const std::string& name, Engine& engine) : AdapterPair(name, engine) { make_pd_cq(4096); }
  void make_pd_cq(uint32_t cq_depth) {
    for (Side* s : {&a, &b}) {
      if (!s->adapter) continue;  // open failed (said by AdapterPair)
      EXPECT_EQ(s->adapter->create_pd(nullptr, nullptr, &s->pd), Status::kSuccess);
      EXPECT_EQ(s->adapter->create_cq(cq_depth, nullptr, nullptr, nullptr, nullptr, &s->cq),
                Status::kSuccess);
    }
  }
  ~ApiPair() override {
    // Objects before their adapter: handles close them; the adapter's close waits for that.
    for (Side* s : {&a, &b}) {
      s->qp.reset();
      s->cq.reset();
      s->pd.reset();
    }
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

  // Creates one more QP on each side into `qa` and `qb`: on the side's CQ, no context,
  // `receive_depth` receives and `send_depth` initiator requests of one SGE each, `inline_size`
  // inline bytes.
  void create_qps(uint32_t receive_depth, uint32_t send_depth, uint32_t inline_size, Handle<Qp>* qa,
                  Handle<Qp>* qb) {
    for (auto [s, q] : {std::pair{&a, qa}, std::pair{&b, qb}}) {
      ASSERT_EQ(s->pd->create_qp(*s->cq, *s->cq, nullptr, receive_depth, send_depth, 1, 1,
                                 inline_size, nullptr, nullptr, q),
                Status::kSuccess);
    }
  }
  // As create_qps, then connects the two.
  void connect_more_qps(uint32_t receive_depth, uint32_t send_depth, uint32_t inline_size,
                        Handle<Qp>* qa, Handle<Qp>* qb) {
    ASSERT_NO_FATAL_FAILURE(create_qps(receive_depth, send_depth, inline_size, qa, qb));
    connect_qps(a, **qa, b, **qb);
  }

  // Moves two QPs INIT -> RTR -> RTS towards each other with the manual-connect extension.
  static void connect_qps(Side& sa, Qp& qa, Side& sb, Qp& qb, const ConnectParams& cp = {}) {
    test::connect_qps(qa, *sa.adapter, qb, *sb.adapter, cp);
  }

  void collect() override {
    ResultEx r[32];
    for (Side* s : {&a, &b}) {
      if (!s->cq) continue;
      for (size_t n; (n = s->cq->get_results_ex(r)) != 0;) s->done.insert(s->done.end(), r, r + n);
    }
  }
  bool wait_done(size_t a_n, size_t b_n) {
    return run_until([&] { return a.done.size() >= a_n && b.done.size() >= b_n; });
  }
};

// An ApiPair whose QPs are connected from the start (most tests' opening).
class ConnectedPair : public ApiPair {
 public:
  explicit ConnectedPair(const std::string& name) : ApiPair(name) { connect(); }
};

}  // namespace urnic::test

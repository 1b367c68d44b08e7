// The one EAL / adapter-pair fixture of the test suites: EAL brought up once per process, and two
// adapters of the public API (include/urnic/) wired back to back over a net_ring pair, served by
// one engine that the test thread drives with run_once() (deterministic, no second core needed)
// or that runs on lcore 1. Everything but EAL bring-up and the ring pair (NDIS's job in NDK) goes
// through the public API, the way a consumer uses it.
//
// A suite's fixture derives from AdapterPair<Side> with its own Side (which must hold
// `std::unique_ptr<Adapter> adapter`) and says how completions are collected; the api/ suites use
// ApiPair (one CQ per side), the RC loopback and fault suites RcPair (a send and a receive CQ).
#pragma once

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <thread>

#include "eal.h"
#include "urnic/urnic.h"

namespace urnic {
// gtest prints a Status by its NTSTATUS name.
inline void PrintTo(Status s, std::ostream* os) { *os << to_string(s); }
}  // namespace urnic

namespace urnic::test {

// EAL without hugepages, once per process (tests/common/eal.h).
inline void eal_up_once(const char* lcores = "0-1", unsigned memory_mb = 512) {
  ASSERT_EQ(eal_up(lcores, memory_mb), Status::kSuccess);
}

// A test suite whose tests need EAL (brought up once, before the first test).
class EalTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { eal_up_once(); }
};
template <class Param>
class EalTestWithParam : public EalTest, public ::testing::WithParamInterface<Param> {};

inline uint64_t addr(const void* p) { return reinterpret_cast<uint64_t>(p); }

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

// Attributes a pair of QPs is connected with (perftest's defaults; a short RNR timer).
struct ConnectParams {
  uint32_t mtu = 1024;
  uint8_t timeout = 14;
  uint8_t retry_cnt = 7;
  uint8_t rnr_retry = 7;
  uint8_t min_rnr_timer = 1;  // 10 us
  uint8_t read_limit = 16;
  uint32_t access = qp_access::kAll;  // remote rights the QPs accept
  bool ipv6 = false;
  // The source GID index (AddressVector::sgid_index); the destination is then the peer's GID
  // at the same index. -1: the adapters' configured addresses.
  int32_t sgid_index = -1;
};

inline LocalAddress address_of(Adapter& a) {
  return a.query_extension<AdapterExtension>()->local_address();
}

// Moves `q` (in INIT, as created) to RTS towards `peer` at `peer_addr` with the manual-connect
// extension: INIT -> INIT (access), RTR, RTS.
inline void bring_up(Qp& q, Qp& peer, const LocalAddress& peer_addr, const ConnectParams& cp,
                     uint32_t sq_psn, uint32_t rq_psn) {
  auto* ext = q.query_extension<QpConnectExtension>();
  auto* pext = peer.query_extension<QpConnectExtension>();
  ASSERT_NE(ext, nullptr);
  ASSERT_NE(pext, nullptr);
  using namespace qp_attr_mask;
  QpAttributes at;
  at.state = QpState::kInit;
  at.access = cp.access;
  ASSERT_EQ(ext->modify(at, kState | kAccessFlags, nullptr, nullptr), Status::kSuccess);
  at.state = QpState::kRtr;
  at.av.ipv6 = cp.ipv6;
  at.av.dst_ipv4 = peer_addr.ipv4;
  at.av.dst_ipv6 = peer_addr.ipv6;
  at.av.dst_mac = peer_addr.mac;
  at.av.sgid_index = cp.sgid_index;
  at.path_mtu = cp.mtu;
  at.dest_qpn = pext->qpn();
  at.rq_psn = rq_psn;
  at.max_dest_rd_atomic = cp.read_limit;
  at.min_rnr_timer = cp.min_rnr_timer;
  ASSERT_EQ(
      ext->modify(at, kState | kAv | kPathMtu | kDestQpn | kRqPsn | kMaxDestRdAtomic | kMinRnrTimer,
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

// Where a QP connected with `cp` sends to on `peer`: its addresses, or (cp.sgid_index set) its
// GID at that index as the IPv6 destination.
inline LocalAddress destination(Adapter& peer, const ConnectParams& cp) {
  LocalAddress d = address_of(peer);
  if (cp.sgid_index >= 0) {
    EXPECT_EQ(peer.query_extension<AdapterExtension>()->query_gid(
                  static_cast<uint32_t>(cp.sgid_index), &d.ipv6),
              Status::kSuccess);
  }
  return d;
}

// Connects two QPs towards each other (A sends from PSN 0x10000, B from 0x20000).
inline void connect_qps(Qp& qa, Adapter& aa, Qp& qb, Adapter& ab, const ConnectParams& cp = {}) {
  bring_up(qa, qb, destination(ab, cp), cp, 0x10000, 0x20000);
  bring_up(qb, qa, destination(aa, cp), cp, 0x20000, 0x10000);
}

template <class Side>
class AdapterPair {
 public:
  // `name` must be unique in the process (it names the rings). `adaptive_retransmit`: the
  // adapters' AdapterConfig::adaptive_retransmit.
  explicit AdapterPair(const std::string& name, const EngineConfig& ec = {}, uint32_t mbufs = 8191,
                       bool adaptive_retransmit = false, uint32_t max_qps = AdapterConfig{}.max_qps)
      : own_(std::make_unique<Engine>(ec)), engine_(*own_) {
    open(name, mbufs, adaptive_retransmit, max_qps);
  }
  // A pair on another pair's engine, which may be running (adapters open and close while their
  // engine runs, issue 14 item 6) and must outlive this pair.
  AdapterPair(const std::string& name, Engine& engine) : engine_(engine) {
    open(name, 8191, false);
  }
  // The deriving fixture closes its objects first; the adapters' close waits for any close
  // still pending, then the engine stops.
  virtual ~AdapterPair() {
    // Over net_ring a frame an injector holds back may be the other adapter's mbuf: both
    // injectors let go of theirs while both pools exist.
    for (Side* s : {&a, &b})
      if (s->adapter) (void)set_faults(*s, {}, {});
    a.adapter.reset();
    b.adapter.reset();
    if (own_) engine_.stop();
  }
  AdapterPair(const AdapterPair&) = delete;
  AdapterPair& operator=(const AdapterPair&) = delete;

  // Takes the completions the sides' CQs hold (called by every run loop).
  virtual void collect() = 0;

  // Drives the engine (or waits for it, when it runs on an lcore) until `pred` holds or
  // `timeout` passes, collecting completions. Control-thread callbacks need real time (the
  // thread naps up to 1 ms), so the bound is a time, not a step count.
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

  Engine& engine() { return engine_; }

  void open(const std::string& name, uint32_t mbufs, bool adaptive_retransmit,
            uint32_t max_qps = AdapterConfig{}.max_qps) {
    EXPECT_EQ(create_ring_port_pair(name, 1, &port_a, &port_b), Status::kSuccess);
    const uint16_t pa = port_a, pb = port_b;
    AdapterConfig ca, cb;
    ca.port_id = pa;
    cb.port_id = pb;
    ca.mbufs = cb.mbufs = mbufs;
    ca.max_qps = cb.max_qps = max_qps;
    ca.ipv4 = 0xC0000201;  // 192.0.2.1
    cb.ipv4 = 0xC0000202;
    ca.ipv6 = std::array<uint8_t, 16>{0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    cb.ipv6 = std::array<uint8_t, 16>{0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
    ca.mac = std::array<uint8_t, 6>{2, 0, 0, 0, 0, 1};
    cb.mac = std::array<uint8_t, 6>{2, 0, 0, 0, 0, 2};
    ca.key_seed = 0x1234;
    cb.key_seed = 0x5678;
    ca.adaptive_retransmit = cb.adaptive_retransmit = adaptive_retransmit;
    EXPECT_EQ(Adapter::open(ca, engine_, &a.adapter), Status::kSuccess);
    EXPECT_EQ(Adapter::open(cb, engine_, &b.adapter), Status::kSuccess);
  }

  // Fault injection on side `s`'s transmit and receive paths (AdapterExtension::set_faults).
  static Status set_faults(Side& s, const FaultConfig& tx, const FaultConfig& rx) {
    return s.adapter->template query_extension<AdapterExtension>()->set_faults(tx, rx);
  }
  static AdapterCounters counters(Side& s) {
    AdapterCounters c;
    EXPECT_EQ(s.adapter->query_counters(&c), Status::kSuccess);
    return c;
  }

  std::unique_ptr<Engine> own_;     // declared first: destroyed after the sides' adapters
  Engine& engine_;                  // *own_, or another pair's
  uint16_t port_a = 0, port_b = 0;  // the ring pair's ethdev ports
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

}  // namespace urnic::test

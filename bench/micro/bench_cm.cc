// Connection setup rate of urnic's connection manager (issue 14 item 3): one listener on adapter
// B, clients on adapter A (one connector and one RC QP each) over a net_ring pair, both adapters
// on one engine launched on its own lcore, all through the public API. A connection is the IB CM
// exchange rdma_cm uses (REQ, REP, RTU), with both QPs taken through INIT, RTR and RTS by the
// connection manager; it counts as set up once both sides have been told: the active side's
// connect completion and complete_connect, and the passive side's accept completion (after the
// RTU). Two patterns:
//   one at a time   connect, wait, complete_connect, wait for the accept: the setup latency
//                   (p50 / p99 / max), and the rate that gives;
//   W in flight     W clients connect at once and each one that is accepted is replaced by the
//                   next, until N: the rate one listener sustains.
// Then every connection is disconnected (DREQ / DREP) and closed; every completion must be
// kSuccess, or the run fails (exit 1). The control threads nap when idle (50 us up to 1 ms), and
// the CM's callbacks run on them: the one-at-a-time latency shows that, and W in flight hides it.
//
// Run: build/bench/bench_cm [connections, default 1000] [--window=W, default 64]
// Under TCG the rxe-peer guest's rdma_cm is far too slow to be compared with (README); no rxe
// figure is printed.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <rte_cycles.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "ring_adapters.h"
#include "urnic/urnic.h"

namespace urnic {
namespace {

constexpr uint16_t kPort = 18600;

sockaddr_in v4(uint32_t ip, uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(ip);
  a.sin_port = htons(port);
  return a;
}

// One connection: both QPs, the active connector, the passive one (from the connect event), and
// what has happened to it.
struct Conn {
  Handle<Qp> qa, qb;
  Handle<Connector> active;
  std::atomic<Connector*> passive{nullptr};
  std::atomic<int> connected{0}, accepted{0}, disconnected{0};
  std::atomic<Status> status{Status::kSuccess};  // the first failure seen
  uint64_t t0 = 0;                               // TSC at connect()
  void fail(Status s) {
    Status ok = Status::kSuccess;
    status.compare_exchange_strong(ok, s);
  }
};

struct World {
  Engine engine;
  std::unique_ptr<Adapter> a, b;
  Handle<Pd> pda, pdb;
  Handle<Cq> cqa, cqb;
  Handle<Listener> listener;
  std::vector<std::unique_ptr<Conn>> conns;
  std::atomic<size_t> next_passive{0};  // the next connection a connect event takes
  std::atomic<int> refused{0};          // connect events the listener could not accept

  explicit World(const EngineConfig& ec) : engine(ec) {}
  ~World() {
    for (auto& c : conns) {
      Handle<Connector> passive(c->passive.load());  // the consumer owns it (connector.h)
      passive.reset();
      c->active.reset();
      c->qa.reset();
      c->qb.reset();
    }
    listener.reset();
    cqa.reset();
    cqb.reset();
    pda.reset();
    pdb.reset();
    a.reset();
    b.reset();
    engine.stop();
  }
};

// Passive side, on B's control thread: connection requests are taken in order, each by the next
// connection's QP (the requests arrive in the order of the connects only by chance, which does
// not matter: any free QP of B serves).
void on_connect(void* ctx, Connector* c) {
  auto* w = static_cast<World*>(ctx);
  const size_t i = w->next_passive.fetch_add(1);
  if (i >= w->conns.size()) {
    w->refused.fetch_add(1);  // fails the run; the adapter's close closes the connector
    (void)c->reject(nullptr, 0);
    return;
  }
  Conn* k = w->conns[i].get();
  k->passive.store(c);
  const Status s = c->accept(
      *k->qb, 1, 1, nullptr, 0, [](void* x) { static_cast<Conn*>(x)->disconnected.fetch_add(1); },
      k,
      [](void* x, Status st) {
        auto* kk = static_cast<Conn*>(x);
        if (st != Status::kSuccess) kk->fail(st);
        kk->accepted.fetch_add(1, std::memory_order_release);
      },
      k);
  if (s != Status::kPending) k->fail(s);
}

bool setup(World& w, size_t n) {
  uint16_t pa = 0, pb = 0;
  if (create_ring_port_pair("cmrate", 1, &pa, &pb) != Status::kSuccess) return false;
  AdapterConfig ca, cb;
  ca.port_id = pa;
  cb.port_id = pb;
  ca.ipv4 = 0xC0000201;
  cb.ipv4 = 0xC0000202;
  ca.mac = std::array<uint8_t, 6>{2, 0, 0, 0, 0, 1};
  cb.mac = std::array<uint8_t, 6>{2, 0, 0, 0, 0, 2};
  ca.max_qps = cb.max_qps = static_cast<uint32_t>(n) + 8;
  const auto depth = static_cast<uint32_t>(std::min<size_t>(4 * n + 64, 1u << 20));
  if (Adapter::open(ca, w.engine, &w.a) != Status::kSuccess ||
      Adapter::open(cb, w.engine, &w.b) != Status::kSuccess ||
      w.a->create_pd(nullptr, nullptr, &w.pda) != Status::kSuccess ||
      w.b->create_pd(nullptr, nullptr, &w.pdb) != Status::kSuccess ||
      w.a->create_cq(depth, nullptr, nullptr, nullptr, nullptr, &w.cqa) != Status::kSuccess ||
      w.b->create_cq(depth, nullptr, nullptr, nullptr, nullptr, &w.cqb) != Status::kSuccess ||
      worker_lcores().empty() || !w.engine.launch(worker_lcores().front()))
    return false;
  for (size_t i = 0; i < n; ++i) {
    auto k = std::make_unique<Conn>();
    if (w.pda->create_qp(*w.cqa, *w.cqa, nullptr, 4, 4, 1, 1, 0, nullptr, nullptr, &k->qa) !=
            Status::kSuccess ||
        w.pdb->create_qp(*w.cqb, *w.cqb, nullptr, 4, 4, 1, 1, 0, nullptr, nullptr, &k->qb) !=
            Status::kSuccess ||
        create_connector(*w.a, nullptr, nullptr, &k->active) != Status::kSuccess)
      return false;
    w.conns.push_back(std::move(k));
  }
  const sockaddr_in any = v4(0, kPort);
  return create_listener(*w.b, &on_connect, &w, nullptr, nullptr, &w.listener) ==
             Status::kSuccess &&
         w.listener->listen(reinterpret_cast<const sockaddr*>(&any), sizeof any, nullptr,
                            nullptr) == Status::kSuccess;
}

bool start(Conn& k) {
  const sockaddr_in dst = v4(0xC0000202, kPort);
  k.t0 = rte_rdtsc();
  const Status s = k.active->connect(
      *k.qa, nullptr, 0, reinterpret_cast<const sockaddr*>(&dst), sizeof dst, 1, 1, nullptr, 0,
      [](void* x, Status st) {
        auto* kk = static_cast<Conn*>(x);
        if (st != Status::kSuccess) kk->fail(st);
        kk->connected.fetch_add(1, std::memory_order_release);
      },
      &k);
  if (s != Status::kPending) k.fail(s);
  return s == Status::kPending;
}

// Waits (10 s at most) until `pred` holds or a connection failed; false on either failure.
template <typename P>
bool wait_for(P pred, const Conn* k = nullptr) {
  const uint64_t until = rte_rdtsc() + 10 * rte_get_tsc_hz();
  while (!pred()) {
    if (k != nullptr && k->status.load() != Status::kSuccess) return false;
    if (rte_rdtsc() > until) return false;
    std::this_thread::yield();
  }
  return true;
}

// Takes the active side of `k` to its end once its connect completed; whether it could.
bool finish_active(Conn& k) {
  const Status s = k.active->complete_connect(nullptr, nullptr, nullptr, nullptr);
  if (s != Status::kSuccess) k.fail(s);
  return s == Status::kSuccess;
}

bool done(const Conn& k) { return k.accepted.load(std::memory_order_acquire) == 1; }

// Connections [from, to) one after the other; their setup times in us go to `us`.
bool one_at_a_time(World& w, size_t from, size_t to, std::vector<double>* us) {
  const double tsc_us = static_cast<double>(rte_get_tsc_hz()) / 1e6;
  for (size_t i = from; i < to; ++i) {
    Conn& k = *w.conns[i];
    if (!start(k) || !wait_for([&] { return k.connected.load() == 1; }, &k) || !finish_active(k) ||
        !wait_for([&] { return done(k); }, &k))
      return false;
    us->push_back(static_cast<double>(rte_rdtsc() - k.t0) / tsc_us);
  }
  return true;
}

// Connections [from, to) with up to `window` in flight.
bool in_flight(World& w, size_t from, size_t to, size_t window) {
  size_t next = from, finished = from;
  std::vector<bool> completed(to, false);
  while (finished < to) {
    while (next < to && next - finished < window)
      if (!start(*w.conns[next++])) return false;
    bool progress = false;
    for (size_t i = finished; i < next; ++i) {
      Conn& k = *w.conns[i];
      if (k.status.load() != Status::kSuccess) return false;
      if (!completed[i] && k.connected.load(std::memory_order_acquire) == 1) {
        if (!finish_active(k)) return false;
        completed[i] = true;
        progress = true;
      }
    }
    // In order: a window slot frees when the oldest connection is accepted.
    while (finished < next && completed[finished] && done(*w.conns[finished])) {
      ++finished;
      progress = true;
    }
    if (!progress) {
      if (!wait_for([&] {
            const Conn& k = *w.conns[finished];
            return k.status.load() != Status::kSuccess ||
                   (completed[finished] ? done(k) : k.connected.load() == 1);
          }))
        return false;
    }
  }
  return true;
}

struct Disconnects {
  std::atomic<int> left{0}, failed{0};
  static void on_done(void* x, Status st) {
    auto* d = static_cast<Disconnects*>(x);
    if (st != Status::kSuccess) d->failed.fetch_add(1);
    d->left.fetch_sub(1, std::memory_order_release);
  }
};

// Every active side disconnects at once; whether all completed with kSuccess, and every passive
// side heard of it.
bool disconnect_all(World& w) {
  static Disconnects d;  // outlives a failed wait: callbacks may still come
  d.left.store(static_cast<int>(w.conns.size()));
  for (auto& k : w.conns)
    if (k->active->disconnect(&Disconnects::on_done, &d) != Status::kPending) return false;
  const bool all = wait_for([&] { return d.left.load(std::memory_order_acquire) == 0; });
  if (!all || d.failed.load() != 0) return false;
  return wait_for([&] {
    return std::all_of(w.conns.begin(), w.conns.end(),
                       [](const auto& k) { return k->disconnected.load() == 1; });
  });
}

}  // namespace
}  // namespace urnic

int main(int argc, char** argv) {
  using namespace urnic;
  size_t n = 1000, window = 64;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--window=", 9) == 0) {
      window = std::strtoul(argv[i] + 9, nullptr, 10);
    } else {
      n = std::strtoul(argv[i], nullptr, 10);
    }
  }
  if (n < 20 || n > 60000 || window < 1 || window > n) {
    std::fprintf(stderr, "usage: bench_cm [connections, 20 .. 60000] [--window=W, 1 .. N]\n");
    return 2;
  }
  if (!bench_runtime_init("bench_cm")) return 1;
  EngineConfig ec;
  ec.idle_yield_after = 256;  // 2-core machines: the control threads need the CPU too
  ec.max_qps = static_cast<uint32_t>(2 * n + 16);
  World w(ec);
  if (!setup(w, n)) {
    std::fprintf(stderr, "bench_cm: set-up failed\n");
    return 1;
  }
  // A tenth one at a time (at least 10), the rest W at a time.
  const size_t seq = std::max<size_t>(10, n / 10);
  std::vector<double> us;
  const uint64_t t0 = rte_rdtsc();
  const bool ok_seq = one_at_a_time(w, 0, seq, &us);
  const uint64_t t1 = rte_rdtsc();
  const bool ok_par = ok_seq && in_flight(w, seq, n, window);
  const uint64_t t2 = rte_rdtsc();
  const bool ok_disc = ok_par && disconnect_all(w);
  const uint64_t t3 = rte_rdtsc();
  for (const auto& k : w.conns) {
    if (k->status.load() != Status::kSuccess) {
      std::fprintf(stderr, "bench_cm: a connection failed: %s\n",
                   std::string(to_string(k->status.load())).c_str());
      return 1;
    }
  }
  if (!ok_disc || w.refused.load() != 0) {
    std::fprintf(stderr, "bench_cm: %s\n",
                 !ok_seq    ? "one-at-a-time connections did not complete within 10 s"
                 : !ok_par  ? "connections in flight did not complete within 10 s"
                 : !ok_disc ? "disconnects did not all complete with success"
                            : "the listener saw more requests than connects");
    return 1;
  }
  std::sort(us.begin(), us.end());
  const double hz = static_cast<double>(rte_get_tsc_hz());
  auto at = [&](double q) {
    return us[static_cast<size_t>(q * static_cast<double>(us.size() - 1))];
  };
  std::printf("one listener, RC connections over net_ring, engine on lcore %u, %zu connections\n",
              worker_lcores().front(), n);
  std::printf("one at a time  %6zu  %9.0f conn/s  setup us p50 %8.1f p99 %8.1f max %8.1f\n", seq,
              static_cast<double>(seq) * hz / static_cast<double>(t1 - t0), at(0.5), at(0.99),
              us.back());
  std::printf("%4zu in flight  %6zu  %9.0f conn/s\n", window, n - seq,
              static_cast<double>(n - seq) * hz / static_cast<double>(t2 - t1));
  std::printf("disconnect all  %6zu  %9.0f disc/s\n", n,
              static_cast<double>(n) * hz / static_cast<double>(t3 - t2));
  return 0;
}

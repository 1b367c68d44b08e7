// Attach mode against embedded mode (issue 38 targets): the 64 B RDMA WRITE message rate of one
// QP pair, first with the application in the engine's process (embedded: public API, the engine
// launched on lcore 1), then with the application in a client process of urnicd (the same public
// API, the adapter opened by name: the daemon's engine on lcore 1 with its bridge), the same loop
// either way: the send queue kept full of WRITEs, one in 64 signaled, the CQ reaped. The ratio of
// the two comes from one run. Then `--clients` writer processes share the daemon's one engine,
// each with its own QP pair, for the same window: their rates and Jain's fairness index
// (sum x)^2 / (n sum x^2). Every client process runs on core 0, so that the daemon's engine has
// lcore 1 alone, and yields the core when its queue is full and no completion came (what a
// well-behaved polling client does when it shares a core); the embedded loop is the same.
//
// Run: build/bench/bench_attach --daemon=build/daemon/urnicd [--seconds=S] [--clients=N]
//   (default 3 s, 4 clients). Each phase runs in processes of its own (EAL comes up once per
//   process). Prints one line per phase and the ratio; exits non-zero if a phase failed.
#include <sched.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "ring_adapters.h"
#include "urnic/daemon.h"
#include "urnic/urnic.h"

namespace urnic {
namespace {

using Clock = std::chrono::steady_clock;
constexpr uint32_t kMsg = 64, kDepth = 128, kSignalEvery = 64;

// Keeps `post` filling the send queue and `reap` emptying the CQ for `seconds`; messages done.
template <class Post, class Reap>
double loop(double seconds, Post&& post, Reap&& reap, bool* failed) {
  uint64_t posted = 0, done = 0;
  ResultEx res[64];
  const auto t0 = Clock::now();
  const auto end = t0 + std::chrono::duration<double>(seconds);
  while (Clock::now() < end) {
    const uint64_t before = posted + done;
    for (;;) {
      const uint32_t flags =
          op_flag::kDefer | ((posted + 1) % kSignalEvery == 0 ? 0 : op_flag::kSilentSuccess);
      if (!post(flags)) break;
      ++posted;
    }
    for (size_t n; (n = reap(res)) != 0;) {
      for (size_t k = 0; k < n; ++k) *failed |= res[k].status != Status::kSuccess;
      done += n * kSignalEvery;
    }
    // Nothing to post, nothing reaped: the queue is full and in the engine's hands. Give the
    // core to whoever shares it (the other clients) rather than spin out the time slice.
    if (posted + done == before) std::this_thread::yield();
  }
  return static_cast<double>(done) / std::chrono::duration<double>(Clock::now() - t0).count();
}

// Embedded: two adapters over a net_ring pair in this process, the engine on lcore 1.
double embedded(double seconds) {
  if (!bench_runtime_init("bench_attach")) return -1;
  Engine engine;
  std::unique_ptr<Adapter> a, b;
  Handle<Pd> pa, pb;
  Handle<Mr> ma, mb;
  Handle<Cq> ca, cb;
  Handle<Qp> qa, qb;
  std::vector<uint8_t> src(4096, 0x5A), dst(4096);
  if (!open_ring_adapters("att", AdapterConfig{}.mbufs, engine, &a, &b) ||
      a->create_pd(nullptr, nullptr, &pa) != Status::kSuccess ||
      b->create_pd(nullptr, nullptr, &pb) != Status::kSuccess ||
      pa->create_mr(false, nullptr, nullptr, &ma) != Status::kSuccess ||
      ma->register_mr(src.data(), src.size(), 0, nullptr, nullptr) != Status::kSuccess ||
      pb->create_mr(false, nullptr, nullptr, &mb) != Status::kSuccess ||
      mb->register_mr(dst.data(), dst.size(), mr_flag::kAllowRemoteWrite, nullptr, nullptr) !=
          Status::kSuccess ||
      a->create_cq(1024, nullptr, nullptr, nullptr, nullptr, &ca) != Status::kSuccess ||
      b->create_cq(1024, nullptr, nullptr, nullptr, nullptr, &cb) != Status::kSuccess ||
      pa->create_qp(*ca, *ca, nullptr, 1, kDepth, 1, 1, 0, nullptr, nullptr, &qa) !=
          Status::kSuccess ||
      pb->create_qp(*cb, *cb, nullptr, 1, kDepth, 1, 1, 0, nullptr, nullptr, &qb) !=
          Status::kSuccess ||
      !connect_ring_qp(*qa, *qb, *b, 0, 0) || !connect_ring_qp(*qb, *qa, *a, 0, 0) ||
      !engine.launch(worker_lcores().at(0)))
    return -1;
  const Sge sge{reinterpret_cast<uint64_t>(src.data()), kMsg, ma->get_local_token()};
  bool failed = false;
  const double rate = loop(
      seconds,
      [&](uint32_t f) {
        return qa->write(nullptr, {&sge, 1}, reinterpret_cast<uint64_t>(dst.data()),
                         mb->get_remote_token(), f) == Status::kSuccess;
      },
      [&](std::span<ResultEx> r) { return ca->get_results_ex(r); }, &failed);
  engine.stop();
  return failed ? -1 : rate;
}

struct Peer {
  uint32_t qpn, rkey;
  uint64_t addr;
};

// One client's side, through the public API exactly as an embedded program (only the adapter's
// opening differs): memory from alloc_memory, a PD, an MR, a CQ and an RC QP on the daemon's
// adapter `name`.
struct Client {
  std::unique_ptr<Adapter> adapter;
  void* mem = nullptr;
  Handle<Pd> pd;
  Handle<Mr> mr;
  Handle<Cq> cq;
  Handle<Qp> qp;
  bool open(const char* name) {
    return Adapter::open(name, &adapter) == Status::kSuccess &&
           alloc_memory(1 << 16, &mem) == Status::kSuccess &&
           adapter->create_pd(nullptr, nullptr, &pd) == Status::kSuccess &&
           pd->create_mr(false, nullptr, nullptr, &mr) == Status::kSuccess &&
           mr->register_mr(mem, 1 << 16, mr_flag::kAllowRemoteWrite, nullptr, nullptr) ==
               Status::kSuccess &&
           adapter->create_cq(1024, nullptr, nullptr, nullptr, nullptr, &cq) == Status::kSuccess &&
           pd->create_qp(*cq, *cq, nullptr, 16, kDepth, 1, 1, 0, nullptr, nullptr, &qp) ==
               Status::kSuccess;
  }
  bool connect(uint32_t ip, const Peer& p) {
    auto* c = qp->query_extension<QpConnectExtension>();
    QpAttributes a;
    a.state = QpState::kRtr;
    a.dest_qpn = p.qpn;
    a.av.dst_ipv4 = ip;
    if (c->modify(a,
                  qp_attr_mask::kState | qp_attr_mask::kPathMtu | qp_attr_mask::kDestQpn |
                      qp_attr_mask::kRqPsn | qp_attr_mask::kMaxDestRdAtomic |
                      qp_attr_mask::kMinRnrTimer | qp_attr_mask::kAv,
                  nullptr, nullptr) != Status::kSuccess)
      return false;
    a.state = QpState::kRts;
    return c->modify(a,
                     qp_attr_mask::kState | qp_attr_mask::kSqPsn | qp_attr_mask::kTimeout |
                         qp_attr_mask::kRetryCnt | qp_attr_mask::kRnrRetry |
                         qp_attr_mask::kMaxRdAtomic,
                     nullptr, nullptr) == Status::kSuccess;
  }
  Peer me() const {
    return Peer{qp->query_extension<QpConnectExtension>()->qpn(), mr->get_remote_token(),
                reinterpret_cast<uint64_t>(mem)};
  }
};

bool send_all(int fd, const void* p, size_t n) { return ::write(fd, p, n) == ssize_t(n); }
bool recv_all(int fd, void* p, size_t n) { return ::read(fd, p, n) == ssize_t(n); }

// A writer client: connects to its target over `sock`, says it is ready on `ready`, waits for
// `go`, writes for `seconds`, and writes its rate to `results` (one write: atomic on a pipe).
struct Result {
  uint32_t index;
  double rate;
};
int writer(const std::string& socket, int sock, int ready, int go, int results, uint32_t index,
           double seconds) {
  // Every client on core 0, the daemon's engine alone on lcore 1: the clients' shares of the
  // engine are then theirs, not the scheduler's placement of them beside the engine.
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  CPU_SET(0, &cpus);
  (void)::sched_setaffinity(0, sizeof cpus, &cpus);
  Client c;
  Peer t{};
  if (attach(socket, "writer") != Status::kSuccess || !c.open("urnic0")) {
    std::fprintf(stderr, "bench_attach: writer: %s\n", last_error());
    return 1;
  }
  const Peer me = c.me();
  if (!send_all(sock, &me, sizeof me) || !recv_all(sock, &t, sizeof t) ||
      !c.connect(0xC0000202, t)) {
    std::fprintf(stderr, "bench_attach: writer: connect: %s\n", last_error());
    return 2;
  }
  char ch = 'r';
  if (!send_all(ready, &ch, 1) || ::read(go, &ch, 1) != 1) return 3;  // ready; then together
  const Sge sge{reinterpret_cast<uint64_t>(c.mem), kMsg, c.mr->get_local_token()};
  bool failed = false;
  const double rate = loop(
      seconds,
      [&](uint32_t f) {
        return c.qp->write(nullptr, {&sge, 1}, t.addr, t.rkey, f) == Status::kSuccess;
      },
      [&](std::span<ResultEx> r) { return c.cq->get_results_ex(r); }, &failed);
  const Result r{index, rate};
  return send_all(results, &r, sizeof r) && !failed ? 0 : 4;
}

// The target client: one QP per writer on urnic1, answers until its socket closes.
int target(const std::string& socket, const std::vector<int>& socks, int hold) {
  if (attach(socket, "target") != Status::kSuccess) return 1;
  std::vector<std::unique_ptr<Client>> cs;
  for (int s : socks) {
    auto c = std::make_unique<Client>();
    Peer w{};
    if (!c->open("urnic1") || !recv_all(s, &w, sizeof w)) {
      std::fprintf(stderr, "bench_attach: target: %s\n", last_error());
      return 2;
    }
    const Peer me = c->me();
    if (!send_all(s, &me, sizeof me) || !c->connect(0xC0000201, w)) return 3;
    cs.push_back(std::move(c));
  }
  char ch;
  (void)::read(hold, &ch, 1);  // the parent closes its end when the run is over
  return 0;
}

template <class F>
pid_t fork_run(F&& f) {
  const pid_t p = ::fork();
  if (p == 0) _exit(f());
  return p;
}

int reap(pid_t p) {
  int st = 0;
  ::waitpid(p, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

// `n` writers on urnicd at `socket` for `seconds`: their rates (empty on failure).
std::vector<double> attached(const std::string& socket, uint32_t n, double seconds) {
  std::vector<int> mine, theirs;
  for (uint32_t i = 0; i < n; ++i) {
    int sp[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM, 0, sp) != 0) return {};
    mine.push_back(sp[0]);
    theirs.push_back(sp[1]);
  }
  int go[2], hold[2], ready[2], results[2];
  if (::pipe(go) != 0 || ::pipe(ready) != 0 || ::pipe(results) != 0 ||
      ::socketpair(AF_UNIX, SOCK_STREAM, 0, hold) != 0)
    return {};
  const pid_t t = fork_run([&] {
    ::close(hold[0]);  // EOF on hold[1] once the parent closes its copy
    return target(socket, theirs, hold[1]);
  });
  std::vector<pid_t> ws;
  for (uint32_t i = 0; i < n; ++i)
    ws.push_back(fork_run(
        [&, i] { return writer(socket, mine[i], ready[1], go[0], results[1], i, seconds); }));
  // Every writer connected and ready, then all start at once.
  for (uint32_t i = 0; i < n; ++i) {
    char ch;
    if (!recv_all(ready[0], &ch, 1)) return {};
  }
  ::close(go[0]);
  for (uint32_t i = 0; i < n; ++i)
    if (::write(go[1], "g", 1) != 1) return {};
  std::vector<double> rates(n, -1);
  for (uint32_t i = 0; i < n; ++i) {
    Result r{};
    if (recv_all(results[0], &r, sizeof r) && r.index < n) rates[r.index] = r.rate;
  }
  ::close(hold[0]);
  for (int fd : {go[1], ready[0], ready[1], results[0], results[1], hold[1]}) ::close(fd);
  for (uint32_t i = 0; i < n; ++i) {
    ::close(mine[i]);
    ::close(theirs[i]);
  }
  bool ok = reap(t) == 0;
  for (pid_t w : ws) ok &= reap(w) == 0;
  for (double r : rates) ok &= r > 0;
  return ok ? rates : std::vector<double>{};
}

}  // namespace
}  // namespace urnic

int main(int argc, char** argv) {
  using namespace urnic;
  std::string daemon;
  double seconds = 3;
  uint32_t clients = 4;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--daemon=", 0) == 0) daemon = a.substr(9);
    if (a.rfind("--seconds=", 0) == 0) seconds = std::atof(a.c_str() + 10);
    if (a.rfind("--clients=", 0) == 0) clients = static_cast<uint32_t>(std::atoi(a.c_str() + 10));
  }
  if (daemon.empty() || seconds <= 0 || clients == 0 || clients > 16) {
    std::fprintf(stderr, "usage: bench_attach --daemon=PATH [--seconds=S] [--clients=1..16]\n");
    return 2;
  }
  // Embedded, in a process of its own (EAL once per process).
  int p[2];
  if (::pipe(p) != 0) return 1;
  const pid_t e = fork_run([&] {
    const double r = embedded(seconds);
    return send_all(p[1], &r, sizeof r) ? 0 : 1;
  });
  double emb = -1;
  (void)recv_all(p[0], &emb, sizeof emb);
  reap(e);
  // urnicd with the in-memory pair, its engine on lcore 1.
  char dir[] = "/tmp/bench-attach-XXXXXX";
  if (::mkdtemp(dir) == nullptr) return 1;
  const std::string sock = std::string(dir) + "/urnicd.sock";
  const std::string prefix = "bench-attach" + std::to_string(::getpid());
  const pid_t d = fork_run([&] {
    ::execl(daemon.c_str(), daemon.c_str(), "--foreground", "--socket", sock.c_str(), "--set",
            ("daemon.lock_dir=" + std::string(dir)).c_str(), "--set",
            ("daemon.file_prefix=" + prefix).c_str(), "--set", "daemon.memory=nohuge",
            static_cast<char*>(nullptr));
    return 127;
  });
  for (int i = 0; i < 300 && attach(sock, "probe") != Status::kSuccess; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  detach();
  const std::vector<double> one = attached(sock, 1, seconds);
  const std::vector<double> many = attached(sock, clients, seconds);
  ::kill(d, SIGTERM);
  reap(d);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  std::filesystem::remove_all("/var/run/dpdk/" + prefix, ec);
  if (emb <= 0 || one.empty() || many.empty()) {
    std::fprintf(stderr, "bench_attach: a phase failed (embedded %.0f, attached %zu, shared %zu)\n",
                 emb, one.size(), many.size());
    return 1;
  }
  std::printf("embedded  64 B WRITE, 1 QP:  %.3f Mpps\n", emb / 1e6);
  std::printf("attached  64 B WRITE, 1 QP:  %.3f Mpps  (%.1f %% of embedded, same run)\n",
              one[0] / 1e6, 100 * one[0] / emb);
  double sum = 0, sq = 0;
  for (double r : many) {
    sum += r;
    sq += r * r;
  }
  std::printf("attached  %u clients sharing one engine: total %.3f Mpps;", clients, sum / 1e6);
  for (double r : many) std::printf(" %.3f", r / 1e6);
  std::printf("\nJain's fairness index: %.4f\n", sum * sum / (many.size() * sq));
  return 0;
}

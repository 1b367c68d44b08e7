#include "bench/perf/storm.h"

#include <rte_cycles.h>
#include <sched.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bench/perf/cm_link.h"
#include "bench/perf/histogram.h"
#include "bench/perf/output.h"
#include "bench/perf/session.h"
#include "urnic/urnic.h"

namespace urnic::perf {
namespace {

// One connection of the storm, either side. The callbacks run on the adapter's control thread;
// the main thread reads what they stored (release / acquire on the status).
struct Conn {
  Handle<Qp> qp;
  Handle<Connector> conn;
  uint64_t due = 0;  // client: when the request fell due; server: when it was taken
  std::atomic<uint64_t> answered{0};
  std::atomic<Status> status{Status::kPending};
  std::atomic<bool> peer_gone{false};
  bool established = false;
  bool closed = false;
  uint64_t disc_start = 0;
  std::atomic<uint64_t> disc_answered{0};
  std::atomic<Status> disc_status{Status::kPending};

  static void on_peer_gone(void* c) { static_cast<Conn*>(c)->peer_gone.store(true); }
  // Client: the REP (or the refusal) came. As rdma_cm does on the REP: RTR, RTS and the RTU at
  // once, so the peer's accept completes as it would with a real application.
  static void on_connected(void* c, Status s) {
    auto* x = static_cast<Conn*>(c);
    x->answered.store(rte_rdtsc(), std::memory_order_relaxed);
    if (s == Status::kSuccess) s = x->conn->complete_connect(&on_peer_gone, x, nullptr, nullptr);
    x->status.store(s, std::memory_order_release);
  }
  // Server: the RTU came (or the active side gave up).
  static void on_accepted(void* c, Status s) {
    auto* x = static_cast<Conn*>(c);
    x->answered.store(rte_rdtsc(), std::memory_order_relaxed);
    x->status.store(s, std::memory_order_release);
  }
  static void on_disconnected(void* c, Status s) {
    auto* x = static_cast<Conn*>(c);
    x->disc_answered.store(rte_rdtsc(), std::memory_order_relaxed);
    x->disc_status.store(s, std::memory_order_release);
  }
  void close() {
    conn.reset();
    qp.reset();
    closed = true;
  }
};
using Conns = std::vector<std::unique_ptr<Conn>>;

// What one side measured.
struct StormStats {
  uint32_t n = 0;
  double create_s = 0;  // creating the QPs, before the storm
  uint64_t established = 0, no_answer = 0, unreachable = 0;
  std::map<uint16_t, uint64_t> refused;    // by REJ reason
  std::map<std::string, uint64_t> failed;  // any other outcome, by status
  int64_t first_refusal = -1;              // the attempt the peer refused first (by time)
  uint64_t held_at_refusal = 0;            // connections established before that answer
  double setup_s = 0;                      // first request to the last connection's REP
  double answer_s = 0;                     // first request to the last answer of any kind
  Histogram setup_ns;                      // established connections only
  uint64_t peer_dropped = 0;               // disconnected by the peer before the teardown
  uint64_t torn_down = 0, peer_first = 0;  // DREP answered; the peer had disconnected first
  std::map<std::string, uint64_t> teardown_failed;
  double teardown_s = 0;
  Histogram teardown_ns;
  uint64_t rejected_at_limit = 0;  // server
  std::string error;               // why the run stopped early

  uint64_t refusals() const {
    uint64_t r = 0;
    for (const auto& [reason, n] : refused) r += n;
    return r;
  }
};

std::string name(Status s) { return std::string(to_string(s)); }

uint64_t ns_between(uint64_t from, uint64_t to) {
  return to > from ? static_cast<uint64_t>(tsc_to_s(to - from) * 1e9) : 0;
}

// Drives the engine when no lcore runs it; otherwise leaves the core to the control thread,
// which runs the connection manager.
void idle(Driver& drv) {
  if (drv.manual())
    drv.poll();
  else
    sched_yield();
}

// Stops a phase that has made no progress for --timeout seconds.
class Stall {
 public:
  explicit Stall(double timeout_s)
      : limit_(timeout_s > 0 ? static_cast<uint64_t>(timeout_s * static_cast<double>(tsc_hz()))
                             : UINT64_MAX),
        last_(rte_rdtsc()) {}
  void progress() { last_ = rte_rdtsc(); }
  bool expired() const { return rte_rdtsc() - last_ > limit_; }

 private:
  uint64_t limit_, last_;
};

void print_latency(const char* what, const Histogram& h) {
  if (h.count() == 0) return;
  auto us = [](uint64_t ns) { return static_cast<double>(ns) / 1000.0; };
  std::printf("   %s latency us: min %.1f p50 %.1f p90 %.1f p99 %.1f p99.9 %.1f max %.1f\n", what,
              us(h.min()), us(h.quantile(0.5)), us(h.quantile(0.9)), us(h.quantile(0.99)),
              us(h.quantile(0.999)), us(h.max()));
}

double rate(uint64_t n, double s) { return s > 0 ? static_cast<double>(n) / s : 0; }

// Takes out of `pending` every connection whose `status` is no longer kPending, handing its
// index and status to `done`; true if there was any.
template <class Done>
bool reap(const Conns& conns, std::vector<uint32_t>& pending, std::atomic<Status> Conn::*status,
          Done done) {
  bool any = false;
  for (size_t k = 0; k < pending.size();) {
    const Status s = ((*conns[pending[k]]).*status).load(std::memory_order_acquire);
    if (s == Status::kPending) {
      ++k;
      continue;
    }
    done(pending[k], s);
    pending[k] = pending.back();
    pending.pop_back();
    any = true;
  }
  return any;
}

// The end of one turn of a phase's loop: false (with `*err`) once nothing has progressed for
// --timeout seconds, else idles when nothing did this turn.
bool turn(bool progress, Stall& stall, Driver& drv, size_t pending, const char* what,
          double timeout, std::string* err) {
  if (progress) stall.progress();
  if (stall.expired()) {
    *err = std::to_string(pending) + " " + what + " still unanswered after " +
           std::to_string(static_cast<int>(timeout)) + " s (--timeout)";
    return false;
  }
  if (!progress) idle(drv);
  return true;
}

// ---- Client ---------------------------------------------------------------------------------

struct StormClient {
  const Options& o;
  Env& env;
  const sockaddr* dst;
  socklen_t dst_len;
  StormStats& st;
  Handle<Pd> pd;
  Handle<Cq> cq;
  Conns conns;

  bool create_qps();
  bool issue(Conn& c, uint64_t due);
  void record(uint32_t i);
  bool wait_answer(Conn& c, Stall& stall);
  bool wait_for_listener();
  bool connect_phase();
  void find_first_refusal();
  bool teardown_phase();
};

bool StormClient::create_qps() {
  const uint64_t t0 = rte_rdtsc();
  if (Status s = env.a().create_pd(nullptr, nullptr, &pd); s != Status::kSuccess) {
    st.error = std::string("PD: ") + name(s);
    return false;
  }
  // The QPs never post: one small CQ serves them all.
  if (Status s = env.a().create_cq(64, nullptr, nullptr, 1, nullptr, nullptr, &cq);
      s != Status::kSuccess) {
    st.error = std::string("CQ: ") + name(s);
    return false;
  }
  conns.reserve(o.storm);
  for (uint32_t i = 0; i < o.storm; ++i) {
    auto c = std::make_unique<Conn>();
    if (Status s = pd->create_qp(*cq, *cq, nullptr, 1, 1, 1, 1, 0, nullptr, nullptr, &c->qp);
        s != Status::kSuccess) {
      st.error = "QP " + std::to_string(i + 1) + " of " + std::to_string(o.storm) + ": " + name(s);
      return false;
    }
    conns.push_back(std::move(c));
  }
  st.create_s = tsc_to_s(rte_rdtsc() - t0);
  return true;
}

// Sends one REQ; false when the call itself failed (counted as that outcome).
bool StormClient::issue(Conn& c, uint64_t due) {
  c.due = due;
  Status s = create_connector(env.a(), nullptr, nullptr, &c.conn);
  if (s == Status::kSuccess)
    s = c.conn->connect(*c.qp, nullptr, 0, dst, dst_len, 1, 1, nullptr, 0, &Conn::on_connected, &c);
  if (s == Status::kPending) return true;
  c.answered.store(rte_rdtsc());
  c.status.store(s);
  return false;
}

void StormClient::record(uint32_t i) {
  Conn& c = *conns[i];
  const Status s = c.status.load(std::memory_order_acquire);
  switch (s) {
    case Status::kSuccess:
      c.established = true;
      ++st.established;
      st.setup_ns.record(ns_between(c.due, c.answered.load(std::memory_order_relaxed)));
      break;
    case Status::kConnectionRefused: {
      uint16_t reason = 0;  // 0: refused without a REJ we could read
      (void)c.conn->get_reject_reason(&reason);
      ++st.refused[reason];
      break;
    }
    case Status::kIoTimeout:
      ++st.no_answer;
      break;
    case Status::kHostUnreachable:
      ++st.unreachable;
      break;
    default:
      ++st.failed[name(s)];
  }
}

bool StormClient::wait_answer(Conn& c, Stall& stall) {
  while (c.status.load(std::memory_order_acquire) == Status::kPending) {
    if (stall.expired()) {
      st.error = "no answer to the first connection request within --timeout";
      return false;
    }
    idle(env.driver());
  }
  return true;
}

// --connect-retry: the first request again, every 100 ms, while nobody listens on the port yet
// (REJ 8) or the server's port does not answer (a server still starting); it then counts as the
// storm's first connection. A probe that connects and disconnects instead would change the
// server (cmtime's server reuses the CQs of its first connection for every later one).
bool StormClient::wait_for_listener() {
  const uint64_t hz = tsc_hz();
  const uint64_t until = rte_rdtsc() + static_cast<uint64_t>(o.connect_retry * hz);
  Conn& c = *conns[0];
  for (;;) {
    Stall stall(o.timeout);
    if (issue(c, rte_rdtsc()) && !wait_answer(c, stall)) return false;
    const Status s = c.status.load(std::memory_order_acquire);
    uint16_t reason = 0;
    const bool early = s == Status::kHostUnreachable || s == Status::kIoTimeout ||
                       (s == Status::kConnectionRefused &&
                        c.conn->get_reject_reason(&reason) == Status::kSuccess && reason == 8);
    if (!early || rte_rdtsc() >= until) break;
    c.conn.reset();
    c.status.store(Status::kPending);
    const uint64_t resume = rte_rdtsc() + hz / 10;
    while (rte_rdtsc() < resume) idle(env.driver());
  }
  record(0);
  return true;
}

bool StormClient::connect_phase() {
  const uint64_t hz = tsc_hz();
  std::vector<uint32_t> pending;
  uint32_t next = 0, answered = 0;
  if (o.connect_retry > 0) {
    if (!wait_for_listener()) return false;
    next = answered = 1;
  }
  // With the retries, the storm starts with the first request that was answered.
  const uint64_t start = next == 1 ? conns[0]->due : rte_rdtsc();
  Stall stall(o.timeout);
  while (answered < o.storm) {
    const uint64_t now = rte_rdtsc();
    while (next < o.storm) {
      uint64_t due = now;
      if (o.storm_rate != 0) {
        due = start + static_cast<uint64_t>(static_cast<double>(next) * static_cast<double>(hz) /
                                            o.storm_rate);
        if (due > now) break;
      } else if (pending.size() >= o.storm_window) {
        break;
      }
      if (issue(*conns[next], due))
        pending.push_back(next);
      else
        record(next), ++answered;
      ++next;
    }
    const bool progress = reap(conns, pending, &Conn::status, [&](uint32_t i, Status) {
      record(i);
      ++answered;
    });
    if (!turn(progress, stall, env.driver(), pending.size(), "connection requests", o.timeout,
              &st.error))
      return false;
  }
  uint64_t last = start, last_established = start;
  for (const auto& c : conns) {
    last = std::max(last, c->answered.load());
    if (c->established) last_established = std::max(last_established, c->answered.load());
  }
  st.setup_s = tsc_to_s(last_established - start);
  st.answer_s = tsc_to_s(last - start);
  return true;
}

// Where the peer first refused: the lowest request it refused, and how many connections it had
// accepted before it answered that one.
void StormClient::find_first_refusal() {
  for (uint32_t i = 0; i < conns.size() && st.first_refusal < 0; ++i)
    if (conns[i]->status.load() == Status::kConnectionRefused) st.first_refusal = i;
  if (st.first_refusal < 0) return;
  const uint64_t at = conns[st.first_refusal]->answered.load();
  for (const auto& c : conns)
    if (c->established && c->answered.load() < at) ++st.held_at_refusal;
}

bool StormClient::teardown_phase() {
  for (const auto& c : conns)
    if (c->established && c->peer_gone.load()) ++st.peer_dropped;
  const uint64_t start = rte_rdtsc();
  const uint32_t window = o.storm_rate != 0 ? o.storm : o.storm_window;
  std::vector<uint32_t> pending;
  uint32_t next = 0;
  Stall stall(o.timeout);
  auto settle = [&](Conn& c, Status s) {
    if (s == Status::kSuccess) {
      ++st.torn_down;
      st.teardown_ns.record(ns_between(c.disc_start, c.disc_answered.load()));
    } else {
      ++st.teardown_failed[name(s)];
    }
  };
  while (next < conns.size() || !pending.empty()) {
    while (next < conns.size() && pending.size() < window) {
      Conn& c = *conns[next];
      if (c.established) {
        c.disc_start = rte_rdtsc();
        const Status s = c.conn->disconnect(&Conn::on_disconnected, &c);
        if (s == Status::kPending)
          pending.push_back(next);
        else if (s == Status::kSuccess)
          ++st.peer_first;  // the peer disconnected first
        else
          ++st.teardown_failed[name(s)];
      }
      ++next;
    }
    const bool progress = reap(conns, pending, &Conn::disc_status,
                               [&](uint32_t i, Status s) { settle(*conns[i], s); });
    if (!turn(progress, stall, env.driver(), pending.size(), "disconnects", o.timeout, &st.error))
      return false;
  }
  st.teardown_s = tsc_to_s(rte_rdtsc() - start);
  return true;
}

void print_client(const StormStats& st) {
  std::printf(" QPs created before the storm: %u in %.3f s\n", st.n, st.create_s);
  std::printf(" setup: %llu of %u established in %.3f s = %.0f connections/s",
              static_cast<unsigned long long>(st.established), st.n, st.setup_s,
              rate(st.established, st.setup_s));
  if (st.established != st.n) std::printf("; every request answered in %.3f s", st.answer_s);
  std::printf("\n");
  print_latency("setup (REQ -> REP)", st.setup_ns);
  std::printf(" refused: %llu", static_cast<unsigned long long>(st.refusals()));
  for (const auto& [reason, n] : st.refused)
    std::printf("; %llu with reason %u (%s)", static_cast<unsigned long long>(n), reason,
                reason == 0 ? "none given" : reject_reason_name(reason));
  std::printf("\n no answer: %llu; unreachable: %llu",
              static_cast<unsigned long long>(st.no_answer),
              static_cast<unsigned long long>(st.unreachable));
  for (const auto& [what, n] : st.failed)
    std::printf("; %llu failed with %s", static_cast<unsigned long long>(n), what.c_str());
  std::printf("\n");
  if (st.first_refusal >= 0)
    std::printf(" the peer first refused request %lld, holding %llu connections of ours\n",
                static_cast<long long>(st.first_refusal + 1),
                static_cast<unsigned long long>(st.held_at_refusal));
  std::printf(" held: %llu; disconnected by the peer while held: %llu\n",
              static_cast<unsigned long long>(st.established),
              static_cast<unsigned long long>(st.peer_dropped));
  std::printf(" teardown: %llu disconnected in %.3f s = %.0f disconnects/s",
              static_cast<unsigned long long>(st.torn_down), st.teardown_s,
              rate(st.torn_down, st.teardown_s));
  if (st.peer_first != 0)
    std::printf("; %llu already disconnected by the peer",
                static_cast<unsigned long long>(st.peer_first));
  for (const auto& [what, n] : st.teardown_failed)
    std::printf("; %llu failed with %s", static_cast<unsigned long long>(n), what.c_str());
  std::printf("\n");
  print_latency("teardown (DREQ -> DREP)", st.teardown_ns);
}

// ---- Server ---------------------------------------------------------------------------------

struct StormServer {
  const Options& o;
  Env& env;
  StormStats& st;
  CmInbox inbox;
  Handle<Pd> pd;
  Handle<Cq> cq;
  Conns conns;
  uint32_t taken = 0, held = 0, accepting = 0, gone = 0;

  StormServer(const Options& o_, Env& e, StormStats& s) : o(o_), env(e), st(s), inbox(e.a()) {}
  bool take(Connector* c);
  bool reap();
  bool run(int family);
};

// A request: refused at the limit, else accepted with a QP of its own.
bool StormServer::take(Connector* fresh) {
  ++taken;
  auto c = std::make_unique<Conn>();
  c->conn = Handle<Connector>(fresh);
  c->due = rte_rdtsc();
  if (o.storm_limit != 0 && held + accepting >= o.storm_limit) {
    static constexpr char kWhy[] = "urnic-perf: at its --storm-limit";
    (void)c->conn->reject(kWhy, sizeof kWhy);
    ++st.rejected_at_limit;
    return true;
  }
  Status s = pd->create_qp(*cq, *cq, nullptr, 1, 1, 1, 1, 0, nullptr, nullptr, &c->qp);
  if (s == Status::kSuccess)
    s = c->conn->accept(*c->qp, 1, 1, nullptr, 0, &Conn::on_peer_gone, c.get(), &Conn::on_accepted,
                        c.get());
  if (s != Status::kPending) {
    // Out of QPs (or the client gave up already): refused, as a peer at its limit does.
    (void)c->conn->reject(nullptr, 0);
    ++st.failed[name(s)];
    return true;
  }
  ++accepting;
  conns.push_back(std::move(c));
  return true;
}

// Accepts that completed, connections the client disconnected; true on any progress.
bool StormServer::reap() {
  bool progress = false;
  for (auto& cp : conns) {
    Conn& c = *cp;
    if (c.closed) continue;
    if (!c.established) {
      const Status s = c.status.load(std::memory_order_acquire);
      if (s == Status::kPending) continue;
      --accepting;
      progress = true;
      if (s != Status::kSuccess) {
        ++st.failed[std::string("accept: ") + name(s)];
        c.close();
        continue;
      }
      c.established = true;
      ++st.established;
      ++held;
      st.setup_ns.record(ns_between(c.due, c.answered.load(std::memory_order_relaxed)));
    }
    if (c.peer_gone.load()) {
      c.close();
      --held;
      ++gone;
      progress = true;
    }
  }
  if (progress)
    conns.erase(std::remove_if(conns.begin(), conns.end(), [](const auto& c) { return c->closed; }),
                conns.end());
  return progress;
}

bool StormServer::run(int family) {
  if (Status s = env.a().create_pd(nullptr, nullptr, &pd); s != Status::kSuccess)
    return (st.error = std::string("PD: ") + name(s)), false;
  if (Status s = env.a().create_cq(64, nullptr, nullptr, 1, nullptr, nullptr, &cq);
      s != Status::kSuccess)
    return (st.error = std::string("CQ: ") + name(s)), false;
  if (Status s = inbox.listen(family, o.tcp_port); s != Status::kSuccess)
    return (st.error = "cannot listen on port " + std::to_string(o.tcp_port) + ": " + name(s)),
           false;
  std::printf(" waiting for %u connection requests on port %u (IB CM, rdma_cm's TCP port space)\n",
              o.storm, o.tcp_port);
  std::fflush(stdout);
  Stall stall(o.timeout);
  uint64_t first = 0;
  while (taken < o.storm || accepting != 0 || held != 0) {
    bool progress = false;
    while (taken < o.storm) {
      Connector* c = inbox.take();
      if (c == nullptr) break;
      if (first == 0) first = rte_rdtsc();
      progress = take(c);
    }
    progress = reap() || progress;
    if (progress) stall.progress();
    if (stall.expired()) {
      st.error = taken == 0 ? "no connection request within --timeout"
                            : "no progress for --timeout seconds (" + std::to_string(taken) +
                                  " requests taken, " + std::to_string(held) + " held, " +
                                  std::to_string(accepting) + " being accepted)";
      return false;
    }
    if (!progress) idle(env.driver());
  }
  st.teardown_s = first != 0 ? tsc_to_s(rte_rdtsc() - first) : 0;
  st.torn_down = gone;
  return true;
}

void print_server(const StormStats& st) {
  uint64_t failed = 0;
  for (const auto& [what, n] : st.failed) failed += n;
  std::printf(" requests: %u; accepted: %llu; rejected at --storm-limit: %llu; failed: %llu\n",
              st.n, static_cast<unsigned long long>(st.established),
              static_cast<unsigned long long>(st.rejected_at_limit),
              static_cast<unsigned long long>(failed));
  for (const auto& [what, n] : st.failed)
    std::printf("   %llu: %s\n", static_cast<unsigned long long>(n), what.c_str());
  print_latency("accept (request -> RTU)", st.setup_ns);
  std::printf(" disconnected by the client: %llu; first request to last disconnect %.3f s\n",
              static_cast<unsigned long long>(st.torn_down), st.teardown_s);
}

// ---- JSON -----------------------------------------------------------------------------------

void json_latency(std::ofstream& f, const char* name, const Histogram& h) {
  auto us = [](uint64_t ns) { return static_cast<double>(ns) / 1000.0; };
  f << ",\n  \"" << name << "_us\": {\"count\": " << h.count() << ", \"min\": " << us(h.min())
    << ", \"p50\": " << us(h.quantile(0.5)) << ", \"p90\": " << us(h.quantile(0.9))
    << ", \"p99\": " << us(h.quantile(0.99)) << ", \"p999\": " << us(h.quantile(0.999))
    << ", \"max\": " << us(h.max()) << "}";
}

template <class Map>
void json_counts(std::ofstream& f, const char* name, const Map& m) {
  f << ",\n  \"" << name << "\": {";
  const char* sep = "";
  for (const auto& [k, n] : m) {
    f << sep << "\"" << k << "\": " << n;
    sep = ", ";
  }
  f << "}";
}

bool write_json(const Options& o, const StormStats& st, int rc, std::string* err) {
  std::ofstream f(o.json);
  if (!f) return (*err = "cannot write " + o.json), false;
  const bool client = o.role() == Role::kClient;
  f << "{\n  \"connect_storm\": {\"role\": \"" << (client ? "client" : "server")
    << "\", \"requests\": " << st.n << ", \"rate\": " << o.storm_rate
    << ", \"window\": " << o.storm_window << ", \"exit\": " << rc
    << "},\n  \"established\": " << st.established << ",\n  \"setup_s\": " << st.setup_s
    << ",\n  \"setup_per_s\": " << rate(st.established, st.setup_s)
    << ",\n  \"answered_s\": " << st.answer_s << ",\n  \"no_answer\": " << st.no_answer
    << ",\n  \"unreachable\": " << st.unreachable
    << ",\n  \"first_refusal\": " << st.first_refusal + (st.first_refusal >= 0 ? 1 : 0)
    << ",\n  \"held_at_refusal\": " << st.held_at_refusal
    << ",\n  \"peer_dropped\": " << st.peer_dropped << ",\n  \"torn_down\": " << st.torn_down
    << ",\n  \"teardown_s\": " << st.teardown_s
    << ",\n  \"teardown_per_s\": " << rate(st.torn_down, st.teardown_s)
    << ",\n  \"rejected_at_limit\": " << st.rejected_at_limit;
  json_counts(f, "refused_by_reason", st.refused);
  json_counts(f, "failed", st.failed);
  json_counts(f, "teardown_failed", st.teardown_failed);
  json_latency(f, "setup", st.setup_ns);
  json_latency(f, "teardown", st.teardown_ns);
  f << ",\n  \"error\": \"" << st.error << "\"\n}\n";
  return static_cast<bool>(f) || ((*err = "cannot write " + o.json), false);
}

int client_exit(const StormStats& st) {
  uint64_t bad = 0;
  for (const auto& [what, n] : st.teardown_failed) bad += n;
  for (const auto& [what, n] : st.failed) bad += n;
  if (!st.error.empty() || bad != 0) return kExitRunFailed;
  if (st.established != st.n) return kExitStormRefused;
  return kExitOk;
}

int run_client(const Options& o, Env& env, bool v4, StormStats& st) {
  sockaddr_storage dst{};
  socklen_t len = 0;
  std::string err;
  if (!cm_resolve(o.server, o.tcp_port, v4, &dst, &len, &err)) {
    std::fprintf(stderr, "urnic-perf: %s\n", err.c_str());
    return kExitUsage;
  }
  std::printf(" urnic-perf connection storm: %u RC connections to %s port %u (IB CM, rdma_cm), ",
              o.storm, o.server.c_str(), o.tcp_port);
  if (o.storm_rate != 0)
    std::printf("%u requests per second\n", o.storm_rate);
  else
    std::printf("%u requests outstanding at most\n", o.storm_window);
  StormClient c{o, env, reinterpret_cast<const sockaddr*>(&dst), len, st, {}, {}, {}};
  if (c.create_qps() && c.connect_phase()) {
    c.find_first_refusal();
    (void)c.teardown_phase();
  }
  print_client(st);
  const int rc = client_exit(st);
  if (!st.error.empty())
    std::fprintf(stderr, "urnic-perf: connection storm: %s\n", st.error.c_str());
  std::printf(" %s\n", rc == kExitOk ? "PASS: every connection set up and torn down"
                       : rc == kExitStormRefused
                           ? "the peer refused or never answered some requests"
                           : "FAIL");
  return rc;
}

int run_server(const Options& o, Env& env, bool v4, StormStats& st) {
  StormServer s(o, env, st);
  const bool ok = s.run(v4 ? AF_INET : AF_INET6);
  st.n = s.taken;
  print_server(st);
  if (!ok) {
    std::fprintf(stderr, "urnic-perf: connection storm: %s\n", st.error.c_str());
    return s.taken == 0 ? kExitNoPeer : kExitStalled;
  }
  const bool clean = st.failed.empty();
  std::printf(" %s\n", clean ? "PASS" : "FAIL: some accepts failed");
  return clean ? kExitOk : kExitRunFailed;
}

}  // namespace

int run_storm(const Options& o) {
  Env env;
  if (!env.open_port(o)) {
    std::fprintf(stderr, "urnic-perf: %s\n", env.error_text().c_str());
    return kExitRunFailed;
  }
  std::string err;
  const Gid gid = pick_gid(env.a(), o.gid_index, &err);
  if (!err.empty()) {
    std::fprintf(stderr, "urnic-perf: %s\n", err.c_str());
    return kExitRunFailed;
  }
  auto st = std::make_unique<StormStats>();
  st->n = o.storm;
  const bool v4 = gid_is_ipv4(gid);
  int rc = o.role() == Role::kClient ? run_client(o, env, v4, *st) : run_server(o, env, v4, *st);
  if (!o.json.empty() && !write_json(o, *st, rc, &err)) {
    std::fprintf(stderr, "urnic-perf: --json: %s\n", err.c_str());
    if (rc == kExitOk) rc = kExitRunFailed;
  }
  return rc;
}

}  // namespace urnic::perf

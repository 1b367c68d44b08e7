// urnic-perf's shared machinery (session.h).
#include "bench/perf/session.h"

#include <rte_cycles.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <numeric>

#include "bench/common/fault_spec.h"
#include "bench/perf/report.h"

namespace urnic::perf {

// The largest IBTA path MTU whose packets fit an Ethernet MTU, the way rxe derives its port's
// active MTU (eth_mtu_int_to_enum(): the MTU minus RXE_MAX_HDR_LENGTH = 80, rounded down).
uint32_t ib_mtu_for(uint32_t eth_mtu) {
  const uint32_t avail = eth_mtu > 80 ? eth_mtu - 80 : 0;
  for (uint32_t m = 4096; m > 256; m /= 2)
    if (avail >= m) return m;
  return 256;
}

// ---- Running ----------------------------------------------------------------------------------

// Steps `runners` (and the engine, when this thread drives it) until all are done. `on_step`
// runs every iteration (stop conditions). Prints a progress line once a second on long runs.
// False when a runner failed or, with *stalled set, when nothing moved for the stall limit.
bool run_all(Driver& d, const std::vector<Runner*>& runners, const Options& o, Kind kind,
             uint64_t size, const std::function<void()>& on_step, bool* stalled) {
  const double stall_s = o.loopback() ? kStallSeconds : o.timeout;
  const uint64_t hz = tsc_hz();
  const uint64_t t0 = rte_rdtsc();
  uint64_t next_print = t0 + hz, last_progress_tsc = t0, last_progress = 0, last_printed = 0;
  uint64_t last_print_tsc = t0;
  EventWaiter* ev = d.events();
  for (uint64_t it = 0;; ++it) {
    d.poll();
    const uint64_t seen = ev != nullptr ? ev->count() : 0;  // before the polls (events.h)
    bool all = true, sleep = ev != nullptr;
    for (Runner* r : runners) {
      all &= r->step();
      sleep &= r->done() || r->waiting();
    }
    if (on_step) on_step();
    for (Runner* r : runners)
      if (r->failed()) return false;
    if (all) return true;
    // -e: every runner still going found its CQ empty and armed it. The timeout keeps the
    // callers' checks (the peer's TCP connection, the stall watchdog below) going.
    if (sleep) ev->wait(seen, std::chrono::milliseconds(100));
    if ((it & 255) != 0) continue;
    const uint64_t now = rte_rdtsc();
    uint64_t p = 0;
    for (Runner* r : runners) p += r->progress();
    if (p != last_progress) {
      last_progress = p;
      last_progress_tsc = now;
    } else if (stall_s > 0 && now - last_progress_tsc > static_cast<uint64_t>(stall_s * hz)) {
      std::fprintf(stderr, " urnic-perf: no progress for %.0f s%s\n", stall_s,
                   o.loopback() ? "" : " (--timeout)");
      if (stalled != nullptr) *stalled = true;
      return false;
    }
    if (o.progress && now >= next_print) {
      const double dt = tsc_to_s(now - last_print_tsc);
      const uint64_t msgs = runners.front()->progress();
      if (kind == Kind::kBw) {
        const double rate = static_cast<double>(msgs - last_printed) / dt;
        std::fprintf(stderr, " [%5.1f s] %12llu msgs  %9.3f Gb/s  %8.4f Mpps\n", tsc_to_s(now - t0),
                     static_cast<unsigned long long>(msgs),
                     rate * static_cast<double>(size) * 8 / 1e9, rate / 1e6);
      } else {
        std::fprintf(stderr, " [%5.1f s] %12llu messages  %9.0f per second\n", tsc_to_s(now - t0),
                     static_cast<unsigned long long>(msgs),
                     static_cast<double>(msgs - last_printed) / dt);
      }
      last_printed = msgs;
      last_print_tsc = now;
      next_print = now + hz;
    }
  }
}

namespace {
std::atomic<bool> g_stop{false};
extern "C" void on_stop_signal(int) { g_stop.store(true, std::memory_order_relaxed); }
}  // namespace

void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
}
const std::atomic<bool>* stop_flag() { return &g_stop; }
bool stop_requested() { return g_stop.load(std::memory_order_relaxed); }

IntervalPrinter::IntervalPrinter(const Options& o, uint64_t size, double factor)
    : o_(o), size_(size), factor_(factor) {
  interval_ = duration_tsc(o.duration);
  last_tsc_ = rte_rdtsc();
  next_ = last_tsc_ + interval_;
  if (o.cpu_util) last_cpu_ = read_cpu_stat();
}

void IntervalPrinter::tick(uint64_t now, uint64_t messages) {
  if (now < next_) return;
  row(now, messages);
  next_ += interval_;
  if (next_ <= now) next_ = now + interval_;  // a late tick does not print a burst of rows
}

void IntervalPrinter::finish(uint64_t now, uint64_t messages) {
  if (messages != last_msgs_) row(now, messages);
}

void IntervalPrinter::row(uint64_t now, uint64_t messages) {
  const uint64_t n = messages - last_msgs_;
  const double secs = tsc_to_s(now > last_tsc_ ? now - last_tsc_ : 1);
  BwReport r;
  r.size = size_;
  r.iters = n;
  const double unit = o_.gbits ? 125e6 : 1048576.0;
  r.bw_avg = factor_ * static_cast<double>(n) * static_cast<double>(size_) / secs / unit;
  r.msg_rate = factor_ * static_cast<double>(n) / secs / 1e6;
  double cpu = -1;
  if (o_.cpu_util) {
    const CpuStat c = read_cpu_stat();
    cpu = cpu_util(last_cpu_, c);
    last_cpu_ = c;
  }
  print_bw_row(r, cpu);
  last_msgs_ = messages;
  last_tsc_ = now;
}

RunConfig run_config(const Options& o, Test t, Role role, uint64_t size, bool peer_urnic) {
  RunConfig c;
  c.test = t;
  c.role = role;
  c.size = size;
  c.iters = o.effective_iters();
  c.duration = o.duration;
  c.tx_depth = o.effective_tx_depth();
  c.rx_depth = o.effective_rx_depth();
  c.cq_mod = o.cq_mod != 0 ? o.cq_mod : kDefaultCqMod;
  if (c.cq_mod > c.tx_depth) c.cq_mod = c.tx_depth;
  // perftest signals every RDMA READ (its read_bw prints "CQ Moderation : 1").
  if (t.verb == Verb::kRead && o.cq_mod == 0) c.cq_mod = 1;
  c.peer_urnic = peer_urnic;
  c.post_list = o.post_list;
  c.events = o.events;
  if (o.run_infinitely) c.stop = stop_flag();
  c.inline_size = o.inline_size;
  c.recv_extra = o.ud ? kGrhLength : 0;
  if (o.rate > 0 && t.kind == Kind::kBw) {
    // Gb/s of a mix: of its mean request size.
    double mean = static_cast<double>(size), weights = 0, bytes = 0;
    for (const MixEntry& e : o.mix) {
      weights += e.weight;
      bytes += static_cast<double>(e.weight) * static_cast<double>(e.size);
    }
    if (weights > 0) mean = bytes / weights;
    c.open_loop.rate = o.rate_gbps ? o.rate * 1e9 / (8.0 * mean) : o.rate;
    c.open_loop.mix = o.mix;
    c.open_loop.arrival = o.arrival;
    c.open_loop.seed = 0x5DEECE66Dull ^ size;
    c.cq_mod = 1;  // every request's latency is measured
    if (c.duration > 0) {
      const double n = std::ceil(c.open_loop.rate * c.duration / std::max(1u, o.qps));
      c.iters = static_cast<uint64_t>(std::max(1.0, n));
      c.duration = 0;
    }
  }
  return c;
}

SideOptions side_options(const Options& o) {
  SideOptions s;
  s.selective_repeat = o.sr != Options::SrMode::kOff;  // loopback: both ends are urnic
  s.timeout = static_cast<uint8_t>(o.qp_timeout);
  s.out_reads = o.out_reads != 0 ? o.out_reads : kMaxOutReads;
  s.inline_size = o.inline_size;
  s.ud = o.ud;
  return s;
}

void report_open_loop(const Options& o, Test t, uint64_t size, const Runner& r, Outcome* out) {
  const OpenLoop* ol = r.open_loop();
  if (ol == nullptr) return;
  OpenLoopRun run;
  run.test = test_name(t);
  run.size = size;
  run.qps = o.qps;
  run.messages = r.messages;
  run.seconds = r.tsc_end > r.tsc_start ? tsc_to_s(r.tsc_end - r.tsc_start) : 0;
  print_open_loop_summary(*ol, run);
  record_open_loop(o, *ol, run);
  std::string err;
  if (!o.json.empty() && !write_open_loop_json(o.json, *ol, run, &err)) out->fail(err);
}

namespace {
double rtt_factor(Test t) { return t.verb == Verb::kWrite || t.verb == Verb::kSend ? 2.0 : 1.0; }

}  // namespace

void print_lat_result(const Options& o, Test t, uint64_t size, Runner& r, double cpu) {
  if (o.duration > 0) {
    const auto [avg_us, tps] =
        print_lat_duration_row(size, r.iterations(), r.tsc_start, r.tsc_end, rtt_factor(t), cpu);
    record_lat_duration_row(o, t, size, r.iterations(), avg_us, tps);
  } else {
    const LatStats s = lat_stats(r.tposted, rtt_factor(t));
    print_lat_row(size, r.iterations(), s);
    record_lat_row(o, t, size, r.iterations(), s);
  }
}

BwReport bw_of(const Options& o, uint64_t size, Runner& r) {
  return bw_report(size, r.iterations(), r.messages, r.tsc_start, r.tsc_end, r.events, o.gbits);
}

Totals totals_of(const std::vector<Adapter*>& adapters) {
  Totals t;
  for (Adapter* a : adapters) {
    AdapterCounters c;
    if (a->query_counters(&c) != Status::kSuccess) continue;
    t.qps.add(c.qps);
    // Each engine's port queue on its own line (--engines); one engine: the adapter's.
    for (uint32_t e = 0; e < c.engines; ++e) {
      PortCounters pc = c.port;
      if (c.engines > 1 && a->query_engine_counters(e, &pc) != Status::kSuccess) continue;
      t.ports.push_back(pc);
    }
    t.tx_faults.add(c.tx_faults);
    t.rx_faults.add(c.rx_faults);
  }
  return t;
}

void print_summary(const Outcome& out, uint64_t completions, const Totals& t, bool verbose,
                   const EventWaiter* events) {
  const QpCounters& c = t.qps;
  print_result_line();
  std::printf(" urnic: %llu completions, %llu with errors, %llu retransmitted packets\n",
              static_cast<unsigned long long>(completions),
              static_cast<unsigned long long>(c.completions_error),
              static_cast<unsigned long long>(c.retransmits));
  auto u = [](uint64_t v) { return static_cast<unsigned long long>(v); };
  if (events != nullptr)
    std::printf(" events: slept %llu times, %llu CQ notifications\n", u(events->sleeps()),
                u(events->notifications()));
  // Always: whether the kernel kept its traffic and urnic got only its own frames.
  if (t.has_xdp)
    std::printf(
        " xdp: to urnic %llu RoCEv2 + %llu ARP/ND frames, to the kernel %llu, urnic's on a queue"
        " without its socket %llu\n",
        u(t.xdp.roce), u(t.xdp.neigh), u(t.xdp.passed), u(t.xdp.no_socket));
  if (verbose) {
    std::printf(
        " qp: tx %llu rx %llu pkts, acks %llu/%llu, timeouts %llu, naks %llu/%llu, rnr %llu/%llu,"
        " dup %llu, ooo %llu, implied %llu, stale %llu\n",
        u(c.tx_packets), u(c.rx_packets), u(c.acks_sent), u(c.acks_received), u(c.timeouts),
        u(c.naks_sent[0] + c.naks_sent[1] + c.naks_sent[2] + c.naks_sent[3]),
        u(c.naks_received[0] + c.naks_received[1] + c.naks_received[2] + c.naks_received[3]),
        u(c.rnr_naks_sent), u(c.rnr_naks_received), u(c.duplicate_requests), u(c.out_of_sequence),
        u(c.implied_naks), u(c.dropped_stale));
    std::printf(
        " selective repeat: resent %llu packets one by one, %llu in go-back-N passes; held %llu"
        " early requests, could not hold %llu; probes %llu\n",
        u(c.selective_retransmits), u(c.retransmits - c.selective_retransmits), u(c.ooo_held),
        u(c.ooo_dropped), u(c.sr_probes));
    std::printf(
        " congestion: CE marked %llu, CNPs sent %llu received %llu, rate cuts %llu, paced now"
        " %llu Mb/s\n",
        u(c.ce_marked), u(c.cnps_sent), u(c.cnps_received), u(c.cc_rate_decreases),
        u(c.cc_paced_mbps));
    for (auto [dir, f] : {std::pair{"sent", &t.tx_faults}, {"received", &t.rx_faults}}) {
      if (f->seen == 0) continue;
      std::printf(" injected into frames %s: %s\n", dir, bench::fault_counts(*f).c_str());
    }
    for (const PortCounters& e : t.ports) {
      const uint64_t drops = e.rx_drops_total();
      std::printf(
          " endpoint: steps %llu busy %llu, rx %llu tx %llu pkts, rx drops %llu, "
          "tx ring full %llu, tx kicks %llu, mbuf alloc failures %llu, hand-offs out %llu in "
          "%llu\n",
          u(e.steps), u(e.busy_steps), u(e.rx_packets), u(e.tx_packets), u(drops),
          u(e.tx_ring_full), u(e.tx_kicks), u(e.mbuf_alloc_failures), u(e.handoffs_out),
          u(e.handoffs_in));
    }
  }
  // One line per distinct note (an -a run checks every size).
  std::vector<std::string> uniq;
  for (const auto& n : out.notes)
    if (std::find(uniq.begin(), uniq.end(), n) == uniq.end()) uniq.push_back(n);
  if (uniq.size() > 3) {
    std::printf(" data: %zu checks, the last: %s\n", out.notes.size(), uniq.back().c_str());
  } else {
    for (const auto& n : uniq) std::printf(" data: %s\n", n.c_str());
  }
  std::printf(" result: %s\n", out.ok ? "PASS" : "FAIL");
  std::fflush(stdout);
}

Gid pick_gid(Adapter& a, int index, std::string* err) {
  auto* ext = a.query_extension<AdapterExtension>();
  Gid g{};
  if (ext == nullptr || index < 0 ||
      ext->query_gid(static_cast<uint32_t>(index), &g) != Status::kSuccess) {
    *err = "GID index " + std::to_string(index) + " does not exist (this adapter has " +
           std::to_string(ext != nullptr ? ext->gid_count() : 0) +
           ": 0 link-local, then --ip, then --ipv6)";
    return {};
  }
  return g;
}

// An IPv4-mapped GID (::ffff:a.b.c.d) is an IPv4 address (RoCEv2, IBTA A17.4.5.1).
bool gid_is_ipv4(const Gid& g) {
  static constexpr uint8_t kPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF};
  return std::memcmp(g.data(), kPrefix, sizeof(kPrefix)) == 0;
}
uint32_t gid_to_ipv4(const Gid& g) {
  return static_cast<uint32_t>(g[12]) << 24 | static_cast<uint32_t>(g[13]) << 16 |
         static_cast<uint32_t>(g[14]) << 8 | g[15];
}

// The address vector to the peer whose GID is `peer`, from our GID `sgid_index` (MAC
// resolved by the adapter unless `mac` is given).
AddressVector address_to(const Gid& peer, int sgid_index, const std::array<uint8_t, 6>* mac) {
  AddressVector av;
  av.ipv6 = !gid_is_ipv4(peer);
  if (av.ipv6)
    av.dst_ipv6 = peer;
  else
    av.dst_ipv4 = gid_to_ipv4(peer);
  if (mac != nullptr) av.dst_mac = *mac;
  av.sgid_index = sgid_index;
  return av;
}

}  // namespace urnic::perf

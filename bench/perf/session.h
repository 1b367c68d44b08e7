// urnic-perf's shared machinery (bench/perf/main.cc runs the loopback, remote.cc the real port):
// the environment (EAL, port, adapters, engine), the run loop, outcomes and the summary.
#pragma once

#include <arpa/inet.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench/perf/cpustat.h"
#include "bench/perf/output.h"
#include "bench/perf/perf.h"
#include "bench/perf/runners.h"
#include "bench/perf/side.h"
#include "urnic/daemon.h"
#include "urnic/route.h"

namespace urnic::perf {

// A loopback run that makes no progress for this long has failed (against a remote peer it is
// --timeout: a peer that vanished, say; RNR retries are infinite with rnr_retry 7).
constexpr double kStallSeconds = 30;

// The largest IB MTU whose frames fit an Ethernet MTU.
uint32_t ib_mtu_for(uint32_t eth_mtu);

// ---- Environment: EAL, ports, adapters, engine --------------------------------------------------

class Env {
 public:
  ~Env() {
    for (auto& e : engines_) e->stop();
    b_.reset();
    a_.reset();
  }

  bool open_loopback(const Options& o) {
    if (!runtime(o)) return false;
    make_engines(o, 2);
    uint16_t pa = 0, pb = 0;
    if (create_ring_port_pair("perf", static_cast<uint16_t>(o.engines), &pa, &pb) !=
        Status::kSuccess)
      return error(std::string("cannot create the net_ring pair: ") + last_error());
    AdapterConfig ca, cb;
    ca.port_id = pa;
    cb.port_id = pb;
    ca.ipv4 = 0xC0000201;  // 192.0.2.1 and .2 (documentation range)
    cb.ipv4 = 0xC0000202;
    ca.ipv6 = std::array<uint8_t, 16>{0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    cb.ipv6 = std::array<uint8_t, 16>{0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
    ca.mac = std::array<uint8_t, 6>{2, 0, 0, 0, 0, 1};
    cb.mac = std::array<uint8_t, 6>{2, 0, 0, 0, 0, 2};
    ca.max_qps = cb.max_qps = adapter_qps(o);
    ca.adaptive_retransmit = cb.adaptive_retransmit = o.adaptive_retransmit;
    ca.broken_rules = cb.broken_rules = o.broken_rules;
    ca.congestion = cb.congestion = o.congestion();
    ca.tx_faults = o.inject_tx;  // the client's adapter
    ca.rx_faults = o.inject_rx;
    if (Status s = Adapter::open(ca, engine_list(), &a_); s != Status::kSuccess)
      return error("cannot open adapter A: " + std::string(to_string(s)));
    if (Status s = Adapter::open(cb, engine_list(), &b_); s != Status::kSuccess)
      return error("cannot open adapter B: " + std::string(to_string(s)));
    mtu_ = 4096;  // net_ring has no MTU
    device_ = "urnic0";
    return start(o);
  }

  // Attach mode: urnicd's adapters urnic0 and urnic1 (its in-memory pair), no EAL or engine in
  // this process; the daemon's engine serves both.
  bool open_attached(const Options& o) {
    if (attach(o.daemon, "urnic-perf") != Status::kSuccess)
      return error(std::string("cannot attach: ") + last_error());
    if (Adapter::open("urnic0", &a_) != Status::kSuccess ||
        Adapter::open("urnic1", &b_) != Status::kSuccess)
      return error(std::string("cannot open urnic0 / urnic1 of the daemon: ") + last_error());
    mtu_ = 4096;
    device_ = "urnic0 (urnicd " + o.daemon + ")";
    driver_ = std::make_unique<Driver>(std::vector<Engine*>{}, o.idle_yield, nullptr);
    return true;
  }

  bool open_port(const Options& o) {
    if (!runtime(o)) return false;
    make_engines(o, 1);
    uint16_t port = 0;
    std::string name;
    if (!o.vdevs.empty()) {
      // Every --vdev is probed; the first is the port.
      for (size_t i = o.vdevs.size(); i-- > 0;) {
        std::string args = o.vdevs[i];  // open_vdev_port sizes af_packet's ring
        // One queue pair per engine (af_packet spreads them with a fanout hash).
        if (i == 0 && o.engines > 1 && args.rfind("net_af_packet", 0) == 0 &&
            args.find("qpairs=") == std::string::npos)
          args += ",qpairs=" + std::to_string(o.engines);
        // AF_XDP: one socket per engine, on the interface's queues 0 .. engines-1 (the XDP
        // program sends each queue's frames to its socket; the RoCEv2 source port spreads them).
        if (i == 0 && o.engines > 1 && args.rfind("net_af_xdp", 0) == 0 &&
            args.find("queue_count=") == std::string::npos)
          args += ",queue_count=" + std::to_string(o.engines);
        if (open_vdev_port(args, &port) != Status::kSuccess)
          return error(std::string("cannot open --vdev: ") + last_error());
        name = args.substr(0, args.find(','));
      }
    } else if (open_pci_port(o.pci, &port) != Status::kSuccess) {
      return error(std::string("cannot open --port: ") + last_error());
    } else {
      name = o.pci;
    }
    AdapterConfig c;
    c.port_id = port;
    c.max_qps = adapter_qps(o);
    if (!o.ip.empty()) {
      std::array<uint8_t, 16> a{};
      bool v4 = false;
      if (parse_address(o.ip, &a, &c.ipv4_prefix_len, &v4) != Status::kSuccess || !v4)
        return error("bad --ip " + o.ip);
      c.ipv4 = uint32_t{a[12]} << 24 | uint32_t{a[13]} << 16 | uint32_t{a[14]} << 8 | a[15];
    }
    if (!o.ipv6.empty()) {
      std::array<uint8_t, 16> v6{};
      bool v4 = true;
      if (parse_address(o.ipv6, &v6, &c.ipv6_prefix_len, &v4) != Status::kSuccess || v4)
        return error("bad --ipv6 " + o.ipv6);
      c.ipv6 = v6;
    }
    for (const std::string& r : o.routes) {
      Route parsed;
      if (parse_route(r, &parsed) != Status::kSuccess) return error("bad --route " + r);
      c.routes.push_back(parsed);
    }
    if (!o.mac.empty()) {
      std::array<uint8_t, 6> m{};
      if (parse_mac(o.mac, &m) != Status::kSuccess) return error("bad --mac " + o.mac);
      c.mac = m;
    }
    c.adaptive_retransmit = o.adaptive_retransmit;
    c.broken_rules = o.broken_rules;
    c.congestion = o.congestion();
    c.tx_faults = o.inject_tx;
    c.rx_faults = o.inject_rx;
    if (Status s = Adapter::open(c, engine_list(), &a_); s != Status::kSuccess)
      return error("cannot open port " + name + " with " + std::to_string(o.engines) +
                   " queue pair(s): " + std::string(to_string(s)));
    uint32_t eth_mtu = 1500;
    if (port_mtu(port, &eth_mtu) != Status::kSuccess)
      return error(std::string("cannot read the port's MTU: ") + last_error());
    mtu_ = ib_mtu_for(eth_mtu);
    device_ = "urnic0 (" + name + ")";
    port_ = port;
    return start(o);
  }

  Adapter& a() { return *a_; }
  // The port open_port opened (the real-port modes).
  uint16_t port() const { return port_; }
  Adapter& b() { return *b_; }
  Driver& driver() { return *driver_; }
  uint32_t mtu() const { return mtu_; }
  const std::string& device() const { return device_; }
  const std::string& error_text() const { return err_; }
  bool engine_on_lcore() const { return !driver_->manual(); }
  // How many engines run on lcores of their own (the rest are driven by this thread).
  uint32_t engines_launched() const { return launched_; }

 private:
  bool runtime(const Options& o) {
    RuntimeConfig rc;
    rc.program = "urnic-perf";
    rc.lcores = o.lcores;
    if (rc.lcores.empty()) rc.lcores = ::sysconf(_SC_NPROCESSORS_ONLN) >= 2 ? "0-1" : "0";
    if (!o.pci.empty()) rc.pci_allow.push_back(o.pci);
    rc.memory_mb = 512;
    rc.memory = o.memory;
    if (runtime_init(rc) != Status::kSuccess)
      return error(std::string("EAL bring-up failed: ") + last_error());
    return true;
  }

  // Engine i runs on worker lcore i; the engines beyond the workers (all of them, with one
  // lcore) are driven by this thread.
  bool start(const Options& o) {
    const auto workers = worker_lcores();
    std::vector<Engine*> manual;
    for (size_t i = 0; i < engines_.size(); ++i) {
      if (i >= workers.size()) {
        manual.push_back(engines_[i].get());
        continue;
      }
      if (!engines_[i]->launch(workers[i]))
        return error("cannot launch engine " + std::to_string(i) + " on lcore " +
                     std::to_string(workers[i]));
      ++launched_;
    }
    if (o.events) {
      // A thread that drives an engine cannot sleep until the engine completes something.
      if (!manual.empty())
        return error("-e needs every engine on its own lcore: " + std::to_string(engines_.size()) +
                     " engine(s), " + std::to_string(workers.size()) +
                     " worker lcore(s) (--lcores)");
      events_ = std::make_unique<EventWaiter>();
    }
    driver_ = std::make_unique<Driver>(std::move(manual), o.idle_yield, events_.get());
    return true;
  }

  bool error(const std::string& e) {
    err_ = e;
    return false;
  }

  // QP numbers an adapter needs for -q (0 and 1 are reserved, IBTA §10.2.4), at least the
  // default; and an engine that owns `adapters` of them.
  static uint32_t adapter_qps(const Options& o) {
    return std::max({AdapterConfig{}.max_qps, o.qps + 2, o.storm + 8});
  }
  void make_engines(const Options& o, uint32_t adapters) {
    EngineConfig ec;
    ec.max_qps = std::max(ec.max_qps, adapters * adapter_qps(o));
    for (uint32_t i = 0; i < o.engines; ++i) engines_.push_back(std::make_unique<Engine>(ec));
  }
  std::vector<Engine*> engine_list() const {
    std::vector<Engine*> v;
    for (const auto& e : engines_) v.push_back(e.get());
    return v;
  }

  // First, so destroyed last: the CQs' notification callbacks point at it until the adapters
  // are gone.
  std::unique_ptr<EventWaiter> events_;
  std::vector<std::unique_ptr<Engine>> engines_;  // --engines, sized for -q (make_engines)
  uint32_t launched_ = 0;
  std::unique_ptr<Adapter> a_, b_;
  uint16_t port_ = 0;
  std::unique_ptr<Driver> driver_;
  uint32_t mtu_ = 1024;
  std::string device_;
  std::string err_;
};

struct Outcome {
  bool ok = true;
  int code = kExitOk;  // the exit code of the first failure
  std::vector<std::string> notes;
  void fail(const std::string& e, int exit_code = kExitRunFailed) {
    if (ok) code = exit_code;
    ok = false;
    std::fprintf(stderr, " urnic-perf: %s\n", e.c_str());
  }
  void data(const DataCheck& dc) {
    if (dc.checked && !dc.ok) fail("data check failed: " + dc.note);
    if (!dc.note.empty()) notes.push_back(dc.note);
  }
};

// The counters of `adapters` added up (QPs) and each port's (endpoint lines).
struct Totals {
  QpCounters qps;
  std::vector<PortCounters> ports;
  FaultCounters tx_faults, rx_faults;  // summed over the adapters
  // A net_af_xdp port running urnic's XDP program: what it sent to urnic and to the kernel.
  bool has_xdp = false;
  XdpCounters xdp;
};

// Steps `runners` (and the engine, when this thread drives it) until all are done. `on_step`
// runs every iteration (stop conditions). Prints a progress line once a second on long runs.
// False when a runner failed or, with *stalled set, when nothing moved for the stall limit.
bool run_all(Driver& d, const std::vector<Runner*>& runners, const Options& o, Kind kind,
             uint64_t size, const std::function<void()>& on_step, bool* stalled = nullptr);
RunConfig run_config(const Options& o, Test t, Role role, uint64_t size, bool peer_urnic);
void print_lat_result(const Options& o, Test t, uint64_t size, Runner& r, double cpu = -1);
BwReport bw_of(const Options& o, uint64_t size, Runner& r);
// The QP attributes the command line sets (--sr, -u, -o, -I).
SideOptions side_options(const Options& o);
// After an open-loop run (--rate): the summary, and the JSON report with --json.
void report_open_loop(const Options& o, Test t, uint64_t size, const Runner& r, Outcome* out);
Totals totals_of(const std::vector<Adapter*>& adapters);
// `events`: -e's waiter, whose sleeps and notifications are printed (null: no -e).
void print_summary(const Outcome& out, uint64_t completions, const Totals& t, bool verbose,
                   const EventWaiter* events = nullptr);

using Gid = std::array<uint8_t, 16>;
Gid pick_gid(Adapter& a, int index, std::string* err);
// An IPv4-mapped GID (::ffff:a.b.c.d) is an IPv4 address (RoCEv2, IBTA A17.4.5.1).
bool gid_is_ipv4(const Gid& g);
uint32_t gid_to_ipv4(const Gid& g);
// The address vector to the peer whose GID is `peer`, from our GID `sgid_index` (MAC
// resolved by the adapter unless `mac` is given).
AddressVector address_to(const Gid& peer, int sgid_index,
                         const std::array<uint8_t, 6>* mac = nullptr);

// --run_infinitely: SIGINT and SIGTERM set the flag (relaxed; the runners read it) instead of
// killing the process, so that the run ends with its last row and summary, exit 0.
void install_stop_handlers();
const std::atomic<bool>* stop_flag();
bool stop_requested();

// --run_infinitely's rows: every -D seconds, the messages of that interval (perftest's
// print_bw_infinite_mode(): no peak, "#iterations" the interval's count). `factor` scales the
// rate (perftest's run_inf_bi_factor: 2 for a bidirectional run whose peer is remote).
class IntervalPrinter {
 public:
  IntervalPrinter(const Options& o, uint64_t size, double factor);
  // Prints a row once the interval has passed; `messages`: the running total.
  void tick(uint64_t now, uint64_t messages);
  // The last, partial interval (after SIGINT / SIGTERM).
  void finish(uint64_t now, uint64_t messages);

 private:
  void row(uint64_t now, uint64_t messages);
  const Options& o_;
  uint64_t size_;
  double factor_;
  uint64_t interval_ = 0, next_ = 0, last_tsc_ = 0, last_msgs_ = 0;
  CpuStat last_cpu_;
};

int run_loopback(const Options& o);
int run_remote(const Options& o);

}  // namespace urnic::perf

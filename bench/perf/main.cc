// urnic-perf: perftest for urnic (issue 6).
//
// Loopback (no SERVER, --vdev or --port): two adapters in this process over a net_ring pair,
// one engine on lcore 1 (or driven by this thread when EAL has one lcore); the client's side of
// each run is printed the way perftest's client prints it.
//
// Real port: a perftest server (no SERVER argument) or client, speaking perftest 4.5's TCP
// exchange. The choreography of each tool, as captured between two Linux rxe guests running
// perftest 4.5 (see /work/shared/captures and docs/performance.md), with N QPs:
//   write_bw read_bw atomic_bw  N records, (RTR/RTS), N records, 1 record; the client runs;
//                               1 record, the client's report (5 x 8 bytes), close
//   send_bw                     N records, (RTR/RTS), 1 record, N records; per size: the server
//                               posts receives, 1 record, both run, and with -a 1 more record;
//                               close
//   send_lat                    as send_bw (one QP; no record after a size)
//   write_lat                   1 + 1 records, (RTR/RTS), 1 + 1 records; both run; TCP closed
//                               without a close exchange
//   read_lat atomic_lat         as write_lat; the server closes at once (its close record waits
//                               for the client's), the client runs and then closes
// where "close" is one more record each way and "done" each way (ctx_close_connection).
#include <arpa/inet.h>
#include <rte_cycles.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "bench/perf/oob.h"
#include "bench/perf/output.h"
#include "bench/perf/perf.h"
#include "bench/perf/runners.h"
#include "bench/perf/side.h"

namespace urnic::perf {
namespace {

// A loopback run that makes no progress for this long has failed (against a remote peer it is
// --timeout: a peer that vanished, say; RNR retries are infinite with rnr_retry 7).
constexpr double kStallSeconds = 30;

// af_packet ring geometry for frames with a 4 KiB payload (tests/loopback/port_vdev_test.cc):
// slots of 4352 bytes (4206-byte frame + the 66-byte TPACKET_V2 header offset, rounded to
// 256), whole slots per block, blocks of whole pages, 512 slots.
constexpr uint32_t kAfpFrameSize = 4352;
constexpr uint32_t kAfpFrames = 512;

std::string with_af_packet_defaults(const std::string& devargs) {
  if (devargs.rfind("net_af_packet", 0) != 0) return devargs;
  std::string d = devargs;
  if (d.find("qpairs=") == std::string::npos) d += ",qpairs=1";
  if (d.find("framesz=") == std::string::npos && d.find("blocksz=") == std::string::npos) {
    const uint32_t page = static_cast<uint32_t>(::getpagesize());
    const uint32_t block = std::lcm(kAfpFrameSize, page);
    const uint32_t per_block = block / kAfpFrameSize;
    const uint32_t frames = (kAfpFrames + per_block - 1) / per_block * per_block;
    d += ",framesz=" + std::to_string(kAfpFrameSize) + ",blocksz=" + std::to_string(block) +
         ",framecnt=" + std::to_string(frames);
  }
  return d;
}

// The largest IBTA path MTU whose packets fit an Ethernet MTU, the way rxe derives its port's
// active MTU (eth_mtu_int_to_enum(): the MTU minus RXE_MAX_HDR_LENGTH = 80, rounded down).
uint32_t ib_mtu_for(uint32_t eth_mtu) {
  const uint32_t avail = eth_mtu > 80 ? eth_mtu - 80 : 0;
  for (uint32_t m = 4096; m > 256; m /= 2)
    if (avail >= m) return m;
  return 256;
}

bool parse_mac(const std::string& s, std::array<uint8_t, 6>* m) {
  unsigned b[6];
  if (std::sscanf(s.c_str(), "%x:%x:%x:%x:%x:%x", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5]) != 6)
    return false;
  for (int i = 0; i < 6; ++i) (*m)[i] = static_cast<uint8_t>(b[i]);
  return true;
}

// ---- Environment: EAL, ports, adapters, engine --------------------------------------------------

class Env {
 public:
  ~Env() {
    engine_.stop();
    b_.reset();
    a_.reset();
  }

  bool open_loopback(const Options& o) {
    if (!runtime(o)) return false;
    uint16_t pa = 0, pb = 0;
    if (create_ring_port_pair("perf", 1, &pa, &pb) != Status::kSuccess)
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
    if (Status s = Adapter::open(ca, engine_, &a_); s != Status::kSuccess)
      return error("cannot open adapter A: " + std::string(to_string(s)));
    if (Status s = Adapter::open(cb, engine_, &b_); s != Status::kSuccess)
      return error("cannot open adapter B: " + std::string(to_string(s)));
    mtu_ = 4096;  // net_ring has no MTU
    device_ = "urnic0";
    return start(o);
  }

  bool open_port(const Options& o) {
    if (!runtime(o)) return false;
    uint16_t port = 0;
    std::string name;
    if (!o.vdevs.empty()) {
      // Every --vdev is probed; the first is the port.
      for (size_t i = o.vdevs.size(); i-- > 0;) {
        const std::string args = with_af_packet_defaults(o.vdevs[i]);
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
    if (!o.ip.empty()) {
      in_addr a{};
      if (::inet_pton(AF_INET, o.ip.c_str(), &a) != 1) return error("bad --ip " + o.ip);
      c.ipv4 = ntohl(a.s_addr);
    }
    if (!o.ipv6.empty()) {
      std::array<uint8_t, 16> v6{};
      if (::inet_pton(AF_INET6, o.ipv6.c_str(), v6.data()) != 1)
        return error("bad --ipv6 " + o.ipv6);
      c.ipv6 = v6;
    }
    if (!o.mac.empty()) {
      std::array<uint8_t, 6> m{};
      if (!parse_mac(o.mac, &m)) return error("bad --mac " + o.mac);
      c.mac = m;
    }
    if (Status s = Adapter::open(c, engine_, &a_); s != Status::kSuccess)
      return error("cannot open port " + name + ": " + std::string(to_string(s)));
    uint32_t eth_mtu = 1500;
    if (port_mtu(port, &eth_mtu) != Status::kSuccess)
      return error(std::string("cannot read the port's MTU: ") + last_error());
    mtu_ = ib_mtu_for(eth_mtu);
    device_ = "urnic0 (" + name + ")";
    return start(o);
  }

  Adapter& a() { return *a_; }
  Adapter& b() { return *b_; }
  Driver& driver() { return *driver_; }
  uint32_t mtu() const { return mtu_; }
  const std::string& device() const { return device_; }
  const std::string& error_text() const { return err_; }
  bool engine_on_lcore() const { return !driver_->manual(); }

 private:
  bool runtime(const Options& o) {
    RuntimeConfig rc;
    rc.program = "urnic-perf";
    rc.lcores = o.lcores;
    if (rc.lcores.empty()) rc.lcores = ::sysconf(_SC_NPROCESSORS_ONLN) >= 2 ? "0-1" : "0";
    if (!o.pci.empty()) rc.pci_allow.push_back(o.pci);
    rc.memory_mb = 512;
    if (runtime_init(rc) != Status::kSuccess)
      return error(std::string("EAL bring-up failed: ") + last_error());
    return true;
  }

  // The engine runs on the first worker lcore; without one, this thread drives it.
  bool start(const Options& o) {
    const auto workers = worker_lcores();
    bool manual = true;
    if (!workers.empty()) {
      if (!engine_.launch(workers.front()))
        return error("cannot launch the engine on lcore " + std::to_string(workers.front()));
      manual = false;
    }
    driver_ = std::make_unique<Driver>(engine_, manual, o.idle_yield);
    return true;
  }

  bool error(const std::string& e) {
    err_ = e;
    return false;
  }

  Engine engine_;
  std::unique_ptr<Adapter> a_, b_;
  std::unique_ptr<Driver> driver_;
  uint32_t mtu_ = 1024;
  std::string device_;
  std::string err_;
};

// ---- Running ----------------------------------------------------------------------------------

// Steps `runners` (and the engine, when this thread drives it) until all are done. `on_step`
// runs every iteration (stop conditions). Prints a progress line once a second on long runs.
// False when a runner failed or, with *stalled set, when nothing moved for the stall limit.
bool run_all(Driver& d, const std::vector<Runner*>& runners, const Options& o, Kind kind,
             uint64_t size, const std::function<void()>& on_step, bool* stalled = nullptr) {
  const double stall_s = o.loopback() ? kStallSeconds : o.timeout;
  const uint64_t hz = rte_get_tsc_hz();
  const uint64_t t0 = rte_rdtsc();
  uint64_t next_print = t0 + hz, last_progress_tsc = t0, last_progress = 0, last_printed = 0;
  uint64_t last_print_tsc = t0;
  for (uint64_t it = 0;; ++it) {
    d.poll();
    bool all = true;
    for (Runner* r : runners) all &= r->step();
    if (on_step) on_step();
    for (Runner* r : runners)
      if (r->failed()) return false;
    if (all) return true;
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
  return c;
}

double rtt_factor(Test t) { return t.verb == Verb::kWrite || t.verb == Verb::kSend ? 2.0 : 1.0; }

void print_lat_result(const Options& o, Test t, uint64_t size, Runner& r) {
  if (o.duration > 0)
    print_lat_duration_row(size, r.iterations(), r.tsc_start, r.tsc_end, rtt_factor(t));
  else
    print_lat_row(size, r.iterations(), lat_stats(r.tposted, rtt_factor(t)));
}

BwReport bw_of(const Options& o, uint64_t size, Runner& r) {
  return bw_report(size, r.iterations(), r.messages, r.tsc_start, r.tsc_end, r.events, o.gbits);
}

// The counters of `adapters` added up (QPs) and each port's (endpoint lines).
struct Totals {
  QpCounters qps;
  std::vector<PortCounters> ports;
};

Totals totals_of(const std::vector<Adapter*>& adapters) {
  Totals t;
  for (Adapter* a : adapters) {
    AdapterCounters c;
    if (a->query_counters(&c) != Status::kSuccess) continue;
    t.qps.add(c.qps);
    t.ports.push_back(c.port);
  }
  return t;
}

void print_summary(const Outcome& out, uint64_t completions, const Totals& t, bool verbose) {
  const QpCounters& c = t.qps;
  print_result_line();
  std::printf(" urnic: %llu completions, %llu with errors, %llu retransmitted packets\n",
              static_cast<unsigned long long>(completions),
              static_cast<unsigned long long>(c.completions_error),
              static_cast<unsigned long long>(c.retransmits));
  auto u = [](uint64_t v) { return static_cast<unsigned long long>(v); };
  if (verbose) {
    std::printf(
        " qp: tx %llu rx %llu pkts, acks %llu/%llu, timeouts %llu, naks %llu/%llu, rnr %llu/%llu,"
        " dup %llu, ooo %llu, implied %llu, stale %llu\n",
        u(c.tx_packets), u(c.rx_packets), u(c.acks_sent), u(c.acks_received), u(c.timeouts),
        u(c.naks_sent[0] + c.naks_sent[1] + c.naks_sent[2] + c.naks_sent[3]),
        u(c.naks_received[0] + c.naks_received[1] + c.naks_received[2] + c.naks_received[3]),
        u(c.rnr_naks_sent), u(c.rnr_naks_received), u(c.duplicate_requests), u(c.out_of_sequence),
        u(c.implied_naks), u(c.dropped_stale));
    for (const PortCounters& e : t.ports) {
      const uint64_t drops = e.rx_drops_total();
      std::printf(
          " endpoint: steps %llu busy %llu, rx %llu tx %llu pkts, rx drops %llu, "
          "tx ring full %llu, mbuf alloc failures %llu\n",
          u(e.steps), u(e.busy_steps), u(e.rx_packets), u(e.tx_packets), u(drops),
          u(e.tx_ring_full), u(e.mbuf_alloc_failures));
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

using Gid = std::array<uint8_t, 16>;

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
AddressVector address_to(const Gid& peer, int sgid_index,
                         const std::array<uint8_t, 6>* mac = nullptr) {
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

// ---- Loopback -------------------------------------------------------------------------------

bool run_loopback_test(Env& env, const Options& o, Test t, const std::vector<uint64_t>& sizes) {
  Outcome out;
  std::string err;
  Geometry geo;
  geo.max_size = *std::max_element(sizes.begin(), sizes.end());
  const uint32_t nqps = t.kind == Kind::kLat ? 1 : o.qps;
  const uint32_t tx = o.effective_tx_depth();
  const uint32_t rx = t.verb == Verb::kSend ? o.effective_rx_depth() : 16;
  const bool ipv6 = o.gid_index != 1;
  const int gid_index = ipv6 ? 2 : 1;
  const Gid gid_a = pick_gid(env.a(), gid_index, &err);
  const Gid gid_b = pick_gid(env.b(), gid_index, &err);
  const auto mac_a = env.a().query_extension<AdapterExtension>()->local_address().mac;
  const auto mac_b = env.b().query_extension<AdapterExtension>()->local_address().mac;
  const AddressVector to_b = address_to(gid_b, gid_index, &mac_b);
  const AddressVector to_a = address_to(gid_a, gid_index, &mac_a);
  std::unique_ptr<Side> a, b;
  // (Re)creates both sides and connects them back to back.
  auto setup = [&]() {
    b.reset();  // the old sides go first: their QPs hold QPNs and engine slots
    a.reset();
    a = std::make_unique<Side>(env.a(), env.driver());
    b = std::make_unique<Side>(env.b(), env.driver());
    if (!a->create(t, nqps, std::max(tx, 16u), rx, geo, gid_a, &err) ||
        !b->create(t, nqps, std::max(tx, 16u), rx, geo, gid_b, &err))
      return false;
    for (uint32_t i = 0; i < nqps; ++i) {
      if (!a->connect(i, b->qp(i).local, env.mtu(), to_b, &err) ||
          !b->connect(i, a->qp(i).local, env.mtu(), to_a, &err))
        return false;
    }
    return true;
  };
  if (!setup()) {
    std::fprintf(stderr, " urnic-perf: %s\n", err.c_str());
    return false;
  }
  const RunConfig base = run_config(o, t, Role::kClient, sizes.front(), true);
  TestInfo info;
  info.test = t;
  info.device = env.device();
  info.exchange = "loopback (net_ring, one process)";
  info.qps = nqps;
  info.mtu = env.mtu();
  info.tx_depth = base.tx_depth;
  info.rx_depth = base.rx_depth;
  info.cq_mod = base.cq_mod;
  info.out_reads = a->qp(0).local.out_reads;
  info.gid_index = ipv6 ? 2 : 1;
  print_test_info(info);
  for (uint32_t i = 0; i < nqps; ++i) print_dest("local", t, a->qp(i).local);
  for (uint32_t i = 0; i < nqps; ++i) print_dest("remote", t, b->qp(i).local);
  if (t.kind == Kind::kBw)
    print_bw_header(o.gbits);
  else
    print_lat_header(o.duration > 0);

  uint64_t completions = 0;
  for (uint64_t size : sizes) {
    // A SEND duration run leaves receives posted that the next size must not consume: give it
    // fresh QPs.
    if (size != sizes.front() && t.verb == Verb::kSend && o.duration > 0 && !setup()) {
      out.fail(err);
      break;
    }
    RunConfig cc = run_config(o, t, Role::kClient, size, true);
    RunConfig sc = cc;
    sc.role = Role::kServer;
    std::unique_ptr<Runner> client, server;
    if (t.kind == Kind::kBw) {
      client = make_bw_sender(*a, cc);
      if (t.verb == Verb::kSend) server = make_bw_receiver(*b, sc);
    } else {
      client = make_lat(*a, cc);
      if (t.verb == Verb::kWrite || t.verb == Verb::kSend) server = make_lat(*b, sc);
    }
    std::vector<Runner*> rs{client.get()};
    if (server) rs.push_back(server.get());
    bool stopped = false;
    const bool ok = run_all(env.driver(), rs, o, t.kind, size, [&] {
      // The side that only answers learns that the other is done the way a remote one would
      // (its next TCP message); here it is told directly, with the total it must have received.
      if (server && !stopped && (client->done() || server->done())) {
        Runner* waiting = client->done() ? server.get() : client.get();
        waiting->stop(client->done() ? client->messages : server->messages);
        stopped = true;
      }
    });
    if (!ok) {
      for (Runner* r : rs)
        if (r->failed()) out.fail(r->error());
      if (out.ok) out.fail("the run did not finish");
      break;
    }
    completions += client->messages + (server ? server->messages : 0);
    if (t.kind == Kind::kBw)
      print_bw_row(bw_of(o, size, *client));
    else
      print_lat_result(o, t, size, *client);
    out.data(client->check_data());
    if (server) out.data(server->check_data());
    if (t.kind == Kind::kBw && (t.verb == Verb::kWrite || t.verb == Verb::kAtomic)) {
      const uint64_t per_qp = o.duration > 0 ? 0 : cc.iters;
      out.data(check_passive_target(*b, cc, per_qp, client->messages));
    }
    if (!out.ok) break;
  }
  const Totals totals = totals_of({&env.a(), &env.b()});
  if (totals.qps.completions_error != 0) out.fail("the QPs counted completions with errors");
  print_summary(out, completions, totals, o.verbose || !out.ok);
  return out.ok;
}

int run_loopback(const Options& o) {
  Env env;
  if (!env.open_loopback(o)) {
    std::fprintf(stderr, "urnic-perf: %s\n", env.error_text().c_str());
    return 1;
  }
  std::printf(" urnic-perf loopback: engine %s\n",
              env.engine_on_lcore() ? "on its own lcore" : "driven by this thread");
  if (!o.sweep) return run_loopback_test(env, o, o.test, o.sizes()) ? 0 : 1;

  // The sweep: every test over a few sizes, short runs (the README's main command).
  struct Row {
    Test test;
    std::vector<uint64_t> sizes;
  };
  const std::vector<uint64_t> bw_sizes{64, 4096, 65536};
  const std::vector<Row> rows{
      {{Verb::kWrite, Kind::kBw}, bw_sizes},   {{Verb::kRead, Kind::kBw}, bw_sizes},
      {{Verb::kSend, Kind::kBw}, bw_sizes},    {{Verb::kAtomic, Kind::kBw}, {8}},
      {{Verb::kWrite, Kind::kLat}, {8, 4096}}, {{Verb::kRead, Kind::kLat}, {8, 4096}},
      {{Verb::kSend, Kind::kLat}, {8, 4096}},  {{Verb::kAtomic, Kind::kLat}, {8}},
  };
  int failures = 0;
  std::vector<std::string> summary;
  for (const Row& r : rows) {
    Options ro = o;
    ro.test = r.test;
    ro.all_sizes = false;
    if (r.test.kind == Kind::kBw) {
      if (ro.duration == 0) ro.duration = 1.0;
      ro.iters = 0;
    } else {
      ro.duration = 0;
      if (ro.iters == 0) ro.iters = 10000;
    }
    const bool ok = run_loopback_test(env, ro, r.test, r.sizes);
    summary.push_back(std::string(ok ? "PASS " : "FAIL ") + test_name(r.test));
    if (!ok) ++failures;
    std::printf("\n");
  }
  std::printf("urnic-perf sweep (loopback): ");
  for (const auto& s : summary) std::printf("%s%s", s.c_str(), &s == &summary.back() ? "\n" : ", ");
  std::printf("%zu passed, %d failed\n", summary.size() - failures, failures);
  return failures == 0 ? 0 : 1;
}

// ---- Real port ----------------------------------------------------------------------------------

std::string gid_text(const Gid& g) {
  char b[INET6_ADDRSTRLEN] = {};
  if (gid_is_ipv4(g)) {
    in_addr a{};
    a.s_addr = htonl(gid_to_ipv4(g));
    ::inet_ntop(AF_INET, &a, b, sizeof(b));
  } else {
    ::inet_ntop(AF_INET6, g.data(), b, sizeof(b));
  }
  return b;
}

// The exit code of a failed exchange step: the end-of-test synchronisation ("close") timing out
// is told apart from the peer going silent earlier.
int oob_exit_code(const Oob& oob, const char* step) {
  switch (oob.failure()) {
    case OobFailure::kNoPeer:
      return kExitNoPeer;
    case OobFailure::kTimeout:
      return std::strcmp(step, "close") == 0 ? kExitSyncTimeout : kExitPeerSilent;
    case OobFailure::kPeerGone:
      return kExitPeerGone;
    default:
      return kExitRunFailed;
  }
}

int run_remote(const Options& o) {
  Env env;
  if (!env.open_port(o)) {
    std::fprintf(stderr, "urnic-perf: %s\n", env.error_text().c_str());
    return 1;
  }
  const Test t = o.test;
  const Role role = o.role();
  Driver& drv = env.driver();
  Outcome out;
  Oob oob(role, drv.idle_fn(), o.timeout);
  // Frames arriving mean the peer is alive and running: a wait for its next TCP message (the
  // server's, while the client runs) lasts as long as they keep coming.
  oob.set_activity([&env] {
    AdapterCounters c;
    return env.a().query_counters(&c) == Status::kSuccess ? c.port.rx_packets : 0;
  });
  auto oob_fail = [&](const char* step) {
    std::fprintf(stderr, "urnic-perf: out-of-band exchange failed (%s): %s\n", step,
                 oob.error().c_str());
    return oob_exit_code(oob, step);
  };
  if (role == Role::kServer) {
    print_waiting();
    if (!oob.accept_one(o.tcp_port)) return oob_fail("accept");
  } else if (!oob.connect_to(o.server, o.tcp_port, o.connect_retry)) {
    return oob_fail("connect");
  }
  if (!oob.exchange_versions()) return oob_fail("versions");
  Geometry geo;
  if (!oob.check_sys_data(&geo.cycle, &geo.cache_line)) return oob_fail("system data");
  uint32_t mtu = o.mtu != 0 ? std::min(o.mtu, env.mtu()) : env.mtu();
  if (!oob.check_mtu(mtu, &mtu)) return oob_fail("MTU");
  const bool urnic_peer = oob.peer_is_urnic();

  const auto sizes = o.sizes();
  geo.max_size = *std::max_element(sizes.begin(), sizes.end());
  const uint32_t nqps = t.kind == Kind::kLat ? 1 : o.qps;
  const RunConfig base = run_config(o, t, role, sizes.front(), urnic_peer);
  std::string err;
  const auto gid = pick_gid(env.a(), o.gid_index, &err);
  if (!err.empty()) {
    std::fprintf(stderr, "urnic-perf: %s\n", err.c_str());
    return 1;
  }
  Side side(env.a(), drv);
  const uint32_t rq = t.verb == Verb::kSend ? base.rx_depth : 16;
  if (!side.create(t, nqps, std::max(base.tx_depth, 16u), rq, geo, gid, &err)) {
    std::fprintf(stderr, "urnic-perf: %s\n", err.c_str());
    return 1;
  }
  uint64_t completions = 0;
  // From here on a failure still prints the summary with every counter (retransmits, NAKs,
  // drops), whatever -v says: a failed run must be diagnosable from its output.
  auto failed = [&](int rc) {
    out.ok = false;
    print_summary(out, completions, totals_of({&env.a()}), true);
    return rc;
  };
  auto run_failed = [&] { return failed(out.code == kExitOk ? kExitRunFailed : out.code); };
  auto oob_failed = [&](const char* step) { return failed(oob_fail(step)); };
  TestInfo info;
  info.test = t;
  info.role = role;
  info.device = env.device();
  info.qps = nqps;
  info.mtu = mtu;
  info.tx_depth = base.tx_depth;
  info.rx_depth = base.rx_depth;
  info.cq_mod = base.cq_mod;
  info.out_reads = side.qp(0).local.out_reads;
  info.gid_index = o.gid_index;
  print_test_info(info);
  for (uint32_t i = 0; i < nqps; ++i) print_dest("local", t, side.qp(i).local);

  // The connection records, in the order the perftest tool sends them (see the file comment).
  std::vector<uint32_t> seq;
  const bool lat_rw = t.kind == Kind::kLat && t.verb != Verb::kSend;
  if (lat_rw) seq.push_back(0);
  for (uint32_t i = 0; i < nqps; ++i) seq.push_back(i);
  const size_t connect_after = seq.size();
  if (t.verb == Verb::kSend) {
    seq.push_back(0);
    for (uint32_t i = 0; i < nqps; ++i) seq.push_back(i);
  } else {
    for (uint32_t i = 0; i < nqps; ++i) seq.push_back(i);
    seq.push_back(0);
  }
  std::vector<Dest> remote(nqps);
  for (size_t k = 0; k < seq.size(); ++k) {
    Dest d;
    if (!oob.hand_shake(side.qp(seq[k]).local, &d)) return oob_failed("connection records");
    if (k < connect_after) remote[seq[k]] = d;
    if (k + 1 != connect_after) continue;
    // Every peer QP is known: resolve the peer and bring the QPs up before the next record
    // (the peer starts sending after the last one).
    const Gid peer_gid = remote[0].gid;
    if (gid_is_ipv4(peer_gid) != gid_is_ipv4(gid)) {
      std::fprintf(stderr, "urnic-perf: the peer's GID %s and ours (%s) differ in IP version\n",
                   gid_text(peer_gid).c_str(), gid_text(gid).c_str());
      return failed(1);
    }
    // The adapter resolves the peer's MAC (ARP / neighbour discovery) in the RTR transition.
    const AddressVector av = address_to(peer_gid, o.gid_index);
    for (uint32_t i = 0; i < nqps; ++i) {
      if (!side.connect(i, remote[i], mtu, av, &err)) {
        std::fprintf(stderr, "urnic-perf: %s\n", err.c_str());
        return failed(kExitConnectFailed);
      }
    }
  }
  for (uint32_t i = 0; i < nqps; ++i) print_dest("remote", t, remote[i]);
  if (t.kind == Kind::kBw)
    print_bw_header(o.gbits);
  else if (!(lat_rw && role == Role::kServer && t.verb != Verb::kWrite))
    print_lat_header(o.duration > 0);

  const Dest& me = side.qp(0).local;
  // Whether this side only answers (receives SENDs, or replies in a latency ping-pong): in a
  // duration run it stops when the other side's next TCP message (a record, or the connection
  // closing) shows up.
  const bool answers = t.kind == Kind::kBw ? role == Role::kServer : !initiator(t, role);
  // Whether the peer keeps its TCP connection open until this side's run is over: not an
  // ib_write_lat, which closes it as soon as its own run ends.
  const bool peer_waits = !(t.verb == Verb::kWrite && t.kind == Kind::kLat && !urnic_peer);
  auto run_one = [&](Runner& r, uint64_t size, bool server_waits) {
    std::vector<Runner*> rs{&r};
    bool stopped = false, gone = false, stalled = false;
    // The socket is looked at once a millisecond, not on every step: a syscall per step would
    // cost the run more than the work it measures.
    const uint64_t look_every = rte_get_tsc_hz() / 1000;
    uint64_t next_look = 0;
    const bool ok = run_all(
        drv, rs, o, t.kind, size,
        [&] {
          if (stopped || gone) return;
          const uint64_t now = rte_rdtsc();
          if (now < next_look) return;
          next_look = now + look_every;
          if (peer_waits && oob.peer_closed()) {
            // The peer is gone (exited or killed): waiting for its messages is pointless.
            gone = true;
            r.abort("the peer closed its TCP connection during the run (it exited or was killed)");
          } else if (server_waits && o.duration > 0 && oob.readable()) {
            r.stop(0);
            stopped = true;
          }
        },
        &stalled);
    if (!ok)
      out.fail(r.failed() ? r.error() : "the run did not finish", gone      ? kExitPeerGone
                                                                  : stalled ? kExitStalled
                                                                            : kExitRunFailed);
    completions += r.messages;
    return ok;
  };

  if (t.kind == Kind::kBw && t.verb != Verb::kSend) {
    BwReport mine, theirs;
    if (role == Role::kClient) {
      for (uint64_t size : sizes) {
        auto r = make_bw_sender(side, run_config(o, t, role, size, urnic_peer));
        if (!run_one(*r, size, false)) break;
        mine = bw_of(o, size, *r);
        print_bw_row(mine);
        out.data(r->check_data());
      }
      if (!out.ok) return run_failed();
      if (!oob.hand_shake(me, nullptr) || !oob.xchg_reports(mine, &theirs))
        return oob_failed("reports");
    } else {
      // The client runs; this side only serves (the responder runs on the engine).
      if (!oob.hand_shake(me, nullptr) || !oob.xchg_reports(mine, &theirs))
        return oob_failed("reports");
      print_bw_row(theirs);
      if (theirs.size <= geo.max_size && theirs.size != 0) {
        const RunConfig rc = run_config(o, t, role, theirs.size, urnic_peer);
        const uint64_t per_qp = o.duration > 0 || nqps == 0 ? 0 : theirs.iters / nqps;
        out.data(check_passive_target(side, rc, per_qp, theirs.iters));
      }
    }
    if (!oob.close_connection(me)) return oob_failed("close");
  } else if (t.verb == Verb::kSend) {
    for (uint64_t size : sizes) {
      const RunConfig rc = run_config(o, t, role, size, urnic_peer);
      std::unique_ptr<Runner> r;
      if (t.kind == Kind::kBw)
        r = role == Role::kClient ? make_bw_sender(side, rc) : make_bw_receiver(side, rc);
      else
        r = make_lat(side, rc);  // posts its receives
      // Receives are posted: the sync record lets the client start.
      if (!oob.hand_shake(me, nullptr)) return oob_failed("sync");
      if (!run_one(*r, size, answers)) break;
      if (t.kind == Kind::kBw)
        print_bw_row(bw_of(o, size, *r));
      else
        print_lat_result(o, t, size, *r);
      out.data(r->check_data());
      if (t.kind == Kind::kBw && o.all_sizes && !oob.hand_shake(me, nullptr))
        return oob_failed("sync");
    }
    if (!out.ok) return run_failed();
    if (!oob.close_connection(me)) return oob_failed("close");
  } else if (t.verb == Verb::kWrite) {  // write_lat
    for (uint64_t size : sizes) {
      auto r = make_lat(side, run_config(o, t, role, size, urnic_peer));
      if (!run_one(*r, size, answers)) break;
      print_lat_result(o, t, size, *r);
      out.data(r->check_data());
    }
    if (!out.ok) return run_failed();
    // ib_write_lat just closes the socket. Between two urnic-perfs both sides synchronise
    // first (as perftest's other tools do): the side that finished first keeps its QP until
    // the other's last WRITE is acknowledged, however many frames the path loses at the end.
    if (!urnic_peer)
      oob.close();
    else if (!oob.close_connection(me))
      return oob_failed("close");
  } else {  // read_lat, atomic_lat
    if (role == Role::kClient) {
      for (uint64_t size : sizes) {
        auto r = make_lat(side, run_config(o, t, role, size, urnic_peer));
        if (!run_one(*r, size, false)) break;
        print_lat_result(o, t, size, *r);
        out.data(r->check_data());
      }
      if (!out.ok) return run_failed();
    }
    if (!oob.close_connection(me)) return oob_failed("close");
  }
  print_summary(out, completions, totals_of({&env.a()}), o.verbose);
  return out.ok ? kExitOk : run_failed();
}

}  // namespace
}  // namespace urnic::perf

int main(int argc, char** argv) {
  using namespace urnic::perf;
  std::signal(SIGPIPE, SIG_IGN);
  Options o;
  bool exit_ok = false;
  if (!parse_options(argc, argv, &o, &exit_ok)) return exit_ok ? 0 : 2;
  if (o.all_sizes && o.duration > 0 && o.test.verb == Verb::kSend) {
    std::fprintf(stderr, "urnic-perf: -a with -D is not supported for send tests\n");
    return 2;
  }
  return o.loopback() ? run_loopback(o) : run_remote(o);
}

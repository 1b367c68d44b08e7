// urnic-conform: a conformance scenario runner for RoCEv2 RC responders (issue 17). Against a
// peer that runs a stock perftest server (ib_write_bw / ib_read_bw / ib_atomic_bw, or
// urnic-perf), each scenario connects a fresh QP through perftest's TCP exchange, sends
// hand-crafted frames from urnic's wire layer on a raw DPDK port, and checks the answers against
// the IBTA rule it cites (scenarios.cc). A perftest server serves one client, so the peer runs it
// in a loop (`while :; do ib_write_bw -x 1 -F; done`); each scenario waits for the next one.
//
//   urnic-conform --vdev=net_af_packet0,iface=veth1 --ip=10.0.0.2 [--allows=write,read,atomic]
//                 [--only=NAME,...] [--junit=FILE] [--json=FILE] [--report=FILE.md|.html]
//                 [--inject=SPEC] [--inject-rx=SPEC] SERVER
//
// Prints PASS / FAIL / NOT-APPLICABLE per scenario with what the peer did, and a summary. Exit
// status: 0 no scenario failed, 1 one failed, 2 bad options, 3 the peer could not be reached.
#include <unistd.h>

#include <arpa/inet.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "bench/common/doc.h"
#include "bench/common/fault_spec.h"
#include "bench/conform/link.h"
#include "bench/conform/report.h"
#include "bench/conform/scenarios.h"
#include "bench/perf/oob.h"
#include "examples/pingpong_oob.h"
#include "urnic/runtime.h"

namespace urnic::conform {
namespace {

struct Options {
  std::string vdev, ip, server, junit, json, report, lcores = "0";
  std::string cm_peer;               // --cm-peer: the rdma_cm listener's address (default: SERVER)
  FaultConfig inject_tx, inject_rx;  // --inject, --inject-rx
  uint16_t tcp_port = perf::kDefaultTcpPort;
  std::set<std::string> allows{"write"};
  std::set<std::string> only;
  double wait_ms = 300;
  uint8_t rnr_timer = 12;
  bool peer_client =
      false;  // the peer also runs a write_bw client against us (requester scenarios)
  uint32_t peer_timeout = 14, retry_cnt = 7;  // its QP's (perftest's defaults)
  double connect_retry = 30;
  uint32_t mtu = 1024;
  bool list = false;
  // --dcqcn: the peer claims DCQCN with ConnectX's defaults or urnic's slow-fabric profile.
  bool dcqcn_claimed = false;
  DcqcnConfig dcqcn{};
  double peer_max_mbps = 0;  // --peer-max-mbps (0: our own link's speed)
};

void usage() {
  std::printf(
      "Usage: urnic-conform --vdev=DEVARGS --ip=A.B.C.D [options] SERVER\n"
      "Runs RoCEv2 RC responder conformance scenarios against SERVER, which runs a perftest\n"
      "server (ib_write_bw -x 1 -F, or urnic-perf write_bw ...) in a loop: one per scenario.\n"
      "  --vdev=DEVARGS      this side's port (net_af_packet0,iface=IF, net_tap0,...)\n"
      "  --ip=A.B.C.D        this side's IPv4 address (answers ARP for it)\n"
      "  -p PORT             the servers' TCP port (default 18515)\n"
      "  --allows=LIST       what the peer's memory allows: write,read,atomic (default write;\n"
      "                      urnic-perf servers allow all), and cm: the peer runs an rdma_cm\n"
      "                      listener on -p that accepts every connection (cmtime -b ADDR -p\n"
      "                      PORT, urnic-perf --connect-storm=N): the CM scenarios; the\n"
      "                      others are NOT-APPLICABLE\n"
      "  --cm-peer=A.B.C.D   the rdma_cm listener's RoCE address (default: SERVER)\n"
      "                      ud: the peer runs ibv_ud_pingpong servers serving two datagrams\n"
      "                      each, in a loop (while :; do timeout 20 ibv_ud_pingpong -g 1\n"
      "                      -n 2; done): the UD scenarios, over its TCP exchange on -p\n"
      "  --only=NAMES        run these scenarios only (comma-separated; --list names them)\n"
      "  --mtu=BYTES         the path MTU to ask for, 256..4096 (default 1024)\n"
      "  --wait-ms=MS        how long an answer may take (default 300; silence: 2x)\n"
      "  --peer-client       the peer also runs a perftest client against us, in a loop (e.g.\n"
      "                      while :; do ib_write_bw -s 1024 -D 30 US; sleep 0.3; done): the\n"
      "                      requester scenarios run last, with us as its server on -p PORT\n"
      "  --peer-timeout=T    that client QP's local ACK timeout exponent (default 14, perftest's)\n"
      "  --retry-cnt=N       and its retry count, 0..7 (default 7, perftest's)\n"
      "  --dcqcn=PROFILE     the peer runs DCQCN: connectx (ConnectX's defaults) or slow\n"
      "                      (urnic-perf --dcqcn=slow): its congestion scenarios are judged\n"
      "                      against DCQCN's curve and FAIL where it does not follow it\n"
      "  --peer-max-mbps=N   the peer's line rate, where DCQCN's curve starts (default: ours)\n"
      "  --rnr-timer=CODE    the peer QP's minimum RNR timer code, 0..31 (default 12: perftest's\n"
      "                      and urnic-perf's)\n"
      "  --connect-retry=S   how long to wait for each scenario's server (default 30; the CM\n"
      "                      scenarios resend a REQ refused with REJ 8 for as long)\n"
      "  --junit=FILE        JUnit XML report; --json=FILE: JSON report\n"
      "  --report=FILE       a one-page report for people: Markdown (.md) or HTML (.html)\n"
      "  --inject=SPEC       faults on the RoCEv2 frames we send: drop=, dup=, reorder=,\n"
      "                      corrupt=, ce= in ppm or N%%, seed=N (urnic-perf's syntax); the\n"
      "                      verdicts assume a clean link, so this tests the peer's recovery\n"
      "  --inject-rx=SPEC    the same on the frames we receive\n"
      "  --lcores=LIST       EAL lcores (default 0)\n"
      "  --list              list the scenarios and the rules they check\n"
      "Exit status: 0 no FAIL; 1 a scenario failed; 2 bad options; 3 no peer.\n");
}

// The names in a comma-separated list, empty items skipped.
std::set<std::string> split(const std::string& s) {
  std::set<std::string> out;
  for (std::string& item : bench::split_list(s))
    if (!item.empty()) out.insert(std::move(item));
  return out;
}

// --dcqcn, --peer-max-mbps and --rnr-timer: what the peer is said to be. *handled says whether
// `key` was one of them; false: a bad value (said on stderr).
bool peer_option(const std::string& key, const std::string& val, Options* o, bool* handled) {
  *handled = key == "--dcqcn" || key == "--peer-max-mbps" || key == "--rnr-timer";
  if (!*handled) return true;
  if (key == "--dcqcn") {
    if (val != "connectx" && val != "slow") {
      std::fprintf(stderr, "urnic-conform: --dcqcn is connectx or slow, not '%s'\n", val.c_str());
      return false;
    }
    o->dcqcn_claimed = true;
    o->dcqcn = val == "slow" ? congestion_slow_fabric().dcqcn : DcqcnConfig{};
    return true;
  }
  const bool rnr = key == "--rnr-timer";
  char* end = nullptr;
  const double v = std::strtod(val.c_str(), &end);
  if (val.empty() || *end != '\0' || !(v >= (rnr ? 0 : 1) && v <= (rnr ? 31 : 1e7))) {
    std::fprintf(stderr, "urnic-conform: bad value '%s' for %s (%s)\n", val.c_str(), key.c_str(),
                 rnr ? "0..31" : "1..1e7");
    return false;
  }
  if (rnr)
    o->rnr_timer = static_cast<uint8_t>(v);
  else
    o->peer_max_mbps = v;
  return true;
}

bool parse(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i], key = a, val;
    const auto eq = a.find('=');
    if (a.rfind("--", 0) == 0 && eq != std::string::npos) {
      key = a.substr(0, eq);
      val = a.substr(eq + 1);
    } else if ((a == "-p" || a.rfind("--", 0) == 0) && a != "--list" && a != "--help" &&
               a != "--peer-client" && i + 1 < argc) {
      val = argv[++i];
    }
    auto num = [&](double lo, double hi, double* out) {
      char* end = nullptr;
      const double v = std::strtod(val.c_str(), &end);
      if (val.empty() || *end != '\0' || !(v >= lo && v <= hi)) {
        std::fprintf(stderr, "urnic-conform: bad value '%s' for %s (%g..%g)\n", val.c_str(),
                     key.c_str(), lo, hi);
        return false;
      }
      *out = v;
      return true;
    };
    double v = 0;
    bool peer = false;
    if (!peer_option(key, val, o, &peer)) return false;
    if (peer) {
    } else if (key == "--help" || key == "-h") {
      usage();
      std::exit(0);
    } else if (key == "--list") {
      o->list = true;
    } else if (key == "--vdev") {
      o->vdev = val;
    } else if (key == "--ip") {
      o->ip = val;
    } else if (key == "-p") {
      if (!num(1, 65535, &v)) return false;
      o->tcp_port = static_cast<uint16_t>(v);
    } else if (key == "--allows") {
      o->allows = split(val);
      for (const auto& x : o->allows)
        if (x != "write" && x != "read" && x != "atomic" && x != "cm" && x != "ud") {
          std::fprintf(stderr,
                       "urnic-conform: --allows takes write, read, atomic, cm, ud, not '%s'\n",
                       x.c_str());
          return false;
        }
    } else if (key == "--cm-peer") {
      o->cm_peer = val;
    } else if (key == "--only") {
      o->only = split(val);
    } else if (key == "--mtu") {
      if (!num(256, 4096, &v) || (static_cast<uint32_t>(v) & (static_cast<uint32_t>(v) - 1))) {
        std::fprintf(stderr, "urnic-conform: --mtu is 256, 512, 1024, 2048 or 4096\n");
        return false;
      }
      o->mtu = static_cast<uint32_t>(v);
    } else if (key == "--wait-ms") {
      if (!num(1, 60000, &v)) return false;
      o->wait_ms = v;
    } else if (key == "--peer-client") {
      o->peer_client = true;
    } else if (key == "--peer-timeout") {
      if (!num(0, 31, &v)) return false;
      o->peer_timeout = static_cast<uint32_t>(v);
    } else if (key == "--retry-cnt") {
      if (!num(0, 7, &v)) return false;
      o->retry_cnt = static_cast<uint32_t>(v);
    } else if (key == "--connect-retry") {
      if (!num(0, 3600, &v)) return false;
      o->connect_retry = v;
    } else if (key == "--junit") {
      o->junit = val;
    } else if (key == "--json") {
      o->json = val;
    } else if (key == "--report") {
      if (!bench::doc_format_for(val)) {
        std::fprintf(stderr,
                     "urnic-conform: --report=FILE: FILE must end in .md or .html, not '%s'\n",
                     val.c_str());
        return false;
      }
      o->report = val;
    } else if (key == "--inject" || key == "--inject-rx") {
      std::string why;
      if (!bench::parse_fault_spec(val, key == "--inject" ? &o->inject_tx : &o->inject_rx, &why)) {
        std::fprintf(stderr, "urnic-conform: %s: %s (%s)\n", key.c_str(), why.c_str(),
                     bench::kFaultSpecForm);
        return false;
      }
    } else if (key == "--lcores") {
      o->lcores = val;
    } else if (a[0] == '-') {
      std::fprintf(stderr, "urnic-conform: unknown option '%s' (see --help)\n", a.c_str());
      return false;
    } else if (o->server.empty()) {
      o->server = a;
    } else {
      std::fprintf(stderr, "urnic-conform: unexpected argument '%s'\n", a.c_str());
      return false;
    }
  }
  for (const auto& n : o->only) {
    bool known = false;
    for (const Scenario& s : scenarios()) known |= n == s.name;
    if (!known) {
      std::fprintf(stderr, "urnic-conform: no scenario '%s' (see --list)\n", n.c_str());
      return false;
    }
  }
  if (o->list) return true;
  in_addr a{};
  if (o->vdev.empty() || o->server.empty() || inet_pton(AF_INET, o->ip.c_str(), &a) != 1) {
    std::fprintf(stderr, "urnic-conform: --vdev, --ip (IPv4) and SERVER are required\n");
    return false;
  }
  return true;
}

bool allowed(const Options& o, Needs n) {
  if (n == Needs::kPeerClient) return o.peer_client;
  if (n == Needs::kCm) return o.allows.count("cm") != 0;
  if (n == Needs::kUd) return o.allows.count("ud") != 0;
  return o.allows.count(n == Needs::kWrite ? "write" : n == Needs::kRead ? "read" : "atomic") != 0;
}

// One scenario on a fresh connection to the next server: perftest's exchange, the scenario,
// then the exchange's end (reports, close) so that the server finishes normally. A failure to
// reach the peer is returned in *no_peer.
// A CM scenario: no TCP exchange, MADs on QP1 to the peer's rdma_cm listener.
Outcome run_cm(const Options& o, Link& link, const Scenario& s, uint32_t* seq) {
  in_addr own{}, peer{};
  inet_pton(AF_INET, o.ip.c_str(), &own);
  if (inet_pton(AF_INET, (o.cm_peer.empty() ? o.server : o.cm_peer).c_str(), &peer) != 1)
    return {Verdict::kFail, "the CM scenarios need the peer's IPv4 address (--cm-peer)"};
  link.set_qps(1, 1);  // QP1 on both sides: the GSI
  std::string err;
  if (!link.resolve(ntohl(peer.s_addr), 5, &err)) return {Verdict::kFail, err};
  Ctx c{link, PeerQp{}, 0, 0, o.wait_ms, o.rnr_timer};
  c.own_ip = ntohl(own.s_addr);
  c.peer_ip = ntohl(peer.s_addr);
  c.cm_port = o.tcp_port;
  c.cm_seq = *seq;
  c.cm_retry_s = o.connect_retry;
  Outcome out = s.run(c);
  *seq = c.cm_seq;
  (void)link.collect(10);
  return out;
}

// A UD scenario: ibv_ud_pingpong's TCP exchange (retried while the next server starts), then
// datagrams between our QP number and its UD QP.
Outcome run_ud(const Options& o, Link& link, const Scenario& s, uint32_t qpn) {
  in_addr own{};
  inet_pton(AF_INET, o.ip.c_str(), &own);
  tools::oob::PingpongDest me, peer;
  me.qpn = qpn;
  me.psn = qpn * 2654435761u & 0xFFFFFF;
  me.gid[10] = me.gid[11] = 0xff;
  std::memcpy(&me.gid[12], &own.s_addr, 4);
  const auto until =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(o.connect_retry);
  Status st = Status::kHostUnreachable;
  for (;;) {
    // The server resolves our address (ARP) before it answers: the link answers ARP meanwhile.
    std::atomic<bool> done{false};
    std::thread t([&] {
      st = tools::oob::pingpong_client_exchange(o.server, o.tcp_port, me, &peer);
      done.store(true);
    });
    while (!done.load()) link.poll();
    t.join();
    if (st != Status::kHostUnreachable || std::chrono::steady_clock::now() >= until) break;
    const auto resume = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
    while (std::chrono::steady_clock::now() < resume) link.poll();  // paces the TCP retries
  }
  if (st != Status::kSuccess)
    return {Verdict::kFail, std::string("ibv_ud_pingpong exchange with ") + o.server + ": " +
                                std::string(to_string(st))};
  const uint32_t peer_ip = static_cast<uint32_t>(peer.gid[12]) << 24 | peer.gid[13] << 16 |
                           peer.gid[14] << 8 | peer.gid[15];
  link.set_qps(qpn, peer.qpn);
  std::string err;
  if (!link.resolve(peer_ip, 5, &err)) return {Verdict::kFail, err};
  Ctx c{link, PeerQp{peer.qpn, 0, 0, o.mtu}, me.psn, 0, o.wait_ms, o.rnr_timer};
  c.own_qpn = qpn;
  Outcome out = s.run(c);
  (void)link.collect(10);
  return out;
}

Outcome run_one(const Options& o, Link& link, const Scenario& s, uint32_t qpn, bool* no_peer) {
  // With the peer as requester we are its perftest server: we wait for its client.
  const bool serve = s.needs == Needs::kPeerClient;
  perf::Oob oob(
      serve ? perf::Role::kServer : perf::Role::kClient, [&link] { link.poll(); },
      serve ? std::max(20.0, o.connect_retry) : 20);
  *no_peer = false;
  auto oob_failed = [&](const char* step) {
    *no_peer = oob.failure() == perf::OobFailure::kNoPeer;
    return Outcome{Verdict::kFail, std::string("TCP exchange (") + step + "): " + oob.error()};
  };
  if (serve ? !oob.accept_one(o.tcp_port) : !oob.connect_to(o.server, o.tcp_port, o.connect_retry))
    return oob_failed(serve ? "accept" : "connect");
  uint32_t cycle = perf::kCycleBuffer, line = perf::kCacheLine, mtu = o.mtu;
  if (!oob.exchange_versions() || !oob.check_sys_data(&cycle, &line) || !oob.check_mtu(o.mtu, &mtu))
    return oob_failed("versions");
  static std::mt19937 rng(std::random_device{}());
  perf::Dest me;
  me.qpn = qpn;
  me.psn = static_cast<uint32_t>(rng()) & 0xFFFFFF;
  me.out_reads = 16;
  if (serve) {  // where the peer's WRITEs go: nothing is kept, the scenario only answers them
    me.rkey = 0xC0FFEE;
    me.vaddr = 0x100000;
  }
  in_addr a{};
  inet_pton(AF_INET, o.ip.c_str(), &a);
  me.gid[10] = me.gid[11] = 0xff;
  std::memcpy(&me.gid[12], &a.s_addr, 4);
  perf::Dest peer;
  if (!oob.hand_shake(me, &peer)) return oob_failed("record");
  const uint32_t peer_ip = static_cast<uint32_t>(peer.gid[12]) << 24 | peer.gid[13] << 16 |
                           peer.gid[14] << 8 | peer.gid[15];
  link.set_qps(me.qpn, peer.qpn);
  std::string err;
  if (!link.resolve(peer_ip, 5, &err)) return {Verdict::kFail, err};
  // The peer brings its QP to RTS before the next records (the run starts after them).
  if (!oob.hand_shake(me, nullptr) || !oob.hand_shake(me, nullptr)) return oob_failed("sync");
  Ctx c{link, PeerQp{peer.qpn, peer.rkey, peer.vaddr, mtu}, me.psn, 0, o.wait_ms, o.rnr_timer};
  c.peer_psn = peer.psn;
  c.peer_timeout_ms = 4.096e-3 * static_cast<double>(uint64_t{1} << o.peer_timeout);
  c.retry_cnt = o.retry_cnt;
  c.dcqcn_claimed = o.dcqcn_claimed;
  c.dcqcn = o.dcqcn;
  c.peer_max_mbps = o.peer_max_mbps > 0     ? o.peer_max_mbps
                    : link.link_mbps() != 0 ? link.link_mbps()
                                            : 10'000.0;
  Outcome out = s.run(c);
  (void)link.collect(10);  // late answers of this scenario are not the next one's
  // The peer's client fails on its retry count (no more ACKs): nothing more to exchange.
  if (serve) return out;
  perf::BwReport mine, theirs;
  if (!oob.hand_shake(me, nullptr) || !oob.xchg_reports(mine, &theirs) ||
      !oob.close_connection(me)) {
    // The scenario's verdict stands; a peer that ends the exchange badly is noted.
    out.seen += " [the peer did not finish the TCP exchange: " + oob.error() + "]";
  }
  return out;
}

// What was injected, for the console and the report ("" when nothing was).
std::string fault_summary(const Options& o, const Link& link) {
  std::string s;
  if (o.inject_tx.active()) s += "frames sent: " + bench::fault_counts(link.tx_faults());
  if (o.inject_rx.active())
    s += (s.empty() ? "" : "; ") + std::string("frames received: ") +
         bench::fault_counts(link.rx_faults());
  return s;
}

// The summary and the report files; a file that cannot be written is said on stderr (the
// verdicts stand).
void report_all(const Options& o, const Link& link, const std::vector<Result>& results) {
  print_summary(results);
  const std::string faults = fault_summary(o, link);
  if (!faults.empty()) std::printf("faults injected into %s\n", faults.c_str());
  std::string err;
  if (!o.junit.empty() && !write_junit(o.junit, results, &err))
    std::fprintf(stderr, "urnic-conform: %s\n", err.c_str());
  if (!o.json.empty() && !write_json(o.json, results, &err))
    std::fprintf(stderr, "urnic-conform: %s\n", err.c_str());
  const RunInfo info{o.server + ":" + std::to_string(o.tcp_port), o.ip + " on " + o.vdev, faults};
  if (!o.report.empty() && !write_page(o.report, info, results, &err))
    std::fprintf(stderr, "urnic-conform: %s\n", err.c_str());
}

int run(const Options& o) {
  RuntimeConfig rc;
  rc.program = "urnic-conform";
  rc.lcores = o.lcores;
  rc.memory_mb = 256;
  if (runtime_init(rc) != Status::kSuccess) {
    std::fprintf(stderr, "urnic-conform: EAL bring-up failed: %s\n", last_error());
    return 1;
  }
  Link link;
  std::string err;
  in_addr a{};
  inet_pton(AF_INET, o.ip.c_str(), &a);
  if (!link.open(o.vdev, ntohl(a.s_addr), &err)) {
    std::fprintf(stderr, "urnic-conform: %s\n", err.c_str());
    return 1;
  }
  link.set_faults(o.inject_tx, o.inject_rx);
  std::vector<Result> results;
  uint32_t qpn = 0x100 + (static_cast<uint32_t>(::getpid()) & 0xFF) * 0x100;
  // The CM scenarios' connection IDs and QPNs: new for every run against the same peer.
  uint32_t cm_seq = (static_cast<uint32_t>(::getpid()) & 0x3FF) << 8;
  for (const Scenario& s : scenarios()) {
    if (!o.only.empty() && o.only.count(s.name) == 0) continue;
    Result r{s.name, s.rule, {}};
    if (!allowed(o, s.needs)) {
      r.outcome = {Verdict::kNotApplicable,
                   s.needs == Needs::kPeerClient
                       ? std::string("needs the peer as a write_bw client (--peer-client)")
                   : s.needs == Needs::kCm
                       ? std::string("needs the peer's rdma_cm listener (--allows=cm)")
                   : s.needs == Needs::kUd
                       ? std::string("needs the peer's ibv_ud_pingpong servers (--allows=ud)")
                       : std::string("the peer's memory does not allow ") + needs_test(s.needs) +
                             "'s access (--allows)"};
    } else if (s.needs == Needs::kCm) {
      r.outcome = run_cm(o, link, s, &cm_seq);
    } else if (s.needs == Needs::kUd) {
      r.outcome = run_ud(o, link, s, ++qpn & 0xFFFFFF);
    } else {
      bool no_peer = false;
      r.outcome = run_one(o, link, s, ++qpn & 0xFFFFFF, &no_peer);
      if (no_peer) {
        if (s.needs == Needs::kPeerClient)
          std::fprintf(stderr, "urnic-conform: no client connected to our TCP port %u: %s\n",
                       o.tcp_port, r.outcome.seen.c_str());
        else
          std::fprintf(stderr, "urnic-conform: no server at %s:%u: %s\n", o.server.c_str(),
                       o.tcp_port, r.outcome.seen.c_str());
        return 3;
      }
    }
    print_result(r);
    results.push_back(r);
  }
  report_all(o, link, results);
  for (const Result& r : results)
    if (r.outcome.verdict == Verdict::kFail) return 1;
  return 0;
}

}  // namespace
}  // namespace urnic::conform

int main(int argc, char** argv) {
  using namespace urnic::conform;
  Options o;
  if (!parse(argc, argv, &o)) return 2;
  if (o.list) {
    for (const Scenario& s : scenarios())
      std::printf("%-24s %-10s %s\n", s.name, needs_test(s.needs), s.rule);
    return 0;
  }
  return run(o);
}

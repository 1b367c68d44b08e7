// urnic-perf command line: perftest's common options plus the DPDK ones.
#include <array>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <string>

#include "bench/common/doc.h"
#include "bench/common/fault_spec.h"
#include "bench/perf/perf.h"
#include "urnic/config.h"
#include "urnic/route.h"

namespace urnic::perf {
namespace {

struct NamedTest {
  const char* name;
  Test test;
};
constexpr NamedTest kTests[] = {
    {"write_bw", {Verb::kWrite, Kind::kBw}},   {"write_lat", {Verb::kWrite, Kind::kLat}},
    {"read_bw", {Verb::kRead, Kind::kBw}},     {"read_lat", {Verb::kRead, Kind::kLat}},
    {"send_bw", {Verb::kSend, Kind::kBw}},     {"send_lat", {Verb::kSend, Kind::kLat}},
    {"atomic_bw", {Verb::kAtomic, Kind::kBw}}, {"atomic_lat", {Verb::kAtomic, Kind::kLat}},
};

// Numbers as perftest reads them (strtol with base 0: "010" is 8, "0x40" 64), so that a command
// line written for perftest means the same here; signs, spaces and overflow are still refused.
bool parse_u64(const std::string& s, uint64_t* out) { return bench::parse_count(s, out, 0); }
bool parse_double(const std::string& s, double* out) { return bench::parse_number(s, out); }

// --break-rule=LIST: responder rules to break (BrokenRules). A release build without test
// hooks refuses them here rather than at adapter open, with the reason.
bool parse_broken_rules(const std::string& list, BrokenRules* r) {
  if (!kTesting) {
    std::fprintf(stderr, "urnic-perf: --break-rule needs a testing build (URNIC_TESTING)\n");
    return false;
  }
  for (const std::string& name : bench::split_list(list)) {
    if (name == "duplicate_ack") {
      r->duplicate_ack = true;
    } else if (name == "psn_seq_nak") {
      r->psn_seq_nak = true;
    } else if (name == "rnr_timer") {
      r->rnr_timer = true;
    } else {
      std::fprintf(stderr,
                   "urnic-perf: --break-rule takes duplicate_ack, psn_seq_nak, rnr_timer, not "
                   "'%s'\n",
                   name.c_str());
      return false;
    }
  }
  return true;
}

}  // namespace

std::optional<Test> test_from_name(std::string_view name) {
  if (name.substr(0, 3) == "ib_") name.remove_prefix(3);
  for (const auto& t : kTests)
    if (name == t.name) return t.test;
  return std::nullopt;
}

std::string test_name(Test t) {
  for (const auto& n : kTests)
    if (n.test == t) return n.name;
  return "?";
}

uint64_t Options::default_size() const {
  if (test.verb == Verb::kAtomic) return kAtomicSize;
  return test.kind == Kind::kBw ? kDefaultSizeBw : kDefaultSizeLat;
}

uint64_t Options::effective_iters() const {
  if (iters != 0) return iters;
  return test.kind == Kind::kBw ? kDefaultItersBw : kDefaultItersLat;
}

uint32_t Options::effective_tx_depth() const {
  if (test.kind == Kind::kLat) return kDefaultTxLat;
  uint32_t t = tx_depth != 0 ? tx_depth : kDefaultTxBw;
  // perftest: "TX depth" never exceeds the iteration count (the capture of -n 5 shows 5).
  if (duration == 0 && t > effective_iters()) t = static_cast<uint32_t>(effective_iters());
  return t;
}

uint32_t Options::effective_rx_depth() const {
  uint32_t r = rx_depth != 0 ? rx_depth : kDefaultRxSend;
  if (duration == 0 && r > effective_iters() + 1) r = static_cast<uint32_t>(effective_iters() + 1);
  return r;
}

std::vector<uint64_t> Options::sizes() const {
  if (test.verb == Verb::kAtomic) return {kAtomicSize};
  if (!all_sizes) return {size != 0 ? size : default_size()};
  std::vector<uint64_t> v;
  for (uint64_t s = 2; s <= kMaxSize; s <<= 1) v.push_back(s);
  return v;
}

void print_usage(const char* prog) {
  std::printf(
      "Usage: %s [TEST] [options] [SERVER]\n"
      "A perftest-compatible benchmark for urnic. TEST is one of write_bw write_lat read_bw\n"
      "read_lat send_bw send_lat atomic_bw atomic_lat (default write_bw; or --test=TEST).\n"
      "Without SERVER, --vdev or --port it runs in loopback: two adapters in this process over a\n"
      "net_ring pair. With --vdev/--port it is a perftest server, or a client of SERVER; the\n"
      "other side may be urnic-perf or perftest 4.5 (ib_write_bw ... -x <RoCEv2 GID index>).\n"
      "\n"
      "perftest options:\n"
      "  -s, --size=BYTES        message size (default 65536 for BW, 2 for latency, 8 atomics)\n"
      "  -a, --all               all sizes from 2 B to 8 MiB (powers of two)\n"
      "  -n, --iters=N           iterations (default 5000 for BW, 1000 for latency)\n"
      "  -D, --duration=SEC      run for SEC seconds instead of -n (fractions allowed)\n"
      "  -q, --qp=N              number of QPs (BW tests), 1..65536\n"
      "  -t, --tx-depth=N        send queue depth (default 128 for BW)\n"
      "  -r, --rx-depth=N        receive queue depth (default 512, send tests)\n"
      "  -Q, --cq-mod=N          signal one send in N (default 100)\n"
      "  -m, --mtu=BYTES         path MTU 256..4096 (default: the port's active MTU)\n"
      "  -l, --post_list=N       ring the doorbell once per N requests (NDK's deferred posts)\n"
      "  -I, --inline_size=B     WRITEs and SENDs of at most B bytes go inline (0..%u; default 0)\n"
      "  -o, --outs=N            READs / atomics outstanding per QP, 1..128 (default 128)\n"
      "  -u, --qp-timeout=T      local ACK timeout 4.096 us * 2^T, 0..31 (0: none; default 14)\n"
      "  -T, --tos=TOS           IP TOS / traffic class byte of the RoCE frames, 0..255: its\n"
      "                          DSCP (the ECN bits are congestion control's)\n"
      "      --report_gbits      report Gb/s instead of MB/s\n"
      "  -b, --bidirectional     BW tests: both sides send at once; the row is the sum of both\n"
      "                          sides' (symmetric: give it to both; urnic-perf peers check)\n"
      "      --report-both       with -b, also the local and the remote rows\n"
      "  -e, --events            wait for completions with CQ notifications (arm + callback)\n"
      "                          instead of polling; needs the engine on its own lcore; not\n"
      "                          with -D (write_lat still polls memory for the peer's WRITE)\n"
      "      --run_infinitely    BW tests: a row every -D seconds (default 5) until SIGINT or\n"
      "                          SIGTERM, then a last row for the partial interval, exit 0\n"
      "      --cpu_util          CPU_Util[%%] column: user / (user + idle) time of all CPUs\n"
      "                          from /proc/stat over the measured interval (needs -D)\n"
      "  -c, --connection=TYPE   RC only (UD QPs are not in urnic's API yet: issue 16)\n"
      "  -p  PORT                TCP port of the out-of-band exchange (default 18515)\n"
      "  -x, --gid-index=N       GID to use: 0 link-local IPv6, 1 IPv4-mapped (default), 2 IPv6\n"
      "  -F                      accepted (no CPU frequency check applies)\n"
      "  -d DEV, -i PORT         accepted and ignored (perftest device selection)\n"
      "DPDK options:\n"
      "      --vdev=DEVARGS      e.g. net_af_packet0,iface=veth0 (af_packet ring sizes that fit\n"
      "                          4 KiB frames are added when not given) or net_tap0,iface=t0\n"
      "      --port=PCI          a PCI NIC bound to a DPDK driver (EAL -a PCI)\n"
      "      --daemon=SOCKET     loopback through urnicd at SOCKET: its adapters urnic0 and "
      "urnic1\n"
      "                          (the in-memory pair) in attach mode, its engine doing the work\n"
      "      --lcores=LIST       EAL lcores (default 0-1 when 2 CPUs exist: the engine runs on\n"
      "                          the second; with one lcore this thread drives the engine)\n"
      "      --engines=N         spread each adapter over N engines (1..8, default 1): a port\n"
      "                          queue each, -q's QPs dealt round-robin; engine i runs on the\n"
      "                          i-th worker lcore, those beyond the workers on this thread\n"
      "      --memory=M          auto (default: hugepages when enough are free), huge (insist),\n"
      "                          nohuge\n"
      "      --ip=A.B.C.D[/LEN]  this adapter's IPv4 address (required on a real port); with\n"
      "                          /LEN its subnet: other destinations need a --route\n"
      "      --ipv6=ADDR[/LEN]   this adapter's IPv6 address (GID index 2), and its subnet\n"
      "      --route='DEST/LEN via GW'  a static route (repeatable; 'default via GW'): peers\n"
      "                          behind a router are reached through GW's MAC\n"
      "      --mac=MAC           source MAC (default: the port's)\n"
      "      --idle-yield=N      yield the CPU after N idle polls (cores shared with others)\n"
      "      --retransmit=MODE   loss recovery: adaptive (default: probes for lost tails, backoff\n"
      "                          and window restart after timeouts) or gbn (plain go-back-N)\n"
      "      --break-rule=LIST   testing builds, for checking conformance testers only: break\n"
      "                          responder rules on purpose (duplicate_ack, psn_seq_nak,\n"
      "                          rnr_timer; comma-separated)\n"
      "      --sr=auto|on|off    selective repeat instead of go-back-N: auto when the peer is\n"
      "                          urnic-perf offering it too, else go-back-N; on: refuse a peer\n"
      "                          that does not offer it; off (default): go-back-N\n"
      "      --cc=on|off         congestion control: ECT(0), CNPs for CE marks, DCQCN (on)\n"
      "      --dcqcn=PROFILE     connectx (default: ConnectX's parameters) or slow (timers for\n"
      "                          a slow emulated fabric, urnic/congestion.h)\n"
      "      --dscp=N            DSCP of RoCE data frames, 0..63 (default: 0)\n"
      "Waiting for the peer (real port):\n"
      "      --timeout=SEC       longest wait for the peer: a client to connect, each TCP step,\n"
      "                          the final sync, a run without progress (default 60; 0: none)\n"
      "      --connect-retry=SEC client: retry a refused TCP connection for SEC seconds (a\n"
      "                          server still starting; default 0: report it at once)\n"
      "Open-loop load (bandwidth tests, the client):\n"
      "      --rate=R            offer R requests per second over all QPs whatever the peer\n"
      "                          does: Mpps (default unit), or R with kpps, pps or Gbps; each\n"
      "                          request's latency runs from when it fell due (no coordinated\n"
      "                          omission); a line per second and a summary with p50 .. max\n"
      "      --arrival=A         constant (default) or poisson inter-arrival times\n"
      "      --mix=OP:SIZE[:W],...  open loop: each request drawn from these (write, read,\n"
      "                          atomic; sizes up to -s; weights, default 1), with its own\n"
      "                          latency line; write_bw or read_bw, e.g.\n"
      "                          --mix=write:64:8,read:4096:1,atomic:8:1\n"
      "      --json=FILE         the open-loop results (totals, per-second intervals) as JSON\n"
      "Report:\n"
      "      --report=FILE       a one-page report, Markdown (.md) or HTML (.html): the tables\n"
      "                          (open loop: per second and the final percentiles) and PNG plots\n"
      "                          drawn by gnuplot beside it (FILE's stem-*.png)\n"
      "Fault injection (urnic's own, at this side's port; to test the peer's recovery):\n"
      "      --inject=SPEC       on the frames this side sends: drop=, dup=, reorder=, corrupt=,\n"
      "                          delay= (held delay_us=US, default 1000), ce= (ECN CE marks:\n"
      "                          the peer must answer with CNPs), each in ppm or N%%, and\n"
      "                          seed=N; e.g. --inject=drop=1%%,ce=5%%\n"
      "      --inject-rx=SPEC    the same on the frames this side receives\n"
      "Other:\n"
      "      --sweep             loopback write/read/send/atomic sweep over a few sizes\n"
      "      --no-progress       no once-a-second progress line on stderr\n"
      "  -v, --verbose           print engine counters at the end\n"
      "  -h, --help\n"
      "Exit status: 0 passed; 1 the run failed (completion error, data check, bring-up);\n"
      "2 bad options; 3 no TCP peer (refused, or none within --timeout); 4 the peer stopped\n"
      "answering in the TCP exchange; 5 the peer closed its TCP connection (exited or killed);\n"
      "6 the QPs could not be connected (no ARP/ND answer); 7 the end-of-test sync timed out;\n"
      "8 the run made no progress for --timeout seconds.\n",
      prog, kMaxInlineSize);
}

namespace {

// --rate=VALUE[UNIT]: requests per second in Mpps (no unit, or "Mpps"), "kpps" or "pps"; or
// payload in "Gbps" / "Gb/s". Whatever does not fit (not a number, not positive, above 10^9
// requests or 10^4 Gb/s) is refused.
bool parse_rate(const std::string& s, Options* o) {
  size_t i = 0;
  while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.')) ++i;
  const std::string num = s.substr(0, i), unit = s.substr(i);
  double v = 0;
  double scale = 1e6;
  bool gbps = false;
  if (unit.empty() || unit == "Mpps" || unit == "M") {
    scale = 1e6;
  } else if (unit == "kpps" || unit == "k") {
    scale = 1e3;
  } else if (unit == "pps") {
    scale = 1;
  } else if (unit == "Gbps" || unit == "Gb/s" || unit == "G") {
    scale = 1;
    gbps = true;
  } else {
    scale = 0;
  }
  if (num.empty() || scale == 0 || !parse_double(num, &v) || !(v > 0) ||
      v * scale > (gbps ? 1e4 : 1e9)) {
    std::fprintf(stderr,
                 "urnic-perf: bad --rate '%s' (a positive number of Mpps, or with kpps, pps or "
                 "Gbps; at most 1000 Mpps or 10000 Gbps)\n",
                 s.c_str());
    return false;
  }
  o->rate = v * scale;
  o->rate_gbps = gbps;
  return true;
}

// --inject / --inject-rx (bench/common/fault_spec.h, shared with urnic-conform).
bool parse_inject(const std::string& spec, const char* opt, FaultConfig* f) {
  std::string why;
  if (bench::parse_fault_spec(spec, f, &why)) return true;
  std::fprintf(stderr, "urnic-perf: %s: %s (%s)\n", opt, why.c_str(), bench::kFaultSpecForm);
  return false;
}

// -c: perftest's connection types (change_conn_type(): RC UC UD RawEth XRC DC SRD). urnic has
// RC only; UD QPs are not in its public API yet (issue 16, item 5).
bool parse_connection(const std::string& s) {
  if (s == "RC") return true;
  if (s == "UD") {
    std::fprintf(stderr,
                 "urnic-perf: -c UD: urnic's public API has no UD QPs yet (issue 16, item 5); "
                 "only RC is supported\n");
  } else if (s == "UC" || s == "RawEth" || s == "XRC" || s == "DC" || s == "SRD") {
    std::fprintf(stderr, "urnic-perf: -c %s: urnic supports RC connections only\n", s.c_str());
  } else {
    std::fprintf(stderr,
                 "urnic-perf: invalid connection type '%s' (perftest's: RC UC UD RawEth XRC DC "
                 "SRD; urnic supports RC)\n",
                 s.c_str());
  }
  return false;
}

// --mix=OP:SIZE[:WEIGHT],...: write, read or atomic (a FETCH & ADD of 8 B), a size (K / M
// suffixes) and a weight (default 1); at most 16 entries. SEND is left out: it would need the
// peer's receives, which only a send_bw server posts.
bool parse_mix(const std::string& spec, Options* o) {
  auto bad = [&](const std::string& why) {
    std::fprintf(stderr, "urnic-perf: --mix: %s (OP:SIZE[:WEIGHT],... with write, read, atomic)\n",
                 why.c_str());
    return false;
  };
  o->mix.clear();
  for (const std::string& item : bench::split_list(spec)) {
    const size_t c1 = item.find(':'), c2 = c1 == std::string::npos ? c1 : item.find(':', c1 + 1);
    if (c1 == std::string::npos) return bad("'" + item + "' has no size");
    MixEntry e;
    const std::string op = item.substr(0, c1);
    const std::string size = item.substr(c1 + 1, c2 == std::string::npos ? c2 : c2 - c1 - 1);
    e.verb = op == "write" ? Verb::kWrite : op == "read" ? Verb::kRead : Verb::kAtomic;
    if (op != "write" && op != "read" && op != "atomic")
      return bad("unknown operation '" + op + "'");
    if (!parse_u64(size, &e.size) || e.size == 0 || e.size > kMaxSize)
      return bad("bad size '" + size + "'");
    if (e.verb == Verb::kAtomic && e.size != kAtomicSize) return bad("an atomic is 8 B");
    uint64_t w = 1;
    if (c2 != std::string::npos && (!parse_u64(item.substr(c2 + 1), &w) || w == 0 || w > 1000000))
      return bad("bad weight in '" + item + "' (1..1000000)");
    e.weight = static_cast<uint32_t>(w);
    if (o->mix.size() == 16) return bad("at most 16 entries");
    o->mix.push_back(e);
  }
  return true;
}

// --ip takes an IPv4 address, --ipv6 an IPv6 one, each with an optional prefix length: checked
// here so that a typo exits 2 before EAL start-up, as every other bad option does.
bool check_address(const std::string& key, const std::string& text) {
  std::array<uint8_t, 16> a{};
  uint8_t len = 0;
  bool v4 = false;
  if (parse_address(text, &a, &len, &v4) == Status::kSuccess && v4 == (key == "--ip")) return true;
  std::fprintf(stderr, "urnic-perf: bad %s '%s' (%s)\n", key.c_str(), text.c_str(),
               key == "--ip" ? "A.B.C.D or A.B.C.D/LEN" : "an IPv6 address, optionally /LEN");
  return false;
}

// A mix needs the open loop, one size, a test whose last request keeps the data checks true
// (write_bw, read_bw), and sizes that fit the buffers (-s).
bool check_mix(const Options& o) {
  if (o.mix.empty()) return true;
  auto bad = [](const std::string& why) {
    std::fprintf(stderr, "urnic-perf: --mix: %s\n", why.c_str());
    return false;
  };
  if (o.rate == 0) return bad("a mix is offered open loop: give --rate");
  if (o.all_sizes || o.sweep) return bad("one size per run: no -a or --sweep");
  if (o.test.verb != Verb::kWrite && o.test.verb != Verb::kRead)
    return bad("the test must be write_bw or read_bw (the peer's region must allow the mix)");
  const uint64_t buf = o.sizes().front();
  for (const MixEntry& e : o.mix)
    if (e.size > buf)
      return bad(e.label() + " is larger than the buffers (-s " + std::to_string(buf) + ")");
  return true;
}

// The combinations perftest refuses (force_dependencies()) and the ones urnic-perf cannot do.
bool check_modes(Options* o) {
  auto bad = [](const char* why) {
    std::fprintf(stderr, "urnic-perf: %s\n", why);
    return false;
  };
  const bool bw = o->test.kind == Kind::kBw;
  if (o->bidirectional && !bw) return bad("-b (bidirectional) applies to the bandwidth tests");
  if (o->report_both && !o->bidirectional) return bad("--report-both needs -b");
  if (o->bidirectional && o->rate > 0) return bad("-b and --rate (open-loop load) do not mix");
  if (o->run_infinitely) {
    if (!bw) return bad("--run_infinitely exists only in the bandwidth tests (as in perftest)");
    if (o->all_sizes) return bad("--run_infinitely runs one size: no -a");
    if (o->rate > 0) return bad("--run_infinitely does not support --rate");
    if (o->bidirectional && o->test.verb == Verb::kSend)
      return bad("--run_infinitely is not supported in the bidirectional send_bw test (perftest)");
    if (o->sweep) return bad("--run_infinitely and --sweep do not mix");
    if (o->duration == 0) o->duration = kDefaultDuration;  // the print interval
  }
  if (o->events) {
    if (o->duration > 0)
      return bad(o->run_infinitely ? "--run_infinitely does not support events (-e)"
                                   : "duration mode (-D) doesn't work with events (-e)");
    if (o->rate > 0) return bad("-e and --rate (open-loop load) do not mix");
  }
  if (o->cpu_util && o->duration == 0)
    return bad("--cpu_util works only in duration mode (-D or --run_infinitely)");
  return true;
}

}  // namespace

bool parse_options(int argc, char** argv, Options* o, bool* exit_ok) {
  *exit_ok = false;
  std::vector<std::string> positional;
  bool test_given = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    std::string key = a, val;
    bool has_val = false;
    if (a.rfind("--", 0) == 0) {
      const auto eq = a.find('=');
      if (eq != std::string::npos) {
        key = a.substr(0, eq);
        val = a.substr(eq + 1);
        has_val = true;
      }
    } else if (a.size() > 2 && a[0] == '-' && a[1] != '-') {
      // -s64 style.
      key = a.substr(0, 2);
      val = a.substr(2);
      has_val = true;
    }
    auto value = [&](std::string* out) {
      if (has_val) {
        *out = val;
        return true;
      }
      if (i + 1 >= argc) {
        std::fprintf(stderr, "urnic-perf: %s needs a value\n", key.c_str());
        return false;
      }
      *out = argv[++i];
      return true;
    };
    auto num = [&](uint64_t* out, uint64_t lo, uint64_t hi) {
      std::string s;
      if (!value(&s)) return false;
      if (!parse_u64(s, out) || *out < lo || *out > hi) {
        std::fprintf(stderr, "urnic-perf: bad value '%s' for %s (%llu..%llu)\n", s.c_str(),
                     key.c_str(), static_cast<unsigned long long>(lo),
                     static_cast<unsigned long long>(hi));
        return false;
      }
      return true;
    };
    // A flag given a value ("-b1", "--events=x") is a mistake, not a flag.
    auto flag = [&] {
      if (!has_val) return true;
      std::fprintf(stderr, "urnic-perf: %s takes no value\n", key.c_str());
      return false;
    };
    uint64_t v = 0;
    std::string s;
    if (key == "-h" || key == "--help") {
      print_usage(argv[0]);
      *exit_ok = true;
      return false;
    } else if (key == "--test") {
      if (!value(&s)) return false;
      const auto t = test_from_name(s);
      if (!t) {
        std::fprintf(stderr, "urnic-perf: unknown test '%s'\n", s.c_str());
        return false;
      }
      o->test = *t;
      test_given = true;
    } else if (key == "-s" || key == "--size") {
      if (!num(&v, 1, kMaxSize)) return false;
      o->size = v;
    } else if (key == "-a" || key == "--all") {
      if (has_val && key == "-a") {
        std::fprintf(stderr, "urnic-perf: -a takes no value\n");
        return false;
      }
      o->all_sizes = true;
    } else if (key == "-n" || key == "--iters") {
      if (!num(&v, 5, 1'000'000'000'000ull)) return false;
      o->iters = v;
    } else if (key == "-D" || key == "--duration") {
      if (!value(&s)) return false;
      if (!parse_double(s, &o->duration) || o->duration <= 0 || o->duration > 86400) {
        std::fprintf(stderr, "urnic-perf: bad duration '%s'\n", s.c_str());
        return false;
      }
    } else if (key == "-q" || key == "--qp") {
      if (!num(&v, 1, kMaxPerfQps)) return false;
      o->qps = static_cast<uint32_t>(v);
    } else if (key == "-t" || key == "--tx-depth") {
      if (!num(&v, 1, 16384)) return false;
      o->tx_depth = static_cast<uint32_t>(v);
    } else if (key == "-r" || key == "--rx-depth") {
      if (!num(&v, 1, 16384)) return false;
      o->rx_depth = static_cast<uint32_t>(v);
    } else if (key == "-Q" || key == "--cq-mod") {
      if (!num(&v, 1, 1024)) return false;
      o->cq_mod = static_cast<uint32_t>(v);
    } else if (key == "-l" || key == "--post_list") {
      if (!num(&v, 1, 16384)) return false;
      o->post_list = static_cast<uint32_t>(v);
    } else if (key == "-I" || key == "--inline_size") {
      if (!num(&v, 0, kMaxInlineSize)) return false;
      o->inline_size = static_cast<uint32_t>(v);
    } else if (key == "-o" || key == "--outs") {
      if (!num(&v, 1, kMaxOutReads)) return false;
      o->out_reads = static_cast<uint32_t>(v);
    } else if (key == "-u" || key == "--qp-timeout") {
      if (!num(&v, 0, 31)) return false;
      o->qp_timeout = static_cast<uint32_t>(v);
    } else if (key == "-T" || key == "--tos") {
      if (!num(&v, 0, 255)) return false;
      o->tos = static_cast<int>(v);
    } else if (key == "-m" || key == "--mtu") {
      if (!num(&v, 256, 4096)) return false;
      if ((v & (v - 1)) != 0) {
        std::fprintf(stderr, "urnic-perf: MTU must be 256, 512, 1024, 2048 or 4096\n");
        return false;
      }
      o->mtu = static_cast<uint32_t>(v);
    } else if (key == "--report_gbits" || key == "--report-gbits") {
      o->gbits = true;
    } else if (key == "-b" || key == "--bidirectional") {
      if (!flag()) return false;
      o->bidirectional = true;
    } else if (key == "--report-both" || key == "--report_both") {
      if (!flag()) return false;
      o->report_both = true;
    } else if (key == "-e" || key == "--events") {
      if (!flag()) return false;
      o->events = true;
    } else if (key == "--run_infinitely" || key == "--run-infinitely") {
      if (!flag()) return false;
      o->run_infinitely = true;
    } else if (key == "--cpu_util" || key == "--cpu-util") {
      if (!flag()) return false;
      o->cpu_util = true;
    } else if (key == "-c" || key == "--connection") {
      if (!value(&s) || !parse_connection(s)) return false;
    } else if (key == "-p") {
      if (!num(&v, 1, 65535)) return false;
      o->tcp_port = static_cast<uint16_t>(v);
    } else if (key == "-x" || key == "--gid-index") {
      if (!num(&v, 0, 2)) return false;
      o->gid_index = static_cast<int>(v);
    } else if (key == "-F" || key == "--CPU-freq") {
    } else if (key == "-d" || key == "--ib-dev" || key == "-i" || key == "--ib-port") {
      if (!value(&s)) return false;
    } else if (key == "-A" || key == "--atomic_type") {
      if (!value(&s)) return false;
      if (s != "FETCH_AND_ADD") {
        std::fprintf(stderr, "urnic-perf: only FETCH_AND_ADD atomics are supported\n");
        return false;
      }
    } else if (key == "-R" || key == "--rdma_cm") {
      std::fprintf(stderr, "urnic-perf: -R (rdma_cm) is not supported; the TCP exchange is\n");
      return false;
    } else if (key == "--vdev") {
      if (!value(&s)) return false;
      o->vdevs.push_back(s);
    } else if (key == "--port") {
      if (!value(&o->pci)) return false;
    } else if (key == "--lcores") {
      if (!value(&o->lcores)) return false;
    } else if (key == "--daemon") {
      if (!value(&o->daemon)) return false;
    } else if (key == "--engines") {
      if (!num(&v, 1, kMaxPerfEngines)) return false;
      o->engines = static_cast<uint32_t>(v);
    } else if (key == "--memory") {
      if (!value(&s)) return false;
      if (s != "auto" && s != "huge" && s != "nohuge") {
        std::fprintf(stderr, "urnic-perf: --memory takes auto, huge or nohuge, not '%s'\n",
                     s.c_str());
        return false;
      }
      o->memory = s == "huge"     ? RuntimeConfig::Memory::kHugepages
                  : s == "nohuge" ? RuntimeConfig::Memory::kNoHuge
                                  : RuntimeConfig::Memory::kAuto;
    } else if (key == "--ip" || key == "--ipv6") {
      std::string* out = key == "--ip" ? &o->ip : &o->ipv6;
      if (!value(out) || !check_address(key, *out)) return false;
    } else if (key == "--route") {
      std::string r;
      if (!value(&r)) return false;
      Route parsed;
      std::string why;
      if (parse_route(r, &parsed, &why) != Status::kSuccess) {
        std::fprintf(stderr, "urnic-perf: --route: %s\n", why.c_str());
        return false;
      }
      o->routes.push_back(r);
    } else if (key == "--mac") {
      std::array<uint8_t, 6> m{};
      if (!value(&o->mac)) return false;
      if (!parse_mac(o->mac, &m)) {
        std::fprintf(stderr, "urnic-perf: bad --mac '%s' (six hex bytes: 02:00:00:00:00:01)\n",
                     o->mac.c_str());
        return false;
      }
    } else if (key == "--idle-yield") {
      if (!num(&v, 0, 1u << 30)) return false;
      o->idle_yield = static_cast<uint32_t>(v);
    } else if (key == "--timeout") {
      if (!num(&v, 0, 86400)) return false;
      o->timeout = static_cast<double>(v);
    } else if (key == "--connect-retry") {
      if (!num(&v, 0, 86400)) return false;
      o->connect_retry = static_cast<double>(v);
    } else if (key == "--break-rule") {
      std::string list;
      if (!value(&list)) return false;
      if (!parse_broken_rules(list, &o->broken_rules)) return false;
    } else if (key == "--retransmit") {
      std::string mode;
      if (!value(&mode)) return false;
      if (mode != "adaptive" && mode != "gbn") {
        std::fprintf(stderr, "urnic-perf: --retransmit takes adaptive or gbn, not '%s'\n",
                     mode.c_str());
        return false;
      }
      o->adaptive_retransmit = mode == "adaptive";
    } else if (key == "--sr") {
      std::string mode;
      if (!value(&mode)) return false;
      if (mode != "auto" && mode != "on" && mode != "off") {
        std::fprintf(stderr, "urnic-perf: --sr takes auto, on or off, not '%s'\n", mode.c_str());
        return false;
      }
      o->sr = mode == "on"    ? Options::SrMode::kOn
              : mode == "off" ? Options::SrMode::kOff
                              : Options::SrMode::kAuto;
    } else if (key == "--cc" || key == "--dcqcn") {
      std::string mode;
      if (!value(&mode)) return false;
      const bool ok =
          key == "--cc" ? (mode == "on" || mode == "off") : (mode == "connectx" || mode == "slow");
      if (!ok) {
        std::fprintf(stderr, "urnic-perf: %s takes %s, not '%s'\n", key.c_str(),
                     key == "--cc" ? "on or off" : "connectx or slow", mode.c_str());
        return false;
      }
      if (key == "--cc") {
        o->cc_enabled = mode == "on";
      } else {
        o->dcqcn_slow = mode == "slow";
      }
    } else if (key == "--dscp") {
      if (!num(&v, 0, 63)) return false;
      o->dscp = static_cast<int>(v);
    } else if (key == "--inject" || key == "--inject-rx") {
      if (!value(&s) ||
          !parse_inject(s, key.c_str(), key == "--inject" ? &o->inject_tx : &o->inject_rx))
        return false;
    } else if (key == "--rate") {
      if (!value(&s) || !parse_rate(s, o)) return false;
    } else if (key == "--mix") {
      if (!value(&s) || !parse_mix(s, o)) return false;
    } else if (key == "--arrival") {
      if (!value(&s)) return false;
      if (s != "constant" && s != "poisson") {
        std::fprintf(stderr, "urnic-perf: --arrival takes constant or poisson, not '%s'\n",
                     s.c_str());
        return false;
      }
      o->arrival = s == "poisson" ? Arrival::kPoisson : Arrival::kConstant;
    } else if (key == "--json") {
      if (!value(&o->json)) return false;
      if (o->json.empty()) {
        std::fprintf(stderr, "urnic-perf: --json needs a file name\n");
        return false;
      }
    } else if (key == "--report") {
      if (!value(&o->report)) return false;
      if (!bench::doc_format_for(o->report)) {
        std::fprintf(stderr, "urnic-perf: --report=FILE: FILE must end in .md or .html, not '%s'\n",
                     o->report.c_str());
        return false;
      }
    } else if (key == "--sweep") {
      o->sweep = true;
    } else if (key == "--no-progress") {
      o->progress = false;
    } else if (key == "-v" || key == "--verbose") {
      o->verbose = true;
    } else if (a.size() > 1 && a[0] == '-') {
      std::fprintf(stderr, "urnic-perf: unknown option '%s' (see --help)\n", a.c_str());
      return false;
    } else {
      positional.push_back(a);
    }
  }
  // First positional: the test (when it names one); the last: the server address.
  size_t first = 0;
  if (!positional.empty() && !test_given) {
    if (const auto t = test_from_name(positional[0])) {
      o->test = *t;
      first = 1;
    } else if (positional[0].find('_') != std::string::npos &&
               positional[0].find_first_of(".:") == std::string::npos) {
      // A host name has no '_' (RFC 952), an address none either: a misspelled test.
      std::fprintf(stderr,
                   "urnic-perf: unknown test '%s' (write_bw write_lat read_bw read_lat send_bw "
                   "send_lat atomic_bw atomic_lat)\n",
                   positional[0].c_str());
      return false;
    }
  }
  if (o->tos >= 0 && o->dscp != 0 && o->dscp != (o->tos >> 2)) {
    std::fprintf(stderr, "urnic-perf: -T %d and --dscp=%d disagree (-T's DSCP is %d)\n", o->tos,
                 o->dscp, o->tos >> 2);
    return false;
  }
  if (o->tos >= 0) o->dscp = o->tos >> 2;
  if (positional.size() > first + 1) {
    std::fprintf(stderr, "urnic-perf: unexpected argument '%s'\n", positional[first].c_str());
    return false;
  }
  if (positional.size() == first + 1) o->server = positional[first];
  if (o->test.kind == Kind::kLat && o->qps != 1) {
    std::fprintf(stderr, "urnic-perf: latency tests use one QP\n");
    return false;
  }
  if (o->rate > 0 && o->test.kind != Kind::kBw) {
    std::fprintf(stderr, "urnic-perf: --rate (open-loop load) applies to the bandwidth tests\n");
    return false;
  }
  if (o->rate > 0 && !o->loopback() && o->role() == Role::kServer) {
    std::fprintf(stderr, "urnic-perf: --rate is the client's (the side that sends)\n");
    return false;
  }
  if (!o->json.empty() && o->rate == 0) {
    std::fprintf(stderr, "urnic-perf: --json reports an open-loop run: give --rate too\n");
    return false;
  }
  if (!check_modes(o) || !check_mix(*o)) return false;
  if (o->sweep && !o->loopback()) {
    std::fprintf(stderr, "urnic-perf: --sweep runs in loopback only\n");
    return false;
  }
  // On AF_XDP the adapter may take its interface's own addresses (README "AF_XDP").
  const bool af_xdp = !o->vdevs.empty() && o->vdevs[0].rfind("net_af_xdp", 0) == 0;
  if (!o->loopback() && o->ip.empty() && o->ipv6.empty() && !af_xdp) {
    std::fprintf(stderr, "urnic-perf: a real port needs this adapter's address (--ip)\n");
    return false;
  }
  return true;
}

bool parse_mac(const std::string& s, std::array<uint8_t, 6>* m) {
  // Exactly six bytes of one or two hex digits separated by ':' (sscanf's %x took "0x1ff" and
  // dropped the high bits, and ignored anything after the sixth).
  size_t at = 0;
  for (int i = 0; i < 6; ++i) {
    if (i > 0 && (at >= s.size() || s[at++] != ':')) return false;
    unsigned v = 0, digits = 0;
    for (; at < s.size() && std::isxdigit(static_cast<unsigned char>(s[at])) && digits < 2;
         ++at, ++digits)
      v = v * 16 +
          static_cast<unsigned>(std::isdigit(static_cast<unsigned char>(s[at]))
                                    ? s[at] - '0'
                                    : (std::tolower(static_cast<unsigned char>(s[at])) - 'a' + 10));
    if (digits == 0) return false;
    (*m)[i] = static_cast<uint8_t>(v);
  }
  return at == s.size();
}

}  // namespace urnic::perf

// urnic-perf command line: perftest's common options plus the DPDK ones.
#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "bench/common/doc.h"
#include "bench/common/fault_spec.h"
#include "bench/perf/option_table.h"
#include "bench/perf/perf.h"
#include "urnic/config.h"
#include "urnic/route.h"

namespace urnic::perf {
namespace opts {

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

// --break-rule=LIST: rules to break (BrokenRules, urnic/counters.h). A release build without
// test hooks refuses them here rather than at adapter open, with the reason.
bool parse_broken_rules(const std::string& list, BrokenRules* r) {
  std::string unknown;
  switch (urnic::parse_broken_rules(list, r, &unknown)) {
    case Status::kSuccess:
      return true;
    case Status::kNotSupported:
      std::fprintf(stderr, "urnic-perf: --break-rule needs a testing build (URNIC_TESTING)\n");
      return false;
    default:
      std::fprintf(stderr, "urnic-perf: --break-rule takes %s; not '%s'\n", broken_rule_names(),
                   unknown.c_str());
      return false;
  }
}

}  // namespace opts

using namespace opts;  // the value parsers, also the option table's (option_table.h)

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
  // UD (perftest): a receive for every message up to UC_MAX_RX, since a datagram that finds none
  // is lost, not retried.
  uint32_t r = rx_depth != 0 ? rx_depth : ud ? kUdMaxRx : kDefaultRxSend;
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

std::vector<uint64_t> Options::sizes_for(uint32_t mtu) const {
  std::vector<uint64_t> v = sizes();
  if (!ud) return v;
  if (!all_sizes) return {std::min<uint64_t>(v.front(), mtu)};
  std::erase_if(v, [mtu](uint64_t s) { return s > mtu; });
  return v;
}

namespace opts {

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

// -c: perftest's connection types (change_conn_type(): RC UC UD RawEth XRC DC SRD); urnic runs
// RC and UD.
bool parse_connection(const std::string& s, Options* o) {
  o->ud = s == "UD";
  if (s == "RC" || s == "UD") return true;
  if (s == "UC" || s == "RawEth" || s == "XRC" || s == "DC" || s == "SRD") {
    std::fprintf(stderr, "urnic-perf: -c %s: urnic supports RC and UD connections only\n",
                 s.c_str());
  } else {
    std::fprintf(stderr,
                 "urnic-perf: invalid connection type '%s' (perftest's: RC UC UD RawEth XRC DC "
                 "SRD; urnic supports RC and UD)\n",
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
  if (o->ud && o->test.verb != Verb::kSend)
    return bad("UD connection only possible in SEND verb (send_bw, send_lat)");
  if (o->ud && o->rdma_cm)
    return bad(
        "-c UD with -R (rdma_cm's UDP port space) is not supported; -c UD runs over the "
        "TCP exchange");
  if (o->rdma_cm && o->loopback())
    return bad("-R (rdma_cm) needs a peer: a server address, or --vdev / --port for the server");
  if (o->cpu_util && o->duration == 0)
    return bad("--cpu_util works only in duration mode (-D or --run_infinitely)");
  return true;
}

}  // namespace opts

void print_usage(const char* prog) {
  std::printf(
      "Usage: %s [TEST] [options] [SERVER]\n"
      "A perftest-compatible benchmark for urnic. TEST is one of write_bw write_lat read_bw\n"
      "read_lat send_bw send_lat atomic_bw atomic_lat (default write_bw; or --test=TEST).\n"
      "Without SERVER, --vdev or --port it runs in loopback: two adapters in this process over a\n"
      "net_ring pair. With --vdev/--port it is a perftest server, or a client of SERVER; the\n"
      "other side may be urnic-perf or perftest 4.5 (ib_write_bw ... -x <RoCEv2 GID index>).\n"
      "\n",
      prog);
  print_option_table();
  std::printf(
      "Exit status: 0 passed; 1 the run failed (completion error, data check, bring-up);\n"
      "2 bad options; 3 no TCP peer (refused, or none within --timeout); 4 the peer stopped\n"
      "answering in the TCP exchange; 5 the peer closed its TCP connection (exited or killed);\n"
      "6 the QPs could not be connected (no ARP/ND answer); 7 the end-of-test sync timed out;\n"
      "8 the run made no progress for --timeout seconds; 9 (--connect-storm) the peer refused\n"
      "or never answered some connection requests.\n");
}

namespace {

// --connect-storm: a real port, a test of its own.
bool check_storm(const Options& o) {
  const char* why = o.loopback()      ? "runs against a real port (--vdev or --port)"
                    : o.rdma_cm       ? "connects through the IB CM already (no -R)"
                    : o.ud            ? "opens RC connections (no -c UD)"
                    : o.rate > 0      ? "takes --storm-rate, not --rate"
                    : o.bidirectional ? "has no -b"
                                      : nullptr;
  if (why == nullptr && o.role() == Role::kServer && o.storm_rate != 0)
    why = "takes --storm-rate on the client (the side that connects)";
  if (why == nullptr && o.role() == Role::kClient && o.storm_limit != 0)
    why = "takes --storm-limit on the server (the side that accepts)";
  if (why == nullptr) return true;
  std::fprintf(stderr, "urnic-perf: --connect-storm %s\n", why);
  return false;
}

// The checks across options, once every option is read: the positional arguments (the test,
// the server) and the combinations that do not go together.
bool finish_options(Options* o, const std::vector<std::string>& positional, bool test_given) {
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
  if (o->storm != 0 && !check_storm(*o)) return false;
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

}  // namespace

bool parse_options(int argc, char** argv, Options* o, bool* exit_ok) {
  *exit_ok = false;
  std::vector<std::string> positional;
  bool test_given = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    OptionArg arg{o, a, {}, false, &i, argc, argv, &test_given};
    if (a.rfind("--", 0) == 0) {
      if (const auto eq = a.find('='); eq != std::string::npos) {
        arg.key = a.substr(0, eq);
        arg.val = a.substr(eq + 1);
        arg.has_val = true;
      }
    } else if (a.size() > 2 && a[0] == '-') {
      // -s64 style.
      arg.key = a.substr(0, 2);
      arg.val = a.substr(2);
      arg.has_val = true;
    }
    if (arg.key == "-h" || arg.key == "--help") {
      print_usage(argv[0]);
      *exit_ok = true;
      return false;
    }
    if (const OptionRow* r = find_option(arg.key)) {
      if (!r->parse(arg)) return false;
    } else if (a.size() > 1 && a[0] == '-') {
      std::fprintf(stderr, "urnic-perf: unknown option '%s' (see --help)\n", a.c_str());
      return false;
    } else {
      positional.push_back(a);
    }
  }
  return finish_options(o, positional, test_given);
}

}  // namespace urnic::perf

// urnic-perf's options as one table (issue 43 item 4): each row names an option, its argument,
// its help text and how it is parsed, so that --help and the parser read the same rows and
// cannot drift. The checks across options stay in options.cc (finish_options).
#include "bench/perf/option_table.h"

#include <cstdio>
#include <cstring>
#include <span>
#include <string>
#include <string_view>

#include "bench/common/doc.h"
#include "urnic/route.h"

namespace urnic::perf {

using namespace opts;  // the value parsers (option_table.h)

bool OptionArg::value(std::string* out) {
  if (has_val) {
    *out = val;
    return true;
  }
  if (*i + 1 >= argc) {
    std::fprintf(stderr, "urnic-perf: %s needs a value\n", key.c_str());
    return false;
  }
  *out = argv[++*i];
  return true;
}

bool OptionArg::num(uint64_t* out, uint64_t lo, uint64_t hi) {
  std::string s;
  if (!value(&s)) return false;
  if (!parse_u64(s, out) || *out < lo || *out > hi) {
    std::fprintf(stderr, "urnic-perf: bad value '%s' for %s (%llu..%llu)\n", s.c_str(), key.c_str(),
                 static_cast<unsigned long long>(lo), static_cast<unsigned long long>(hi));
    return false;
  }
  return true;
}

bool OptionArg::flag() {
  // A flag given a value ("-b1", "--events=x") is a mistake, not a flag.
  if (!has_val) return true;
  std::fprintf(stderr, "urnic-perf: %s takes no value\n", key.c_str());
  return false;
}

bool OptionArg::one_of(std::string* out, std::initializer_list<const char*> allowed) {
  if (!value(out)) return false;
  std::string list;
  size_t n = 0;
  for (const char* a : allowed) {
    if (*out == a) return true;
    list += n == 0 ? "" : n + 1 == allowed.size() ? " or " : ", ";
    list += a;
    ++n;
  }
  std::fprintf(stderr, "urnic-perf: %s takes %s, not '%s'\n", key.c_str(), list.c_str(),
               out->c_str());
  return false;
}

namespace {

// A number into a narrower field.
template <class T>
bool num_into(OptionArg& a, T* field, uint64_t lo, uint64_t hi) {
  uint64_t v = 0;
  if (!a.num(&v, lo, hi)) return false;
  *field = static_cast<T>(v);
  return true;
}

bool set_flag(OptionArg& a, bool* field, bool to = true) {
  if (!a.flag()) return false;
  *field = to;
  return true;
}

bool parse_mtu(OptionArg& a) {
  uint64_t v = 0;
  if (!a.num(&v, 256, 4096)) return false;
  if ((v & (v - 1)) != 0) {
    std::fprintf(stderr, "urnic-perf: MTU must be 256, 512, 1024, 2048 or 4096\n");
    return false;
  }
  a.o->mtu = static_cast<uint32_t>(v);
  return true;
}

bool parse_test_option(OptionArg& a) {
  std::string s;
  if (!a.value(&s)) return false;
  const auto t = test_from_name(s);
  if (!t) {
    std::fprintf(stderr, "urnic-perf: unknown test '%s'\n", s.c_str());
    return false;
  }
  a.o->test = *t;
  *a.test_given = true;
  return true;
}

bool parse_duration(OptionArg& a) {
  std::string s;
  if (!a.value(&s)) return false;
  if (!parse_double(s, &a.o->duration) || a.o->duration <= 0 || a.o->duration > 86400) {
    std::fprintf(stderr, "urnic-perf: bad duration '%s'\n", s.c_str());
    return false;
  }
  return true;
}

bool parse_memory(OptionArg& a) {
  std::string s;
  if (!a.one_of(&s, {"auto", "huge", "nohuge"})) return false;
  a.o->memory = s == "huge"     ? RuntimeConfig::Memory::kHugepages
                : s == "nohuge" ? RuntimeConfig::Memory::kNoHuge
                                : RuntimeConfig::Memory::kAuto;
  return true;
}

bool parse_route_option(OptionArg& a) {
  std::string r;
  if (!a.value(&r)) return false;
  Route parsed;
  std::string why;
  if (parse_route(r, &parsed, &why) != Status::kSuccess) {
    std::fprintf(stderr, "urnic-perf: --route: %s\n", why.c_str());
    return false;
  }
  a.o->routes.push_back(r);
  return true;
}

bool parse_mac_option(OptionArg& a) {
  std::array<uint8_t, 6> m{};
  if (!a.value(&a.o->mac)) return false;
  if (parse_mac(a.o->mac, &m) == Status::kSuccess) return true;
  std::fprintf(stderr, "urnic-perf: bad --mac '%s' (six hex bytes: 02:00:00:00:00:01)\n",
               a.o->mac.c_str());
  return false;
}

bool parse_sr(OptionArg& a) {
  std::string s;
  if (!a.one_of(&s, {"auto", "on", "off"})) return false;
  a.o->sr = s == "on"    ? Options::SrMode::kOn
            : s == "off" ? Options::SrMode::kOff
                         : Options::SrMode::kAuto;
  return true;
}

bool parse_json(OptionArg& a) {
  if (!a.value(&a.o->json)) return false;
  if (!a.o->json.empty()) return true;
  std::fprintf(stderr, "urnic-perf: --json needs a file name\n");
  return false;
}

bool parse_report(OptionArg& a) {
  if (!a.value(&a.o->report)) return false;
  if (bench::doc_format_for(a.o->report)) return true;
  std::fprintf(stderr, "urnic-perf: --report=FILE: FILE must end in .md or .html, not '%s'\n",
               a.o->report.c_str());
  return false;
}

bool parse_atomic_type(OptionArg& a) {
  std::string s;
  if (!a.value(&s)) return false;
  if (s == "FETCH_AND_ADD") return true;
  std::fprintf(stderr, "urnic-perf: only FETCH_AND_ADD atomics are supported\n");
  return false;
}

bool ignore_value(OptionArg& a) {
  std::string s;
  return a.value(&s);
}

// clang-format off
constexpr OptionRow kPerftestRows[] = {
  {"-s --size", "BYTES", "message size (default 65536 for BW, 2 for latency, 8 atomics)",
   [](OptionArg& a) { return num_into(a, &a.o->size, 1, kMaxSize); }},
  {"-a --all", nullptr, "all sizes from 2 B to 8 MiB (powers of two)",
   [](OptionArg& a) { return set_flag(a, &a.o->all_sizes); }},
  {"-n --iters", "N", "iterations (default 5000 for BW, 1000 for latency)",
   [](OptionArg& a) { return num_into(a, &a.o->iters, 5, 1'000'000'000'000ull); }},
  {"-D --duration", "SEC", "run for SEC seconds instead of -n (fractions allowed)",
   parse_duration},
  {"-q --qp", "N", "number of QPs (BW tests), 1..65536",
   [](OptionArg& a) { return num_into(a, &a.o->qps, 1, kMaxPerfQps); }},
  {"-t --tx-depth", "N", "send queue depth (default 128 for BW)",
   [](OptionArg& a) { return num_into(a, &a.o->tx_depth, 1, 16384); }},
  {"-r --rx-depth", "N", "receive queue depth (default 512, send tests)",
   [](OptionArg& a) { return num_into(a, &a.o->rx_depth, 1, 16384); }},
  {"-Q --cq-mod", "N", "signal one send in N (default 100)",
   [](OptionArg& a) { return num_into(a, &a.o->cq_mod, 1, 1024); }},
  {"-m --mtu", "BYTES", "path MTU 256..4096 (default: the port's active MTU)", parse_mtu},
  {"-l --post_list", "N", "ring the doorbell once per N requests (NDK's deferred posts)",
   [](OptionArg& a) { return num_into(a, &a.o->post_list, 1, 16384); }},
  {"-I --inline_size", "B",
   "WRITEs and SENDs of at most B bytes go inline (0..{MAX_INLINE}; default 0)",
   [](OptionArg& a) { return num_into(a, &a.o->inline_size, 0, kMaxInlineSize); }},
  {"-o --outs", "N", "READs / atomics outstanding per QP, 1..128 (default 128)",
   [](OptionArg& a) { return num_into(a, &a.o->out_reads, 1, kMaxOutReads); }},
  {"-u --qp-timeout", "T", "local ACK timeout 4.096 us * 2^T, 0..31 (0: none; default 14)",
   [](OptionArg& a) { return num_into(a, &a.o->qp_timeout, 0, 31); }},
  {"-T --tos", "TOS", "IP TOS / traffic class byte of the RoCE frames, 0..255: its\n"
                      "DSCP (the ECN bits are congestion control's)",
   [](OptionArg& a) { return num_into(a, &a.o->tos, 0, 255); }},
  {"--report_gbits --report-gbits", nullptr, "report Gb/s instead of MB/s",
   [](OptionArg& a) { return set_flag(a, &a.o->gbits); }},
  {"-b --bidirectional", nullptr,
   "BW tests: both sides send at once; the row is the sum of both\n"
   "sides' (symmetric: give it to both; urnic-perf peers check)",
   [](OptionArg& a) { return set_flag(a, &a.o->bidirectional); }},
  {"--report-both --report_both", nullptr, "with -b, also the local and the remote rows",
   [](OptionArg& a) { return set_flag(a, &a.o->report_both); }},
  {"-e --events", nullptr,
   "wait for completions with CQ notifications (arm + callback)\n"
   "instead of polling; needs the engine on its own lcore; not\n"
   "with -D (write_lat still polls memory for the peer's WRITE)",
   [](OptionArg& a) { return set_flag(a, &a.o->events); }},
  {"--run_infinitely --run-infinitely", nullptr,
   "BW tests: a row every -D seconds (default 5) until SIGINT or\n"
   "SIGTERM, then a last row for the partial interval, exit 0",
   [](OptionArg& a) { return set_flag(a, &a.o->run_infinitely); }},
  {"--cpu_util --cpu-util", nullptr,
   "CPU_Util[%] column: user / (user + idle) time of all CPUs\n"
   "from /proc/stat over the measured interval (needs -D)",
   [](OptionArg& a) { return set_flag(a, &a.o->cpu_util); }},
  {"-c --connection", "TYPE", "RC (default) or UD (send_bw / send_lat; messages up to the MTU)",
   [](OptionArg& a) {
     std::string s;
     return a.value(&s) && parse_connection(s, a.o);
   }},
  {"-p", "PORT", "TCP port of the out-of-band exchange (default 18515)",
   [](OptionArg& a) { return num_into(a, &a.o->tcp_port, 1, 65535); }},
  {"-x --gid-index", "N", "GID to use: 0 link-local IPv6, 1 IPv4-mapped (default), 2 IPv6",
   [](OptionArg& a) { return num_into(a, &a.o->gid_index, 0, 2); }},
  {"-F --CPU-freq", nullptr, "accepted (no CPU frequency check applies)",
   [](OptionArg& a) { return a.flag(); }},
  {"-d --ib-dev", "DEV", "accepted and ignored (perftest device selection)", ignore_value},
  {"-i --ib-port", "PORT", "accepted and ignored (perftest port selection)", ignore_value},
  {"-A --atomic_type", "TYPE", "FETCH_AND_ADD (the only atomic urnic-perf runs)",
   parse_atomic_type},
  {"-R --rdma_cm", nullptr, "connect through rdma_cm (the IB CM), the exchange over RDMA\n"
                             "(perftest's -R)",
   [](OptionArg& a) { return a.flag() && (a.o->rdma_cm = true); }},
};

constexpr OptionRow kDpdkRows[] = {
  {"--vdev", "DEVARGS", "e.g. net_af_packet0,iface=veth0 (af_packet ring sizes that fit\n"
                        "4 KiB frames are added when not given) or net_tap0,iface=t0",
   [](OptionArg& a) {
     std::string s;
     if (!a.value(&s)) return false;
     a.o->vdevs.push_back(s);
     return true;
   }},
  {"--port", "PCI", "a PCI NIC bound to a DPDK driver (EAL -a PCI)",
   [](OptionArg& a) { return a.value(&a.o->pci); }},
  {"--daemon", "SOCKET", "loopback through urnicd at SOCKET: its adapters urnic0 and urnic1\n"
                         "(the in-memory pair) in attach mode, its engine doing the work",
   [](OptionArg& a) { return a.value(&a.o->daemon); }},
  {"--lcores", "LIST", "EAL lcores (default 0-1 when 2 CPUs exist: the engine runs on\n"
                       "the second; with one lcore this thread drives the engine)",
   [](OptionArg& a) { return a.value(&a.o->lcores); }},
  {"--engines", "N", "spread each adapter over N engines (1..8, default 1): a port\n"
                     "queue each, -q's QPs dealt round-robin; engine i runs on the\n"
                     "i-th worker lcore, those beyond the workers on this thread",
   [](OptionArg& a) { return num_into(a, &a.o->engines, 1, kMaxPerfEngines); }},
  {"--memory", "M", "auto (default: hugepages when enough are free), huge (insist),\n"
                    "nohuge",
   parse_memory},
  {"--ip", "A.B.C.D[/LEN]", "this adapter's IPv4 address (required on a real port); with\n"
                            "/LEN its subnet: other destinations need a --route",
   [](OptionArg& a) { return a.value(&a.o->ip) && check_address(a.key, a.o->ip); }},
  {"--ipv6", "ADDR[/LEN]", "this adapter's IPv6 address (GID index 2), and its subnet",
   [](OptionArg& a) { return a.value(&a.o->ipv6) && check_address(a.key, a.o->ipv6); }},
  {"--route", "'DEST/LEN via GW'", "a static route (repeatable; 'default via GW'): peers\n"
                                   "behind a router are reached through GW's MAC",
   parse_route_option},
  {"--mac", "MAC", "source MAC (default: the port's)", parse_mac_option},
  {"--idle-yield", "N", "yield the CPU after N idle polls (cores shared with others)",
   [](OptionArg& a) { return num_into(a, &a.o->idle_yield, 0, 1u << 30); }},
  {"--retransmit", "MODE", "loss recovery: adaptive (default: probes for lost tails, backoff\n"
                           "and window restart after timeouts) or gbn (plain go-back-N)",
   [](OptionArg& a) {
     std::string s;
     if (!a.one_of(&s, {"adaptive", "gbn"})) return false;
     a.o->adaptive_retransmit = s == "adaptive";
     return true;
   }},
  {"--break-rule", "LIST", "testing builds, for checking conformance testers only: break\n"
                           "rules on purpose, comma-separated: the responder's\n"
                           "(duplicate_ack, psn_seq_nak, rnr_timer) and the connection\n"
                           "manager's (cm_rep_resources, cm_rej_reason, cm_rep_retry,\n"
                           "cm_dup_req, cm_mra, cm_drep, cm_drep_again, cm_dreq_qpn,\n"
                           "cm_stale, cm_max_retries, cm_rej, cm_dreq_rep_sent,\n"
                           "cm_drep_unknown), datagram QPs'\n"
                           "(ud_src_qp, ud_qkey, ud_icrc, ud_pmtu, ud_imm, ud_empty) and\n"
                           "congestion control's (cc_cnp_dest_qp, cc_cnp_unpaced,\n"
                           "cc_reduce_period, cc_no_recovery)",
   [](OptionArg& a) {
     std::string list;
     return a.value(&list) && parse_broken_rules(list, &a.o->broken_rules);
   }},
  {"--sr", "auto|on|off", "selective repeat instead of go-back-N: auto when the peer is\n"
                          "urnic-perf offering it too, else go-back-N; on: refuse a peer\n"
                          "that does not offer it; off (default): go-back-N",
   parse_sr},
  {"--cc", "on|off", "congestion control: ECT(0), CNPs for CE marks, DCQCN (on)",
   [](OptionArg& a) {
     std::string s;
     if (!a.one_of(&s, {"on", "off"})) return false;
     a.o->cc_enabled = s == "on";
     return true;
   }},
  {"--dcqcn", "PROFILE", "connectx (default: ConnectX's parameters) or slow (timers for\n"
                         "a slow emulated fabric, urnic/congestion.h)",
   [](OptionArg& a) {
     std::string s;
     if (!a.one_of(&s, {"connectx", "slow"})) return false;
     a.o->dcqcn_slow = s == "slow";
     return true;
   }},
  {"--dscp", "N", "DSCP of RoCE data frames, 0..63 (default: 0)",
   [](OptionArg& a) { return num_into(a, &a.o->dscp, 0, 63); }},
};

constexpr OptionRow kWaitRows[] = {
  {"--timeout", "SEC", "longest wait for the peer: a client to connect, each TCP step,\n"
                       "the final sync, a run without progress (default 60; 0: none)",
   [](OptionArg& a) { return num_into(a, &a.o->timeout, 0, 86400); }},
  {"--connect-retry", "SEC", "client: retry a refused TCP connection for SEC seconds (a\n"
                             "server still starting; default 0: report it at once);\n"
                             "--connect-storm: the first request, while nobody listens",
   [](OptionArg& a) { return num_into(a, &a.o->connect_retry, 0, 86400); }},
};

constexpr OptionRow kOpenLoopRows[] = {
  {"--rate", "R", "offer R requests per second over all QPs whatever the peer\n"
                  "does: Mpps (default unit), or R with kpps, pps or Gbps; each\n"
                  "request's latency runs from when it fell due (no coordinated\n"
                  "omission); a line per second and a summary with p50 .. max",
   [](OptionArg& a) {
     std::string s;
     return a.value(&s) && parse_rate(s, a.o);
   }},
  {"--arrival", "A", "constant (default) or poisson inter-arrival times",
   [](OptionArg& a) {
     std::string s;
     if (!a.one_of(&s, {"constant", "poisson"})) return false;
     a.o->arrival = s == "poisson" ? Arrival::kPoisson : Arrival::kConstant;
     return true;
   }},
  {"--mix", "OP:SIZE[:W],...", "open loop: each request drawn from these (write, read,\n"
                               "atomic; sizes up to -s; weights, default 1), with its own\n"
                               "latency line; write_bw or read_bw, e.g.\n"
                               "--mix=write:64:8,read:4096:1,atomic:8:1",
   [](OptionArg& a) {
     std::string s;
     return a.value(&s) && parse_mix(s, a.o);
   }},
  {"--mix-file", "FILE", "open loop: the mix, rate, arrival, QPs and duration from a file\n"
                         "(lines 'write 64 8', 'rate 0.5', 'arrival poisson', 'qps 8',\n"
                         "'duration 5', 'size 4096'; README \"Traffic mixes\")",
   [](OptionArg& a) {
     std::string s;
     return a.value(&s) && parse_mix_file(s, a);
   }},
  {"--json", "FILE", "the results as JSON: the bandwidth / latency rows, or the\n"
                         "open-loop run, or the --connect-storm's", parse_json},
};

constexpr OptionRow kStormRows[] = {
  {"--connect-storm", "N", "client: open N RC connections to SERVER through the IB CM\n"
                           "(rdma_cm, port -p) as fast as the peer answers, hold them, then\n"
                           "disconnect them: setup and teardown rates and latency\n"
                           "percentiles, rejects by reason, where the peer first refused;\n"
                           "server: accept N requests (any rdma_cm client, e.g. cmtime)",
   [](OptionArg& a) { return num_into(a, &a.o->storm, 1, kMaxStormConnections); }},
  {"--storm-rate", "R", "offer R connection requests per second (default: as fast as\n"
                        "answered, --storm-window at a time); latency from when each fell due",
   [](OptionArg& a) { return num_into(a, &a.o->storm_rate, 1, 1'000'000); }},
  {"--storm-window", "W", "requests outstanding at most without --storm-rate (default 16)",
   [](OptionArg& a) { return num_into(a, &a.o->storm_window, 1, kMaxStormConnections); }},
  {"--storm-limit", "K", "server: hold at most K connections, reject the rest (REJ, consumer\n"
                         "defined), as a peer at its QP limit does",
   [](OptionArg& a) { return num_into(a, &a.o->storm_limit, 1, kMaxStormConnections); }},
};

constexpr OptionRow kReportRows[] = {
  {"--report", "FILE", "a one-page report, Markdown (.md) or HTML (.html): the tables\n"
                       "(open loop: per second and the final percentiles) and PNG plots\n"
                       "drawn by gnuplot beside it (FILE's stem-*.png)",
   parse_report},
};

constexpr OptionRow kFaultRows[] = {
  {"--inject", "SPEC", "on the frames this side sends: drop=, dup=, reorder=, corrupt=,\n"
                       "delay= (held delay_us=US, default 1000), ce= (ECN CE marks:\n"
                       "the peer must answer with CNPs), each in ppm or N%, and\n"
                       "seed=N; e.g. --inject=drop=1%,ce=5%",
   [](OptionArg& a) {
     std::string s;
     return a.value(&s) && parse_inject(s, "--inject", &a.o->inject_tx);
   }},
  {"--inject-rx", "SPEC", "the same on the frames this side receives",
   [](OptionArg& a) {
     std::string s;
     return a.value(&s) && parse_inject(s, "--inject-rx", &a.o->inject_rx);
   }},
};

constexpr OptionRow kOtherRows[] = {
  {"--sweep", nullptr, "loopback write/read/send/atomic sweep over a few sizes",
   [](OptionArg& a) { return set_flag(a, &a.o->sweep); }},
  {"--no-progress", nullptr, "no once-a-second progress line on stderr",
   [](OptionArg& a) { return set_flag(a, &a.o->progress, false); }},
  {"-v --verbose", nullptr, "print engine counters at the end",
   [](OptionArg& a) { return set_flag(a, &a.o->verbose); }},
  {"--test", "TEST", "the test, as the first argument names it", parse_test_option},
};
// clang-format on

struct OptionGroup {
  const char* title;
  std::span<const OptionRow> rows;
};
constexpr OptionGroup kGroups[] = {
    {"perftest options:", kPerftestRows},
    {"DPDK options:", kDpdkRows},
    {"Waiting for the peer (real port):", kWaitRows},
    {"Open-loop load (bandwidth tests, the client):", kOpenLoopRows},
    {"Connection storm (real port):", kStormRows},
    {"Report:", kReportRows},
    {"Fault injection (urnic's own, at this side's port; to test the peer's recovery):",
     kFaultRows},
    {"Other:", kOtherRows},
};

// The names of a row: "-s --size" -> "-s", "--size" (the first short and long are shown,
// later long ones are accepted spellings).
bool row_has(const OptionRow& r, std::string_view key) {
  std::string_view names = r.names;
  while (!names.empty()) {
    const size_t sp = names.find(' ');
    if (names.substr(0, sp) == key) return true;
    names = sp == std::string_view::npos ? std::string_view{} : names.substr(sp + 1);
  }
  return false;
}

// "  -s, --size=BYTES", "      --vdev=DEVARGS", "  -p PORT".
std::string usage_names(const OptionRow& r) {
  std::string_view names = r.names;
  const size_t sp = names.find(' ');
  std::string_view first = names.substr(0, sp), second;
  if (sp != std::string_view::npos) second = names.substr(sp + 1, names.find(' ', sp + 1) - sp - 1);
  const bool has_short = first.size() == 2;
  const std::string_view lng = has_short ? second : first;
  std::string out = has_short ? "  " + std::string(first) : "    ";
  if (!lng.empty()) out += (has_short ? ", " : "  ") + std::string(lng);
  if (r.arg != nullptr) out += (lng.empty() ? " " : "=") + std::string(r.arg);
  return out;
}

void print_help_text(std::string prefix, const char* help) {
  constexpr size_t kColumn = 26;
  std::string text = help;
  if (const size_t at = text.find("{MAX_INLINE}"); at != std::string::npos)
    text.replace(at, std::strlen("{MAX_INLINE}"), std::to_string(kMaxInlineSize));
  prefix += prefix.size() < kColumn ? std::string(kColumn - prefix.size(), ' ') : "  ";
  size_t from = 0;
  for (;;) {
    const size_t nl = text.find('\n', from);
    std::printf("%s%s\n", prefix.c_str(), text.substr(from, nl - from).c_str());
    if (nl == std::string::npos) return;
    from = nl + 1;
    prefix.assign(kColumn, ' ');
  }
}

}  // namespace

const OptionRow* find_option(std::string_view key) {
  for (const OptionGroup& g : kGroups)
    for (const OptionRow& r : g.rows)
      if (row_has(r, key)) return &r;
  return nullptr;
}

void print_option_table() {
  for (const OptionGroup& g : kGroups) {
    std::printf("%s\n", g.title);
    for (const OptionRow& r : g.rows)
      if (r.help != nullptr) print_help_text(usage_names(r), r.help);
  }
  std::printf("  -h, --help\n");
}

}  // namespace urnic::perf

// urnic-perf: a perftest-compatible benchmark for urnic (issue 6). Shared types: the tests, the
// command-line options, perftest's connection record and bandwidth report, and the data patterns
// that let an urnic-perf receiver verify the bytes it got.
//
// The numbers and names mirror perftest 4.5 (Debian 12's perftest 4.5+0.17, version string
// "6.06"; src/perftest_parameters.h), so that `ib_write_bw` users find the same defaults.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bench/perf/openloop.h"
#include "bench/perf/verb.h"
#include "urnic/congestion.h"
#include "urnic/counters.h"
#include "urnic/runtime.h"

namespace urnic::perf {

// perftest's TestType (VerbType: verb.h).
enum class Kind : uint8_t { kBw, kLat };

struct Test {
  Verb verb = Verb::kWrite;
  Kind kind = Kind::kBw;
  friend bool operator==(const Test&, const Test&) = default;
};

// "write_bw", "send_lat", ... (also accepts the tool names "ib_write_bw", ...).
std::optional<Test> test_from_name(std::string_view name);
std::string test_name(Test t);

enum class Role : uint8_t { kClient, kServer };

// perftest defaults (perftest_parameters.h).
inline constexpr uint16_t kDefaultTcpPort = 18515;  // DEF_PORT
inline constexpr uint32_t kUdQkey = 0x11111111;     // DEF_QKEY: perftest's datagram QPs' Q_Key
inline constexpr uint32_t kUdMaxRx = 16000;         // UC_MAX_RX: -c UD's default receive depth
inline constexpr uint64_t kDefaultSizeBw = 65536;   // DEF_SIZE_BW
inline constexpr uint64_t kDefaultSizeLat = 2;      // DEF_SIZE_LAT
inline constexpr uint64_t kAtomicSize = 8;          // atomics always move 8 bytes
inline constexpr uint64_t kDefaultItersBw = 5000;   // DEF_ITERS_BW
inline constexpr uint64_t kDefaultItersLat = 1000;  // DEF_ITERS
inline constexpr uint32_t kDefaultTxBw = 128;       // DEF_TX_BW
inline constexpr uint32_t kDefaultTxLat = 1;        // DEF_TX_LAT
inline constexpr uint32_t kDefaultRxSend = 512;     // DEF_RX_SEND
inline constexpr uint32_t kDefaultCqMod = 100;      // DEF_CQ_MOD
inline constexpr uint64_t kMaxSize = 8u << 20;      // MAX_SIZE: -a runs 2 B .. 8 MiB
inline constexpr uint32_t kMinRnrTimer = 12;        // MIN_RNR_TIMER (0.64 ms)
inline constexpr uint32_t kQpTimeout = 14;          // DEF_QP_TIME (67 ms local ACK timeout)
inline constexpr uint32_t kMaxOutReads = 128;       // what rxe reports as max_qp_rd_atom
inline constexpr uint32_t kMaxInlineSize = 256;     // urnic's max_inline_data_size
inline constexpr uint32_t kCycleBuffer = 4096;      // sysconf(_SC_PAGESIZE) on x86-64 Linux
inline constexpr uint32_t kCacheLine = 64;
inline constexpr uint32_t kLatMeasureTail = 2;  // LAT_MEASURE_TAIL: largest samples dropped
inline constexpr double kDefaultDuration = 5;   // DEF_DURATION: --run_infinitely's interval

// -q's bound: the engine looks only at QPs with work (dataplane/sched.h), so idle or waiting
// QPs cost it nothing per step; each QP still holds its queues (-t, -r) and its buffer.
inline constexpr uint32_t kMaxPerfQps = 65536;
// --connect-storm: one QP each, within an adapter's 65 536 QPNs (0, 1 and the exchange's taken).
inline constexpr uint32_t kMaxStormConnections = 65'000;
// --engines: Adapter::kMaxEngines (urnic/adapter.h).
inline constexpr uint32_t kMaxPerfEngines = 8;

struct Options {
  Test test;
  uint64_t size = 0;  // 0: the test's default
  bool all_sizes = false;
  uint64_t iters = 0;                // 0: the test's default
  double duration = 0;               // -D seconds; 0: iteration mode
  uint32_t qps = 1;                  // -q
  uint32_t engines = 1;              // --engines: each adapter over this many engines
  uint32_t tx_depth = 0;             // -t; 0: default
  uint32_t rx_depth = 0;             // -r; 0: default
  uint32_t cq_mod = 0;               // -Q; 0: default
  uint32_t post_list = 0;            // -l: requests per doorbell (0: urnic-perf's batching, below)
  uint32_t inline_size = 0;          // -I: WRITEs and SENDs of at most this many bytes go inline
  uint32_t out_reads = 0;            // -o: READs / atomics outstanding per QP (0: kMaxOutReads)
  uint32_t qp_timeout = kQpTimeout;  // -u: the local ACK timeout exponent (IBTA 9.7.6.1.3)
  int tos = -1;        // -T: the IPv4 TOS / IPv6 traffic class byte (its DSCP; ECN is the CC's)
  uint32_t mtu = 0;    // -m; 0: the port's active MTU
  bool gbits = false;  // --report_gbits
  // -b: both sides run the requester at once (perftest's duplex; bandwidth tests). Symmetric:
  // both sides must say it (urnic-perf peers check, a perftest peer cannot be asked).
  bool bidirectional = false;
  bool report_both = false;  // --report-both: with -b, the local and remote rows as well
  // -e: wait for completions with CQ notifications (Cq::arm and the notification callback)
  // instead of polling; the waiting thread sleeps. Not with -D, --rate or --run_infinitely.
  bool events = false;
  // --run_infinitely: a bandwidth row every -D seconds (default 5) until SIGINT / SIGTERM.
  bool run_infinitely = false;
  bool cpu_util = false;  // --cpu_util: perftest's CPU_Util[%] column (duration mode)
  uint16_t tcp_port = kDefaultTcpPort;
  // -R: the exchange and the test's QPs go through rdma_cm (the IB CM) on tcp_port, as
  // perftest's -R does (cm_link.h), instead of a TCP connection and hand-set QP attributes.
  bool rdma_cm = false;
  // -c UD: datagram QPs (send_bw and send_lat only, as in perftest), messages of at most the
  // path MTU, every receive with room for the 40-byte GRH (urnic/datagram.h).
  bool ud = false;
  int gid_index = 1;   // -x: index in the adapter's GID table (1 = IPv4-mapped)
  std::string server;  // client mode when set
  // DPDK side.
  std::vector<std::string> vdevs;  // --vdev
  std::string pci;                 // --port=<PCI address>
  std::string lcores;              // --lcores (EAL -l)
  // --daemon=SOCKET: the loopback runs through urnicd's adapters urnic0 and urnic1 (attach mode)
  std::string daemon;
  // --memory=auto|huge|nohuge (RuntimeConfig::Memory): auto takes hugepages when a hugetlbfs
  // mount has enough free; huge insists (the run fails without them).
  RuntimeConfig::Memory memory = RuntimeConfig::Memory::kAuto;
  std::string ip, mac, ipv6;        // --ip, --mac, --ipv6 (ADDR or ADDR/LEN)
  std::vector<std::string> routes;  // --route, each "DEST/LEN via GW" (urnic/route.h)
  uint32_t idle_yield = 0;          // --idle-yield: sched_yield after N idle polls (shared cores)
  bool sweep = false;               // --sweep: loopback write/read/send/atomic sweep
  bool progress = true;             // --no-progress turns the once-a-second line off
  bool verbose = false;
  // Against a remote peer: how long any wait for the peer may last (accepting the client, each
  // step of the TCP exchange, the final synchronisation, a run without progress); 0: no limit.
  double timeout = 60;
  // Client: how long to keep retrying a refused TCP connection (a server still starting);
  // 0 (as perftest): report the refusal at once.
  double connect_retry = 0;
  // --rate: open-loop load (openloop.h) at this many requests per second over all QPs, or (with
  // rate_gbps) this many Gb/s of payload; 0: perftest's closed loop. --arrival, --json.
  double rate = 0;
  bool rate_gbps = false;
  Arrival arrival = Arrival::kConstant;
  // --mix: the open loop's operations and sizes (OpenLoopConfig::mix).
  std::vector<MixEntry> mix;
  std::string json;
  // --report=FILE (.md or .html): the one-page report of the run with its plots (report.h).
  std::string report;
  // --connect-storm=N (storm.h): the client opens N RC connections through the IB CM (rdma_cm's
  // port space, -p), holds them, then tears them down; the server accepts N requests.
  uint32_t storm = 0;
  uint32_t storm_rate = 0;     // client: connections offered per second (0: as fast as answered)
  uint32_t storm_window = 16;  // client without --storm-rate: requests outstanding at most
  uint32_t storm_limit = 0;    // server: connections held at most, the rest rejected (0: no limit)
  // --inject / --inject-rx: the adapter's fault injector on the frames this side sends (towards
  // the peer) and receives (AdapterConfig::tx_faults / rx_faults; loopback: the client's).
  FaultConfig inject_tx, inject_rx;
  // --break-rule=LIST (testing builds): AdapterConfig::broken_rules, to show that urnic-conform
  // catches a responder that breaks a rule.
  BrokenRules broken_rules;
  // --retransmit=adaptive (default) or gbn: AdapterConfig::adaptive_retransmit.
  bool adaptive_retransmit = true;
  // --sr=auto|on|off: selective repeat (QpAttributes::selective_repeat) on every QP. auto: on
  // when the peer is urnic-perf offering it too (an 's' in the urnic tail of perftest's version
  // exchange, which perftest ignores), else go-back-N; on: refuse a peer that does not offer it;
  // off (the default): go-back-N, and offer nothing. In loopback both ends are urnic. Not yet
  // the default: 64 QPs of 64 KiB send_bw at 1 % loss through urnic-hop still run far slower
  // with it than with go-back-N (issue 41).
  enum class SrMode : uint8_t { kAuto, kOn, kOff };
  SrMode sr = SrMode::kOff;
  // --cc, --dcqcn, --dscp: AdapterConfig::congestion (on with ConnectX's parameters; DSCP 0).
  bool cc_enabled = true;
  bool dcqcn_slow = false;
  int dscp = 0;
  CongestionConfig congestion() const {
    CongestionConfig c = dcqcn_slow ? congestion_slow_fabric() : CongestionConfig{};
    c.enabled = cc_enabled;
    c.dscp = dscp;
    return c;
  }

  bool loopback() const { return server.empty() && vdevs.empty() && pci.empty(); }
  Role role() const { return server.empty() ? Role::kServer : Role::kClient; }
  uint64_t default_size() const;
  uint64_t effective_iters() const;
  uint32_t effective_tx_depth() const;
  uint32_t effective_rx_depth() const;
  // The sizes a run over a path of `mtu` bytes sends: sizes(), UD's at most the MTU (perftest
  // lowers -s to it and ends -a there).
  std::vector<uint64_t> sizes_for(uint32_t mtu) const;
  std::vector<uint64_t> sizes() const;
};

// Exit codes, so that a script can tell a failed run from a peer that went away (--help lists
// them).
enum ExitCode : int {
  kExitOk = 0,
  kExitRunFailed = 1,      // a completion error, a failed data check, a bring-up error
  kExitUsage = 2,          // bad options
  kExitNoPeer = 3,         // no TCP connection: refused, or no client within --timeout
  kExitPeerSilent = 4,     // the peer stopped answering during the TCP exchange (--timeout)
  kExitPeerGone = 5,       // the peer closed its TCP connection (it exited or was killed)
  kExitConnectFailed = 6,  // the QPs could not be connected (no ARP / ND answer, bad record)
  kExitSyncTimeout = 7,    // the end-of-test synchronisation did not finish within --timeout
  kExitStalled = 8,        // the run made no progress for --timeout seconds
  kExitStormRefused = 9,   // --connect-storm: the peer refused or left unanswered some requests
};

// Parses argv like perftest does; returns false (after printing why) on a usage error.
// `exit_ok` is set when the caller should exit 0 (--help).
bool parse_options(int argc, char** argv, Options* o, bool* exit_ok);
void print_usage(const char* prog);

// perftest's pingpong_dest as carried by the 108-byte KEY_PRINT_FMT_GID record
// (src/perftest_communication.c): LID, outstanding reads, QPN, PSN, R_Key, VA, GID, SRQN.
struct Dest {
  uint32_t lid = 0;
  uint32_t out_reads = 1;
  uint32_t qpn = 0;
  uint32_t psn = 0;
  uint32_t rkey = 0;
  uint64_t vaddr = 0;
  std::array<uint8_t, 16> gid{};
  uint32_t srqn = 0;
};
inline constexpr size_t kRecordSize = 108;  // KEY_MSG_SIZE_GID, NUL included
std::array<char, kRecordSize> format_record(const Dest& d);
bool parse_record(const char* rec, size_t n, Dest* d);

// struct bw_report_data as xchg_bw_reports() sends it to a 6.06 peer: five 8-byte big-endian
// fields (size, iterations, peak, average, message rate).
struct BwReport {
  uint64_t size = 0;
  uint64_t iters = 0;
  double bw_peak = 0;
  double bw_avg = 0;
  double msg_rate = 0;  // Mpps
};

// Deterministic data: byte `off` of the stream named `seed`. Senders fill their buffers with a
// stream; an urnic-perf receiver knows the sender's seed (derived from its PSN) and checks.
void fill_pattern(uint8_t* p, uint64_t n, uint64_t seed, uint64_t off0) noexcept;
// Returns the index of the first byte that differs, or n when all match.
uint64_t check_pattern(const uint8_t* p, uint64_t n, uint64_t seed, uint64_t off0) noexcept;
// Seeds: a QP's region contents (what a READ returns), its bulk send data, and its last message
// of a given size (distinct from every earlier message, so that the last one is what is checked).
uint64_t region_seed(uint32_t psn) noexcept;
uint64_t bulk_seed(uint32_t psn) noexcept;
uint64_t last_seed(uint32_t psn, uint64_t size) noexcept;

// perftest's INC(size, cache_line): the stride of the cycling addresses of small messages.
constexpr uint64_t round_up(uint64_t v, uint64_t a) noexcept { return (v + a - 1) / a * a; }

// perftest cycles the local and remote addresses of consecutive messages through the first
// cycle_buffer bytes of a region when the message is at most half of it (increase_rem_addr()).
struct Cycler {
  uint64_t stride = 0;  // 0: every message at offset 0
  uint64_t slots = 1;
  uint64_t off = 0;
  uint64_t count = 0;
  Cycler() = default;
  Cycler(uint64_t size, uint32_t cycle, uint32_t cache_line) {
    if (size <= cycle / 2) {
      stride = round_up(size == 0 ? 1 : size, cache_line);
      slots = cycle / stride;
    }
  }
  // Offset of the next message, then advance.
  uint64_t next() noexcept {
    const uint64_t o = off;
    ++count;
    off = stride == 0 || count % slots == 0 ? 0 : off + stride;
    return o;
  }
  uint64_t offset_of(uint64_t index) const noexcept { return stride * (index % slots); }
};

}  // namespace urnic::perf

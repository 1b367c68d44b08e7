// perftest's console output (ctx_print_test_info, ctx_print_pingpong_data, print_report_bw,
// print_report_lat in perftest 4.5), reproduced byte for byte where the formats are perftest's,
// and the statistics behind the rows.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "bench/perf/perf.h"

namespace urnic::perf {

struct TestInfo {
  Test test;
  Role role = Role::kClient;
  std::string device = "urnic0";
  std::string exchange = "Ethernet";  // "Data ex. method"; "loopback" in-process
  uint32_t qps = 1;
  uint32_t mtu = 1024;
  uint32_t tx_depth = 0;
  uint32_t rx_depth = 0;
  uint32_t cq_mod = 0;
  uint32_t out_reads = 1;
  int gid_index = 1;
  bool duration = false;
  bool rdma_cm = false;  // -R
  bool ud = false;       // -c UD
};

void print_waiting();
void print_result_line();
void print_test_info(const TestInfo& t);
// " local address: LID 0000 QPN 0x0011 PSN 0x123456 ..." and the GID line.
void print_dest(const char* side, Test test, const Dest& d);
// `cpu_util`: --cpu_util's column (RESULT_EXT_CPU_UTIL / REPORT_EXT_CPU_UTIL); a row's
// `cpu` below 0 prints none.
void print_bw_header(bool gbits, bool cpu_util = false);
void print_bw_row(const BwReport& r, double cpu = -1);
// -b: perftest's print_full_bw_report(my, rem): peaks, averages and message rates added, the size
// and iteration count ours.
BwReport bw_sum(const BwReport& mine, const BwReport& theirs);
// --report-both: the " Local results:" and " Remote results:" tables after the summed row.
void print_report_both(const BwReport& mine, const BwReport& theirs, bool gbits, double cpu);
void print_lat_header(bool duration, bool cpu_util = false);

// Bandwidth figures from a run: `iters_col` goes in the #iterations column; MB/s are 2^20 bytes
// per second, Gb/s 10^9 bits per second (perftest's format_factor). The peak is the best rate
// over any window of 5% of the run's completion events.
BwReport bw_report(uint64_t size, uint64_t iters_col, uint64_t messages, uint64_t tsc_start,
                   uint64_t tsc_end, const std::vector<std::pair<uint64_t, uint64_t>>& events,
                   bool gbits);

struct LatStats {
  double min = 0, max = 0, typical = 0, avg = 0, stdev = 0, p99 = 0, p999 = 0;
  uint64_t samples = 0;
};
// perftest's print_report_lat(): deltas between consecutive posts, sorted, the largest
// kLatMeasureTail dropped; `rtt_factor` 2 for SEND/WRITE (half the round trip), 1 for READ and
// ATOMIC.
LatStats lat_stats(const std::vector<uint64_t>& tposted, double rtt_factor);
void print_lat_row(uint64_t size, uint64_t iters, const LatStats& s);
// Prints the row of a -D latency run; returns its average latency (us) and transactions per second.
std::pair<double, double> print_lat_duration_row(uint64_t size, uint64_t iters, uint64_t tsc_start,
                                                 uint64_t tsc_end, double rtt_factor,
                                                 double cpu = -1);

// The TSC's rate: EAL's, or (attach mode, no EAL in the process) measured once against the
// steady clock over 20 ms.
uint64_t tsc_hz() noexcept;
double tsc_to_s(uint64_t cycles);

}  // namespace urnic::perf

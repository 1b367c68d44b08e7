#include "bench/perf/output.h"

#include <rte_cycles.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <iterator>

namespace urnic::perf {
namespace {

// perftest_parameters.h formats.
constexpr const char* kResultLine =
    "---------------------------------------------------------------------------------------\n";
constexpr const char* kResultFmt =
    " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]";
constexpr const char* kResultFmtG =
    " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]";
constexpr const char* kResultFmtLat =
    " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    "
    "t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] ";
constexpr const char* kResultFmtLatDur =
    " #bytes        #iterations       t_avg[usec]    tps average";
// RESULT_EXT / RESULT_EXT_CPU_UTIL end the header, REPORT_EXT / REPORT_EXT_CPU_UTIL a row.
constexpr const char* kResultExt = "\n";
constexpr const char* kResultExtCpu = "    CPU_Util[%]\n";

void end_row(double cpu) {
  if (cpu >= 0)
    std::printf("\t    %-3.2f\n", cpu);
  else
    std::fputs("\n", stdout);
}

const char* verb_str(Verb v) {
  constexpr const char* kNames[] = {"Send", "RDMA_Write", "RDMA_Read", "Atomic"};  // Verb order
  const auto i = static_cast<size_t>(v);
  return i < std::size(kNames) ? kNames[i] : "?";
}

}  // namespace

uint64_t tsc_hz() noexcept {
  static const uint64_t hz = [] {
    if (const uint64_t eal = rte_get_tsc_hz(); eal != 0) return eal;
    const auto t0 = std::chrono::steady_clock::now();
    const uint64_t c0 = rte_rdtsc();
    while (std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(20)) {
    }
    const uint64_t c1 = rte_rdtsc();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return static_cast<uint64_t>(static_cast<double>(c1 - c0) / s);
  }();
  return hz;
}

double tsc_to_s(uint64_t cycles) {
  return static_cast<double>(cycles) / static_cast<double>(tsc_hz());
}

void print_waiting() {
  std::printf(
      "\n************************************\n"
      "* Waiting for client to connect... *\n"
      "************************************\n");
  std::fflush(stdout);
}

void print_result_line() { std::fputs(kResultLine, stdout); }

void print_test_info(const TestInfo& t) {
  std::fputs(kResultLine, stdout);
  std::printf("                    %s ", verb_str(t.test.verb));
  if (t.test.verb == Verb::kAtomic) std::printf("FETCH_AND_ADD ");
  std::printf("%sTest\n", t.test.kind == Kind::kBw ? "BW " : "Latency ");
  std::printf(" Dual-port       : OFF\t\tDevice         : %s\n", t.device.c_str());
  std::printf(" Number of qps   : %u\t\tTransport type : IB\n", t.qps);
  std::printf(" Connection type : %s\t\tUsing SRQ      : OFF\n", t.ud ? "UD" : "RC");
  std::printf(" PCIe relax order: OFF\n");
  std::printf(" ibv_wr* API     : OFF\n");
  if (t.role == Role::kClient) std::printf(" TX depth        : %u\n", t.tx_depth);
  if (t.test.verb == Verb::kSend && t.role == Role::kServer)
    std::printf(" RX depth        : %u\n", t.rx_depth);
  if (t.test.kind == Kind::kBw) std::printf(" CQ Moderation   : %u\n", t.cq_mod);
  std::printf(" Mtu             : %u[B]\n", t.mtu);
  std::printf(" Link type       : Ethernet\n");
  std::printf(" GID index       : %d\n", t.gid_index);
  if (t.test.verb != Verb::kRead && t.test.verb != Verb::kAtomic)
    std::printf(" Max inline data : 0[B]\n");
  else
    std::printf(" Outstand reads  : %u\n", t.out_reads);
  std::printf(" rdma_cm QPs\t : %s\n", t.rdma_cm ? "ON" : "OFF");
  std::printf(" Data ex. method : %s\n", t.exchange.c_str());
  std::fputs(kResultLine, stdout);
  std::fflush(stdout);
}

void print_dest(const char* side, Test test, const Dest& d) {
  // ctx_print_pingpong_data(): "%#04x" prints 0 as "0000", "%#06x" 0x11 as "0x0011".
  std::printf(" %s address: LID %#04x QPN %#06x PSN %#06x", side, d.lid, d.qpn, d.psn);
  if (test.verb == Verb::kRead) std::printf(" OUT %#04x", d.out_reads);
  if (test.verb == Verb::kRead || test.verb == Verb::kWrite)
    std::printf(" RKey %#08x VAddr %#016" PRIx64, d.rkey, d.vaddr);
  std::printf("\n GID: ");
  for (size_t i = 0; i < d.gid.size(); ++i) std::printf(i == 0 ? "%02d" : ":%02d", d.gid[i]);
  std::printf("\n");
}

void print_bw_header(bool gbits, bool cpu_util) {
  std::fputs(kResultLine, stdout);
  std::fputs(gbits ? kResultFmtG : kResultFmt, stdout);
  std::fputs(cpu_util ? kResultExtCpu : kResultExt, stdout);
  std::fflush(stdout);
}

void print_bw_row(const BwReport& r, double cpu) {
  std::printf(" %-7" PRIu64 "    %-10" PRIu64 "       %-7.2f            %-7.2f\t\t   %-7.6f",
              r.size, r.iters, r.bw_peak, r.bw_avg, r.msg_rate);
  end_row(cpu);
  std::fflush(stdout);
}

BwReport bw_sum(const BwReport& mine, const BwReport& theirs) {
  BwReport r = mine;
  r.bw_peak += theirs.bw_peak;
  r.bw_avg += theirs.bw_avg;
  r.msg_rate += theirs.msg_rate;
  return r;
}

void print_report_both(const BwReport& mine, const BwReport& theirs, bool gbits, double cpu) {
  for (auto [title, r] : {std::pair{"Local", &mine}, {"Remote", &theirs}}) {
    std::fputs(kResultLine, stdout);
    std::printf("\n %s results: \n", title);
    std::fputs(kResultLine, stdout);
    std::fputs(gbits ? kResultFmtG : kResultFmt, stdout);
    std::fputs(cpu >= 0 ? kResultExtCpu : kResultExt, stdout);
    print_bw_row(*r, cpu);
  }
}

void print_lat_header(bool duration, bool cpu_util) {
  std::fputs(kResultLine, stdout);
  std::fputs(duration ? kResultFmtLatDur : kResultFmtLat, stdout);
  std::fputs(duration && cpu_util ? kResultExtCpu : kResultExt, stdout);
  std::fflush(stdout);
}

BwReport bw_report(uint64_t size, uint64_t iters_col, uint64_t messages, uint64_t tsc_start,
                   uint64_t tsc_end, const std::vector<std::pair<uint64_t, uint64_t>>& events,
                   bool gbits) {
  BwReport r;
  r.size = size;
  r.iters = iters_col;
  const double unit = gbits ? 125e6 : 1048576.0;
  const double secs = tsc_to_s(tsc_end > tsc_start ? tsc_end - tsc_start : 1);
  r.bw_avg = static_cast<double>(messages) * static_cast<double>(size) / secs / unit;
  r.msg_rate = static_cast<double>(messages) / secs / 1e6;
  // Windows span at least 5% of the run: from the latest event (or the start) that far back.
  const uint64_t min_window = (tsc_end - tsc_start) / 20;
  size_t j = 0;  // events[j - 1] opens the window; j == 0: the start of the run
  for (size_t i = 0; i < events.size() && min_window != 0; ++i) {
    while (j < i && events[i].first - events[j].first >= min_window) ++j;
    const uint64_t t0 = j == 0 ? tsc_start : events[j - 1].first;
    const uint64_t m0 = j == 0 ? 0 : events[j - 1].second;
    if (events[i].first - t0 < min_window) continue;
    const double bw = static_cast<double>(events[i].second - m0) * static_cast<double>(size) /
                      tsc_to_s(events[i].first - t0) / unit;
    r.bw_peak = std::max(r.bw_peak, bw);
  }
  if (r.bw_peak < r.bw_avg) r.bw_peak = r.bw_avg;
  return r;
}

LatStats lat_stats(const std::vector<uint64_t>& tposted, double rtt_factor) {
  LatStats s;
  if (tposted.size() < 2) return s;
  std::vector<uint64_t> d(tposted.size() - 1);
  for (size_t i = 0; i + 1 < tposted.size(); ++i) d[i] = tposted[i + 1] - tposted[i];
  std::sort(d.begin(), d.end());
  size_t cnt = d.size() > kLatMeasureTail ? d.size() - kLatMeasureTail : d.size();
  const double us = 1e6 / static_cast<double>(tsc_hz()) / rtt_factor;
  auto at = [&](size_t i) { return static_cast<double>(d[std::min(i, d.size() - 1)]) * us; };
  s.samples = cnt;
  s.min = at(0);
  s.max = at(cnt);
  // get_median(): the mean of the two middle samples when (n - 1) is odd.
  s.typical = (cnt - 1) % 2 != 0 ? (at(cnt / 2) + at(cnt / 2 - 1)) / 2 : at(cnt / 2);
  double sum = 0;
  for (size_t i = 0; i < cnt; ++i) sum += at(i);
  s.avg = sum / static_cast<double>(cnt);
  double var = 0;
  for (size_t i = 0; i < cnt; ++i) var += (at(i) - s.avg) * (at(i) - s.avg);
  s.stdev = std::sqrt(var / static_cast<double>(cnt));
  s.p99 = at(static_cast<size_t>(std::ceil(static_cast<double>(cnt) * 0.99)));
  s.p999 = at(static_cast<size_t>(std::ceil(static_cast<double>(cnt) * 0.999)));
  return s;
}

void print_lat_row(uint64_t size, uint64_t iters, const LatStats& s) {
  std::printf(" %-7" PRIu64 " %" PRIu64
              "          %-7.2f        %-7.2f      %-7.2f  \t       %-7.2f     \t%-7.2f\t\t%-7.2f "
              "\t\t%-7.2f\n",
              size, iters, s.min, s.max, s.typical, s.avg, s.stdev, s.p99, s.p999);
  std::fflush(stdout);
}

std::pair<double, double> print_lat_duration_row(uint64_t size, uint64_t iters, uint64_t tsc_start,
                                                 uint64_t tsc_end, double rtt_factor, double cpu) {
  const double secs = tsc_to_s(tsc_end > tsc_start ? tsc_end - tsc_start : 1);
  const double avg = iters == 0 ? 0 : secs * 1e6 / static_cast<double>(iters) / rtt_factor;
  std::printf(" %-7" PRIu64 "       %" PRIu64 "           %-7.2f        %-7.2f", size, iters, avg,
              static_cast<double>(iters) / secs);
  end_row(cpu);
  std::fflush(stdout);
  return {avg, static_cast<double>(iters) / secs};
}

}  // namespace urnic::perf

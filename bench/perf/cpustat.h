// --cpu_util: perftest's CPU utilisation column (get_cpu_stats() and calc_cpu_util() in perftest
// 4.5). It reads the aggregate "cpu" line of /proc/stat at both ends of the measured interval and
// reports user / (user + idle) jiffies in percent: all CPUs together, so 0..100 whatever the core
// count, and system, nice and iowait time count neither way (perftest's definition, kept so
// that the numbers compare).
#pragma once

#include <cstdint>

namespace urnic::perf {

struct CpuStat {
  uint64_t user = 0;
  uint64_t idle = 0;
  bool ok = false;  // /proc/stat was readable
};

// Reads /proc/stat: a system call, so never from the timed loop (once at each end of a run).
CpuStat read_cpu_stat();
// Percent of user time between two samples, 0..100; 0 when nothing elapsed or a read failed.
double cpu_util(const CpuStat& from, const CpuStat& to);

}  // namespace urnic::perf

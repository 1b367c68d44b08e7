#include "bench/perf/cpustat.h"

#include <cstdio>

namespace urnic::perf {

CpuStat read_cpu_stat() {
  CpuStat s;
  std::FILE* f = std::fopen("/proc/stat", "r");
  if (f == nullptr) return s;
  unsigned long long user = 0, nice = 0, system = 0, idle = 0;
  // "cpu  user nice system idle iowait irq softirq ...", in USER_HZ ticks (proc(5)).
  if (std::fscanf(f, "cpu %llu %llu %llu %llu", &user, &nice, &system, &idle) == 4) {
    s.user = user;
    s.idle = idle;
    s.ok = true;
  }
  std::fclose(f);
  return s;
}

double cpu_util(const CpuStat& from, const CpuStat& to) {
  if (!from.ok || !to.ok || to.user < from.user || to.idle < from.idle) return 0;
  const double busy = static_cast<double>(to.user - from.user);
  const double all = busy + static_cast<double>(to.idle - from.idle);
  return all > 0 ? busy / all * 100 : 0;
}

}  // namespace urnic::perf

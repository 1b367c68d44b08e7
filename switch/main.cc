// urnic-switch: the software switch (soft_switch.h) as its own DPDK process, between interfaces
// given as DPDK virtual devices (net_af_packet on veths, net_tap), so that two urnic processes,
// or urnic and the rxe-peer guest, talk through a congested, ECN-marking, impaired fabric:
//
//   urnic-switch --port=net_af_packet0,iface=s0 --port=net_af_packet1,iface=s1 [options]
//
//   --rate=MBPS      line rate of every output port (0: as fast as the port takes frames)
//   --buffer=BYTES   output buffer per port (tail drop beyond), default 1048576
//   --kmin=BYTES --kmax=BYTES --pmax=PERCENT
//                    RED/ECN: mark (or, Not-ECT, drop) with probability rising from 0 at kmin
//                    to pmax at kmax, always above; defaults 5000 / 200000 / 1 (DCQCN paper)
//   --no-ecn         drop where it would mark (a RED switch without ECN)
//   --delay=US       one-way delay through the switch
//   --loss=PPM --dup=PPM --reorder=PPM --corrupt=PPM --seed=N
//                    impairments of every frame entering the switch (parts per million)
//   --stats=SEC      print the counters every SEC seconds (and always at the end)
//   --lcore=N        the CPU to run on (default 0)
//
// Prints "ready" once every port is up; runs until SIGINT / SIGTERM, then prints one line per
// port: frames in/out, CE marks, RED and tail drops, the output queue's p50/p99/max depth. Each
// failure to start says what failed and exits 1; a bad option exits 2.
#include <sched.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <rte_cycles.h>

#include "switch/cli.h"
#include "switch/soft_switch.h"
#include "urnic/runtime.h"

namespace {

std::atomic<bool> g_stop{false};
void on_signal(int) { g_stop.store(true); }

using urnic::sw::cli::opt;

void print_stats(const urnic::sw::SoftSwitch& s, const std::vector<std::string>& names) {
  for (uint32_t p = 0; p < s.ports(); ++p) {
    const auto& c = s.counters(p);
    std::printf(
        "port %u (%s): in %llu frames %llu B, out %llu frames %llu B, CE marked %llu, "
        "RED drops %llu, tail drops %llu, tx errors %llu, queue p50 %u B p99 %u B max %u B\n",
        p, names[p].c_str(), static_cast<unsigned long long>(c.rx_frames),
        static_cast<unsigned long long>(c.rx_bytes), static_cast<unsigned long long>(c.tx_frames),
        static_cast<unsigned long long>(c.tx_bytes), static_cast<unsigned long long>(c.ce_marked),
        static_cast<unsigned long long>(c.red_drops), static_cast<unsigned long long>(c.tail_drops),
        static_cast<unsigned long long>(c.tx_errors), s.depth(p).quantile(0.5),
        s.depth(p).quantile(0.99), c.max_depth);
  }
  if (const auto* f = s.impair_counters()) {
    std::printf(
        "impairments: seen %llu, dropped %llu, duplicated %llu, reordered %llu, "
        "corrupted %llu\n",
        static_cast<unsigned long long>(f->seen), static_cast<unsigned long long>(f->dropped),
        static_cast<unsigned long long>(f->duplicated),
        static_cast<unsigned long long>(f->reordered),
        static_cast<unsigned long long>(f->corrupted));
  }
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  urnic::sw::SwitchConfig cfg;
  std::vector<std::string> ports;
  uint32_t pmax_pct = 1, stats_s = 0, lcore = 0;
  std::string v;
  const urnic::sw::cli::Numeric numeric[] = {
      {"--rate", &cfg.rate_mbps, 10'000'000},
      {"--buffer", &cfg.buffer_bytes, 1u << 30},
      {"--kmin", &cfg.kmin_bytes, 1u << 30},
      {"--kmax", &cfg.kmax_bytes, 1u << 30},
      {"--pmax", &pmax_pct, 100},
      {"--delay", &cfg.delay_us, 10'000'000},
      {"--loss", &cfg.impair.drop_ppm, 1'000'000},
      {"--dup", &cfg.impair.duplicate_ppm, 1'000'000},
      {"--reorder", &cfg.impair.reorder_ppm, 1'000'000},
      {"--corrupt", &cfg.impair.corrupt_ppm, 1'000'000},
      {"--stats", &stats_s, 3600},
      {"--lcore", &lcore, 1023},
  };
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    bool known = false;
    if (opt(a, "--port", &v)) {
      ports.push_back(v);
      known = true;
    } else if (std::strcmp(a, "--no-ecn") == 0) {
      cfg.ecn = false;
      known = true;
    } else if (opt(a, "--seed", &v)) {
      cfg.impair.seed = cfg.seed = urnic::sw::cli::number("urnic-switch", v, "--seed", UINT64_MAX);
      known = true;
    }
    if (!known) known = urnic::sw::cli::numeric("urnic-switch", a, numeric);
    if (!known) {
      std::fprintf(stderr, "urnic-switch: unknown option %s (see switch/main.cc)\n", a);
      return 2;
    }
  }
  cfg.pmax = pmax_pct / 100.0;
  if (ports.size() < 2 || cfg.kmin_bytes > cfg.kmax_bytes) {
    std::fprintf(stderr, "urnic-switch: needs two --port=DEVARGS or more, and kmin <= kmax\n");
    return 2;
  }
  urnic::RuntimeConfig rc;
  rc.program = "urnic-switch";
  rc.memory = urnic::RuntimeConfig::Memory::kNoHuge;
  rc.memory_mb = 512;
  rc.lcores = std::to_string(lcore);
  if (urnic::runtime_init(rc) != urnic::Status::kSuccess) {
    std::fprintf(stderr, "urnic-switch: EAL: %s\n", urnic::last_error());
    return 1;
  }
  urnic::sw::SoftSwitch sw(cfg);
  for (const std::string& p : ports) {
    uint16_t id = 0;
    if (urnic::open_vdev_port(p, &id) != urnic::Status::kSuccess) {
      std::fprintf(stderr, "urnic-switch: %s: %s\n", p.c_str(), urnic::last_error());
      return 1;
    }
    if (sw.add_port(id) < 0) {
      std::fprintf(stderr, "urnic-switch: %s: the port could not be configured and started\n",
                   p.c_str());
      return 1;
    }
  }
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  std::printf("ready: %zu ports, rate %u Mb/s, buffer %u B, RED %u..%u B p %.2f%s\n", ports.size(),
              cfg.rate_mbps, cfg.buffer_bytes, cfg.kmin_bytes, cfg.kmax_bytes, cfg.pmax,
              cfg.ecn ? " ECN" : " (drop, no ECN)");
  std::fflush(stdout);
  const uint64_t hz = rte_get_tsc_hz();
  uint64_t next_stats = stats_s != 0 ? rte_get_tsc_cycles() + stats_s * hz : UINT64_MAX;
  uint32_t idle = 0;
  while (!g_stop.load(std::memory_order_relaxed)) {
    const uint64_t now = rte_get_tsc_cycles();
    if (sw.step(now)) {
      idle = 0;
    } else if (++idle >= 256) {
      // A test tool on shared cores: let the endpoints run when nothing moves.
      sched_yield();
      idle = 0;
    }
    if (now >= next_stats) {
      print_stats(sw, ports);
      next_stats += stats_s * hz;
    }
  }
  print_stats(sw, ports);
  return 0;
}

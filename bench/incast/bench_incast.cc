// bench_incast: N senders -> 1 receiver through the software switch's bottleneck (switch/incast.h),
// with DCQCN on and off in one run, printing a table per configuration and, with --csv=FILE, the
// per-QP rate and goodput trace (plot-ready: time, then one rate and one goodput column per QP).
//
//   bench_incast [--senders=8] [--rate=1000] [--buffer=1048576] [--seconds=3] [--warmup=1]
//                [--profile=slow|connectx] [--kmin=5000] [--kmax=200000] [--pmax=100 (percent)]
//                [--mtu=4096] [DCQCN: --g --alpha-period --time-reset --byte-reset
//                --reduce-period --cnp-interval --ai --hai --threshold, as urnic/congestion.h]
//                [--message=65536] [--outstanding=4] [--mode=both|on|off] [--csv=PREFIX]
//
// Runs on one thread (engines and switch driven in turn), so the figures do not depend on the
// core count; EAL comes up without hugepages.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "switch/cli.h"
#include "switch/incast.h"
#include "urnic/runtime.h"

namespace {

using urnic::sw::cli::opt;

void print(const char* label, const urnic::sw::IncastConfig& c, const urnic::sw::IncastResult& r) {
  if (!r.error.empty()) {
    std::printf("%-6s FAILED: %s\n", label, r.error.c_str());
    return;
  }
  for (size_t w = 0; w < r.windows.size(); ++w) {
    const auto& x = r.windows[w];
    double lo = 1e18, hi = 0;
    for (double g : x.goodput_mbps) {
      lo = g < lo ? g : lo;
      hi = g > hi ? g : hi;
    }
    std::printf(
        "%-6s window %zu: aggregate %7.1f Mb/s (%5.1f %% of %u), Jain %.3f, per QP %.1f .. %.1f, "
        "drops %llu, CE marks %llu\n",
        label, w + 1, x.aggregate_mbps, 100 * x.aggregate_mbps / c.fabric.rate_mbps,
        c.fabric.rate_mbps, x.jain, lo, hi, static_cast<unsigned long long>(x.drops),
        static_cast<unsigned long long>(x.marks));
  }
  std::printf(
      "%-6s queue p50 %u B, p99 %u B, max %u B (Kmax %u); drops %llu in the run; CNPs sent "
      "%llu, received %llu; retransmitted packets %llu; data %s\n",
      label, r.depth_p50, r.depth_p99, r.depth_max, c.fabric.kmax_bytes,
      static_cast<unsigned long long>(r.drops_total), static_cast<unsigned long long>(r.cnps_sent),
      static_cast<unsigned long long>(r.cnps_received),
      static_cast<unsigned long long>(r.retransmits), r.data_ok ? "intact" : "CORRUPT");
}

void write_csv(const std::string& path, const urnic::sw::IncastResult& r) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) {
    std::fprintf(stderr, "bench_incast: cannot write %s\n", path.c_str());
    return;
  }
  const size_t n = r.trace.empty() ? 0 : r.trace[0].rate_mbps.size();
  std::fprintf(f, "t_s");
  for (size_t i = 0; i < n; ++i) std::fprintf(f, ",rate_qp%zu_mbps", i);
  for (size_t i = 0; i < n; ++i) std::fprintf(f, ",goodput_qp%zu_mbps", i);
  std::fprintf(f, "\n");
  for (const auto& s : r.trace) {
    std::fprintf(f, "%.4f", s.t);
    for (double v : s.rate_mbps) std::fprintf(f, ",%.1f", v);
    for (double v : s.goodput_mbps) std::fprintf(f, ",%.1f", v);
    std::fprintf(f, "\n");
  }
  std::fclose(f);
}

}  // namespace

int main(int argc, char** argv) {
  urnic::sw::IncastConfig c;
  std::string mode = "both", csv;
  uint32_t secs = 3, warmup = 1, pmax_pct = 100;
  std::string profile = "slow";
  auto& d = c.congestion.dcqcn;
  // Numeric options: name, where it goes, largest accepted value.
  const urnic::sw::cli::Numeric numeric[] = {
      {"--senders", &c.senders, 64},
      {"--rate", &c.fabric.rate_mbps, 100'000},
      {"--buffer", &c.fabric.buffer_bytes, 1u << 26},
      {"--kmin", &c.fabric.kmin_bytes, 1u << 26},
      {"--kmax", &c.fabric.kmax_bytes, 1u << 26},
      {"--pmax", &pmax_pct, 100},
      {"--seconds", &secs, 600},
      {"--warmup", &warmup, 600},
      {"--message", &c.message, 1u << 24},
      {"--outstanding", &c.outstanding, 256},
      {"--mtu", &c.mtu, 4096},
      {"--cnp-interval", &c.congestion.cnp_interval_us, 10'000'000},
      {"--alpha-period", &d.alpha_period_us, 10'000'000},
      {"--g", &d.g, 1024},
      {"--time-reset", &d.time_reset_us, 10'000'000},
      {"--byte-reset", &d.byte_reset, 1u << 31},
      {"--reduce-period", &d.reduce_period_us, 10'000'000},
      {"--ai", &d.ai_rate_mbps, 100'000},
      {"--hai", &d.hai_rate_mbps, 100'000},
      {"--threshold", &d.threshold, 65535},
  };
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    bool known = opt(a, "--mode", &mode) || opt(a, "--csv", &csv);
    if (opt(a, "--profile", &profile)) {
      if (profile != "slow" && profile != "connectx") {
        std::fprintf(stderr, "bench_incast: --profile is slow or connectx\n");
        return 2;
      }
      // Before the DCQCN options that follow it: they refine the profile.
      const bool on = c.congestion.enabled;
      c.congestion =
          profile == "slow" ? urnic::congestion_slow_fabric() : urnic::CongestionConfig{};
      c.congestion.enabled = on;
      known = true;
    }
    if (!known) known = urnic::sw::cli::numeric("bench_incast", a, numeric);
    if (!known) {
      std::fprintf(stderr, "bench_incast: unknown option %s (see the file comment)\n", a);
      return 2;
    }
  }
  if (c.senders == 0 || c.fabric.rate_mbps == 0 || c.message == 0 || c.outstanding == 0 ||
      (mode != "both" && mode != "on" && mode != "off")) {
    std::fprintf(stderr,
                 "bench_incast: senders, rate, message and outstanding must be > 0; "
                 "--mode is both, on or off\n");
    return 2;
  }
  c.fabric.pmax = pmax_pct / 100.0;
  c.windows = secs;
  c.warmup_s = warmup;
  c.window_s = 1.0;
  urnic::RuntimeConfig rc;
  rc.program = "bench_incast";
  rc.memory = urnic::RuntimeConfig::Memory::kNoHuge;
  rc.memory_mb = 1024;
  rc.lcores = "0";
  if (urnic::runtime_init(rc) != urnic::Status::kSuccess) {
    std::fprintf(stderr, "bench_incast: %s\n", urnic::last_error());
    return 1;
  }
  std::printf(
      "incast: %u senders -> 1 receiver, bottleneck %u Mb/s, buffer %u B, RED %u/%u B "
      "p %.2f, %u B WRITEs x %u outstanding, %u s after %.0f s warm-up\n",
      c.senders, c.fabric.rate_mbps, c.fabric.buffer_bytes, c.fabric.kmin_bytes,
      c.fabric.kmax_bytes, c.fabric.pmax, c.message, c.outstanding, c.windows, c.warmup_s);
  int rc_exit = 0;
  for (const bool on : {true, false}) {
    if ((on && mode == "off") || (!on && mode == "on")) continue;
    c.congestion.enabled = on;
    c.name = on ? "ion" : "ioff";
    const urnic::sw::IncastResult r = urnic::sw::run_incast(c);
    print(on ? "dcqcn" : "off", c, r);
    // A QP that ran out of retries is a result (without congestion control, the expected one);
    // failing to run at all is an error.
    if (!r.error.empty() && !r.transport_failed) rc_exit = 1;
    if (!csv.empty()) write_csv(csv + (on ? "_dcqcn.csv" : "_off.csv"), r);
  }
  return rc_exit;
}

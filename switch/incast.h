// Incast through the software switch (issue 15's congestion test): N sender adapters each RDMA
// WRITE as fast as their QP lets them to one receiver adapter, all through one SoftSwitch whose
// port towards the receiver is the bottleneck. Everything runs in this process over net_ring
// pairs, driven by the calling thread (engines not launched: run_once; the switch: step), so
// it works on any core count and is the same whether a test or a benchmark runs it.
//
// Objects are created and posted through the public API only (include/urnic/); the switch is
// the test equipment. Each sender writes its own pattern into its own window of the receiver's
// region, and the run checks the receiver's bytes at the end.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "switch/soft_switch.h"
#include "urnic/congestion.h"

namespace urnic::sw {

// DCQCN timing for a slow emulated fabric. ConnectX's defaults (urnic/congestion.h) assume a
// 25-100 Gb/s link, where a flow sees a CE-marked frame every few microseconds: alpha updates
// every 1 us with a gain of 5/1024, so at 1 Gb/s (a marked frame per flow every ~250 us) alpha
// decays to almost nothing between CNPs, cuts are tiny, and the queue sits at the buffer's size
// (measured: 53 % goodput, 1 MiB queue, 20 000 drops per second). This profile takes the
// paper's timers instead (alpha every 55 us with gain 1/256, one CNP and one cut per 50 us, a
// 10 MB byte counter) with a 1.5 ms increase timer (docs/design.md "Congestion control").
inline DcqcnConfig dcqcn_slow_fabric() {
  DcqcnConfig d;
  d.alpha_period_us = 55;
  d.g = 1020;
  d.reduce_period_us = 50;
  d.time_reset_us = 1500;
  d.byte_reset = 10'000'000;
  return d;
}

struct IncastConfig {
  uint32_t senders = 8;
  // The bottleneck: 1 Gb/s, 1 MiB buffer, RED from 5 KB to 200 KB (the paper's Kmin / Kmax)
  // with Pmax 100 % (a steep profile: at 50 % the queue's 99th percentile sat at Kmax).
  sw::SwitchConfig fabric;
  // Every adapter's: DCQCN on, dcqcn_slow_fabric() timing, CNPs at most every 50 us per QP.
  CongestionConfig congestion;
  uint32_t message = 64 * 1024;  // bytes per WRITE
  uint32_t outstanding = 4;      // WRITEs each sender keeps posted
  uint32_t mtu = 4096;
  double warmup_s = 1.0;  // before the first measured window (convergence)
  double window_s = 1.0;  // measured windows
  uint32_t windows = 2;
  double sample_s = 0.01;       // the per-QP rate trace
  std::string name = "incast";  // unique per process: names the ring pairs
  IncastConfig() {
    fabric.rate_mbps = 1000;
    fabric.pmax = 1.0;
    congestion.dcqcn = dcqcn_slow_fabric();
    congestion.cnp_interval_us = 50;
  }
};

struct IncastWindow {
  std::vector<double> goodput_mbps;  // per sender: completed WRITE bytes over the window
  double aggregate_mbps = 0;
  double jain = 0;     // Jain's fairness index of goodput_mbps
  uint64_t drops = 0;  // tail + RED drops at the bottleneck in the window
  uint64_t marks = 0;  // CE marks at the bottleneck in the window
};

struct IncastResult {
  std::string error;                                     // empty when the run itself worked
  std::vector<IncastWindow> windows;                     // the measured ones
  uint32_t depth_p50 = 0, depth_p99 = 0, depth_max = 0;  // bottleneck queue, measured windows
  uint64_t drops_total = 0, drops_measured = 0;          // whole run / measured windows
  uint64_t cnps_sent = 0, cnps_received = 0, retransmits = 0;
  bool data_ok = false;  // every sender's window at the receiver holds its pattern
  // The rate trace: every sample_s, each sender QP's DCQCN rate (Mb/s; its maximum when
  // unpaced) and the goodput it completed since the previous sample.
  struct Sample {
    double t;
    std::vector<double> rate_mbps, goodput_mbps;
  };
  std::vector<Sample> trace;
};

// Runs the incast. EAL must be up (urnic::runtime_init or the tests' eal_up).
IncastResult run_incast(const IncastConfig& cfg);

// Jain's fairness index (sum x)^2 / (n * sum x^2); 1 when every x is equal.
double jain_index(const std::vector<double>& x);

}  // namespace urnic::sw

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

struct IncastConfig {
  uint32_t senders = 8;
  // The bottleneck: 1 Gb/s, 1 MiB buffer, RED from 5 KB to 200 KB (the paper's Kmin / Kmax)
  // with Pmax 100 % (a steep profile: at 50 % the queue's 99th percentile sat at Kmax).
  sw::SwitchConfig fabric;
  // Every adapter's: congestion_slow_fabric() (urnic/congestion.h).
  CongestionConfig congestion = congestion_slow_fabric();
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
  std::string error;  // empty when the run itself worked
  // The error is a WRITE that completed with an error status (a QP ran out of retries): an
  // outcome of the run, not a failure to run it.
  bool transport_failed = false;
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

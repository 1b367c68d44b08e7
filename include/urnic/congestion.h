// Congestion control on RoCEv2 (rocev2.md §5): ECN marking of what an adapter sends, the
// notification point (a CE-marked frame makes the receiving QP send a CNP to its peer) and the
// reaction point (DCQCN: each QP paces itself to a rate that CNPs lower and timers raise again).
// Zhu et al., "Congestion Control for Large-Scale RDMA Deployments", SIGCOMM 2015, define the
// algorithm; the parameter names in the comments are ConnectX's (mlx5 cc_params, NVIDIA DCQCN
// documentation), and so are the defaults.
#pragma once

#include <cstdint>

namespace urnic {

// The reaction point's parameters (per adapter; a QP may carry its own, QpCcExtension).
struct DcqcnConfig {
  // Rates in Mb/s. max_rate 0: the port's link speed (what rte_eth_link_get reports; 100 Gb/s
  // when it reports none). A QP at max_rate is not paced at all.
  uint32_t max_rate_mbps = 0;   // rpg_max_rate
  uint32_t min_rate_mbps = 1;   // rpg_min_rate: no CNP takes a QP below this
  uint32_t ai_rate_mbps = 5;    // rpg_ai_rate: additive increase of the target rate
  uint32_t hai_rate_mbps = 50;  // rpg_hai_rate: hyper increase step
  // A rate increase happens every time_reset_us without a CNP (the timer) and every byte_reset
  // bytes sent (the byte counter); the first `threshold` increases of each kind are fast
  // recovery, and once both counters passed it the increase is hyper.
  uint32_t time_reset_us = 300;  // rpg_time_reset
  uint32_t byte_reset = 32767;   // rpg_byte_reset (0: no byte counter)
  uint32_t threshold = 1;        // rpg_threshold (the paper's F)
  // On a CNP: rate = rate * (1 - alpha / 2^gd), but never below rate * min_dec_fac / 100.
  uint32_t gd = 11;           // rpg_gd (alpha in 1/1024ths, so 11 halves the rate at alpha 1)
  uint32_t min_dec_fac = 50;  // rpg_min_dec_fac, percent
  // rate_to_set_on_first_cnp: the first CNP sets both rates to this instead of cutting (0: it
  // cuts from the current rate like any other).
  uint32_t first_cnp_rate_mbps = 0;
  // alpha, the congestion estimate (in 1/1024ths), starts at initial_alpha on the first CNP and
  // is then updated every alpha_period_us: alpha = g * alpha / 1024, plus (1024 - g) / 1024 when
  // a CNP arrived in the period (so the paper's gain is (1024 - g) / 1024, here about 1/205).
  uint32_t g = 1019;              // dce_tcp_g
  uint32_t alpha_period_us = 1;   // dce_tcp_rtt
  uint32_t initial_alpha = 1023;  // initial_alpha_value
  // CNPs arriving within this long of a rate decrease cause no further decrease.
  uint32_t reduce_period_us = 4;  // rate_reduce_monitor_period
  // On a decrease the target rate becomes the current rate (the paper's RT = RC) always with
  // clamp_target, else when the rate rose since the last cut by the byte counter, or by the
  // timer with clamp_target_after_time; otherwise the target stays and fast recovery heads back
  // towards it. The first cut always starts from the maximum as its target.
  bool clamp_target = false;            // clamp_tgt_rate
  bool clamp_target_after_time = true;  // clamp_tgt_rate_after_time_inc
};

struct CongestionConfig {
  // On (the default): RoCEv2 frames leave with ECT(0) in the IP ECN field, CE-marked frames are
  // answered with CNPs, and CNPs slow the QP down. Off: ECN field 0 (Not-ECT), CE marks are
  // counted but not answered, received CNPs are counted and ignored, as rxe does.
  bool enabled = true;
  // The DSCP of RoCEv2 data frames (0..63), or -1: the one in the QP's traffic class.
  int dscp = -1;
  // CNPs (notification point): their DSCP (0..63; ConnectX cnp_dscp), and the least time between
  // two CNPs a QP sends (ConnectX min_time_between_cnps, 4 us; the paper's 50 us). ConnectX
  // also puts CNPs on 802.1p priority 6; urnic sends untagged frames, so there is no PCP.
  uint8_t cnp_dscp = 48;
  uint32_t cnp_interval_us = 4;
  DcqcnConfig dcqcn;
};

// Congestion control timed for a slow emulated fabric. ConnectX's defaults (above) assume a
// 25-100 Gb/s link, where a flow sees a CE-marked frame every few microseconds: alpha updates
// every 1 us with a gain of 5/1024, so at 1 Gb/s (a marked frame per flow every ~250 us) alpha
// decays to almost nothing between CNPs, cuts are tiny, and the queue sits at the buffer's size
// (measured: 53 % goodput, 1 MiB queue, 20 000 drops per second). This profile takes the
// paper's timers instead (alpha every 55 us with gain 1/256, one CNP and one cut per 50 us, a
// 10 MB byte counter) with a 1.5 ms increase timer (docs/design.md "Congestion control"; the
// incast test and bench_incast run with it, urnic-perf --dcqcn=slow).
inline CongestionConfig congestion_slow_fabric() {
  CongestionConfig c;
  c.cnp_interval_us = 50;
  c.dcqcn.alpha_period_us = 55;
  c.dcqcn.g = 1020;
  c.dcqcn.reduce_period_us = 50;
  c.dcqcn.time_reset_us = 1500;
  c.dcqcn.byte_reset = 10'000'000;
  return c;
}

}  // namespace urnic

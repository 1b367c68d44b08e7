// DCQCN reaction point, one per QP (rocev2.md §5.1; Zhu et al., SIGCOMM 2015, §3.2 and Fig. 5;
// parameters and their defaults as ConnectX names them, urnic/congestion.h).
//
// State: the current rate RC (what the QP is paced to), the target rate RT, the congestion
// estimate alpha, and two increase counters (timer stages and byte stages since the last
// decrease). A QP at its maximum rate is "unlimited": the requester then skips pacing entirely,
// so the fast path pays one predictable branch. Times are TSC ticks (the engine's clock); the
// unit tests run it with 1 tick = 1 ns.
//
// The timers are evaluated lazily: whoever asks (the requester before it sends, a CNP when it
// arrives) first advances the state to `now`, applying every alpha update and rate increase
// that fell due since the last call. So an idle QP costs nothing, and no timer list is needed.
#pragma once

#include <cstdint>

#include "urnic/congestion.h"

namespace urnic::dp {

struct DcqcnCounters {
  uint64_t cnps_handled = 0;  // CNPs that reduced the rate (others fell in a monitor period)
  uint64_t increases = 0;     // rate increase events (timer or byte counter)
};

// The rate a QP runs at unpaced: the configured maximum, resolved by the adapter from the link
// speed when 0 (100 Gb/s if even that is unknown, e.g. a QP built by a protocol test).
constexpr uint32_t cc_max_rate_mbps(const CongestionConfig& cc) noexcept {
  return cc.dcqcn.max_rate_mbps != 0 ? cc.dcqcn.max_rate_mbps : 100'000;
}

class Dcqcn {
 public:
  // `max_rate_mbps` resolved already (config 0 -> the link speed); tsc_hz > 0.
  void init(const DcqcnConfig& cfg, uint32_t max_rate_mbps, uint64_t tsc_hz) noexcept;

  // A CNP for this QP arrived at `now`. Returns whether it cut the rate (false within the
  // monitor period of the last cut).
  bool on_cnp(uint64_t now) noexcept;
  // Advances the timers to `now` (alpha updates and timer-driven increases that fell due).
  void advance(uint64_t now) noexcept;
  // Whether a frame may leave at `now` (always, when unlimited).
  bool may_send(uint64_t now) const noexcept { return !limited_ || now >= next_tx_; }
  // A frame of `bytes` left at `now`: the pacer's next slot, and the byte counter.
  void on_sent(uint32_t bytes, uint64_t now) noexcept {
    if (!limited_) [[likely]]
      return;
    sent_slow(bytes, now);
  }

  bool limited() const noexcept { return limited_; }
  double rate_mbps() const noexcept { return rc_; }
  double target_mbps() const noexcept { return rt_; }
  double alpha() const noexcept { return alpha_; }  // 0 .. 1
  uint32_t time_stage() const noexcept { return t_stage_; }
  uint32_t byte_stage() const noexcept { return b_stage_; }
  uint64_t next_tx() const noexcept { return next_tx_; }
  const DcqcnCounters& counters() const noexcept { return counters_; }

 private:
  void sent_slow(uint32_t bytes, uint64_t now) noexcept;
  void increase() noexcept;
  void set_rate(double rc) noexcept;

  DcqcnConfig cfg_{};
  uint64_t tsc_hz_ = 1;
  double max_ = 0, min_ = 0;
  double rc_ = 0, rt_ = 0, alpha_ = 0;
  double g_ = 0;                                                    // alpha gain, 0 .. 1
  uint64_t alpha_period_ = 0, time_reset_ = 0, reduce_period_ = 0;  // TSC ticks
  uint64_t alpha_due_ = 0;                                          // next alpha update
  uint64_t inc_due_ = 0;      // next timer-driven increase (limited only)
  uint64_t last_reduce_ = 0;  // TSC of the last decrease (0: none yet)
  bool cnp_in_period_ = false;
  bool cnp_seen_ = false;  // any CNP ever (rate_to_set_on_first_cnp)
  bool limited_ = false;
  uint32_t t_stage_ = 0, b_stage_ = 0;
  uint64_t bytes_ = 0;              // sent since the last byte stage
  uint64_t next_tx_ = 0;            // pacer: earliest TSC of the next frame
  uint64_t tick_per_byte_q16_ = 0;  // pacer: TSC ticks per byte at rc_, 16 fraction bits
  uint64_t burst_ = 0;              // pacer: ticks of credit an idle QP may bank
  DcqcnCounters counters_;
};

}  // namespace urnic::dp

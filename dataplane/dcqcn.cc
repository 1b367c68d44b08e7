// DCQCN reaction point (dcqcn.h). Rates and alpha are doubles: they change only on CNPs and
// increase events (at most a few per QP per timer period), and doubles make the sequences the
// same as the paper's formulas, which the unit tests compute by hand. The per-frame pacer works
// on integers.
#include "dataplane/dcqcn.h"

#include <algorithm>
#include <cmath>

namespace urnic::dp {
namespace {

uint64_t ticks(uint64_t us, uint64_t tsc_hz) noexcept {
  return static_cast<uint64_t>(static_cast<double>(us) * static_cast<double>(tsc_hz) / 1e6);
}

// How many increase events one call may apply: enough to climb from the minimum rate back to
// line rate (hyper increase grows linearly per event), few enough to bound one engine step.
constexpr uint32_t kMaxEventsPerCall = 4096;
// Pacer credit: a QP that was idle may send this many bytes back to back before pacing.
constexpr uint64_t kBurstBytes = 8192;

}  // namespace

void Dcqcn::init(const DcqcnConfig& cfg, uint32_t max_rate_mbps, uint64_t tsc_hz) noexcept {
  cfg_ = cfg;
  tsc_hz_ = tsc_hz != 0 ? tsc_hz : 1;
  max_ = max_rate_mbps != 0 ? max_rate_mbps : 1;
  min_ = std::min<double>(std::max<uint32_t>(cfg.min_rate_mbps, 1), max_);
  rc_ = rt_ = max_;
  alpha_ = std::min(cfg.initial_alpha, 1024u) / 1024.0;
  // ConnectX's dce_tcp_g is the weight alpha keeps per period (alpha = G * alpha / 1024, plus
  // (1024 - G) / 1024 when a CNP arrived): the paper's gain g is (1024 - G) / 1024.
  g_ = (1024 - std::min(cfg.g, 1024u)) / 1024.0;
  alpha_period_ = std::max<uint64_t>(ticks(cfg.alpha_period_us, tsc_hz_), 1);
  time_reset_ = std::max<uint64_t>(ticks(cfg.time_reset_us, tsc_hz_), 1);
  reduce_period_ = ticks(cfg.reduce_period_us, tsc_hz_);
  alpha_due_ = inc_due_ = last_reduce_ = 0;
  cnp_in_period_ = cnp_seen_ = limited_ = false;
  t_stage_ = b_stage_ = 0;
  bytes_ = next_tx_ = 0;
  counters_ = {};
  set_rate(max_);
}

void Dcqcn::advance(uint64_t now) noexcept {
  // alpha: one update per elapsed period from the first CNP on (before it alpha keeps its
  // initial value). Only the first period can have seen a CNP (a CNP advances the state before
  // it sets the flag), so the rest decay together.
  if (alpha_due_ != 0 && now >= alpha_due_) {
    const uint64_t k = (now - alpha_due_) / alpha_period_ + 1;
    alpha_ = (1 - g_) * alpha_ + (cnp_in_period_ ? g_ : 0);
    if (k > 1) alpha_ *= std::pow(1 - g_, static_cast<double>(k - 1));
    cnp_in_period_ = false;
    alpha_due_ += k * alpha_period_;
  }
  // Timer-driven increases, only while paced (at line rate there is nothing to recover).
  for (uint32_t n = 0; limited_ && now >= inc_due_ && n < kMaxEventsPerCall; ++n) {
    inc_due_ += time_reset_;
    ++t_stage_;
    increase();
  }
}

bool Dcqcn::on_cnp(uint64_t now) noexcept {
  advance(now);
  if (alpha_due_ == 0) alpha_due_ = now + alpha_period_;  // the first CNP starts the alpha timer
  cnp_in_period_ = true;
  // One decrease per monitor period: the CNPs of one congestion episode arrive in bursts.
  if (last_reduce_ != 0 && now - last_reduce_ < reduce_period_) return false;
  last_reduce_ = now != 0 ? now : 1;
  ++counters_.cnps_handled;
  double rc = rc_;
  if (!cnp_seen_ && cfg_.first_cnp_rate_mbps != 0) {
    rt_ = rc = std::min<double>(cfg_.first_cnp_rate_mbps, rc_);
  } else {
    // The target takes the rate before the cut (paper: RT = RC) when the rate rose since the
    // last cut by the byte counter, or by the timer with clamp_target_after_time, or always
    // with clamp_target; otherwise it stays, and fast recovery heads back to it (ConnectX).
    if (!limited_ || cfg_.clamp_target || b_stage_ != 0 ||
        (cfg_.clamp_target_after_time && t_stage_ != 0))
      rt_ = rc_;
    const double cut = alpha_ * 1024.0 / static_cast<double>(1u << std::min(cfg_.gd, 30u));
    const double floor = std::min(cfg_.min_dec_fac, 100u) / 100.0;
    rc = rc_ * std::max(1.0 - cut, floor);
  }
  cnp_seen_ = true;
  t_stage_ = b_stage_ = 0;
  bytes_ = 0;
  inc_due_ = now + time_reset_;
  set_rate(std::max(rc, min_));
  return true;
}

void Dcqcn::increase() noexcept {
  ++counters_.increases;
  const uint32_t f = cfg_.threshold;
  // Fast recovery (both counters below F: halfway back to the target), additive increase, and
  // hyper increase once both counters passed F (the paper's Fig. 5; ConnectX adds hai_rate per
  // hyper step).
  if (std::max(t_stage_, b_stage_) < f) {
  } else if (std::min(t_stage_, b_stage_) > f) {
    rt_ = std::min(rt_ + static_cast<double>(cfg_.hai_rate_mbps), max_);  // hyper
  } else {
    rt_ = std::min(rt_ + static_cast<double>(cfg_.ai_rate_mbps), max_);  // additive
  }
  double rc = (rt_ + rc_) / 2;
  // Within half a Mb/s of the maximum is the maximum: the halving would never quite reach it.
  if (rc > max_ - 0.5) rc = max_;
  set_rate(rc);
}

void Dcqcn::sent_slow(uint32_t bytes, uint64_t now) noexcept {
  const uint64_t start = next_tx_ + burst_ < now ? now - burst_ : next_tx_;
  next_tx_ = start + ((bytes * tick_per_byte_q16_) >> 16);
  if (cfg_.byte_reset == 0) return;
  bytes_ += bytes;
  for (uint32_t n = 0; limited_ && bytes_ >= cfg_.byte_reset && n < kMaxEventsPerCall; ++n) {
    bytes_ -= cfg_.byte_reset;
    ++b_stage_;
    increase();
  }
}

void Dcqcn::set_rate(double rc) noexcept {
  rc_ = std::clamp(rc, min_, max_);
  const bool was = limited_;
  limited_ = rc_ < max_;
  if (!limited_) return;
  // Ticks per byte at rc_ Mb/s: tsc_hz * 8 / (rc_ * 1e6), with 16 fraction bits.
  tick_per_byte_q16_ =
      static_cast<uint64_t>(static_cast<double>(tsc_hz_) * 8.0 * 65536.0 / (rc_ * 1e6));
  burst_ = (kBurstBytes * tick_per_byte_q16_) >> 16;
  if (!was) next_tx_ = 0;
}

}  // namespace urnic::dp

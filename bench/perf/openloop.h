// Open-loop load for urnic-perf's bandwidth tests (--rate): requests are due at times drawn in
// advance - a constant rate, or Poisson arrivals - whatever the peer does, and each one's latency
// runs from the time it was due, not from when the sender got round to posting it. So a stall of
// the peer shows in the latency of every request that fell due during it (no coordinated
// omission, which a closed loop like perftest's suffers: it stops offering load while it waits,
// and sees the stall in a handful of requests only).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "bench/perf/histogram.h"
#include "bench/perf/verb.h"
#include "dataplane/xorshift.h"

namespace urnic::perf {

enum class Arrival : uint8_t { kConstant, kPoisson };

// One kind of request in an operation mix (--mix=OP:SIZE:WEIGHT,...).
struct MixEntry {
  Verb verb = Verb::kWrite;
  uint64_t size = 0;
  uint32_t weight = 1;
  std::string label() const;  // "write 64 B"
};

struct OpenLoopConfig {
  double rate = 0;  // requests per second over all QPs; 0: closed loop (perftest's)
  Arrival arrival = Arrival::kConstant;
  uint64_t seed = 1;  // Poisson arrivals, and the mix's draws
  // The operations and sizes drawn for each request, in proportion to their weights; empty:
  // the test's own operation at -s. Each class gets its own latency histogram.
  std::vector<MixEntry> mix;
};

// One second's (or the last, shorter interval's) figures.
struct OpenLoopInterval {
  double t_end = 0;     // seconds since the start
  double achieved = 0;  // completions per second
  uint64_t completions = 0;
  uint64_t errors = 0;                                      // completions with an error status
  uint64_t p50 = 0, p99 = 0, p999 = 0, p9999 = 0, max = 0;  // ns
};

class OpenLoop {
 public:
  OpenLoop(const OpenLoopConfig& c, uint64_t tsc_hz);

  // The schedule: start() at the first step; due() is when the next request falls due (TSC);
  // advance() moves on to the one after it.
  void start(uint64_t now) noexcept;
  uint64_t due() const noexcept { return static_cast<uint64_t>(next_); }
  void advance() noexcept;

  // A completion at `now` of the request that was due at `due_tsc`, of mix class `cls`.
  void complete(uint64_t due_tsc, uint64_t now, uint8_t cls = 0) noexcept {
    const uint64_t ns =
        now > due_tsc ? static_cast<uint64_t>(static_cast<double>(now - due_tsc) * ns_per_tsc_) : 0;
    total_.record(ns);
    interval_.record(ns);
    if (cls < by_class_.size()) by_class_[cls].record(ns);
  }
  // A completion with an error status (the run fails on it: an RC QP in error flushes the rest,
  // which is not load; the count says so in the last line and the report).
  void error() noexcept {
    ++errors_;
    ++interval_errors_;
  }
  uint64_t errors() const noexcept { return errors_; }
  // The mix class of the next request, drawn by weight (0 without a mix).
  uint8_t draw_class() noexcept;
  // Once a second: closes the interval, prints its line to `out` (when not null).
  void tick(uint64_t now, FILE* out) noexcept;
  // Closes the last (partial) interval.
  void finish(uint64_t now, FILE* out) noexcept;

  const Histogram& total() const noexcept { return total_; }
  const std::vector<Histogram>& by_class() const noexcept { return by_class_; }
  const std::vector<OpenLoopInterval>& intervals() const noexcept { return intervals_; }
  const OpenLoopConfig& config() const noexcept { return cfg_; }

 private:
  void close_interval(uint64_t now, FILE* out);

  OpenLoopConfig cfg_;
  double tsc_hz_, ns_per_tsc_, gap_;
  double next_ = 0;
  dp::Xorshift64 rng_;  // Poisson arrivals
  uint64_t start_ = 0, interval_start_ = 0, next_tick_ = 0;
  uint64_t errors_ = 0, interval_errors_ = 0;
  Histogram total_, interval_;
  std::vector<Histogram> by_class_;   // one per mix entry
  std::vector<uint64_t> cum_weight_;  // the mix's running weight sums
  dp::Xorshift64 mix_rng_;            // the mix's draws, a stream of its own
  std::vector<OpenLoopInterval> intervals_;
};

// The summary after the run (stdout), and the JSON report (--json=FILE; false if it could not be
// written, with the reason in *err).
struct OpenLoopRun {
  std::string test;
  uint64_t size = 0;
  uint32_t qps = 0;
  uint64_t messages = 0;
  double seconds = 0;
};
void print_open_loop_summary(const OpenLoop& ol, const OpenLoopRun& run);
bool write_open_loop_json(const std::string& path, const OpenLoop& ol, const OpenLoopRun& run,
                          std::string* err);

}  // namespace urnic::perf

#include "bench/perf/openloop.h"

#include <cerrno>
#include <cmath>
#include <cstring>

namespace urnic::perf {

namespace {

uint64_t seed_of(const OpenLoopConfig& c) { return c.seed == 0 ? 0x9E3779B97F4A7C15ull : c.seed; }

}  // namespace

OpenLoop::OpenLoop(const OpenLoopConfig& c, uint64_t tsc_hz)
    : cfg_(c),
      tsc_hz_(static_cast<double>(tsc_hz)),
      ns_per_tsc_(1e9 / static_cast<double>(tsc_hz)),
      gap_(static_cast<double>(tsc_hz) / c.rate),
      rng_(seed_of(c)),
      mix_rng_(seed_of(c) ^ 0xD1B54A32D192ED03ull) {
  intervals_.reserve(4096);
  by_class_.resize(c.mix.size());
  uint64_t sum = 0;
  for (const MixEntry& e : c.mix) cum_weight_.push_back(sum += e.weight);
}

uint8_t OpenLoop::draw_class() noexcept {
  if (cum_weight_.size() < 2) return 0;
  const uint64_t r = (mix_rng_.next() >> 11) % cum_weight_.back();
  uint8_t k = 0;
  while (r >= cum_weight_[k]) ++k;
  return k;
}

std::string MixEntry::label() const {
  const char* op = verb == Verb::kWrite  ? "write"
                   : verb == Verb::kRead ? "read"
                   : verb == Verb::kSend ? "send"
                                         : "atomic";
  return std::string(op) + " " + std::to_string(size) + " B";
}

void OpenLoop::start(uint64_t now) noexcept {
  start_ = interval_start_ = now;
  next_tick_ = now + static_cast<uint64_t>(tsc_hz_);
  next_ = static_cast<double>(now);
}

void OpenLoop::advance() noexcept {
  if (cfg_.arrival == Arrival::kConstant) {
    next_ += gap_;
    return;
  }
  // Exponential inter-arrival times (a Poisson process): -ln(U) * mean, U uniform in (0, 1]
  // from xorshift64* (no shared state, no syscall).
  const uint64_t r = rng_.next();
  const double u = (static_cast<double>(r >> 11) + 1.0) / 9007199254740992.0;  // (0, 1]
  next_ += -std::log(u) * gap_;
}

void OpenLoop::tick(uint64_t now, FILE* out) noexcept {
  if (now < next_tick_) return;
  close_interval(now, out);
  next_tick_ += static_cast<uint64_t>(tsc_hz_);
  if (next_tick_ <= now) next_tick_ = now + static_cast<uint64_t>(tsc_hz_);
}

void OpenLoop::finish(uint64_t now, FILE* out) noexcept {
  if (now > interval_start_) close_interval(now, out);
}

void OpenLoop::close_interval(uint64_t now, FILE* out) {
  OpenLoopInterval iv;
  const double secs = static_cast<double>(now - interval_start_) / tsc_hz_;
  iv.t_end = static_cast<double>(now - start_) / tsc_hz_;
  iv.completions = interval_.count();
  iv.errors = interval_errors_;
  iv.achieved = secs > 0 ? static_cast<double>(iv.completions) / secs : 0;
  iv.p50 = interval_.quantile(0.5);
  iv.p99 = interval_.quantile(0.99);
  iv.p999 = interval_.quantile(0.999);
  iv.p9999 = interval_.quantile(0.9999);
  iv.max = interval_.max();
  if (intervals_.size() < intervals_.capacity()) intervals_.push_back(iv);
  if (out != nullptr) {
    std::fprintf(out,
                 " open-loop %7.2f s: target %.4f Mpps, achieved %.4f Mpps, errors %llu; latency "
                 "us p50 %.2f p99 %.2f p99.9 %.2f p99.99 %.2f max %.2f\n",
                 iv.t_end, cfg_.rate / 1e6, iv.achieved / 1e6,
                 static_cast<unsigned long long>(iv.errors), iv.p50 / 1e3, iv.p99 / 1e3,
                 iv.p999 / 1e3, iv.p9999 / 1e3, iv.max / 1e3);
    std::fflush(out);
  }
  interval_.reset();
  interval_errors_ = 0;
  interval_start_ = now;
}

void print_open_loop_summary(const OpenLoop& ol, const OpenLoopRun& run) {
  const Histogram& h = ol.total();
  const double achieved = run.seconds > 0 ? static_cast<double>(run.messages) / run.seconds : 0;
  std::printf(
      " open-loop total: %s, %llu B, %u QPs, %s arrivals; target %.4f Mpps, achieved %.4f Mpps "
      "(%.2f %% of target) over %.3f s, %llu requests, %llu errors\n",
      run.test.c_str(), static_cast<unsigned long long>(run.size), run.qps,
      ol.config().arrival == Arrival::kPoisson ? "Poisson" : "constant", ol.config().rate / 1e6,
      achieved / 1e6, ol.config().rate > 0 ? 100.0 * achieved / ol.config().rate : 0, run.seconds,
      static_cast<unsigned long long>(run.messages), static_cast<unsigned long long>(ol.errors()));
  std::printf(
      " open-loop latency from the due time (us): min %.2f p50 %.2f p99 %.2f p99.9 %.2f "
      "p99.99 %.2f max %.2f mean %.2f\n",
      h.min() / 1e3, h.quantile(0.5) / 1e3, h.quantile(0.99) / 1e3, h.quantile(0.999) / 1e3,
      h.quantile(0.9999) / 1e3, h.max() / 1e3, h.mean() / 1e3);
  for (size_t k = 0; k < ol.by_class().size(); ++k) {
    const Histogram& c = ol.by_class()[k];
    const MixEntry& e = ol.config().mix[k];
    std::printf(
        " open-loop mix %-12s weight %u: %llu requests, latency us p50 %.2f p99 %.2f p99.9 %.2f "
        "max %.2f\n",
        e.label().c_str(), e.weight, static_cast<unsigned long long>(c.count()),
        c.quantile(0.5) / 1e3, c.quantile(0.99) / 1e3, c.quantile(0.999) / 1e3, c.max() / 1e3);
  }
}

bool write_open_loop_json(const std::string& path, const OpenLoop& ol, const OpenLoopRun& run,
                          std::string* err) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) {
    *err = "cannot write " + path + ": " + std::strerror(errno);
    return false;
  }
  const Histogram& h = ol.total();
  const double achieved = run.seconds > 0 ? static_cast<double>(run.messages) / run.seconds : 0;
  std::fprintf(f,
               "{\n  \"test\": \"%s\",\n  \"size\": %llu,\n  \"qps\": %u,\n  \"arrival\": "
               "\"%s\",\n  \"target_rate\": %.3f,\n  \"achieved_rate\": %.3f,\n  \"seconds\": "
               "%.6f,\n  \"requests\": %llu,\n  \"errors\": %llu,\n",
               run.test.c_str(), static_cast<unsigned long long>(run.size), run.qps,
               ol.config().arrival == Arrival::kPoisson ? "poisson" : "constant", ol.config().rate,
               achieved, run.seconds, static_cast<unsigned long long>(run.messages),
               static_cast<unsigned long long>(ol.errors()));
  std::fprintf(f,
               "  \"latency_ns\": {\"min\": %llu, \"p50\": %llu, \"p99\": %llu, \"p99_9\": %llu, "
               "\"p99_99\": %llu, \"max\": %llu, \"mean\": %.1f},\n  \"intervals\": [",
               static_cast<unsigned long long>(h.min()),
               static_cast<unsigned long long>(h.quantile(0.5)),
               static_cast<unsigned long long>(h.quantile(0.99)),
               static_cast<unsigned long long>(h.quantile(0.999)),
               static_cast<unsigned long long>(h.quantile(0.9999)),
               static_cast<unsigned long long>(h.max()), h.mean());
  const auto& iv = ol.intervals();
  for (size_t i = 0; i < iv.size(); ++i) {
    std::fprintf(
        f,
        "%s\n    {\"t\": %.3f, \"completions\": %llu, \"errors\": %llu, \"achieved_rate\": %.3f, "
        "\"p50\": %llu, \"p99\": %llu, \"p99_9\": %llu, \"p99_99\": %llu, \"max\": %llu}",
        i == 0 ? "" : ",", iv[i].t_end, static_cast<unsigned long long>(iv[i].completions),
        static_cast<unsigned long long>(iv[i].errors), iv[i].achieved,
        static_cast<unsigned long long>(iv[i].p50), static_cast<unsigned long long>(iv[i].p99),
        static_cast<unsigned long long>(iv[i].p999), static_cast<unsigned long long>(iv[i].p9999),
        static_cast<unsigned long long>(iv[i].max));
  }
  std::fprintf(f, "\n  ],\n  \"mix\": [");
  for (size_t k = 0; k < ol.by_class().size(); ++k) {
    const Histogram& c = ol.by_class()[k];
    const MixEntry& e = ol.config().mix[k];
    std::fprintf(f,
                 "%s\n    {\"class\": \"%s\", \"weight\": %u, \"requests\": %llu, "
                 "\"achieved_rate\": %.3f, \"p50\": %llu, \"p99\": %llu, \"p99_9\": %llu, "
                 "\"max\": %llu}",
                 k == 0 ? "" : ",", e.label().c_str(), e.weight,
                 static_cast<unsigned long long>(c.count()),
                 run.seconds > 0 ? static_cast<double>(c.count()) / run.seconds : 0.0,
                 static_cast<unsigned long long>(c.quantile(0.5)),
                 static_cast<unsigned long long>(c.quantile(0.99)),
                 static_cast<unsigned long long>(c.quantile(0.999)),
                 static_cast<unsigned long long>(c.max()));
  }
  std::fprintf(f, "\n  ]\n}\n");
  if (std::fclose(f) != 0) {
    *err = "cannot write " + path + ": " + std::strerror(errno);
    return false;
  }
  return true;
}

}  // namespace urnic::perf

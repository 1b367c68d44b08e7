// urnic-perf's open-loop pieces (bench/perf/histogram.h, openloop.h): the histogram reports every
// value within 1/128 above it and percentiles of known distributions; the schedule keeps its rate
// (constant and Poisson) and latencies run from the due time.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>

#include "bench/perf/histogram.h"
#include "bench/perf/openloop.h"

namespace urnic::perf {
namespace {

TEST(PerfHistogram, EveryValueWithinOneBucketWidthAbove) {
  std::mt19937_64 rng(7);
  uint32_t last = 0;
  for (uint64_t v = 0; v < 5000; ++v) {  // monotonic, exact below 128
    const uint32_t i = Histogram::index_of(v);
    EXPECT_GE(i, last);
    last = i;
    if (v < 128) {
      EXPECT_EQ(Histogram::highest_of(i), v);
    }
  }
  for (int k = 0; k < 100000; ++k) {
    const uint64_t v = rng() >> (rng() % 64);
    const uint32_t i = Histogram::index_of(v);
    ASSERT_LT(i, Histogram::kBuckets);
    const uint64_t h = Histogram::highest_of(i);
    ASSERT_GE(h, v);
    ASSERT_LE(static_cast<double>(h - v), static_cast<double>(v) / 128.0) << v;
  }
  EXPECT_EQ(Histogram::index_of(UINT64_MAX), Histogram::kBuckets - 1);
}

TEST(PerfHistogram, QuantilesOfAUniformRun) {
  Histogram h;
  for (uint64_t v = 1; v <= 100000; ++v) h.record(v);
  EXPECT_EQ(h.count(), 100000u);
  EXPECT_EQ(h.min(), 1u);
  EXPECT_EQ(h.max(), 100000u);
  EXPECT_NEAR(h.mean(), 50000.5, 0.01);
  for (double q : {0.5, 0.9, 0.99, 0.999, 0.9999}) {
    const double want = q * 100000;
    const auto got = static_cast<double>(h.quantile(q));
    EXPECT_GE(got, want) << q;
    EXPECT_LE(got, want * (1 + 1.0 / 128) + 1) << q;
  }
  EXPECT_EQ(h.quantile(1.0), 100000u);
  Histogram g;
  g.record(3'000'000);
  h.merge(g);
  EXPECT_EQ(h.max(), 3'000'000u);
  EXPECT_EQ(h.count(), 100001u);
  h.reset();
  EXPECT_EQ(h.count(), 0u);
  EXPECT_EQ(h.quantile(0.5), 0u);
}

TEST(PerfOpenLoop, ConstantArrivalsKeepTheRate) {
  OpenLoopConfig c;
  c.rate = 1e6;  // one every 1000 ticks of a 1 GHz counter
  OpenLoop ol(c, 1'000'000'000);
  ol.start(5000);
  EXPECT_EQ(ol.due(), 5000u);
  for (int k = 0; k < 1000; ++k) ol.advance();
  EXPECT_EQ(ol.due(), 5000u + 1'000'000u);
  // Latency from the due time, in ns: 2.5 us late.
  ol.complete(10'000, 12'500);
  ol.complete(10'000, 9'000);  // completed "before" it was due: 0, never a wrap
  EXPECT_EQ(ol.total().max(), 2500u);
  EXPECT_EQ(ol.total().min(), 0u);
}

TEST(PerfOpenLoop, PoissonArrivalsKeepTheMeanRate) {
  OpenLoopConfig c;
  c.rate = 1e6;
  c.arrival = Arrival::kPoisson;
  c.seed = 42;
  OpenLoop ol(c, 1'000'000'000);
  ol.start(0);
  uint64_t prev = 0, below_mean = 0;
  constexpr int kN = 200000;
  for (int k = 0; k < kN; ++k) {
    ol.advance();
    if (ol.due() - prev < 1000) ++below_mean;
    prev = ol.due();
  }
  // Mean gap 1000 ticks within 1 % (the standard error is 0.22 %); exponential gaps fall below
  // their mean with probability 1 - 1/e = 0.632.
  EXPECT_NEAR(static_cast<double>(ol.due()) / kN, 1000.0, 10.0);
  EXPECT_NEAR(static_cast<double>(below_mean) / kN, 0.632, 0.01);
}

}  // namespace
}  // namespace urnic::perf

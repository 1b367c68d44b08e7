// A latency histogram in the manner of HdrHistogram: log-linear buckets, 128 per power of two,
// so that any recorded value is reported within 1/128 (0.8 %) of itself, from 1 ns to 2^64 ns,
// in a fixed 58 KiB array. Recording is a few instructions and never allocates (the open-loop
// sender records every completion); percentiles walk the array once.
#pragma once

#include <array>
#include <bit>
#include <cstdint>

namespace urnic::perf {

class Histogram {
 public:
  static constexpr uint32_t kSubBits = 7;  // 128 buckets per power of two
  static constexpr uint32_t kSub = 1u << kSubBits;
  static constexpr uint32_t kBuckets = kSub + (64 - kSubBits) * kSub;

  // The bucket of `v`: values below 128 have one each; above, the top 8 bits select it.
  static constexpr uint32_t index_of(uint64_t v) noexcept {
    if (v < kSub) return static_cast<uint32_t>(v);
    const uint32_t e = 63 - static_cast<uint32_t>(std::countl_zero(v));  // >= kSubBits
    const uint32_t m = static_cast<uint32_t>(v >> (e - kSubBits));       // 128 .. 255
    return kSub + (e - kSubBits) * kSub + (m - kSub);
  }
  // The largest value in bucket `i` (what HdrHistogram reports: never below the true value).
  static constexpr uint64_t highest_of(uint32_t i) noexcept {
    if (i < kSub) return i;
    const uint32_t e = kSubBits + (i - kSub) / kSub;
    const uint64_t m = kSub + (i - kSub) % kSub;
    const uint32_t shift = e - kSubBits;
    return ((m + 1) << shift) - 1;
  }

  void record(uint64_t v) noexcept {
    ++counts_[index_of(v)];
    ++count_;
    sum_ += v;
    if (v > max_) max_ = v;
    if (count_ == 1 || v < min_) min_ = v;
  }
  void merge(const Histogram& o) noexcept {
    if (o.count_ == 0) return;
    for (uint32_t i = 0; i < kBuckets; ++i) counts_[i] += o.counts_[i];
    if (count_ == 0 || o.min_ < min_) min_ = o.min_;
    if (o.max_ > max_) max_ = o.max_;
    count_ += o.count_;
    sum_ += o.sum_;
  }
  void reset() noexcept {
    counts_.fill(0);
    count_ = sum_ = max_ = min_ = 0;
  }

  uint64_t count() const noexcept { return count_; }
  uint64_t max() const noexcept { return max_; }
  uint64_t min() const noexcept { return min_; }
  double mean() const noexcept {
    return count_ == 0 ? 0 : static_cast<double>(sum_) / static_cast<double>(count_);
  }
  // The value at or below which `q` (0..1) of the recorded values lie: the highest value of the
  // bucket holding the ceil(q * count)-th smallest, and never above the maximum seen.
  uint64_t quantile(double q) const noexcept {
    if (count_ == 0) return 0;
    uint64_t rank = static_cast<uint64_t>(q * static_cast<double>(count_) + 0.999999);
    if (rank < 1) rank = 1;
    if (rank > count_) rank = count_;
    uint64_t seen = 0;
    for (uint32_t i = 0; i < kBuckets; ++i) {
      seen += counts_[i];
      if (seen >= rank) {
        const uint64_t h = highest_of(i);
        return h < max_ ? h : max_;
      }
    }
    return max_;
  }

 private:
  std::array<uint64_t, kBuckets> counts_{};
  uint64_t count_ = 0, sum_ = 0, max_ = 0, min_ = 0;
};

}  // namespace urnic::perf

#include "bench/conform/cc_model.h"

#include <algorithm>
#include <cmath>

#include "dataplane/dcqcn.h"

namespace urnic::conform {

std::vector<double> dcqcn_curve(const DcqcnConfig& cfg, double max_mbps, double path_mbps,
                                const std::vector<double>& cnp_ms, double bin_ms, size_t bins) {
  // The simulated clock: 1 tick = 1 ns, stepped 2 us at a time (the smallest timer of the
  // ConnectX defaults is 1 us, the alpha period, which the reaction point applies lazily).
  constexpr uint64_t kStepNs = 2000;
  dp::Dcqcn rp;
  rp.init(cfg, static_cast<uint32_t>(std::max(max_mbps, 1.0)), 1'000'000'000);
  std::vector<double> out(bins, 0.0);
  const uint64_t bin_ns = static_cast<uint64_t>(bin_ms * 1e6);
  const uint64_t end = bin_ns * bins;
  size_t next = 0;
  double carry = 0;  // bytes sent but not yet reported (the byte counter takes whole bytes)
  for (uint64_t now = kStepNs; now <= end; now += kStepNs) {
    for (; next < cnp_ms.size() && cnp_ms[next] * 1e6 <= static_cast<double>(now); ++next)
      rp.on_cnp(std::max<uint64_t>(static_cast<uint64_t>(cnp_ms[next] * 1e6), 1));
    rp.advance(now);
    const double mbps = std::min(rp.rate_mbps(), path_mbps);
    carry += mbps * 1e6 / 8 * static_cast<double>(kStepNs) * 1e-9;
    const double whole = std::floor(carry);
    rp.on_sent(static_cast<uint32_t>(whole), now);
    carry -= whole;
    out[std::min<size_t>((now - kStepNs) / bin_ns, bins - 1)] +=
        mbps * static_cast<double>(kStepNs) / static_cast<double>(bin_ns);
  }
  return out;
}

}  // namespace urnic::conform

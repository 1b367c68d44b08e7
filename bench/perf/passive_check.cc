// The data checks of the side that only serves a WRITE or FETCH_ADD test (its engine's responder
// does the work; nothing completes on this side): what the peer left in the advertised region.
#include <cstring>
#include <string>

#include "bench/perf/runners.h"

namespace urnic::perf {

DataCheck check_passive_target(Side& side, const RunConfig& cfg, uint64_t n_per_qp,
                               uint64_t n_total) {
  DataCheck dc;
  if (cfg.test.verb == Verb::kRead) return dc;
  if (!cfg.peer_urnic) {
    dc.note = "contents not checked: the peer is perftest (random data)";
    return dc;
  }
  const Geometry& g = side.geo();
  if (cfg.test.verb == Verb::kAtomic) {
    // Every FETCH_ADD adds 1 to one 8-byte counter at the start of a cache-line slot.
    const Cycler c(kAtomicSize, g.cycle, g.cache_line);
    uint64_t sum = 0;
    for (auto& q : side.qps()) {
      for (uint64_t s = 0; s < c.slots; ++s) {
        uint64_t v = 0;
        std::memcpy(&v, q.target + s * c.stride, 8);
        sum += v;
      }
    }
    if (sum != n_total)
      dc.fail("the FETCH_ADD counters add up to " + std::to_string(sum) + ", expected " +
              std::to_string(n_total));
    else
      dc.pass("FETCH_ADD counters add up to " + std::to_string(n_total));
    return dc;
  }
  const Cycler c(cfg.size, g.cycle, g.cache_line);
  for (size_t i = 0; i < side.qps().size(); ++i) {
    const QpRes& q = side.qp(i);
    const uint64_t seed = last_seed(q.remote.psn, cfg.size);
    bool found = false;
    if (n_per_qp != 0) {
      found = check_pattern(q.target + c.offset_of(n_per_qp - 1), cfg.size, seed, 0) == cfg.size;
    } else {
      for (uint64_t s = 0; s < c.slots && !found; ++s)
        found = check_pattern(q.target + s * c.stride, cfg.size, seed, 0) == cfg.size;
    }
    if (!found) {
      dc.fail("the last WRITE of QP " + std::to_string(i) + " is not in its slot");
      return dc;
    }
  }
  dc.pass("last WRITE of each QP verified (" + std::to_string(cfg.size) + " B)");
  return dc;
}

}  // namespace urnic::perf

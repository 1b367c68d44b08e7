// DCQCN's expected curve for urnic-conform's congestion scenarios: the rate a reaction point
// with given parameters runs at, over time, for CNPs that arrived at given times. The reaction
// point is urnic's own (dataplane/dcqcn.h: the paper's and ConnectX's rules, each checked by hand
// in its unit tests), run on a simulated clock; only the CNP times and the path come from the run.
#pragma once

#include <cstddef>
#include <vector>

#include "urnic/congestion.h"

namespace urnic::conform {

// The mean rate (Mb/s) in each of `bins` bins of `bin_ms` from t = 0, for a QP that starts
// unpaced at `max_mbps` and never sends faster than `path_mbps` (what it carried with no CNP),
// receiving a CNP at each time in `cnp_ms` (ascending, ms from t = 0).
std::vector<double> dcqcn_curve(const DcqcnConfig& cfg, double max_mbps, double path_mbps,
                                const std::vector<double>& cnp_ms, double bin_ms, size_t bins);

}  // namespace urnic::conform

// urnic-perf --report=FILE: a one-page Markdown or HTML report of the run. It holds what the
// console's tables hold - bandwidth rows, latency rows, and for open-loop runs the per-second
// series and the whole run's percentiles - plus PNG plots that gnuplot draws beside the page
// (FILE's stem followed by -bw.png, -lat.png, -olN-rate.png, -olN-latency.png,
// -olN-percentiles.png). Rows are recorded as the tables are printed (after each run, never
// inside one); the page is written once at the end.
#pragma once

#include <cstdint>
#include <string>

#include "bench/perf/openloop.h"
#include "bench/perf/output.h"
#include "bench/perf/perf.h"

namespace urnic::perf {

// Each records one printed row when o.report is set, and does nothing otherwise.
void record_bw_row(const Options& o, Test t, const BwReport& r);
void record_lat_row(const Options& o, Test t, uint64_t size, uint64_t iters, const LatStats& s);
void record_lat_duration_row(const Options& o, Test t, uint64_t size, uint64_t iters, double avg_us,
                             double tps);
void record_open_loop(const Options& o, const OpenLoop& ol, const OpenLoopRun& run);

// --json for a closed-loop run (perftest's tests, no --rate): the bandwidth and latency rows as
// printed, and the run's exit status. False (with *err) when the file cannot be written.
bool write_closed_loop_json(const Options& o, int exit_code, std::string* err);

// Writes the page to o.report with what was recorded. `argv` is the command line shown on the
// page and `exit_code` the run's. Plots that cannot be drawn are a warning on stderr and a note
// on the page (*plot_note), not an error; false (with *err) only when the page cannot be written.
bool write_perf_report(const Options& o, int argc, char** argv, int exit_code, std::string* err,
                       std::string* plot_note);

}  // namespace urnic::perf

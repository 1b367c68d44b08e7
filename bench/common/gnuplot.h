// Plots for the tools' reports, drawn by gnuplot (Debian's gnuplot-nox) as a child process once
// the run is over - never on a measured path. A missing or failing gnuplot is reported, not
// fatal: the report keeps its tables and says why it has no plots.
#pragma once

#include <string>
#include <vector>

namespace urnic::bench {

// Runs `gnuplot` (found on PATH) with `script` on its standard input and waits for it. True when
// it exited 0 and wrote every file in `outputs` (non-empty); otherwise false with *why set to
// "gnuplot not found", "gnuplot failed: <its last error line>" or "gnuplot did not write <file>".
bool run_gnuplot(const std::string& script, const std::vector<std::string>& outputs,
                 std::string* why);

// `s` as a gnuplot single-quoted string (in which only the quote itself needs escaping, as '').
std::string gp_quote(const std::string& s);

}  // namespace urnic::bench

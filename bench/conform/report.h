// urnic-conform's reports: a line per scenario and a summary on stdout, JUnit XML and JSON files
// for CI systems.
#pragma once

#include <string>
#include <vector>

#include "bench/conform/scenarios.h"

namespace urnic::conform {

struct Result {
  std::string name;
  std::string rule;
  Outcome outcome;
};

void print_result(const Result& r);
void print_summary(const std::vector<Result>& results);
bool write_junit(const std::string& path, const std::vector<Result>& results, std::string* err);
bool write_json(const std::string& path, const std::vector<Result>& results, std::string* err);

// --report=FILE (.md or .html): one page for a person - the run (peer, date, counts, any faults
// injected) and a table of the scenarios: name, rule, verdict, what the peer did.
struct RunInfo {
  std::string peer;    // "SERVER:PORT"
  std::string local;   // our port and address
  std::string faults;  // what was injected (empty: nothing)
};
bool write_page(const std::string& path, const RunInfo& run, const std::vector<Result>& results,
                std::string* err);

}  // namespace urnic::conform

// urnic-perf --mix-file=FILE: a traffic mix for the open loop in a small file of its own (issue
// 44 item 2), so that a test engineer keeps the load a peer was tested with beside its report:
//
//   # 8 QPs of small writes with some reads and atomics, Poisson arrivals at 0.5 Mpps, 5 s
//   rate 0.5
//   arrival poisson
//   qps 8
//   duration 5
//   write 64 8        # OP SIZE [WEIGHT]
//   read 4096 1
//   atomic 8 1
//
// Each setting is the option of the same meaning (rate: --rate, arrival: --arrival, qps: -q,
// duration: -D, size: -s) and goes through that option's own checks; the operations make the
// --mix. Without a size line the buffers are as large as the largest operation. Options after
// --mix-file on the command line override the file's.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "bench/perf/option_table.h"

namespace urnic::perf::opts {

namespace {

// The option a file setting stands for.
const char* option_for(const std::string& key) {
  return key == "rate"       ? "--rate"
         : key == "arrival"  ? "--arrival"
         : key == "qps"      ? "-q"
         : key == "duration" ? "-D"
         : key == "size"     ? "-s"
                             : nullptr;
}

}  // namespace

bool parse_mix_file(const std::string& path, OptionArg& a) {
  std::ifstream in(path);
  if (!in) {
    std::fprintf(stderr, "urnic-perf: --mix-file: cannot read '%s'\n", path.c_str());
    return false;
  }
  std::string line, mix;
  uint64_t largest = 0;
  bool sized = false;
  for (int n = 1; std::getline(in, line); ++n) {
    line = line.substr(0, line.find('#'));
    std::istringstream words(line);
    std::string key, v1, v2, extra;
    if (!(words >> key)) continue;
    words >> v1 >> v2 >> extra;
    auto bad = [&](const std::string& why) {
      std::fprintf(stderr, "urnic-perf: --mix-file %s:%d: %s\n", path.c_str(), n, why.c_str());
      return false;
    };
    if (key == "write" || key == "read" || key == "atomic") {
      if (v1.empty() || !extra.empty()) return bad("an operation is OP SIZE [WEIGHT]");
      mix += (mix.empty() ? "" : ",") + key + ":" + v1 + (v2.empty() ? "" : ":" + v2);
      largest = std::max<uint64_t>(largest, std::strtoull(v1.c_str(), nullptr, 10));
      continue;
    }
    const char* opt = option_for(key);
    if (opt == nullptr)
      return bad("'" + key + "' is not a setting (rate, arrival, qps, duration, size) or an " +
                 "operation (write, read, atomic)");
    if (v1.empty() || !v2.empty()) return bad("'" + key + "' takes one value");
    int i = 0;
    OptionArg arg{a.o, opt, v1, true, &i, 0, nullptr, a.test_given};
    const OptionRow* r = find_option(opt);
    // The option's parser has said what is wrong with the value; this says where it was.
    if (r == nullptr || !r->parse(arg)) return bad("in '" + line + "'");
    sized |= key == "size";
  }
  if (mix.empty()) {
    std::fprintf(stderr, "urnic-perf: --mix-file %s: no operation (write, read, atomic lines)\n",
                 path.c_str());
    return false;
  }
  if (!sized) {
    int i = 0;
    OptionArg arg{a.o, "-s", std::to_string(largest), true, &i, 0, nullptr, a.test_given};
    if (!find_option("-s")->parse(arg)) return false;
  }
  return parse_mix(mix, a.o);
}

}  // namespace urnic::perf::opts

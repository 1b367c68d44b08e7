#include "bench/common/fault_spec.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <limits>

namespace urnic::bench {

bool parse_count(const std::string& s, uint64_t* out, int base) {
  if (s.empty() || s[0] < '0' || s[0] > '9') return false;
  errno = 0;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(s.c_str(), &end, base);
  if (errno != 0 || end == s.c_str()) return false;
  uint64_t mult = 1;
  if (*end == 'K' || *end == 'k') {
    mult = 1024;
    ++end;
  } else if (*end == 'M' || *end == 'm') {
    mult = 1024 * 1024;
    ++end;
  }
  if (*end != '\0') return false;
  if (v > std::numeric_limits<uint64_t>::max() / mult) return false;
  *out = v * mult;
  return true;
}

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= s.size()) {
    const size_t end = std::min(s.find(',', pos), s.size());
    out.push_back(s.substr(pos, end - pos));
    pos = end + 1;
  }
  return out;
}

bool parse_number(const std::string& s, double* out) {
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (errno != 0 || end == s.c_str() || *end != '\0') return false;
  *out = v;
  return true;
}

bool parse_fault_spec(const std::string& spec, FaultConfig* f, std::string* why) {
  auto bad = [&](const std::string& w) {
    *why = w;
    return false;
  };
  if (spec.empty()) return bad("no KEY=VALUE given");
  for (const std::string& item : split_list(spec)) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos) return bad("'" + item + "' has no value");
    const std::string key = item.substr(0, eq);
    std::string val = item.substr(eq + 1);
    if (key == "seed") {
      uint64_t v = 0;
      if (!parse_count(val, &v)) return bad("bad seed '" + val + "'");
      f->seed = v;
    } else if (key == "delay_us") {
      uint64_t v = 0;  // FaultConfig: 1 us .. 1 s
      if (!parse_count(val, &v) || v < 1 || v > 1000000)
        return bad("bad delay_us '" + val + "' (1..1000000)");
      f->delay_us = static_cast<uint32_t>(v);
    } else {
      uint32_t* field = key == "drop"      ? &f->drop_ppm
                        : key == "dup"     ? &f->duplicate_ppm
                        : key == "reorder" ? &f->reorder_ppm
                        : key == "corrupt" ? &f->corrupt_ppm
                        : key == "ce"      ? &f->ce_ppm
                        : key == "delay"   ? &f->delay_ppm
                                           : nullptr;
      if (field == nullptr) return bad("unknown fault '" + key + "'");
      double v = 0;
      const bool pct = !val.empty() && val.back() == '%';
      if (pct) val.pop_back();
      if (!parse_number(val, &v) || !(v >= 0) ||  // NaN too
          (pct ? v > 100 : v > 1e6) || (!pct && v != static_cast<double>(static_cast<uint32_t>(v))))
        return bad("bad value '" + item.substr(eq + 1) + "' for " + key);
      *field = static_cast<uint32_t>(pct ? v * 1e4 + 0.5 : v);
    }
  }
  return true;
}

std::string fault_counts(const FaultCounters& c) {
  auto n = [](uint64_t v) { return std::to_string(v); };
  return "of " + n(c.seen) + ", dropped " + n(c.dropped) + ", duplicated " + n(c.duplicated) +
         ", reordered " + n(c.reordered) + ", corrupted " + n(c.corrupted) + ", CE-marked " +
         n(c.ce_marked) + ", delayed " + n(c.delayed);
}

}  // namespace urnic::bench

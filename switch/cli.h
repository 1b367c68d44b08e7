// Command-line helpers shared by the switch's tools (urnic-switch, bench_incast): "--name=value"
// options and numbers that must fit, rejected with a message naming the tool and exit status 2.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>

namespace urnic::sw::cli {

// Whether `arg` is "--name=VALUE"; then *value is VALUE.
inline bool opt(const char* arg, const char* name, std::string* value) {
  const size_t n = std::strlen(name);
  if (std::strncmp(arg, name, n) != 0 || arg[n] != '=') return false;
  *value = arg + n + 1;
  return true;
}

// A decimal number from 0 to `max`; anything else ends the program (status 2) with a message.
inline uint64_t number(const char* tool, const std::string& v, const char* name, uint64_t max) {
  char* end = nullptr;
  const unsigned long long x = std::strtoull(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || v[0] == '-' || x > max) {
    std::fprintf(stderr, "%s: %s=%s: not a number from 0 to %llu\n", tool, name, v.c_str(),
                 static_cast<unsigned long long>(max));
    std::exit(2);
  }
  return x;
}

// A numeric option: its name, where its value goes, the largest value accepted.
struct Numeric {
  const char* name;
  uint32_t* out;
  uint64_t max;
};

// Whether `arg` is one of `table`'s options; then its value is stored (or the program ends).
inline bool numeric(const char* tool, const char* arg, std::span<const Numeric> table) {
  std::string v;
  for (const Numeric& n : table) {
    if (opt(arg, n.name, &v)) {
      *n.out = static_cast<uint32_t>(number(tool, v, n.name, n.max));
      return true;
    }
  }
  return false;
}

}  // namespace urnic::sw::cli

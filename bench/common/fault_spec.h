// The command-line form of urnic's fault injector (FaultConfig, urnic/counters.h), shared by the
// tools that offer --inject / --inject-rx (urnic-perf, urnic-conform), and the strict number and
// list parsers behind it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "urnic/counters.h"

namespace urnic::bench {

// A decimal count with an optional K or M suffix (x1024, x1048576). Signs, spaces and anything
// that does not fit in 64 bits after the suffix are refused (strtoull alone would wrap "-1" and
// overflow "17592186044417M" into 1 MiB). `base` 10 refuses octal and hex forms; 0 reads C's
// forms as perftest's strtol(optarg, NULL, 0) does ("010" is 8, "0x10" 16, "08" refused).
bool parse_count(const std::string& s, uint64_t* out, int base = 10);
// The comma-separated items of `s`, empty ones included ("" gives one empty item, "a,,b" three),
// so that each caller decides what an empty item means.
std::vector<std::string> split_list(const std::string& s);
// A whole string that strtod reads as a finite or infinite number; nothing after it.
bool parse_number(const std::string& s, double* out);

// KEY=VALUE,...: drop, dup, reorder, corrupt, ce and delay take a share of the frames, in parts
// per million or with a % sign (0..100 %); delay_us how long a delayed frame is held (1..10^6,
// default 1000); seed a count. Sets the fields of *f it names; on anything
// else returns false with the reason in *why (kFaultSpecForm says what is accepted).
bool parse_fault_spec(const std::string& spec, FaultConfig* f, std::string* why);
inline constexpr const char* kFaultSpecForm =
    "KEY=VALUE,... with drop, dup, reorder, corrupt, ce, delay in ppm or 0..100%, "
    "delay_us=1..1000000, "
    "seed=N";

// "of N, dropped N, duplicated N, reordered N, corrupted N, CE-marked N, delayed N".
std::string fault_counts(const FaultCounters& c);

}  // namespace urnic::bench

// perftest's VerbType: the operation a test (or an open-loop mix entry) performs.
#pragma once

#include <cstdint>

namespace urnic::perf {

enum class Verb : uint8_t { kSend, kWrite, kRead, kAtomic };

}  // namespace urnic::perf

// xorshift64* (Vigna, "An experimental exploration of Marsaglia's xorshift generators"): a
// seeded, reproducible generator with no shared state, for decisions that tests must be able to
// repeat (the fault injector's, the test switch's RED marking).
#pragma once

#include <cstdint>

namespace urnic::dp {

class Xorshift64 {
 public:
  explicit constexpr Xorshift64(uint64_t seed) noexcept : s_(seed != 0 ? seed : 1) {}
  uint64_t next() noexcept {
    s_ ^= s_ >> 12;
    s_ ^= s_ << 25;
    s_ ^= s_ >> 27;
    return s_ * 0x2545F4914F6CDD1Dull;
  }

 private:
  uint64_t s_;
};

}  // namespace urnic::dp

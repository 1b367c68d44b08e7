// 24-bit packet sequence numbers (IBTA Vol. 1 §9.7.1).
//
// PSNs wrap modulo 2^24, so "before" and "after" only make sense within half the space (2^23),
// as in rxe's psn_compare(). Psn deliberately has no relational operators: a raw `<` on PSNs
// would be wrong at the wrap and does not compile; use Psn::diff / before / after instead.
#pragma once

#include <cstdint>

namespace urnic::wire {

class Psn {
 public:
  static constexpr uint32_t kMask = 0xFFFFFF;
  static constexpr uint32_t kHalf = 1u << 23;

  constexpr Psn() noexcept = default;
  constexpr explicit Psn(uint32_t v) noexcept : v_(v & kMask) {}

  constexpr uint32_t value() const noexcept { return v_; }

  // Signed distance a - b in (-2^23, 2^23]: positive when a is after b.
  static constexpr int32_t diff(Psn a, Psn b) noexcept {
    // Shift the 24-bit difference into the top of a 32-bit word and back to sign-extend it.
    return static_cast<int32_t>(((a.v_ - b.v_) & kMask) << 8) >> 8;
  }
  static constexpr bool before(Psn a, Psn b) noexcept { return diff(a, b) < 0; }
  static constexpr bool after(Psn a, Psn b) noexcept { return diff(a, b) > 0; }

  constexpr Psn operator+(int32_t n) const noexcept { return Psn(v_ + static_cast<uint32_t>(n)); }
  constexpr Psn operator-(int32_t n) const noexcept { return Psn(v_ - static_cast<uint32_t>(n)); }
  constexpr Psn& operator+=(int32_t n) noexcept { return *this = *this + n; }
  constexpr Psn& operator++() noexcept { return *this += 1; }
  friend constexpr bool operator==(Psn, Psn) = default;

 private:
  uint32_t v_ = 0;
};

static_assert(Psn::diff(Psn(0), Psn(0xFFFFFF)) == 1);
static_assert(Psn::diff(Psn(0xFFFFFF), Psn(0)) == -1);
static_assert(Psn::before(Psn(0xFFFFF0), Psn(5)) && Psn::after(Psn(5), Psn(0xFFFFF0)));
static_assert((Psn(0xFFFFFF) + 1) == Psn(0));

}  // namespace urnic::wire

// Big-endian field types for wire headers (house style rule 8).
//
// Each type stores its bytes in network order in a byte array, so it has alignment 1: the header
// structs built from them are packed without compiler attributes, can be overlaid on any byte
// offset of a frame, and a host integer cannot be assigned to them by mistake (there is no
// implicit conversion either way).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace urnic::wire {

template <typename T, size_t N>
struct BeInt {
  static_assert(std::is_unsigned_v<T> && N <= sizeof(T));
  std::array<uint8_t, N> b;

  constexpr T get() const noexcept {
    T v = 0;
    for (size_t i = 0; i < N; ++i) v = static_cast<T>((v << 8) | b[i]);
    return v;
  }
  constexpr void set(T v) noexcept {
    for (size_t i = 0; i < N; ++i) b[N - 1 - i] = static_cast<uint8_t>(v >> (8 * i));
  }
  static constexpr BeInt of(T v) noexcept {
    BeInt r{};
    r.set(v);
    return r;
  }
  friend constexpr bool operator==(const BeInt&, const BeInt&) = default;
};

using Be8 = BeInt<uint8_t, 1>;
using Be16 = BeInt<uint16_t, 2>;
using Be24 = BeInt<uint32_t, 3>;
using Be32 = BeInt<uint32_t, 4>;
using Be64 = BeInt<uint64_t, 8>;

static_assert(sizeof(Be16) == 2 && alignof(Be16) == 1);
static_assert(sizeof(Be24) == 3 && alignof(Be24) == 1);
static_assert(sizeof(Be32) == 4 && alignof(Be32) == 1);
static_assert(sizeof(Be64) == 8 && alignof(Be64) == 1);
static_assert(std::is_trivially_copyable_v<Be64>);

// A sub-field of a big-endian storage word, described once (house style rule 9): the storage
// member, its mask (in host order, before the shift) and its shift. Headers declare
//   using Psn = BitField<&Bth::w2, 0x00ffffff, 0>;
// and callers use Bth::Psn::get(bth) / Bth::Psn::set(bth, v).
template <auto Member, uint64_t Mask, unsigned Shift>
struct BitField {
  template <typename H>
  static constexpr auto get(const H& h) noexcept {
    using T = decltype((h.*Member).get());
    return static_cast<T>(((h.*Member).get() >> Shift) & Mask);
  }
  template <typename H, typename V>
  static constexpr void set(H& h, V v) noexcept {
    using T = decltype((h.*Member).get());
    const T word = (h.*Member).get();
    const T cleared = static_cast<T>(word & ~static_cast<T>(Mask << Shift));
    (h.*Member).set(static_cast<T>(cleared | ((static_cast<T>(v) & Mask) << Shift)));
  }
};

}  // namespace urnic::wire

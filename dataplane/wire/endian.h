// Big-endian field types for wire headers (house style rule 8).
//
// Each type stores its bytes in network order in a byte array, so it has alignment 1: the header
// structs built from them are packed without compiler attributes, can be overlaid on any byte
// offset of a frame, and a host integer cannot be assigned to them by mistake (there is no
// implicit conversion either way).
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace urnic::wire {

template <typename T, size_t N>
struct BeInt {
  static_assert(std::is_unsigned_v<T> && N <= sizeof(T));
  std::array<uint8_t, N> b;

 private:
  static constexpr bool kWord = N == sizeof(T) && N > 1;
  // Host order to network order and back (the same swap).
  static T to_big(T v) noexcept {
    if constexpr (std::endian::native == std::endian::big) {
      return v;
    } else if constexpr (N == 2) {
      return static_cast<T>(__builtin_bswap16(v));
    } else if constexpr (N == 4) {
      return static_cast<T>(__builtin_bswap32(v));
    } else {
      return static_cast<T>(__builtin_bswap64(v));
    }
  }

 public:
  // Whole words are one load or store and a byte swap. GCC at -O2 left the byte loop as it is
  // for some of them: ~300 instructions of a 64 B WRITE went to this loop (bench/cost, issue 13).
  constexpr T get() const noexcept {
    if constexpr (kWord) {
      if (!std::is_constant_evaluated()) {
        T v;
        std::memcpy(&v, b.data(), N);
        return to_big(v);
      }
    }
    T v = 0;
    for (size_t i = 0; i < N; ++i) v = static_cast<T>((v << 8) | b[i]);
    return v;
  }
  constexpr void set(T v) noexcept {
    if constexpr (kWord) {
      if (!std::is_constant_evaluated()) {
        const T w = to_big(v);
        std::memcpy(b.data(), &w, N);
        return;
      }
    }
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

// CRC-32 kernels (crc32.h): slicing-by-8, PCLMULQDQ folding, VPCLMULQDQ (AVX-512) folding.
//
// The folding kernels follow the method of Gopal et al., "Fast CRC Computation for Generic
// Polynomials Using PCLMULQDQ Instruction" (Intel, 2009): keep a few 128-bit accumulators,
// each holding a polynomial congruent (mod P) to the message so far shifted to its position,
// and move each one forward over the data the other accumulators cover with two carry-less
// multiplies by x^n mod P constants (crc32.h, crc32_detail, derives them and says why each
// has the exponent it has). At the end the accumulators are folded into one 128-bit lane,
// reduced to 64 bits, and the last 32 by Barrett reduction. The project builds without -march
// flags, so each kernel carries its own target attribute and is called only after
// __builtin_cpu_supports said the CPU has the instructions.
#include "dataplane/wire/crc32.h"

#include <immintrin.h>

#include <atomic>
#include <bit>
#include <cstring>

namespace urnic::wire {
namespace {

using crc32_detail::FoldPair;
using crc32_detail::kConstants;

// What a kernel does with the bytes it reads: the CRC only; the CRC and a copy of them to dst;
// or the CRC of (src | mask), for the ICRC's masked header fields (icrc.cc) without writing them.
enum class Mode { kUpdate, kCopy, kMasked };

struct Io {
  uint8_t* dst;         // kCopy
  const uint8_t* src;   // all modes
  const uint8_t* mask;  // kMasked
};

// ---- Portable: slicing-by-8 -------------------------------------------------------------------

static_assert(std::endian::native == std::endian::little, "the kernels load little-endian words");

// kTables[k][b]: the register update for byte b followed by k zero bytes, so eight bytes can be
// folded into the register with eight independent look-ups.
using Tables = std::array<std::array<uint32_t, 256>, 8>;

constexpr Tables make_tables() noexcept {
  Tables t{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t c = b;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ ((c & 1u) ? 0xEDB88320u : 0u);
    t[0][b] = c;
  }
  for (size_t k = 1; k < 8; ++k)
    for (uint32_t b = 0; b < 256; ++b) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xFF];
  return t;
}

constexpr Tables kTables = make_tables();
static_assert(kTables[0][1] == 0x77073096u && kTables[0][255] == 0x2D02EF8Du);

template <Mode M>
inline uint64_t load64(Io io, size_t i) noexcept {
  uint64_t w;
  std::memcpy(&w, io.src + i, 8);
  if constexpr (M == Mode::kCopy) std::memcpy(io.dst + i, &w, 8);
  if constexpr (M == Mode::kMasked) {
    uint64_t m;
    std::memcpy(&m, io.mask + i, 8);
    w |= m;
  }
  return w;
}

template <Mode M>
inline uint8_t load8(Io io, size_t i) noexcept {
  const uint8_t b = io.src[i];
  if constexpr (M == Mode::kCopy) io.dst[i] = b;
  if constexpr (M == Mode::kMasked) return b | io.mask[i];
  return b;
}

// Bytes [i, len) of io through the tables, eight at a time, then one at a time.
template <Mode M>
inline uint32_t portable(uint32_t crc, Io io, size_t i, size_t len) noexcept {
  for (; i + 8 <= len; i += 8) {
    const uint64_t w = load64<M>(io, i) ^ crc;
    crc = kTables[7][w & 0xFF] ^ kTables[6][(w >> 8) & 0xFF] ^ kTables[5][(w >> 16) & 0xFF] ^
          kTables[4][(w >> 24) & 0xFF] ^ kTables[3][(w >> 32) & 0xFF] ^
          kTables[2][(w >> 40) & 0xFF] ^ kTables[1][(w >> 48) & 0xFF] ^ kTables[0][w >> 56];
  }
  for (; i < len; ++i) crc = (crc >> 8) ^ kTables[0][(crc ^ load8<M>(io, i)) & 0xFF];
  return crc;
}

// ---- PCLMULQDQ over 16-byte lanes ---------------------------------------------------------------

#define URNIC_PCLMUL __attribute__((target("pclmul,sse4.1")))
#define URNIC_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,vpclmulqdq,pclmul,sse4.1")))

// A fold pair as an operand: low qword multiplies a lane's low qword (H), high qword its high
// qword (L); see crc32_detail::fold_pair.
URNIC_PCLMUL inline __m128i pair128(const FoldPair& p) noexcept {
  return _mm_set_epi64x(static_cast<long long>(p.l), static_cast<long long>(p.h));
}

URNIC_PCLMUL inline __m128i fold128(__m128i x, __m128i k) noexcept {
  return _mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11));
}

template <Mode M>
URNIC_PCLMUL inline __m128i load128(Io io, size_t i) noexcept {
  __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(io.src + i));
  if constexpr (M == Mode::kCopy) _mm_storeu_si128(reinterpret_cast<__m128i*>(io.dst + i), v);
  if constexpr (M == Mode::kMasked)
    v = _mm_or_si128(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(io.mask + i)));
  return v;
}

// The raw register of a message whose last 128 bits are the lane x (already folded: x*x^32 mod
// P). Bit layouts are those of crc32.h; each step keeps a polynomial congruent to x*x^32.
URNIC_PCLMUL inline uint32_t reduce128(__m128i x) noexcept {
  const __m128i mask32 = _mm_set_epi32(0, 0, 0, -1);
  const __m128i c = _mm_set_epi64x(static_cast<long long>(kConstants.x64),
                                   static_cast<long long>(kConstants.x96));
  // 128 -> 96 bits: x*x^32 = H*x^96 + L*x^32 == H*(x^96 mod P) + L*x^32 =: V1 (degree < 96).
  // The result reads as V1*x^32: V1's 96 bits are lane bits 0..95.
  x = _mm_xor_si128(_mm_clmulepi64_si128(x, c, 0x00), _mm_srli_si128(x, 8));
  // 96 -> 64: V1 = A*x^64 + B (A: bits 0..31, B: bits 32..95) == A*(x^64 mod P) + B =: V2,
  // which reads as V2*x^64: V2's 64 bits are the low qword.
  x = _mm_xor_si128(_mm_clmulepi64_si128(_mm_and_si128(x, mask32), c, 0x10), _mm_srli_si128(x, 4));
  // Barrett: q = floor(floor(V2 / x^32) * mu / x^32) is floor(V2 / P) exactly for polynomials
  // (mu = floor(x^64 / P)), so V2 + q*P = V2 mod P, degree < 32. The product T*mu*x^64 has q
  // in bits 0..31; q*P*x^64 lines up with V2*x^64, and the remainder lands in bits 32..63.
  const __m128i b = _mm_set_epi64x(static_cast<long long>(kConstants.poly),
                                   static_cast<long long>(kConstants.mu));
  __m128i t = _mm_clmulepi64_si128(_mm_and_si128(x, mask32), b, 0x00);
  t = _mm_clmulepi64_si128(_mm_and_si128(t, mask32), b, 0x10);
  return static_cast<uint32_t>(_mm_extract_epi32(_mm_xor_si128(x, t), 1));
}

// PSHUFB controls for the last partial lane (an index with bit 7 set yields a zero byte): from
// kShuffle + r, byte j takes byte j + r (zero from 16 - r on); from kShuffle + 16 + r, byte j
// takes byte j - (16 - r) (zero below 16 - r).
alignas(16) constexpr uint8_t kShuffle[48] = {
    0,    1,    2,    3,    4,    5,    6,    7,    8,    9,    10,   11,   12,   13,   14,   15,
    0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
    0,    1,    2,    3,    4,    5,    6,    7,    8,    9,    10,   11,   12,   13,   14,   15};

// x covers the message up to len - r (len >= 16), 0 < r < 16 bytes are left. x followed by the
// r bytes is A (x's first r bytes) followed by B (x's last 16 - r bytes, then the r new ones):
// A, as a lane with 16 - r leading zero bytes (which do not change a CRC), folds over 128 bits
// onto B. The r new bytes are the end of the last 16 source bytes, one unaligned load (whose
// first 16 - r bytes are already in x; the copy stores them again, unchanged).
template <Mode M>
URNIC_PCLMUL inline __m128i fold_partial(__m128i x, Io io, size_t len, size_t r) noexcept {
  const __m128i last = load128<M>(io, len - 16);
  const __m128i shr = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kShuffle + r));
  const __m128i shl = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kShuffle + 16 + r));
  const __m128i a = _mm_shuffle_epi8(x, shl);
  // shr's bytes from 16 - r on have bit 7 set, which is what BLENDV selects `last` by.
  const __m128i b = _mm_blendv_epi8(_mm_shuffle_epi8(x, shr), last, shr);
  return _mm_xor_si128(fold128(a, pair128(kConstants.fold128)), b);
}

// From the accumulator x covering bytes [0, i), i >= 16: the whole 16-byte lanes left, one at a
// time, the partial one, and the reduction.
template <Mode M>
URNIC_PCLMUL inline uint32_t finish128(__m128i x, Io io, size_t i, size_t len) noexcept {
  const __m128i k = pair128(kConstants.fold128);
  for (; i + 16 <= len; i += 16) x = _mm_xor_si128(fold128(x, k), load128<M>(io, i));
  if (i < len) x = fold_partial<M>(x, io, len, len - i);
  return reduce128(x);
}

// Four accumulators 64 bytes apart: each folds over 512 bits per step, so four independent
// multiply chains hide the PCLMULQDQ latency. Under 16 bytes, the table.
template <Mode M>
URNIC_PCLMUL uint32_t pclmul_kernel(uint32_t crc, Io io, size_t len) noexcept {
  if (len < 16) return portable<M>(crc, io, 0, len);
  // The register continues into the message as its first 32 bits (reflected: the low 32 bits
  // of the first lane), which turns the raw CRC with initial register crc into one with 0.
  __m128i x0 = _mm_xor_si128(load128<M>(io, 0), _mm_cvtsi32_si128(static_cast<int>(crc)));
  size_t i = 16;
  if (len >= 64) {
    __m128i x1 = load128<M>(io, 16), x2 = load128<M>(io, 32), x3 = load128<M>(io, 48);
    const __m128i k4 = pair128(kConstants.fold512);
    for (i = 64; i + 64 <= len; i += 64) {
      x0 = _mm_xor_si128(fold128(x0, k4), load128<M>(io, i));
      x1 = _mm_xor_si128(fold128(x1, k4), load128<M>(io, i + 16));
      x2 = _mm_xor_si128(fold128(x2, k4), load128<M>(io, i + 32));
      x3 = _mm_xor_si128(fold128(x3, k4), load128<M>(io, i + 48));
    }
    const __m128i k1 = pair128(kConstants.fold128);
    x1 = _mm_xor_si128(x1, fold128(x0, k1));
    x2 = _mm_xor_si128(x2, fold128(x1, k1));
    x0 = _mm_xor_si128(x3, fold128(x2, k1));
  }
  return finish128<M>(x0, io, i, len);
}

// ---- VPCLMULQDQ over 64-byte vectors (AVX-512) ------------------------------------------------

// (Not _mm512_broadcast_i32x4: gcc 12 -Wmaybe-uninitialized on its undefined source vector;
// likewise the maskz_ forms below.)
URNIC_AVX512 inline __m512i pair512(const FoldPair& p) noexcept {
  const auto h = static_cast<long long>(p.h), l = static_cast<long long>(p.l);
  return _mm512_set_epi64(l, h, l, h, l, h, l, h);
}

// x folded forward and XORed with d: a ^ b ^ c in one instruction (truth table 0x96).
URNIC_AVX512 inline __m512i fold512x(__m512i x, __m512i k, __m512i d) noexcept {
  return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(x, k, 0x00),
                                   _mm512_clmulepi64_epi128(x, k, 0x11), d, 0x96);
}

template <Mode M>
URNIC_AVX512 inline __m512i load512(Io io, size_t i) noexcept {
  __m512i v = _mm512_loadu_si512(io.src + i);
  if constexpr (M == Mode::kCopy) _mm512_storeu_si512(io.dst + i, v);
  if constexpr (M == Mode::kMasked) v = _mm512_or_si512(v, _mm512_loadu_si512(io.mask + i));
  return v;
}

// The four 16-byte lanes of x onto the last one: lanes 0, 1, 2 fold over 384, 256 and 128
// bits (one multiply pair with a per-lane operand), then the lanes are XORed together.
URNIC_AVX512 inline __m128i lanes_to_one(__m512i x) noexcept {
  const auto& c = kConstants;
  const __m512i k = _mm512_set_epi64(
      0, 0, static_cast<long long>(c.fold128.l), static_cast<long long>(c.fold128.h),
      static_cast<long long>(c.fold256.l), static_cast<long long>(c.fold256.h),
      static_cast<long long>(c.fold384.l), static_cast<long long>(c.fold384.h));
  // Lane 3's operand is zero, so its product is zero and x's lane 3 is XORed in as it is.
  const __m512i last = _mm512_maskz_mov_epi64(0xC0, x);
  const __m512i y = fold512x(x, k, last);
  const __m128i a = _mm_xor_si128(_mm512_maskz_extracti32x4_epi32(0xF, y, 0),
                                  _mm512_maskz_extracti32x4_epi32(0xF, y, 1));
  const __m128i b = _mm_xor_si128(_mm512_maskz_extracti32x4_epi32(0xF, y, 2),
                                  _mm512_maskz_extracti32x4_epi32(0xF, y, 3));
  return _mm_xor_si128(a, b);
}

// Four 64-byte accumulators 256 bytes apart (16 independent lanes), folding over 2048 bits per
// step; then one accumulator over the remaining whole 64-byte vectors; then the 16-byte path.
// Under 64 bytes, the 16-byte kernel.
template <Mode M>
URNIC_AVX512 uint32_t avx512_kernel(uint32_t crc, Io io, size_t len) noexcept {
  if (len < 64) return pclmul_kernel<M>(crc, io, len);
  const __m512i init = _mm512_maskz_set1_epi32(1, static_cast<int>(crc));  // dword 0, rest 0
  __m512i x0 = _mm512_xor_si512(load512<M>(io, 0), init);
  size_t i = 64;
  const __m512i k1 = pair512(kConstants.fold512);
  if (len >= 256) {
    __m512i x1 = load512<M>(io, 64);
    __m512i x2 = load512<M>(io, 128);
    __m512i x3 = load512<M>(io, 192);
    const __m512i k4 = pair512(kConstants.fold2048);
    for (i = 256; i + 256 <= len; i += 256) {
      x0 = fold512x(x0, k4, load512<M>(io, i));
      x1 = fold512x(x1, k4, load512<M>(io, i + 64));
      x2 = fold512x(x2, k4, load512<M>(io, i + 128));
      x3 = fold512x(x3, k4, load512<M>(io, i + 192));
    }
    x1 = fold512x(x0, k1, x1);
    x2 = fold512x(x1, k1, x2);
    x0 = fold512x(x2, k1, x3);
  }
  for (; i + 64 <= len; i += 64) x0 = fold512x(x0, k1, load512<M>(io, i));
  return finish128<M>(lanes_to_one(x0), io, i, len);
}

// ---- Dispatch -----------------------------------------------------------------------------------

struct PortableKernel {
  template <Mode M>
  static uint32_t run(uint32_t crc, Io io, size_t len) noexcept {
    return portable<M>(crc, io, 0, len);
  }
};
struct PclmulKernel {
  template <Mode M>
  static uint32_t run(uint32_t crc, Io io, size_t len) noexcept {
    return pclmul_kernel<M>(crc, io, len);
  }
};
struct Avx512Kernel {
  template <Mode M>
  static uint32_t run(uint32_t crc, Io io, size_t len) noexcept {
    return avx512_kernel<M>(crc, io, len);
  }
};

// ---- Whole short messages from a register of 0 (crc32_short_masked) -------------------------

#define URNIC_PCLMUL_AVX __attribute__((target("avx,pclmul,sse4.1")))

URNIC_PCLMUL inline __m128i loadu128(const uint8_t* p) noexcept {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}

// x folded over one lane, the next lane v XORed in.
URNIC_PCLMUL inline __m128i step128(__m128i x, __m128i k, __m128i v) noexcept {
  return _mm_xor_si128(fold128(x, k), v);
}

// The first r = len % 16 bytes as a lane led by 16 - r zero bytes (a register of 0 stays 0
// over them), then H whole masked lanes: bytes [0, r + 16 H), covering the mask (16 H bytes).
template <int H>
URNIC_PCLMUL inline __attribute__((always_inline)) __m128i short_head(const uint8_t* src, size_t r,
                                                                      const uint8_t* mask,
                                                                      __m128i k) noexcept {
  const __m128i first = _mm_or_si128(loadu128(src), loadu128(mask));
  __m128i x = _mm_shuffle_epi8(first, loadu128(kShuffle + 16 + r));
#pragma GCC unroll 4
  for (int i = 0; i < H; ++i)
    x = step128(x, k, _mm_or_si128(loadu128(src + r + 16 * i), loadu128(mask + r + 16 * i)));
  return x;
}

// crc32_short_masked over 16-byte lanes: the head, then the last n whole lanes before `end`
// in order, without a loop; past 13 lanes, the rest goes to the kernel K's update
// (its register continues exactly where the head's reduction leaves it).
template <class K>
URNIC_PCLMUL inline __attribute__((always_inline)) uint32_t short_masked_body(
    const uint8_t* src, size_t len, const uint8_t* mask, size_t mask_len) noexcept {
  if (len < mask_len) return pclmul_kernel<Mode::kMasked>(0, Io{nullptr, src, mask}, len);
  const size_t r = len & 15;
  const __m128i k = pair128(kConstants.fold128);
  __m128i x = mask_len == 64 ? short_head<4>(src, r, mask, k) : short_head<3>(src, r, mask, k);
  const uint8_t* p = src + r + mask_len;
  const uint8_t* end = src + len;
  // clang-format off
  switch (static_cast<size_t>(end - p) / 16) {
    case 13: x = step128(x, k, loadu128(end - 208)); [[fallthrough]];
    case 12: x = step128(x, k, loadu128(end - 192)); [[fallthrough]];
    case 11: x = step128(x, k, loadu128(end - 176)); [[fallthrough]];
    case 10: x = step128(x, k, loadu128(end - 160)); [[fallthrough]];
    case 9: x = step128(x, k, loadu128(end - 144)); [[fallthrough]];
    case 8: x = step128(x, k, loadu128(end - 128)); [[fallthrough]];
    case 7: x = step128(x, k, loadu128(end - 112)); [[fallthrough]];
    case 6: x = step128(x, k, loadu128(end - 96)); [[fallthrough]];
    case 5: x = step128(x, k, loadu128(end - 80)); [[fallthrough]];
    case 4: x = step128(x, k, loadu128(end - 64)); [[fallthrough]];
    case 3: x = step128(x, k, loadu128(end - 48)); [[fallthrough]];
    case 2: x = step128(x, k, loadu128(end - 32)); [[fallthrough]];
    case 1: x = step128(x, k, loadu128(end - 16)); [[fallthrough]];
    // clang-format on
    case 0:
      return reduce128(x);
    default:  // more than 13 lanes (messages over about 256 bytes)
      return K::template run<Mode::kUpdate>(reduce128(x), Io{nullptr, p, nullptr}, end - p);
  }
}

using ShortFn = uint32_t (*)(const uint8_t*, size_t, const uint8_t*, size_t) noexcept;

uint32_t short_portable(const uint8_t* src, size_t len, const uint8_t* mask,
                        size_t mask_len) noexcept {
  const size_t m = len < mask_len ? len : mask_len;
  const uint32_t c = portable<Mode::kMasked>(0, Io{nullptr, src, mask}, 0, m);
  return portable<Mode::kUpdate>(c, Io{nullptr, src, nullptr}, m, len);
}
URNIC_PCLMUL uint32_t short_pclmul(const uint8_t* src, size_t len, const uint8_t* mask,
                                   size_t mask_len) noexcept {
  return short_masked_body<PclmulKernel>(src, len, mask, mask_len);
}
// The same with VEX encodings: three-operand forms, no register copies before each multiply.
URNIC_PCLMUL_AVX uint32_t short_pclmul_avx(const uint8_t* src, size_t len, const uint8_t* mask,
                                           size_t mask_len) noexcept {
  return short_masked_body<PclmulKernel>(src, len, mask, mask_len);
}
URNIC_AVX512 uint32_t short_avx512(const uint8_t* src, size_t len, const uint8_t* mask,
                                   size_t mask_len) noexcept {
  return short_masked_body<Avx512Kernel>(src, len, mask, mask_len);
}

using UpdateFn = uint32_t (*)(uint32_t, const uint8_t*, size_t) noexcept;
using CopyFn = uint32_t (*)(uint32_t, uint8_t*, const uint8_t*, size_t) noexcept;
using MaskedFn = uint32_t (*)(uint32_t, const uint8_t*, const uint8_t*, size_t) noexcept;

struct Impl {
  UpdateFn update;
  CopyFn copy;
  MaskedFn masked;
  ShortFn short_masked;
  Crc32Impl id;
};

template <class K>
uint32_t update_with(uint32_t crc, const uint8_t* src, size_t len) noexcept {
  return K::template run<Mode::kUpdate>(crc, Io{nullptr, src, nullptr}, len);
}
template <class K>
uint32_t copy_with(uint32_t crc, uint8_t* dst, const uint8_t* src, size_t len) noexcept {
  return K::template run<Mode::kCopy>(crc, Io{dst, src, nullptr}, len);
}
template <class K>
uint32_t masked_with(uint32_t crc, const uint8_t* src, const uint8_t* mask, size_t len) noexcept {
  return K::template run<Mode::kMasked>(crc, Io{nullptr, src, mask}, len);
}
template <class K>
constexpr Impl impl_for(Crc32Impl id, ShortFn short_fn) noexcept {
  return {update_with<K>, copy_with<K>, masked_with<K>, short_fn, id};
}

constexpr Impl kPortableImpl = impl_for<PortableKernel>(Crc32Impl::kPortable, short_portable);
constexpr Impl kPclmulImpl = impl_for<PclmulKernel>(Crc32Impl::kPclmul, short_pclmul);
constexpr Impl kPclmulAvxImpl = impl_for<PclmulKernel>(Crc32Impl::kPclmul, short_pclmul_avx);
constexpr Impl kAvx512Impl = impl_for<Avx512Kernel>(Crc32Impl::kAvx512, short_avx512);

// Until an implementation is chosen, g_impl points at these, which choose and call again.
uint32_t resolve_update(uint32_t crc, const uint8_t* src, size_t len) noexcept;
uint32_t resolve_copy(uint32_t crc, uint8_t* dst, const uint8_t* src, size_t len) noexcept;
uint32_t resolve_masked(uint32_t crc, const uint8_t* src, const uint8_t* mask, size_t len) noexcept;
uint32_t resolve_short(const uint8_t* src, size_t len, const uint8_t* mask,
                       size_t mask_len) noexcept;
constexpr Impl kResolveImpl{resolve_update, resolve_copy, resolve_masked, resolve_short,
                            Crc32Impl::kPortable};

std::atomic<const Impl*> g_impl{&kResolveImpl};

// Publishes the short kernel of the implementation now in g_impl (after each change of it).
void publish_short() noexcept {
  crc32_detail::g_short_masked.store(g_impl.load(std::memory_order_acquire)->short_masked,
                                     std::memory_order_release);
}

const Impl* impl_of(Crc32Impl id) noexcept {
  switch (id) {
    case Crc32Impl::kAvx512:
      return &kAvx512Impl;
    case Crc32Impl::kPclmul:
      return __builtin_cpu_supports("avx") ? &kPclmulAvxImpl : &kPclmulImpl;
    case Crc32Impl::kPortable:
      break;
  }
  return &kPortableImpl;
}

const Impl* chosen() noexcept {
  crc32_init();
  return g_impl.load(std::memory_order_acquire);
}

uint32_t resolve_update(uint32_t crc, const uint8_t* src, size_t len) noexcept {
  return chosen()->update(crc, src, len);
}
uint32_t resolve_copy(uint32_t crc, uint8_t* dst, const uint8_t* src, size_t len) noexcept {
  return chosen()->copy(crc, dst, src, len);
}
uint32_t resolve_masked(uint32_t crc, const uint8_t* src, const uint8_t* mask,
                        size_t len) noexcept {
  return chosen()->masked(crc, src, mask, len);
}
uint32_t resolve_short(const uint8_t* src, size_t len, const uint8_t* mask,
                       size_t mask_len) noexcept {
  return chosen()->short_masked(src, len, mask, mask_len);
}

}  // namespace

std::atomic<crc32_detail::ShortMaskedFn> crc32_detail::g_short_masked{resolve_short};

bool crc32_supported(Crc32Impl impl) noexcept {
  __builtin_cpu_init();
  switch (impl) {
    case Crc32Impl::kPortable:
      return true;
    case Crc32Impl::kPclmul:
      return __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
    case Crc32Impl::kAvx512:
      return crc32_supported(Crc32Impl::kPclmul) && __builtin_cpu_supports("avx512f") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
             __builtin_cpu_supports("vpclmulqdq");
  }
  return false;
}

const char* to_string(Crc32Impl impl) noexcept {
  switch (impl) {
    case Crc32Impl::kPortable:
      return "portable";
    case Crc32Impl::kPclmul:
      return "pclmul";
    case Crc32Impl::kAvx512:
      return "avx512";
  }
  return "?";
}

void crc32_init() noexcept {
  if (g_impl.load(std::memory_order_acquire) != &kResolveImpl) return;
  Crc32Impl best = Crc32Impl::kPortable;
  if (crc32_supported(Crc32Impl::kAvx512)) {
    best = Crc32Impl::kAvx512;
  } else if (crc32_supported(Crc32Impl::kPclmul)) {
    best = Crc32Impl::kPclmul;
  }
  // Only replaces the resolver: a choice made meanwhile by crc32_set_impl stands.
  const Impl* expected = &kResolveImpl;
  g_impl.compare_exchange_strong(expected, impl_of(best), std::memory_order_acq_rel);
  publish_short();
}

bool crc32_set_impl(Crc32Impl impl) noexcept {
  if (!crc32_supported(impl)) return false;
  g_impl.store(impl_of(impl), std::memory_order_release);
  publish_short();
  return true;
}

Crc32Impl crc32_impl() noexcept {
  crc32_init();
  return g_impl.load(std::memory_order_acquire)->id;
}

uint32_t crc32_update(uint32_t crc, const void* src, size_t len) noexcept {
  return g_impl.load(std::memory_order_relaxed)->update(crc, static_cast<const uint8_t*>(src), len);
}

uint32_t crc32_copy(uint32_t crc, void* dst, const void* src, size_t len) noexcept {
  return g_impl.load(std::memory_order_relaxed)
      ->copy(crc, static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(src), len);
}

uint32_t crc32_update_masked(uint32_t crc, const void* src, const void* or_mask,
                             size_t len) noexcept {
  return g_impl.load(std::memory_order_relaxed)
      ->masked(crc, static_cast<const uint8_t*>(src), static_cast<const uint8_t*>(or_mask), len);
}

}  // namespace urnic::wire

// CRC-32 (the Ethernet / zlib CRC: reflected polynomial 0xEDB88320) that can be continued from
// an intermediate value and fused with a copy, for the RoCEv2 ICRC (icrc.h) computed while the
// payload is gathered into a frame or scattered out of one (issue 13).
//
// Convention: every function here takes and returns the RAW CRC register, with no inversion
// inside. A CRC over a message A||B is
//
//   uint32_t s = ~0u;                  // initial register (zlib's "init 0xFFFFFFFF")
//   s = crc32_update(s, A, len_a);
//   s = crc32_copy(s, dst, B, len_b);  // same register update as crc32_update(s, B, len_b)
//   uint32_t crc = ~s;                 // final xor 0xFFFFFFFF: zlib crc32() of A||B
//
// so crc32_update(~0u, "123456789", 9) == ~0xCBF43926u. The register is in the reflected
// layout the bitwise algorithm uses (bit 0 is the coefficient of x^31).
//
// Implementations, chosen once at run time (crc32_init, or the first call): carry-less multiply
// folding with PCLMULQDQ over 16-byte lanes, the same with VPCLMULQDQ over 64-byte vectors
// (AVX-512), and a portable slicing-by-8 table, which the vector kernels also use for messages
// under 16 bytes. A vector kernel takes the last len % 16 bytes with one more 16-byte load that
// ends at the message end (and folds the lane it completes), not through the table. The vector
// kernels store each vector they load into the destination, so crc32_copy reads the source once.
//
// Hot path: no allocation, no locks, no exceptions.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace urnic::wire {

enum class Crc32Impl : uint8_t { kPortable = 0, kPclmul, kAvx512 };

// Picks the fastest implementation this CPU supports, unless one was already chosen (by an
// earlier crc32_init or by crc32_set_impl). Idempotent; also run by the first CRC call.
void crc32_init() noexcept;

// Forces an implementation (tests, benchmarks). False, and no change, when the CPU lacks it.
bool crc32_set_impl(Crc32Impl impl) noexcept;

// The implementation in use (runs crc32_init first if nothing was chosen yet).
Crc32Impl crc32_impl() noexcept;

// True when this CPU can run `impl`.
bool crc32_supported(Crc32Impl impl) noexcept;

const char* to_string(Crc32Impl impl) noexcept;

// Continues the raw register `crc` over len bytes of src (any alignment, any length).
uint32_t crc32_update(uint32_t crc, const void* src, size_t len) noexcept;

// crc32_update(crc, src, len), while copying src to dst in the same pass. dst and src must not
// overlap; any alignment, any length.
uint32_t crc32_copy(uint32_t crc, void* dst, const void* src, size_t len) noexcept;

// crc32_update over the bytes src[i] | or_mask[i] (for the ICRC: fields counted as all ones
// without writing them into the frame).
uint32_t crc32_update_masked(uint32_t crc, const void* src, const void* or_mask,
                             size_t len) noexcept;

// An OR mask for crc32_short_masked: kLeadMaskMax bytes of mask followed by 16 zero bytes,
// which the kernel reads when the message's first lanes do not start on a multiple of 16.
inline constexpr size_t kLeadMaskMax = 64;
using LeadMask = std::array<uint8_t, kLeadMaskMax + 16>;

// The raw register from 0 (no initial value: callers fold theirs into the message) over the
// bytes src[i] | mask[i] for i < mask_len, src[i] after, for a whole short message in one pass
// (the ICRC of a frame, icrc.cc). mask_len is 48 or 64 and len >= mask_len; mask[mask_len..]
// must be zero. The vector kernels fold the len % 16 leading bytes as one lane with leading
// zero bytes (which a register of 0 does not see), so every later lane is whole and the end
// needs no partial-lane shuffle; messages up to 256 bytes are folded by a straight-line
// sequence without a loop, longer ones continue in the update kernel.
// Inline, one indirect call: it runs for every frame sent and received.
namespace crc32_detail {
using ShortMaskedFn = uint32_t (*)(const uint8_t*, size_t, const uint8_t*, size_t) noexcept;
// The chosen implementation's kernel (crc32.cc keeps it in step with crc32_init and
// crc32_set_impl; until then a resolver that chooses first).
extern std::atomic<ShortMaskedFn> g_short_masked;
}  // namespace crc32_detail

inline uint32_t crc32_short_masked(const void* src, size_t len, const LeadMask& mask,
                                   size_t mask_len) noexcept {
  return crc32_detail::g_short_masked.load(std::memory_order_relaxed)(
      static_cast<const uint8_t*>(src), len, mask.data(), mask_len);
}

// ---- Fold constants -------------------------------------------------------------------------
//
// Polynomials over GF(2) below are in the normal layout (bit d is the coefficient of x^d);
// P = x^32 + kCrc32Poly. A 16-byte lane loaded from memory holds 128 message bits, the first
// (bit 0 of byte 0) being the highest-degree coefficient: lane bit m is the coefficient of
// x^(127-m) ("reflected"). Its low 64 bits are the high half H, its high 64 bits the low half L.
namespace crc32_detail {

constexpr uint32_t kCrc32Poly = 0x04C11DB7u;  // P without x^32; reflected: 0xEDB88320

// x^n mod P, by n multiplications by x.
constexpr uint32_t xpow_mod(uint32_t n) noexcept {
  uint32_t r = 1;
  for (uint32_t i = 0; i < n; ++i) r = (r << 1) ^ ((r & 0x80000000u) ? kCrc32Poly : 0u);
  return r;
}

constexpr uint32_t reflect32(uint32_t v) noexcept {
  uint32_t r = 0;
  for (int i = 0; i < 32; ++i) r |= ((v >> i) & 1u) << (31 - i);
  return r;
}

// floor(x^64 / P), a polynomial of degree 32 (33 bits), by long division.
constexpr uint64_t barrett_mu() noexcept {
  // The x^64 step: quotient bit 32, remainder x^64 - x^32 * P = kCrc32Poly * x^32.
  uint64_t q = 1ull << 32, r = static_cast<uint64_t>(kCrc32Poly) << 32;
  for (int i = 63; i >= 32; --i) {
    if ((r >> i) & 1u) {
      q |= 1ull << (i - 32);
      r ^= (static_cast<uint64_t>(kCrc32Poly) << (i - 32)) ^ (1ull << i);
    }
  }
  return q;
}

// Reflected 33-bit form of a degree-32 polynomial (bit j is the coefficient of x^(32-j)).
constexpr uint64_t reflect33(uint64_t v) noexcept {
  uint64_t r = 0;
  for (int i = 0; i < 33; ++i) r |= ((v >> i) & 1u) << (32 - i);
  return r;
}

// A 64x64 carry-less multiply of two reflected 64-bit operands a (poly A) and b (poly B) puts
// the coefficient of x^d of A*B at bit 126-d: read as a reflected 128-bit lane it is A*B*x.
//
// Folding a lane X = H*x^64 + L forward over `dist` message bits replaces it with a polynomial
// congruent to X*x^dist mod P, XORed into the lane `dist` bits later:
//   X*x^dist = H*x^(dist+64) + L*x^dist.
// The operand for H is the reflected 32-bit k = x^(dist+64-33) mod P in the low 32 bits of a
// 64-bit operand, i.e. the reflected 64-bit form of k*x^32; the product then reads as
// H*k*x^33 = H*x^(dist+64) (mod P). Likewise for L with x^(dist-33).
struct FoldPair {
  uint64_t h;  // multiplies H (the lane's low qword)
  uint64_t l;  // multiplies L (the lane's high qword)
};

constexpr FoldPair fold_pair(uint32_t dist) noexcept {
  return {reflect32(xpow_mod(dist + 64 - 33)), reflect32(xpow_mod(dist - 33))};
}

struct Constants {
  FoldPair fold128;   // one 16-byte lane (SSE tail loop, lane combining)
  FoldPair fold512;   // four 16-byte lanes (SSE main loop; one 64-byte vector)
  FoldPair fold256;   // AVX-512: two lanes of a vector to the last one
  FoldPair fold384;   // AVX-512: three lanes
  FoldPair fold2048;  // AVX-512 main loop: four 64-byte vectors
  // 128 -> 96 -> 64 bits and Barrett reduction to the 32-bit register (crc32.cc,
  // reduce128): the x^96 and x^64 multipliers must keep the exact degree (the results must
  // shrink), so they are the reflected x^96 / x^64 mod P shifted left by one (33-bit operands,
  // times x^31 with the x of the multiply giving x^32).
  uint64_t x96;
  uint64_t x64;
  uint64_t mu;    // reflected floor(x^64 / P) (33 bits)
  uint64_t poly;  // reflected P (33 bits): 0x1DB710641
};

constexpr Constants make_constants() noexcept {
  return {fold_pair(128),
          fold_pair(512),
          fold_pair(256),
          fold_pair(384),
          fold_pair(2048),
          static_cast<uint64_t>(reflect32(xpow_mod(96))) << 1,
          static_cast<uint64_t>(reflect32(xpow_mod(64))) << 1,
          reflect33(barrett_mu()),
          reflect33((1ull << 32) | kCrc32Poly)};
}

inline constexpr Constants kConstants = make_constants();
static_assert(kConstants.poly == 0x1DB710641ull);

}  // namespace crc32_detail
}  // namespace urnic::wire

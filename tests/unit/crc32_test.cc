// CRC-32 kernels (dataplane/wire/crc32.h, issue 13): every implementation this CPU can run
// against a bitwise reference, for all short lengths and some long ones, at every source
// alignment and several destination alignments; the copy writes exactly [dst, dst + len);
// chaining; the masked update; and the fold constants re-derived by an independent method.
#include "dataplane/wire/crc32.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace urnic::wire {

// Test names and failure messages show the implementation by name.
void PrintTo(Crc32Impl impl, std::ostream* os) { *os << to_string(impl); }

namespace {

// The bitwise reflected CRC-32 register update (no inversion), one bit at a time.
uint32_t ref_update(uint32_t crc, const uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    crc ^= p[i];
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ ((crc & 1u) ? 0xEDB88320u : 0u);
  }
  return crc;
}

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

constexpr uint8_t kGuard = 0xA5;
constexpr size_t kGuardLen = 64;

// Runs crc32_update and crc32_copy over src[0, len) with the register `seed`, copying to a
// buffer at destination alignment `dst_align` surrounded by guard bytes; checks both results
// against `expected`, the copy against the source and the guards.
void check_one(const uint8_t* src, size_t len, size_t dst_align, uint32_t seed, uint32_t expected,
               std::vector<uint8_t>& dst_buf) {
  dst_buf.assign(kGuardLen + 64 + len + kGuardLen, kGuard);
  uint8_t* base = dst_buf.data() + kGuardLen;
  // base is the guard end; move dst to the wanted alignment mod 64.
  const size_t shift = (dst_align - reinterpret_cast<uintptr_t>(base) % 64 + 64) % 64;
  uint8_t* dst = base + shift;
  ASSERT_EQ(crc32_update(seed, src, len), expected) << "update len " << len;
  ASSERT_EQ(crc32_copy(seed, dst, src, len), expected)
      << "copy len " << len << " dst align " << dst_align;
  ASSERT_EQ(std::memcmp(dst, src, len), 0) << "copy len " << len;
  for (uint8_t* p = dst_buf.data(); p < dst; ++p)
    ASSERT_EQ(*p, kGuard) << "byte before dst written, len " << len;
  for (uint8_t* p = dst + len; p < dst_buf.data() + dst_buf.size(); ++p)
    ASSERT_EQ(*p, kGuard) << "byte after dst written, len " << len;
}

class Crc32ImplTest : public ::testing::TestWithParam<Crc32Impl> {
 protected:
  void SetUp() override {
    saved_ = crc32_impl();
    if (!crc32_set_impl(GetParam())) GTEST_SKIP() << "CPU lacks " << to_string(GetParam());
    ASSERT_EQ(crc32_impl(), GetParam());
  }
  void TearDown() override { crc32_set_impl(saved_); }
  Crc32Impl saved_{};
};

TEST_P(Crc32ImplTest, KnownAnswers) {
  auto crc = [](const std::string& s) { return ~crc32_update(~0u, s.data(), s.size()); };
  EXPECT_EQ(crc("123456789"), 0xCBF43926u);  // the CRC-32 check value
  EXPECT_EQ(crc(""), 0u);
  EXPECT_EQ(crc("a"), 0xE8B7BE43u);
  EXPECT_EQ(crc("The quick brown fox jumps over the lazy dog"), 0x414FA339u);
  EXPECT_EQ(crc32_update(~0u, "123456789", 9), ~0xCBF43926u);  // the raw register
  const std::vector<uint8_t> zeros(4096, 0);
  EXPECT_EQ(~crc32_update(~0u, zeros.data(), zeros.size()), ~ref_update(~0u, zeros.data(), 4096));
  std::vector<uint8_t> out(9);
  EXPECT_EQ(~crc32_copy(~0u, out.data(), "123456789", 9), 0xCBF43926u);
  EXPECT_EQ(std::string(out.begin(), out.end()), "123456789");
}

TEST_P(Crc32ImplTest, MatchesReferenceAllShortLengthsAndAlignments) {
  const auto data = random_bytes(300 + 16, 1);
  std::vector<uint8_t> dst;
  std::mt19937 rng(2);
  for (size_t len = 0; len <= 300; ++len) {
    for (size_t src_align = 0; src_align < 16; ++src_align) {
      const uint32_t seed = (len + src_align) % 3 == 0 ? ~0u : static_cast<uint32_t>(rng());
      const uint8_t* src = data.data() + src_align;
      const uint32_t expected = ref_update(seed, src, len);
      for (size_t dst_align : {0, 1, 5, 8, 15, 33})
        check_one(src, len, dst_align, seed, expected, dst);
      if (HasFatalFailure()) return;
    }
  }
}

TEST_P(Crc32ImplTest, MatchesReferenceLargeLengths) {
  const auto data = random_bytes(65536 + 16 + 64, 3);
  std::vector<uint8_t> dst;
  for (size_t len : {511, 512, 513, 1024, 1031, 4096, 4096 + 7, 16383, 65536}) {
    for (size_t src_align = 0; src_align < 16; ++src_align) {
      const uint8_t* src = data.data() + src_align;
      const uint32_t expected = ref_update(~0u, src, len);
      for (size_t dst_align : {0, 3, 16, 63}) check_one(src, len, dst_align, ~0u, expected, dst);
      if (HasFatalFailure()) return;
    }
  }
}

// crc32_update_masked is crc32_update over src | mask, at every length 0..300 and some long
// ones, source and mask at independent alignments.
TEST_P(Crc32ImplTest, MaskedMatchesReference) {
  const auto data = random_bytes(4096 + 7 + 16, 5);
  auto mask = random_bytes(4096 + 7 + 16, 6);
  for (size_t i = 0; i < mask.size(); ++i)
    if (i % 3 != 0) mask[i] = 0;  // mostly zero, like the ICRC's mask
  std::vector<size_t> lens;
  for (size_t n = 0; n <= 300; ++n) lens.push_back(n);
  for (size_t n : {1024, 4096, 4096 + 7}) lens.push_back(n);
  std::vector<uint8_t> ored(data.size());
  for (size_t len : lens) {
    for (size_t src_align : {0, 1, 8, 13}) {
      const size_t mask_align = (src_align * 5 + len) % 16;
      for (size_t i = 0; i < len; ++i) ored[i] = data[src_align + i] | mask[mask_align + i];
      const uint32_t seed = static_cast<uint32_t>(len * 2654435761u);
      ASSERT_EQ(crc32_update_masked(seed, data.data() + src_align, mask.data() + mask_align, len),
                ref_update(seed, ored.data(), len))
          << "len " << len << " src align " << src_align;
    }
  }
}

// A source that is its own allocation of exactly len bytes: the kernels read nothing past
// src + len (an ASan build reports such a read; here the values must match).
TEST_P(Crc32ImplTest, ReadsNothingPastTheEnd) {
  for (size_t len : {1, 15, 16, 17, 63, 64, 65, 255, 256, 257, 1000}) {
    const auto v = random_bytes(len, static_cast<uint32_t>(len));
    std::vector<uint8_t> exact(v);  // its own allocation of exactly len bytes
    std::vector<uint8_t> out(len);
    EXPECT_EQ(crc32_copy(~0u, out.data(), exact.data(), len), ref_update(~0u, v.data(), len));
    EXPECT_EQ(out, v);
  }
}

// crc32_short_masked (the ICRC's one pass over a whole frame) is the register from 0 over
// src | mask, for both mask spans, at every length 0..300 (under the span: the masked update)
// and some long ones (the head, then the update kernel); the source is its own allocation of
// exactly len bytes at several alignments, so an ASan build reports any read outside it.
TEST_P(Crc32ImplTest, ShortMaskedMatchesReference) {
  const auto data = random_bytes(4096 + 16, 7);
  std::vector<size_t> lens;
  for (size_t n = 0; n <= 300; ++n) lens.push_back(n);
  for (size_t n : {1000, 4096}) lens.push_back(n);
  for (size_t mask_len : {48, 64}) {
    LeadMask mask{};
    const auto m = random_bytes(mask_len, static_cast<uint32_t>(mask_len));
    for (size_t i = 0; i < mask_len; ++i) mask[i] = i % 3 == 0 ? m[i] : 0;
    for (size_t len : lens) {
      for (size_t align : {0, 5}) {
        std::vector<uint8_t> src(data.begin() + align, data.begin() + align + len);
        std::vector<uint8_t> ored(src);
        for (size_t i = 0; i < len && i < mask_len; ++i) ored[i] |= mask[i];
        ASSERT_EQ(crc32_short_masked(src.data(), len, mask, mask_len),
                  ref_update(0, ored.data(), len))
            << "len " << len << " mask_len " << mask_len << " align " << align;
      }
    }
  }
}

// CRC over A then B equals CRC over A||B, split at every offset, for update and copy, and
// mixing this implementation with the portable one on either side.
TEST_P(Crc32ImplTest, ChainingAtEverySplit) {
  const auto data = random_bytes(200, 4);
  const uint32_t whole = ref_update(~0u, data.data(), data.size());
  std::vector<uint8_t> out(200);
  for (size_t k = 0; k <= data.size(); ++k) {
    const uint8_t* b = data.data() + k;
    const size_t nb = data.size() - k;
    EXPECT_EQ(crc32_update(crc32_update(~0u, data.data(), k), b, nb), whole) << k;
    std::fill(out.begin(), out.end(), 0);
    const uint32_t s = crc32_copy(~0u, out.data(), data.data(), k);
    EXPECT_EQ(crc32_copy(s, out.data() + k, b, nb), whole) << k;
    EXPECT_EQ(out, data) << k;
    const uint32_t mine = crc32_update(~0u, data.data(), k);
    ASSERT_TRUE(crc32_set_impl(Crc32Impl::kPortable));
    EXPECT_EQ(crc32_update(mine, b, nb), whole) << k;
    const uint32_t portable = crc32_update(~0u, data.data(), k);
    ASSERT_TRUE(crc32_set_impl(GetParam()));
    EXPECT_EQ(crc32_update(portable, b, nb), whole) << k;
  }
}

INSTANTIATE_TEST_SUITE_P(Impls, Crc32ImplTest,
                         ::testing::Values(Crc32Impl::kPortable, Crc32Impl::kPclmul,
                                           Crc32Impl::kAvx512),
                         [](const auto& info) { return std::string(to_string(info.param)); });

// ---- Constants --------------------------------------------------------------------------------

uint32_t reflect32(uint32_t v) {
  uint32_t r = 0;
  for (int i = 0; i < 32; ++i) r |= ((v >> i) & 1u) << (31 - i);
  return r;
}

// x^n mod P (n >= 32) by the bitwise CRC instead of crc32_detail::xpow_mod: the raw register
// from 0 over a message M is M*x^32 mod P, reflected; the message with only the bit for x^(n-32)
// set (the first bit of byte 0 is the highest power) gives x^n mod P.
uint32_t xpow_by_crc(uint32_t n) {
  const uint32_t m = n - 32;  // degree of the single term
  const size_t bytes = m / 8 + 1;
  std::vector<uint8_t> msg(bytes, 0);
  const size_t pos = 8 * bytes - 1 - m;  // bit position from the start of the message
  msg[pos / 8] = static_cast<uint8_t>(1u << (pos % 8));
  return reflect32(ref_update(0, msg.data(), msg.size()));
}

// Carry-less product of two polynomials of degree < 64, as (high, low) 64-bit halves.
std::pair<uint64_t, uint64_t> clmul(uint64_t a, uint64_t b) {
  uint64_t hi = 0, lo = 0;
  for (int i = 0; i < 64; ++i) {
    if (!((b >> i) & 1u)) continue;
    lo ^= a << i;
    if (i != 0) hi ^= a >> (64 - i);
  }
  return {hi, lo};
}

TEST(Crc32Constants, PowersOfXReDerived) {
  for (uint32_t n : {32u, 33u, 63u, 64u, 95u, 96u, 159u, 200u, 479u, 543u, 1000u, 2111u, 4095u})
    EXPECT_EQ(crc32_detail::xpow_mod(n), xpow_by_crc(n)) << "x^" << n;
}

TEST(Crc32Constants, FoldConstantsReDerived) {
  const auto& c = crc32_detail::kConstants;
  // Folding over d bits multiplies the lane's high half by x^(d+64) and its low half by x^d;
  // the operands are x^(d+31) and x^(d-33) (crc32.h: the multiply adds x, the low-32-bit
  // placement x^32).
  auto pair_ok = [](const crc32_detail::FoldPair& p, uint32_t d) {
    return p.h == reflect32(xpow_by_crc(d + 31)) && p.l == reflect32(xpow_by_crc(d - 33));
  };
  EXPECT_TRUE(pair_ok(c.fold128, 128));
  EXPECT_TRUE(pair_ok(c.fold256, 256));
  EXPECT_TRUE(pair_ok(c.fold384, 384));
  EXPECT_TRUE(pair_ok(c.fold512, 512));
  EXPECT_TRUE(pair_ok(c.fold2048, 2048));
  // The reduction multipliers x^96 and x^64 mod P, reflected, times x^31 (shifted left by one).
  EXPECT_EQ(c.x96, static_cast<uint64_t>(reflect32(xpow_by_crc(96))) << 1);
  EXPECT_EQ(c.x64, static_cast<uint64_t>(reflect32(xpow_by_crc(64))) << 1);
  EXPECT_LT(c.x96, 1ull << 33);
  EXPECT_LT(c.x64, 1ull << 33);
}

uint64_t reflect33(uint64_t v) {
  uint64_t r = 0;
  for (int i = 0; i < 33; ++i) r |= ((v >> i) & 1u) << (32 - i);
  return r;
}

TEST(Crc32Constants, BarrettMuAndPolynomial) {
  const auto& c = crc32_detail::kConstants;
  const uint64_t p = (1ull << 32) | 0x04C11DB7u;
  EXPECT_EQ(c.poly, reflect33(p));
  EXPECT_EQ(reflect32(static_cast<uint32_t>(p)), 0xEDB88320u);
  // mu = floor(x^64 / P): mu * P = x^64 + r with deg r < 32, and deg mu = 32.
  const uint64_t mu = reflect33(c.mu);
  EXPECT_EQ(mu >> 32, 1u);
  const auto [hi, lo] = clmul(mu, p);
  EXPECT_EQ(hi, 1u);
  EXPECT_EQ(lo >> 32, 0u);
  EXPECT_EQ(mu, crc32_detail::barrett_mu());
}

TEST(Crc32Select, InitChoosesTheBestAndSetImplSticks) {
  const Crc32Impl best = crc32_supported(Crc32Impl::kAvx512)   ? Crc32Impl::kAvx512
                         : crc32_supported(Crc32Impl::kPclmul) ? Crc32Impl::kPclmul
                                                               : Crc32Impl::kPortable;
  crc32_init();
  EXPECT_EQ(crc32_impl(), best);
  EXPECT_TRUE(crc32_supported(Crc32Impl::kPortable));
  ASSERT_TRUE(crc32_set_impl(Crc32Impl::kPortable));
  crc32_init();  // does not undo a forced choice
  EXPECT_EQ(crc32_impl(), Crc32Impl::kPortable);
  for (Crc32Impl i : {Crc32Impl::kPclmul, Crc32Impl::kAvx512}) {
    EXPECT_EQ(crc32_set_impl(i), crc32_supported(i));
    if (crc32_supported(i)) {
      EXPECT_EQ(crc32_impl(), i);
    }
  }
  ASSERT_TRUE(crc32_set_impl(best));
  std::printf("crc32: best implementation on this CPU: %s\n", to_string(best));
}

}  // namespace
}  // namespace urnic::wire

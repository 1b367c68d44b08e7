// Memory-region table: key layout and tags, PD / access / bounds checks, FRMR translation with a
// first byte offset over a page list, and the per-entry sequence lock under a concurrent
// fast-register / invalidate writer (dataplane/mr.h; architecture.md §4; IBTA §10.6, §10.7.2.3).
#include "dataplane/mr.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <limits>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "urnic/types.h"

namespace urnic::dp {
namespace {

constexpr uint32_t kPd = 7;
constexpr uint64_t kSeed = 0x5EEDF00DCAFEull;
constexpr uint8_t kGuard = 0xEE;

uint64_t addr_of(const void* p) { return reinterpret_cast<uint64_t>(p); }

// `n` page-aligned pages of kMrPageSize bytes carved out of a vector (one spare page of slack
// for the alignment), all set to kGuard.
class Pages {
 public:
  explicit Pages(size_t n) : n_(n), raw_((n + 1) * kMrPageSize, kGuard) {
    const uint64_t a = addr_of(raw_.data());
    base_ = raw_.data() + ((kMrPageSize - a % kMrPageSize) % kMrPageSize);
  }
  uint8_t* page(size_t i) { return base_ + i * kMrPageSize; }
  uint64_t page_addr(size_t i) { return addr_of(page(i)); }
  uint8_t* data() { return base_; }
  size_t size() const { return n_ * kMrPageSize; }

 private:
  size_t n_;
  std::vector<uint8_t> raw_;
  uint8_t* base_;
};

// ---- Registered regions ------------------------------------------------------------------------

TEST(MrTable, RegisterLookupDeregister) {
  MrTable t(16, kSeed);
  std::vector<uint8_t> buf(1000);
  const uint64_t va = addr_of(buf.data());
  uint32_t key = 0;
  ASSERT_EQ(t.register_region(kPd, va, buf.size(), access::kLocalWrite, &key), Status::kSuccess);
  EXPECT_EQ(t.live(), 1u);
  EXPECT_EQ(t.check(key, kPd, va, buf.size(), access::kLocalRead), MrCheck::kOk);
  EXPECT_EQ(t.check(key, kPd, va + 10, 20, access::kLocalWrite), MrCheck::kOk);

  ASSERT_EQ(t.deregister(key), Status::kSuccess);
  EXPECT_EQ(t.live(), 0u);
  EXPECT_EQ(t.check(key, kPd, va, 1, access::kLocalRead), MrCheck::kInvalidKey);
  EXPECT_EQ(t.deregister(key), Status::kInvalidParameter);
  EXPECT_EQ(t.deregister(make_key(0, key_tag(key))), Status::kInvalidParameter);
  EXPECT_EQ(t.deregister(make_key(16, 0)), Status::kInvalidParameter);
}

TEST(MrTable, RegisterRejectsBadArguments) {
  MrTable t(16, kSeed);
  uint32_t key = 0;
  EXPECT_EQ(t.register_region(kPd, 0x1000, 0, 0, &key), Status::kInvalidParameter);
  EXPECT_EQ(t.register_region(kPd, 0, 4096, 0, &key), Status::kInvalidParameter);
  const uint64_t top = std::numeric_limits<uint64_t>::max() - 100;
  EXPECT_EQ(t.register_region(kPd, top, 101, 0, &key), Status::kInvalidParameter);
  EXPECT_EQ(t.register_region(kPd, top, 100, 0, &key), Status::kSuccess);
  EXPECT_EQ(t.register_region(kPd, 0x1000, 16, 0, nullptr), Status::kInvalidParameter);
  EXPECT_EQ(t.live(), 1u);
}

TEST(MrTable, KeyIsIndexShiftedOverTag) {
  static_assert(make_key(0xABCDEF, 0x12) == 0xABCDEF12u);
  static_assert(key_index(0xABCDEF12u) == 0xABCDEFu);
  static_assert(key_tag(0xABCDEF12u) == 0x12);
  MrTable t(8, kSeed);
  uint64_t word = 0;
  uint32_t k1 = 0, k2 = 0;
  ASSERT_EQ(t.register_region(kPd, addr_of(&word), 8, 0, &k1), Status::kSuccess);
  ASSERT_EQ(t.register_region(kPd, addr_of(&word), 8, 0, &k2), Status::kSuccess);
  // Index 0 is never used; entries are handed out round-robin from 1.
  EXPECT_EQ(key_index(k1), 1u);
  EXPECT_EQ(key_index(k2), 2u);
  EXPECT_EQ(k1, key_index(k1) << 8 | key_tag(k1));
  EXPECT_EQ(make_key(key_index(k2), key_tag(k2)), k2);
  // Any other tag at the same index is stale; index 0 and indices past the end are invalid.
  EXPECT_EQ(t.check(make_key(1, key_tag(k1) ^ 1), kPd, addr_of(&word), 8, 0), MrCheck::kStaleKey);
  EXPECT_EQ(t.check(make_key(0, key_tag(k1)), kPd, addr_of(&word), 8, 0), MrCheck::kInvalidKey);
  EXPECT_EQ(t.check(make_key(8, key_tag(k1)), kPd, addr_of(&word), 8, 0), MrCheck::kInvalidKey);
  EXPECT_EQ(t.check(make_key(3, 0), kPd, addr_of(&word), 8, 0), MrCheck::kInvalidKey);
}

TEST(MrTable, StaleKeyAfterReRegistrationAndDeregister) {
  MrTable t(2, kSeed);  // one usable entry: every registration reuses index 1
  std::vector<uint8_t> buf(64);
  const uint64_t va = addr_of(buf.data());
  uint32_t k1 = 0, k2 = 0;
  ASSERT_EQ(t.register_region(kPd, va, 64, 0, &k1), Status::kSuccess);
  ASSERT_EQ(t.deregister(k1), Status::kSuccess);
  EXPECT_EQ(t.check(k1, kPd, va, 8, 0), MrCheck::kInvalidKey);  // free entry
  ASSERT_EQ(t.register_region(kPd, va, 64, 0, &k2), Status::kSuccess);
  ASSERT_EQ(key_index(k2), key_index(k1));
  EXPECT_NE(key_tag(k2), key_tag(k1));
  EXPECT_EQ(t.check(k1, kPd, va, 8, 0), MrCheck::kStaleKey);  // same entry, new tag
  EXPECT_EQ(t.check(k2, kPd, va, 8, 0), MrCheck::kOk);
}

// Tags over many re-registrations of one entry: never the previous tag, never its successor,
// spread over all 256 values, with no fixed stride, and reproducible from the seed.
std::vector<uint8_t> tag_sequence(uint64_t seed, int n) {
  MrTable t(2, seed);
  uint64_t word = 0;
  std::vector<uint8_t> tags;
  for (int i = 0; i < n; ++i) {
    uint32_t k = 0;
    EXPECT_EQ(t.register_region(kPd, addr_of(&word), 8, 0, &k), Status::kSuccess);
    EXPECT_EQ(t.deregister(k), Status::kSuccess);
    tags.push_back(key_tag(k));
  }
  return tags;
}

TEST(MrTable, TagsAreUnpredictableAndNeverRepeatThePrevious) {
  constexpr int kN = 4096;
  const std::vector<uint8_t> tags = tag_sequence(kSeed, kN);
  std::array<int, 256> hist{};
  std::set<uint8_t> strides;
  int successors = 0, repeats = 0;
  for (int i = 0; i < kN; ++i) {
    ++hist[tags[i]];
    if (i == 0) continue;
    repeats += tags[i] == tags[i - 1];
    successors += tags[i] == static_cast<uint8_t>(tags[i - 1] + 1);
    strides.insert(static_cast<uint8_t>(tags[i] - tags[i - 1]));
  }
  EXPECT_EQ(repeats, 0);
  EXPECT_EQ(successors, 0);
  // A counter has one stride; random tags show nearly all 254 allowed ones.
  EXPECT_GT(strides.size(), 240u);
  // 16 expected per value (sd 4): every value seen, none wildly over-represented.
  const auto [lo, hi] = std::minmax_element(hist.begin(), hist.end());
  EXPECT_GT(*lo, 0);
  EXPECT_LT(*hi, 48);
  EXPECT_EQ(tag_sequence(kSeed, 64), std::vector<uint8_t>(tags.begin(), tags.begin() + 64));
  EXPECT_NE(tag_sequence(kSeed + 1, 64), std::vector<uint8_t>(tags.begin(), tags.begin() + 64));
}

TEST(MrTable, PdMismatch) {
  MrTable t(8, kSeed);
  std::vector<uint8_t> buf(64);
  uint32_t key = 0;
  ASSERT_EQ(t.register_region(kPd, addr_of(buf.data()), 64, access::kAll, &key), Status::kSuccess);
  EXPECT_EQ(t.check(key, kPd + 1, addr_of(buf.data()), 8, 0), MrCheck::kPdMismatch);
  EXPECT_EQ(t.copy_in(key, kPd + 1, addr_of(buf.data()), "x", 1, 0), MrCheck::kPdMismatch);
  EXPECT_EQ(buf[0], 0);
}

TEST(MrTable, EveryAccessBitIsCheckedOnItsOwn) {
  constexpr std::array<uint32_t, 5> kBits = {access::kLocalWrite, access::kRemoteRead,
                                             access::kRemoteWrite, access::kRemoteAtomic,
                                             access::kReadSink};
  static_assert((kBits[0] | kBits[1] | kBits[2] | kBits[3] | kBits[4]) == access::kAll);
  MrTable t(16, kSeed);
  std::vector<uint8_t> buf(64);
  const uint64_t va = addr_of(buf.data());
  for (uint32_t granted : kBits) {
    uint32_t key = 0;
    ASSERT_EQ(t.register_region(kPd, va, 64, granted, &key), Status::kSuccess);
    EXPECT_EQ(t.check(key, kPd, va, 8, access::kLocalRead), MrCheck::kOk);
    for (uint32_t asked : kBits) {
      EXPECT_EQ(t.check(key, kPd, va, 8, asked),
                asked == granted ? MrCheck::kOk : MrCheck::kAccessDenied)
          << "granted " << granted << " asked " << asked;
    }
    // Every bit asked must be granted.
    EXPECT_EQ(t.check(key, kPd, va, 8, granted | (granted == 1 ? 2u : 1u)), MrCheck::kAccessDenied);
    ASSERT_EQ(t.deregister(key), Status::kSuccess);
  }
  uint32_t all = 0;
  ASSERT_EQ(t.register_region(kPd, va, 64, access::kAll, &all), Status::kSuccess);
  EXPECT_EQ(t.check(all, kPd, va, 8, access::kAll), MrCheck::kOk);
  EXPECT_EQ(t.check(all, kPd, va, 8, 1u << 20), MrCheck::kAccessDenied);  // unknown right
}

TEST(MrTable, AccessFromNdkFlags) {
  // The rights an MR flag and the operation flag of the same name grant.
  struct SameName {
    uint32_t mr, op, rights;
  };
  constexpr SameName kSameName[] = {
      {mr_flag::kAllowLocalWrite, op_flag::kAllowLocalWrite, access::kLocalWrite},
      {mr_flag::kAllowRemoteRead, op_flag::kAllowRemoteRead, access::kRemoteRead},
      {mr_flag::kAllowRemoteWrite, op_flag::kAllowRemoteWrite,
       access::kRemoteWrite | access::kLocalWrite},
      {mr_flag::kRdmaReadSink, op_flag::kRdmaReadSink, access::kReadSink},
      {mr_flag::kAllowRemoteAtomic, op_flag::kAllowRemoteAtomic, access::kRemoteAtomic},
  };
  EXPECT_EQ(access_from_mr_flags(mr_flag::kAllowLocalRead), access::kLocalRead);
  for (const SameName& c : kSameName) EXPECT_EQ(access_from_mr_flags(c.mr), c.rights) << c.mr;
  EXPECT_EQ(access_from_mr_flags(mr_flag::kAllowRemoteRead | mr_flag::kAllowRemoteWrite |
                                 mr_flag::kRdmaReadSink | mr_flag::kAllowRemoteAtomic),
            access::kAll);

  EXPECT_EQ(access_from_op_flags(0), 0u);
  for (const SameName& c : kSameName) EXPECT_EQ(access_from_op_flags(c.op), c.rights) << c.op;
  // Flags that are not access rights convert to nothing.
  EXPECT_EQ(access_from_op_flags(op_flag::kSilentSuccess | op_flag::kReadFence | op_flag::kInline |
                                 op_flag::kDefer),
            0u);
}

TEST(MrTable, BoundsAtBothEndsAndOverflow) {
  MrTable t(8, kSeed);
  std::vector<uint8_t> buf(256);
  const uint64_t va = addr_of(buf.data()), n = buf.size();
  uint32_t key = 0;
  ASSERT_EQ(t.register_region(kPd, va, n, 0, &key), Status::kSuccess);
  EXPECT_EQ(t.check(key, kPd, va, n, 0), MrCheck::kOk);
  EXPECT_EQ(t.check(key, kPd, va, n + 1, 0), MrCheck::kOutOfBounds);
  EXPECT_EQ(t.check(key, kPd, va - 1, 1, 0), MrCheck::kOutOfBounds);  // below the start
  EXPECT_EQ(t.check(key, kPd, va - 1, 2, 0), MrCheck::kOutOfBounds);
  EXPECT_EQ(t.check(key, kPd, va + n - 1, 1, 0), MrCheck::kOk);  // the last byte
  EXPECT_EQ(t.check(key, kPd, va + n - 1, 2, 0), MrCheck::kOutOfBounds);
  EXPECT_EQ(t.check(key, kPd, va + n, 1, 0), MrCheck::kOutOfBounds);
  // len 0: anywhere inside or at the end, not beyond.
  EXPECT_EQ(t.check(key, kPd, va, 0, 0), MrCheck::kOk);
  EXPECT_EQ(t.check(key, kPd, va + n, 0, 0), MrCheck::kOk);
  EXPECT_EQ(t.check(key, kPd, va + n + 1, 0, 0), MrCheck::kOutOfBounds);
  EXPECT_EQ(t.check(key, kPd, va - 1, 0, 0), MrCheck::kOutOfBounds);
  // va + len wraps past 2^64 and would land inside the region if computed naively.
  EXPECT_EQ(t.check(key, kPd, va + 1, std::numeric_limits<uint64_t>::max(), 0),
            MrCheck::kOutOfBounds);
  EXPECT_EQ(t.check(key, kPd, va + 8, ~uint64_t{0} - 7, 0), MrCheck::kOutOfBounds);

  // A region at the top of the address space (never dereferenced here).
  const uint64_t top = std::numeric_limits<uint64_t>::max() - 8192;
  uint32_t hi = 0;
  ASSERT_EQ(t.register_region(kPd, top, 4096, 0, &hi), Status::kSuccess);
  EXPECT_EQ(t.check(hi, kPd, top + 4000, 96, 0), MrCheck::kOk);
  EXPECT_EQ(t.check(hi, kPd, top + 4000, 97, 0), MrCheck::kOutOfBounds);
  EXPECT_EQ(t.check(hi, kPd, top + 4000, ~uint64_t{0} - 5000, 0), MrCheck::kOutOfBounds);
  EXPECT_EQ(t.check(hi, kPd, ~uint64_t{0}, 1, 0), MrCheck::kOutOfBounds);
}

TEST(MrTable, CopyChecksEverythingBeforeTouchingAByte) {
  MrTable t(8, kSeed);
  std::vector<uint8_t> buf(128, kGuard), src(128, 0x11), dst(128, 0x22);
  const uint64_t va = addr_of(buf.data());
  uint32_t key = 0;
  ASSERT_EQ(t.register_region(kPd, va, 64, access::kLocalWrite, &key), Status::kSuccess);
  // Partly out of bounds: nothing written, not even the in-bounds prefix.
  EXPECT_EQ(t.copy_in(key, kPd, va + 32, src.data(), 33, access::kLocalWrite),
            MrCheck::kOutOfBounds);
  EXPECT_EQ(t.copy_in(key, kPd, va, src.data(), 16, access::kRemoteWrite), MrCheck::kAccessDenied);
  EXPECT_EQ(t.copy_in(key ^ 1, kPd, va, src.data(), 16, access::kLocalWrite), MrCheck::kStaleKey);
  EXPECT_TRUE(std::all_of(buf.begin(), buf.end(), [](uint8_t b) { return b == kGuard; }));
  EXPECT_EQ(t.copy_out(key, kPd, va + 60, dst.data(), 5, 0), MrCheck::kOutOfBounds);
  EXPECT_TRUE(std::all_of(dst.begin(), dst.end(), [](uint8_t b) { return b == 0x22; }));

  ASSERT_EQ(t.copy_in(key, kPd, va + 8, src.data(), 56, access::kLocalWrite), MrCheck::kOk);
  for (size_t i = 0; i < buf.size(); ++i) {
    ASSERT_EQ(buf[i], i >= 8 && i < 64 ? 0x11 : kGuard) << i;
  }
  ASSERT_EQ(t.copy_out(key, kPd, va + 4, dst.data(), 8, 0), MrCheck::kOk);
  EXPECT_EQ(std::vector<uint8_t>(dst.begin(), dst.begin() + 8),
            (std::vector<uint8_t>{kGuard, kGuard, kGuard, kGuard, 0x11, 0x11, 0x11, 0x11}));
  EXPECT_EQ(dst[8], 0x22);
  EXPECT_EQ(t.copy_in(key, kPd, va + 64, nullptr, 0, access::kLocalWrite), MrCheck::kOk);
}

TEST(MrTable, ResolveRegisteredIsOneSegment) {
  MrTable t(8, kSeed);
  std::vector<uint8_t> buf(3 * kMrPageSize);
  const uint64_t va = addr_of(buf.data());
  uint32_t key = 0;
  ASSERT_EQ(t.register_region(kPd, va, buf.size(), 0, &key), Status::kSuccess);
  MrSegment segs[2];
  uint32_t n = 99;
  ASSERT_EQ(t.resolve(key, kPd, va + 100, 2 * kMrPageSize, 0, segs, 2, &n), MrCheck::kOk);
  ASSERT_EQ(n, 1u);
  EXPECT_EQ(segs[0].ptr, buf.data() + 100);
  EXPECT_EQ(segs[0].len, 2 * kMrPageSize);
  ASSERT_EQ(t.resolve(key, kPd, va, 0, 0, segs, 0, &n), MrCheck::kOk);
  EXPECT_EQ(n, 0u);
  EXPECT_EQ(t.resolve(key, kPd, va, 1, 0, segs, 0, &n), MrCheck::kTooLarge);
}

TEST(MrTable, AtomicTargetNeedsAlignmentAndRights) {
  MrTable t(8, kSeed);
  alignas(8) std::array<uint64_t, 4> words{};
  const uint64_t va = addr_of(words.data());
  uint32_t key = 0, ro = 0;
  ASSERT_EQ(t.register_region(kPd, va, sizeof(words), access::kRemoteAtomic, &key),
            Status::kSuccess);
  ASSERT_EQ(t.register_region(kPd, va, sizeof(words), access::kRemoteRead, &ro), Status::kSuccess);
  uint64_t* w = nullptr;
  ASSERT_EQ(t.atomic_target(key, kPd, va + 8, &w), MrCheck::kOk);
  EXPECT_EQ(w, &words[1]);
  ASSERT_EQ(t.atomic_target(key, kPd, va + 24, &w), MrCheck::kOk);  // the last word
  EXPECT_EQ(w, &words[3]);
  EXPECT_EQ(t.atomic_target(key, kPd, va + 32, &w), MrCheck::kOutOfBounds);
  for (uint64_t mis = 1; mis < 8; ++mis) {
    EXPECT_EQ(t.atomic_target(key, kPd, va + mis, &w), MrCheck::kOutOfBounds) << mis;
  }
  EXPECT_EQ(t.atomic_target(ro, kPd, va, &w), MrCheck::kAccessDenied);
  EXPECT_EQ(t.atomic_target(key, kPd + 1, va, &w), MrCheck::kPdMismatch);
}

TEST(MrTable, TableFull) {
  MrTable t(4, kSeed);  // index 0 unused: 3 regions
  uint64_t word = 0;
  uint32_t k[3] = {}, extra = 0;
  ASSERT_EQ(t.register_region(kPd, addr_of(&word), 8, 0, &k[0]), Status::kSuccess);
  ASSERT_EQ(t.alloc_fast_register(kPd, 4, true, &k[1]), Status::kSuccess);
  ASSERT_EQ(t.register_region(kPd, addr_of(&word), 8, 0, &k[2]), Status::kSuccess);
  EXPECT_EQ(t.live(), 3u);
  EXPECT_EQ(t.register_region(kPd, addr_of(&word), 8, 0, &extra), Status::kInsufficientResources);
  EXPECT_EQ(t.alloc_fast_register(kPd, 1, false, &extra), Status::kInsufficientResources);
  ASSERT_EQ(t.deregister(k[1]), Status::kSuccess);
  ASSERT_EQ(t.register_region(kPd, addr_of(&word), 8, 0, &extra), Status::kSuccess);
  EXPECT_EQ(key_index(extra), key_index(k[1]));
  EXPECT_EQ(t.live(), 3u);
}

TEST(MrTable, ToStringNamesEveryValue) {
  std::set<std::string> names;
  for (int i = 0; i < static_cast<int>(MrCheck::kCount); ++i) {
    const char* s = to_string(static_cast<MrCheck>(i));
    ASSERT_NE(s, nullptr);
    EXPECT_STRNE(s, "unknown") << i;
    names.insert(s);
  }
  EXPECT_EQ(names.size(), static_cast<size_t>(MrCheck::kCount));
  EXPECT_STREQ(to_string(MrCheck::kOk), "ok");
  EXPECT_STREQ(to_string(MrCheck::kStaleKey), "stale_key");
  EXPECT_STREQ(to_string(MrCheck::kCount), "unknown");
}

// ---- Fast-register regions ---------------------------------------------------------------------

// A FRMR over three data pages with a guard page around each one (guard, d0, guard, d1, guard,
// d2, guard), mapped in a scrambled order so that translation must follow the page list.
struct GuardedFrmr {
  static constexpr uint32_t kNpages = 3;
  static constexpr uint32_t kFbo = 100;
  static constexpr uint64_t kLength = kNpages * kMrPageSize - kFbo - 60;
  static constexpr uint64_t kBaseVa = 0x7F00'0000'0123ull;

  MrTable t{8, kSeed};
  Pages mem{2 * kNpages + 1};
  std::array<uint64_t, kNpages> list{mem.page_addr(5), mem.page_addr(1), mem.page_addr(3)};
  uint32_t key = 0;

  MrCheck map(uint32_t acc) {
    uint32_t alloc_key = 0;
    EXPECT_EQ(t.alloc_fast_register(kPd, kNpages, true, &alloc_key), Status::kSuccess);
    key = t.next_fast_register_key(alloc_key);
    return t.fast_register(key, kPd, list.data(), kNpages, kFbo, kLength, kBaseVa, acc);
  }
  // Host byte behind region offset `off`, computed independently of MrTable.
  uint8_t* host(uint64_t off) {
    const uint64_t pos = off + kFbo;
    return reinterpret_cast<uint8_t*>(list[pos / kMrPageSize]) + pos % kMrPageSize;
  }
};

TEST(Frmr, AllocatedRegionIsInvalidUntilFastRegistered) {
  MrTable t(8, kSeed);
  uint32_t key = 0;
  ASSERT_EQ(t.alloc_fast_register(kPd, 4, true, &key), Status::kSuccess);
  EXPECT_EQ(t.live(), 1u);
  EXPECT_EQ(t.check(key, kPd, 0, 0, 0), MrCheck::kInvalidated);
  const uint32_t next = t.next_fast_register_key(key);
  EXPECT_EQ(key_index(next), key_index(key));
  EXPECT_NE(key_tag(next), key_tag(key));
  EXPECT_NE(key_tag(next), static_cast<uint8_t>(key_tag(key) + 1));
  EXPECT_EQ(t.alloc_fast_register(kPd, MrTable::kMaxFrmrPages + 1, true, &key),
            Status::kImplementationLimit);
  EXPECT_EQ(t.alloc_fast_register(kPd, 1, true, nullptr), Status::kInvalidParameter);
}

TEST(Frmr, CopyInWritesExactlyTheMappedBytes) {
  GuardedFrmr f;
  ASSERT_EQ(f.map(access::kRemoteWrite | access::kLocalWrite), MrCheck::kOk);
  const std::vector<uint8_t> before(f.mem.data(), f.mem.data() + f.mem.size());

  // Starts 4000 bytes into page-list entry 0 and ends 204 bytes into entry 2.
  constexpr uint64_t kOff = 3900, kLen = kMrPageSize + 300;
  std::vector<uint8_t> src(kLen);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 7 + 3);
  ASSERT_EQ(
      f.t.copy_in(f.key, kPd, GuardedFrmr::kBaseVa + kOff, src.data(), kLen, access::kRemoteWrite),
      MrCheck::kOk);
  std::vector<uint8_t> want = before;
  for (uint64_t i = 0; i < kLen; ++i) want[f.host(kOff + i) - f.mem.data()] = src[i];
  size_t wrong = 0;
  for (size_t i = 0; i < want.size(); ++i) wrong += f.mem.data()[i] != want[i];
  EXPECT_EQ(wrong, 0u);

  // copy_out reads the same bytes back through the page list.
  std::vector<uint8_t> back(kLen);
  ASSERT_EQ(f.t.copy_out(f.key, kPd, GuardedFrmr::kBaseVa + kOff, back.data(), kLen, 0),
            MrCheck::kOk);
  EXPECT_EQ(back, src);

  // The whole region: the FBO bytes before it and the tail after it stay guard bytes.
  std::vector<uint8_t> all(GuardedFrmr::kLength, 0x5C);
  ASSERT_EQ(
      f.t.copy_in(f.key, kPd, GuardedFrmr::kBaseVa, all.data(), all.size(), access::kLocalWrite),
      MrCheck::kOk);
  for (size_t i = 0; i < f.mem.size(); ++i) {
    const bool mapped = std::any_of(f.list.begin(), f.list.end(), [&](uint64_t p) {
      const uint64_t a = addr_of(f.mem.data() + i);
      return a >= p && a < p + kMrPageSize;
    });
    const uint64_t a = addr_of(f.mem.data() + i);
    const bool inside = mapped && !(a >= f.list[0] && a < f.list[0] + GuardedFrmr::kFbo) &&
                        !(a >= f.list[2] + kMrPageSize - 60 && a < f.list[2] + kMrPageSize);
    if (inside) {
      ASSERT_EQ(f.mem.data()[i], 0x5C) << i;
    } else if (mapped) {
      ASSERT_EQ(f.mem.data()[i], before[i]) << i;  // FBO head / tail of the data pages
    } else {
      ASSERT_EQ(f.mem.data()[i], kGuard) << i;  // guard pages
    }
  }
  // One byte past either end fails and writes nothing.
  const std::vector<uint8_t> snap(f.mem.data(), f.mem.data() + f.mem.size());
  EXPECT_EQ(f.t.copy_in(f.key, kPd, GuardedFrmr::kBaseVa - 1, src.data(), 2, 0),
            MrCheck::kOutOfBounds);
  EXPECT_EQ(
      f.t.copy_in(f.key, kPd, GuardedFrmr::kBaseVa + GuardedFrmr::kLength - 1, src.data(), 2, 0),
      MrCheck::kOutOfBounds);
  EXPECT_TRUE(std::equal(snap.begin(), snap.end(), f.mem.data()));
}

TEST(Frmr, ResolveSplitsAtPageBoundaries) {
  GuardedFrmr f;
  ASSERT_EQ(f.map(access::kRemoteRead), MrCheck::kOk);
  MrSegment segs[4];
  uint32_t n = 0;
  // Region offset 3900 is byte 4000 of entry 0: 96 bytes there, a whole page, 204 bytes.
  ASSERT_EQ(f.t.resolve(f.key, kPd, GuardedFrmr::kBaseVa + 3900, kMrPageSize + 300,
                        access::kRemoteRead, segs, 4, &n),
            MrCheck::kOk);
  ASSERT_EQ(n, 3u);
  EXPECT_EQ(segs[0].ptr, f.host(3900));
  EXPECT_EQ(segs[0].len, 96u);
  EXPECT_EQ(segs[1].ptr, reinterpret_cast<uint8_t*>(f.list[1]));
  EXPECT_EQ(segs[1].len, kMrPageSize);
  EXPECT_EQ(segs[2].ptr, reinterpret_cast<uint8_t*>(f.list[2]));
  EXPECT_EQ(segs[2].len, 204u);
  EXPECT_EQ(f.t.resolve(f.key, kPd, GuardedFrmr::kBaseVa + 3900, kMrPageSize + 300,
                        access::kRemoteRead, segs, 2, &n),
            MrCheck::kTooLarge);
  // Inside one page: one segment; ending exactly at a page boundary: no empty segment.
  ASSERT_EQ(f.t.resolve(f.key, kPd, GuardedFrmr::kBaseVa, kMrPageSize - GuardedFrmr::kFbo, 0, segs,
                        1, &n),
            MrCheck::kOk);
  ASSERT_EQ(n, 1u);
  EXPECT_EQ(segs[0].ptr, reinterpret_cast<uint8_t*>(f.list[0]) + GuardedFrmr::kFbo);
  // len 0 at the very end of the region.
  ASSERT_EQ(f.t.resolve(f.key, kPd, GuardedFrmr::kBaseVa + GuardedFrmr::kLength, 0, 0, segs, 0, &n),
            MrCheck::kOk);
  EXPECT_EQ(n, 0u);
  EXPECT_EQ(f.t.resolve(f.key, kPd, GuardedFrmr::kBaseVa, 8, access::kRemoteWrite, segs, 4, &n),
            MrCheck::kAccessDenied);
}

TEST(Frmr, InvalidateThenStale) {
  GuardedFrmr f;
  ASSERT_EQ(f.map(access::kRemoteRead), MrCheck::kOk);
  const uint32_t k1 = f.key;
  const uint64_t va = GuardedFrmr::kBaseVa;
  EXPECT_EQ(f.t.invalidate(k1, kPd + 1), MrCheck::kPdMismatch);
  EXPECT_EQ(f.t.invalidate(k1 ^ 0x80, kPd), MrCheck::kStaleKey);
  ASSERT_EQ(f.t.invalidate(k1, kPd), MrCheck::kOk);
  EXPECT_EQ(f.t.check(k1, kPd, va, 8, 0), MrCheck::kInvalidated);
  EXPECT_EQ(f.t.invalidate(k1, kPd), MrCheck::kInvalidated);
  uint8_t byte = 0;
  EXPECT_EQ(f.t.copy_out(k1, kPd, va, &byte, 1, 0), MrCheck::kInvalidated);

  // The next FastRegister must bring a new tag; once it has, the old key is stale.
  EXPECT_EQ(f.t.fast_register(k1, kPd, f.list.data(), 3, GuardedFrmr::kFbo, 64, va, 0),
            MrCheck::kStaleKey);
  const uint32_t k2 = f.t.next_fast_register_key(k1);
  ASSERT_EQ(f.t.fast_register(k2, kPd, f.list.data(), 3, GuardedFrmr::kFbo, 64, va, 0),
            MrCheck::kOk);
  EXPECT_EQ(f.t.check(k1, kPd, va, 8, 0), MrCheck::kStaleKey);
  EXPECT_EQ(f.t.check(k2, kPd, va, 8, 0), MrCheck::kOk);
  EXPECT_EQ(f.t.check(k2, kPd, va, 65, 0), MrCheck::kOutOfBounds);  // the new length

  // Deregister accepts any tag of a live entry; afterwards every key is invalid.
  ASSERT_EQ(f.t.deregister(k1), Status::kSuccess);
  EXPECT_EQ(f.t.check(k2, kPd, va, 8, 0), MrCheck::kInvalidKey);
  EXPECT_EQ(f.t.invalidate(k2, kPd), MrCheck::kInvalidKey);
}

TEST(Frmr, FastRegisterOnlyOnAnInvalidFrmr) {
  GuardedFrmr f;
  ASSERT_EQ(f.map(0), MrCheck::kOk);
  const uint32_t again = f.t.next_fast_register_key(f.key);
  EXPECT_EQ(f.t.fast_register(again, kPd, f.list.data(), 1, 0, 16, 0x1000, 0),
            MrCheck::kBadState);  // still valid
  EXPECT_EQ(f.t.fast_register(make_key(6, 1), kPd, f.list.data(), 1, 0, 16, 0x1000, 0),
            MrCheck::kInvalidKey);  // free entry
  EXPECT_EQ(f.t.fast_register(make_key(0, 1), kPd, f.list.data(), 1, 0, 16, 0x1000, 0),
            MrCheck::kInvalidKey);

  uint64_t word = 0;
  uint32_t reg = 0;
  ASSERT_EQ(f.t.register_region(kPd, addr_of(&word), 8, 0, &reg), Status::kSuccess);
  EXPECT_EQ(f.t.fast_register(make_key(key_index(reg), key_tag(reg) ^ 0x55), kPd, f.list.data(), 1,
                              0, 16, 0x1000, 0),
            MrCheck::kBadState);
  EXPECT_EQ(f.t.invalidate(reg, kPd), MrCheck::kBadState);
  EXPECT_EQ(f.t.check(reg, kPd, addr_of(&word), 8, 0), MrCheck::kOk);
}

TEST(Frmr, FastRegisterParameterChecks) {
  MrTable t(8, kSeed);
  Pages mem(4);
  const std::array<uint64_t, 4> pages{mem.page_addr(0), mem.page_addr(1), mem.page_addr(2),
                                      mem.page_addr(3)};
  uint32_t local_only = 0, remote = 0;
  ASSERT_EQ(t.alloc_fast_register(kPd, 2, false, &local_only), Status::kSuccess);
  ASSERT_EQ(t.alloc_fast_register(kPd, 2, true, &remote), Status::kSuccess);
  const uint32_t kl = t.next_fast_register_key(local_only);
  const uint32_t kr = t.next_fast_register_key(remote);
  const uint64_t va = 0x4000'0000;
  // Remote rights on a region allocated without remote access.
  for (uint32_t a : {access::kRemoteRead, access::kRemoteWrite, access::kRemoteAtomic}) {
    EXPECT_EQ(t.fast_register(kl, kPd, pages.data(), 1, 0, 16, va, a), MrCheck::kAccessDenied);
  }
  EXPECT_EQ(t.fast_register(kl, kPd + 1, pages.data(), 1, 0, 16, va, 0), MrCheck::kPdMismatch);
  // Too many pages, and a length the pages cannot hold once the FBO is taken off.
  EXPECT_EQ(t.fast_register(kr, kPd, pages.data(), 3, 0, 16, va, 0), MrCheck::kTooLarge);
  EXPECT_EQ(t.fast_register(kr, kPd, pages.data(), 2, 8, 2 * kMrPageSize - 7, va, 0),
            MrCheck::kTooLarge);
  EXPECT_EQ(t.fast_register(kr, kPd, pages.data(), 0, 0, 1, va, 0), MrCheck::kTooLarge);
  // Misaligned page, FBO past the first page, a range that wraps past 2^64.
  const std::array<uint64_t, 2> bad{pages[0], pages[1] + 8};
  EXPECT_EQ(t.fast_register(kr, kPd, bad.data(), 2, 0, 16, va, 0), MrCheck::kOutOfBounds);
  EXPECT_EQ(t.fast_register(kr, kPd, pages.data(), 2, kMrPageSize, 16, va, 0),
            MrCheck::kOutOfBounds);
  EXPECT_EQ(t.fast_register(kr, kPd, pages.data(), 1, 0, 16, ~uint64_t{0} - 8, 0),
            MrCheck::kOutOfBounds);
  // None of the failures changed the regions.
  EXPECT_EQ(t.check(kr, kPd, va, 0, 0), MrCheck::kStaleKey);
  EXPECT_EQ(t.check(remote, kPd, va, 0, 0), MrCheck::kInvalidated);
  // The largest valid mapping: both pages, minus the FBO.
  ASSERT_EQ(t.fast_register(kr, kPd, pages.data(), 2, 8, 2 * kMrPageSize - 8, va,
                            access::kRemoteWrite | access::kLocalWrite),
            MrCheck::kOk);
  EXPECT_EQ(t.check(kr, kPd, va, 2 * kMrPageSize - 8, access::kRemoteWrite), MrCheck::kOk);
  ASSERT_EQ(t.fast_register(kl, kPd, pages.data(), 1, 0, 16, va, access::kLocalWrite),
            MrCheck::kOk);
}

TEST(Frmr, AtomicTargetChecksTheHostAlignment) {
  MrTable t(8, kSeed);
  Pages mem(1);
  const uint64_t page = mem.page_addr(0);
  uint32_t k0 = 0;
  ASSERT_EQ(t.alloc_fast_register(kPd, 1, true, &k0), Status::kSuccess);
  uint32_t k = t.next_fast_register_key(k0);
  ASSERT_EQ(t.fast_register(k, kPd, &page, 1, 16, 64, 0x10000, access::kRemoteAtomic),
            MrCheck::kOk);
  uint64_t* w = nullptr;
  ASSERT_EQ(t.atomic_target(k, kPd, 0x10008, &w), MrCheck::kOk);
  EXPECT_EQ(addr_of(w), page + 16 + 8);
  EXPECT_EQ(t.atomic_target(k, kPd, 0x10004, &w), MrCheck::kOutOfBounds);
  // base_va and FBO disagree modulo 8: an aligned va lands on a misaligned host word.
  ASSERT_EQ(t.invalidate(k, kPd), MrCheck::kOk);
  k = t.next_fast_register_key(k);
  ASSERT_EQ(t.fast_register(k, kPd, &page, 1, 4, 64, 0x10000, access::kRemoteAtomic), MrCheck::kOk);
  EXPECT_EQ(t.atomic_target(k, kPd, 0x10008, &w), MrCheck::kOutOfBounds);
}

TEST(Frmr, ReallocatedEntryGrowsItsPageList) {
  MrTable t(2, kSeed);  // one usable entry
  Pages mem(8);
  uint32_t small = 0, big = 0;
  ASSERT_EQ(t.alloc_fast_register(kPd, 1, true, &small), Status::kSuccess);
  ASSERT_EQ(t.deregister(small), Status::kSuccess);
  ASSERT_EQ(t.alloc_fast_register(kPd, 8, true, &big), Status::kSuccess);
  ASSERT_EQ(key_index(big), key_index(small));
  std::array<uint64_t, 8> pages{};
  for (size_t i = 0; i < pages.size(); ++i) pages[7 - i] = mem.page_addr(i);
  const uint32_t k = t.next_fast_register_key(big);
  ASSERT_EQ(
      t.fast_register(k, kPd, pages.data(), 8, 0, 8 * kMrPageSize, 0x10000, access::kLocalWrite),
      MrCheck::kOk);
  std::vector<uint8_t> src(8 * kMrPageSize);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i / kMrPageSize);
  ASSERT_EQ(t.copy_in(k, kPd, 0x10000, src.data(), src.size(), access::kLocalWrite), MrCheck::kOk);
  for (size_t i = 0; i < 8; ++i) {
    EXPECT_EQ(mem.page(i)[0], 7 - i);
    EXPECT_EQ(mem.page(i)[kMrPageSize - 1], 7 - i);
  }
}

// ---- Concurrency -------------------------------------------------------------------------------

// One thread re-registers a FRMR over page set A, then B, then A..., invalidating in between,
// while this thread copies the region out and resolves it. Every successful copy must come
// entirely from A or entirely from B, and every resolve must point entirely into one of them:
// a mix means a reader used a page list that was being rewritten. The region spans several copy
// batches, so a copy that validated only its first batch would read later batches from the next
// registration. After each registration the writer waits (bounded, no sleeping) until the reader
// has started another attempt, so that attempt overlaps the invalidate and the re-registration.
TEST(MrConcurrency, CopiesSeeOnePageListNeverAMix) {
  constexpr uint32_t kNpages = 40, kFbo = 512;  // 3 copy batches
  constexpr uint64_t kLen = kNpages * kMrPageSize - 2 * kFbo;
  constexpr uint64_t kVa = 0x5000'0000'0000ull;
  constexpr int kRounds = 3000;
  constexpr long kMaxWait = 1 << 20;  // spins; bounds the handshake if the reader stalls
  MrTable t(4, kSeed);
  Pages a(kNpages), b(kNpages);
  std::array<uint64_t, kNpages> pa{}, pb{};
  for (uint32_t i = 0; i < kNpages; ++i) {
    std::memset(a.page(i), 0x10 + i, kMrPageSize);
    std::memset(b.page(i), 0x80 + i, kMrPageSize);
    pa[i] = a.page_addr(i);
    pb[i] = b.page_addr(i);
  }
  std::vector<uint8_t> want_a(kLen), want_b(kLen);
  for (uint64_t j = 0; j < kLen; ++j) {
    want_a[j] = static_cast<uint8_t>(0x10 + (j + kFbo) / kMrPageSize);
    want_b[j] = static_cast<uint8_t>(0x80 + (j + kFbo) / kMrPageSize);
  }
  uint32_t k0 = 0;
  ASSERT_EQ(t.alloc_fast_register(kPd, kNpages, true, &k0), Status::kSuccess);

  std::atomic<uint32_t> current{0};  // the key of the latest registration (0: none yet)
  std::atomic<long> attempts{0};     // reader attempts started
  std::atomic<bool> done{false};
  std::atomic<int> writer_errors{0};
  std::thread writer([&] {
    uint32_t key = k0;
    for (int i = 0; i < kRounds; ++i) {
      const uint32_t next = t.next_fast_register_key(key);
      const auto& list = (i & 1) ? pb : pa;
      if (t.fast_register(next, kPd, list.data(), kNpages, kFbo, kLen, kVa, access::kRemoteRead) !=
          MrCheck::kOk) {
        writer_errors.fetch_add(1, std::memory_order_relaxed);
      }
      key = next;
      current.store(key, std::memory_order_release);
      if (i + 1 == kRounds) break;  // the last registration stays valid for the final read
      const long seen = attempts.load(std::memory_order_acquire);
      // Spin (so the invalidate follows the reader's start closely), yielding now and then so
      // that a reader sharing this CPU gets to run.
      for (long w = 0; w < kMaxWait && attempts.load(std::memory_order_acquire) == seen; ++w) {
        if (w % 1024 == 1023) std::this_thread::yield();
      }
      if (t.invalidate(key, kPd) != MrCheck::kOk) {
        writer_errors.fetch_add(1, std::memory_order_relaxed);
      }
    }
    done.store(true, std::memory_order_release);
  });

  const auto in_set = [](const uint8_t* p, const std::array<uint64_t, kNpages>& set) {
    return std::any_of(set.begin(), set.end(), [&](uint64_t pg) {
      return addr_of(p) >= pg && addr_of(p) < pg + kMrPageSize;
    });
  };
  std::vector<uint8_t> out(kLen);
  long ok_copies = 0, ok_resolves = 0, torn = 0, unexpected = 0;
  for (bool last = false; !last;) {
    last = done.load(std::memory_order_acquire);
    const uint32_t key = current.load(std::memory_order_acquire);
    if (key == 0) continue;
    attempts.fetch_add(1, std::memory_order_release);
    const MrCheck c = t.copy_out(key, kPd, kVa, out.data(), kLen, access::kRemoteRead);
    if (c == MrCheck::kOk) {
      ++ok_copies;
      torn += out != want_a && out != want_b;
    } else if (c != MrCheck::kInvalidated && c != MrCheck::kStaleKey) {
      ++unexpected;
    }
    attempts.fetch_add(1, std::memory_order_release);
    MrSegment segs[kNpages];
    uint32_t n = 0;
    const MrCheck r =
        t.resolve(key, kPd, kVa + 1, kLen - 1, access::kRemoteRead, segs, kNpages, &n);
    if (r == MrCheck::kOk) {
      ++ok_resolves;
      bool all_a = n == kNpages, all_b = n == kNpages;
      for (uint32_t i = 0; i < n; ++i) {
        const uint32_t head = i == 0 ? kFbo + 1 : 0;
        all_a = all_a && in_set(segs[i].ptr, pa) && segs[i].ptr == a.page(i) + head;
        all_b = all_b && in_set(segs[i].ptr, pb) && segs[i].ptr == b.page(i) + head;
      }
      torn += !all_a && !all_b;
    } else if (r != MrCheck::kInvalidated && r != MrCheck::kStaleKey) {
      ++unexpected;
    }
    // Lets the writer run at once when both threads share one CPU (a loaded CI machine).
    std::this_thread::yield();
  }
  writer.join();
  EXPECT_EQ(writer_errors.load(), 0);
  EXPECT_EQ(torn, 0) << "of " << ok_copies << " copies and " << ok_resolves << " resolves";
  EXPECT_EQ(unexpected, 0);
  // The final pass ran after the writer finished, against a valid region.
  EXPECT_GE(ok_copies, 1);
  EXPECT_GE(ok_resolves, 1);
  EXPECT_TRUE(out == want_a || out == want_b);
}

// next_fast_register_key from several application threads at once: every key names the same
// entry and none carries the current tag (run under -DURNIC_SANITIZE=thread to check the races).
TEST(MrConcurrency, NextFastRegisterKeyIsThreadSafe) {
  MrTable t(4, kSeed);
  uint32_t k0 = 0;
  ASSERT_EQ(t.alloc_fast_register(kPd, 1, true, &k0), Status::kSuccess);
  constexpr int kThreads = 4, kCalls = 20000;
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&] {
      for (int c = 0; c < kCalls; ++c) {
        const uint32_t k = t.next_fast_register_key(k0);
        if (key_index(k) != key_index(k0) || key_tag(k) == key_tag(k0)) {
          bad.fetch_add(1, std::memory_order_relaxed);
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
}

}  // namespace
}  // namespace urnic::dp

// Memory windows in the MR table (dataplane/mr.h; IBTA §10.6.7, type 2 windows; ndkpi.md §4.5):
// the bind checks in order, lookups through a window (bounds, rights, the QP it is bound to),
// invalidation (local and remote), the bound-window count that makes deregistering the region
// busy, and the window-then-region lock order under concurrent binds and deregistrations.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "dataplane/mr.h"

namespace urnic::dp {
namespace {

constexpr uint32_t kPd = 3;
constexpr uint32_t kQpn = 17;
constexpr uint64_t kSeed = 0xA11CEull;

uint64_t addr_of(const void* p) { return reinterpret_cast<uint64_t>(p); }

struct Fixture {
  Fixture() : mrs(64, kSeed), buf(8192, 0) {
    EXPECT_EQ(
        mrs.register_region(kPd, addr_of(buf.data()), buf.size(), access::kLocalWrite, &region),
        Status::kSuccess);
    EXPECT_EQ(mrs.alloc_window(kPd, &window), Status::kSuccess);
  }
  MrCheck bind(uint64_t off, uint64_t len, uint32_t acc, uint32_t* key) {
    *key = mrs.next_fast_register_key(window);
    return mrs.bind_window(*key, kPd, kQpn, region, addr_of(buf.data()) + off, len, acc);
  }
  MrTable mrs;
  std::vector<uint8_t> buf;
  uint32_t region = 0, window = 0;
};

TEST(MrWindow, UnboundWindowIsInvalid) {
  Fixture f;
  EXPECT_EQ(f.mrs.check(f.window, kPd, addr_of(f.buf.data()), 1, access::kRemoteRead, kQpn),
            MrCheck::kInvalidated);
  EXPECT_EQ(f.mrs.invalidate(f.window, kPd), MrCheck::kInvalidated);
}

TEST(MrWindow, BindChecksInOrder) {
  Fixture f;
  const uint64_t va = addr_of(f.buf.data());
  const uint32_t k = f.mrs.next_fast_register_key(f.window);
  // The window side: a free entry, an entry that is not a window, another PD, the current tag.
  EXPECT_EQ(f.mrs.bind_window(make_key(40, 1), kPd, kQpn, f.region, va, 8, 0),
            MrCheck::kInvalidKey);
  EXPECT_EQ(f.mrs.bind_window(f.region, kPd, kQpn, f.window, va, 8, 0), MrCheck::kBadState);
  EXPECT_EQ(f.mrs.bind_window(k, kPd + 1, kQpn, f.region, va, 8, 0), MrCheck::kPdMismatch);
  EXPECT_EQ(f.mrs.bind_window(f.window, kPd, kQpn, f.region, va, 8, 0), MrCheck::kStaleKey);
  // The region side.
  uint32_t frmr = 0;
  ASSERT_EQ(f.mrs.alloc_fast_register(kPd, 4, true, &frmr), Status::kSuccess);
  EXPECT_EQ(f.mrs.bind_window(k, kPd, kQpn, frmr, va, 8, 0), MrCheck::kBadState);
  EXPECT_EQ(f.mrs.bind_window(k, kPd, kQpn, f.region ^ 1, va, 8, 0), MrCheck::kStaleKey);
  uint32_t other_pd = 0, read_only = 0;
  ASSERT_EQ(f.mrs.register_region(kPd + 1, va, 64, access::kLocalWrite, &other_pd),
            Status::kSuccess);
  ASSERT_EQ(f.mrs.register_region(kPd, va, 64, 0, &read_only), Status::kSuccess);
  EXPECT_EQ(f.mrs.bind_window(k, kPd, kQpn, other_pd, va, 8, 0), MrCheck::kPdMismatch);
  // A writable (or atomic) window needs a locally writable region.
  EXPECT_EQ(f.mrs.bind_window(k, kPd, kQpn, read_only, va, 8, access::kRemoteWrite),
            MrCheck::kAccessDenied);
  EXPECT_EQ(f.mrs.bind_window(k, kPd, kQpn, read_only, va, 8, access::kRemoteAtomic),
            MrCheck::kAccessDenied);
  EXPECT_EQ(f.mrs.bind_window(k, kPd, kQpn, read_only, va, 8, access::kRemoteRead), MrCheck::kOk);
  EXPECT_EQ(f.mrs.invalidate(k, kPd), MrCheck::kOk);
  // Bounds: inside the region, to its last byte.
  const uint32_t k2 = f.mrs.next_fast_register_key(f.window);
  EXPECT_EQ(f.mrs.bind_window(k2, kPd, kQpn, f.region, va + 8000, 193, 0), MrCheck::kOutOfBounds);
  EXPECT_EQ(f.mrs.bind_window(k2, kPd, kQpn, f.region, va - 1, 8, 0), MrCheck::kOutOfBounds);
  EXPECT_EQ(f.mrs.bind_window(k2, kPd, kQpn, f.region, va + 8000, 192, access::kRemoteWrite),
            MrCheck::kOk);
}

TEST(MrWindow, LookupsThroughAWindow) {
  Fixture f;
  uint32_t key = 0;
  ASSERT_EQ(f.bind(1000, 100, access::kRemoteRead, &key), MrCheck::kOk);
  const uint64_t w = addr_of(f.buf.data()) + 1000;
  EXPECT_EQ(f.mrs.check(key, kPd, w, 100, access::kRemoteRead, kQpn), MrCheck::kOk);
  // Bounds are the window's, not the region's.
  EXPECT_EQ(f.mrs.check(key, kPd, w + 1, 100, access::kRemoteRead, kQpn), MrCheck::kOutOfBounds);
  EXPECT_EQ(f.mrs.check(key, kPd, w - 1, 1, access::kRemoteRead, kQpn), MrCheck::kOutOfBounds);
  // Rights are the window's: read only.
  EXPECT_EQ(f.mrs.check(key, kPd, w, 8, access::kRemoteWrite, kQpn), MrCheck::kAccessDenied);
  // Only through the QP it is bound to; never for local access (qpn 0).
  EXPECT_EQ(f.mrs.check(key, kPd, w, 8, access::kRemoteRead, kQpn + 1), MrCheck::kAccessDenied);
  EXPECT_EQ(f.mrs.check(key, kPd, w, 8, 0), MrCheck::kAccessDenied);
  EXPECT_EQ(f.mrs.check(key, kPd + 1, w, 8, access::kRemoteRead, kQpn), MrCheck::kPdMismatch);
  // Translation is the region's own (host address == va).
  f.buf[1010] = 0x42;
  uint8_t out = 0;
  EXPECT_EQ(f.mrs.copy_out(key, kPd, w + 10, &out, 1, access::kRemoteRead, kQpn), MrCheck::kOk);
  EXPECT_EQ(out, 0x42);
  MrSegment seg{};
  uint32_t n = 0;
  EXPECT_EQ(f.mrs.resolve(key, kPd, w, 100, access::kRemoteRead, &seg, 1, &n, kQpn), MrCheck::kOk);
  EXPECT_EQ(seg.ptr, f.buf.data() + 1000);
  // Invalidate: the key fails afterwards, the old and the new alike until a new bind.
  EXPECT_EQ(f.mrs.invalidate(key, kPd), MrCheck::kOk);
  EXPECT_EQ(f.mrs.check(key, kPd, w, 8, access::kRemoteRead, kQpn), MrCheck::kInvalidated);
}

TEST(MrWindow, RebindNeedsInvalidateAndANewTag) {
  Fixture f;
  uint32_t k1 = 0, k2 = 0;
  ASSERT_EQ(f.bind(0, 64, access::kRemoteWrite, &k1), MrCheck::kOk);
  EXPECT_EQ(f.bind(64, 64, access::kRemoteWrite, &k2), MrCheck::kBadState);
  EXPECT_EQ(f.mrs.invalidate(k1, kPd), MrCheck::kOk);
  EXPECT_EQ(f.mrs.bind_window(k1, kPd, kQpn, f.region, addr_of(f.buf.data()), 8, 0),
            MrCheck::kStaleKey);
  ASSERT_EQ(f.bind(64, 64, access::kRemoteWrite, &k2), MrCheck::kOk);
  EXPECT_NE(k1, k2);
  EXPECT_EQ(f.mrs.check(k1, kPd, addr_of(f.buf.data()) + 64, 8, access::kRemoteWrite, kQpn),
            MrCheck::kStaleKey);
  // A window key is not a fast-register region.
  const uint64_t page = 0x10000;
  EXPECT_EQ(f.mrs.fast_register(f.mrs.next_fast_register_key(k2), kPd, &page, 1, 0, 8, 0, 0),
            MrCheck::kBadState);
}

TEST(MrWindow, RemoteInvalidateMustComeThroughTheBoundQp) {
  Fixture f;
  uint32_t key = 0;
  ASSERT_EQ(f.bind(0, 64, access::kRemoteWrite, &key), MrCheck::kOk);
  EXPECT_EQ(f.mrs.invalidate(key, kPd, kQpn + 1), MrCheck::kAccessDenied);
  EXPECT_EQ(f.mrs.invalidate(key, kPd, kQpn), MrCheck::kOk);
  EXPECT_EQ(f.mrs.invalidate(key, kPd, kQpn), MrCheck::kInvalidated);
}

TEST(MrWindow, BoundWindowsMakeTheRegionBusy) {
  Fixture f;
  uint32_t second = 0, k1 = 0;
  ASSERT_EQ(f.mrs.alloc_window(kPd, &second), Status::kSuccess);
  ASSERT_EQ(f.bind(0, 64, access::kRemoteRead, &k1), MrCheck::kOk);
  const uint32_t k2 = f.mrs.next_fast_register_key(second);
  ASSERT_EQ(
      f.mrs.bind_window(k2, kPd, kQpn, f.region, addr_of(f.buf.data()), 64, access::kRemoteRead),
      MrCheck::kOk);
  EXPECT_EQ(f.mrs.deregister(f.region), Status::kDeviceBusy);
  EXPECT_EQ(f.mrs.invalidate(k1, kPd), MrCheck::kOk);
  EXPECT_EQ(f.mrs.deregister(f.region), Status::kDeviceBusy);  // one still bound
  // Freeing a bound window unbinds it.
  EXPECT_EQ(f.mrs.deregister(second), Status::kSuccess);
  EXPECT_EQ(f.mrs.deregister(f.region), Status::kSuccess);
  EXPECT_EQ(f.mrs.deregister(f.window), Status::kSuccess);
  EXPECT_EQ(f.mrs.live(), 0u);
}

// Engines bind and invalidate windows over one region while the control thread keeps trying to
// deregister it: no deadlock (window-then-region lock order), never a deregistration while a
// window is bound, and the count returns to zero.
TEST(MrWindow, ConcurrentBindsAndDeregisterAttempts) {
  MrTable mrs(256, kSeed);
  std::vector<uint8_t> buf(1 << 16);
  uint32_t region = 0;
  ASSERT_EQ(mrs.register_region(kPd, addr_of(buf.data()), buf.size(), access::kLocalWrite, &region),
            Status::kSuccess);
  // One window stays bound throughout, so every deregistration attempt must find it busy.
  uint32_t anchor = 0;
  ASSERT_EQ(mrs.alloc_window(kPd, &anchor), Status::kSuccess);
  anchor = mrs.next_fast_register_key(anchor);
  ASSERT_EQ(mrs.bind_window(anchor, kPd, kQpn, region, addr_of(buf.data()), 8, access::kRemoteRead),
            MrCheck::kOk);
  constexpr int kThreads = 3, kWindowsEach = 8, kRounds = 2000;
  std::atomic<bool> stop{false};
  std::atomic<int> bad{0};
  std::atomic<uint64_t> binds{0};
  // Allocation and freeing are control-side calls (one at a time): done here, not by engines.
  std::vector<std::vector<uint32_t>> all(kThreads, std::vector<uint32_t>(kWindowsEach));
  for (auto& v : all) {
    for (auto& w : v) ASSERT_EQ(mrs.alloc_window(kPd, &w), Status::kSuccess);
  }
  std::vector<std::thread> engines;
  for (int t = 0; t < kThreads; ++t) {
    engines.emplace_back([&, t] {
      std::vector<uint32_t>& wins = all[t];
      for (int r = 0; r < kRounds; ++r) {
        for (auto& w : wins) {
          const uint32_t k = mrs.next_fast_register_key(w);
          const uint64_t va = addr_of(buf.data()) + (r * 64 + t * 8) % 60000;
          if (mrs.bind_window(k, kPd, kQpn + t, region, va, 64, access::kRemoteWrite) !=
              MrCheck::kOk)
            bad.fetch_add(1);
          binds.fetch_add(1, std::memory_order_relaxed);
          w = k;
        }
        for (auto w : wins) {
          if (mrs.invalidate(w, kPd) != MrCheck::kOk) bad.fetch_add(1);
        }
      }
    });
  }
  std::thread control([&] {
    while (!stop.load()) {
      if (mrs.deregister(region) != Status::kDeviceBusy) {
        bad.fetch_add(1000);
        return;
      }
    }
  });
  for (auto& e : engines) e.join();
  stop.store(true);
  control.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(binds.load(), uint64_t{kThreads} * kWindowsEach * kRounds);
  for (auto& v : all) {
    for (auto w : v) EXPECT_EQ(mrs.deregister(w), Status::kSuccess);
  }
  EXPECT_EQ(mrs.deregister(region), Status::kDeviceBusy);
  EXPECT_EQ(mrs.invalidate(anchor, kPd), MrCheck::kOk);
  EXPECT_EQ(mrs.deregister(region), Status::kSuccess);
}

}  // namespace
}  // namespace urnic::dp

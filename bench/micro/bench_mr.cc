// Memory-region micro-benchmarks: the cost of a key check (seqlock read, PD / rights / bounds) on
// a registered region and on a fast-register region, resolve of a FRMR range crossing a page,
// and copy_in of 64 B and 4 KiB next to plain memcpy of the same sizes in the same run.
//
// Run: build/bench/bench_mr --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
// Check and resolve report ns per call; the copies also report bytes/s (SetBytesProcessed).
#include <benchmark/benchmark.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <vector>

#include "dataplane/mr.h"

namespace urnic::dp {
namespace {

constexpr uint32_t kPd = 1;
constexpr uint32_t kTableSize = 4096;  // a realistic table, so entries are spread over memory
constexpr uint32_t kNpages = 4;
constexpr uint32_t kFbo = 256;  // FRMR copies of 4 KiB then cross a page boundary
constexpr uint64_t kIova = 0x7F00'0000'0000ull;

// A registered 64 KiB buffer and a 4-page FRMR over a page-aligned buffer, in one table with
// other live entries around them.
struct Fixture {
  MrTable table{kTableSize, 0x5EED};
  std::vector<uint8_t> reg_buf = std::vector<uint8_t>(64 * 1024, 0x5A);
  std::vector<uint8_t> frmr_raw = std::vector<uint8_t>((kNpages + 1) * kMrPageSize, 0x5A);
  uint32_t reg_key = 0;
  uint32_t frmr_key = 0;
  bool ok = true;

  Fixture() {
    uint64_t filler = 0;
    for (uint32_t i = 0; i < 100; ++i) {
      uint32_t k = 0;
      ok &= table.register_region(kPd, reinterpret_cast<uint64_t>(&filler), 8, 0, &k) ==
            Status::kSuccess;
    }
    ok &= table.register_region(kPd, reinterpret_cast<uint64_t>(reg_buf.data()), reg_buf.size(),
                                access::kAll, &reg_key) == Status::kSuccess;
    uint32_t alloc = 0;
    ok &= table.alloc_fast_register(kPd, kNpages, true, &alloc) == Status::kSuccess;
    const uint64_t raw = reinterpret_cast<uint64_t>(frmr_raw.data());
    const uint64_t first = (raw + kMrPageSize - 1) & ~uint64_t{kMrPageSize - 1};
    std::array<uint64_t, kNpages> pages{};
    for (uint32_t i = 0; i < kNpages; ++i) pages[i] = first + i * kMrPageSize;
    frmr_key = table.next_fast_register_key(alloc);
    ok &= table.fast_register(frmr_key, kPd, pages.data(), kNpages, kFbo,
                              kNpages * kMrPageSize - kFbo, kIova, access::kAll) == MrCheck::kOk;
  }
  uint64_t reg_va() const { return reinterpret_cast<uint64_t>(reg_buf.data()); }
};

void BM_MrCheckRegistered(benchmark::State& state) {
  Fixture f;
  if (!f.ok) state.SkipWithError("setup failed");
  const uint64_t va = f.reg_va() + 128;
  for (auto _ : state) {
    benchmark::DoNotOptimize(f.table.check(f.reg_key, kPd, va, 1024, access::kRemoteWrite));
  }
}
BENCHMARK(BM_MrCheckRegistered);

void BM_MrCheckFrmr(benchmark::State& state) {
  Fixture f;
  if (!f.ok) state.SkipWithError("setup failed");
  for (auto _ : state) {
    benchmark::DoNotOptimize(
        f.table.check(f.frmr_key, kPd, kIova + 128, 1024, access::kRemoteWrite));
  }
}
BENCHMARK(BM_MrCheckFrmr);

void BM_MrResolveFrmr(benchmark::State& state) {
  Fixture f;
  if (!f.ok) state.SkipWithError("setup failed");
  MrSegment segs[kNpages];
  uint32_t n = 0;
  // 4 KiB from offset 0: FBO 256 makes it two segments.
  for (auto _ : state) {
    benchmark::DoNotOptimize(f.table.resolve(f.frmr_key, kPd, kIova, kMrPageSize,
                                             access::kRemoteRead, segs, kNpages, &n));
    benchmark::DoNotOptimize(segs);
  }
}
BENCHMARK(BM_MrResolveFrmr);

// copy_in of state.range(0) bytes into the registered region, or (`frmr`) into the FRMR.
void copy_in(benchmark::State& state, bool frmr) {
  Fixture f;
  if (!f.ok) state.SkipWithError("setup failed");
  const size_t n = static_cast<size_t>(state.range(0));
  std::vector<uint8_t> src(n, 0xA5);
  const uint32_t key = frmr ? f.frmr_key : f.reg_key;
  const uint64_t va = frmr ? kIova : f.reg_va();
  for (auto _ : state) {
    benchmark::DoNotOptimize(f.table.copy_in(key, kPd, va, src.data(), n, access::kRemoteWrite));
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(n));
}

void BM_MrCopyInRegistered(benchmark::State& state) { copy_in(state, false); }
BENCHMARK(BM_MrCopyInRegistered)->Arg(64)->Arg(4096);

void BM_MrCopyInFrmr(benchmark::State& state) { copy_in(state, true); }
BENCHMARK(BM_MrCopyInFrmr)->Arg(64)->Arg(4096);

// The baseline: memcpy of the same sizes between the same kind of buffers.
void BM_Memcpy(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  std::vector<uint8_t> src(n, 0xA5), dst(64 * 1024);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), n);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(n));
}
BENCHMARK(BM_Memcpy)->Arg(64)->Arg(4096);

}  // namespace
}  // namespace urnic::dp

BENCHMARK_MAIN();

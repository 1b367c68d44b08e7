// Wire micro-benchmarks: ICRC (icrc_compute, and the rte_net_crc in-place version it replaced)
// next to memcpy of the same sizes in the same run, and frame build / parse cost per frame; the
// CRC-32 kernels of dataplane/wire/crc32.h (issue 13) alone, before a memcpy (two passes) and
// fused with the copy (one pass), next to rte_net_crc and memcpy.
//
// Run: build/bench/bench_wire --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
// ICRC and memcpy report bytes/s (SetBytesProcessed) over the whole frame length.
#include <benchmark/benchmark.h>
#include <rte_net_crc.h>
// rte_vect.h lacks extern "C" in DPDK 22.11.
extern "C" {
#include <rte_vect.h>
}

#include <array>
#include <cstring>
#include <vector>

#include "dataplane/wire/crc32.h"
#include "dataplane/wire/frame.h"
#include "dataplane/wire/icrc.h"

namespace urnic::wire {
namespace {

NetHeaders demo_net() {
  NetHeaders n;
  n.src_mac = {2, 0, 0, 0, 0, 1};
  n.dst_mac = {2, 0, 0, 0, 0, 2};
  n.src_ip4 = 0xC0000201;
  n.dst_ip4 = 0xC0000202;
  n.udp_sport = udp_sport_for(0x11, 0x12);
  return n;
}

TransportHeaders write_only() {
  TransportHeaders th;
  th.bth.opcode = opc::kWriteOnly;
  th.bth.pkey = Be16::of(kDefaultPkey);
  Bth::DestQp::set(th.bth, 0x12u);
  Bth::AckReq::set(th.bth, 1u);
  th.reth.va = Be64::of(0x7F0000001000ull);
  th.reth.rkey = Be32::of(0x1234);
  return th;
}

// A WRITE ONLY frame whose total length is `frame_len` bytes.
std::vector<uint8_t> frame_of(uint32_t frame_len) {
  const NetHeaders net = demo_net();
  TransportHeaders th = write_only();
  const uint32_t hdr = header_length(net, th.bth.opcode) + kIcrcLen;
  const uint32_t payload = frame_len > hdr ? ((frame_len - hdr) & ~3u) : 0;
  th.reth.dma_length = Be32::of(payload);
  std::vector<uint8_t> pl(payload, 0x5A), out(frame_len + 64);
  out.resize(build_frame(out, net, th, pl));
  return out;
}

// rte_net_crc for the comparisons: the AVX-512 handler if the CPU has it. rte_net_crc_set_alg
// refuses vector handlers when EAL's max SIMD bitwidth is lower (0 without rte_eal_init), so
// raise it for the choice.
void rte_crc_init() {
  static const bool done = [] {
    (void)rte_vect_set_max_simd_bitwidth(RTE_VECT_SIMD_512);
    rte_net_crc_set_alg(RTE_NET_CRC_AVX512);
    return true;
  }();
  (void)done;
}

// ---- The ICRC before issue 13, for comparison: rte_net_crc over the frame masked in place ----

constexpr size_t kLrhPrefix = 8;

// Saves and restores the bytes icrc_rte_in_place() overwrites. At most: 8 prefix bytes, 4 IPv6 /
// 4 IPv4 bytes (3 fields), 2 UDP checksum bytes, 1 BTH byte.
struct Patch {
  std::array<uint8_t, kLrhPrefix> prefix;
  std::array<uint8_t, 8> ip;
  std::array<uint8_t, 2> udp;
  uint8_t bth4;
};

inline void mask_in_place(uint8_t* f, const FrameLayout& l, Patch& p) noexcept {
  uint8_t* pre = f + l.l3_off - kLrhPrefix;
  std::memcpy(p.prefix.data(), pre, kLrhPrefix);
  std::memset(pre, 0xFF, kLrhPrefix);
  uint8_t* ip = f + l.l3_off;
  if (l.ipv6) {
    // Version(4) | traffic class(8) | flow label(20) in bytes 0-3; hop limit in byte 7.
    std::memcpy(p.ip.data(), ip, 4);
    p.ip[4] = ip[7];
    ip[0] |= 0x0F;
    ip[1] = ip[2] = ip[3] = 0xFF;
    ip[7] = 0xFF;
  } else {
    // TOS (byte 1), TTL (byte 8), header checksum (bytes 10-11).
    p.ip[0] = ip[1];
    p.ip[1] = ip[8];
    p.ip[2] = ip[10];
    p.ip[3] = ip[11];
    ip[1] = ip[8] = ip[10] = ip[11] = 0xFF;
  }
  uint8_t* udp = f + l.l4_off;
  p.udp = {udp[6], udp[7]};
  udp[6] = udp[7] = 0xFF;
  uint8_t* bth = f + l.l4_off + sizeof(UdpHdr);
  p.bth4 = bth[4];
  bth[4] = 0xFF;
}

inline void unmask(uint8_t* f, const FrameLayout& l, const Patch& p) noexcept {
  std::memcpy(f + l.l3_off - kLrhPrefix, p.prefix.data(), kLrhPrefix);
  uint8_t* ip = f + l.l3_off;
  if (l.ipv6) {
    std::memcpy(ip, p.ip.data(), 4);
    ip[7] = p.ip[4];
  } else {
    ip[1] = p.ip[0];
    ip[8] = p.ip[1];
    ip[10] = p.ip[2];
    ip[11] = p.ip[3];
  }
  uint8_t* udp = f + l.l4_off;
  udp[6] = p.udp[0];
  udp[7] = p.udp[1];
  f[l.l4_off + sizeof(UdpHdr) + 4] = p.bth4;
}

// OR masks over the first ICRC bytes, from 8 bytes before the IP header: the LRH prefix (all
// ones) and the variant fields (IPv4 TOS, TTL, header checksum; IPv6 traffic class, flow label,

uint32_t icrc_rte_in_place(uint8_t* frame, const FrameLayout& l) {
  Patch p{};
  mask_in_place(frame, l, p);
  const uint8_t* start = frame + l.l3_off - kLrhPrefix;
  const uint32_t len = static_cast<uint32_t>(l.icrc_off - (l.l3_off - kLrhPrefix));
  const uint32_t crc = rte_net_crc_calc(start, len, RTE_NET_CRC32_ETH);
  unmask(frame, l, p);
  return crc;
}

void BM_IcrcRteInPlace(benchmark::State& state) {
  rte_crc_init();
  auto f = frame_of(static_cast<uint32_t>(state.range(0)));
  ParsedFrame p;
  if (parse(f.data(), f.size(), p) != ParseError::kOk) state.SkipWithError("parse failed");
  if (icrc_rte_in_place(f.data(), p.l) != icrc_reference(f.data(), p.l))
    state.SkipWithError("wrong ICRC");
  for (auto _ : state) {
    benchmark::DoNotOptimize(icrc_rte_in_place(f.data(), p.l));
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(f.size()));
}
BENCHMARK(BM_IcrcRteInPlace)->Arg(64)->Arg(256)->Arg(1024)->Arg(4096);

// icrc_compute: crc32.h's fastest kernel over the frame with the header mask.
void BM_Icrc(benchmark::State& state) {
  icrc_init();
  auto f = frame_of(static_cast<uint32_t>(state.range(0)));
  ParsedFrame p;
  if (parse(f.data(), f.size(), p) != ParseError::kOk) state.SkipWithError("parse failed");
  for (auto _ : state) {
    benchmark::DoNotOptimize(icrc_compute(f.data(), p.l));
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(f.size()));
}
BENCHMARK(BM_Icrc)->Arg(64)->Arg(256)->Arg(1024)->Arg(4096);

// Source and destination of n bytes for the copy benchmarks, both 64-byte aligned, in one
// allocation with the destination half a page away from the source modulo 4 KiB. Separate
// vectors land wherever malloc puts them; when their distance is a multiple of 4 KiB, loads
// falsely depend on the stores before them (4K aliasing) and a 4 KiB memcpy ran 6x slower in
// one run than in the next.
struct CopyBuffers {
  explicit CopyBuffers(size_t n) : arena(2 * ((n + 4095) & ~size_t{4095}) + 2 * 4096) {
    const auto base = reinterpret_cast<uintptr_t>(arena.data());
    src = arena.data() + ((4096 - base % 4096) % 4096);
    dst = src + ((n + 4095) & ~size_t{4095}) + 2048;
    std::memset(src, 0x5A, n);
  }
  std::vector<uint8_t> arena;
  uint8_t* src;
  uint8_t* dst;
};

void BM_Memcpy(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  CopyBuffers b(n);
  for (auto _ : state) {
    std::memcpy(b.dst, b.src, n);
    benchmark::DoNotOptimize(b.dst);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(n));
}
BENCHMARK(BM_Memcpy)->Arg(64)->Arg(256)->Arg(1024)->Arg(4096)->Arg(65536);

// ---- CRC-32 kernels (crc32.h) ------------------------------------------------------------------
//
// First argument: which CRC. kRte is rte_net_crc_calc (RTE_NET_CRC32_ETH, the handler
// rte_crc_init chose); the others are crc32.h's implementations, forced with crc32_set_impl.
// Second argument: bytes.
enum CrcVariant : int64_t { kRte = 0, kPortable = 1, kPclmul = 2, kAvx512 = 3 };

const char* variant_name(int64_t v) {
  switch (v) {
    case kRte:
      return "rte_net_crc";
    case kPortable:
      return "portable";
    case kPclmul:
      return "pclmul";
    default:
      return "avx512";
  }
}

// Selects the variant for a benchmark run; false (and the run is skipped) if the CPU lacks it.
bool select_variant(benchmark::State& state) {
  rte_crc_init();
  icrc_init();
  const int64_t v = state.range(0);
  state.SetLabel(variant_name(v));
  if (v == kRte) return true;
  if (crc32_set_impl(static_cast<Crc32Impl>(v - kPortable))) return true;
  state.SkipWithError("CPU lacks this implementation");
  return false;
}

uint32_t crc_of(int64_t v, const uint8_t* p, size_t n) {
  if (v == kRte) return rte_net_crc_calc(p, static_cast<uint32_t>(n), RTE_NET_CRC32_ETH);
  return ~crc32_update(~0u, p, n);
}

void set_bytes(benchmark::State& state, size_t n) {
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(n));
}

void crc_args(benchmark::internal::Benchmark* b, bool with_rte) {
  for (int64_t v = with_rte ? kRte : kPortable; v <= kAvx512; ++v)
    for (int64_t n : {64, 256, 1024, 4096, 65536}) b->Args({v, n});
}

// CRC alone.
void BM_Crc(benchmark::State& state) {
  if (!select_variant(state)) return;
  const int64_t v = state.range(0);
  const size_t n = static_cast<size_t>(state.range(1));
  CopyBuffers b(n);
  for (auto _ : state) {
    benchmark::DoNotOptimize(crc_of(v, b.src, n));
    benchmark::ClobberMemory();
  }
  set_bytes(state, n);
}
BENCHMARK(BM_Crc)->Apply([](auto* b) { crc_args(b, true); });

// CRC over the source, then memcpy: two passes, what the datapath does today.
void BM_CrcThenMemcpy(benchmark::State& state) {
  if (!select_variant(state)) return;
  const int64_t v = state.range(0);
  const size_t n = static_cast<size_t>(state.range(1));
  CopyBuffers b(n);
  for (auto _ : state) {
    benchmark::DoNotOptimize(crc_of(v, b.src, n));
    std::memcpy(b.dst, b.src, n);
    benchmark::DoNotOptimize(b.dst);
    benchmark::ClobberMemory();
  }
  set_bytes(state, n);
}
BENCHMARK(BM_CrcThenMemcpy)->Apply([](auto* b) { crc_args(b, true); });

// crc32_copy: CRC and copy in one pass.
void BM_Crc32Copy(benchmark::State& state) {
  if (!select_variant(state)) return;
  const size_t n = static_cast<size_t>(state.range(1));
  CopyBuffers b(n);
  for (auto _ : state) {
    benchmark::DoNotOptimize(crc32_copy(~0u, b.dst, b.src, n));
    benchmark::DoNotOptimize(b.dst);
    benchmark::ClobberMemory();
  }
  set_bytes(state, n);
}
BENCHMARK(BM_Crc32Copy)->Apply([](auto* b) { crc_args(b, false); });

// The ICRC of a whole frame through crc32.h (icrc_header_crc up to the ICRC: the masked header
// copy and the rest of the frame), per implementation, for comparison with BM_Icrc.
void BM_IcrcCrc32(benchmark::State& state) {
  if (!select_variant(state)) return;
  auto f = frame_of(static_cast<uint32_t>(state.range(1)));
  ParsedFrame p;
  if (parse(f.data(), f.size(), p) != ParseError::kOk) state.SkipWithError("parse failed");
  for (auto _ : state) {
    benchmark::DoNotOptimize(icrc_value(icrc_header_crc(f.data(), p.l, p.l.icrc_off)));
    benchmark::ClobberMemory();
  }
  set_bytes(state, f.size());
}
BENCHMARK(BM_IcrcCrc32)->Apply([](auto* b) {
  for (int64_t v = kPortable; v <= kAvx512; ++v)
    for (int64_t n : {64, 256, 1024, 4096}) b->Args({v, n});
});

// The bitwise reference, to show what the PCLMULQDQ path buys.
void BM_IcrcBitwiseReference(benchmark::State& state) {
  auto f = frame_of(static_cast<uint32_t>(state.range(0)));
  ParsedFrame p;
  if (parse(f.data(), f.size(), p) != ParseError::kOk) state.SkipWithError("parse failed");
  for (auto _ : state) benchmark::DoNotOptimize(icrc_reference(f.data(), p.l));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(f.size()));
}
BENCHMARK(BM_IcrcBitwiseReference)->Arg(1024);

// Parse only (no ICRC): the per-frame header validation cost on RX.
void BM_Parse(benchmark::State& state) {
  auto f = frame_of(static_cast<uint32_t>(state.range(0)));
  for (auto _ : state) {
    ParsedFrame p;
    benchmark::DoNotOptimize(parse(f.data(), f.size(), p));
    benchmark::DoNotOptimize(p.l.payload_len);
  }
}
BENCHMARK(BM_Parse)->Arg(64)->Arg(1024);

// Headers only (build_headers, no payload copy, no ICRC): the per-frame TX header cost.
void BM_BuildHeaders(benchmark::State& state) {
  const NetHeaders net = demo_net();
  const TransportHeaders th = write_only();
  std::vector<uint8_t> out(4300);
  for (auto _ : state) {
    benchmark::DoNotOptimize(build_headers(out.data(), net, th, 1000));
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_BuildHeaders);

// Whole frame: headers + payload copy + pad + ICRC.
void BM_BuildFrame(benchmark::State& state) {
  const NetHeaders net = demo_net();
  const TransportHeaders th = write_only();
  std::vector<uint8_t> payload(static_cast<size_t>(state.range(0)), 0x5A), out(4300);
  for (auto _ : state) {
    benchmark::DoNotOptimize(build_frame(out, net, th, payload));
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}
BENCHMARK(BM_BuildFrame)->Arg(8)->Arg(1024)->Arg(4096);

}  // namespace
}  // namespace urnic::wire

BENCHMARK_MAIN();

// Wire micro-benchmarks: ICRC (rte_net_crc over the masked frame) next to memcpy of the same
// sizes in the same run, and frame build / parse cost per frame.
//
// Run: build/bench/bench_wire --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
// ICRC and memcpy report bytes/s (SetBytesProcessed) over the whole frame length.
#include <benchmark/benchmark.h>
#include <rte_net_crc.h>

#include <cstring>
#include <vector>

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
BENCHMARK(BM_Icrc)->Arg(64)->Arg(1024)->Arg(4096);

void BM_Memcpy(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  std::vector<uint8_t> src(n, 0x5A), dst(n);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), n);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(n));
}
BENCHMARK(BM_Memcpy)->Arg(64)->Arg(1024)->Arg(4096);

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

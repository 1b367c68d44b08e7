// The micro-benchmarks' adapter pair: two adapters of the public API on one engine, wired back to
// back over a fresh net_ring pair (bench_api.cc, bench_loopback.cc).
#pragma once

#include <array>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <span>
#include <string>

#include "urnic/urnic.h"

namespace urnic {

// EAL for a micro-benchmark: no hugepages, lcores 0 and 1 (the engine goes on 1); false (and a
// line on stderr naming `program`) when EAL cannot come up.
inline bool bench_runtime_init(const char* program) {
  RuntimeConfig rc;
  rc.program = program;
  rc.memory = RuntimeConfig::Memory::kNoHuge;
  rc.lcores = "0-1";
  if (runtime_init(rc) == Status::kSuccess) return true;
  std::fprintf(stderr, "%s: EAL: %s\n", program, last_error());
  return false;
}

// Opens A (192.0.2.1, 02:00:00:00:00:01) and B (192.0.2.2, 02:00:00:00:00:02), each over
// `engines` (one net_ring queue pair per engine, A's queue i wired to B's queue i), over a new
// net_ring pair named `name` (unique in the process), each port with `mbufs` mbufs.
inline bool open_ring_adapters(const std::string& name, uint32_t mbufs,
                               std::span<Engine* const> engines, std::unique_ptr<Adapter>* a,
                               std::unique_ptr<Adapter>* b,
                               uint32_t max_qps = AdapterConfig{}.max_qps) {
  uint16_t pa = 0, pb = 0;
  if (create_ring_port_pair(name, static_cast<uint16_t>(engines.size()), &pa, &pb) !=
      Status::kSuccess)
    return false;
  AdapterConfig ca, cb;
  ca.port_id = pa;
  cb.port_id = pb;
  ca.mbufs = cb.mbufs = mbufs;
  ca.max_qps = cb.max_qps = max_qps;
  ca.ipv4 = 0xC0000201;
  cb.ipv4 = 0xC0000202;
  ca.mac = std::array<uint8_t, 6>{2, 0, 0, 0, 0, 1};
  cb.mac = std::array<uint8_t, 6>{2, 0, 0, 0, 0, 2};
  return Adapter::open(ca, engines, a) == Status::kSuccess &&
         Adapter::open(cb, engines, b) == Status::kSuccess;
}
// The same on one engine.
inline bool open_ring_adapters(const std::string& name, uint32_t mbufs, Engine& engine,
                               std::unique_ptr<Adapter>* a, std::unique_ptr<Adapter>* b,
                               uint32_t max_qps = AdapterConfig{}.max_qps) {
  Engine* const one[] = {&engine};
  return open_ring_adapters(name, mbufs, one, a, b, max_qps);
}

// Brings `q` to RTS towards `peer` on `peer_adapter` (the default path MTU, timeout and retry
// counts): the pair's QPs, connected by hand as a connector would.
inline bool connect_ring_qp(Qp& q, Qp& peer, Adapter& peer_adapter, uint32_t sq_psn,
                            uint32_t rq_psn) {
  auto* ext = q.query_extension<QpConnectExtension>();
  const LocalAddress pa = peer_adapter.query_extension<AdapterExtension>()->local_address();
  QpAttributes at;
  at.state = QpState::kRtr;
  at.av.dst_ipv4 = pa.ipv4;
  at.av.dst_mac = pa.mac;
  at.dest_qpn = peer.query_extension<QpConnectExtension>()->qpn();
  at.rq_psn = rq_psn;
  using namespace qp_attr_mask;
  if (ext->modify(at, kState | kAv | kPathMtu | kDestQpn | kRqPsn | kMaxDestRdAtomic | kMinRnrTimer,
                  nullptr, nullptr) != Status::kSuccess)
    return false;
  at.state = QpState::kRts;
  at.sq_psn = sq_psn;
  return ext->modify(at, kState | kSqPsn | kTimeout | kRetryCnt | kRnrRetry | kMaxRdAtomic, nullptr,
                     nullptr) == Status::kSuccess;
}

}  // namespace urnic

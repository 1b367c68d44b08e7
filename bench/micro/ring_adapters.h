// The micro-benchmarks' adapter pair: two adapters of the public API on one engine, wired back to
// back over a fresh net_ring pair (bench_api.cc, bench_loopback.cc).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "urnic/urnic.h"

namespace urnic {

// Opens A (192.0.2.1, 02:00:00:00:00:01) and B (192.0.2.2, 02:00:00:00:00:02) on `engine` over
// a new net_ring pair named `name` (unique in the process), each port with `mbufs` mbufs.
inline bool open_ring_adapters(const std::string& name, uint32_t mbufs, Engine& engine,
                               std::unique_ptr<Adapter>* a, std::unique_ptr<Adapter>* b) {
  uint16_t pa = 0, pb = 0;
  if (create_ring_port_pair(name, 1, &pa, &pb) != Status::kSuccess) return false;
  AdapterConfig ca, cb;
  ca.port_id = pa;
  cb.port_id = pb;
  ca.mbufs = cb.mbufs = mbufs;
  ca.ipv4 = 0xC0000201;
  cb.ipv4 = 0xC0000202;
  ca.mac = std::array<uint8_t, 6>{2, 0, 0, 0, 0, 1};
  cb.mac = std::array<uint8_t, 6>{2, 0, 0, 0, 0, 2};
  return Adapter::open(ca, engine, a) == Status::kSuccess &&
         Adapter::open(cb, engine, b) == Status::kSuccess;
}

}  // namespace urnic

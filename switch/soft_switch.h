// A software Ethernet switch with the congestion behaviour of a data-centre switch, for testing
// and benchmarking congestion control (issue 15; rocev2.md §5.1 "CP"): every output port has a
// finite buffer drained at a configured line rate, marks ECN-capable frames CE with RED-style
// probability as its queue grows (Kmin, Kmax, Pmax: DCQCN's congestion point), drops what is not
// ECN-capable where it would mark, and tail-drops what does not fit. Ingress can also apply the
// impairments of a real path (loss, duplication, reordering, corruption: dp::FaultInjector) and
// a fixed propagation delay.
//
// Ports are DPDK ethdev ports, so the same switch runs in-process between adapters over net_ring
// pairs (tests, benchmarks: the thread that drives the engines calls step()) and as its own DPDK
// process over af_packet or tap ports (urnic-switch), between two urnic processes or urnic and
// the rxe-peer guest. Forwarding learns source MACs; unknown and broadcast destinations flood.
//
// One thread calls step(); nothing else touches the switch while it runs. It never allocates
// after construction (duplicates come from its own mempool).
#pragma once

#include <rte_mbuf.h>
#include <rte_mempool.h>

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "dataplane/fault.h"
#include "dataplane/wire/frame.h"
#include "dataplane/xorshift.h"

namespace urnic::sw {

struct SwitchConfig {
  // Per output port: line rate (Mb/s; 0 = as fast as the port takes frames) and buffer (bytes).
  uint32_t rate_mbps = 0;
  uint32_t buffer_bytes = 1u << 20;
  // RED/ECN on the output queue's depth in bytes when a frame arrives: no marking up to
  // kmin, probability rising linearly to pmax at kmax, always above kmax (the DCQCN paper's
  // recommended setting is 5 KB / 200 KB / 1 %). ecn false: the same probability drops instead.
  bool ecn = true;
  uint32_t kmin_bytes = 5 * 1000;
  uint32_t kmax_bytes = 200 * 1000;
  double pmax = 0.01;
  // Fixed one-way delay each frame spends in the switch (propagation), in microseconds.
  uint32_t delay_us = 0;
  // Impairments applied to every frame entering the switch (testing builds; FaultConfig).
  FaultConfig impair{};
  uint64_t seed = 1;
};

// Queue depth at enqueue, in 1 KiB buckets up to 4 MiB (the last bucket takes the rest).
struct DepthHistogram {
  static constexpr uint32_t kBucketBytes = 1024, kBuckets = 4096;
  std::array<uint64_t, kBuckets> count{};
  uint64_t total = 0;
  void add(uint32_t bytes) noexcept;
  // The smallest depth (bytes, bucket upper edge) at or below which fraction q of samples lie.
  uint32_t quantile(double q) const noexcept;
};

struct SwitchPortCounters {
  uint64_t rx_frames = 0, rx_bytes = 0;  // entering on this port
  uint64_t tx_frames = 0, tx_bytes = 0;  // leaving on this port
  uint64_t ce_marked = 0;                // marked CE in this port's output queue
  uint64_t red_drops = 0;                // not ECN-capable where RED marks (or ecn off)
  uint64_t tail_drops = 0;               // the output buffer was full
  uint64_t tx_errors = 0;                // the port refused a frame (freed)
  uint32_t max_depth = 0;                // the output queue's largest depth, bytes
};

class SoftSwitch {
 public:
  explicit SoftSwitch(const SwitchConfig& cfg);
  ~SoftSwitch();
  SoftSwitch(const SoftSwitch&) = delete;
  SoftSwitch& operator=(const SoftSwitch&) = delete;

  // Configures and starts a probed ethdev port (one queue each way, promiscuous) as the next
  // switch port; returns its index, or -1 when the port cannot be set up (or the switch's mbuf
  // pool could not be had). Before step().
  int add_port(uint16_t port_id);
  // One pass: receive a burst on every port, forward into output queues (RED, tail drop), then
  // send what each queue's line rate allows by TSC `now`. Returns whether anything moved.
  bool step(uint64_t now) noexcept;

  uint32_t ports() const noexcept { return static_cast<uint32_t>(ports_.size()); }
  const SwitchPortCounters& counters(uint32_t port) const noexcept { return ports_[port].c; }
  const DepthHistogram& depth(uint32_t port) const noexcept { return ports_[port].hist; }
  uint32_t queued_bytes(uint32_t port) const noexcept { return ports_[port].bytes; }
  const FaultCounters* impair_counters() const noexcept;
  const SwitchConfig& config() const noexcept { return cfg_; }

 private:
  struct Entry {
    rte_mbuf* m;
    uint64_t due;  // TSC at which it may leave (arrival + delay)
  };
  struct Port {
    uint16_t port_id = 0;
    std::vector<Entry> ring;  // the output queue, a ring of capacity ring.size()
    uint32_t head = 0, count = 0, bytes = 0;
    uint64_t next_free = 0;  // TSC at which the line is free for the next frame
    SwitchPortCounters c;
    DepthHistogram hist;
  };
  void forward(uint32_t in, rte_mbuf* m, uint64_t now) noexcept;
  void enqueue(Port& p, rte_mbuf* m, uint64_t now) noexcept;
  bool drain(Port& p, uint64_t now) noexcept;
  bool red_hit(uint32_t depth) noexcept;
  int lookup(const wire::MacAddr& mac) const noexcept;
  void learn(const wire::MacAddr& mac, uint32_t port) noexcept;

  SwitchConfig cfg_;
  std::vector<Port> ports_;
  struct Learned {
    wire::MacAddr mac;
    uint32_t port;
  };
  std::vector<Learned> macs_;  // reserved at construction: at most kMaxMacs
  static constexpr size_t kMaxMacs = 1024;
  dp::Xorshift64 rng_;
  uint64_t tsc_per_byte_q16_ = 0;  // at rate_mbps; 0: unlimited
  uint64_t delay_tsc_ = 0;
  uint64_t slack_tsc_ = 0;       // how far an idle line may lag `now` (20 us)
  rte_mempool* pool_ = nullptr;  // received frames (af_packet, tap) and impairment duplicates
  std::unique_ptr<dp::FaultInjector> impair_;
};

}  // namespace urnic::sw

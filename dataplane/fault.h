// Fault injector at the engine's port boundary (architecture.md §7): drop, duplicate, reorder
// (hold a frame back behind k later ones), delay (hold it back for a time), corrupt (flip a bit
// that the ICRC covers) and scripted faults ("drop the 3rd READ RESPONSE"), per direction, seeded
// and reproducible.
//
// Compiled in when URNIC_TESTING is on (urnic::kTesting); the engine's hooks are behind
// `if constexpr (kTesting)` and a null pointer check, so a release build pays nothing and a
// testing build with no injector installed pays one predictable branch per burst.
#pragma once

#include <rte_mbuf.h>
#include <rte_mempool.h>

#include <array>
#include <cstdint>

#include "dataplane/xorshift.h"
#include "urnic/counters.h"

namespace urnic::dp {

// FaultConfig and FaultCounters are public (urnic/counters.h).
using ::urnic::FaultConfig;
using ::urnic::FaultCounters;

class FaultInjector {
 public:
  explicit FaultInjector(const FaultConfig& cfg) noexcept;
  ~FaultInjector();
  FaultInjector(const FaultInjector&) = delete;
  FaultInjector& operator=(const FaultInjector&) = delete;

  // Applies the faults to a burst `in[0..n)` and writes what passes to `out` (capacity `cap`,
  // at least 2n + kMaxHeld so duplicates and released frames fit). Returns the count written.
  // Dropped frames are freed; duplicates are copied from `pool`.
  uint16_t apply(rte_mbuf** in, uint16_t n, rte_mbuf** out, uint16_t cap,
                 rte_mempool* pool) noexcept;
  // Releases the held-back frames that are due into `out` (up to `cap`): every reordered frame
  // (the direction went idle, so no later frame will release it) and each delayed one whose
  // time has come (`now`, TSC). Returns the count.
  uint16_t flush(rte_mbuf** out, uint16_t cap, uint64_t now) noexcept;
  // Whether a frame is held back (the engine keeps calling flush while one is).
  bool holding() const noexcept { return nheld_ != 0; }
  // Frees held frames (teardown).
  void clear() noexcept;

  const FaultCounters& counters() const noexcept { return counters_; }
  const FaultConfig& config() const noexcept { return cfg_; }

  static constexpr uint16_t kMaxHeld = 32;

 private:
  uint64_t next() noexcept;
  bool roll(uint32_t ppm) noexcept;
  void corrupt(rte_mbuf* m) noexcept;
  // Sets the IP ECN field of an ECT frame to CE (fixing the IPv4 header checksum); the ICRC
  // does not cover it (IBTA A17.4.5.2 masks the traffic class).
  void mark_ce(rte_mbuf* m) noexcept;
  // Scripted rule matching this frame, if any.
  const FaultConfig::Rule* match(rte_mbuf* m) noexcept;

  FaultConfig cfg_;
  FaultCounters counters_;
  Xorshift64 rng_;
  std::array<uint32_t, FaultConfig::kMaxRules> rule_seen_{};
  std::array<bool, FaultConfig::kMaxRules> rule_fired_{};
  struct Held {
    rte_mbuf* m;
    uint32_t release_after;  // reordered: frames still to pass before this one goes
    uint64_t release_at;     // delayed (release_after 0): the TSC at which it goes
  };
  uint64_t delay_ticks_ = 0;
  std::array<Held, kMaxHeld> held_{};
  uint16_t nheld_ = 0;
};

}  // namespace urnic::dp

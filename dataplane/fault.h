// Fault injector at the engine's port boundary (architecture.md §7): drop, duplicate, reorder
// (hold a frame back behind k later ones), corrupt (flip a bit that the ICRC covers) and
// scripted faults ("drop the 3rd READ RESPONSE"), per direction, seeded and reproducible.
//
// Compiled in when URNIC_TESTING is on (urnic::kTesting); the engine's hooks are behind
// `if constexpr (kTesting)` and a null pointer check, so a release build pays nothing and a
// testing build with no injector installed pays one predictable branch per burst.
#pragma once

#include <rte_mbuf.h>
#include <rte_mempool.h>

#include <array>
#include <cstdint>

namespace urnic::dp {

struct FaultConfig {
  // Probabilities in parts per million of each frame.
  uint32_t drop_ppm = 0;
  uint32_t duplicate_ppm = 0;
  uint32_t reorder_ppm = 0;
  uint32_t corrupt_ppm = 0;
  uint32_t reorder_depth = 3;  // a reordered frame is released after this many later frames
  uint64_t seed = 1;

  // Scripted faults: act on the `nth` (1-based) frame whose BTH opcode is `opcode` (any RoCEv2
  // frame when opcode is kAnyOpcode). Each rule fires once.
  enum class Action : uint8_t { kDrop, kDuplicate, kCorrupt, kDelay };
  struct Rule {
    uint16_t opcode = 0;
    uint32_t nth = 0;
    Action action = Action::kDrop;
  };
  static constexpr uint16_t kAnyOpcode = 0x100;
  static constexpr size_t kMaxRules = 16;
  std::array<Rule, kMaxRules> rules{};
  uint32_t nrules = 0;

  bool add_rule(uint16_t opcode, uint32_t nth, Action a) noexcept {
    if (nrules == kMaxRules) return false;
    rules[nrules++] = Rule{opcode, nth, a};
    return true;
  }
};

struct FaultCounters {
  uint64_t seen = 0, dropped = 0, duplicated = 0, reordered = 0, corrupted = 0, scripted = 0;
};

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
  // Releases every held-back frame into `out` (up to `cap`); returns the count.
  uint16_t flush(rte_mbuf** out, uint16_t cap) noexcept;
  // Frees held frames (teardown).
  void clear() noexcept;

  const FaultCounters& counters() const noexcept { return counters_; }
  const FaultConfig& config() const noexcept { return cfg_; }

  static constexpr uint16_t kMaxHeld = 32;

 private:
  uint64_t next() noexcept;
  bool roll(uint32_t ppm) noexcept;
  void corrupt(rte_mbuf* m) noexcept;
  // Scripted rule matching this frame, if any.
  const FaultConfig::Rule* match(rte_mbuf* m) noexcept;

  FaultConfig cfg_;
  FaultCounters counters_;
  uint64_t rng_;
  std::array<uint32_t, FaultConfig::kMaxRules> rule_seen_{};
  std::array<bool, FaultConfig::kMaxRules> rule_fired_{};
  struct Held {
    rte_mbuf* m;
    uint32_t release_after;  // frames still to pass before this one goes
  };
  std::array<Held, kMaxHeld> held_{};
  uint16_t nheld_ = 0;
};

}  // namespace urnic::dp

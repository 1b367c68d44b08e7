#include "dataplane/fault.h"

#include <rte_cycles.h>

#include "dataplane/congestion.h"
#include "dataplane/wire/frame.h"

namespace urnic::dp {
namespace {

// Offset of the first byte the corruption may touch: after Ethernet (14) + IPv4 (20) + UDP (8),
// every byte up to the ICRC is covered by the ICRC (for IPv6 these are address bytes, also
// covered), so a flipped bit there is always detected and the frame dropped by the receiver.
constexpr uint32_t kFirstCovered = 14 + 20 + 8;

// The BTH opcode of a RoCEv2 frame, or 0x1FF when the frame is not one.
uint16_t opcode_of(rte_mbuf* m) noexcept {
  wire::ParsedFrame f;
  if (wire::parse(rte_pktmbuf_mtod(m, uint8_t*), rte_pktmbuf_data_len(m), f) !=
      wire::ParseError::kOk)
    return 0x1FF;
  return f.opcode;
}

}  // namespace

FaultInjector::FaultInjector(const FaultConfig& cfg) noexcept
    : cfg_(cfg), rng_(cfg.seed), delay_ticks_(rte_get_tsc_hz() / 1000000 * cfg.delay_us) {}

FaultInjector::~FaultInjector() { clear(); }

uint64_t FaultInjector::next() noexcept { return rng_.next(); }

bool FaultInjector::roll(uint32_t ppm) noexcept {
  return ppm != 0 && (next() >> 32) % 1000000 < ppm;
}

void FaultInjector::corrupt(rte_mbuf* m) noexcept {
  const uint32_t len = rte_pktmbuf_data_len(m);
  if (len <= kFirstCovered) return;
  uint8_t* d = rte_pktmbuf_mtod(m, uint8_t*);
  const uint64_t r = next();
  d[kFirstCovered + (r >> 8) % (len - kFirstCovered)] ^= static_cast<uint8_t>(1u << (r & 7));
  ++counters_.corrupted;
}

void FaultInjector::mark_ce(rte_mbuf* m) noexcept {
  uint8_t* d = rte_pktmbuf_mtod(m, uint8_t*);
  wire::ParsedFrame f;
  if (wire::parse(d, rte_pktmbuf_data_len(m), f) != wire::ParseError::kOk) return;
  const uint8_t ecn = frame_ecn(f);
  if (ecn == kEcnNotEct || ecn == kEcnCe) return;  // never a Not-ECT frame (RFC 3168 §5)
  uint8_t* ip = d + f.l.l3_off;                    // after the VLAN tag, if any
  if (f.l.ipv6) {
    auto& h = *reinterpret_cast<wire::Ipv6Hdr*>(ip);
    wire::Ipv6Hdr::TrafficClass::set(h, wire::Ipv6Hdr::TrafficClass::get(h) | kEcnCe);
  } else {
    auto& h = *reinterpret_cast<wire::Ipv4Hdr*>(ip);
    h.tos |= kEcnCe;
    h.checksum = wire::Be16::of(0);
    h.checksum = wire::Be16::of(wire::ipv4_checksum(ip));
  }
  ++counters_.ce_marked;
}

const FaultConfig::Rule* FaultInjector::match(rte_mbuf* m) noexcept {
  if (cfg_.nrules == 0) return nullptr;
  const uint16_t op = opcode_of(m);
  for (uint32_t i = 0; i < cfg_.nrules; ++i) {
    const FaultConfig::Rule& r = cfg_.rules[i];
    if (rule_fired_[i] || (r.opcode != FaultConfig::kAnyOpcode && r.opcode != op)) continue;
    if (op == 0x1FF) continue;  // rules count RoCEv2 frames only
    if (++rule_seen_[i] == r.nth) {
      rule_fired_[i] = true;
      ++counters_.scripted;
      return &r;
    }
  }
  return nullptr;
}

uint16_t FaultInjector::apply(rte_mbuf** in, uint16_t n, rte_mbuf** out, uint16_t cap,
                              rte_mempool* pool) noexcept {
  uint16_t k = 0;
  auto emit = [&](rte_mbuf* m) {
    if (k < cap) {
      out[k++] = m;
    } else {
      rte_pktmbuf_free(m);  // never happens with cap >= 2n + kMaxHeld
      ++counters_.dropped;
    }
  };
  const uint64_t now = nheld_ != 0 || cfg_.delay_ppm != 0 ? rte_rdtsc() : 0;
  for (uint16_t i = 0; i < n; ++i) {
    rte_mbuf* m = in[i];
    ++counters_.seen;
    // Reordered frames move one step closer to release with every frame that passes; delayed
    // ones go when their time has come.
    for (uint16_t h = 0; h < nheld_;) {
      const bool due =
          held_[h].release_after == 0 ? now >= held_[h].release_at : --held_[h].release_after == 0;
      if (due) {
        emit(held_[h].m);
        held_[h] = held_[--nheld_];
      } else {
        ++h;
      }
    }
    const FaultConfig::Rule* rule = match(m);
    bool dup = false, delay = false, drop = false, corrupt_it = false, timed = false;
    if (rule != nullptr) {
      drop = rule->action == FaultConfig::Action::kDrop;
      dup = rule->action == FaultConfig::Action::kDuplicate;
      corrupt_it = rule->action == FaultConfig::Action::kCorrupt;
      delay = rule->action == FaultConfig::Action::kDelay;
    } else {
      drop = roll(cfg_.drop_ppm);
      dup = !drop && roll(cfg_.duplicate_ppm);
      corrupt_it = !drop && roll(cfg_.corrupt_ppm);
      delay = !drop && roll(cfg_.reorder_ppm);
      timed = !drop && !delay && roll(cfg_.delay_ppm);
    }
    if (drop) {
      ++counters_.dropped;
      rte_pktmbuf_free(m);
      continue;
    }
    if (dup) {
      rte_mbuf* c = rte_pktmbuf_copy(m, pool, 0, UINT32_MAX);
      if (c != nullptr) {
        ++counters_.duplicated;
        emit(c);
      }
    }
    if (corrupt_it) corrupt(m);
    if (roll(cfg_.ce_ppm)) mark_ce(m);
    if (delay && nheld_ < kMaxHeld) {
      ++counters_.reordered;
      held_[nheld_++] = Held{m, cfg_.reorder_depth == 0 ? 1 : cfg_.reorder_depth, 0};
      continue;
    }
    if (timed && nheld_ < kMaxHeld) {
      ++counters_.delayed;
      held_[nheld_++] = Held{m, 0, now + delay_ticks_};
      continue;
    }
    emit(m);
  }
  return k;
}

uint16_t FaultInjector::flush(rte_mbuf** out, uint16_t cap, uint64_t now) noexcept {
  uint16_t k = 0;
  for (uint16_t h = 0; h < nheld_ && k < cap;) {
    if (held_[h].release_after != 0 || now >= held_[h].release_at) {
      out[k++] = held_[h].m;
      held_[h] = held_[--nheld_];
    } else {
      ++h;
    }
  }
  return k;
}

void FaultInjector::clear() noexcept {
  while (nheld_ != 0) rte_pktmbuf_free(held_[--nheld_].m);
}

}  // namespace urnic::dp

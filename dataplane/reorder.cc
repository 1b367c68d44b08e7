// Selective repeat: the reorder buffer (reorder.h).
#include "dataplane/reorder.h"

#include <cstring>
#include <type_traits>

namespace urnic::dp {

using wire::Psn;

namespace {

void release_lc(Endpoint& ep, ReorderBuf& b, uint32_t i) noexcept {
  rte_pktmbuf_free(b.frame[i]);
  b.frame[i] = nullptr;
  --b.count;
  ep.reorder_release();
}

// Where a held frame's parsed form is kept: the headroom right before the frame, or null when
// the mbuf has too little of it (then the frame is parsed again on release).
wire::ParsedFrame* stash_of(rte_mbuf* m) noexcept {
  if (rte_pktmbuf_headroom(m) < sizeof(wire::ParsedFrame)) return nullptr;
  return reinterpret_cast<wire::ParsedFrame*>(rte_pktmbuf_mtod(m, uint8_t*) -
                                              sizeof(wire::ParsedFrame));
}
static_assert(std::is_trivially_copyable_v<wire::ParsedFrame>);

}  // namespace

Hold reorder_hold_lc(Endpoint& ep, ReorderBuf& b, rte_mbuf* m, const wire::ParsedFrame& f, Psn psn,
                     Psn expected) noexcept {
  const int32_t ahead = Psn::diff(psn, expected);
  if (ahead <= 0 || ahead >= static_cast<int32_t>(kReorderSlots)) return Hold::kNo;
  const uint32_t i = psn.value() % kReorderSlots;
  if (b.frame[i] != nullptr) {
    if (b.psn[i] == psn.value()) {
      rte_pktmbuf_free(m);  // a copy (a go-back-N pass, a duplicated frame): keep the first
      return Hold::kCopy;
    }
    release_lc(ep, b, i);  // a PSN that can no longer be processed (reorder_skip_lc's case)
  }
  if (!ep.reorder_acquire()) return Hold::kNo;
  if (wire::ParsedFrame* st = stash_of(m)) std::memcpy(static_cast<void*>(st), &f, sizeof f);
  b.frame[i] = m;
  b.psn[i] = psn.value();
  ++b.count;
  return Hold::kHeld;
}

rte_mbuf* reorder_take_lc(Endpoint& ep, ReorderBuf& b, Psn expected,
                          wire::ParsedFrame* f) noexcept {
  const uint32_t i = expected.value() % kReorderSlots;
  rte_mbuf* m = b.frame[i];
  if (m == nullptr || b.psn[i] != expected.value()) return nullptr;
  b.frame[i] = nullptr;
  --b.count;
  ep.reorder_release();
  if (const wire::ParsedFrame* st = stash_of(m)) {
    std::memcpy(static_cast<void*>(f), st, sizeof *f);
  } else {
    // It parsed (and passed its ICRC) when it arrived; the headers are unchanged.
    (void)wire::parse(rte_pktmbuf_mtod(m, uint8_t*), rte_pktmbuf_data_len(m), *f);
  }
  return m;
}

void reorder_skip_lc(Endpoint& ep, ReorderBuf& b, Psn from, Psn to) noexcept {
  for (int32_t k = 0; k < Psn::diff(to, from) && b.count != 0; ++k) {
    if (k >= static_cast<int32_t>(kReorderSlots)) {
      reorder_clear_lc(ep, b);  // a jump past the whole buffer: nothing held can be used
      return;
    }
    const Psn p = from + k;
    const uint32_t i = p.value() % kReorderSlots;
    if (b.frame[i] != nullptr && b.psn[i] == p.value()) release_lc(ep, b, i);
  }
}

void reorder_clear_lc(Endpoint& ep, ReorderBuf& b) noexcept {
  for (uint32_t i = 0; i < kReorderSlots && b.count != 0; ++i)
    if (b.frame[i] != nullptr) release_lc(ep, b, i);
}

}  // namespace urnic::dp

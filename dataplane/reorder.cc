// Selective repeat, responder side: the reorder buffer (reorder.h).
#include "dataplane/reorder.h"

namespace urnic::dp {

using wire::Psn;

namespace {

void release_lc(Endpoint& ep, Qp& qp, uint32_t i) noexcept {
  auto& s = lc(qp).resp;
  rte_pktmbuf_free(s.held[i]);
  s.held[i] = nullptr;
  --s.held_count;
  ep.reorder_release();
}

}  // namespace

bool reorder_hold_lc(Endpoint& ep, Qp& qp, rte_mbuf* m, Psn psn) noexcept {
  auto& s = lc(qp).resp;
  const int32_t ahead = Psn::diff(psn, s.epsn);
  if (ahead <= 0 || ahead >= static_cast<int32_t>(kReorderSlots)) return false;
  const uint32_t i = psn.value() % kReorderSlots;
  if (s.held[i] != nullptr) {
    if (s.held_psn[i] == psn.value()) {
      rte_pktmbuf_free(m);  // a copy (a go-back-N pass, a duplicated frame): keep the first
      ++lc(qp).counters.duplicate_requests;
      return true;
    }
    release_lc(ep, qp, i);  // a PSN that can no longer be processed (reorder_skip_lc's case)
  }
  if (!ep.reorder_acquire()) return false;
  s.held[i] = m;
  s.held_psn[i] = psn.value();
  ++s.held_count;
  ++lc(qp).counters.ooo_held;
  return true;
}

rte_mbuf* reorder_take_lc(Endpoint& ep, Qp& qp) noexcept {
  auto& s = lc(qp).resp;
  const uint32_t i = s.epsn.value() % kReorderSlots;
  rte_mbuf* m = s.held[i];
  if (m == nullptr || s.held_psn[i] != s.epsn.value()) return nullptr;
  s.held[i] = nullptr;
  --s.held_count;
  ep.reorder_release();
  return m;
}

void reorder_skip_lc(Endpoint& ep, Qp& qp, Psn from, Psn to) noexcept {
  auto& s = lc(qp).resp;
  for (int32_t k = 0; k < Psn::diff(to, from) && s.held_count != 0; ++k) {
    if (k >= static_cast<int32_t>(kReorderSlots)) {
      reorder_clear_lc(ep, qp);  // a jump past the whole buffer: nothing held can be used
      return;
    }
    const Psn p = from + k;
    const uint32_t i = p.value() % kReorderSlots;
    if (s.held[i] != nullptr && s.held_psn[i] == p.value()) release_lc(ep, qp, i);
  }
}

void reorder_clear_lc(Endpoint& ep, Qp& qp) noexcept {
  auto& s = lc(qp).resp;
  for (uint32_t i = 0; i < kReorderSlots && s.held_count != 0; ++i)
    if (s.held[i] != nullptr) release_lc(ep, qp, i);
}

}  // namespace urnic::dp

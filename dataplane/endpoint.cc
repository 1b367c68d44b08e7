// Endpoint: TX buffer, control frame path and drop reasons (endpoint.h).
#include "dataplane/endpoint.h"

#include <array>
#include <cstring>

namespace urnic {

const char* to_string(RxDrop r) noexcept {
  static constexpr std::array<const char*, static_cast<size_t>(RxDrop::kCount)> kNames = {
      "malformed", "bad_icrc", "no_qp", "bad_address", "unsupported", "not_roce", "handoff_full"};
  const auto i = static_cast<size_t>(r);
  return i < kNames.size() ? kNames[i] : "?";
}

}  // namespace urnic

namespace urnic::dp {

Endpoint::Endpoint(Port* port, uint16_t queue, rte_mempool* pool, MrTable* mrs, uint32_t max_qps)
    : port_(port),
      queue_(queue),
      pool_(pool),
      mrs_(mrs),
      max_qps_(max_qps),
      qps_(std::make_unique<Qp*[]>(max_qps)),
      // Without a pool (protocol tests) frames come from the test's own: one QP's buffer.
      reorder_cap_(pool != nullptr ? pool->size / 4 : kReorderSlots) {}

void Endpoint::tx_consume(uint32_t n) noexcept {
  for (uint32_t i = n; i < tx_count_; ++i) tx_[i - n] = tx_[i];
  tx_count_ -= n;
}

uint32_t Endpoint::loop_take_lc() noexcept {
  const uint32_t before = loop_count_;
  uint32_t kept = 0;
  for (uint32_t i = 0; i < tx_count_; ++i) {
    rte_mbuf* m = tx_[i];
    const auto* eth = rte_pktmbuf_mtod(m, const uint8_t*);
    // Destination MAC == source MAC: a frame to this adapter (its net template or the control
    // plane addressed its own MAC). The buffer has room for every frame of one flush: it is
    // emptied by the receive phase before the next one.
    if (rte_pktmbuf_data_len(m) >= 12 && std::memcmp(eth, eth + 6, 6) == 0 &&
        loop_count_ < kTxCapacity) {
      loop_[loop_count_++] = m;
    } else {
      tx_[kept++] = m;
    }
  }
  tx_count_ = kept;
  return loop_count_ - before;
}

void Endpoint::tx_append_faulty(rte_mbuf* m) noexcept {
  rte_mbuf* out[FaultInjector::kMaxHeld + 2];
  const uint16_t n = tx_fault_->apply(&m, 1, out, FaultInjector::kMaxHeld + 2, pool_);
  for (uint16_t i = 0; i < n; ++i) {
    if (tx_count_ < kTxCapacity) {
      tx_[tx_count_++] = out[i];
    } else {
      rte_pktmbuf_free(out[i]);  // a duplicate beyond the TX buffer: lost like a full queue's
    }
  }
}

uint32_t Endpoint::drain_control_tx_lc() noexcept {
  uint32_t n = 0;
  // Control frames bypass the fault injector: faults are for the RoCE transport under test.
  while (tx_count_ < kTxCapacity) {
    rte_mbuf* m = control_tx_.pop();
    if (m == nullptr) break;
    tx_[tx_count_++] = m;
    ++n;
  }
  return n;
}

void Endpoint::tx_drop_all() noexcept {
  for (uint32_t i = 0; i < tx_count_; ++i) rte_pktmbuf_free(tx_[i]);
  tx_count_ = 0;
  while (rte_mbuf* m = control_tx_.pop()) rte_pktmbuf_free(m);
}

}  // namespace urnic::dp

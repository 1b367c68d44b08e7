// Bounded multi-producer / single-consumer ring of pointers: the control plane's mailbox into an
// engine (architecture.md §3; house style rule 4). Rarely non-empty, so simplicity beats speed.
//
// Each cell carries a sequence number (Vyukov's bounded queue): a producer claims a cell by
// compare-exchange on `tail_`, writes the pointer, then stores seq = pos + 1 with release; the
// consumer reads seq with acquire (pairs with that store) before taking the pointer and frees the
// cell by storing seq = pos + capacity with release (pairs with the producer's acquire load).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "dataplane/ring.h"

namespace urnic::dp {

template <typename T>
class MpscPtrRing {
 public:
  explicit MpscPtrRing(size_t capacity)
      : mask_(capacity - 1), cells_(std::make_unique<Cell[]>(capacity)) {
    for (size_t i = 0; i < capacity; ++i) cells_[i].seq.store(i, std::memory_order_relaxed);
  }
  // Any thread. False when full.
  bool push(T* p) noexcept {
    size_t pos = tail_.load(std::memory_order_relaxed);
    for (;;) {
      Cell& c = cells_[pos & mask_];
      const size_t seq = c.seq.load(std::memory_order_acquire);  // pairs with consumer release
      const auto dif = static_cast<intptr_t>(seq) - static_cast<intptr_t>(pos);
      if (dif == 0) {
        if (tail_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) {
          c.ptr = p;
          c.seq.store(pos + 1, std::memory_order_release);  // pairs with consumer acquire
          return true;
        }
      } else if (dif < 0) {
        return false;
      } else {
        pos = tail_.load(std::memory_order_relaxed);
      }
    }
  }
  // Consumer (the engine) only. nullptr when empty.
  T* pop() noexcept {
    Cell& c = cells_[head_ & mask_];
    const size_t seq = c.seq.load(std::memory_order_acquire);  // pairs with producer release
    if (seq != head_ + 1) return nullptr;
    T* p = c.ptr;
    c.seq.store(head_ + mask_ + 1, std::memory_order_release);  // pairs with producer acquire
    ++head_;
    return p;
  }
  bool maybe_nonempty() const noexcept {
    return cells_[head_ & mask_].seq.load(std::memory_order_relaxed) == head_ + 1;
  }

 private:
  struct Cell {
    std::atomic<size_t> seq{0};
    T* ptr = nullptr;
  };
  size_t mask_;
  std::unique_ptr<Cell[]> cells_;
  alignas(kCacheLine) std::atomic<size_t> tail_{0};
  alignas(kCacheLine) size_t head_ = 0;
};

}  // namespace urnic::dp

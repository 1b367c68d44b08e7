// Work queue entries: what the application posts into SQ / RQ rings and the engine consumes
// (architecture.md §3). Fixed-size, trivially copyable slots.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "urnic/types.h"

namespace urnic::dp {

// Initiator operations (IBTA §10.7.3 work request types; NDK posting functions).
enum class WrOpcode : uint8_t {
  kSend,
  kSendWithImm,
  kSendWithInv,
  kWrite,
  kWriteWithImm,
  kRead,
  kCompareSwap,
  kFetchAdd,
  kLocalInvalidate,
  kFastRegister,
  kBind,  // memory window bind (IBTA §10.6.7.2.2, type 2); executed in order like kFastRegister
  kCount,
};
const char* to_string(WrOpcode op) noexcept;

// SGEs per WQE slot, and the inline capacity that shares their space.
inline constexpr uint32_t kMaxSge = 16;
inline constexpr uint32_t kMaxInline = kMaxSge * sizeof(Sge);

struct SendWqe {
  void* request_context = nullptr;
  WrOpcode opcode = WrOpcode::kSend;
  uint8_t num_sge = 0;
  uint32_t flags = 0;       // NDK_OP_FLAG_* (urnic::op_flag)
  uint32_t length = 0;      // total payload bytes: sum of SGE lengths, or the inline length
  uint32_t imm_or_inv = 0;  // immediate data (host order) or the rkey to invalidate (SEND_INV)
  uint64_t remote_addr = 0;
  uint32_t rkey = 0;
  // kLocalInvalidate: key to invalidate; kFastRegister / kBind: the key to install (kBind: the
  // window's, with `rkey` the region's key, `base_va` / `fr_length` the window, `access` its
  // remote rights).
  uint32_t mr_key = 0;
  uint64_t compare_add = 0;  // atomics: compare (CAS) or add (FETCH_ADD) operand
  uint64_t swap = 0;         // CAS swap operand
  // kFastRegister: page list (must stay valid until the work request completes), FBO, length,
  // base virtual address and access bits (dp::access).
  const uint64_t* pages = nullptr;
  uint32_t npages = 0;
  uint32_t fbo = 0;
  uint64_t fr_length = 0;
  uint64_t base_va = 0;
  uint32_t access = 0;
  union {
    Sge sge[kMaxSge];
    uint8_t inline_data[kMaxInline];
  };
  SendWqe() : sge{} {}
};
static_assert(std::is_trivially_copyable_v<SendWqe>);

// The bytes of a send WQE that carry information: the fixed fields, then the SGEs in use or the
// inline bytes. Posting and the requester copy only these (the rest of a slot is never read):
// copying whole 352-byte WQEs twice per message was ~10% of the time of a 64 B RDMA WRITE in the
// urnic-perf loopback profile.
inline size_t send_wqe_used_bytes(const SendWqe& w) noexcept {
  const size_t tail =
      (w.flags & op_flag::kInline) != 0 ? size_t{w.length} : size_t{w.num_sge} * sizeof(Sge);
  return offsetof(SendWqe, sge) + (tail < sizeof(w.sge) ? tail : sizeof(w.sge));
}
inline void copy_send_wqe(SendWqe& dst, const SendWqe& src) noexcept {
  std::memcpy(static_cast<void*>(&dst), &src, send_wqe_used_bytes(src));
}

struct RecvWqe {
  void* request_context = nullptr;
  uint32_t num_sge = 0;
  uint32_t length = 0;  // sum of SGE lengths
  Sge sge[kMaxSge] = {};
};
static_assert(std::is_trivially_copyable_v<RecvWqe>);

}  // namespace urnic::dp

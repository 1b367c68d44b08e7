// Work queue entries: what the application posts into SQ / RQ rings and the engine consumes
// (architecture.md §3). Fixed-size, trivially copyable slots.
#pragma once

#include <array>
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

// What each work request opcode is (rxe's wr_opcode_info in rxe_opcode.c, for urnic): mask bits,
// the completion's operation type and the name. Indexed by WrOpcode; posting rejects an opcode
// >= kCount, so the engine indexes it without a bounds check.
namespace wr_mask {
inline constexpr uint32_t kSend = 1u << 0;       // SEND, SEND with immediate / invalidate
inline constexpr uint32_t kWrite = 1u << 1;      // RDMA WRITE, with or without immediate
inline constexpr uint32_t kRead = 1u << 2;       // RDMA READ
inline constexpr uint32_t kAtomic = 1u << 3;     // CompareSwap, FetchAdd
inline constexpr uint32_t kLocalOp = 1u << 4;    // executed by the requester, sends no packet
inline constexpr uint32_t kImm = 1u << 5;        // carries immediate data
inline constexpr uint32_t kInv = 1u << 6;        // carries an R_Key for the responder to invalidate
inline constexpr uint32_t kNeedsRecv = 1u << 7;  // consumes a receive WQE at the responder
inline constexpr uint32_t kData = 1u << 8;       // SGE list or inline data of `length` bytes
// Waits for its own response (READ response / ATOMIC ACK), counts against max_rd_atomic.
inline constexpr uint32_t kReadOrAtomic = kRead | kAtomic;
}  // namespace wr_mask

struct WrOpcodeInfo {
  const char* name;
  uint32_t mask;
  OperationType type;  // the completion's operation type
};

inline constexpr std::array<WrOpcodeInfo, static_cast<size_t>(WrOpcode::kCount)> kWrOpcodeInfo = {{
    {"SEND", wr_mask::kSend | wr_mask::kNeedsRecv | wr_mask::kData, OperationType::kSend},
    {"SEND_WITH_IMM", wr_mask::kSend | wr_mask::kImm | wr_mask::kNeedsRecv | wr_mask::kData,
     OperationType::kSend},
    {"SEND_WITH_INV", wr_mask::kSend | wr_mask::kInv | wr_mask::kNeedsRecv | wr_mask::kData,
     OperationType::kSend},
    {"RDMA_WRITE", wr_mask::kWrite | wr_mask::kData, OperationType::kWrite},
    {"RDMA_WRITE_WITH_IMM", wr_mask::kWrite | wr_mask::kImm | wr_mask::kNeedsRecv | wr_mask::kData,
     OperationType::kWrite},
    {"RDMA_READ", wr_mask::kRead | wr_mask::kData, OperationType::kRead},
    {"COMPARE_SWAP", wr_mask::kAtomic, OperationType::kCompareSwap},
    {"FETCH_ADD", wr_mask::kAtomic, OperationType::kFetchAdd},
    {"LOCAL_INVALIDATE", wr_mask::kLocalOp, OperationType::kInvalidate},
    {"FAST_REGISTER", wr_mask::kLocalOp, OperationType::kFastRegister},
    {"BIND", wr_mask::kLocalOp, OperationType::kBind},
}};

constexpr const WrOpcodeInfo& wr_opcode_info(WrOpcode op) noexcept {
  return kWrOpcodeInfo[static_cast<size_t>(op)];
}
// True when `op` has any of the bits in `mask` (wr_mask).
constexpr bool wr_has(WrOpcode op, uint32_t mask) noexcept {
  return (wr_opcode_info(op).mask & mask) != 0;
}

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
  // Datagram QPs use remote_addr, rkey and mr_key for the destination (ud_* below).
  union {
    Sge sge[kMaxSge];
    uint8_t inline_data[kMaxInline];
  };
  // The SGE / inline area is left as it is: only the SGEs in use or the inline bytes are ever
  // read or copied (send_wqe_used_bytes), and zeroing its 256 bytes was ~40 instructions of
  // every post (bench/cost, issue 13).
  SendWqe() {}
};
static_assert(std::is_trivially_copyable_v<SendWqe>);

// A datagram send (QpConfig::ud) names its destination in fields a datagram QP has no other use
// for: the address handle's network headers (valid until completion), the QPN and the Q_Key.
inline void set_ud_destination(SendWqe& w, const void* net, uint32_t qpn, uint32_t qkey) noexcept {
  w.remote_addr = reinterpret_cast<uintptr_t>(net);
  w.rkey = qpn;
  w.mr_key = qkey;
}
inline const void* ud_net(const SendWqe& w) noexcept {
  return reinterpret_cast<const void*>(static_cast<uintptr_t>(w.remote_addr));
}
inline uint32_t ud_qpn(const SendWqe& w) noexcept { return w.rkey; }
inline uint32_t ud_qkey(const SendWqe& w) noexcept { return w.mr_key; }

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

// Slot sizes of the work queue rings (WqeRing) for a queue's limits: the fixed fields, then room
// for the SGEs or the inline bytes it accepts, whichever is larger. A send slot holds at least
// one SGE, which an atomic carries whatever max_sge says. A QP that asked for one SGE and no
// inline data has 112-byte send slots and 32-byte receive slots instead of 352 and 272; the
// posting checks (Qp::post_send, Qp::post_recv, Srq::post) keep every entry within its slot.
constexpr size_t send_wqe_slot_bytes(uint32_t max_sge, uint32_t max_inline) noexcept {
  size_t tail = size_t{max_sge < 1 ? 1 : max_sge} * sizeof(Sge);
  const size_t inl = (size_t{max_inline} + 7) & ~size_t{7};
  if (inl > tail) tail = inl;
  if (tail > kMaxInline) tail = kMaxInline;
  return offsetof(SendWqe, sge) + tail;
}
constexpr size_t recv_wqe_slot_bytes(uint32_t max_sge) noexcept {
  return offsetof(RecvWqe, sge) + size_t{max_sge < kMaxSge ? max_sge : kMaxSge} * sizeof(Sge);
}
static_assert(send_wqe_slot_bytes(kMaxSge, kMaxInline) == sizeof(SendWqe));
static_assert(recv_wqe_slot_bytes(kMaxSge) == sizeof(RecvWqe));

}  // namespace urnic::dp

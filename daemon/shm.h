// The shared-memory rings between an attached client and urnicd (docs/daemon.md "Shared
// rings"): each CQ and each QP of a client has one memfd, made by the daemon, mapped by both.
// A QP's memfd holds its send queue then its receive queue; a CQ's its completion ring. Each
// ring is a RingHeader (the producer's index and the consumer's index on cache lines of their
// own) followed by its slots, a power of two of them.
//
// Who writes what: the client produces send and receive WQEs and consumes completions; the
// daemon (the bridge on the engine's lcore, daemon/bridge.h) consumes WQEs and produces
// completions. Each side keeps the authoritative copy of its own index in its own memory and
// only publishes it here; the other side's index, read from here, is untrusted: the daemon
// checks that a client's producer index is at most `capacity` ahead of its own consumer index
// (else the QP fails), copies a slot out before it looks at it (a client rewriting the slot
// meanwhile changes nothing), and checks every field of the copy. Indices are free-running
// 32-bit counters; a slot is index & (capacity - 1).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "urnic/types.h"

namespace urnic::shm {

struct alignas(64) RingHeader {
  alignas(64) std::atomic<uint32_t> prod;
  alignas(64) std::atomic<uint32_t> cons;
  // A completion ring's arm (NdkArmCq): kArm*, set by the client (merged by max, as the
  // embedded dp::Cq does), taken back to kArmNone by a compare-exchange by whoever fires it: the
  // bridge after it publishes a completion that satisfies it, or the client's arm() when one
  // waits unconsumed in the ring. The winner writes the CQ's eventfd (the client's, passed with
  // CreateCq). Dekker: the bridge stores prod, then (full fence) loads arm; the client stores arm,
  // then (full fence) loads prod; one of the two sees the other. Untrusted like the indices:
  // the bridge only compares it.
  std::atomic<uint32_t> arm;
  // A send ring's: set (to 1) by the bridge when it takes the QP out of service for what its
  // client wrote; a client waiting for a synchronous slot (kBind, kFastRegister) stops there.
  std::atomic<uint32_t> failed;
  // A completion ring's: set (to 1) by the bridge when a resize moved the CQ to a new ring; its
  // producer index, read after this (acquire), is final.
  std::atomic<uint32_t> moved;
};
inline constexpr uint32_t kArmNone = 0, kArmErrors = 1, kArmSolicited = 2, kArmAny = 3;
// Whether completion `r` satisfies arm `level`.
inline bool satisfies(const ResultEx& r, uint32_t level) noexcept {
  const bool error = r.status != Status::kSuccess;
  return level == kArmAny || (level == kArmSolicited && ((r.flags & kResultSolicited) || error)) ||
         (level == kArmErrors && error);
}
static_assert(sizeof(RingHeader) == 128 && std::atomic<uint32_t>::is_always_lock_free);

// An engine's doorbell page: the engine sets `sleeping` before it naps and clears it when it
// wakes; a client that publishes work reads it (after a full fence) and writes the engine's wake
// eventfd only while it is set, so that posting costs no syscall while the engine polls (the
// notification suppression of virtio). A client that writes the flag itself only wakes the
// engine needlessly or lets it nap its full time.
struct alignas(64) EngineDoorbell {
  std::atomic<uint32_t> sleeping;
};

// Work request opcodes in a send slot (what the client library writes; the bridge maps each to
// the public API call that posts it).
enum class SendOp : uint8_t {
  kSend = 1,
  kWrite = 2,
  kRead = 3,
  kSendInvalidate = 4,
  // QpExtension's (since protocol 1.5):
  kSendImm = 5,
  kWriteImm = 6,
  kCompareSwap = 7,  // one SGE, the 8-byte result
  kFetchAdd = 8,
  // Datagram QPs (since 1.6): `rkey` is the remote QPN, `remote_addr` the address handle
  // (CreateAh's, low 32 bits) and the remote Q_Key (high 32 bits); kDatagramImm carries `imm`.
  kDatagram = 9,
  kDatagramImm = 10,
  // Memory windows and fast-register MRs (since 1.7). Objects are named by the daemon's handles
  // (a handle of another client, or of nothing, fails the request). kBind and kFastRegister are
  // synchronous: the client waits until the bridge has posted them (the ring's consumer index
  // passes the slot) and reads the result it wrote back into the slot's `swap` (sync_result):
  // the status of the daemon's post, and the new token, which NDK makes readable as soon as the
  // call returns. A failed synchronous slot fails only that request, as the embedded call does.
  //  kBind: rkey the MR, imm the window, remote_addr the address, compare_add the length.
  //  kInvalidate: rkey the fast-register MR or the window.
  //  kFastRegister: rkey the MR, remote_addr the base address, compare_add the length, imm the
  //  first byte offset, length the page count; the pages are in the QP's page list area
  //  (page_list_offset), which the bridge copies before it posts.
  kBind = 11,
  kInvalidate = 12,
  kFastRegister = 13,
};

// A synchronous slot's result, written into its `swap` by the bridge before it publishes the
// consumer index past it.
constexpr uint64_t sync_result(Status s, uint32_t token) noexcept {
  return uint64_t{static_cast<uint32_t>(s)} << 32 | token;
}
inline Status sync_status(uint64_t r) noexcept { return static_cast<Status>(r >> 32); }
inline uint32_t sync_token(uint64_t r) noexcept { return static_cast<uint32_t>(r); }

// Pages one FastRegister maps in attach mode (the adapter's frmr_page_count there: 1 MiB of
// 4 KiB pages), and the page list area after a QP's rings that carries them.
inline constexpr uint32_t kAttachFrmrPages = 256;
inline constexpr size_t kPageListBytes = kAttachFrmrPages * sizeof(uint64_t);

// Copies `n` SGEs (a slot's list, either way across the boundary): one, the common case, as a
// fixed-size copy (two moves, not a call); none without touching `src` (which may then be null:
// memcpy of null is undefined even for 0 bytes).
inline void copy_sges(void* dst, const void* src, size_t n) noexcept {
  if (n == 1)
    std::memcpy(dst, src, sizeof(Sge));
  else if (n != 0)
    std::memcpy(dst, src, n * sizeof(Sge));
}

// A send WQE: the fixed part, then `sge_or_inline` (num_sge SGEs, or `length` inline bytes when
// flags has op_flag::kInline).
struct SendSlot {
  uint64_t request_context;  // the client's, returned verbatim in its completion
  uint8_t op;                // SendOp
  uint8_t num_sge;
  uint16_t reserved;
  uint32_t flags;   // op_flag::*
  uint32_t length;  // inline bytes
  uint32_t rkey;    // write/read: the remote token; send-and-invalidate: the token to invalidate
  uint64_t remote_addr;
  uint32_t imm;          // kSendImm / kWriteImm: the immediate data (host order)
  uint32_t reserved2;    // 0
  uint64_t compare_add;  // kCompareSwap: compare; kFetchAdd: add
  uint64_t swap;         // kCompareSwap
  Sge sge[1];            // really num_sge of them (the slot's stride gives the room)
};
static_assert(sizeof(SendSlot) == 72 && offsetof(SendSlot, sge) == 56);

struct RecvSlot {
  uint64_t request_context;
  uint32_t num_sge;
  uint32_t reserved;
  Sge sge[1];  // really num_sge
};
static_assert(sizeof(RecvSlot) == 32 && offsetof(RecvSlot, sge) == 16);

// A completion: NDK_RESULT_EX as the public API returns it (the contexts are the client's own
// values, carried through the daemon untouched).
using CqSlot = ResultEx;

// Slot strides: the fixed part plus the SGEs (or inline bytes) a queue accepts, 16-byte aligned.
constexpr size_t send_stride(uint32_t max_sge, uint32_t max_inline) noexcept {
  const size_t sges = size_t{max_sge == 0 ? 1 : max_sge} * sizeof(Sge);
  const size_t inl = (size_t{max_inline} + 15) & ~size_t{15};
  return offsetof(SendSlot, sge) + (sges > inl ? sges : inl);
}
constexpr size_t recv_stride(uint32_t max_sge) noexcept {
  return offsetof(RecvSlot, sge) + size_t{max_sge == 0 ? 1 : max_sge} * sizeof(Sge);
}
// Where a QP's page list area starts: after its receive ring (since 1.7; the mapping is then
// kPageListBytes longer, page-rounded).
constexpr size_t page_list_offset(size_t rq_offset, size_t rq_bytes) noexcept {
  return rq_offset + rq_bytes;
}

// Bytes of one ring of `capacity` slots of `stride` bytes, header included, page-rounded.
constexpr size_t ring_bytes(uint32_t capacity, size_t stride) noexcept {
  return (sizeof(RingHeader) + size_t{capacity} * stride + 4095) & ~size_t{4095};
}
// The smallest power of two >= n (n >= 1, n <= 2^31).
constexpr uint32_t ring_capacity(uint32_t n) noexcept {
  uint32_t c = 1;
  while (c < n) c <<= 1;
  return c;
}

// A ring in a mapping: its header and slots.
struct RingView {
  RingHeader* head = nullptr;
  uint8_t* slots = nullptr;
  uint32_t capacity = 0;  // a power of two
  uint32_t stride = 0;
  uint8_t* slot(uint32_t index) const noexcept {
    return slots + size_t{index & (capacity - 1)} * stride;
  }
};
inline RingView ring_at(void* base, size_t offset, uint32_t capacity, uint32_t stride) noexcept {
  auto* b = static_cast<uint8_t*>(base) + offset;
  return RingView{reinterpret_cast<RingHeader*>(b), b + sizeof(RingHeader), capacity, stride};
}

}  // namespace urnic::shm

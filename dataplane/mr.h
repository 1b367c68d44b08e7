// Memory-region table and translation (architecture.md §4; IBTA Vol. 1 §10.6 memory
// management, §10.7.2.3 fast registration, §9.4.1.1 remote access checks).
//
// A key (lkey/rkey, NDK "token") is `index << 8 | tag`: the upper 24 bits index the table and
// the lower 8 bits are a tag that changes on every re-registration and fast-register, so a stale
// key fails; invalidation keeps the tag but fails the key (kInvalidated) until a FastRegister
// with a new tag (IBTA §10.6.6: invalidation returns the region to the Free state). Tags are drawn
// from a seeded PRNG, never sequential, so a peer cannot guess the next key of a region from the
// previous one.
//
// Two kinds of entry:
//  - a *registered* region: a virtual address range of this process, [va, va + length); the
//    address a peer uses is the process virtual address itself (NDK RegisterMr semantics).
//  - a *fast-register* region (FRMR): created empty with a page capacity; a FastRegister work
//    request fills it with a list of PAGE_SIZE (4096) page addresses, a first byte offset (FBO),
//    a length and a base virtual address (the "iova" the peer uses); translation goes
//    va -> (va - base_va + fbo) -> page[i] + offset, as a hardware MTT does. Invalidate (local
//    work request, or remote via SEND with Invalidate) makes it unusable until the next
//    FastRegister, which must carry a key with a new tag.
//  - a *memory window* (IBTA §10.6.7, type 2; NDK MW): created unbound; a Bind work request
//    executed in order on a QP makes it a remotely accessible sub-range of a registered region
//    with its own rights and a new tag, usable only by requests arriving on that QP; invalidate
//    (local or remote) unbinds it, and rebinding requires that first. A window translates like
//    the registered region under it (host address == va). While a window is bound, its region
//    cannot be deregistered (kDeviceBusy). Windows over fast-register regions are not supported.
//
// Concurrency: entries are read by every engine and changed by the control thread (register,
// deregister, alloc) and by engines (fast-register, invalidate). Each entry carries a sequence
// lock: a writer makes `seq` odd (compare-exchange from even, so two writers never overlap),
// writes, and makes it even again with a release store; a reader snapshots `seq` (acquire), reads
// the fields, and retries if `seq` was odd or changed (acquire fence before the re-read). All
// lookup functions are lock-free, allocation-free and noexcept (hot path).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "urnic/status.h"

namespace urnic::dp {

// Access rights of a region (internal bit set; converted from NDK flags at the API boundary).
namespace access {
inline constexpr uint32_t kLocalRead = 0;  // always allowed
inline constexpr uint32_t kLocalWrite = 1u << 0;
inline constexpr uint32_t kRemoteRead = 1u << 1;
inline constexpr uint32_t kRemoteWrite = 1u << 2;
inline constexpr uint32_t kRemoteAtomic = 1u << 3;
inline constexpr uint32_t kReadSink = 1u << 4;  // may be the local target of an RDMA READ
inline constexpr uint32_t kAll =
    kLocalWrite | kRemoteRead | kRemoteWrite | kRemoteAtomic | kReadSink;
}  // namespace access

// NDK_MR_FLAG_* / NDK_OP_FLAG_* (include/urnic/types.h) -> access bits.
uint32_t access_from_mr_flags(uint32_t ndk_mr_flags) noexcept;
uint32_t access_from_op_flags(uint32_t ndk_op_flags) noexcept;

inline constexpr uint32_t kMrPageSize = 4096;
inline constexpr uint32_t key_index(uint32_t key) noexcept { return key >> 8; }
inline constexpr uint8_t key_tag(uint32_t key) noexcept { return static_cast<uint8_t>(key); }
inline constexpr uint32_t make_key(uint32_t index, uint8_t tag) noexcept {
  return index << 8 | tag;
}

// Outcome of a lookup, in the order the checks are made.
enum class MrCheck : uint8_t {
  kOk = 0,
  kInvalidKey,    // index out of range, or the entry is free (never registered / deregistered)
  kStaleKey,      // the entry exists but its tag differs (re-registered, fast-registered again)
  kInvalidated,   // a fast-register region that is not currently registered (fresh or invalidated)
  kPdMismatch,    // the region belongs to another protection domain
  kAccessDenied,  // the region does not grant the requested right
  kOutOfBounds,   // [va, va + len) not inside the region (or overflows)
  kBadState,      // fast_register on a region that is still valid, or on a non-FRMR entry;
                  // invalidate of a registered (non-FRMR) region; bind of a window that is
                  // still bound, or over a region that is not a registered one
  kTooLarge,      // fast_register beyond the region's page capacity
  kCount,
};
const char* to_string(MrCheck c) noexcept;

// A piece of a translated range: host memory to copy to or from.
struct MrSegment {
  uint8_t* ptr;
  uint32_t len;
};

class MrTable {
 public:
  // `capacity` entries (index 0 is never used, so at most capacity - 1 regions), at most 2^24.
  // `seed` seeds the tag generator (tests pass a fixed seed; adapters a random one).
  MrTable(uint32_t capacity, uint64_t seed);
  ~MrTable();
  MrTable(const MrTable&) = delete;
  MrTable& operator=(const MrTable&) = delete;

  // ---- Control side (may allocate; not called from engines) ---------------------------------

  // Registers [va, va + length) of this process with `access` bits for protection domain `pd`.
  // kInvalidParameter for length 0, va 0 (zero-based VAs are unsupported, ndkpi.md §4.2) or a
  // range that overflows; kInsufficientResources when the table is full.
  Status register_region(uint32_t pd, uint64_t va, uint64_t length, uint32_t access, uint32_t* key);
  // Creates an empty fast-register region able to map `max_pages` pages. `remote_access` false
  // forbids later fast-registers from granting remote rights (NDK InitializeFastRegisterMr).
  // kImplementationLimit if max_pages > kMaxFrmrPages.
  Status alloc_fast_register(uint32_t pd, uint32_t max_pages, bool remote_access, uint32_t* key);
  // Creates an unbound memory window in protection domain `pd` (NDK CreateMw); its key names it
  // for bind_window(). kInsufficientResources when the table is full.
  Status alloc_window(uint32_t pd, uint32_t* key);
  // Frees the entry; every key of it fails afterwards. kInvalidParameter for a key that does not
  // name a live entry (any tag of a live entry is accepted, so a FRMR can be freed after use).
  // kDeviceBusy for a registered region with a window bound to it (ND2 NdMRDeregister); freeing
  // a bound window unbinds it first.
  Status deregister(uint32_t key);

  // A key for the next FastRegister of the FRMR named by `key`: same index, a fresh random tag
  // different from the current one and from the last one handed out. Called by the poster; the
  // work request carries it. Thread-safe: application threads call it concurrently with each
  // other, with control-side registration and with engines.
  uint32_t next_fast_register_key(uint32_t key);

  // ---- Engine side (hot path: noexcept, no allocation, no locks) ----------------------------

  // FastRegister work request (IBTA §10.7.2.3): the entry named by `new_key`'s index must be a
  // FRMR in the invalid state in protection domain `pd`; it becomes valid with tag
  // key_tag(new_key), mapping `length` bytes starting `fbo` bytes into page[0], presented to
  // peers at base_va. `pages` are host virtual addresses, each kMrPageSize aligned.
  // kAccessDenied if remote rights are asked of a region allocated without remote access;
  // kTooLarge if npages > capacity or length > npages * kMrPageSize - fbo; kOutOfBounds if a page
  // is misaligned or fbo >= kMrPageSize (or base_va + length overflows); kStaleKey if new_key
  // carries the region's current tag (the FastRegister must bring a new one).
  MrCheck fast_register(uint32_t new_key, uint32_t pd, const uint64_t* pages, uint32_t npages,
                        uint32_t fbo, uint64_t length, uint64_t base_va, uint32_t access) noexcept;
  // Local or remote invalidate of a FRMR or a bound window (IBTA §10.6.6, §10.6.7.2.4): `key`
  // must be its current key and `pd` its PD; a window invalidated with `qpn` != 0 (remote
  // invalidate) must be bound to that QP (kAccessDenied otherwise). A registered (non-FRMR)
  // region cannot be invalidated (kBadState); an unbound window or invalid FRMR gives
  // kInvalidated.
  MrCheck invalidate(uint32_t key, uint32_t pd, uint32_t qpn = 0) noexcept;
  // Bind work request (IBTA §10.6.7.2.2, type 2 window): the window named by `new_key`'s index
  // must be unbound, in `pd`, and new_key must carry a new tag; `region_key` must name a
  // registered region of `pd` containing [va, va + len). The window then grants `access`
  // (remote bits only) through new_key, for requests arriving on QP `qpn`. kAccessDenied if the
  // window grants remote write or atomics and the region lacks local write (NdkBind rule).
  MrCheck bind_window(uint32_t new_key, uint32_t pd, uint32_t qpn, uint32_t region_key, uint64_t va,
                      uint64_t len, uint32_t access) noexcept;

  // Checks that `key` is valid, belongs to `pd`, grants every bit of `access`, and that
  // [va, va + len) lies inside the region. len 0 passes the bounds check at any va inside or at
  // the end of the region. `qpn` is the QP a remote request arrived on: a window key passes only
  // with the QP the window is bound to, so local accesses (qpn 0) never pass through a window.
  MrCheck check(uint32_t key, uint32_t pd, uint64_t va, uint64_t len, uint32_t access,
                uint32_t qpn = 0) const noexcept;

  // check() + translation of [va, va + len) into at most `max_segs` host segments (a registered
  // region gives one; a FRMR one per page crossed). On success *nsegs is set. kTooLarge if the
  // range needs more than max_segs segments.
  MrCheck resolve(uint32_t key, uint32_t pd, uint64_t va, uint64_t len, uint32_t access,
                  MrSegment* segs, uint32_t max_segs, uint32_t* nsegs,
                  uint32_t qpn = 0) const noexcept;

  // check() + copy `len` bytes from `src` into the region at va (needs `access`, e.g.
  // kRemoteWrite or kLocalWrite). Nothing is written unless every check passes.
  MrCheck copy_in(uint32_t key, uint32_t pd, uint64_t va, const void* src, uint64_t len,
                  uint32_t access, uint32_t qpn = 0) const noexcept;
  // check() + copy `len` bytes of the region at va into `dst`.
  MrCheck copy_out(uint32_t key, uint32_t pd, uint64_t va, void* dst, uint64_t len, uint32_t access,
                   uint32_t qpn = 0) const noexcept;
  // copy_out that also runs the CRC-32 register *crc over the bytes copied, in the same pass
  // (wire/crc32.h crc32_copy): the fused ICRC of the TX path. *crc is unchanged on failure.
  MrCheck copy_out_crc(uint32_t key, uint32_t pd, uint64_t va, void* dst, uint64_t len,
                       uint32_t access, uint32_t* crc, uint32_t qpn = 0) const noexcept;

  // check() of 8 bytes at an 8-byte aligned va with kRemoteAtomic, and the host address of the
  // 64-bit word (atomics execute on it with std::atomic_ref). kOutOfBounds if misaligned.
  MrCheck atomic_target(uint32_t key, uint32_t pd, uint64_t va, uint64_t** word,
                        uint32_t qpn = 0) const noexcept;

  uint32_t capacity() const noexcept { return capacity_; }
  // Number of live entries (registered or allocated).
  uint32_t live() const noexcept { return live_.load(std::memory_order_relaxed); }

  static constexpr uint32_t kMaxFrmrPages = 1u << 18;  // 1 GiB of 4 KiB pages per region

 private:
  struct Entry;
  struct View;
  // Seqlock-validated lookup shared by every engine-side reader; fills *v on kOk.
  MrCheck lookup(uint32_t key, uint32_t pd, uint64_t va, uint64_t len, uint32_t access,
                 uint32_t qpn, View* v) const noexcept;
  // copy_in (src set, dst null) and copy_out (dst set, src null; `crc` non-null: fused CRC).
  MrCheck copy(uint32_t key, uint32_t pd, uint64_t va, const uint8_t* src, uint8_t* dst,
               uint64_t len, uint32_t access, uint32_t qpn, uint32_t* crc = nullptr) const noexcept;
  // Engine-side writers: `check(entry, kind)` on the entry `key` names, under its lock,
  // returning its result; kInvalidKey for an index out of range or a free entry.
  template <class F>
  MrCheck locked(uint32_t key, F&& check) noexcept;
  // Drops one from the bound-window count of region `region` (a window bound to it was
  // invalidated or freed). Called with the window's lock held (lock order: window, region).
  void release_region(uint32_t region) noexcept;
  // Fills the free entry `idx` as `n` describes, under its lock and with a new tag; returns the
  // entry's key. FBO and bound QP start at 0.
  struct NewEntry;
  uint32_t claim(uint32_t idx, const NewEntry& n) noexcept;
  // A random tag that is neither `a`, `b`, nor their successors.
  uint8_t draw_tag(uint8_t a, uint8_t b) noexcept;
  uint32_t find_free() noexcept;  // 0 when the table is full

  uint32_t capacity_;
  std::unique_ptr<Entry[]> entries_;
  std::atomic<uint32_t> live_{0};
  // Tags are splitmix64(seed_ + n * golden) for the n-th draw. The draw counter is atomic because
  // next_fast_register_key runs on application threads concurrently with control-side
  // registration; relaxed suffices, as only the uniqueness of each n matters (no data is
  // published through it).
  const uint64_t seed_;
  std::atomic<uint64_t> draws_{0};
  uint32_t next_free_hint_ = 1;  // control side only
};

}  // namespace urnic::dp

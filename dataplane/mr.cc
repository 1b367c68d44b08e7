// Memory-region table: per-entry sequence locks, tag generation, bounds and access checks, and
// FRMR translation (contract in mr.h; architecture.md §4).
//
// Who calls what:
//  - register_region, alloc_fast_register, alloc_window, deregister: the control thread, one call
//    at a time.
//    They are the only code that turns a free entry into a live one and back, and the only code
//    that replaces an entry's page-list storage.
//  - next_fast_register_key: any thread, at any time (touches only the draw counter and the
//    entry's `issued_tag`, both atomic).
//  - fast_register, invalidate, bind_window: engines (writers of an existing entry); everything
//    else: engines (readers). bind_window and the unbinding in invalidate/deregister hold the
//    window's lock and then the region's (always in that order).
//
// Sequence lock, after Boehm, "Can seqlocks get along with programming language memory models?"
// (MSPC 2012). Every field a reader looks at is a std::atomic accessed with memory_order_relaxed,
// so a reader racing a writer reads stale or new values but never has a data race; the sequence
// number decides whether what it read is one consistent version.
//  writer: CAS seq s -> s+1 (acquire: pairs with the previous writer's release store of s, so
//          this writer sees that writer's fields) ; fence(release) ; relaxed field stores ;
//          store seq s+2 (release: pairs with a reader's acquire load of seq).
//  reader: load seq s1 (acquire: pairs with the writer's release store of s1, making the fields
//          of version s1 visible) ; relaxed field loads ; fence(acquire) ; load seq s2 (relaxed).
//          If a field load saw a store of a later writer, that writer's release fence
//          synchronizes with the reader's acquire fence, so the reader's load of seq sees at least
//          that writer's odd value and s2 != s1: the reader retries.
//
// Page lists (FRMR) are arrays of std::atomic<uint64_t> under the same sequence lock. A reader
// dereferences the page-array pointer only after validating the view that contains it, and
// validates again after reading page addresses. The arrays themselves are never freed while the
// table lives (a replaced array is chained behind its successor): an engine may still hold a
// pointer from a view it validated a moment ago, and without a grace period (rte_rcu_qsbr) freeing
// the array could fault that reader. Storage grows geometrically, so what is kept per entry is at
// most twice the largest page list it ever had.
//
// Data copies happen after the translation was validated, never inside the read section: the
// translation a copy uses is one consistent version of the region (never a mix of two page lists),
// and every byte copied belongs to memory that version mapped. As with a hardware NIC, a region
// invalidated or deregistered while an access is in flight may still see that access complete
// against the old mapping; the owner must not free the memory until the invalidation completed.
#include "dataplane/mr.h"

#include <rte_pause.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <new>

#include "dataplane/wire/crc32.h"
#include "urnic/types.h"

namespace urnic::dp {
namespace {

enum class Kind : uint8_t {
  kFree = 0,
  kRegistered,
  kFrmrInvalid,
  kFrmrValid,
  kWindowInvalid,
  kWindowValid
};

// Kinds whose host address is the va itself (no page list): registered regions, and windows,
// which only exist over registered regions.
constexpr bool identity_mapped(Kind k) noexcept {
  return k == Kind::kRegistered || k == Kind::kWindowValid;
}
constexpr bool is_window(Kind k) noexcept {
  return k == Kind::kWindowInvalid || k == Kind::kWindowValid;
}

// Remote rights a FRMR allocated without remote access may never be given (NDK
// InitializeFastRegisterMr with RemoteAccess FALSE).
constexpr uint32_t kRemoteRights =
    access::kRemoteRead | access::kRemoteWrite | access::kRemoteAtomic;

constexpr uint64_t kPageMask = kMrPageSize - 1;
constexpr uint32_t kPageShift = 12;
static_assert(uint32_t{1} << kPageShift == kMrPageSize);

// MrSegment::len is 32 bits: a registered range longer than this is returned in pieces of this
// size (4 GiB less one page, so every piece but the last stays page-granular).
constexpr uint64_t kMaxSegLen = 0xFFFFF000u;

// copy_in/copy_out translate a FRMR range this many pages at a time and validate each batch
// before copying it. A PMTU payload (at most 4096 bytes) spans at most 2 pages, so the copy of a
// packet is always a single batch: it sees one version of the region or none.
constexpr uint32_t kCopyBatchSegs = 16;

// splitmix64 finalizer (Steele, Lea, Flood, "Fast splittable pseudorandom number generators",
// OOPSLA 2014): a bijection that spreads consecutive inputs over all 64 bits.
constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;
constexpr uint64_t splitmix64(uint64_t z) noexcept {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Copies into registered memory write their last bytes last (NDK_ADAPTER_FLAG_IN_ORDER_DMA_
// SUPPORTED: a consumer polling the last byte of a buffer sees every earlier byte once it sees
// that one). memcpy may store in any order (glibc stores the head of a large copy last), so the
// final kInOrderTail bytes are stored after the rest, behind a release fence (a compiler barrier
// on x86, whose stores become visible in program order; a store barrier elsewhere).
constexpr uint64_t kInOrderTail = 8;
void copy_in_order(uint8_t* dst, const uint8_t* src, uint64_t len) noexcept {
  if (len <= kInOrderTail) {
    std::memcpy(dst, src, len);
    return;
  }
  std::memcpy(dst, src, len - kInOrderTail);
  std::atomic_thread_fence(std::memory_order_release);
  std::memcpy(dst + len - kInOrderTail, src + len - kInOrderTail, kInOrderTail);
}

constexpr std::array<const char*, static_cast<size_t>(MrCheck::kCount)> kMrCheckNames = {
    "ok",          "invalid_key",   "stale_key",     "invalidated",
    "pd_mismatch", "access_denied", "out_of_bounds", "bad_state",
    "too_large",
};

}  // namespace

// One consistent version of an entry, as a reader saw it.
struct MrTable::View {
  uint64_t seq;
  uint64_t base;                       // registered: process va; FRMR: base_va (the iova peers use)
  uint64_t length;                     // bytes mapped
  const std::atomic<uint64_t>* pages;  // FRMR page list (at least `npages` of the registration)
  uint32_t pd;
  uint32_t access;
  uint32_t fbo;
  uint32_t qpn;  // a bound window: its QP
  Kind kind;
  uint8_t tag;

  uint32_t map_frmr(uint64_t off, uint64_t len, MrSegment* segs, uint32_t max,
                    uint64_t* covered) const noexcept;
};

struct alignas(64) MrTable::Entry {
  // Page-list storage of a FRMR; `older` keeps replaced arrays alive (see the file comment).
  struct PageStore {
    explicit PageStore(uint32_t n) : cap(n), addr(std::make_unique<std::atomic<uint64_t>[]>(n)) {}
    uint32_t cap;
    std::unique_ptr<std::atomic<uint64_t>[]> addr;
    std::unique_ptr<PageStore> older;
  };

  // ---- Under the sequence lock: written only by the lock holder, read by anyone.
  std::atomic<uint64_t> seq{0};  // odd while a writer holds the entry
  std::atomic<uint64_t> base{0};
  std::atomic<uint64_t> length{0};
  std::atomic<std::atomic<uint64_t>*> pages{nullptr};  // == store->addr.get() (or null)
  std::atomic<uint32_t> pd{0};
  std::atomic<uint32_t> access{0};
  std::atomic<uint32_t> fbo{0};
  std::atomic<uint32_t> qpn{0};  // a bound window: the QP remote accesses must arrive on
  std::atomic<Kind> kind{Kind::kFree};
  std::atomic<uint8_t> tag{0};  // kept after deregister, so the next tag can differ from it

  // ---- Outside the lock: the last tag handed out for this entry (registration, alloc or
  // next_fast_register_key). Only a value, publishing nothing: relaxed everywhere.
  std::atomic<uint8_t> issued_tag{0};

  // ---- Lock holder only (plain fields: the lock's acquire/release orders them).
  bool remote_ok = false;
  // Meaning by kind (one field, so that an entry stays one cache line): a FRMR's page capacity;
  // a registered region's count of windows bound to it; a bound window's region index.
  uint32_t max_pages = 0;
  // Replaced only by the control thread (under the lock); engines reach the array via `pages`.
  std::unique_ptr<PageStore> store;

  // Lock holder: the entry maps [base, base + length) with `acc` under `tag`, as `k` (a
  // fast-registered FRMR or a bound window).
  void map(Kind k, uint64_t b, uint64_t len, uint32_t acc, uint8_t t) noexcept {
    base.store(b, std::memory_order_relaxed);
    length.store(len, std::memory_order_relaxed);
    access.store(acc, std::memory_order_relaxed);
    tag.store(t, std::memory_order_relaxed);
    kind.store(k, std::memory_order_relaxed);
  }

  // Takes the write lock; returns the odd sequence value now held.
  uint64_t lock() noexcept {
    // Relaxed loads here only pick the value to try; the CAS that succeeds does the ordering.
    uint64_t s = seq.load(std::memory_order_relaxed);
    for (;;) {
      // Acquire pairs with the release store in unlock() of the previous writer.
      if ((s & 1) == 0 && seq.compare_exchange_weak(s, s + 1, std::memory_order_acquire,
                                                    std::memory_order_relaxed)) {
        break;
      }
      if (s & 1) {
        rte_pause();
        s = seq.load(std::memory_order_relaxed);
      }
    }
    // Orders the odd value before every field store below: pairs with the reader's acquire
    // fence in read()/unchanged(), so a reader that sees any of our stores sees seq changed.
    std::atomic_thread_fence(std::memory_order_release);
    return s + 1;
  }

  // Release: publishes the field stores to readers (pairs with the acquire load in read()) and
  // to the next writer (pairs with the acquire CAS in lock()).
  void unlock(uint64_t odd) noexcept { seq.store(odd + 1, std::memory_order_release); }

  void read(View* v) const noexcept {
    for (;;) {
      // Acquire pairs with unlock()'s release store: the fields of this version are visible.
      const uint64_t s1 = seq.load(std::memory_order_acquire);
      if (s1 & 1) {
        rte_pause();
        continue;
      }
      v->base = base.load(std::memory_order_relaxed);
      v->length = length.load(std::memory_order_relaxed);
      v->pages = pages.load(std::memory_order_relaxed);
      v->pd = pd.load(std::memory_order_relaxed);
      v->access = access.load(std::memory_order_relaxed);
      v->fbo = fbo.load(std::memory_order_relaxed);
      v->qpn = qpn.load(std::memory_order_relaxed);
      v->kind = kind.load(std::memory_order_relaxed);
      v->tag = tag.load(std::memory_order_relaxed);
      if (unchanged(s1)) {
        v->seq = s1;
        return;
      }
    }
  }

  // True if no writer has started since the reader's `s` (loads before this call belong to
  // version `s`). The acquire fence keeps those loads before the re-read of seq and pairs with
  // the release fence in lock().
  bool unchanged(uint64_t s) const noexcept {
    std::atomic_thread_fence(std::memory_order_acquire);
    return seq.load(std::memory_order_relaxed) == s;
  }
};

// FRMR translation of region bytes [off, off + len) of this view into at most `max` segments,
// one per page crossed (IBTA §10.7.2.3: va -> va - base_va + FBO -> page list entry + offset).
// Returns the number of segments; *covered is the bytes they span (less than len when `max` ran
// out). The caller has validated the view and checked that the range is inside it, so every page
// index read is below the registration's npages and inside the array `pages` points to; the
// page addresses read here still need MrTable::Entry::unchanged() before use.
uint32_t MrTable::View::map_frmr(uint64_t off, uint64_t len, MrSegment* segs, uint32_t max,
                                 uint64_t* covered) const noexcept {
  uint64_t pos = off + fbo;  // < npages * kMrPageSize <= 2^30: no overflow
  uint64_t done = 0;
  uint32_t n = 0;
  while (done < len && n < max) {
    const uint64_t in_page = pos & kPageMask;
    const uint64_t chunk = std::min<uint64_t>(len - done, kMrPageSize - in_page);
    const uint64_t page = pages[pos >> kPageShift].load(std::memory_order_relaxed);
    segs[n++] = {reinterpret_cast<uint8_t*>(page + in_page), static_cast<uint32_t>(chunk)};
    pos += chunk;
    done += chunk;
  }
  *covered = done;
  return n;
}

// ---- Flags and names --------------------------------------------------------------------------

namespace {

// The NDK flag bits that grant each access right: NDK_MR_FLAG_* and NDK_OP_FLAG_* name the same
// rights with different values.
struct AccessBits {
  uint32_t local_write, remote_read, remote_write, read_sink, remote_atomic;
};

constexpr uint32_t access_from(uint32_t f, const AccessBits& b) noexcept {
  uint32_t a = 0;
  if (f & b.local_write) a |= access::kLocalWrite;
  if (f & b.remote_read) a |= access::kRemoteRead;
  // ALLOW_REMOTE_WRITE includes local write; only its own bit grants remote write.
  if (f & (b.remote_write & ~b.local_write)) a |= access::kRemoteWrite | access::kLocalWrite;
  if (f & b.read_sink) a |= access::kReadSink;
  if (f & b.remote_atomic) a |= access::kRemoteAtomic;
  return a;
}

}  // namespace

// NDK_MR_FLAG_ALLOW_REMOTE_WRITE (0x5) includes local write; its own bit is 0x4.
uint32_t access_from_mr_flags(uint32_t f) noexcept {
  return access_from(
      f, {mr_flag::kAllowLocalWrite, mr_flag::kAllowRemoteRead, mr_flag::kAllowRemoteWrite,
          mr_flag::kRdmaReadSink, mr_flag::kAllowRemoteAtomic});
}

// NDK_OP_FLAG_ALLOW_REMOTE_WRITE (0x30) includes local write (0x10); its own bit is 0x20.
uint32_t access_from_op_flags(uint32_t f) noexcept {
  return access_from(
      f, {op_flag::kAllowLocalWrite, op_flag::kAllowRemoteRead, op_flag::kAllowRemoteWrite,
          op_flag::kRdmaReadSink, op_flag::kAllowRemoteAtomic});
}

const char* to_string(MrCheck c) noexcept {
  const auto i = static_cast<size_t>(c);
  return i < kMrCheckNames.size() ? kMrCheckNames[i] : "unknown";
}

// ---- Construction and tags --------------------------------------------------------------------

// At most 2^24 entries (the index is 24 bits); at least 1 so that index arithmetic stays valid
// for a table that can hold nothing.
MrTable::MrTable(uint32_t capacity, uint64_t seed)
    : capacity_(std::clamp<uint32_t>(capacity, 1, uint32_t{1} << 24)),
      entries_(std::make_unique<Entry[]>(capacity_)),
      seed_(seed) {
  // One cache line per entry: writers of different entries never contend for a line, and a
  // lookup touches exactly one line.
  static_assert(sizeof(Entry) == 64);
}

MrTable::~MrTable() = default;

uint8_t MrTable::draw_tag(uint8_t a, uint8_t b) noexcept {
  // Excluding the successors as well means a peer that increments a key (the ibv_inc_rkey
  // habit) never lands on the next registration of the same entry.
  const auto ok = [&](uint8_t t) {
    return t != a && t != static_cast<uint8_t>(a + 1) && t != b && t != static_cast<uint8_t>(b + 1);
  };
  for (;;) {
    // Relaxed: each caller only needs a distinct n; nothing is published through the counter.
    const uint64_t n = draws_.fetch_add(1, std::memory_order_relaxed) + 1;
    uint64_t r = splitmix64(seed_ + n * kGolden);
    for (int i = 0; i < 8; ++i, r >>= 8) {
      if (ok(static_cast<uint8_t>(r))) return static_cast<uint8_t>(r);
    }
  }
}

uint32_t MrTable::find_free() noexcept {
  // Round-robin from the last allocation, so a freed index is reused as late as possible and a
  // stale key meets a free entry (kInvalidKey) for as long as possible.
  for (uint32_t tries = 1; tries < capacity_; ++tries) {
    uint32_t i = next_free_hint_;
    next_free_hint_ = i + 1 < capacity_ ? i + 1 : 1;
    if (i == 0 || i >= capacity_) continue;
    // Relaxed: only this (control) thread turns entries free <-> live.
    if (entries_[i].kind.load(std::memory_order_relaxed) == Kind::kFree) return i;
  }
  return 0;
}

uint32_t MrTable::next_fast_register_key(uint32_t key) {
  const uint32_t idx = key_index(key);
  if (idx == 0 || idx >= capacity_) return make_key(idx, draw_tag(key_tag(key), key_tag(key)));
  Entry& e = entries_[idx];
  // Relaxed: the current tag is advisory here (fast_register rejects a reused tag under the lock).
  const uint8_t current = e.tag.load(std::memory_order_relaxed);
  uint8_t issued = e.issued_tag.load(std::memory_order_relaxed);
  for (;;) {
    // Different from the tag handed out last, not only from the current one: the poster may ask
    // for the next key before the engine has executed the FastRegister that uses the last one.
    const uint8_t t = draw_tag(current, issued);
    if (e.issued_tag.compare_exchange_weak(issued, t, std::memory_order_relaxed)) {
      return make_key(idx, t);
    }
  }
}

// ---- Control side -----------------------------------------------------------------------------

struct MrTable::NewEntry {
  Kind kind;
  uint32_t pd;
  uint64_t base, length;
  uint32_t access;
  uint32_t max_pages;
  bool remote_ok;
  // A FRMR's larger page store, installed under the lock (may be null).
  std::unique_ptr<Entry::PageStore>* grown;
};

uint32_t MrTable::claim(uint32_t idx, const NewEntry& n) noexcept {
  Entry& e = entries_[idx];
  const uint64_t odd = e.lock();
  if (n.grown != nullptr && *n.grown) {
    (*n.grown)->older = std::move(e.store);
    e.store = std::move(*n.grown);
    e.pages.store(e.store->addr.get(), std::memory_order_relaxed);
  }
  const uint8_t t =
      draw_tag(e.tag.load(std::memory_order_relaxed), e.issued_tag.load(std::memory_order_relaxed));
  e.base.store(n.base, std::memory_order_relaxed);
  e.length.store(n.length, std::memory_order_relaxed);
  e.pd.store(n.pd, std::memory_order_relaxed);
  e.access.store(n.access, std::memory_order_relaxed);
  e.fbo.store(0, std::memory_order_relaxed);
  e.qpn.store(0, std::memory_order_relaxed);
  e.tag.store(t, std::memory_order_relaxed);
  e.kind.store(n.kind, std::memory_order_relaxed);
  e.max_pages = n.max_pages;
  e.remote_ok = n.remote_ok;
  e.unlock(odd);
  e.issued_tag.store(t, std::memory_order_relaxed);
  live_.fetch_add(1, std::memory_order_relaxed);  // a statistic; orders nothing
  return make_key(idx, t);
}

Status MrTable::register_region(uint32_t pd, uint64_t va, uint64_t length, uint32_t acc,
                                uint32_t* key) {
  if (key == nullptr || length == 0 || va == 0 ||
      length > std::numeric_limits<uint64_t>::max() - va) {
    return Status::kInvalidParameter;
  }
  const uint32_t idx = find_free();
  if (idx == 0) return Status::kInsufficientResources;
  *key = claim(idx, {Kind::kRegistered, pd, va, length, acc & access::kAll, 0, false, nullptr});
  return Status::kSuccess;
}

Status MrTable::alloc_fast_register(uint32_t pd, uint32_t max_pages, bool remote_access,
                                    uint32_t* key) {
  if (key == nullptr) return Status::kInvalidParameter;
  if (max_pages > kMaxFrmrPages) return Status::kImplementationLimit;
  const uint32_t idx = find_free();
  if (idx == 0) return Status::kInsufficientResources;
  Entry& e = entries_[idx];

  // Allocate before taking the lock (readers of this entry spin while it is held). `store` is
  // replaced only by this thread, so reading it unlocked is safe.
  std::unique_ptr<Entry::PageStore> grown;
  const uint32_t have = e.store ? e.store->cap : 0;
  if (have < max_pages) {
    const uint32_t cap = std::max(max_pages, std::min(2 * have, kMaxFrmrPages));
    try {
      grown = std::make_unique<Entry::PageStore>(cap);
    } catch (const std::bad_alloc&) {
      return Status::kNoMemory;
    }
  }

  *key = claim(idx, {Kind::kFrmrInvalid, pd, 0, 0, 0, max_pages, remote_access, &grown});
  return Status::kSuccess;
}

Status MrTable::deregister(uint32_t key) {
  const uint32_t idx = key_index(key);
  if (idx == 0 || idx >= capacity_) return Status::kInvalidParameter;
  Entry& e = entries_[idx];
  const uint64_t odd = e.lock();
  const Kind kind = e.kind.load(std::memory_order_relaxed);
  if (kind == Kind::kRegistered && e.max_pages != 0) {
    e.unlock(odd);  // windows still bound to it (ND2 NdMRDeregister: ND_DEVICE_BUSY)
    return Status::kDeviceBusy;
  }
  if (kind == Kind::kWindowValid) release_region(e.max_pages);  // nested: window, then region
  // The tag stays, so the next registration of this index draws a different one; the page
  // array stays too (an engine may be reading it).
  e.kind.store(Kind::kFree, std::memory_order_relaxed);
  e.unlock(odd);
  if (kind == Kind::kFree) return Status::kInvalidParameter;
  live_.fetch_sub(1, std::memory_order_relaxed);
  return Status::kSuccess;
}

Status MrTable::alloc_window(uint32_t pd, uint32_t* key) {
  if (key == nullptr) return Status::kInvalidParameter;
  const uint32_t idx = find_free();
  if (idx == 0) return Status::kInsufficientResources;
  *key = claim(idx, {Kind::kWindowInvalid, pd, 0, 0, 0, 0, false, nullptr});
  return Status::kSuccess;
}

void MrTable::release_region(uint32_t region) noexcept {
  if (region == 0 || region >= capacity_) return;
  Entry& r = entries_[region];
  const uint64_t odd = r.lock();
  if (r.kind.load(std::memory_order_relaxed) == Kind::kRegistered && r.max_pages != 0)
    --r.max_pages;
  r.unlock(odd);
}

// ---- Engine side: writers ---------------------------------------------------------------------

// Writers check under the lock: the state may change between a lock-free look and the write.
template <class F>
MrCheck MrTable::locked(uint32_t key, F&& check) noexcept {
  const uint32_t idx = key_index(key);
  if (idx == 0 || idx >= capacity_) return MrCheck::kInvalidKey;
  Entry& e = entries_[idx];
  const uint64_t odd = e.lock();
  const Kind kind = e.kind.load(std::memory_order_relaxed);
  const MrCheck r = kind == Kind::kFree ? MrCheck::kInvalidKey : check(e, kind);
  e.unlock(odd);
  return r;
}

MrCheck MrTable::fast_register(uint32_t new_key, uint32_t pd, const uint64_t* pages,
                               uint32_t npages, uint32_t fbo, uint64_t length, uint64_t base_va,
                               uint32_t acc) noexcept {
  acc &= access::kAll;
  // IBTA §10.7.2.3: the region must be a fast-register region of the QP's PD in the Free state.
  return locked(new_key, [&](Entry& e, Kind kind) {
    const uint64_t mapped = uint64_t{npages} * kMrPageSize;  // <= 2^30 once npages is checked
    if (kind == Kind::kRegistered || is_window(kind)) return MrCheck::kBadState;
    if (e.pd.load(std::memory_order_relaxed) != pd) return MrCheck::kPdMismatch;
    if (kind == Kind::kFrmrValid) return MrCheck::kBadState;
    if (key_tag(new_key) == e.tag.load(std::memory_order_relaxed)) {
      return MrCheck::kStaleKey;  // the FastRegister must bring a fresh tag (mr.h)
    }
    if ((acc & kRemoteRights) != 0 && !e.remote_ok) return MrCheck::kAccessDenied;
    if (npages > e.max_pages) return MrCheck::kTooLarge;
    if (fbo >= kMrPageSize || (npages != 0 && pages == nullptr)) return MrCheck::kOutOfBounds;
    if (mapped < fbo || length > mapped - fbo) return MrCheck::kTooLarge;
    if (length > std::numeric_limits<uint64_t>::max() - base_va) return MrCheck::kOutOfBounds;
    // One pass that stores and checks alignment. A misaligned page leaves a partly written list
    // behind, which is harmless: the entry stays kFrmrInvalid, so no reader translates through
    // it, and the seq bump at unlock makes any in-flight reader retry.
    std::atomic<uint64_t>* list = e.pages.load(std::memory_order_relaxed);
    for (uint32_t i = 0; i < npages; ++i) {
      if ((pages[i] & kPageMask) != 0 || pages[i] == 0) return MrCheck::kOutOfBounds;
      list[i].store(pages[i], std::memory_order_relaxed);
    }
    e.fbo.store(fbo, std::memory_order_relaxed);
    e.map(Kind::kFrmrValid, base_va, length, acc, key_tag(new_key));
    return MrCheck::kOk;
  });
}

MrCheck MrTable::invalidate(uint32_t key, uint32_t pd, uint32_t qpn) noexcept {
  return locked(key, [&](Entry& e, Kind kind) {
    if (key_tag(key) != e.tag.load(std::memory_order_relaxed)) return MrCheck::kStaleKey;
    if (kind == Kind::kFrmrInvalid || kind == Kind::kWindowInvalid) return MrCheck::kInvalidated;
    if (e.pd.load(std::memory_order_relaxed) != pd) return MrCheck::kPdMismatch;
    if (kind == Kind::kRegistered) return MrCheck::kBadState;
    if (kind == Kind::kWindowValid) {
      // IBTA §10.6.7.2.4: a type 2 window is invalidated remotely only through its own QP.
      if (qpn != 0 && e.qpn.load(std::memory_order_relaxed) != qpn) return MrCheck::kAccessDenied;
      release_region(e.max_pages);  // nested: window, then region
      e.max_pages = 0;
      e.kind.store(Kind::kWindowInvalid, std::memory_order_relaxed);
    } else {
      // IBTA §10.6.6: Valid -> Free. The tag stays; the next FastRegister must bring a new one.
      e.kind.store(Kind::kFrmrInvalid, std::memory_order_relaxed);
    }
    return MrCheck::kOk;
  });
}

MrCheck MrTable::bind_window(uint32_t new_key, uint32_t pd, uint32_t qpn, uint32_t region_key,
                             uint64_t va, uint64_t len, uint32_t acc) noexcept {
  const uint32_t idx = key_index(new_key);
  const uint32_t ridx = key_index(region_key);
  if (idx == 0 || idx >= capacity_) return MrCheck::kInvalidKey;
  if (ridx == 0 || ridx >= capacity_ || ridx == idx) return MrCheck::kInvalidKey;
  acc &= access::kRemoteRead | access::kRemoteWrite | access::kRemoteAtomic;
  // Lock order: window, then region (release_region() nests the same way), so two binds over
  // one region, or a bind racing a deregister, never deadlock.
  return locked(new_key, [&](Entry& w, Kind kind) {
    if (!is_window(kind)) return MrCheck::kBadState;
    if (w.pd.load(std::memory_order_relaxed) != pd) return MrCheck::kPdMismatch;
    if (key_tag(new_key) == w.tag.load(std::memory_order_relaxed)) {
      return MrCheck::kStaleKey;  // a bind must bring a fresh tag, as a FastRegister does
    }
    if (kind == Kind::kWindowValid) {
      if (len != 0)
        return MrCheck::kBadState;  // rebinding needs an invalidate first (ndkpi.md §4.5)
      // IBTA §10.6.7.2.1: a zero-length bind of a bound window invalidates it; its new key is
      // invalid too until the next bind.
      release_region(w.max_pages);  // nested: window, then region
      w.max_pages = 0;
      w.map(Kind::kWindowInvalid, 0, 0, 0, key_tag(new_key));
      return MrCheck::kOk;
    }
    const MrCheck r = locked(region_key, [&](Entry& g, Kind rk) {
      const uint64_t base = g.base.load(std::memory_order_relaxed);
      const uint64_t length = g.length.load(std::memory_order_relaxed);
      const uint32_t racc = g.access.load(std::memory_order_relaxed);
      if (key_tag(region_key) != g.tag.load(std::memory_order_relaxed)) return MrCheck::kStaleKey;
      if (rk != Kind::kRegistered) {
        return MrCheck::kBadState;  // windows over FRMRs or other windows are not supported
      }
      if (g.pd.load(std::memory_order_relaxed) != pd) return MrCheck::kPdMismatch;
      if ((acc & (access::kRemoteWrite | access::kRemoteAtomic)) != 0 &&
          (racc & access::kLocalWrite) == 0) {
        return MrCheck::kAccessDenied;  // NdkBind: a writable window needs a locally writable MR
      }
      if (va < base || va - base > length || len > length - (va - base)) {
        return MrCheck::kOutOfBounds;
      }
      ++g.max_pages;  // windows bound to the region
      return MrCheck::kOk;
    });
    if (r == MrCheck::kOk) {
      w.qpn.store(qpn, std::memory_order_relaxed);
      w.map(Kind::kWindowValid, va, len, acc, key_tag(new_key));
      w.max_pages = ridx;
    }
    return r;
  });
}

// ---- Engine side: readers ---------------------------------------------------------------------

MrCheck MrTable::lookup(uint32_t key, uint32_t pd, uint64_t va, uint64_t len, uint32_t acc,
                        uint32_t qpn, View* v) const noexcept {
  const uint32_t idx = key_index(key);
  if (idx == 0 || idx >= capacity_) return MrCheck::kInvalidKey;
  entries_[idx].read(v);
  // The order of MrCheck (mr.h), as rxe check_rkey() does it: key, state, PD, rights, bounds
  // (IBTA §9.4.1.1).
  if (v->kind == Kind::kFree) return MrCheck::kInvalidKey;
  if (v->tag != key_tag(key)) return MrCheck::kStaleKey;
  if (v->kind == Kind::kFrmrInvalid || v->kind == Kind::kWindowInvalid)
    return MrCheck::kInvalidated;
  if (v->pd != pd) return MrCheck::kPdMismatch;
  // IBTA §10.6.7.2.3 (C10-xx): a type 2 window is accessible only through the QP it is bound
  // to; local accesses (qpn 0) never pass through a window.
  if (v->kind == Kind::kWindowValid && v->qpn != qpn) return MrCheck::kAccessDenied;
  if ((v->access & acc) != acc) return MrCheck::kAccessDenied;
  // [va, va + len) inside [base, base + length) without computing va + len (which may wrap):
  // off <= length, then len <= length - off.
  if (va < v->base) return MrCheck::kOutOfBounds;
  const uint64_t off = va - v->base;
  if (off > v->length || len > v->length - off) return MrCheck::kOutOfBounds;
  return MrCheck::kOk;
}

MrCheck MrTable::check(uint32_t key, uint32_t pd, uint64_t va, uint64_t len, uint32_t acc,
                       uint32_t qpn) const noexcept {
  View v;
  return lookup(key, pd, va, len, acc, qpn, &v);
}

MrCheck MrTable::resolve(uint32_t key, uint32_t pd, uint64_t va, uint64_t len, uint32_t acc,
                         MrSegment* segs, uint32_t max_segs, uint32_t* nsegs,
                         uint32_t qpn) const noexcept {
  for (;;) {
    View v;
    const MrCheck r = lookup(key, pd, va, len, acc, qpn, &v);
    if (r != MrCheck::kOk) return r;
    const uint64_t off = va - v.base;
    if (identity_mapped(v.kind)) {
      // The validated view is the whole translation: host address == va.
      const uint64_t need = len / kMaxSegLen + (len % kMaxSegLen != 0);
      if (need > max_segs) return MrCheck::kTooLarge;
      for (uint64_t i = 0, done = 0; i < need; ++i) {
        const uint64_t chunk = std::min(len - done, kMaxSegLen);
        segs[i] = {reinterpret_cast<uint8_t*>(va + done), static_cast<uint32_t>(chunk)};
        done += chunk;
      }
      *nsegs = static_cast<uint32_t>(need);
      return MrCheck::kOk;
    }
    // One segment per page crossed; len <= length < 2^30 here, so the sum cannot overflow.
    const uint64_t first = (off + v.fbo) & kPageMask;
    const uint64_t need = len == 0 ? 0 : (first + len + kPageMask) >> kPageShift;
    if (need > max_segs) return MrCheck::kTooLarge;
    uint64_t covered = 0;
    const uint32_t n = v.map_frmr(off, len, segs, max_segs, &covered);
    if (entries_[key_index(key)].unchanged(v.seq)) {
      *nsegs = n;
      return MrCheck::kOk;
    }
    // A writer changed the region while we read its page list: start again from the key check.
  }
}

MrCheck MrTable::copy(uint32_t key, uint32_t pd, uint64_t va, const uint8_t* src, uint8_t* dst,
                      uint64_t len, uint32_t acc, uint32_t qpn, uint32_t* crc) const noexcept {
  const uint32_t crc0 = crc != nullptr ? *crc : 0;
  // Out of the region into `dst`, with the CRC register run over the bytes when asked.
  auto out = [crc](uint8_t* to, const uint8_t* from, uint64_t n) noexcept {
    if (crc != nullptr) {
      *crc = wire::crc32_copy(*crc, to, from, n);
    } else {
      std::memcpy(to, from, n);
    }
  };
  for (;;) {
    View v;
    const MrCheck r = lookup(key, pd, va, len, acc, qpn, &v);
    if (r != MrCheck::kOk) return r;  // nothing touched yet
    if (len == 0) return MrCheck::kOk;
    const uint64_t off = va - v.base;
    if (identity_mapped(v.kind)) {
      auto* host = reinterpret_cast<uint8_t*>(va);
      if (src != nullptr) {
        copy_in_order(host, src, len);
      } else {
        out(dst, host, len);
      }
      return MrCheck::kOk;
    }
    const Entry& e = entries_[key_index(key)];
    uint64_t done = 0;
    bool changed = false;
    while (done < len) {
      MrSegment segs[kCopyBatchSegs];
      uint64_t covered = 0;
      const uint32_t n = v.map_frmr(off + done, len - done, segs, kCopyBatchSegs, &covered);
      // Every page address of this batch belongs to version v.seq, or we do not copy.
      if (!e.unchanged(v.seq)) {
        changed = true;
        break;
      }
      for (uint32_t i = 0; i < n; ++i) {
        if (src != nullptr) {
          copy_in_order(segs[i].ptr, src + done, segs[i].len);
        } else {
          out(dst + done, segs[i].ptr, segs[i].len);
        }
        done += segs[i].len;
      }
    }
    if (!changed) return MrCheck::kOk;
    if (crc != nullptr) *crc = crc0;  // the copy starts over
    // The region changed under a multi-batch copy (a range of more than kCopyBatchSegs pages):
    // start again from the key check, which normally now fails (the tag or state changed). What
    // copy_in wrote before went to pages the old version mapped.
  }
}

MrCheck MrTable::copy_in(uint32_t key, uint32_t pd, uint64_t va, const void* src, uint64_t len,
                         uint32_t acc, uint32_t qpn) const noexcept {
  return copy(key, pd, va, static_cast<const uint8_t*>(src), nullptr, len, acc, qpn);
}

MrCheck MrTable::copy_out(uint32_t key, uint32_t pd, uint64_t va, void* dst, uint64_t len,
                          uint32_t acc, uint32_t qpn) const noexcept {
  return copy(key, pd, va, nullptr, static_cast<uint8_t*>(dst), len, acc, qpn);
}

MrCheck MrTable::copy_out_crc(uint32_t key, uint32_t pd, uint64_t va, void* dst, uint64_t len,
                              uint32_t acc, uint32_t* crc, uint32_t qpn) const noexcept {
  return copy(key, pd, va, nullptr, static_cast<uint8_t*>(dst), len, acc, qpn, crc);
}

MrCheck MrTable::atomic_target(uint32_t key, uint32_t pd, uint64_t va, uint64_t** word,
                               uint32_t qpn) const noexcept {
  constexpr uint64_t kAtomicLen = sizeof(uint64_t);
  for (;;) {
    View v;
    const MrCheck r = lookup(key, pd, va, kAtomicLen, access::kRemoteAtomic, qpn, &v);
    if (r != MrCheck::kOk) return r;
    // Atomic operands are naturally aligned 64-bit words (IBTA §9.4.1.1 remote access checks;
    // rxe RESPST_ERR_MISALIGNED_ATOMIC). The host address must be aligned too (std::atomic_ref);
    // for a FRMR it differs from va by base_va and FBO, so check both.
    if ((va & (kAtomicLen - 1)) != 0) return MrCheck::kOutOfBounds;
    uint64_t host = va;
    if (!identity_mapped(v.kind)) {
      MrSegment seg;
      uint64_t covered = 0;
      v.map_frmr(va - v.base, kAtomicLen, &seg, 1, &covered);
      if (!entries_[key_index(key)].unchanged(v.seq)) continue;
      host = reinterpret_cast<uint64_t>(seg.ptr);
      // An 8-byte aligned host address never straddles a page (kMrPageSize is a multiple of 8);
      // a misaligned one may, and is refused here.
      if (covered != kAtomicLen) return MrCheck::kOutOfBounds;
    }
    if ((host & (kAtomicLen - 1)) != 0) return MrCheck::kOutOfBounds;
    *word = reinterpret_cast<uint64_t*>(host);
    return MrCheck::kOk;
  }
}

}  // namespace urnic::dp

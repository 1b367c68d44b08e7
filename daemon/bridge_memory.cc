// Memory windows and fast-register MRs through the bridge (bridge.h; docs/daemon.md "Memory
// windows and fast-register MRs"): the tables the lcores read, and the three work requests that
// name a client's MRs and windows by handle.
#include <sys/mman.h>

#include <cstring>
#include <new>

#include "daemon/bridge.h"
#include "urnic/mr.h"
#include "urnic/mw.h"

namespace urnic::daemon {
namespace {

void* map_anonymous(size_t bytes) {
  // Reserved only: the pages are committed as they are first written.
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  return p;
}

constexpr uint64_t kPage = 4096;

// A request refused before it reached the public API must still hand the earlier deferred
// requests of its burst to the engine, as a failing post does (ndkpi.md §7.3): a post the API
// refuses synchronously (a send with flags no operation has) does exactly that and posts
// nothing. Returns `s`.
Status refuse(Qp& qp, Status s) noexcept {
  (void)qp.send(nullptr, {}, ~uint32_t{0});
  return s;
}

}  // namespace

// ---- MemTable ------------------------------------------------------------------------------

MemTable::MemTable() : e_(static_cast<Entry*>(map_anonymous(kEntries * sizeof(Entry)))) {
  // Zero pages are entries of handle 0 (nothing): no constructor needs to run for the atomics.
  static_assert(std::atomic<uint32_t>::is_always_lock_free && sizeof(Entry) == 16);
}

MemTable::~MemTable() { ::munmap(e_, kEntries * sizeof(Entry)); }

void MemTable::publish(uint32_t handle, Object* obj) noexcept {
  Entry& e = e_[(handle & 0xffff)];
  e.obj.store(obj, std::memory_order_relaxed);
  e.handle.store(handle, std::memory_order_release);  // pairs with find(): the object first
}

bool MemTable::retire(uint32_t handle) noexcept {
  Entry& e = e_[(handle & 0xffff)];
  if (e.handle.load(std::memory_order_relaxed) != handle) return false;
  e.handle.store(0, std::memory_order_relaxed);  // the caller's quiesce orders the rest
  return true;
}

Object* MemTable::find(uint32_t handle) const noexcept {
  if ((handle & 0xffff) == 0) return nullptr;
  const Entry& e = e_[(handle & 0xffff)];
  // A handle that matches (acquire) was published after its object was stored; its retirement
  // waits for this lcore's next step, so the object stays open while we use it.
  if (e.handle.load(std::memory_order_acquire) != handle) return nullptr;
  return e.obj.load(std::memory_order_relaxed);
}

// ---- RegionTable ---------------------------------------------------------------------------

bool RegionTable::add(uint64_t start, uint64_t end) noexcept {
  const uint32_t n = used.load(std::memory_order_relaxed);
  uint32_t i = 0;
  while (i < n && r[i].start.load(std::memory_order_relaxed) != 0) ++i;
  if (i == kMax) return false;
  // The end before the start (release): a reader that sees this start sees this end.
  r[i].end.store(end, std::memory_order_relaxed);
  r[i].start.store(start, std::memory_order_release);
  if (i == n) used.store(n + 1, std::memory_order_release);
  return true;
}

void RegionTable::remove(uint64_t start) noexcept {
  const uint32_t n = used.load(std::memory_order_relaxed);
  for (uint32_t i = 0; i < n; ++i) {
    if (r[i].start.load(std::memory_order_relaxed) != start) continue;
    // The end first: a reader that still sees the old start reads the old end or 0 (empty).
    r[i].end.store(0, std::memory_order_relaxed);
    r[i].start.store(0, std::memory_order_release);
    return;
  }
}

bool RegionTable::holds_page(uint64_t p) const noexcept {
  const uint32_t n = used.load(std::memory_order_acquire);
  for (uint32_t i = 0; i < n; ++i) {
    const uint64_t s = r[i].start.load(std::memory_order_acquire);
    if (s == 0 || p < s) continue;
    const uint64_t e = r[i].end.load(std::memory_order_relaxed);
    if (p <= e && e - p >= kPage) return true;
  }
  return false;
}

// ---- FrArena -------------------------------------------------------------------------------

FrArena::FrArena(uint32_t sq_depth)
    : pages(static_cast<uint64_t*>(map_anonymous(size_t{sq_depth + 1} * shm::kPageListBytes))),
      chunks(sq_depth + 1) {}

FrArena::~FrArena() { ::munmap(pages, size_t{chunks} * shm::kPageListBytes); }

// ---- The work requests ---------------------------------------------------------------------

Status Bridge::post_memory(LiveQp& q, const shm::SendSlot& w, uint32_t flags, bool* sync,
                           uint32_t* token) noexcept {
  const auto op = static_cast<shm::SendOp>(w.op);
  *sync = op != shm::SendOp::kInvalidate;
  Qp& qp = *q.r.qp;
  if (q.r.mems == nullptr || w.num_sge != 0 || (flags & op_flag::kInline) != 0)
    return refuse(qp, Status::kInvalidParameter);
  void* ctx = reinterpret_cast<void*>(w.request_context);
  Object* target = q.r.mems->find(w.rkey);
  // Not an MR or window of this client (or one it is closing).
  if (target == nullptr) return refuse(qp, Status::kInvalidParameter);
  if (op == shm::SendOp::kInvalidate) return qp.invalidate(ctx, *target, flags);
  if (target->object_type() != ObjectType::kMr) return refuse(qp, Status::kInvalidParameter);
  Mr& mr = static_cast<Mr&>(*target);
  if (op == shm::SendOp::kBind) {
    Object* win = q.r.mems->find(w.imm);
    if (win == nullptr || win->object_type() != ObjectType::kMw)
      return refuse(qp, Status::kInvalidParameter);
    Mw& mw = static_cast<Mw&>(*win);
    const Status s =
        qp.bind(ctx, mr, mw, reinterpret_cast<const void*>(w.remote_addr), w.compare_add, flags);
    if (s == Status::kSuccess) *token = mw.get_remote_token();
    return s;
  }
  // kFastRegister: the page list is copied out of the client's area once, into the chunk the
  // engine will read, and every page checked there: in this client's shared memory, never the
  // daemon's own or another client's.
  if (q.r.arena == nullptr || q.r.page_area == nullptr || q.r.regions == nullptr)
    return refuse(qp, Status::kInvalidParameter);
  if (w.length == 0 || w.length > shm::kAttachFrmrPages)
    return refuse(qp, Status::kImplementationLimit);
  uint64_t* list = q.r.arena->chunk(q.fast_registers);
  std::memcpy(list, q.r.page_area, size_t{w.length} * sizeof(uint64_t));
  for (uint32_t i = 0; i < w.length; ++i)
    if (list[i] % kPage != 0 || !q.r.regions->holds_page(list[i]))
      return refuse(qp, Status::kInvalidParameter);
  const Status s = qp.fast_register(ctx, mr, std::span<const uint64_t>(list, w.length), w.imm,
                                    w.compare_add, w.remote_addr, flags);
  if (s == Status::kSuccess) {
    ++q.fast_registers;
    *token = mr.get_remote_token();
  }
  return s;
}

}  // namespace urnic::daemon

// Memory the engines of an attached process's daemon can reach (docs/daemon.md "Memory"):
// alloc_memory / free_memory (urnic/daemon.h), and detail::ensure_shared, which the public
// Mr::register_mr of attach mode calls so that any private anonymous buffer (a verbs program's
// malloc'd one) is shared in place before the daemon registers it.
//
// The process keeps one table of the ranges it shares with its daemon: those alloc_memory gave
// and those moved in place. A range moved in place stays shared (its pages are now a memfd's);
// when the application frees it and the addresses come back as new private pages, the table's
// entry is stale: /proc/self/maps then shows other pages there than the memfd's (its inode), and
// the entry is dropped (its daemon side destroyed) before the range is shared anew. Without that
// check the daemon would register its old mapping of the freed pages, and the engine would write
// where the application no longer reads.
#include <sys/mman.h>

#include <algorithm>
#include <mutex>
#include <string>
#include <vector>

#include "control/attach.h"
#include "control/last_error.h"
#include "urnic/daemon.h"

namespace urnic {
namespace {

constexpr uint64_t kPage = 4096;

struct Region {
  remote::SharedMemory mem;
  bool allocated = false;  // by alloc_memory (free_memory's), else moved in place
  // The connection it was shared on (daemon pid, client id): after a detach and a new attach
  // the new daemon knows nothing of it.
  uint32_t daemon_pid = 0, client_id = 0;
  uint64_t start() const noexcept { return reinterpret_cast<uint64_t>(mem.address); }
  uint64_t end() const noexcept { return start() + mem.length; }
};

struct Table {
  std::mutex mu;
  std::vector<Region> regions;
};
Table& table() {
  static Table* t = new Table;  // never destroyed: usable from atexit handlers
  return *t;
}

using detail::Mapping;

// Whether every page of [lo, hi) is still mapped from the memfd with inode `ino`.
bool still_ours(const std::vector<Mapping>& maps, uint64_t lo, uint64_t hi, uint64_t ino) {
  const Mapping* bad = nullptr;
  return detail::all_mapped(
      maps, lo, hi, [&](const Mapping& m) { return m.ino == ino; }, &bad);
}

bool current(const Region& r, const DaemonInfo& d) {
  return r.daemon_pid == d.pid && r.client_id == d.client_id;
}

// Drops the table's entries that no longer stand for what the daemon maps: those of another
// connection (moved in place: forgotten; allocated: kept for free_memory, unshared) and those
// of [lo, hi) whose pages are no longer the memfd's (their daemon side destroyed). kSuccess, or
// kInvalidBufferSize when the daemon still has an MR on pages the application gave back.
Status drop_stale(Table& t, const DaemonInfo& d, uint64_t lo, uint64_t hi) {
  const std::vector<Mapping> maps = detail::read_maps();
  for (size_t i = 0; i < t.regions.size();) {
    Region& r = t.regions[i];
    if (!current(r, d)) {
      if (r.allocated) {
        r.mem.handle = 0;
        ++i;
      } else {
        t.regions.erase(t.regions.begin() + static_cast<std::ptrdiff_t>(i));
      }
      continue;
    }
    const uint64_t a = std::max(lo, r.start()), b = std::min(hi, r.end());
    if (a >= b || still_ours(maps, a, b, r.mem.ino)) {
      ++i;
      continue;
    }
    if (remote::destroy(r.mem.handle) != Status::kSuccess)
      return detail::fail_with(Status::kInvalidBufferSize,
                               "register_mr: the pages at " + std::to_string(a) +
                                   " were unmapped while a memory region of them is registered");
    t.regions.erase(t.regions.begin() + static_cast<std::ptrdiff_t>(i));
  }
  return Status::kSuccess;
}

// The current region holding `at`, or null.
const Region* holding(const Table& t, const DaemonInfo& d, uint64_t at) {
  for (const Region& r : t.regions)
    if (current(r, d) && r.mem.handle != 0 && at >= r.start() && at < r.end()) return &r;
  return nullptr;
}

}  // namespace

namespace detail {

Status ensure_shared(const void* address, size_t length) noexcept {
  try {
    const auto a = reinterpret_cast<uint64_t>(address);
    if (address == nullptr || length == 0 || length > UINT64_MAX - a - kPage)
      return fail_with(Status::kInvalidParameter, "register_mr: bad range");
    DaemonInfo d;
    if (Status s = daemon_info(&d); s != Status::kSuccess) return s;
    const uint64_t lo = a & ~(kPage - 1), hi = (a + length + kPage - 1) & ~(kPage - 1);
    Table& t = table();
    std::lock_guard lock(t.mu);
    if (Status s = drop_stale(t, d, lo, hi); s != Status::kSuccess) return s;
    // Shares the runs of pages no region holds yet, and counts the regions the range spans: the
    // daemon registers a range of at most two that touch (daemon/objects.cc).
    int spans = 0;
    for (uint64_t at = lo; at < hi; ++spans) {
      if (const Region* r = holding(t, d, at)) {
        at = r->end();
        continue;
      }
      uint64_t next = hi;
      for (const Region& r : t.regions)
        if (current(r, d) && r.mem.handle != 0 && r.start() > at && r.start() < next)
          next = r.start();
      Region n;
      if (Status s = remote::share_in_place(reinterpret_cast<void*>(at), next - at, &n.mem);
          s != Status::kSuccess)
        return s;
      n.daemon_pid = d.pid;
      n.client_id = d.client_id;
      t.regions.push_back(n);
      at = next;
    }
    if (spans > 2)
      return fail_with(Status::kNotSupported,
                       "register_mr: the range spans " + std::to_string(spans) +
                           " pieces of memory shared at different times (at most 2); allocate "
                           "buffers with alloc_memory, or register whole allocations");
    return succeed();
  } catch (...) {
    return fail_with(Status::kInsufficientResources, "register_mr: out of memory");
  }
}

}  // namespace detail

Status alloc_memory(size_t length, void** out) noexcept {
  if (out == nullptr || length == 0 || length > (size_t{1} << 40))
    return detail::fail_with(Status::kInvalidParameter, "alloc_memory: bad length or null out");
  try {
    Region r;
    r.allocated = true;
    if (attached()) {
      DaemonInfo d;
      if (Status s = daemon_info(&d); s != Status::kSuccess) return s;
      if (Status s = remote::alloc_shared(length, &r.mem); s != Status::kSuccess) return s;
      r.daemon_pid = d.pid;
      r.client_id = d.client_id;
    } else {
      const size_t len = (length + kPage - 1) & ~(kPage - 1);
      void* p = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED)
        return detail::fail_with(Status::kInsufficientResources, "alloc_memory: mmap failed");
      r.mem = remote::SharedMemory{p, len, 0, 0};
    }
    Table& t = table();
    std::lock_guard lock(t.mu);
    t.regions.push_back(r);
    *out = r.mem.address;
    return detail::succeed();
  } catch (...) {
    return detail::fail_with(Status::kInsufficientResources, "alloc_memory: out of memory");
  }
}

Status free_memory(void* address) noexcept {
  Table& t = table();
  std::lock_guard lock(t.mu);
  auto it = std::find_if(t.regions.begin(), t.regions.end(),
                         [&](const Region& r) { return r.allocated && r.mem.address == address; });
  if (address == nullptr || it == t.regions.end())
    return detail::fail_with(Status::kInvalidParameter,
                             "free_memory: not an address alloc_memory returned");
  DaemonInfo d;
  const bool shared = it->mem.handle != 0 && daemon_info(&d) == Status::kSuccess && current(*it, d);
  if (shared) {
    // kDeviceBusy while an MR is registered in it: the memory stays.
    if (Status s = remote::free_shared(&it->mem); s != Status::kSuccess) return s;
  } else {
    ::munmap(it->mem.address, it->mem.length);
  }
  t.regions.erase(it);
  return detail::succeed();
}

}  // namespace urnic

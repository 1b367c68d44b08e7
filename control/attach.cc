// The client side of attach mode's objects and shared rings (attach.h).
#include "control/attach.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>

#include "control/last_error.h"
#include "urnic/daemon.h"

namespace urnic::remote {
namespace {

using detail::daemon_transact;

// Maps a memfd from the daemon; at `at` exactly (shared memory: the daemon's address), else
// wherever. nullptr on failure (the fd is closed either way). *ino: the memfd's inode.
void* map_fd(int fd, size_t len, void* at, uint64_t* ino = nullptr) {
  struct stat st {};
  if (ino != nullptr) *ino = ::fstat(fd, &st) == 0 ? st.st_ino : 0;
  const int flags = MAP_SHARED | (at != nullptr ? MAP_FIXED_NOREPLACE : 0);
  void* p = ::mmap(at, len, PROT_READ | PROT_WRITE, flags, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) return nullptr;
  if (at != nullptr && p != at) {  // a kernel without MAP_FIXED_NOREPLACE takes it as a hint
    ::munmap(p, len);
    return nullptr;
  }
  return p;
}

Status fail(Status s, const char* why) { return detail::fail_with(s, why); }

// The rings of a new CQ, QP or SRQ: its memfd `fd` (closed here) mapped, when the reply's
// geometry fits in `bytes` (`geometry_ok`). Else null, and the daemon's object `handle` is
// destroyed: posting and polling refuse an object without rings.
void* map_rings(int fd, uint64_t bytes, bool geometry_ok, uint32_t handle) {
  void* m = fd >= 0 ? map_fd(fd, bytes, nullptr) : nullptr;
  if (m != nullptr && geometry_ok) return m;
  if (m != nullptr) ::munmap(m, bytes);
  (void)destroy(handle);
  return nullptr;
}

}  // namespace

Status alloc_shared(size_t length, SharedMemory* out) noexcept {
  if (out == nullptr || length == 0)
    return fail(Status::kInvalidParameter, "alloc_shared: bad argument");
  // The daemon's address may be taken here: ask again (a new mapping, a new address).
  for (int attempt = 0; attempt < 8; ++attempt) {
    ipc::AllocSharedReq req{};
    req.length = length;
    ipc::AllocSharedRep rep{};
    int fd = -1;
    Status s = daemon_transact(ipc::MsgType::kAllocShared, &req, sizeof req, &rep, sizeof rep,
                               "alloc_shared", &fd);
    if (s != Status::kSuccess) return s;
    if (fd < 0) return fail(Status::kInternalError, "alloc_shared: the reply carried no memory");
    uint64_t ino = 0;
    void* p = map_fd(fd, rep.length, reinterpret_cast<void*>(rep.address), &ino);
    if (p != nullptr) {
      *out = SharedMemory{p, rep.length, rep.handle, ino};
      return Status::kSuccess;
    }
    (void)destroy(rep.handle);
  }
  return fail(Status::kInsufficientResources,
              "alloc_shared: the daemon's addresses are taken in this process");
}

Status free_shared(SharedMemory* m) noexcept {
  if (m == nullptr || m->handle == 0) return fail(Status::kInvalidParameter, "free_shared: none");
  const Status s = destroy(m->handle);
  if (s != Status::kSuccess) return s;
  ::munmap(m->address, m->length);
  *m = SharedMemory{};
  return s;
}

}  // namespace urnic::remote

namespace urnic::detail {

std::vector<Mapping> read_maps() {
  std::vector<Mapping> out;
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    unsigned long lo = 0, hi = 0, ino = 0;
    char perms[5] = {};
    if (std::sscanf(line.c_str(), "%lx-%lx %4s %*x %*s %lu", &lo, &hi, perms, &ino) != 4) continue;
    const size_t slash = line.find_first_of("/[");
    out.push_back(
        Mapping{lo, hi, ino, perms, slash == std::string::npos ? "" : line.substr(slash), line});
  }
  return out;
}

bool all_mapped(const std::vector<Mapping>& maps, uint64_t lo, uint64_t hi,
                const std::function<bool(const Mapping&)>& ok, const Mapping** bad) {
  *bad = nullptr;
  uint64_t covered = lo;
  for (const Mapping& m : maps) {
    if (covered >= hi) break;
    if (m.hi <= covered || m.lo >= hi) continue;
    if (m.lo > covered) return false;  // a hole
    if (!ok(m)) {
      *bad = &m;
      return false;
    }
    covered = m.hi;
  }
  return covered >= hi;
}

}  // namespace urnic::detail

namespace urnic::remote {
namespace {

// Whether every page of [start, end) is private anonymous memory of this process (what can be
// moved onto a memfd in place); else false with *why naming the mapping.
bool movable(uint64_t start, uint64_t end, std::string* why) {
  const std::vector<detail::Mapping> maps = detail::read_maps();  // *bad points into it
  const detail::Mapping* bad = nullptr;
  if (detail::all_mapped(
          maps, start, end,
          [](const detail::Mapping& m) {
            return m.perms == "rw-p" && (m.path.empty() || m.path == "[heap]");
          },
          &bad))
    return true;
  *why = bad == nullptr ? "an unmapped page" : "the mapping '" + bad->line + "'";
  return false;
}

// Copies whole pages of this process's memory. The pages around a heap buffer hold other
// allocations and, under AddressSanitizer, its redzones: moving them is no access by the program,
// so the sanitizer's checks (and its memcpy interceptor) are kept out of it.
#if defined(__SANITIZE_ADDRESS__)
__attribute__((no_sanitize("address"))) void copy_pages(void* dst, const void* src, size_t len) {
  auto* d = static_cast<uint64_t*>(dst);
  const auto* s = static_cast<const volatile uint64_t*>(src);  // volatile: no memcpy call made
  for (size_t i = 0; i < len / sizeof(uint64_t); ++i) d[i] = s[i];
}
#else
void copy_pages(void* dst, const void* src, size_t len) { std::memcpy(dst, src, len); }
#endif

}  // namespace

Status share_in_place(const void* address, size_t length, SharedMemory* out) noexcept {
  if (address == nullptr || length == 0 || out == nullptr)
    return fail(Status::kInvalidParameter, "share_in_place: bad argument");
  const auto a = reinterpret_cast<uint64_t>(address);
  const uint64_t start = a & ~uint64_t{4095};
  if (length > UINT64_MAX - a - 4095)
    return fail(Status::kInvalidParameter, "share_in_place: range");
  const uint64_t end = (a + length + 4095) & ~uint64_t{4095};
  const size_t len = end - start;
  std::string why;
  if (!movable(start, end, &why))
    return detail::fail_with(Status::kNotSupported,
                             "share_in_place: only private anonymous memory moves in place, not " +
                                 why + " (allocate buffers with alloc_shared)");
  const int fd = ::memfd_create("urnic-mr", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  void* tmp = MAP_FAILED;
  bool moved = false;
  if (fd >= 0 && ::ftruncate(fd, static_cast<off_t>(len)) == 0 &&
      ::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) == 0) {
    tmp = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (tmp != MAP_FAILED) {
      // Contents first, then the memfd over the same addresses: the pages change, not the data.
      copy_pages(tmp, reinterpret_cast<const void*>(start), len);
      moved = ::mmap(reinterpret_cast<void*>(start), len, PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_FIXED, fd, 0) == reinterpret_cast<void*>(start);
      ::munmap(tmp, len);
    }
  }
  if (!moved) {
    if (fd >= 0) ::close(fd);
    return fail(Status::kInsufficientResources, "share_in_place: cannot move the pages");
  }
  struct stat st {};
  const uint64_t ino = ::fstat(fd, &st) == 0 ? st.st_ino : 0;
  ipc::ShareMemoryReq req{};
  req.address = start;
  req.length = len;
  ipc::HandleRep rep{};
  const Status s = daemon_transact(ipc::MsgType::kShareMemory, &req, sizeof req, &rep, sizeof rep,
                                   "share_in_place", nullptr, fd);
  ::close(fd);  // the mapping keeps the memory; the daemon has its own descriptor
  if (s != Status::kSuccess) return s;
  *out = SharedMemory{reinterpret_cast<void*>(start), len, rep.handle, ino};
  return s;
}

Status destroy(uint32_t handle) noexcept {
  ipc::DestroyReq req{};
  req.handle = handle;
  ipc::ReplyHead rep{};
  return daemon_transact(ipc::MsgType::kDestroy, &req, sizeof req, &rep, sizeof rep, "destroy");
}

Status create_pd(uint32_t adapter, uint32_t* handle) noexcept {
  ipc::CreatePdReq req{};
  req.adapter = adapter;
  ipc::HandleRep rep{};
  const Status s =
      daemon_transact(ipc::MsgType::kCreatePd, &req, sizeof req, &rep, sizeof rep, "create_pd");
  if (s == Status::kSuccess) *handle = rep.handle;
  return s;
}

namespace {

// A request answered with RegisterMrRep (RegisterMr, CreateMw, InitFrmr): its handle and tokens.
template <class Req>
Status memory_request(ipc::MsgType type, Req& req, const char* what, uint32_t* handle,
                      uint32_t* lkey, uint32_t* rkey) noexcept {
  ipc::RegisterMrRep rep{};
  const Status s = daemon_transact(type, &req, sizeof req, &rep, sizeof rep, what);
  if (s != Status::kSuccess) return s;
  *handle = rep.handle;
  *lkey = rep.lkey;
  *rkey = rep.rkey;
  return s;
}

}  // namespace

Status register_mr(uint32_t pd, const void* address, size_t length, uint32_t flags,
                   uint32_t* handle, uint32_t* lkey, uint32_t* rkey) noexcept {
  ipc::RegisterMrReq req{};
  req.pd = pd;
  req.flags = flags;
  req.address = reinterpret_cast<uint64_t>(address);
  req.length = length;
  return memory_request(ipc::MsgType::kRegisterMr, req, "register_mr", handle, lkey, rkey);
}

Status create_mw(uint32_t pd, uint32_t* handle, uint32_t* token) noexcept {
  ipc::CreateMwReq req{};
  req.pd = pd;
  uint32_t lkey = 0;
  return memory_request(ipc::MsgType::kCreateMw, req, "create_mw", handle, &lkey, token);
}

Status init_frmr(uint32_t pd, uint32_t pages, bool remote_access, uint32_t* handle,
                 uint32_t* token) noexcept {
  ipc::InitFrmrReq req{};
  req.pd = pd;
  req.pages = pages;
  req.remote_access = remote_access ? 1 : 0;
  uint32_t lkey = 0;
  return memory_request(ipc::MsgType::kInitFrmr, req, "initialize_fast_register_mr", handle, &lkey,
                        token);
}

// ---- CQ ---------------------------------------------------------------------------------------

RemoteCq::~RemoteCq() { (void)destroy(); }

Status RemoteCq::create(uint32_t adapter, uint32_t depth, int event_fd) noexcept {
  ipc::CreateCqReq req{};
  req.adapter = adapter;
  req.depth = depth;
  ipc::CreateCqRep rep{};
  int fd = -1;
  Status s = daemon_transact(ipc::MsgType::kCreateCq, &req, sizeof req, &rep, sizeof rep,
                             "create_cq", &fd, event_fd);
  if (s != Status::kSuccess) return s;
  map_ = map_rings(fd, rep.map_bytes,
                   rep.map_bytes >= shm::ring_bytes(rep.capacity, sizeof(shm::CqSlot)), rep.handle);
  if (map_ == nullptr)
    return fail(Status::kInsufficientResources, "create_cq: cannot map its ring");
  handle_ = rep.handle;
  map_len_ = rep.map_bytes;
  ring_ = shm::ring_at(map_, 0, rep.capacity, sizeof(shm::CqSlot));
  cons_ = 0;
  return s;
}

// Result is NDK_RESULT, the leading fields of NDK_RESULT_EX (a slot): a prefix copy.
static_assert(offsetof(ResultEx, request_context) == offsetof(Result, request_context) &&
              sizeof(Result) <= sizeof(ResultEx));

template <class R>
size_t RemoteCq::take_old(std::span<R> out) noexcept {
  const shm::RingView& r = old_.ring;
  // Moved first (acquire), then the producer index: final once moved is seen.
  const bool moved = r.head->moved.load(std::memory_order_acquire) != 0;
  const uint32_t prod = r.head->prod.load(std::memory_order_acquire);
  size_t n = 0;
  for (; n < out.size() && old_.cons != prod; ++n, ++old_.cons)
    std::memcpy(&out[n], r.slot(old_.cons), sizeof(R));
  if (n != 0) r.head->cons.store(old_.cons, std::memory_order_release);
  if (moved && old_.cons == prod) old_.active = false;  // the new ring's turn
  return n;
}

template <class R>
size_t RemoteCq::take(std::span<R> out) noexcept {
  if (map_ == nullptr || out.data() == nullptr) return 0;
  if (old_.active) [[unlikely]] {
    const size_t n = take_old(out);
    if (old_.active || n == out.size()) return n;
    return n + take(out.subspan(n));
  }
  const uint32_t prod = ring_.head->prod.load(std::memory_order_acquire);  // pairs with daemon
  size_t n = 0;
  for (; n < out.size() && cons_ != prod; ++n, ++cons_)
    std::memcpy(&out[n], ring_.slot(cons_), sizeof(R));
  if (n != 0) ring_.head->cons.store(cons_, std::memory_order_release);  // the slots are free
  return n;
}
template size_t RemoteCq::take(std::span<ResultEx>) noexcept;
template size_t RemoteCq::take(std::span<Result>) noexcept;

bool RemoteCq::arm(uint32_t level) noexcept {
  if (map_ == nullptr || level == shm::kArmNone || level > shm::kArmAny) return false;
  std::atomic<uint32_t>& a = ring_.head->arm;
  uint32_t cur = a.load(std::memory_order_relaxed);
  while (cur < level && !a.compare_exchange_weak(cur, level, std::memory_order_relaxed)) {
  }
  // Dekker with the bridge's notify(): our arm stored, then its index read.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  uint32_t want = a.load(std::memory_order_relaxed);
  // A satisfying completion unconsumed in the ring (or the old one, after a resize).
  auto waiting = [&](const shm::RingView& ring, uint32_t from) {
    const uint32_t prod = ring.head->prod.load(std::memory_order_acquire);
    for (uint32_t i = from; i != prod && want != shm::kArmNone; ++i) {
      ResultEx r;
      std::memcpy(&r, ring.slot(i), sizeof r);
      while (want != shm::kArmNone && shm::satisfies(r, want))
        if (a.compare_exchange_weak(want, shm::kArmNone, std::memory_order_acq_rel,
                                    std::memory_order_relaxed))
          return true;
    }
    return false;
  };
  return (old_.active && waiting(old_.ring, old_.cons)) || waiting(ring_, cons_);
}

uint32_t RemoteCq::queued() const noexcept {
  uint32_t n = map_ != nullptr ? ring_.head->prod.load(std::memory_order_acquire) - cons_ : 0;
  if (old_.active) n += old_.ring.head->prod.load(std::memory_order_acquire) - old_.cons;
  return n;
}

Status RemoteCq::resize(uint32_t depth) noexcept {
  if (map_ == nullptr) return Status::kInvalidDeviceState;
  if (old_.active) return Status::kDeviceBusy;  // the previous resize's completions wait
  if (depth < queued()) return Status::kInvalidParameter;
  ipc::ResizeCqReq req{};
  req.cq = handle_;
  req.depth = depth;
  ipc::CreateCqRep rep{};
  int fd = -1;
  const Status s =
      daemon_transact(ipc::MsgType::kResizeCq, &req, sizeof req, &rep, sizeof rep, "resize", &fd);
  if (s != Status::kSuccess) return s;
  void* map =
      map_rings(fd, rep.map_bytes,
                rep.map_bytes >= shm::ring_bytes(rep.capacity, sizeof(shm::CqSlot)), handle_);
  if (map == nullptr) {
    // map_rings destroyed the daemon's CQ: it can no longer be read here.
    ::munmap(map_, map_len_);
    map_ = nullptr;
    handle_ = 0;
    return fail(Status::kInsufficientResources, "resize: cannot map the new ring");
  }
  if (old_.map != nullptr) ::munmap(old_.map, old_.len);  // drained (else kDeviceBusy above)
  old_ = Old{map_, map_len_, ring_, cons_, true};
  map_ = map;
  map_len_ = rep.map_bytes;
  ring_ = shm::ring_at(map_, 0, rep.capacity, sizeof(shm::CqSlot));
  cons_ = 0;
  return s;
}

uint32_t RemoteCq::disarm() noexcept {
  if (map_ == nullptr) return shm::kArmNone;
  return ring_.head->arm.exchange(shm::kArmNone, std::memory_order_acq_rel);
}

Status RemoteCq::destroy() noexcept {
  if (handle_ == 0) return Status::kSuccess;
  const Status s = remote::destroy(handle_);
  if (s == Status::kDeviceBusy) return s;
  if (map_ != nullptr) ::munmap(map_, map_len_);
  if (old_.map != nullptr) ::munmap(old_.map, old_.len);
  old_ = Old{};
  map_ = nullptr;
  handle_ = 0;
  return s;
}

// ---- QP ---------------------------------------------------------------------------------------

namespace {

// Each engine's doorbell, fetched once per process and daemon (its page mapped read-only, its
// eventfd kept): every QP of the engine rings the same one.
struct Door {
  uint32_t daemon_pid = 0;
  const shm::EngineDoorbell* page = nullptr;
  int wake_fd = -1;
};
std::mutex g_doors_mu;
Door g_doors[8];

Status doorbell(uint32_t engine, const shm::EngineDoorbell** page, int* wake_fd) {
  DaemonInfo info;
  if (engine >= 8 || daemon_info(&info) != Status::kSuccess)
    return fail(Status::kInvalidParameter, "doorbell: no such engine");
  std::lock_guard lock(g_doors_mu);
  Door& d = g_doors[engine];
  if (d.daemon_pid != info.pid || d.page == nullptr) {
    int fds[2] = {-1, -1};
    for (uint32_t what = 0; what < 2; ++what) {
      ipc::EngineDoorbellReq req{};
      req.engine = engine;
      req.what = what;
      ipc::HandleRep rep{};
      const Status s = daemon_transact(ipc::MsgType::kEngineDoorbell, &req, sizeof req, &rep,
                                       sizeof rep, "doorbell", &fds[what]);
      if (s != Status::kSuccess || fds[what] < 0) {
        if (fds[0] >= 0) ::close(fds[0]);
        return s != Status::kSuccess ? s : fail(Status::kInternalError, "doorbell: no descriptor");
      }
    }
    void* p = ::mmap(nullptr, 4096, PROT_READ, MAP_SHARED, fds[0], 0);
    ::close(fds[0]);
    if (p == MAP_FAILED) {
      ::close(fds[1]);
      return fail(Status::kInsufficientResources, "doorbell: cannot map its page");
    }
    d = Door{info.pid, static_cast<const shm::EngineDoorbell*>(p), fds[1]};
  }
  *page = d.page;
  *wake_fd = d.wake_fd;
  return Status::kSuccess;
}

}  // namespace

namespace {

// Rings the engine's doorbell after a publish, only while it sleeps. Pairs with the engine's
// fence between setting its sleeping flag and reading our index (Bridge::nap): one of the two
// sees the other's store.
void ring_doorbell(const shm::EngineDoorbell* door, int wake_fd) noexcept {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (door != nullptr && door->sleeping.load(std::memory_order_relaxed) != 0) {
    const uint64_t one = 1;
    (void)::write(wake_fd, &one, sizeof one);
  }
}

// Posts one receive slot into `r` (a QP's receive ring or an SRQ's) and publishes it.
Status post_receive(const shm::RingView& r, uint32_t* prod, uint32_t max_sge, void* ctx,
                    std::span<const Sge> sgl) noexcept {
  if ((sgl.data() == nullptr && !sgl.empty())) return Status::kInvalidParameter;
  if (sgl.size() > max_sge) return Status::kDataOverrun;
  const uint32_t cons = r.head->cons.load(std::memory_order_acquire);  // pairs with the daemon
  if (*prod - cons == r.capacity) return Status::kNoMoreEntries;
  auto* w = reinterpret_cast<shm::RecvSlot*>(r.slot(*prod));
  w->request_context = reinterpret_cast<uint64_t>(ctx);
  w->num_sge = static_cast<uint32_t>(sgl.size());
  w->reserved = 0;
  shm::copy_sges(&w->sge[0], sgl.data(), sgl.size());
  ++*prod;
  r.head->prod.store(*prod, std::memory_order_release);
  return Status::kSuccess;
}

}  // namespace

void RemoteQp::ring() noexcept { ring_doorbell(door_, wake_fd_); }

Status RemoteQp::post_sync(void* ctx, const SyncRequest& q, uint32_t* token) noexcept {
  if (map_ == nullptr) return Status::kInvalidDeviceState;
  if (sq_.head->failed.load(std::memory_order_acquire) != 0) return Status::kConnectionInvalid;
  if (q.pages.size() > shm::kAttachFrmrPages || (!q.pages.empty() && page_area_ == nullptr))
    return Status::kImplementationLimit;
  if (sq_prod_ - sq_cons_ == sq_.capacity) {
    sq_cons_ = sq_.head->cons.load(std::memory_order_acquire);
    if (sq_prod_ - sq_cons_ == sq_.capacity) {
      sq_.head->prod.store(sq_prod_, std::memory_order_release);  // the deferred, as post does
      ring();
      return Status::kNoMoreEntries;
    }
  }
  // The area is free: the previous synchronous slot was taken (we waited for it).
  if (!q.pages.empty()) std::memcpy(page_area_, q.pages.data(), q.pages.size_bytes());
  auto* w = reinterpret_cast<shm::SendSlot*>(sq_.slot(sq_prod_));
  *w = shm::SendSlot{};
  w->request_context = reinterpret_cast<uint64_t>(ctx);
  w->op = static_cast<uint8_t>(q.op);
  w->flags = q.flags;
  w->length = static_cast<uint32_t>(q.pages.size());
  w->rkey = q.rkey;
  w->remote_addr = q.remote_addr;
  w->imm = q.imm;
  w->compare_add = q.length;
  const uint32_t want = ++sq_prod_;
  sq_.head->prod.store(sq_prod_, std::memory_order_release);  // with any deferred before it
  ring();
  // The bridge takes it at its next step (microseconds while the engine polls). The deadline
  // covers a daemon that stopped without closing our socket; a closed one is seen sooner.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (uint32_t spins = 0;; ++spins) {
    sq_cons_ = sq_.head->cons.load(std::memory_order_acquire);  // pairs with the bridge
    if (static_cast<int32_t>(sq_cons_ - want) >= 0) break;
    if (sq_.head->failed.load(std::memory_order_acquire) != 0) return Status::kConnectionInvalid;
    if (spins < 1024) continue;
    std::this_thread::yield();
    if ((spins & 1023) == 0 &&
        (!urnic::daemon_alive() || std::chrono::steady_clock::now() > deadline))
      return Status::kIoTimeout;
  }
  const uint64_t r = w->swap;  // written before the consumer index (release) passed the slot
  *token = shm::sync_token(r);
  return shm::sync_status(r);
}

// ---- SRQ --------------------------------------------------------------------------------------

RemoteSrq::~RemoteSrq() { (void)destroy(); }

Status RemoteSrq::create(uint32_t pd, uint32_t depth, uint32_t max_sge, uint32_t engine) noexcept {
  ipc::CreateSrqReq req{};
  req.pd = pd;
  req.depth = depth;
  req.max_sge = max_sge;
  req.engine = engine;
  ipc::CreateSrqRep rep{};
  int fd = -1;
  Status s = daemon_transact(ipc::MsgType::kCreateSrq, &req, sizeof req, &rep, sizeof rep,
                             "create_srq", &fd);
  if (s != Status::kSuccess) return s;
  map_ = map_rings(fd, rep.map_bytes,
                   shm::ring_bytes(rep.capacity, rep.stride) <= rep.map_bytes &&
                       rep.stride >= shm::recv_stride(max_sge),
                   rep.handle);
  if (map_ == nullptr)
    return fail(Status::kInsufficientResources, "create_srq: cannot map its ring");
  handle_ = rep.handle;
  map_len_ = rep.map_bytes;
  ring_ = shm::ring_at(map_, 0, rep.capacity, rep.stride);
  max_sge_ = max_sge;
  if (doorbell(rep.engine, &door_, &wake_fd_) != Status::kSuccess) door_ = nullptr;
  return detail::succeed();
}

Status RemoteSrq::receive(void* ctx, std::span<const Sge> sgl) noexcept {
  if (map_ == nullptr) return Status::kInvalidDeviceState;
  const Status s = post_receive(ring_, &prod_, max_sge_, ctx, sgl);
  if (s == Status::kSuccess) ring_doorbell(door_, wake_fd_);
  return s;
}

Status RemoteSrq::destroy() noexcept {
  if (handle_ == 0) return Status::kSuccess;
  const Status s = remote::destroy(handle_);
  if (s == Status::kDeviceBusy) return s;  // QPs still use it
  ::munmap(map_, map_len_);
  map_ = nullptr;
  handle_ = 0;
  return s;
}

RemoteQp::~RemoteQp() { (void)destroy(); }

Status RemoteQp::create(uint32_t pd, const RemoteCq& send_cq, const RemoteCq& recv_cq,
                        uint32_t sq_depth, uint32_t rq_depth, uint32_t max_send_sge,
                        uint32_t max_recv_sge, uint32_t max_inline, void* qp_context, uint32_t srq,
                        const uint32_t* qkey) noexcept {
  ipc::CreateDatagramQpReq dreq{};
  ipc::CreateQpReq& req = dreq.qp;
  req.pd = pd;
  req.send_cq = send_cq.handle();
  req.recv_cq = recv_cq.handle();
  req.sq_depth = sq_depth;
  req.rq_depth = rq_depth;
  req.max_send_sge = max_send_sge;
  req.max_recv_sge = max_recv_sge;
  req.max_inline = max_inline;
  req.qp_context = reinterpret_cast<uint64_t>(qp_context);
  req.srq = srq;
  ipc::CreateQpRep rep{};
  int fd = -1;
  if (qkey != nullptr) dreq.qkey = *qkey;
  Status s = qkey != nullptr ? daemon_transact(ipc::MsgType::kCreateDatagramQp, &dreq, sizeof dreq,
                                               &rep, sizeof rep, "create_datagram_qp", &fd)
                             : daemon_transact(ipc::MsgType::kCreateQp, &req, sizeof req, &rep,
                                               sizeof rep, "create_qp", &fd);
  if (s != Status::kSuccess) return s;
  map_ =
      map_rings(fd, rep.map_bytes,
                rep.rq_offset + shm::ring_bytes(rep.rq_capacity, rep.rq_stride) <= rep.map_bytes &&
                    shm::ring_bytes(rep.sq_capacity, rep.sq_stride) <= rep.rq_offset,
                rep.handle);
  if (map_ == nullptr)
    return fail(Status::kInsufficientResources, "create_qp: cannot map its rings");
  handle_ = rep.handle;
  qpn_ = rep.qpn;
  map_len_ = rep.map_bytes;
  sq_ = shm::ring_at(map_, 0, rep.sq_capacity, rep.sq_stride);
  rq_ = shm::ring_at(map_, rep.rq_offset, rep.rq_capacity, rep.rq_stride);
  const size_t pages_at =
      shm::page_list_offset(rep.rq_offset, shm::ring_bytes(rep.rq_capacity, rep.rq_stride));
  if (qkey == nullptr && rep.map_bytes >= pages_at + shm::kPageListBytes)
    page_area_ = reinterpret_cast<uint64_t*>(static_cast<uint8_t*>(map_) + pages_at);
  max_send_sge_ = max_send_sge;
  max_recv_sge_ = max_recv_sge;
  max_inline_ = max_inline;
  engine_ = rep.engine;
  max_datagram_ = rep.max_datagram;
  // Without a doorbell the engine still finds the work after its nap (at most idle_sleep_us).
  if (doorbell(rep.engine, &door_, &wake_fd_) != Status::kSuccess) door_ = nullptr;
  return detail::succeed();
}

Status create_ah(uint32_t adapter, const AddressVector& av, uint32_t* handle) noexcept {
  ipc::CreateAhReq req{};
  req.adapter = adapter;
  req.ipv6 = av.ipv6 ? 1 : 0;
  req.traffic_class = av.traffic_class;
  req.hop_limit = av.hop_limit;
  req.dst_ipv4 = av.dst_ipv4;
  std::memcpy(req.dst_ipv6, av.dst_ipv6.data(), 16);
  std::memcpy(req.dst_mac, av.dst_mac.data(), 6);
  req.flow_label = av.flow_label;
  req.sgid_index = av.sgid_index;
  ipc::HandleRep rep{};
  const Status s = daemon_transact(ipc::MsgType::kCreateAh, &req, sizeof req, &rep, sizeof rep,
                                   "create_address_handle");
  *handle = rep.handle;
  return s;
}

Status RemoteQp::modify(const QpAttributes& a, uint32_t mask) noexcept {
  ipc::ModifyQpReq req{};
  req.qp = handle_;
  req.mask = mask;
  req.qkey = a.qkey;
  ipc::WireQpAttr& w = req.attr;
  w.state = static_cast<uint8_t>(a.state);
  w.max_dest_rd_atomic = a.max_dest_rd_atomic;
  w.max_rd_atomic = a.max_rd_atomic;
  w.timeout = a.timeout;
  w.retry_cnt = a.retry_cnt;
  w.rnr_retry = a.rnr_retry;
  w.min_rnr_timer = a.min_rnr_timer;
  w.selective_repeat = a.selective_repeat ? 1 : 0;
  w.access = a.access;
  w.path_mtu = a.path_mtu;
  w.dest_qpn = a.dest_qpn;
  w.rq_psn = a.rq_psn;
  w.sq_psn = a.sq_psn;
  w.av_ipv6 = a.av.ipv6 ? 1 : 0;
  w.traffic_class = a.av.traffic_class;
  w.hop_limit = a.av.hop_limit;
  w.dst_ipv4 = a.av.dst_ipv4;
  std::memcpy(w.dst_ipv6, a.av.dst_ipv6.data(), 16);
  std::memcpy(w.dst_mac, a.av.dst_mac.data(), 6);
  w.flow_label = a.av.flow_label;
  w.sgid_index = a.av.sgid_index;
  ipc::ReplyHead rep{};
  return daemon_transact(ipc::MsgType::kModifyQp, &req, sizeof req, &rep, sizeof rep, "modify_qp");
}

Status RemoteQp::destroy() noexcept {
  if (handle_ == 0) return Status::kSuccess;
  const Status s = remote::destroy(handle_);
  ::munmap(map_, map_len_);
  map_ = nullptr;
  handle_ = 0;
  return s;
}

Status RemoteQp::post(shm::SendOp op, void* ctx, std::span<const Sge> sgl, uint64_t remote_address,
                      uint32_t rkey, uint32_t flags, uint32_t imm, uint64_t compare_add,
                      uint64_t swap) noexcept {
  if (map_ == nullptr) return Status::kInvalidDeviceState;
  if (sgl.data() == nullptr && !sgl.empty()) return Status::kInvalidParameter;
  const bool inl = (flags & op_flag::kInline) != 0;
  uint64_t total = 0;  // inline bytes
  if (inl) {
    for (const Sge& s : sgl) total += s.length;
    if (total > max_inline_) return Status::kDataOverrun;
  } else if (sgl.size() > max_send_sge_) {
    return Status::kDataOverrun;
  }
  if (sq_prod_ - sq_cons_ == sq_.capacity) {
    sq_cons_ = sq_.head->cons.load(std::memory_order_acquire);  // pairs with the daemon
    if (sq_prod_ - sq_cons_ == sq_.capacity) {
      sq_.head->prod.store(sq_prod_, std::memory_order_release);  // NDK: hand over the deferred
      ring();
      return Status::kNoMoreEntries;
    }
  }
  auto* w = reinterpret_cast<shm::SendSlot*>(sq_.slot(sq_prod_));
  w->request_context = reinterpret_cast<uint64_t>(ctx);
  w->op = static_cast<uint8_t>(op);
  w->reserved = 0;
  w->flags = flags;
  w->rkey = rkey;
  w->remote_addr = remote_address;
  w->imm = imm;
  w->reserved2 = 0;
  w->compare_add = compare_add;
  w->swap = swap;
  if (inl) {
    // Inline bytes are copied now, into the slot: the buffer is the caller's again at return.
    auto* dst = reinterpret_cast<uint8_t*>(&w->sge[0]);
    for (const Sge& s : sgl) {
      std::memcpy(dst, reinterpret_cast<const void*>(s.addr), s.length);
      dst += s.length;
    }
    w->num_sge = 0;
    w->length = static_cast<uint32_t>(total);
  } else {
    shm::copy_sges(&w->sge[0], sgl.data(), sgl.size());  // a zero-length one may be null
    w->num_sge = static_cast<uint8_t>(sgl.size());
    w->length = 0;
  }
  ++sq_prod_;
  if ((flags & op_flag::kDefer) == 0) {
    sq_.head->prod.store(sq_prod_, std::memory_order_release);
    ring();
  }
  return Status::kSuccess;
}

Status RemoteQp::send(void* ctx, std::span<const Sge> sgl, uint32_t flags) noexcept {
  return post(shm::SendOp::kSend, ctx, sgl, 0, 0, flags);
}
Status RemoteQp::write(void* ctx, std::span<const Sge> sgl, uint64_t remote_address, uint32_t rkey,
                       uint32_t flags) noexcept {
  return post(shm::SendOp::kWrite, ctx, sgl, remote_address, rkey, flags);
}
Status RemoteQp::read(void* ctx, std::span<const Sge> sgl, uint64_t remote_address, uint32_t rkey,
                      uint32_t flags) noexcept {
  return post(shm::SendOp::kRead, ctx, sgl, remote_address, rkey, flags);
}

Status RemoteQp::receive(void* ctx, std::span<const Sge> sgl) noexcept {
  if (map_ == nullptr) return Status::kInvalidDeviceState;
  const Status s = post_receive(rq_, &rq_prod_, max_recv_sge_, ctx, sgl);
  if (s == Status::kSuccess) ring();
  return s;
}

}  // namespace urnic::remote

// The client side of attach mode's objects and shared rings (docs/daemon.md "Objects and shared
// rings"): what urnic's public objects in attach mode are built on. Internal: the public API's
// Adapter / Pd / Cq / Qp / Mr route to these once an adapter is opened from a daemon (the next
// stage); until then the daemon tests (tests/daemon/) drive this stage directly.
//
// Posting and polling are plain memory operations on the shared rings, as in embedded mode: no
// lock, no allocation, no syscall (the deferred doorbell is the ring's producer index, published
// by the first post without op_flag::kDefer). Object calls are one request to the daemon each.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "daemon/protocol.h"
#include "daemon/shm.h"
#include "urnic/extensions.h"
#include "urnic/status.h"
#include "urnic/types.h"

namespace urnic::detail {

// One request to the attached daemon and its reply (control/daemon_client.cc); *fd gets the
// descriptor the reply carries, if `fd` is not null.
Status daemon_transact(ipc::MsgType type, void* req, size_t req_size, void* rep, size_t rep_size,
                       const char* what, int* fd = nullptr, int send_fd = -1) noexcept;

// One line of /proc/self/maps.
struct Mapping {
  uint64_t lo = 0, hi = 0, ino = 0;
  std::string perms, path, line;  // path: "" for anonymous memory, else a file or [heap], ...
};
std::vector<Mapping> read_maps();
// Whether every page of [lo, hi) lies in `maps` (in address order, as the kernel lists them)
// in mappings `ok` accepts; else false, with *bad the first that `ok` refused (null: a page that
// is not mapped).
bool all_mapped(const std::vector<Mapping>& maps, uint64_t lo, uint64_t hi,
                const std::function<bool(const Mapping&)>& ok, const Mapping** bad);

// Attach mode's Mr::register_mr: shares the pages of [address, + length) with the daemon (in
// place, those not shared yet: control/shared_memory.cc). kSuccess, or why not (last_error()).
Status ensure_shared(const void* address, size_t length) noexcept;

}  // namespace urnic::detail

namespace urnic::remote {

// Memory shared with the daemon, at the same address in both processes, so that what is
// registered in it is reachable by the engine without a copy.
struct SharedMemory {
  void* address = nullptr;
  size_t length = 0;
  uint32_t handle = 0;
  uint64_t ino = 0;  // the memfd's inode: how /proc/self/maps shows the pages are still its
};
Status alloc_shared(size_t length, SharedMemory* out) noexcept;
// Unmaps it here and asks the daemon to free it (kDeviceBusy while MRs are registered in it).
Status free_shared(SharedMemory* m) noexcept;

// Application memory (malloc'd, anonymous: a verbs program's buffers) shared with the daemon in
// place: the whole pages of [address, address + length) are moved onto a memfd mapped at the
// same addresses, their contents kept (as FreeFlow does for containers), and the daemon maps the
// memfd at those addresses too, so that MRs registered in it need no copy. Other threads must
// not write the range while it moves. The pages stay shared afterwards (a fork shares them
// instead of copying them, as with any RNIC's registered memory). kNotSupported, with the
// mapping named, for pages that are not private anonymous memory (a file, shared memory, the
// stack); kInvalidAddress when the daemon has something of its own at those addresses.
// `out->handle` names the daemon's side; destroy() it to release that (this process's pages
// stay where they are).
Status share_in_place(const void* address, size_t length, SharedMemory* out) noexcept;

// Any object by its handle (the daemon refuses with kDeviceBusy what others still use).
Status destroy(uint32_t handle) noexcept;
// A PD on the daemon's adapter `adapter` (its index in daemon_adapters()).
Status create_pd(uint32_t adapter, uint32_t* handle) noexcept;
// An address handle on the daemon's adapter `adapter` for `av` (the daemon resolves the MAC
// unless given, and keeps the handle): *handle names it in send slots.
Status create_ah(uint32_t adapter, const AddressVector& av, uint32_t* handle) noexcept;
// Registers [address, address + length), inside this process's shared memory, with mr_flag
// rights: the keys are the daemon adapter's.
// A memory window on `pd` (unbound): *token its first token.
Status create_mw(uint32_t pd, uint32_t* handle, uint32_t* token) noexcept;
// A fast-register MR on `pd`, initialised for `pages` pages: *token its first token.
Status init_frmr(uint32_t pd, uint32_t pages, bool remote_access, uint32_t* handle,
                 uint32_t* token) noexcept;
Status register_mr(uint32_t pd, const void* address, size_t length, uint32_t flags,
                   uint32_t* handle, uint32_t* lkey, uint32_t* rkey) noexcept;

class RemoteCq {
 public:
  RemoteCq() = default;
  ~RemoteCq();
  RemoteCq(const RemoteCq&) = delete;
  RemoteCq& operator=(const RemoteCq&) = delete;

  // `event_fd` (an eventfd of the caller's, which keeps it; -1: none) is passed to the daemon,
  // whose bridge writes it when an arm is satisfied.
  Status create(uint32_t adapter, uint32_t depth, int event_fd = -1) noexcept;
  // NdkArmCq (shm::RingHeader::arm, shm::kArm* levels, merged by max). Returns true when a
  // completion that satisfies it already waits unconsumed in the ring and this call took the arm
  // back: the caller fires it (the bridge will not). Never a syscall.
  bool arm(uint32_t level) noexcept;
  // Takes the arm back unfired; the level it had (kArmNone: none, or it fired already).
  uint32_t disarm() noexcept;
  // Completions into `out`, oldest first; how many (Result: the first fields of each). After a
  // resize, the old ring's first.
  size_t poll(std::span<ResultEx> out) noexcept { return take(out); }
  size_t poll(std::span<Result> out) noexcept { return take(out); }
  uint32_t handle() const noexcept { return handle_; }
  // Cq::resize (ResizeCq): the daemon moves the CQ to a new ring of at least `depth` slots; the
  // old one stays mapped until poll has taken its last completion. kDeviceBusy while the
  // previous resize's old ring still holds completions; kInvalidParameter for a depth below
  // what waits in the rings. Serialised with poll and arm by the consumer.
  Status resize(uint32_t depth) noexcept;
  // Completions waiting in the rings (published, not yet taken).
  uint32_t queued() const noexcept;
  Status destroy() noexcept;
  // For the tests of the daemon's checks: the raw ring.
  const shm::RingView& ring() const noexcept { return ring_; }

 private:
  template <class R>
  size_t take(std::span<R> out) noexcept;

  // The old ring's completions, after a resize; true when it was empty (and is unmapped).
  template <class R>
  size_t take_old(std::span<R> out) noexcept;

  uint32_t handle_ = 0;
  void* map_ = nullptr;
  size_t map_len_ = 0;
  shm::RingView ring_;
  uint32_t cons_ = 0;
  // The ring before the last resize, until its last completion is taken; a drained one is
  // unmapped by the next resize or destroy (poll makes no syscall).
  struct Old {
    void* map = nullptr;
    size_t len = 0;
    shm::RingView ring;
    uint32_t cons = 0;
    bool active = false;
  } old_;
};

class RemoteSrq {
 public:
  RemoteSrq() = default;
  ~RemoteSrq();
  RemoteSrq(const RemoteSrq&) = delete;
  RemoteSrq& operator=(const RemoteSrq&) = delete;

  // On the daemon adapter's engine `engine` (that of the CQs of the QPs that will use it).
  Status create(uint32_t pd, uint32_t depth, uint32_t max_sge, uint32_t engine) noexcept;
  // Posting, as Srq::receive (kNoMoreEntries when the ring is full).
  Status receive(void* ctx, std::span<const Sge> sgl) noexcept;
  uint32_t handle() const noexcept { return handle_; }
  Status destroy() noexcept;
  // For the tests of the daemon's checks: the raw ring.
  const shm::RingView& ring() const noexcept { return ring_; }

 private:
  uint32_t handle_ = 0;
  void* map_ = nullptr;
  size_t map_len_ = 0;
  shm::RingView ring_;
  uint32_t prod_ = 0, max_sge_ = 0;
  const shm::EngineDoorbell* door_ = nullptr;
  int wake_fd_ = -1;
};

class RemoteQp {
 public:
  RemoteQp() = default;
  ~RemoteQp();
  RemoteQp(const RemoteQp&) = delete;
  RemoteQp& operator=(const RemoteQp&) = delete;

  // An RC QP in INIT, completing into `send_cq` and `recv_cq` (of the PD's adapter).
  // With `srq` (its handle; 0: none) the QP takes its receives from it (rq_depth and
  // max_recv_sge are then 1: its own receive ring stays unused).
  // With `qkey` (not null) a datagram (UD) QP with that Q_Key (no SRQ then).
  Status create(uint32_t pd, const RemoteCq& send_cq, const RemoteCq& recv_cq, uint32_t sq_depth,
                uint32_t rq_depth, uint32_t max_send_sge, uint32_t max_recv_sge,
                uint32_t max_inline, void* qp_context, uint32_t srq = 0,
                const uint32_t* qkey = nullptr) noexcept;
  // A datagram QP's largest payload (the daemon's port's path MTU); 0 for RC.
  uint32_t max_datagram() const noexcept { return max_datagram_; }
  // The engine its CQs (and so it) run on.
  uint32_t engine() const noexcept { return engine_; }
  // QpConnectExtension::modify, synchronously (kCongestion is not offered in attach mode).
  Status modify(const QpAttributes& a, uint32_t mask) noexcept;
  uint32_t qpn() const noexcept { return qpn_; }
  uint32_t handle() const noexcept { return handle_; }
  Status destroy() noexcept;

  // Posting, as Qp's (kNoMoreEntries when the ring is full; kInvalidParameter, kDataOverrun or
  // kInvalidBufferSize for what the daemon would refuse anyway).
  Status send(void* ctx, std::span<const Sge> sgl, uint32_t flags) noexcept;
  Status write(void* ctx, std::span<const Sge> sgl, uint64_t remote_address, uint32_t rkey,
               uint32_t flags) noexcept;
  Status read(void* ctx, std::span<const Sge> sgl, uint64_t remote_address, uint32_t rkey,
              uint32_t flags) noexcept;
  Status receive(void* ctx, std::span<const Sge> sgl) noexcept;

  // Any of them by its operation; `imm` for kSendImm / kWriteImm, `compare_add` and `swap` for
  // the atomics.
  Status post(shm::SendOp op, void* ctx, std::span<const Sge> sgl, uint64_t remote_address,
              uint32_t rkey, uint32_t flags, uint32_t imm = 0, uint64_t compare_add = 0,
              uint64_t swap = 0) noexcept;

  // kBind and kFastRegister (shm::SendOp): posted, then waited for until the daemon's bridge has
  // posted them on the daemon's QP (a memory wait, with a deadline; the engine is woken as for
  // any post). Returns the request's own status as the daemon's post gave it, with *token its
  // new token; kConnectionInvalid when the daemon took the QP out of service, kIoTimeout when
  // no answer came in time. `pages` (kFastRegister) go through the QP's page list area.
  struct SyncRequest {
    shm::SendOp op;
    uint32_t flags, rkey, imm;
    uint64_t remote_addr, length;
    std::span<const uint64_t> pages;
  };
  Status post_sync(void* ctx, const SyncRequest& q, uint32_t* token) noexcept;
  // Whether the daemon's QP has the page list area (a daemon of protocol 1.7 or later).
  bool fast_register_ok() const noexcept { return page_area_ != nullptr; }

  // For the tests of the daemon's checks: the raw rings, written as a hostile client would.
  const shm::RingView& send_ring() const noexcept { return sq_; }
  const shm::RingView& recv_ring() const noexcept { return rq_; }

 private:
  uint32_t handle_ = 0, qpn_ = 0, engine_ = 0, max_datagram_ = 0;
  void* map_ = nullptr;
  size_t map_len_ = 0;
  shm::RingView sq_, rq_;
  uint64_t* page_area_ = nullptr;       // in the mapping, after the rings (RC, daemon >= 1.7)
  uint32_t sq_prod_ = 0, rq_prod_ = 0;  // ours (sq_prod_ includes deferred posts)
  // The daemon's consumer index as last read: the ring's shared line is read again only when
  // this says it is full (as DPDK's rings cache the other side's index).
  uint32_t sq_cons_ = 0;
  // The engine's doorbell: rung after publishing only while the engine sleeps.
  const shm::EngineDoorbell* door_ = nullptr;
  int wake_fd_ = -1;
  void ring() noexcept;
  uint32_t max_send_sge_ = 0, max_recv_sge_ = 0, max_inline_ = 0;
};

}  // namespace urnic::remote
